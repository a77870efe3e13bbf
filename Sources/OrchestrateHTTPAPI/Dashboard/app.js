// The dashboard's shell: the token, the routes (`#/…`), the live indicator. Each view is a
// module whose `mount(container, route)` draws it and returns a function that tears it down.
import { adoptTokenFromURL, token, setToken, forgetToken } from './api.js';
import { h, fill } from './dom.js';
import * as overview from './overview.js';
import * as runs from './runs.js';
import * as run from './run.js';
import * as queues from './queues.js';
import * as nodes from './nodes.js';
import * as schedules from './schedules.js';
import * as plugins from './plugins.js';

adoptTokenFromURL();

const container = document.getElementById('view');
let unmount = () => {};

/**
 * `#/runs/ID?x=1` → {view: 'run', id: 'ID', query: URLSearchParams}. The singular `#/run/ID`
 * (what one writes by hand) is the same page, and `#/run` alone the list.
 */
function parseRoute() {
  const hash = window.location.hash.replace(/^#\/?/, '');
  const [path, search = ''] = hash.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const query = new URLSearchParams(search);
  if ((parts[0] === 'runs' || parts[0] === 'run') && parts.length > 1) return { view: 'run', id: parts.slice(1).join('/'), query };
  if (parts[0] === 'run') return { view: 'runs', query };
  return { view: parts[0] || 'overview', query };
}

const views = { overview, runs, run, queues, nodes, schedules, plugins };

function show() {
  unmount();
  unmount = () => {};
  if (!token()) { askForToken(); return; }
  const route = parseRoute();
  const view = views[route.view];
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('current', a.dataset.view === (route.view === 'run' ? 'runs' : route.view));
  }
  if (!view) { fill(container, h('p', {}, 'No such page.')); return; }
  fill(container);
  unmount = view.mount(container, route) || (() => {});
}

/** Without a token (opened without ?token=, or it was refused): ask for it. */
function askForToken(refused = false) {
  unmount();
  unmount = () => {};
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', placeholder: 'token', required: true });
  const form = h('form', { className: 'token-form', onsubmit: (event) => {
    event.preventDefault();
    setToken(input.value.trim());
    show();
  } },
  h('h1', {}, 'Token needed'),
  h('p', {}, refused ? 'The server refused the token.' : 'Open the URL that `orchestrate serve --http` printed, or paste the token from the state directory\'s http-token file.'),
  input, h('button', { type: 'submit' }, 'Open'));
  fill(container, form);
}

window.addEventListener('orchestrate-unauthorized', () => { forgetToken(); askForToken(true); });
window.addEventListener('hashchange', show);

/** The header's indicator: whether the view's event stream is connected. */
export function setLive(open) {
  const live = document.getElementById('live');
  live.textContent = open ? 'live' : 'offline';
  live.className = 'live ' + (open ? 'on' : 'off');
}
window.addEventListener('orchestrate-live', (event) => setLive(event.detail));

show();
