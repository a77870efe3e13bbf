// Queues: runs per queue and status, the store-wide switch (`queue stop|start`) and each named
// queue's own (`queue stop|start --queue NAME`).
import { api, watchChanges } from './api.js';
import { h, fill, badge, link, throttle, flash } from './dom.js';

export function mount(container) {
  const body = h('div', {}, h('p', { className: 'muted' }, 'Loading…'));
  fill(container, h('h1', {}, 'Queues'), body);

  async function refresh() {
    try { draw(await api('/api/queues')); } catch (error) { flash(error.message); }
  }
  async function post(path) {
    try { await api(path, { method: 'POST' }); refresh(); } catch (error) { flash(error.message); }
  }
  // A named queue's own Stop/Start button.
  function queueSwitch(q) {
    const action = q.passive ? 'start' : 'stop';
    return h('button', { type: 'button', className: q.passive ? '' : 'danger', dataset: { action, queue: q.name },
                         onclick: () => post('/api/queues/' + encodeURIComponent(q.name) + '/' + action) },
             q.passive ? 'Start' : 'Stop');
  }
  function draw({ passive, queues }) {
    const statuses = [...new Set(queues.flatMap((q) => Object.keys(q.runs)))].sort();
    fill(body,
      h('p', { className: 'switch' }, passive ? 'Every queue is stopped: no run starts, running ones are interrupted, on every serve. '
                                               : 'The queues are running on every serve (each can be stopped on its own below). ',
        h('button', { type: 'button', className: passive ? '' : 'danger', dataset: { action: passive ? 'start' : 'stop' },
                      onclick: () => post('/api/queues/' + (passive ? 'start' : 'stop')) }, passive ? 'Start the queue' : 'Stop the queue')),
      queues.length === 0 ? h('p', { className: 'muted' }, 'No runs yet.') :
        h('div', { className: 'table-wrap' }, h('table', {},
          h('thead', {}, h('tr', {}, h('th', {}, 'Queue'), h('th', {}, 'State'), statuses.map((s) => h('th', {}, badge(s))), h('th', {}, ''))),
          h('tbody', {}, queues.map((q) => h('tr', { dataset: { queue: q.name } },
            h('td', {}, link('runs?queue=' + encodeURIComponent(q.name), q.name)),
            h('td', {}, q.passive || passive ? badge('stopped') : h('span', { className: 'muted' }, 'running')),
            statuses.map((s) => h('td', { className: 'number' }, String(q.runs[s] || 0))),
            h('td', {}, queueSwitch(q))))))));
  }
  refresh();
  return watchChanges(throttle(refresh, 1000));
}
