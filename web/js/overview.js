// Cluster overview: GPUs allocated / free / excluded in all and by queue,
// user and GPU model; jobs by state; nodes by state. The figures come added
// up from /api/v1/overview, so the page stays small on a large cluster.
import { h, table, section, stateBadge } from './dom.js';
import { getJson } from './api.js';

const kJobStates = ['QUEUED', 'SCHEDULED', 'STARTING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'KILLED'];

function stat(label, value, extra) {
  return h('div', { class: 'stat' }, h('div', { class: 'stat-value' }, value), h('div', { class: 'stat-label' }, label),
    extra ? h('div', { class: 'stat-extra' }, extra) : null);
}

// A bar of allocated / free / excluded, labelled in words for readers
// that do not see it.
function gpuBar(t) {
  const pct = (x) => (t.total ? (100 * x) / t.total : 0);
  return h('div', { class: 'bar', role: 'img', 'aria-label': `${t.allocated} allocated, ${t.free} free, ${t.excluded} excluded of ${t.total} GPUs` },
    h('span', { class: 'bar-used', style: `width:${pct(t.allocated)}%` }),
    h('span', { class: 'bar-excluded', style: `width:${pct(t.excluded)}%` }));
}

function byUser(queues) {
  const m = new Map();
  for (const q of queues.queues) {
    for (const u of q.users) {
      const t = m.get(u.user) || { gpus: 0, running: 0, pending: 0 };
      t.gpus += u.used.gpus;
      t.running += u.running_jobs;
      t.pending += u.pending_jobs;
      m.set(u.user, t);
    }
  }
  return [...m.entries()].sort().map(([u, t]) => [u, t.gpus, t.running, t.pending]);
}

function draw(body, o) {
  const t = o.gpus;
  const nodeStates = Object.entries(o.nodes_by_state).sort();
  const nodes = nodeStates.reduce((s, [, n]) => s + n, 0);
  body.replaceChildren(
    h('div', { class: 'stats' },
      stat('GPUs allocated', t.allocated, `of ${t.total}`),
      stat('GPUs free', t.free),
      stat('GPUs excluded', t.excluded, 'busy outside Trainyard'),
      stat('Nodes', nodes, nodeStates.map(([s, n]) => `${n} ${s}`).join(', ')),
      stat('Jobs running', o.jobs_by_state.RUNNING || 0),
      stat('Jobs queued', o.jobs_by_state.QUEUED || 0)),
    gpuBar(t),
    h('div', { class: 'columns' },
      section('Jobs by state', table('Jobs by state', ['State', 'Jobs'],
        kJobStates.map((s) => [h('a', { href: `#/jobs?state=${s}` }, stateBadge(s)), o.jobs_by_state[s] || 0]))),
      section('Nodes by state', table('Nodes by state', ['State', 'Nodes'],
        nodeStates.map(([s, n]) => [h('a', { href: `#/nodes?q=${s}` }, stateBadge(s)), n])))),
    section('GPUs by queue', table('GPUs by queue', ['Queue', 'GPUs used', 'Capacity', 'Running jobs', 'Pending jobs'],
      o.queues.queues.map((q) => [h('a', { href: '#/queues' }, q.name), q.used.gpus, `${q.capacity_percent}%`, q.running_jobs, q.pending_jobs]))),
    section('GPUs by user', table('GPUs by user', ['User', 'GPUs used', 'Running jobs', 'Pending jobs'], byUser(o.queues))),
    section('GPUs by model', table('GPUs by GPU model', ['Model', 'Nodes', 'GPUs', 'Allocated', 'Free', 'Excluded', 'Use'],
      o.gpus_by_model.map((m) => [m.model, m.nodes, m.total, m.allocated, m.free, m.excluded, gpuBar(m)]))));
}

export function mount(main) {
  const body = h('div', {});
  main.append(h('h1', {}, 'Cluster overview'), body);
  return {
    topics: ['jobs', 'nodes', 'queues'],
    async refresh() {
      draw(body, await getJson('/api/v1/overview'));
      main.dataset.ready = 'overview';
    },
  };
}
