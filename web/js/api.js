// The REST API as the pages use it, and the watch of changes: the server's
// event stream (/api/v1/watch, one event per topic and change) where the
// server has it, else a poll every few seconds, so the pages stay current
// either way. Every /api/ call carries the user's token (docs/security.md):
// taken once from the URL's fragment (#token=..., as `trainyard up` prints
// the dashboard's address; a fragment is never sent to the server), or
// typed into the sign-in form, and kept in this tab's sessionStorage.

const kTokenKey = 'trainyard-token';

function takeTokenFromUrl() {
  const m = /^#token=([^&]*)/.exec(location.hash);
  if (!m) return;
  try {
    sessionStorage.setItem(kTokenKey, decodeURIComponent(m[1]));
  } catch {
    // A malformed address (a stray %) signs nobody in; the form still can.
  }
  // Off the address bar and the history at once.
  history.replaceState(null, '', `${location.pathname}${location.search}#/`);
}
takeTokenFromUrl();

export const hasToken = () => Boolean(sessionStorage.getItem(kTokenKey));
export function setToken(token) {
  sessionStorage.setItem(kTokenKey, token.trim());
}

// `extra` headers with the token's Authorization header.
export function authHeaders(extra = {}) {
  const token = sessionStorage.getItem(kTokenKey);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : { ...extra };
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function check(res) {
  if (res.ok) return res;
  let message = `${res.status} ${res.statusText}`;
  try {
    const body = await res.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch (e) { /* not JSON: the status line says it */ }
  throw new ApiError(res.status, message);
}

// Whether an answer since the last takeStale() was marked stale by the
// server (X-Trainyard-Stale: a list made before the latest change, served
// again within a second of being made, so that many tabs cost the server
// one rendering): the page should ask again.
let stale = false;
export function takeStale() {
  const was = stale;
  stale = false;
  return was;
}

export async function getJson(path, init = {}) {
  const res = await check(await fetch(path, { ...init, headers: authHeaders({ Accept: 'application/json', ...init.headers }) }));
  if (res.headers.get('X-Trainyard-Stale') === 'true') stale = true;
  return res.json();
}

export async function postJson(path, body) {
  const res = await check(await fetch(path, {
    method: 'POST', headers: authHeaders({ 'Content-Type': 'application/json', Accept: 'application/json' }),
    body: JSON.stringify(body || {}),
  }));
  return res.json();
}

export const jobPath = (name) => `/api/v1/jobs/${encodeURIComponent(name)}`;

const kPollMs = 2000;
const kRetryMs = 2000;

// Reads the event stream until it ends, calling onEvent(topic) for each
// event. An EventSource cannot send the Authorization header, so the stream
// is read through fetch. Throws an ApiError for a refused stream.
async function readEvents(topics, onEvent, onOpen, signal) {
  const res = await check(await fetch(`/api/v1/watch?topics=${topics.join(',')}`, {
    headers: authHeaders({ Accept: 'text/event-stream' }), signal,
  }));
  onOpen();
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replace(/\r/g, '');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (line.startsWith('event:')) onEvent(line.slice(6).trim());
      }
    }
  }
}

// Calls onChange(topic) when a topic (jobs, nodes, queues) changes, and
// setLive(text) with how the page learns of changes. Returns a stop function.
export function watch(topics, onChange, setLive) {
  let stopped = false;
  let timer = null;
  const controller = new AbortController();
  const poll = () => {
    setLive('polling');
    timer = setInterval(() => topics.forEach(onChange), kPollMs);
  };
  const run = async () => {
    while (!stopped) {
      try {
        await readEvents(topics, (t) => { if (topics.includes(t)) onChange(t); }, () => setLive('live'), controller.signal);
      } catch (e) {
        if (stopped) return;
        // A server without the stream: poll instead.
        if (e instanceof ApiError && e.status === 404) return poll();
        setLive(e instanceof ApiError && e.status === 401 ? 'signed out' : 'reconnecting…');
      }
      if (stopped) return;
      await new Promise((resolve) => setTimeout(resolve, kRetryMs));
    }
  };
  if (typeof ReadableStream === 'undefined') poll();
  else run();
  return () => {
    stopped = true;
    controller.abort();
    if (timer) clearInterval(timer);
  };
}
