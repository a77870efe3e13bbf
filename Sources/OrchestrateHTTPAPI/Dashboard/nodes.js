// Nodes: the machines (`serve` processes) sharing the store, from /api/nodes, each with the
// runs it is executing now (from the running runs' `node`).
import { api, watchChanges } from './api.js';
import { h, fill, runLink, throttle, flash, time, badge } from './dom.js';

export function mount(container) {
  const body = h('div', {}, h('p', { className: 'muted' }, 'Loading…'));
  fill(container, h('h1', {}, 'Nodes'), body);

  async function refresh() {
    try {
      const [answer, running] = await Promise.all([
        api('/api/nodes'),
        api('/api/runs?status=running&status=compensating&limit=1000'),
      ]);
      draw(answer.this_node, answer.nodes, running.runs);
    } catch (error) { flash(error.message); }
  }
  function draw(thisNode, nodes, runs) {
    fill(body,
      nodes.length === 0 ? h('p', { className: 'muted' }, 'No node has started a worker or holds a run.') :
        h('div', { className: 'table-wrap' }, h('table', {},
          h('thead', {}, h('tr', {}, ['Node', 'State', 'Runs held', 'Lease until', 'Workers', 'Running runs']
            .map((t) => h('th', {}, t)))),
          h('tbody', {}, nodes.map((n) => h('tr', {},
            h('td', {}, n.name, n.name === thisNode ? h('span', { className: 'muted' }, ' (this server)') : null),
            h('td', {}, badge(n.live ? 'live' : 'gone')),
            h('td', {}, String(n.runs_held)),
            h('td', {}, n.lease_until ? time(n.lease_until) : '—'),
            h('td', {}, n.workers.map((w) => h('div', {},
              'pid ' + w.pid + ' · ' + (w.queues || []).join(', ') + (w.live ? '' : ' (gone)')))),
            h('td', { className: 'labels' },
              runs.filter((run) => run.node === n.name).map((run) => [runLink(run.id), ' ']))))))));
  }
  refresh();
  return watchChanges(throttle(refresh, 2000));
}
