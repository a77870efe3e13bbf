// Plugins: the loaded plugin libraries and their step types, with input and output schemas.
import { api } from './api.js';
import { h, fill, flash } from './dom.js';

export function mount(container) {
  const body = h('div', {}, h('p', { className: 'muted' }, 'Loading…'));
  fill(container, h('h1', {}, 'Plugins'), body);
  api('/api/plugins').then(({ plugins, step_types: types }) => {
    fill(body,
      h('div', { className: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, ['Plugin', 'Version', 'Library'].map((t) => h('th', {}, t)))),
        h('tbody', {}, plugins.map((p) => h('tr', {}, h('td', {}, p.name), h('td', {}, p.version), h('td', { className: 'file' }, p.path)))))),
      h('h2', {}, 'Step types'),
      types.map((t) => h('details', { className: 'step-type' },
        h('summary', {}, h('strong', {}, t.id), ' ', h('span', { className: 'muted' }, t.version + (t.accepts_items ? ' · accepts items' : '')), ' — ', t.summary),
        t.documentation ? h('p', {}, t.documentation) : null,
        h('h3', {}, 'Inputs'), h('pre', {}, JSON.stringify(t.input_schema, null, 2)),
        t.output_schema ? [h('h3', {}, 'Outputs'), h('pre', {}, JSON.stringify(t.output_schema, null, 2))] : null)));
  }).catch((error) => flash(error.message));
}
