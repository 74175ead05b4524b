// Cluster overview: GPUs allocated / free / excluded in all and by queue,
// user and GPU model; jobs by state; nodes by state.
import { h, table, section, gpuModel, stateBadge } from './dom.js';
import { getJson } from './api.js';

const kJobStates = ['QUEUED', 'SCHEDULED', 'STARTING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'KILLED'];

function countBy(items, key) {
  const out = new Map();
  for (const it of items) out.set(key(it), (out.get(key(it)) || 0) + 1);
  return out;
}

function gpuTotals(nodes) {
  const t = { total: 0, allocated: 0, free: 0, excluded: 0 };
  for (const n of nodes) {
    t.total += n.gpu_count;
    t.allocated += n.allocated_gpus;
    t.free += n.free_gpus.length;
    t.excluded += n.excluded_gpus.length;
  }
  return t;
}

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

function byModel(nodes) {
  const m = new Map();
  for (const n of nodes) {
    const k = gpuModel(n);
    const t = m.get(k) || { nodes: 0, total: 0, allocated: 0, free: 0, excluded: 0 };
    t.nodes += 1;
    t.total += n.gpu_count;
    t.allocated += n.allocated_gpus;
    t.free += n.free_gpus.length;
    t.excluded += n.excluded_gpus.length;
    m.set(k, t);
  }
  return [...m.entries()].sort().map(([k, t]) => [k, t.nodes, t.total, t.allocated, t.free, t.excluded, gpuBar(t)]);
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

function draw(body, nodes, jobs, queues) {
  const t = gpuTotals(nodes);
  const jobStates = countBy(jobs, (j) => j.state);
  const nodeStates = countBy(nodes, (n) => n.state);
  body.replaceChildren(
    h('div', { class: 'stats' },
      stat('GPUs allocated', t.allocated, `of ${t.total}`),
      stat('GPUs free', t.free),
      stat('GPUs excluded', t.excluded, 'busy outside Trainyard'),
      stat('Nodes', nodes.length, [...nodeStates].map(([s, n]) => `${n} ${s}`).join(', ')),
      stat('Jobs running', jobStates.get('RUNNING') || 0),
      stat('Jobs queued', jobStates.get('QUEUED') || 0)),
    gpuBar(t),
    h('div', { class: 'columns' },
      section('Jobs by state', table('Jobs by state', ['State', 'Jobs'],
        kJobStates.map((s) => [h('a', { href: `#/jobs?state=${s}` }, stateBadge(s)), jobStates.get(s) || 0]))),
      section('Nodes by state', table('Nodes by state', ['State', 'Nodes'],
        [...nodeStates].sort().map(([s, n]) => [stateBadge(s), n])))),
    section('GPUs by queue', table('GPUs by queue', ['Queue', 'GPUs used', 'Capacity', 'Running jobs', 'Pending jobs'],
      queues.queues.map((q) => [h('a', { href: '#/queues' }, q.name), q.used.gpus, `${q.capacity_percent}%`, q.running_jobs, q.pending_jobs]))),
    section('GPUs by user', table('GPUs by user', ['User', 'GPUs used', 'Running jobs', 'Pending jobs'], byUser(queues))),
    section('GPUs by model', table('GPUs by GPU model', ['Model', 'Nodes', 'GPUs', 'Allocated', 'Free', 'Excluded', 'Use'], byModel(nodes))));
}

export function mount(main) {
  const body = h('div', {});
  main.append(h('h1', {}, 'Cluster overview'), body);
  let first = true;
  return {
    topics: ['jobs', 'nodes', 'queues'],
    async refresh() {
      const [n, j, q] = await Promise.all([getJson('/api/v1/nodes'), getJson('/api/v1/jobs?all=true'), getJson('/api/v1/queues')]);
      draw(body, n.nodes, j.jobs, q);
      if (first) {
        first = false;
        main.dataset.ready = 'overview';
        performance.mark('overview-drawn');
      }
    },
  };
}
