// One job: its state and pending reason, Kill, tasks (node, GPUs, ports,
// restarts and their causes), the GPUs it holds on each node, its events on
// a timeline, the log viewer and the download of every log.
import { h, table, section, stateBadge, jobColour, when, ago, duration, ports } from './dom.js';
import { getJson, postJson, jobPath, ApiError, authHeaders } from './api.js';
import { LogViewer } from './logs.js';
import { ResourcesView } from './resources.js';

const kTerminal = new Set(['SUCCEEDED', 'FAILED', 'KILLED', 'DEADLINE_EXCEEDED']);

// The job's time limit (activeDeadline) and what is left of it. The time
// left counts down from the server's answer (time_left_ms), by this
// browser's clock since then: a clock set apart from the server's does not
// shift it.
function timeLimit(job, fetchedAt) {
  if (!job.active_deadline_ms) return 'none';
  const limit = duration(job.active_deadline_ms);
  if (job.state === 'DEADLINE_EXCEEDED') return `${limit} (exceeded)`;
  if (kTerminal.has(job.state)) return limit;
  if (job.time_left_ms === null || job.time_left_ms === undefined) return `${limit} (counted from when the job starts running)`;
  const el = h('span', { id: 'time-left' });
  const show = () => {
    const left = Math.max(0, job.time_left_ms - (Date.now() - fetchedAt));
    el.textContent = `${limit} (${duration(Math.floor(left / 1000) * 1000)} left)`;
  };
  show();
  el.tick = show;
  return el;
}

function exitCause(e) {
  if (!e) return '';
  if (e.oom_killed) return 'killed: out of memory';
  if (e.message) return e.message;
  if (e.signal) return `killed by signal ${e.signal}`;
  return `exit code ${e.exit_code}`;
}

function header(job, kill, fetchedAt) {
  return h('div', { class: 'jobhead' },
    h('h1', {}, `Job ${job.name} `, stateBadge(job.state)),
    h('dl', { class: 'facts' },
      h('dt', {}, 'User'), h('dd', {}, job.user), h('dt', {}, 'Queue'), h('dd', {}, job.queue),
      h('dt', {}, 'Priority'), h('dd', {}, job.priority), h('dt', {}, 'Framework'), h('dd', {}, job.framework),
      h('dt', {}, 'GPUs held'), h('dd', {}, job.gpus), h('dt', {}, 'Job master'), h('dd', {}, job.job_master || '—'),
      h('dt', {}, 'Submitted'), h('dd', {}, `${when(job.submit_time_unix_ms)} (${ago(job.submit_time_unix_ms)} ago)`),
      h('dt', {}, 'Started'), h('dd', {}, when(job.start_time_unix_ms)),
      h('dt', {}, 'Ended'), h('dd', {}, when(job.end_time_unix_ms)),
      h('dt', {}, 'Time limit'), h('dd', { id: 'time-limit' }, timeLimit(job, fetchedAt)),
      ...(job.array_job ? [h('dt', {}, 'Array'), h('dd', { id: 'array' }, `${job.array_job} (index ${job.array_index})`)] : []),
      ...(job.held ? [h('dt', {}, 'Held'), h('dd', { id: 'held' }, `until trainyard release ${job.name}`)] : []),
      ...((job.after_ok || []).length ? [h('dt', {}, 'After ok'), h('dd', { id: 'after-ok' }, job.after_ok.join(', '))] : []),
      ...((job.after_any || []).length ? [h('dt', {}, 'After any'), h('dd', { id: 'after-any' }, job.after_any.join(', '))] : [])),
    job.pending_reason ? h('p', { class: 'pending', id: 'pending-reason' }, h('strong', {}, 'Waiting: '), job.pending_reason) : null,
    !job.pending_reason && job.reason ? h('p', { class: 'muted' }, job.reason) : null,
    h('p', {},
      kTerminal.has(job.state) ? null : h('button', { type: 'button', class: 'danger', id: 'kill', onclick: kill }, 'Kill job'), ' ',
      h('a', { href: `${jobPath(job.name)}/logs.tar.gz`, download: `${job.name}-logs.tar.gz`, id: 'download-logs', onclick: download },
        'Download all logs (tar.gz, every attempt of every task)')));
}

// The archive needs the token, which a plain link cannot send: fetched with
// it, then saved from a blob.
async function download(e) {
  e.preventDefault();
  const link = e.currentTarget;
  const res = await fetch(link.getAttribute('href'), { headers: authHeaders() });
  if (!res.ok) {
    link.after(h('span', { class: 'error', role: 'alert' }, ` could not download: ${res.status} ${res.statusText}`));
    return;
  }
  const url = URL.createObjectURL(await res.blob());
  const save = h('a', { href: url, download: link.getAttribute('download') });
  document.body.append(save);
  save.click();
  save.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

function tasksTable(job) {
  return table('Tasks', ['Task', 'Role', 'Index', 'State', 'Node', 'GPUs', 'Ports', 'Attempt', 'Restarts', 'Last exit'],
    job.tasks.map((t) => [t.name, t.service ? `${t.role} (service)` : t.role, t.index, stateBadge(t.state),
      t.node || '—', t.gpus.join(', ') || '—', ports(t.ports), t.attempt, t.restarts, exitCause(t.last_exit)]),
    { id: 'tasks' });
}

// Opens a running service task's port through the server's proxy in a new
// tab (docs/services.md): the link is asked for with this user's token (a
// plain link cannot carry it) and is the user's own, for a while. The tab
// is opened at the click (a browser lets only a click open one), then sent
// to the link.
async function openService(job, task, button) {
  const tab = window.open('about:blank', '_blank');
  try {
    const link = await postJson(`${jobPath(job.name)}/service-link`, { role: task.role, index: task.index });
    if (tab) {
      tab.opener = null;
      tab.location.href = link.path;
    } else {
      location.assign(link.path);
    }
  } catch (e) {
    if (tab) tab.close();
    button.after(h('span', { class: 'error', role: 'alert' }, ` could not open: ${e.message}`));
  }
}

// The job's service tasks, each with a button that opens it while it runs.
function services(job) {
  const tasks = job.tasks.filter((t) => t.service);
  if (!tasks.length) return null;
  return section('Services', h('ul', { id: 'services' }, tasks.map((t) => {
    const open = h('button', { type: 'button', class: 'service-open', disabled: t.state !== 'RUNNING' }, `Open ${t.name}`);
    open.onclick = () => openService(job, t, open);
    return h('li', {}, open, ' ', stateBadge(t.state), t.state === 'RUNNING' ? '' : ' (opens once it runs)');
  })));
}

// The job's GPUs on each of its nodes, drawn over the node's whole bitmap.
function gpusPerNode(job, nodes) {
  const mine = new Map();
  for (const t of job.tasks) {
    if (!t.node || !t.gpus.length || kTerminal.has(t.state)) continue;
    for (const g of t.gpus) mine.set(`${t.node}/${g}`, t.name);
  }
  const names = [...new Set(job.tasks.filter((t) => t.node && t.gpus.length && !kTerminal.has(t.state)).map((t) => t.node))].sort();
  if (!names.length) return h('p', { class: 'muted' }, 'No GPUs held.');
  return h('div', { class: 'pernode' }, names.map((n) => {
    const node = nodes.get(n);
    const count = node ? node.gpu_count : 0;
    const cells = [];
    for (let g = 0; g < count; g++) {
      const task = mine.get(`${n}/${g}`);
      const label = `${n} GPU ${g}: ${task ? `task ${task}` : node.gpus[g].state}`;
      cells.push(h('span', {
        class: `gpu ${task ? 'gpu-used' : `gpu-${node.gpus[g].state} other`}`, title: label, role: 'img', 'aria-label': label,
        style: task ? `background:${jobColour(job.name)}` : null, dataset: { node: n, gpu: String(g), task: task || '' },
      }, String(g)));
    }
    return h('div', { class: 'pernode-node' }, h('a', { href: `#/nodes?q=${encodeURIComponent(n)}` }, n), ' ',
      h('span', { class: 'bitmap-row' }, cells));
  }));
}

function timeline(job) {
  const events = (job.events || []).slice().sort((a, b) => a.time_unix_ms - b.time_unix_ms);
  if (!events.length) return h('p', { class: 'muted' }, 'No events.');
  const t0 = events[0].time_unix_ms;
  return h('ol', { class: 'timeline', id: 'events' }, events.map((e) => h('li', { class: `ev ev-${e.kind}` },
    h('time', { datetime: new Date(e.time_unix_ms).toISOString() }, `+${((e.time_unix_ms - t0) / 1000).toFixed(1)}s`),
    ' ', h('strong', {}, e.kind), ' ', e.text)));
}

// A task's ended attempts by class, e.g. "2 FAILED, 1 PREEMPTED".
function attemptClasses(t) {
  const counts = new Map();
  for (const a of t.attempts || []) counts.set(a.class, (counts.get(a.class) || 0) + 1);
  return [...counts].map(([c, n]) => `${n} ${c}`).join(', ');
}

// What its restart budgets have left: the limited ones ("failure budget 1
// of 2 left"); "unlimited" when none is.
function budgetsLeft(t) {
  const limited = (t.restart_budgets || []).filter((b) => b.limit >= 0).map((b) => b.text);
  return limited.length ? limited.join(', ') : 'unlimited';
}

// Tasks that restarted or ended other than SUCCEEDED: each attempt's class
// (docs/job-spec.md, "Restart budgets") and the budgets left.
function restarts(job) {
  const rows = job.tasks
    .filter((t) => t.restarts > 0 || (t.attempts || []).some((a) => a.class !== 'SUCCEEDED'))
    .map((t) => [t.name, t.restarts, attemptClasses(t), budgetsLeft(t), exitCause(t.last_exit)]);
  const evs = (job.events || []).filter((e) => /restart/.test(e.kind));
  return h('div', {}, table('Restarts', ['Task', 'Restarts', 'Ended attempts', 'Budgets left', 'Cause of the last'], rows,
    { id: 'attempts' }),
    evs.length ? h('ul', {}, evs.map((e) => h('li', {}, `${when(e.time_unix_ms)}: ${e.text}`))) : null);
}

export function mount(main, params) {
  const name = params.get('job');
  const head = h('div', {});
  const body = h('div', {});
  const logs = new LogViewer(name);
  const resources = new ResourcesView(name);
  const kill = async () => {
    if (!confirm(`Kill job ${name}? Its tasks are stopped.`)) return;
    try {
      await postJson(`${jobPath(name)}/kill`, { reason: 'killed from the dashboard' });
    } catch (e) {
      alert(`Kill failed: ${e.message}`);
    }
  };
  main.append(head, body, section('Resources', resources.el), section('Logs', logs.el));
  resources.start();
  // The time left counts down between the job's changes (which redraw it).
  const ticker = setInterval(() => { const el = head.querySelector('#time-left'); if (el && el.tick) el.tick(); }, 1000);
  return {
    topics: ['jobs', 'nodes'],
    async refresh() {
      let job;
      try {
        job = await getJson(jobPath(name));
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) {
          head.replaceChildren(h('h1', {}, `Job ${name}`), h('p', { class: 'error', role: 'alert' }, e.message));
          return;
        }
        throw e;
      }
      const fetchedAt = Date.now();  // time_left_ms was measured just before
      const used = [...new Set(job.tasks.filter((t) => t.node).map((t) => t.node))];
      const nodes = new Map();
      await Promise.all(used.map(async (n) => {
        try { nodes.set(n, await getJson(`/api/v1/nodes/${encodeURIComponent(n)}`)); } catch (e) { /* gone: drawn without */ }
      }));
      head.replaceChildren(header(job, kill, fetchedAt));
      body.replaceChildren(...[services(job)].filter(Boolean), section('Tasks', tasksTable(job)),
        section('GPUs per node', gpusPerNode(job, nodes)),
        section('Restarts', restarts(job)), section('Events', timeline(job)));
      logs.update(job.tasks);
      main.dataset.ready = 'job';
    },
    dispose() {
      clearInterval(ticker);
      logs.stop();
      resources.stop();
    },
  };
}
