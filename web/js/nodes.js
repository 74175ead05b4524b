// Nodes: every node's GPUs drawn as its bitmap, grouped by the topology the
// nodes API gives (CPU socket, then PCIe switch; NVLink islands outlined),
// each GPU coloured by the job that holds it; hover or click for the task.
// Ports, labels and the node's state (LOST, cordoned/draining) beside it.
import { h, stateBadge, jobColour, jobOfTask, jobLink, mib, cores, ports, ago } from './dom.js';
import { getJson } from './api.js';

// Groups GPU indices by a key of each GPU, in index order.
function groupBy(gpus, key) {
  const m = new Map();
  for (const g of gpus) {
    const k = key(g);
    if (!m.has(k)) m.set(k, []);
    m.get(k).push(g);
  }
  return [...m.entries()];
}

function gpuCell(node, g, select) {
  const job = g.task ? (g.job || jobOfTask(g.task)) : '';
  const what = g.state === 'used' ? `held by ${g.task || 'a task'}${job ? ` of job ${job}` : ''}`
    : g.state === 'excluded' ? 'excluded: busy with a process Trainyard did not start' : 'free';
  const label = `${node.name} GPU ${g.index}: ${what}`;
  return h('button', {
    type: 'button', class: `gpu gpu-${g.state}`, title: label, 'aria-label': label,
    style: job ? `background:${jobColour(job)}` : null,
    dataset: { node: node.name, gpu: String(g.index), state: g.state, task: g.task || '', job },
    onclick: () => select(node, g, job),
  }, String(g.index));
}

function bitmap(node, select) {
  const sockets = groupBy(node.gpus, (g) => g.socket);
  return h('div', { class: 'bitmap', role: 'group', 'aria-label': `GPUs of ${node.name}` },
    sockets.map(([socket, gpus]) => h('div', { class: 'socket', title: socket >= 0 ? `CPU socket ${socket}` : 'no socket given' },
      groupBy(gpus, (g) => g.switch).map(([sw, list]) => h('div', {
        class: 'switch', title: sw >= 0 ? `PCIe switch ${sw}` : 'no switch given',
      }, list.map((g) => h('span', { class: g.nvlink_island >= 0 ? `island island-${g.nvlink_island % 4}` : '' },
        gpuCell(node, g, select))))))));
}

function stateText(s) {
  return s === 'DRAINING' ? 'DRAINING (cordoned, tasks moving away)' : s;
}

function nodeCard(node, select) {
  const labels = Object.entries(node.labels || {});
  return h('article', { class: `node node-${node.state.toLowerCase()}`, dataset: { node: node.name }, 'aria-label': `node ${node.name}` },
    h('h2', {}, node.name, ' ', stateBadge(stateText(node.state))),
    h('p', { class: 'muted' }, [node.address, node.rack && `rack ${node.rack}`, node.data_center].filter(Boolean).join(' · ')),
    node.reason ? h('p', { class: 'node-reason' }, `Takes no tasks: ${node.reason}`) : null,
    bitmap(node, select),
    h('dl', { class: 'facts' },
      h('dt', {}, 'GPUs'), h('dd', {}, `${node.allocated_gpus} used, ${node.free_gpus.length} free, ${node.excluded_gpus.length} excluded of ${node.gpu_count}`),
      h('dt', {}, 'CPU'), h('dd', {}, `${cores(node.free.vcores_milli)} free of ${cores(node.capacity.vcores_milli)}`),
      h('dt', {}, 'Memory'), h('dd', {}, `${mib(node.free.memory_mb)} free of ${mib(node.capacity.memory_mb)}`),
      h('dt', {}, 'Ports'), h('dd', {}, `${ports(node.capacity.ports)}; ${node.ports_in_use} in use`),
      h('dt', {}, 'Labels'), h('dd', {}, labels.length ? labels.map(([k, v]) => h('span', { class: 'label' }, `${k}=${v}`)) : '—'),
      h('dt', {}, 'Heartbeat'), h('dd', {}, node.last_heartbeat_unix_ms ? `${ago(node.last_heartbeat_unix_ms)} ago` : '—')));
}

function legend() {
  return h('p', { class: 'legend' }, h('span', { class: 'gpu gpu-free' }, ' '), ' free ',
    h('span', { class: 'gpu gpu-used' }, ' '), ' held (coloured by job) ',
    h('span', { class: 'gpu gpu-excluded' }, ' '), ' excluded · boxes: CPU socket, then PCIe switch; underline: NVLink island');
}

export function mount(main, params) {
  const detail = h('div', { class: 'detail', role: 'status', 'aria-live': 'polite' }, 'Click a GPU for its task.');
  const filter = h('input', { type: 'search', id: 'node-filter', placeholder: 'name, label or state', value: params.get('q') || '' });
  const list = h('div', { class: 'nodes' });
  let data = null;
  const select = (node, g, job) => {
    detail.replaceChildren(h('strong', {}, `${node.name} GPU ${g.index}`), ': ',
      h('span', {}, g.state === 'used' ? [`task ${g.task || '?'}`, job ? [' of job ', jobLink(job)] : ''] : g.state),
      ` · socket ${g.socket}, switch ${g.switch}${g.nvlink_island >= 0 ? `, NVLink island ${g.nvlink_island}` : ''}`);
  };
  const draw = () => {
    if (!data) return;
    const q = filter.value.trim().toLowerCase();
    const shown = data.nodes.filter((n) => !q || n.name.toLowerCase().includes(q) || n.state.toLowerCase() === q ||
      Object.entries(n.labels || {}).some(([k, v]) => `${k}=${v}`.toLowerCase().includes(q)));
    list.replaceChildren(...shown.map((n) => nodeCard(n, select)));
  };
  filter.addEventListener('input', draw);
  main.append(h('h1', {}, 'Nodes'), legend(),
    h('p', {}, h('label', { for: 'node-filter' }, 'Filter nodes '), filter), detail, list);
  return {
    // A GPU's task and job come with the nodes (a node's view changes when
    // a task is placed on it or leaves), so the page reads nothing else.
    topics: ['nodes'],
    async refresh() {
      data = { nodes: (await getJson('/api/v1/nodes')).nodes };
      draw();
      main.dataset.ready = 'nodes';
    },
  };
}
