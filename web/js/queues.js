// Queues: the resource view per queue and per user: capacity, max
// capacity, used, pending, fair share, and who waits and why.
import { h, table, section, jobLink, mib, cores, ago, gpusUsed } from './dom.js';
import { getJson } from './api.js';

// A queue's share of the cluster's GPUs: guaranteed by its capacity, and
// its fair share by weight among the queues (what Fair-DRF aims at when
// every queue has demand).
function shares(q, all, cluster) {
  const weights = all.reduce((s, x) => s + (x.weight || 0), 0);
  return {
    guaranteed: Math.floor((cluster.gpus * q.capacity_percent) / 100),
    max: Math.floor((cluster.gpus * q.max_capacity_percent) / 100),
    fair: weights > 0 ? ((cluster.gpus * (q.weight || 0)) / weights).toFixed(1) : '—',
  };
}

function queueSection(q, all, cluster, waiting) {
  const s = shares(q, all, cluster);
  return h('section', { class: 'queue', dataset: { queue: q.name }, 'aria-label': `queue ${q.name}` },
    h('h2', {}, `Queue ${q.name}`),
    table(`Queue ${q.name} resources`, ['Capacity', 'Max capacity', 'Weight', 'Fair share (GPUs)', 'GPUs used', 'CPU used', 'Memory used', 'Running jobs', 'Pending jobs'],
      [[`${q.capacity_percent}% (${s.guaranteed} GPUs)`, `${q.max_capacity_percent}% (${s.max} GPUs)`, q.weight, s.fair,
        gpusUsed(q.used), cores(q.used.vcores_milli), mib(q.used.memory_mb), q.running_jobs, q.pending_jobs]]),
    table(`Queue ${q.name} by user`, ['User', 'GPUs used', 'CPU used', 'Memory used', 'Running jobs', 'Pending jobs'],
      q.users.map((u) => [u.user, gpusUsed(u.used), cores(u.used.vcores_milli), mib(u.used.memory_mb), u.running_jobs, u.pending_jobs])),
    table(`Who waits in ${q.name}, and why`, ['Job', 'User', 'Tasks', 'Waiting for', 'Why it waits'],
      waiting.map((j) => [jobLink(j.name), j.user, j.tasks.length, ago(j.submit_time_unix_ms),
        h('span', { class: 'reason' }, j.pending_reason || j.reason || '—')]), { class: 'waiting' }));
}

export function mount(main) {
  const body = h('div', {});
  main.append(h('h1', {}, 'Queues'), body);
  return {
    topics: ['queues', 'jobs'],
    async refresh() {
      const [q, j] = await Promise.all([getJson('/api/v1/queues'), getJson('/api/v1/jobs?state=QUEUED')]);
      const c = q.cluster;
      body.replaceChildren(
        h('p', {}, `Cluster: ${c.gpus} GPUs, ${cores(c.vcores_milli)} CPU cores, ${mib(c.memory_mb)} memory.`),
        ...q.queues.map((x) => queueSection(x, q.queues, c, j.jobs.filter((job) => job.queue === x.name))));
      main.dataset.ready = 'queues';
    },
  };
}
