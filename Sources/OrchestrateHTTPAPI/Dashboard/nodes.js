// Nodes: the machines (`serve` processes) sharing the store. From /api/nodes when the server
// has it; otherwise derived from the runs, as the nodes that own a running run.
import { api, watchChanges } from './api.js';
import { h, fill, runLink, throttle, flash } from './dom.js';

export function mount(container) {
  const body = h('div', {}, h('p', { className: 'muted' }, 'Loading…'));
  fill(container, h('h1', {}, 'Nodes'), body);

  async function refresh() {
    try {
      let nodes;
      let derived = false;
      try {
        nodes = (await api('/api/nodes')).nodes;
      } catch (error) {
        if (error.status !== 404) throw error;
        derived = true;
        nodes = fromRuns((await api('/api/runs?status=running&status=compensating&limit=1000')).runs);
      }
      draw(nodes, derived);
    } catch (error) { flash(error.message); }
  }
  function draw(nodes, derived) {
    fill(body,
      derived ? h('p', { className: 'muted' }, 'Nodes that own a running run (this server has no /api/nodes).') : null,
      nodes.length === 0 ? h('p', { className: 'muted' }, 'No node is running anything.') :
        h('div', { className: 'table-wrap' }, h('table', {},
          h('thead', {}, h('tr', {}, ['Node', 'Details', 'Running runs'].map((t) => h('th', {}, t)))),
          h('tbody', {}, nodes.map((n) => h('tr', {},
            h('td', {}, n.name || n.node || n.id || '?'),
            h('td', {}, Object.entries(n).filter(([k, v]) => !['name', 'node', 'id', 'runs'].includes(k) && typeof v !== 'object')
              .map(([k, v]) => h('span', { className: 'label' }, k + '=' + v))),
            h('td', { className: 'labels' }, (n.runs || []).map((id) => [runLink(id), ' ']))))))));
  }
  refresh();
  return watchChanges(throttle(refresh, 2000));
}

function fromRuns(runs) {
  const nodes = new Map();
  for (const run of runs) {
    if (!run.node) continue;
    if (!nodes.has(run.node)) nodes.set(run.node, { name: run.node, runs: [] });
    nodes.get(run.node).runs.push(run.id);
  }
  return [...nodes.values()].sort((a, b) => a.name.localeCompare(b.name));
}
