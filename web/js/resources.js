// A job's task resources on its page: what its running tasks use now (a
// table with a flag on a task near its memory limit) and over the last
// minutes (CPU, memory and GPU charts: the job's sum and its busiest
// tasks), from /api/v1/jobs/{job}/resources: the last 15 minutes once,
// then every few seconds only the samples since the newest held (samples
// arrive between the job's changes), the job's sums added up here.
import { h, table } from './dom.js';
import { getJson, jobPath } from './api.js';
import { lineChart, kPalette } from './charts.js';

const kTasksCharted = 5;  // beside the job's sum, the busiest tasks
const kKeepMs = 15 * 60 * 1000;  // as the server keeps them

// 512 MiB, 1.5 GiB.
export function bytes(b) {
  if (b === null || b === undefined) return '—';
  if (b >= 2 ** 30) return `${(b / 2 ** 30).toFixed(1)} GiB`;
  return `${Math.round(b / 2 ** 20)} MiB`;
}
const cores = (milli) => (milli / 1000).toFixed(2);

export class ResourcesView {
  constructor(name) {
    this.name = name;
    this.el = h('div', { id: 'resources' }, h('p', { class: 'muted' }, 'Loading…'));
    this.timer = null;
    this.held = null;  // the answer so far: tasks with their samples
    this.newest = 0;   // the newest sample's time held
  }

  // Takes an answer (the whole window, or what came since this.newest).
  merge(r) {
    const f = Object.fromEntries(r.sample_fields.map((k, i) => [k, i]));
    const before = new Map((this.held ? this.held.tasks : []).map((t) => [t.task, t.samples]));
    for (const t of r.tasks) {
      const old = before.get(t.task) || [];
      const last = old.length ? old[old.length - 1][f.time_unix_ms] : -1;
      t.samples = old.concat(t.samples.filter((s) => s[f.time_unix_ms] > last));
    }
    for (const t of r.tasks) {
      for (const s of t.samples) this.newest = Math.max(this.newest, s[f.time_unix_ms]);
    }
    for (const t of r.tasks) t.samples = t.samples.filter((s) => s[f.time_unix_ms] >= this.newest - kKeepMs);
    // The job's sum per interval, as the server sums them: each task's
    // newest sample at or before the interval's end, if no older than three
    // intervals; a GPU whose load is not known (-1) adds nothing.
    const step = Math.max(r.sample_interval_ms, 1);
    const bucket = (s) => Math.floor(s[f.time_unix_ms] / step);
    const buckets = [...new Set(r.tasks.flatMap((t) => t.samples.map(bucket)))].sort((a, b) => a - b);
    const next = r.tasks.map(() => 0);
    r.totals = buckets.map((b) => {
      let sum = null;
      r.tasks.forEach((t, i) => {
        while (next[i] < t.samples.length && bucket(t.samples[next[i]]) <= b) next[i]++;
        const s = next[i] > 0 ? t.samples[next[i] - 1] : null;
        if (!s || s[f.time_unix_ms] < (b - 2) * step) return;
        sum = sum || s.map(() => 0);
        for (let k = 0; k < s.length; k++) sum[k] = k === f.time_unix_ms ? Math.max(sum[k], s[k]) : sum[k] + Math.max(s[k], 0);
      });
      return sum;
    }).filter((s) => s);
    this.held = r;
    return r;
  }

  start() {
    const tick = async () => {
      try {
        // Inclusive: samples stamped as the newest held may still have come
        // for other tasks (merge keeps each task's once).
        const since = this.newest ? `?since=${this.newest}` : '';
        this.draw(this.merge(await getJson(`${jobPath(this.name)}/resources${since}`)));
      } catch (e) {
        this.el.replaceChildren(h('p', { class: 'error', role: 'alert' }, `Resources: ${e.message}`));
      }
    };
    tick();
    this.timer = setInterval(tick, 5000);
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
  }

  draw(r) {
    const f = Object.fromEntries(r.sample_fields.map((k, i) => [k, i]));
    const sampled = r.tasks.filter((t) => t.samples.length);
    if (!sampled.length) {
      const every = r.sample_interval_ms > 0 ? `every ${r.sample_interval_ms / 1000} s` : 'never (taskSampleIntervalMs is 0)';
      this.el.replaceChildren(h('p', { class: 'muted' }, `No samples yet: agents sample running tasks ${every}.`));
      this.el.dataset.samples = '0';
      return;
    }
    const last = (t) => t.samples[t.samples.length - 1];
    const rows = r.tasks.map((t) => {
      const s = t.samples.length ? last(t) : null;
      const flag = t.near_memory_limit ? h('span', { class: 'state state-failed', title: 'at 90 % of its memory limit or more' }, 'near memory limit') : '';
      return [t.task, t.node || '—', s ? cores(s[f.cpu_milli]) : '—', cores(t.vcores_milli),
        s ? bytes(s[f.memory_bytes]) : '—', t.memory_limit_bytes ? bytes(t.memory_limit_bytes) : '—',
        t.gpu_milli ? (s ? `${s[f.gpu_busy_milli] < 0 ? '?' : cores(s[f.gpu_busy_milli])} of ${cores(t.gpu_milli)}` : '—') : '—',
        t.gpu_milli && s ? bytes(s[f.gpu_memory_bytes]) : '—', flag];
    });
    const times = r.totals.map((s) => s[f.time_unix_ms]);
    const from = Math.min(...times, ...sampled.map((t) => t.samples[0][f.time_unix_ms]));
    const to = Math.max(...times, Date.now() - 1000);
    const gap = 3 * Math.max(r.sample_interval_ms, 1000);
    const points = (samples, field, scale) => {
      const out = [];
      samples.forEach((s, i) => {
        if (i > 0 && s[f.time_unix_ms] - samples[i - 1][f.time_unix_ms] > gap) out.push([s[f.time_unix_ms] - 1, null]);
        out.push([s[f.time_unix_ms], s[field] < 0 ? null : s[field] / scale]);  // -1: not known
      });
      return out;
    };
    const chart = (id, title, field, scale, format, least) => {
      const busiest = sampled.slice().sort((a, b) => last(b)[field] - last(a)[field]).slice(0, kTasksCharted);
      const series = [{ key: 'total', name: 'job', colour: kPalette[7], dashed: true, points: points(r.totals, field, scale) }];
      if (sampled.length > 1 || !r.totals.length) {
        busiest.forEach((t, i) => series.push({ key: `task-${t.task}`, name: t.task, colour: kPalette[i % 7], points: points(t.samples, field, scale) }));
      }
      return lineChart({ id, title, from, to, format, least, series });
    };
    const withGpus = r.tasks.some((t) => t.gpu_milli > 0);
    this.el.replaceChildren(
      table('Resources now', ['Task', 'Node', 'CPU', 'CPU asked', 'Memory', 'Limit', 'GPUs busy', 'GPU memory', 'Note'], rows, { id: 'resources-now' }),
      h('div', { class: 'charts' },
        chart('cpu', 'CPU cores in use', f.cpu_milli, 1000, (v) => v.toFixed(2), 1),
        chart('memory', 'Memory in use', f.memory_bytes, 2 ** 20, (v) => bytes(v * 2 ** 20), 64),
        withGpus ? chart('gpu', 'GPUs busy', f.gpu_busy_milli, 1000, (v) => v.toFixed(1), 1) : null));
    this.el.dataset.samples = String(sampled.reduce((n, t) => n + t.samples.length, 0));
  }
}
