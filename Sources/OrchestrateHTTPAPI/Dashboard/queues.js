// Queues: runs per queue and status, and the store-wide switch (`queue stop|start`).
import { api, watchChanges } from './api.js';
import { h, fill, badge, link, throttle, flash } from './dom.js';

export function mount(container) {
  const body = h('div', {}, h('p', { className: 'muted' }, 'Loading…'));
  fill(container, h('h1', {}, 'Queues'), body);

  async function refresh() {
    try { draw(await api('/api/queues')); } catch (error) { flash(error.message); }
  }
  async function toggle(action) {
    try { await api('/api/queues/' + action, { method: 'POST' }); refresh(); } catch (error) { flash(error.message); }
  }
  function draw({ passive, queues }) {
    const statuses = [...new Set(queues.flatMap((q) => Object.keys(q.runs)))].sort();
    fill(body,
      h('p', { className: 'switch' }, passive ? 'The queue is stopped: no run starts, running ones are interrupted, on every serve. '
                                               : 'The queue is running. ',
        h('button', { type: 'button', className: passive ? '' : 'danger', dataset: { action: passive ? 'start' : 'stop' },
                      onclick: () => toggle(passive ? 'start' : 'stop') }, passive ? 'Start the queue' : 'Stop the queue')),
      queues.length === 0 ? h('p', { className: 'muted' }, 'No runs yet.') :
        h('div', { className: 'table-wrap' }, h('table', {},
          h('thead', {}, h('tr', {}, h('th', {}, 'Queue'), statuses.map((s) => h('th', {}, badge(s))))),
          h('tbody', {}, queues.map((q) => h('tr', {},
            h('td', {}, link('runs?queue=' + encodeURIComponent(q.name), q.name)),
            statuses.map((s) => h('td', { className: 'number' }, String(q.runs[s] || 0)))))))));
  }
  refresh();
  return watchChanges(throttle(refresh, 1000));
}
