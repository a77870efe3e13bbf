// Schedules: the registered `on: schedule:` entries (name, cron, time zone, next due time,
// paused, the last run started), with Pause / Resume per schedule name (every entry of it).
import { api, watchChanges } from './api.js';
import { h, fill, badge, runLink, throttle, flash } from './dom.js';

export function mount(container) {
  const body = h('div', {}, h('p', { className: 'muted' }, 'Loading…'));
  fill(container, h('h1', {}, 'Schedules'), body);

  async function refresh() {
    try { draw((await api('/api/schedules')).schedules); } catch (error) { flash(error.message); }
  }
  async function setPaused(name, paused) {
    try {
      await api('/api/schedules/' + encodeURIComponent(name) + '/' + (paused ? 'pause' : 'resume'), { method: 'POST' });
      flash('Schedule ' + name + (paused ? ' paused' : ' resumed'), 'info');
      refresh();
    } catch (error) { flash(error.message); }
  }
  function draw(schedules) {
    fill(body,
      schedules.length === 0 ? h('p', { className: 'muted' }, 'No schedule is registered (orchestrate schedule add WORKFLOW).') :
        h('div', { className: 'table-wrap' }, h('table', { className: 'schedules' },
          h('thead', {}, h('tr', {}, ['Schedule', 'Cron', 'Time zone', 'Next due', 'State', 'Last run', '']
            .map((t) => h('th', {}, t)))),
          h('tbody', {}, schedules.map((s) => h('tr', { dataset: { schedule: s.name } },
            h('td', {}, s.name, h('span', { className: 'muted' }, ' #' + s.entry), h('div', { className: 'muted' }, s.workflow)),
            h('td', {}, h('code', {}, s.cron)),
            h('td', {}, s.timezone),
            h('td', {}, s.next ? new Date(s.next).toLocaleString() : '—'),
            h('td', {}, badge(s.paused ? 'paused' : 'active')),
            h('td', {}, s.last_run ? runLink(s.last_run) : '—'),
            h('td', {}, h('button', { type: 'button', className: s.paused ? '' : 'danger',
                                      dataset: { action: s.paused ? 'resume' : 'pause' },
                                      onclick: () => setPaused(s.name, !s.paused) }, s.paused ? 'Resume' : 'Pause'))))))));
  }
  refresh();
  return watchChanges(throttle(refresh, 2000));
}
