// Building the page. Everything shown goes in as text (textContent, text nodes), never as
// markup: a run label or a file name is hostile input, and must read as what it is.

/** `h('a', {href: '#/runs', className: 'x'}, 'text', child…)`: an element with properties and children. */
export function h(tag, properties = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(properties)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
    else if (name === 'dataset') Object.assign(element.dataset, value);
    else if (name in element) element[name] = value;
    else element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's content. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** A link inside the dashboard; ids are encoded, so the href stays a fragment. */
export function link(route, text) {
  return h('a', { href: '#/' + route }, text);
}

export function runLink(id) { return link('runs/' + encodeURIComponent(id), id); }

export function badge(status) {
  return h('span', { className: 'badge s-' + String(status).replace(/[^a-z_-]/g, '') }, status);
}

export function bytes(n) {
  if (n === undefined || n === null || n < 0) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i === 0 ? String(n) : n.toFixed(n < 10 ? 1 : 0)) + ' ' + units[i];
}

export function rate(bytesPerSecond) {
  return bytesPerSecond > 0 ? bytes(bytesPerSecond) + '/s' : '—';
}

export function duration(seconds) {
  if (seconds === undefined || seconds === null || !isFinite(seconds) || seconds < 0) return '—';
  seconds = Math.round(seconds);
  if (seconds < 60) return seconds + ' s';
  if (seconds < 3600) return Math.floor(seconds / 60) + ' min ' + (seconds % 60) + ' s';
  return Math.floor(seconds / 3600) + ' h ' + Math.floor((seconds % 3600) / 60) + ' min';
}

export function time(epochSeconds) {
  if (!epochSeconds) return '—';
  return new Date(epochSeconds * 1000).toLocaleString();
}

/** A bar with what it says beside it: `done / total · rate · ETA`. */
export function progressBar(done, total, bytesPerSecond) {
  const known = total > 0;
  const bar = h('progress', { max: known ? total : 1 });
  if (known) bar.value = Math.min(done, total);  // without a value, an indeterminate bar
  const parts = [known ? bytes(done) + ' / ' + bytes(total) : bytes(done)];
  if (bytesPerSecond > 0) parts.push(rate(bytesPerSecond));
  if (known && bytesPerSecond > 0 && done < total) parts.push('ETA ' + duration((total - done) / bytesPerSecond));
  return h('div', { className: 'progress' }, bar, h('span', { className: 'figures' }, parts.join(' · ')));
}

export function labels(object) {
  return Object.entries(object || {}).map(([key, value]) => h('span', { className: 'label' }, key + '=' + value));
}

/** Calls `fn` at most once per `ms`, the last call winning (for refreshes on bursts of events). */
export function throttle(fn, ms) {
  let timer = null;
  let pending = false;
  return () => {
    if (timer) { pending = true; return; }
    fn();
    timer = setTimeout(function again() {
      timer = null;
      if (pending) { pending = false; fn(); timer = setTimeout(again, ms); }
    }, ms);
  };
}

/** Shows a message (an error, or what a verb did) above the view. */
export function flash(message, kind = 'error') {
  const area = document.getElementById('flash');
  fill(area, h('p', { className: 'flash ' + kind }, message));
  clearTimeout(flash.timer);
  flash.timer = setTimeout(() => area.replaceChildren(), 8000);
}
