// Cluster overview: GPUs allocated / free / excluded in all and by queue,
// user and GPU model; jobs by state; nodes by state. The figures come added
// up from /api/v1/overview, so the page stays small on a large cluster.
// Below them, charts over time from the server's history ring
// (/api/v1/history): asked for whole once, then only the samples after
// the last one, every sampling interval.
import { h, table, section, stateBadge, gpusUsed, when, ago } from './dom.js';
import { getJson, ApiError } from './api.js';
import { lineChart, seconds, kPalette } from './charts.js';

const kJobStates = ['QUEUED', 'SCHEDULED', 'STARTING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'KILLED', 'DEADLINE_EXCEEDED'];

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
      const t = m.get(u.user) || { milli: 0, running: 0, pending: 0 };
      // Thousandths summed as integers, so 0.1 + 0.2 shows 0.3.
      t.milli += Math.round(gpusUsed(u.used) * 1000);
      t.running += u.running_jobs;
      t.pending += u.pending_jobs;
      m.set(u.user, t);
    }
  }
  return [...m.entries()].sort().map(([u, t]) => [u, t.milli / 1000, t.running, t.pending]);
}

// Leaders deposed by reason ("fenced": etcd refused a write of the old
// leader), with the latest one's server, time and reason.
function depositions(all) {
  const list = all.filter((d) => d.count > 0);
  if (!list.length) return 'none';
  const byReason = list.map((d) => `${d.count} ${d.reason}`).join(', ');
  const last = list.reduce((a, b) => (b.last_unix_ms > a.last_unix_ms ? b : a));
  return `${byReason}; the latest ${last.last_server} ${ago(last.last_unix_ms)} ago (${last.reason}: ${last.last_why})`;
}

// Who leads the control plane (docs/deploy.md): this server with SQLite,
// or the leader of servers sharing etcd, with its standbys.
function controlPlane(c) {
  if (!c) return null;
  const since = `${when(c.leader_since_unix_ms)} (${ago(c.leader_since_unix_ms)})`;
  const rows = c.store === 'etcd'
    ? [['Leader', c.server_address], ['Leading since', since],
      ['Leaderships', `${c.leader_terms} so far, this one's included`],
      ['Standbys', c.standbys.length ? c.standbys.join(', ') : 'none'],
      ['Leaders deposed', depositions(c.depositions || [])],
      ['Store', `etcd at ${c.etcd_endpoints.join(', ')}`]]
    : [['Server', c.server_address], ['Up since', since], ['Store', 'SQLite in its data dir (one server, no standby)']];
  return section('Control plane', table('Control plane', ['What', 'Value'], rows,
    { class: 'control-plane' }));
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
    controlPlane(o.control_plane),
    h('div', { class: 'columns' },
      section('Jobs by state', table('Jobs by state', ['State', 'Jobs'],
        kJobStates.map((s) => [h('a', { href: `#/jobs?state=${s}` }, stateBadge(s)), o.jobs_by_state[s] || 0]))),
      section('Nodes by state', table('Nodes by state', ['State', 'Nodes'],
        nodeStates.map(([s, n]) => [h('a', { href: `#/nodes?q=${s}` }, stateBadge(s)), n])))),
    section('GPUs by queue', table('GPUs by queue', ['Queue', 'GPUs used', 'Capacity', 'Running jobs', 'Pending jobs'],
      o.queues.queues.map((q) => [h('a', { href: '#/queues' }, q.name), gpusUsed(q.used), `${q.capacity_percent}%`, q.running_jobs, q.pending_jobs]))),
    section('GPUs by user', table('GPUs by user', ['User', 'GPUs used', 'Running jobs', 'Pending jobs'], byUser(o.queues))),
    section('GPUs by model', table('GPUs by GPU model', ['Model', 'Nodes', 'GPUs', 'Allocated', 'Free', 'Excluded', 'Use'],
      o.gpus_by_model.map((m) => [m.model, m.nodes, m.total, m.allocated, m.free, m.excluded, gpuBar(m)]))));
}

const kRanges = [['15', 'Last 15 minutes'], ['60', 'Last hour'], ['all', 'All kept']];

// The three charts of `samples` over the chosen range. A gap of more than
// three intervals (the server was down: its ring starts again empty)
// breaks the lines.
function drawCharts(box, samples, range, intervalMs) {
  if (!samples.length) {
    box.replaceChildren(h('p', { class: 'muted' }, 'No samples yet.'));
    return;
  }
  const to = samples[samples.length - 1].unix_ms;
  const from = range === 'all' ? samples[0].unix_ms : Math.max(samples[0].unix_ms, to - Number(range) * 60000);
  const shown = samples.filter((s) => s.unix_ms >= from);
  const gapBefore = shown.map((s, i) => i > 0 && s.unix_ms - shown[i - 1].unix_ms > 3 * intervalMs);
  const series = (key, name, value, extra = {}) => ({
    key, name, ...extra,
    points: shown.flatMap((s, i) => (gapBefore[i] ? [[s.unix_ms - 1, null], [s.unix_ms, value(s)]] : [[s.unix_ms, value(s)]])),
  });
  const queueNames = [...new Set(shown.flatMap((s) => s.queues.map((q) => q.name)))];
  const ofQueue = (s, name) => s.queues.find((q) => q.name === name);
  box.replaceChildren(
    lineChart({ id: 'gpus', title: 'GPUs allocated', from, to, series: [
      series('allocated', 'allocated', (s) => s.gpus.allocated, { colour: kPalette[0] }),
      series('total', 'total', (s) => s.gpus.total, { colour: kPalette[7], dashed: true }),
      series('excluded', 'excluded', (s) => s.gpus.excluded, { colour: kPalette[4] })] }),
    lineChart({ id: 'queued', title: 'Jobs waiting, by queue', from, to, series:
      queueNames.map((n, i) => series(`queue-${n}`, n, (s) => ofQueue(s, n)?.pending_jobs ?? null, { colour: kPalette[i % kPalette.length] })) }),
    lineChart({ id: 'wait', title: 'Time waiting to start', from, to, format: seconds, least: 10, series: [
      series('mean-wait', 'mean wait of jobs started', (s) => s.mean_wait_s, { colour: kPalette[0] }),
      ...queueNames.map((n, i) => series(`longest-${n}`, `longest wait in ${n}`,
        (s) => ofQueue(s, n)?.longest_wait_s ?? null, { colour: kPalette[(i + 1) % kPalette.length], dashed: true }))] }));
}

export function mount(main) {
  const body = h('div', {});
  const range = h('select', { id: 'chart-range' }, kRanges.map(([v, text]) => h('option', { value: v }, text)));
  range.value = 'all';
  const charts = h('div', { class: 'charts' });
  const note = h('p', { class: 'muted' });
  main.append(h('h1', {}, 'Cluster overview'), body,
    section('Over time', h('p', {}, h('label', { for: 'chart-range' }, 'Show '), range, ' ', note), charts));
  let samples = [];
  let keepMs = 0;
  let intervalMs = 10000;
  let timer = null;
  let stopped = false;
  const load = async () => {
    timer = null;
    let wait = 10000;
    try {
      const since = samples.length ? samples[samples.length - 1].unix_ms : 0;
      const r = await getJson(`/api/v1/history?since=${since}`);
      keepMs = r.retention_ms;
      intervalMs = r.interval_ms;
      samples = samples.concat(r.samples);
      const newest = samples.length ? samples[samples.length - 1].unix_ms : 0;
      samples = samples.filter((s) => s.unix_ms > newest - keepMs);
      note.textContent = `a sample every ${seconds(r.interval_ms / 1000)}, kept ${seconds(r.retention_ms / 1000)}`;
      drawCharts(charts, samples, range.value, intervalMs);
      wait = Math.max(1000, r.interval_ms);
    } catch (e) {
      charts.replaceChildren(h('p', { class: 'muted' },
        e instanceof ApiError && e.status === 404 ? `No charts: ${e.message}.` : `Could not load the history: ${e.message}`));
    }
    if (!stopped) timer = setTimeout(load, wait);
  };
  range.addEventListener('change', () => drawCharts(charts, samples, range.value, intervalMs));
  load();
  return {
    topics: ['jobs', 'nodes', 'queues'],
    async refresh() {
      draw(body, await getJson('/api/v1/overview'));
      main.dataset.ready = 'overview';
    },
    dispose() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
