// Small helpers to build the pages' DOM without a framework: h() makes an
// element from a tag, attributes and children (text is always text, never
// HTML, so names from the API cannot inject markup).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    // Through the CSSOM: the page's Content-Security-Policy refuses style
    // attributes set as markup.
    else if (k === 'style') el.style.cssText = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// A table from column headings and rows of cells; `caption` names it for
// screen readers.
export function table(caption, headings, rows, attrs = {}) {
  return h('table', attrs,
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, headings.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.length ? rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c)))) :
      h('tr', {}, h('td', { colspan: headings.length, class: 'empty' }, 'none'))));
}

export function section(title, ...children) {
  return h('section', {}, h('h2', {}, title), ...children);
}

export const jobLink = (name) => h('a', { href: `#/jobs/${encodeURIComponent(name)}` }, name);

export function stateBadge(state) {
  return h('span', { class: `state state-${String(state).toLowerCase()}` }, state);
}

export function mib(mb) {
  return mb >= 1024 ? `${(mb / 1024).toFixed(1)} GiB` : `${mb} MiB`;
}

// GPUs held, a share as its fraction (used.gpu_milli: 2.25 for two whole
// GPUs and a 0.25 share); whole GPUs from a server without gpu_milli.
export function gpusUsed(used) {
  return used.gpu_milli !== undefined ? Math.round(used.gpu_milli) / 1000 : used.gpus;
}

export const cores = (milli) => `${(milli / 1000).toFixed(milli % 1000 ? 1 : 0)}`;

export function when(unixMs) {
  return unixMs ? new Date(unixMs).toLocaleString() : '—';
}

export function ago(unixMs, now = Date.now()) {
  return unixMs ? duration(now - unixMs) : '—';
}

// A span of time as a person reads it: "45s", "12m 5s", "3h 20m".
export function duration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? ` ${s % 60}s` : ''}`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

export const ports = (ranges) =>
  (ranges || []).map((p) => (p.begin === p.end ? `${p.begin}` : `${p.begin}-${p.end}`)).join(', ') || '—';

// A stable colour per job, so one job's GPUs look alike on every node.
export function jobColour(name) {
  let x = 0;
  for (const c of name) x = (x * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${x % 360} 65% 30%)`;
}

// The job a task belongs to: task names are JOB-ROLE-INDEX.
export function jobOfTask(task) {
  const m = /^(.*)-[^-]+-\d+$/.exec(task || '');
  return m ? m[1] : task;
}
