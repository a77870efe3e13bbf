// Overview: runs by status, what moves now and what moved, the latest failures.
import { api, watchChanges } from './api.js';
import { h, fill, badge, bytes, rate, runLink, time, throttle, flash } from './dom.js';

const STATUSES = ['queued', 'running', 'paused', 'compensating', 'interrupted', 'succeeded', 'failed', 'cancelled'];

export function mount(container) {
  const body = h('div', {}, h('p', { className: 'muted' }, 'Loading…'));
  fill(container, h('h1', {}, 'Overview'), body);

  // Counts from /api/queues (counted by the store, every run), the newest runs for what moved,
  // the newest failures by their own filter: each read costs the same however many runs the
  // store holds.
  async function refresh() {
    try {
      const [queues, { runs }, failed] = await Promise.all([
        api('/api/queues'), api('/api/runs?limit=1000'), api('/api/runs?status=failed&limit=10')]);
      draw(body, queues.queues, runs, failed.runs);
    } catch (error) { flash(error.message); }
  }
  refresh();
  return watchChanges(throttle(refresh, 1000));
}

function draw(body, queues, runs, failed) {
  const counts = Object.fromEntries(STATUSES.map((s) => [s, 0]));
  for (const queue of queues) {
    for (const [status, n] of Object.entries(queue.runs)) counts[status] = (counts[status] || 0) + n;
  }
  let moved = 0;
  let throughput = 0;
  for (const run of runs) {
    const transfer = run.transfer || {};
    moved += transfer.bytes_done || 0;
    if (run.status === 'running') throughput += transfer.average_rate || 0;
  }
  const failures = failed.slice().sort((a, b) => (b.finished_at || 0) - (a.finished_at || 0));
  fill(body,
    h('section', { className: 'cards' },
      STATUSES.map((s) => h('a', { className: 'card', href: '#/runs?status=' + s }, h('span', { className: 'count' }, String(counts[s])), badge(s)))),
    h('section', { className: 'cards' },
      h('div', { className: 'card wide' }, h('span', { className: 'count' }, rate(throughput)), h('span', {}, 'throughput of running runs')),
      h('div', { className: 'card wide' }, h('span', { className: 'count' }, bytes(moved)), h('span', {}, 'moved by the ' + runs.length + ' newest runs'))),
    h('h2', {}, 'Recent failures'),
    failures.length === 0 ? h('p', { className: 'muted' }, 'None.') :
      h('div', { className: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Run'), h('th', {}, 'Workflow'), h('th', {}, 'Finished'), h('th', {}, 'Error'))),
        h('tbody', {}, failures.map((r) => h('tr', {},
          h('td', {}, runLink(r.id)), h('td', {}, r.workflow), h('td', {}, time(r.finished_at)), h('td', { className: 'error' }, r.error || '')))))));
}
