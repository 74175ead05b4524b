// History: finished jobs as accounting keeps them (deleted ones too) and
// usage per user and per queue over a period, from /api/v1/accounting/.
// The filters live in the URL so a filtered history can be shared.
import { h, table, section, jobLink, stateBadge, when, duration } from './dom.js';
import { getJson } from './api.js';

const kPeriods = [['1', 'last day'], ['7', 'last 7 days'], ['30', 'last 30 days'], ['365', 'last year']];
const kStates = ['', 'SUCCEEDED', 'FAILED', 'KILLED', 'DEADLINE_EXCEEDED'];
const kRows = 500;  // one page: the jobs that ended last

function field(id, label, input) {
  return h('span', { class: 'field' }, h('label', { for: id }, label), ' ', input);
}

const hours = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(2));

function exitText(a) {
  if (!a.exit_code && !a.exit_signal) return '0';
  return `${a.exit_signal ? `signal ${a.exit_signal}` : a.exit_code} (${a.exit_task})`;
}

function usageTable(caption, by, usage) {
  const rows = usage.rows.map((r) => [r[by], r.jobs, r.succeeded, r.failed, r.killed + r.deadline_exceeded,
    hours(r.gpu_hours), hours(r.cpu_hours), hours(r.elapsed_hours), duration(r.mean_wait_s * 1000)]);
  const t = usage.total;
  rows.push([h('strong', {}, 'Total'), t.jobs, t.succeeded, t.failed, t.killed + t.deadline_exceeded,
    hours(t.gpu_hours), hours(t.cpu_hours), hours(t.elapsed_hours), duration(t.mean_wait_s * 1000)]);
  return table(caption, [by === 'user' ? 'User' : 'Queue', 'Jobs', 'Succeeded', 'Failed', 'Killed or timed out',
    'GPU-hours', 'CPU-hours', 'Run hours', 'Mean wait'], rows, { class: 'usage', id: `usage-by-${by}` });
}

export function mount(main, params) {
  const days = kPeriods.some(([d]) => d === params.get('days')) ? params.get('days') : '7';
  const period = h('select', { id: 'h-period' }, kPeriods.map(([d, text]) => h('option', { value: d, selected: d === days }, text)));
  const state = h('select', { id: 'h-state' }, kStates.map((s) => h('option', { value: s, selected: params.get('state') === s }, s || 'any end')));
  const user = h('input', { id: 'h-user', value: params.get('user') || '', size: 10 });
  const queue = h('input', { id: 'h-queue', value: params.get('queue') || '', size: 10 });
  const apply = (e) => {
    e.preventDefault();
    const p = new URLSearchParams({ days: period.value });
    if (state.value) p.set('state', state.value);
    if (user.value.trim()) p.set('user', user.value.trim());
    if (queue.value.trim()) p.set('queue', queue.value.trim());
    location.hash = `#/history?${p}`;
  };
  const form = h('form', { class: 'filters', onsubmit: apply, 'aria-label': 'History filters' },
    field('h-period', 'Ended in the', period), field('h-state', 'State', state),
    field('h-user', 'User', user), field('h-queue', 'Queue', queue), h('button', { type: 'submit' }, 'Show'));
  const body = h('div', {});
  main.append(h('h1', {}, 'History'), form, body);
  return {
    topics: ['jobs'],
    async refresh() {
      const since = Date.now() - Number(days) * 24 * 3600 * 1000;
      const filters = new URLSearchParams({ since: String(since) });
      for (const k of ['user', 'queue']) if (params.get(k)) filters.set(k, params.get(k));
      const jobsQuery = new URLSearchParams(filters);
      if (params.get('state')) jobsQuery.set('state', params.get('state'));
      jobsQuery.set('limit', String(kRows));
      jobsQuery.set('order', 'newest');
      const [jobs, byUser, byQueue] = await Promise.all([
        getJson(`/api/v1/accounting/jobs?${jobsQuery}`),
        getJson(`/api/v1/accounting/usage?${filters}&by=user`),
        getJson(`/api/v1/accounting/usage?${filters}&by=queue`)]);
      // Newest end first; the rest are a CSV away (trainyard history -o csv).
      const shown = jobs.jobs;
      body.replaceChildren(
        section('Usage', usageTable('Usage by user', 'user', byUser), usageTable('Usage by queue', 'queue', byQueue)),
        section('Finished jobs',
          h('p', {}, jobs.next_cursor ? `More than ${kRows} jobs ended in the period; the ${kRows} that ended last are shown ` +
            '(trainyard history -o csv lists them all).' : `${shown.length} jobs ended in the period.`),
          table('Finished jobs', ['Job', 'State', 'User', 'Queue', 'Ended', 'Waited', 'Ran', 'GPUs', 'GPU-hours', 'Attempts', 'Exit'],
            shown.map((a) => [a.deleted ? h('span', { title: 'deleted' }, `${a.name} (deleted)`) : jobLink(a.name),
              stateBadge(a.state), a.user, a.queue, when(a.end_time_unix_ms), duration(a.wait_ms), duration(a.elapsed_ms),
              a.gpus, hours(a.gpu_hours) + (a.settled ? '' : ' (stopping)'), a.attempts, exitText(a)]),
            { class: 'history', id: 'history-list' })));
      main.dataset.ready = 'history';
    },
  };
}
