// One run: its record, the verbs, the step graph, each step's attempts and progress, the
// files of its sessions, its log. The run's event stream replays its journal from the start
// (attempt history, logs, latest progress), without the item events (the files come from the
// paged detail), and then follows it live.
import { api, subscribe, liveState } from './api.js';
import { h, fill, badge, labels, progressBar, time, duration, throttle, flash } from './dom.js';

const FINISHED = ['succeeded', 'failed', 'cancelled'];
const MAX_LOG_LINES = 1000;
const FILES_PAGE = 100;

/** Verbs, the statuses each applies to, and what the button says. */
const VERBS = [
  { verb: 'cancel', title: 'Cancel', when: (s) => !FINISHED.includes(s) },
  { verb: 'pause', title: 'Pause', when: (s) => s === 'running' || s === 'queued' },
  { verb: 'unpause', title: 'Resume', when: (s) => s === 'paused' },
  { verb: 'stop', title: 'Stop (back to the queue)', when: (s) => !FINISHED.includes(s) },
  { verb: 'run-now', title: 'Run now', when: (s) => ['queued', 'paused', 'failed', 'cancelled'].includes(s) },
  { verb: 'retry', title: 'Retry', when: (s) => s === 'failed' || s === 'cancelled' },
  { verb: 'close', title: 'Close sessions', when: (s, run) => s === 'running' && (run.graph || []).length > 0 && !!run.items },
  { verb: 'delete', title: 'Delete', when: (s) => FINISHED.includes(s) },
];

export function mount(container, route) {
  const id = route.id;
  // `files`: the live state of the files being moved (those that ended are dropped: the page's
  // stored state has them). `page`: the cursor of the files page shown, and those before it.
  const state = { run: null, progress: new Map(), files: new Map(), attempts: new Map(), logs: [], open: new Set(),
    page: { after: null, before: [] } };
  const sections = {
    head: h('div', {}), verbs: h('div', { className: 'verbs' }), meta: h('div', {}), graph: h('div', {}),
    steps: h('div', {}), files: h('div', {}), log: h('ol', { className: 'log' }),
  };
  fill(container, sections.head, sections.verbs, sections.meta,
    h('h2', {}, 'Step graph'), sections.graph, h('h2', {}, 'Steps'), sections.steps, sections.files,
    h('h2', {}, 'Log'), h('div', { className: 'log-wrap' }, sections.log));

  const render = throttle(() => draw(state, sections, act), 250);
  async function load() {
    try {
      // A session may hold 100,000 files: the detail carries one page of them (items_next: more follow).
      const query = new URLSearchParams({ items_limit: String(FILES_PAGE) });
      if (state.page.after) query.set('items_after', state.page.after);
      state.run = await api('/api/runs/' + encodeURIComponent(id) + '?' + query);
      render();
    } catch (error) {
      if (error.status === 404) fill(sections.head, h('h1', {}, 'No run ' + id));
      else flash(error.message);
    }
  }
  const reload = throttle(load, 500);

  async function act(verb) {
    if (verb === 'delete' && !window.confirm('Delete run ' + id + ' and its journal?')) return;
    try {
      const path = '/api/runs/' + encodeURIComponent(id) + (verb === 'delete' ? '' : '/' + verb);
      const answer = await api(path, { method: verb === 'delete' ? 'DELETE' : 'POST' });
      flash(answer.message, 'info');
      if (verb === 'delete') window.location.hash = '#/runs';
      else reload();
    } catch (error) { flash(error.message); }
  }

  state.turnPage = (direction) => {
    if (direction === 'next' && state.run && state.run.items_next) {
      state.page.before.push(state.page.after);
      state.page.after = state.run.items_next;
    } else if (direction === 'previous' && state.page.before.length) {
      state.page.after = state.page.before.pop();
    } else if (direction === 'first') {
      state.page = { after: null, before: [] };
    }
    load();
  };

  load();
  // items=live: the item events already journaled (a session's 100,000 files) are not
  // replayed; the detail pages the files, and the files moving now come as they move.
  return subscribe('/api/runs/' + encodeURIComponent(id) + '/events?items=live', (event) => {
    record(state, event, sections.log);
    if (event.type === 'step.progress' || event.type === 'item.progress') render();
    else if (event.type !== 'step.log') reload();
  }, liveState);
}

/** Folds one journal event into what the page shows. */
function record(state, event, logList) {
  const data = event.data || {};
  const step = event.step;
  const attempts = () => { if (!state.attempts.has(step)) state.attempts.set(step, []); return state.attempts.get(step); };
  const last = () => attempts()[attempts().length - 1];
  switch (event.type) {
    case 'step.started':
      attempts().push({ attempt: data.attempt, started: event.time, outcome: 'running' });
      break;
    case 'step.retrying':
      if (last()) Object.assign(last(), { finished: event.time, outcome: 'failed (' + data.kind + '), retrying in ' + duration((data.delay_ms || 0) / 1000), error: data.reason });
      break;
    case 'step.failed':
      if (last()) Object.assign(last(), { finished: event.time, outcome: 'failed (' + data.kind + ')', error: data.error });
      break;
    case 'step.held':
      if (last()) Object.assign(last(), { finished: event.time, outcome: 'held: ' + String(data.host) + ' does not answer', error: data.reason });
      break;
    case 'step.still_held':
      if (last()) Object.assign(last(), { outcome: 'held', error: data.message });
      break;
    case 'step.succeeded': case 'step.cancelled': case 'step.interrupted':
      if (last()) Object.assign(last(), { finished: event.time, outcome: event.type.slice(5) });
      break;
    case 'step.progress':
      state.progress.set(step, { done: data.bytes_done, total: data.bytes_total, rate: data.rate, time: event.time });
      break;
    case 'item.started':
      state.files.set(data.item, { ...(state.files.get(data.item) || {}), step, value: data.value, status: 'running', started: event.time });
      break;
    case 'item.progress': {
      const file = state.files.get(data.item) || { step, status: 'running', started: event.time };
      // The journal's per-file figures have no rate: measure it from the first figure seen.
      if (file.firstTime === undefined) { file.firstTime = event.time; file.firstDone = data.bytes_done; }
      const elapsed = event.time - file.firstTime;
      Object.assign(file, { done: data.bytes_done, total: data.bytes_total, rate: elapsed > 0 ? (data.bytes_done - file.firstDone) / elapsed : 0 });
      state.files.set(data.item, file);
      break;
    }
    case 'item.retrying': case 'item.held':
      state.files.set(data.item, { ...(state.files.get(data.item) || { step }), status: event.type === 'item.held' ? 'held' : 'retrying', error: data.reason, rate: 0 });
      break;
    case 'item.released':
      state.files.set(data.item, { ...(state.files.get(data.item) || { step }), status: 'queued', error: '', rate: 0 });
      break;
    case 'item.finished':
      // Its stored state says the rest (the page reloads on this event): the live map keeps
      // only the files still moving, not one entry per file the session ever took.
      state.files.delete(data.item);
      break;
    case 'step.log':
      state.logs.push(event);
      logList.append(h('li', { className: 'level-' + String(data.level).replace(/[^a-z]/g, '') },
        h('time', {}, new Date(event.time * 1000).toLocaleTimeString()), ' ', h('span', { className: 'step' }, step || ''), ' ',
        h('span', { className: 'message' }, data.message)));
      while (logList.childElementCount > MAX_LOG_LINES) logList.firstElementChild.remove();
      break;
  }
}

function draw(state, sections, act) {
  const run = state.run;
  if (!run) return;
  const running = run.status === 'running';
  fill(sections.head, h('h1', {}, h('span', { className: 'run-id' }, run.id), ' ', badge(run.status)));
  fill(sections.verbs, VERBS.filter((v) => v.when(run.status, run)).map((v) =>
    h('button', { type: 'button', className: v.verb === 'cancel' || v.verb === 'delete' ? 'danger' : '', dataset: { verb: v.verb },
                  onclick: () => act(v.verb) }, v.title)));

  // Transfer: the server's figures, or the live sum of the steps' latest progress when newer.
  let done = 0, total = 0, liveRate = 0;
  for (const p of state.progress.values()) { done += Math.max(p.done, 0); total += Math.max(p.total, 0); liveRate += p.done < p.total ? p.rate : 0; }
  const t = run.transfer || {};
  const transfer = !(done || total || t.bytes_done || t.bytes_total) ? '—'
    : done >= (t.bytes_done || 0) ? progressBar(done, total || t.bytes_total, running ? liveRate : 0)
    : progressBar(t.bytes_done, t.bytes_total, running ? t.average_rate : 0);
  const rows = [
    ['Workflow', run.workflow + ' (' + run.file + ')'], ['Queue', run.queue], ['Priority', String(run.priority)],
    ['Labels', labels(run.labels)], ['Node', run.node || '—'], ['Created', time(run.created_at)],
    ['Started', time(run.started_at)], ['Finished', time(run.finished_at)], ['Transfer', transfer],
  ];
  if (run.error) rows.push(['Error', h('span', { className: 'error' }, run.error)]);
  rows.push(['Inputs', h('pre', {}, JSON.stringify(run.inputs, null, 2))]);
  if (run.outputs) rows.push(['Outputs', h('pre', {}, JSON.stringify(run.outputs, null, 2))]);
  fill(sections.meta, h('dl', { className: 'meta' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));

  fill(sections.graph, graph(run, state));
  fill(sections.steps, stepsTable(run, state));
  fill(sections.files, filesTable(run, state));
}

/** The declared steps in columns by depth (a step sits right of everything it needs). */
function graph(run, state) {
  const declared = run.graph || [];
  if (declared.length === 0) return h('p', { className: 'muted' }, 'The workflow stored with the run cannot be read.');
  const byID = new Map(declared.map((s) => [s.id, s]));
  const depth = new Map();
  const depthOf = (s, seen = new Set()) => {
    if (depth.has(s.id)) return depth.get(s.id);
    if (seen.has(s.id)) return 0;
    seen.add(s.id);
    const d = Math.max(-1, ...s.needs.map((n) => byID.has(n) ? depthOf(byID.get(n), seen) : -1)) + 1;
    depth.set(s.id, d);
    return d;
  };
  declared.forEach((s) => depthOf(s));
  const columns = [];
  for (const s of declared) (columns[depth.get(s.id)] ||= []).push(s);
  const records = new Map((run.steps || []).map((r) => [r.id, r]));
  return h('div', { className: 'graph' }, columns.map((column) => h('div', { className: 'column' }, column.map((s) => {
    const record = records.get(s.id);
    const status = record ? record.status : 'pending';
    let done = 0, total = 0, rate = 0;
    for (const [instance, p] of state.progress) {
      if (instance === s.id || instance.startsWith(s.id + '[')) { done += Math.max(p.done, 0); total += Math.max(p.total, 0); rate += status === 'running' ? p.rate : 0; }
    }
    return h('div', { className: 'node s-' + status.replace(/[^a-z_-]/g, '') },
      h('div', { className: 'node-id' }, s.id + (s.for_each ? '[]' : '')), h('div', { className: 'muted' }, s.uses),
      s.needs.length ? h('div', { className: 'needs' }, '← ' + s.needs.join(', ')) : null,
      badge(status), total > 0 ? progressBar(done, total, rate) : null);
  }))));
}

function stepsTable(run, state) {
  const steps = run.steps || [];
  if (steps.length === 0) return h('p', { className: 'muted' }, 'No step has started.');
  return h('div', { className: 'table-wrap' }, h('table', { className: 'steps' },
    h('thead', {}, h('tr', {}, ['Step', 'Status', 'Attempt', 'Node', 'Duration', 'Progress', 'Error'].map((t) => h('th', {}, t)))),
    h('tbody', {}, steps.map((s) => {
      const p = state.progress.get(s.id);
      const end = s.finished_at || (s.status === 'running' ? Date.now() / 1000 : undefined);
      const attempts = state.attempts.get(s.id) || [];
      const details = h('details', { open: state.open.has(s.id), ontoggle: (e) => { e.target.open ? state.open.add(s.id) : state.open.delete(s.id); } },
        h('summary', {}, attempts.length + ' attempt' + (attempts.length === 1 ? '' : 's')),
        h('ol', { className: 'attempts' }, attempts.map((a) => h('li', {},
          '#' + a.attempt + ' ' + time(a.started) + ': ' + a.outcome + (a.finished ? ' after ' + duration(a.finished - a.started) : ''),
          a.error ? h('div', { className: 'error' }, a.error) : null))));
      return h('tr', { dataset: { step: s.id } },
        h('td', {}, s.id, s.kind !== 'step' ? h('span', { className: 'muted' }, ' ' + s.kind) : null),
        h('td', {}, badge(s.status)), h('td', {}, String(s.attempt), attempts.length ? details : null), h('td', {}, s.node || '—'),
        h('td', {}, s.started_at && end ? duration(end - s.started_at) : '—'),
        h('td', {}, p ? progressBar(p.done, p.total, s.status === 'running' ? p.rate : 0) : ''),
        h('td', { className: 'error' }, s.error ? (s.error_kind ? s.error_kind + ': ' : '') + s.error : ''));
    }))));
}

/** Files added to persistent sessions (the run's items): the counts, the files moving now with
 * their live progress, and one page of the files in the order added, with a pager. */
function filesTable(run, state) {
  const counts = run.item_counts || {};
  if (!run.items_total && state.files.size === 0) return null;
  const name = (value, id) => value && typeof value === 'object' && value.source ? value.source + ' → ' + (value.destination || '') : id;
  const row = (id, f) => h('tr', {},
    h('td', { className: 'file' }, name(f.value, id)), h('td', {}, f.step || ''), h('td', {}, badge(f.status || 'queued')),
    h('td', {}, f.done !== undefined ? progressBar(f.done, f.total, f.status === 'running' ? f.rate : 0) : ''),
    h('td', { className: 'error' }, f.error || ''));
  const table = (rows) => h('div', { className: 'table-wrap' }, h('table', { className: 'files' },
    h('thead', {}, h('tr', {}, ['File', 'Step', 'Status', 'Progress', 'Error'].map((t) => h('th', {}, t)))), h('tbody', {}, rows)));
  // The page's files; a running one carries the server's figures (a page opened mid-transfer has
  // seen no event of it yet), and the journal's live state is newer for those still moving.
  const page = (run.items || []).map((i) => {
    const stored = { step: i.step, value: i.item, status: i.status, error: i.error,
      ...(i.bytes_done !== undefined ? { done: i.bytes_done, total: i.bytes_total, rate: i.rate } : {}) };
    const live = state.files.get(i.id);
    const settled = stored.status === 'done' || stored.status === 'failed';
    return [i.id, live && !settled ? { ...stored, ...live, value: stored.value || live.value, error: stored.error || live.error } : stored];
  });
  // A file that started before the page opened has no item.started in the stream (items=live):
  // its name comes from the page's stored items when the page holds it.
  const storedValues = new Map((run.items || []).map((i) => [i.id, i.item]));
  const moving = [...state.files].filter(([, f]) => f.status === 'running' || f.status === 'held' || f.status === 'retrying')
    .map(([id, f]) => [id, f.value === undefined && storedValues.has(id) ? { ...f, value: storedValues.get(id) } : f]);
  const summary = Object.keys(counts).sort().map((step) => step + ': ' +
    ['queued', 'running', 'done', 'failed'].map((k) => (counts[step][k] || 0).toLocaleString() + ' ' + k).join(' · '));
  const first = page.length ? (state.page.before.length * FILES_PAGE + 1) : 0;
  const pager = h('div', { className: 'pager' },
    h('button', { type: 'button', disabled: !state.page.after, dataset: { page: 'first' }, onclick: () => state.turnPage('first') }, 'First'),
    h('button', { type: 'button', disabled: !state.page.before.length, dataset: { page: 'previous' }, onclick: () => state.turnPage('previous') }, 'Previous'),
    ' ' + (page.length ? first.toLocaleString() + '–' + (first + page.length - 1).toLocaleString() : '0') + ' of ' +
      (run.items_total || 0).toLocaleString() + ' ',
    h('button', { type: 'button', disabled: !run.items_next, dataset: { page: 'next' }, onclick: () => state.turnPage('next') }, 'Next'));
  return [h('h2', {}, 'Files'), h('p', { className: 'file-counts' }, summary.join('; ')),
    moving.length ? [h('h3', {}, 'Moving now'), table(moving.map(([id, f]) => row(id, f)))] : null,
    h('h3', {}, 'All files, in the order added'), pager, table(page.map(([id, f]) => row(id, f)))];
}
