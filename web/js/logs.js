// The log viewer of one task: the chosen attempt's log from the start,
// then, for the live attempt, the follow stream (new lines as the task
// prints them). Switching the task or the attempt aborts the stream.
import { h } from './dom.js';
import { jobPath, authHeaders } from './api.js';

const kChunk = 1 << 20;  // bytes asked for at a time
const kMaxShown = 4 << 20;  // the viewer keeps the last this many characters

export class LogViewer {
  constructor(job) {
    this.job = job;
    this.task = null;
    this.controller = null;
    this.taskSelect = h('select', { id: 'log-task', onchange: () => this.choose(this.taskSelect.value, -1) });
    this.attemptSelect = h('select', { id: 'log-attempt', onchange: () => this.choose(this.task, Number(this.attemptSelect.value)) });
    this.status = h('span', { class: 'muted', role: 'status' });
    this.pre = h('pre', { class: 'log', id: 'log-text', tabindex: '0', role: 'log', 'aria-live': 'off', 'aria-label': 'task log' });
    this.follow = h('input', { type: 'checkbox', id: 'log-follow', checked: true });
    this.el = h('div', { class: 'logviewer' },
      h('p', { class: 'filters' },
        h('label', { for: 'log-task' }, 'Task '), this.taskSelect, ' ',
        h('label', { for: 'log-attempt' }, 'Attempt '), this.attemptSelect, ' ',
        this.follow, h('label', { for: 'log-follow' }, ' scroll with new lines'), ' ', this.status),
      this.pre);
  }

  // Updates the task and attempt choices from the job's tasks; starts on
  // the first task the first time.
  update(tasks) {
    this.tasks = new Map(tasks.map((t) => [t.name, t]));
    const names = tasks.map((t) => t.name);
    if (this.taskSelect.options.length !== names.length) {
      this.taskSelect.replaceChildren(...names.map((n) => h('option', { value: n }, n)));
    }
    if (this.task === null && names.length) {
      // A worker's log is what people look for first, not the job master's.
      const firstWithNode = tasks.find((t) => t.node && t.role !== 'jobmaster') || tasks.find((t) => t.node) || tasks[0];
      this.choose(firstWithNode.name, -1);
    } else if (this.task) {
      this.taskSelect.value = this.task;
      this.fillAttempts();
    }
  }

  fillAttempts() {
    const t = this.tasks.get(this.task);
    const last = t ? t.attempt : 0;
    if (this.attemptSelect.options.length !== last + 1) {
      const opts = [];
      for (let a = last; a >= 0; a--) opts.push(h('option', { value: String(a) }, a === last ? `${a} (latest)` : String(a)));
      this.attemptSelect.replaceChildren(...opts);
    }
    this.attemptSelect.value = String(this.attempt);
  }

  choose(task, attempt) {
    const t = this.tasks.get(task);
    this.task = task;
    this.attempt = attempt >= 0 ? attempt : (t ? t.attempt : 0);
    this.fillAttempts();
    this.taskSelect.value = task;
    this.load(t && this.attempt === t.attempt && t.node !== '');
  }

  stop() {
    if (this.controller) this.controller.abort();
    this.controller = null;
  }

  append(text) {
    if (!text) return;
    const node = this.pre.firstChild;
    if (node && node.length + text.length <= kMaxShown) node.appendData(text);
    else this.pre.textContent = ((node ? node.data : '') + text).slice(-kMaxShown);
    if (this.follow.checked) this.pre.scrollTop = this.pre.scrollHeight;
  }

  async load(live) {
    this.stop();
    const controller = new AbortController();
    this.controller = controller;
    this.pre.textContent = '';
    const base = `${jobPath(this.job)}/tasks/${encodeURIComponent(this.task)}/logs?attempt=${this.attempt}`;
    try {
      this.status.textContent = 'loading…';
      // What is there now, in chunks, then the stream from where it ended.
      let offset = 0;
      for (;;) {
        const res = await fetch(`${base}&offset=${offset}&limit=${kChunk}`, { headers: authHeaders(), signal: controller.signal });
        if (!res.ok) throw new Error(await errorText(res));
        const text = await res.text();
        this.append(text);
        const bytes = new TextEncoder().encode(text).length;
        // The server says where the next read starts (bytes of the log, which
        // a piece cut inside a UTF-8 character would miscount here).
        offset = Number(res.headers.get('X-Trainyard-Next-Offset')) || offset + bytes;
        if (bytes < kChunk) break;
      }
      if (!live) {
        this.status.textContent = offset ? '' : '(empty)';
        return;
      }
      this.status.textContent = 'following';
      const res = await fetch(`${base}&offset=${offset}&follow=1`, { headers: authHeaders(), signal: controller.signal });
      if (!res.ok) throw new Error(await errorText(res));
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        this.append(decoder.decode(value, { stream: true }));
      }
      this.status.textContent = 'ended';
    } catch (e) {
      if (controller.signal.aborted) return;
      this.status.textContent = `log unavailable: ${e.message}`;
    }
  }
}

async function errorText(res) {
  try {
    const body = await res.json();
    return body.error.message;
  } catch (e) {
    return `${res.status} ${res.statusText}`;
  }
}
