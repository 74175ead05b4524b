// Schedules: jobs submitted on a cron schedule (`trainyard schedule`),
// from /api/v1/schedules: each with its cron and time zone, concurrency
// policy, state, next run, running jobs, and its recent runs (when due,
// what happened, the job). Refreshed when jobs change (a run is a job),
// and every 10 s (a run comes due on its own).
import { h, table, section, jobLink, when } from './dom.js';
import { getJson } from './api.js';

function runsTable(s) {
  const rows = s.runs.slice().reverse().map((r) => [when(r.time_unix_ms), r.outcome + (r.by_hand ? ' (by hand)' : ''),
    r.job ? jobLink(r.job) : '—', r.message || '']);
  return table(`Runs of ${s.name}, newest first`, ['Due', 'Outcome', 'Job', 'Note'], rows, { class: 'schedule-runs', id: `runs-${s.name}` });
}

export function mount(main) {
  const body = h('div', {});
  main.append(h('h1', {}, 'Schedules'), body);
  let timer = null;
  const page = {
    topics: ['jobs'],
    async refresh() {
      const { schedules } = await getJson('/api/v1/schedules');
      if (!schedules.length) {
        body.replaceChildren(h('p', { class: 'muted' }, 'No schedules. Make one with trainyard schedule create NAME --cron "0 2 * * *" SPEC.'));
      } else {
        const rows = schedules.map((s) => {
          const last = s.runs.length ? s.runs[s.runs.length - 1] : null;
          return [s.name, s.user, s.queue, `${s.cron} (${s.time_zone})`, s.concurrency,
            h('span', { class: `state state-${s.paused ? 'cordoned' : 'running'}` }, s.paused ? 'PAUSED' : 'ACTIVE'),
            s.next_run_unix_ms ? when(s.next_run_unix_ms) : '—',
            last ? h('span', {}, `${when(last.time_unix_ms)} ${last.outcome}`, last.job ? [' ', jobLink(last.job)] : []) : '—',
            s.live_jobs.length ? h('span', {}, s.live_jobs.flatMap((j, i) => (i ? [', ', jobLink(j)] : [jobLink(j)]))) : 'none'];
        });
        body.replaceChildren(
          table('Schedules', ['Name', 'User', 'Queue', 'Cron', 'Concurrency', 'State', 'Next run', 'Last run', 'Running'], rows, { id: 'schedules' }),
          ...schedules.map((s) => section(`Runs of ${s.name}`, runsTable(s))));
      }
      main.dataset.ready = 'schedules';
    },
    dispose() {
      if (timer) clearInterval(timer);
    },
  };
  timer = setInterval(() => page.refresh().catch(() => {}), 10000);
  return page;
}
