// The REST API as the pages use it, and the watch of changes: the server's
// event stream (/api/v1/watch, one event per topic and change) where the
// server has it, else a poll every few seconds, so the pages stay current
// either way.

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

export async function getJson(path, init = {}) {
  const res = await check(await fetch(path, { headers: { Accept: 'application/json' }, ...init }));
  return res.json();
}

export async function postJson(path, body) {
  const res = await check(await fetch(path, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
    body: JSON.stringify(body || {}),
  }));
  return res.json();
}

export const jobPath = (name) => `/api/v1/jobs/${encodeURIComponent(name)}`;

const kPollMs = 2000;

// Calls onChange(topic) when a topic (jobs, nodes, queues) changes, and
// setLive(text) with how the page learns of changes. Returns a stop function.
export function watch(topics, onChange, setLive) {
  let stopped = false;
  let timer = null;
  let source = null;
  const poll = () => {
    setLive('polling');
    timer = setInterval(() => topics.forEach(onChange), kPollMs);
  };
  if (typeof EventSource === 'undefined') {
    poll();
  } else {
    source = new EventSource(`/api/v1/watch?topics=${topics.join(',')}`);
    source.onopen = () => setLive('live');
    // A server without the stream answers 404, which closes the source for
    // good; a dropped connection is retried by the browser itself.
    source.onerror = () => {
      if (stopped) return;
      if (source.readyState === EventSource.CLOSED) {
        source = null;
        poll();
      } else {
        setLive('reconnecting…');
      }
    };
    for (const t of topics) source.addEventListener(t, () => onChange(t));
  }
  return () => {
    stopped = true;
    if (source) source.close();
    if (timer) clearInterval(timer);
  };
}
