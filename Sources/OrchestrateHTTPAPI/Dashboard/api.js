// The JSON API with the bearer token, and its event streams.
//
// The token arrives once in the page's URL (`/?token=…`, as `serve` prints it). It is moved at
// once into sessionStorage (this tab only, gone when it closes) and out of the address bar,
// history and bookmarks. Requests send it as `Authorization: Bearer`, never as a cookie: the
// server accepts nothing else for a verb, so another site cannot make the browser forge one.
// EventSource cannot set headers, so event streams (GET only) take it as `?token=`.

const KEY = 'orchestrate-token';

export function adoptTokenFromURL() {
  const url = new URL(window.location.href);
  const token = url.searchParams.get('token');
  if (token) {
    sessionStorage.setItem(KEY, token);
    url.searchParams.delete('token');
    history.replaceState(null, '', url.pathname + url.search + url.hash);
  }
}

export function token() { return sessionStorage.getItem(KEY); }
export function setToken(value) { sessionStorage.setItem(KEY, value); }
export function forgetToken() { sessionStorage.removeItem(KEY); }

/** An error the API answered with a problem document (or the network failed). */
export class APIError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

/** `method path` with an optional JSON body; resolves to the parsed JSON answer. */
export async function api(path, { method = 'GET', body } = {}) {
  const headers = { 'Authorization': 'Bearer ' + (token() || '') };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
                                   credentials: 'omit', cache: 'no-store' });
  } catch (error) {
    throw new APIError(0, 'the server cannot be reached: ' + error.message);
  }
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON: reported below */ }
  if (!response.ok) {
    if (response.status === 401) window.dispatchEvent(new Event('orchestrate-unauthorized'));
    throw new APIError(response.status, (json && json.detail) || response.status + ' ' + response.statusText);
  }
  return json;
}

/**
 * Opens an event stream; `onEvent(event)` gets each journal event (parsed). EventSource
 * reconnects by itself after a lost connection, resuming with Last-Event-ID; after an answer
 * that is not a stream (the server restarting, too many streams) it gives up, so then a new one
 * is opened a little later, resuming after the last event seen: nothing missed or repeated.
 * `onState(open)` hears of the connection coming and going. Returns a function that closes it.
 */
export function subscribe(path, onEvent, onState = () => {}) {
  let lastSeq = null;
  let source = null;
  let retry = null;
  function open() {
    const url = new URL(path, window.location.origin);
    if (lastSeq !== null) url.searchParams.set('after', lastSeq);
    url.searchParams.set('token', token() || '');
    source = new EventSource(url);
    source.onopen = () => onState(true);
    source.onerror = () => {
      onState(false);
      if (source.readyState === EventSource.CLOSED) retry = setTimeout(open, 3000);
    };
    source.onmessage = (message) => {
      let event;
      try { event = JSON.parse(message.data); } catch { return; }
      lastSeq = message.lastEventId || lastSeq;
      onEvent(event);
    };
  }
  open();
  return () => { clearTimeout(retry); source.close(); };
}

/**
 * Calls `refresh` whenever anything happens in the store, and when the stream (re)connects:
 * it starts at the end of the journal (`after=end`), so what happened while it was away is
 * caught up by refreshing, not by replaying. For the views that show lists and counts.
 */
export function watchChanges(refresh) {
  return subscribe('/api/events?after=end', refresh, (open) => {
    liveState(open);
    if (open) refresh();
  });
}

/** Tells the header's indicator whether the view's event stream is connected. */
export function liveState(open) {
  window.dispatchEvent(new CustomEvent('orchestrate-live', { detail: open }));
}
