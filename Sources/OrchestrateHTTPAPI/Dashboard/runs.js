// Runs: the list, filtered by status, queue, label and workflow, searched by text; the filters
// live in the URL (`#/runs?status=failed&text=x`), so a filtered view can be bookmarked.
import { api, watchChanges } from './api.js';
import { h, fill, badge, labels, progressBar, runLink, time, throttle, flash } from './dom.js';

const STATUSES = ['', 'queued', 'running', 'paused', 'compensating', 'interrupted', 'succeeded', 'failed', 'cancelled'];
const FILTERS = ['status', 'text', 'queue', 'label', 'workflow'];

export function mount(container, route) {
  const query = route.query;
  const inputs = {
    status: h('select', { name: 'status' }, STATUSES.map((s) => h('option', { value: s, selected: query.get('status') === s }, s || 'any status'))),
    text: h('input', { type: 'search', name: 'text', placeholder: 'search id, workflow, label', value: query.get('text') || '' }),
    queue: h('input', { name: 'queue', placeholder: 'queue', value: query.get('queue') || '' }),
    label: h('input', { name: 'label', placeholder: 'label KEY=VALUE', value: query.get('label') || '' }),
    workflow: h('input', { name: 'workflow', placeholder: 'workflow', value: query.get('workflow') || '' }),
  };
  const form = h('form', { className: 'filters', onsubmit: (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const name of FILTERS) if (inputs[name].value) next.set(name, inputs[name].value);
    window.location.hash = '#/runs' + (next.toString() ? '?' + next : '');
  } }, Object.values(inputs), h('button', { type: 'submit' }, 'Filter'));
  const body = h('div', {}, h('p', { className: 'muted' }, 'Loading…'));
  fill(container, h('h1', {}, 'Runs'), form, body);

  const apiQuery = new URLSearchParams({ limit: '500' });
  for (const name of FILTERS) if (query.get(name)) apiQuery.set(name, query.get(name));
  async function refresh() {
    try {
      const { runs } = await api('/api/runs?' + apiQuery);
      draw(body, runs.reverse());
    } catch (error) { flash(error.message); }
  }
  refresh();
  return watchChanges(throttle(refresh, 1000));
}

function draw(body, runs) {
  if (runs.length === 0) { fill(body, h('p', { className: 'muted' }, 'No runs match.')); return; }
  fill(body, h('div', { className: 'table-wrap' }, h('table', { className: 'runs' },
    h('thead', {}, h('tr', {}, ['Run', 'Workflow', 'Status', 'Labels', 'Queue', 'Progress', 'Created'].map((t) => h('th', {}, t)))),
    h('tbody', {}, runs.map((r) => {
      const t = r.transfer || {};
      return h('tr', { dataset: { run: r.id } },
        h('td', {}, runLink(r.id)), h('td', {}, r.workflow), h('td', {}, badge(r.status)),
        h('td', { className: 'labels' }, labels(r.labels)), h('td', {}, r.queue),
        h('td', {}, t.bytes_done || t.bytes_total ? progressBar(t.bytes_done || 0, t.bytes_total, r.status === 'running' ? t.average_rate : 0) : ''),
        h('td', {}, time(r.created_at)));
    })))));
}
