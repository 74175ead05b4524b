// Jobs: the list with filters (state, user, queue, finished ones too); the
// filters live in the URL so a filtered list can be shared.
import { h, table, jobLink, stateBadge, ago } from './dom.js';
import { getJson } from './api.js';

const kStates = ['', 'QUEUED', 'SCHEDULED', 'STARTING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'KILLED', 'DEADLINE_EXCEEDED'];
const kRunning = 'QUEUED,SCHEDULED,STARTING,RUNNING';

function field(id, label, input) {
  return h('span', { class: 'field' }, h('label', { for: id }, label), ' ', input);
}

function query(params) {
  const q = new URLSearchParams();
  for (const k of ['state', 'user', 'queue']) if (params.get(k)) q.set(k, params.get(k));
  if (params.get('all') === 'true' && !params.get('state')) q.set('all', 'true');
  return q.toString();
}

export function mount(main, params) {
  const state = h('select', { id: 'f-state' }, kStates.map((s) => h('option', { value: s, selected: params.get('state') === s }, s || 'live (not finished)')),
    h('option', { value: 'ALL', selected: params.get('all') === 'true' && !params.get('state') }, 'all'));
  const user = h('input', { id: 'f-user', value: params.get('user') || '', size: 10 });
  const queue = h('input', { id: 'f-queue', value: params.get('queue') || '', size: 10 });
  const apply = (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    if (state.value === 'ALL') p.set('all', 'true');
    else if (state.value) p.set('state', state.value);
    if (user.value.trim()) p.set('user', user.value.trim());
    if (queue.value.trim()) p.set('queue', queue.value.trim());
    location.hash = `#/jobs${p.toString() ? `?${p}` : ''}`;
  };
  const form = h('form', { class: 'filters', onsubmit: apply, 'aria-label': 'Job filters' },
    field('f-state', 'State', state), field('f-user', 'User', user), field('f-queue', 'Queue', queue),
    h('button', { type: 'submit' }, 'Filter'),
    h('a', { href: `#/jobs?state=${kRunning}` }, 'running list'));
  const body = h('div', {});
  main.append(h('h1', {}, 'Jobs'), form, body);
  return {
    topics: ['jobs'],
    async refresh() {
      const q = query(params);
      const j = await getJson(`/api/v1/jobs${q ? `?${q}` : ''}`);
      const jobs = j.jobs.slice().sort((a, b) => b.id - a.id);
      body.replaceChildren(table(`${jobs.length} jobs`, ['Job', 'State', 'User', 'Queue', 'Priority', 'GPUs held', 'Tasks', 'Age', 'Reason'],
        jobs.map((x) => [jobLink(x.name), stateBadge(x.state), x.user, x.queue, x.priority, x.gpus, x.tasks.length,
          ago(x.submit_time_unix_ms), h('span', { class: 'reason' }, x.pending_reason || x.reason || '')]), { class: 'jobs', id: 'job-list' }));
      main.dataset.ready = 'jobs';
    },
  };
}
