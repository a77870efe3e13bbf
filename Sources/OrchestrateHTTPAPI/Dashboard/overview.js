// Overview: runs by status, what moves now and what moved, the latest failures.
import { api, watchChanges } from './api.js';
import { h, fill, badge, bytes, rate, runLink, time, throttle, flash } from './dom.js';

const STATUSES = ['queued', 'running', 'paused', 'compensating', 'interrupted', 'succeeded', 'failed', 'cancelled'];

export function mount(container) {
  const body = h('div', {}, h('p', { className: 'muted' }, 'Loading…'));
  fill(container, h('h1', {}, 'Overview'), body);

  async function refresh() {
    try {
      const { runs } = await api('/api/runs?limit=1000');
      draw(body, runs);
    } catch (error) { flash(error.message); }
  }
  refresh();
  return watchChanges(throttle(refresh, 1000));
}

function draw(body, runs) {
  const counts = Object.fromEntries(STATUSES.map((s) => [s, 0]));
  let moved = 0;
  let throughput = 0;
  for (const run of runs) {
    counts[run.status] = (counts[run.status] || 0) + 1;
    const transfer = run.transfer || {};
    moved += transfer.bytes_done || 0;
    if (run.status === 'running') throughput += transfer.average_rate || 0;
  }
  const failures = runs.filter((r) => r.status === 'failed').sort((a, b) => (b.finished_at || 0) - (a.finished_at || 0)).slice(0, 10);
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
