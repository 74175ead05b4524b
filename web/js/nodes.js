// Nodes: the whole cluster at a glance, then one page of nodes at a time.
// At the top, counts by state and GPUs by model, and a heat map of every
// node's GPU use drawn on one canvas from /api/v1/node-summary (one cell
// per node, whatever the cluster's size; click a cell for that node). Below,
// a page of nodes (/api/v1/nodes?limit=..., filtered by the server by name,
// state, GPU model, label and free GPUs), each node's GPUs drawn as its
// bitmap, grouped by the topology the API gives (CPU socket, then PCIe
// switch; NVLink islands outlined), each GPU coloured by the job holding
// it, a GPU split into shares filled by the share held; hover or click for
// every task holding it. A 10,000-node cluster costs the page one
// summary and one page, never the whole list.
import { h, stateBadge, jobColour, jobOfTask, jobLink, mib, cores, ports, ago } from './dom.js';
import { getJson } from './api.js';

const kPerPage = 50;
const kMaxPerPage = 500;
const kStates = ['READY', 'LOST', 'DRAINING', 'CORDONED', 'DEGRADED'];

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

// Every task holding GPU g with its job: one for a whole GPU, one per share
// of a split one.
function holdersOf(g) {
  const list = g.holders && g.holders.length ? g.holders : (g.task ? [{ task: g.task, job: g.job }] : []);
  return list.map((x) => ({ task: x.task, job: x.job || jobOfTask(x.task) }));
}

// The percent of GPU g held: 100 for a whole GPU, the shares' sum for a
// split one.
function usedPercent(g) {
  return g.state === 'used' ? Math.round((g.used_milli ?? 1000) / 10) : 0;
}

function heldText(g) {
  const holders = holdersOf(g);
  const who = holders.length ? holders.map((x) => `${x.task}${x.job ? ` of job ${x.job}` : ''}`).join(', ') : 'a task';
  const pct = usedPercent(g);
  return pct < 100 ? `${pct} % held, by ${who}` : `held by ${who}`;
}

function gpuCell(node, g, select) {
  const holders = holdersOf(g);
  const job = holders.length ? holders[0].job : '';
  const pct = usedPercent(g);
  const what = g.fault ? `faulty, out of service: ${g.fault.message}`
    : g.cordoned ? `cordoned by an admin${g.state === 'used' ? `; ${heldText(g)}` : ''}`
    : g.state === 'used' ? heldText(g)
    : g.state === 'excluded' ? 'excluded: busy with a process Trainyard did not start' : 'free';
  const label = `${node.name} GPU ${g.index}: ${what}`;
  // A split GPU is filled from the bottom by the share held.
  // A faulty GPU is drawn faulty even while its task still holds it.
  const fill = !job || g.fault ? null : pct < 100
    ? `background:linear-gradient(to top, ${jobColour(job)} ${pct}%, #e3f4e6 ${pct}%);color:${pct >= 50 ? '#fff' : '#14532d'}`
    : `background:${jobColour(job)}`;
  return h('button', {
    type: 'button', class: `gpu gpu-${g.state}${g.fault ? ' gpu-faulty' : ''}`, title: label, 'aria-label': label, style: fill,
    dataset: {
      node: node.name, gpu: String(g.index), state: g.state, task: g.task || '', job,
      used: String(pct), jobs: holders.map((x) => x.job).join(' '),
    },
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

// GPUs from thousandths: 2750 -> "2.75".
function gpuAmount(milli) {
  return String(Math.round(milli) / 1000);
}

// The holders of a used GPU for the detail line, each job a link.
function holderLinks(g) {
  const pct = usedPercent(g);
  const holders = holdersOf(g);
  const list = holders.length ? holders : [{ task: '?', job: '' }];
  return [pct < 100 ? `${pct} % held: ` : '', list.map((x, i) => [i ? ', ' : '', `task ${x.task}`, x.job ? [' of job ', jobLink(x.job)] : ''])];
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
      h('dt', {}, 'GPUs'), h('dd', {}, `${gpuAmount(node.allocated_gpu_milli ?? 1000 * node.allocated_gpus)} held (on ${node.allocated_gpus}), ${node.free_gpus.length} free, ${node.excluded_gpus.length} excluded of ${node.gpu_count}`),
      h('dt', {}, 'CPU'), h('dd', {}, `${cores(node.free.vcores_milli)} free of ${cores(node.capacity.vcores_milli)}`),
      h('dt', {}, 'Memory'), h('dd', {}, `${mib(node.free.memory_mb)} free of ${mib(node.capacity.memory_mb)}`),
      h('dt', {}, 'Ports'), h('dd', {}, `${ports(node.capacity.ports)}; ${node.ports_in_use} in use`),
      h('dt', {}, 'Labels'), h('dd', {}, labels.length ? labels.map(([k, v]) => h('span', { class: 'label' }, `${k}=${v}`)) : '—'),
      h('dt', {}, 'Heartbeat'), h('dd', {}, node.last_heartbeat_unix_ms ? `${ago(node.last_heartbeat_unix_ms)} ago` : '—')));
}

function legend() {
  return h('p', { class: 'legend' }, h('span', { class: 'gpu gpu-free' }, ' '), ' free ',
    h('span', { class: 'gpu gpu-used' }, ' '), ' held (coloured by job; a GPU split into shares filled by the share held) ',
    h('span', { class: 'gpu gpu-excluded' }, ' '), ' excluded ',
    h('span', { class: 'gpu gpu-faulty' }, ' '), ' faulty · boxes: CPU socket, then PCIe switch; underline: NVLink island');
}

const fmt = (n) => Number(n).toLocaleString('en-US');

// A heat-map cell's colour: light green (idle) to dark blue (every GPU
// held); LOST nodes red, nodes without GPUs grey.
function heatColour(used, gpus, state) {
  if (state === 'LOST') return '#a4161a';
  if (!gpus) return '#c9ced3';
  const f = Math.min(1, used / gpus);
  const mix = (a, b) => Math.round(a + (b - a) * f);
  return `rgb(${mix(0xe3, 0x1f)},${mix(0xf4, 0x5f)},${mix(0xe6, 0x8b)})`;
}

// Columns of the heat map of n nodes: about three times as wide as high,
// at most 200.
const heatColumns = (n) => Math.max(1, Math.min(n, 200, Math.ceil(Math.sqrt(n * 3))));

// The heat map: one cell per node in name order, on one canvas. pick(name)
// for a clicked cell; the line under it names the cell under the pointer.
function heatMap(summary, pick) {
  const heat = summary.heat;
  const n = heat.names.length;
  const cols = heatColumns(n);
  const cell = Math.max(4, Math.min(28, Math.floor(1000 / cols)));
  const rows = Math.ceil(n / cols);
  const canvas = h('canvas', {
    width: cols * cell, height: Math.max(1, rows * cell), role: 'img',
    'aria-label': `GPU use of ${n} nodes: ${summary.gpus.used} of ${summary.gpus.total} GPUs held`,
    dataset: { nodes: String(n), cols: String(cols), used: String(summary.gpus.used), total: String(summary.gpus.total) },
  });
  const ctx = canvas.getContext('2d');
  for (let i = 0; i < n; i++) {
    ctx.fillStyle = heatColour(heat.used[i], heat.gpus[i], heat.states[i]);
    ctx.fillRect((i % cols) * cell, Math.floor(i / cols) * cell, cell - (cell > 5 ? 1 : 0), cell - (cell > 5 ? 1 : 0));
  }
  const hover = h('p', { class: 'heat-hover muted', 'aria-live': 'off' }, 'Point at a cell for its node; click it to show the node.');
  const at = (ev) => {
    const r = canvas.getBoundingClientRect();
    const x = Math.floor((ev.clientX - r.left) * (canvas.width / r.width) / cell);
    const y = Math.floor((ev.clientY - r.top) * (canvas.height / r.height) / cell);
    const i = y * cols + x;
    return x >= 0 && x < cols && i >= 0 && i < n ? i : -1;
  };
  canvas.addEventListener('mousemove', (ev) => {
    const i = at(ev);
    if (i >= 0) hover.textContent = `${heat.names[i]}: ${heat.used[i]} of ${heat.gpus[i]} GPUs held${heat.excluded[i] ? `, ${heat.excluded[i]} excluded` : ''} · ${heat.states[i]}`;
  });
  canvas.addEventListener('click', (ev) => {
    const i = at(ev);
    if (i >= 0) pick(heat.names[i]);
  });
  return h('figure', { class: 'heatmap', dataset: { nodes: String(n) } },
    h('figcaption', {}, 'GPU use by node (light: idle, dark: every GPU held, red: lost)'), canvas, hover);
}

function summaryFacts(summary) {
  const states = Object.entries(summary.states).map(([s, c]) => `${fmt(c)} ${s}`).join(', ') || 'none';
  const g = summary.gpus;
  return h('div', { class: 'node-summary' },
    h('p', { id: 'node-counts' }, `${fmt(summary.nodes)} nodes: ${states} · GPUs: ${fmt(g.used)} held, ${fmt(g.free)} free, ${fmt(g.excluded)} excluded of ${fmt(g.total)}`),
    summary.models.length > 1 || (summary.models[0] && summary.models[0].model)
      ? h('p', { class: 'muted' }, summary.models.map((m) => `${m.model || 'unknown model'}: ${fmt(m.used)} of ${fmt(m.total)} held on ${fmt(m.nodes)} nodes`).join(' · '))
      : null);
}

function field(id, text, input) {
  return h('span', { class: 'field' }, h('label', { for: id }, text), ' ', input);
}

// The page's filters and paging as the server's query.
function queryOf(f, per, cursor) {
  const q = new URLSearchParams({ limit: String(per) });
  if (f.name) q.set('name', f.name);
  if (f.state) q.set('state', f.state);
  if (f.model) q.set('model', f.model);
  if (f.label) q.set('label', f.label);
  if (f.free) q.set('min_free_gpus', f.free);
  if (cursor) q.set('cursor', cursor);
  return q.toString();
}

export function mount(main, params) {
  const per = Math.max(1, Math.min(kMaxPerPage, Number(params.get('per')) || kPerPage));
  const detail = h('div', { class: 'detail', role: 'status', 'aria-live': 'polite' }, 'Click a GPU for its task.');
  const name = h('input', { type: 'search', id: 'node-filter', placeholder: 'part of a name', value: params.get('name') || params.get('q') || '' });
  const state = h('select', { id: 'node-state' }, h('option', { value: '' }, 'any'), kStates.map((s) => h('option', { value: s }, s)));
  state.value = kStates.includes((params.get('state') || '').toUpperCase()) ? params.get('state').toUpperCase() : '';
  const model = h('select', { id: 'node-model' }, h('option', { value: '' }, 'any'));
  const label = h('input', { type: 'search', id: 'node-label', placeholder: 'KEY or KEY=VALUE', value: params.get('label') || '' });
  const free = h('input', { type: 'number', id: 'node-free', min: 0, max: 64, value: params.get('free') || '' });
  let chosenModel = params.get('model') || '';  // kept until the summary lists the models
  const prev = h('button', { type: 'button', id: 'nodes-prev', disabled: true }, '← Previous');
  const next = h('button', { type: 'button', id: 'nodes-next', disabled: true }, 'Next →');
  const range = h('span', { id: 'nodes-range', 'aria-live': 'polite' });
  const glance = h('section', { class: 'glance', 'aria-label': 'the cluster at a glance' });
  const problem = h('p', { class: 'error', role: 'alert', hidden: true });
  const list = h('div', { class: 'nodes' });
  let cursors = [''];  // cursors[i]: the cursor of page i (page 0 has none)
  let page = null;
  const filters = () => ({ name: name.value.trim(), state: state.value, model: chosenModel, label: label.value.trim(), free: free.value });
  const select = (node, g, job) => {
    detail.replaceChildren(h('strong', {}, `${node.name} GPU ${g.index}`), ': ',
      h('span', {}, g.state === 'used' ? holderLinks(g) : g.state),
      ` · socket ${g.socket}, switch ${g.switch}${g.nvlink_island >= 0 ? `, NVLink island ${g.nvlink_island}` : ''}`);
  };
  const drawPage = () => {
    const at = cursors.length - 1;
    const first = page.nodes.length ? at * per + 1 : 0;
    range.textContent = `nodes ${fmt(first)}–${fmt(at * per + page.nodes.length)} of ${fmt(page.total)}`;
    prev.disabled = at === 0;
    next.disabled = !page.next_cursor;
    list.replaceChildren(...page.nodes.map((n) => nodeCard(n, select)));
    main.dataset.page = String(at + 1);
  };
  const loadPage = async () => {
    page = await getJson(`/api/v1/nodes?${queryOf(filters(), per, cursors[cursors.length - 1])}`);
    drawPage();
  };
  const drawSummary = (summary) => {
    const models = summary.models.map((m) => m.model).filter(Boolean);
    model.replaceChildren(h('option', { value: '' }, 'any'), models.map((m) => h('option', { value: m }, m)));
    model.value = models.includes(chosenModel) ? chosenModel : '';
    glance.replaceChildren(summaryFacts(summary), heatMap(summary, (n) => {
      name.value = n;
      restart();
    }));
  };
  // Loads the current page; a failure is shown above the list.
  const show = async () => {
    try {
      await loadPage();
      problem.hidden = true;
    } catch (e) {
      problem.textContent = `Could not load the nodes: ${e.message}`;
      problem.hidden = false;
    }
  };
  // A filter changed: back to the first page.
  const restart = async () => {
    cursors = [''];
    await show();
  };
  let timer = null;
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(restart, 250);
  };
  for (const el of [name, label, free]) el.addEventListener('input', soon);
  state.addEventListener('change', restart);
  model.addEventListener('change', () => {
    chosenModel = model.value;
    restart();
  });
  const turn = async (step) => {
    if (step > 0 && page && page.next_cursor) cursors.push(page.next_cursor);
    else if (step < 0 && cursors.length > 1) cursors.pop();
    else return;
    await show();
  };
  next.addEventListener('click', () => turn(1));
  prev.addEventListener('click', () => turn(-1));
  main.append(h('h1', {}, 'Nodes'), glance, legend(),
    h('form', { class: 'node-filters', role: 'search', onsubmit: (ev) => ev.preventDefault() },
      field('node-filter', 'Name', name), field('node-state', 'State', state), field('node-model', 'GPU model', model),
      field('node-label', 'Label', label), field('node-free', 'Free GPUs at least', free)),
    h('nav', { class: 'pager', 'aria-label': 'pages of nodes' }, prev, ' ', range, ' ', next),
    problem, detail, list);
  return {
    // A GPU's task and job come with the page's nodes, so the page reads
    // nothing else.
    topics: ['nodes'],
    async refresh() {
      const [summary] = await Promise.all([getJson('/api/v1/node-summary'), loadPage()]);
      drawSummary(summary);
      main.dataset.ready = 'nodes';
    },
    dispose() {
      clearTimeout(timer);
    },
  };
}
