// The dashboard's entry: a router over the URL's fragment (#/, #/nodes,
// #/queues, #/jobs?state=..., #/jobs/NAME) and one watch of the server's
// changes that refreshes the page on view. Each page module exports
// mount(main, params) -> { topics, refresh(), dispose() }.
import { h } from './dom.js';
import { watch } from './api.js';
import * as overview from './overview.js';
import * as nodes from './nodes.js';
import * as queues from './queues.js';
import * as jobs from './jobs.js';
import * as job from './job.js';

const main = document.getElementById('main');
const live = document.getElementById('live');
let current = null;   // the mounted page
let busy = false;     // a refresh is running
let again = false;    // a change came during it

function route() {
  const [path, query] = (location.hash.slice(1) || '/').split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { name: 'overview', page: overview, params };
  if (parts[0] === 'jobs' && parts.length === 2) {
    params.set('job', parts[1]);
    return { name: 'jobs', page: job, params };
  }
  const pages = { nodes, queues, jobs };
  return pages[parts[0]] ? { name: parts[0], page: pages[parts[0]], params } : null;
}

function show() {
  if (current && current.dispose) current.dispose();
  current = null;
  const r = route();
  for (const a of document.querySelectorAll('nav a')) {
    if (r && a.dataset.page === r.name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.replaceChildren();
  if (!r) {
    main.append(h('h1', {}, 'Not found'), h('p', {}, 'No such page. ', h('a', { href: '#/' }, 'Overview')));
    return;
  }
  current = r.page.mount(main, r.params);
  refresh();
}

// Refreshes the page on view, one refresh at a time: changes that come
// while one runs fold into a single next one.
async function refresh() {
  if (busy) {
    again = true;
    return;
  }
  busy = true;
  try {
    do {
      again = false;
      const page = current;
      if (!page) break;
      try {
        await page.refresh();
      } catch (e) {
        if (page === current) showError(e);
      }
    } while (again);
  } finally {
    busy = false;
  }
}

function showError(e) {
  let box = main.querySelector('.error[data-refresh]');
  if (!box) {
    box = h('p', { class: 'error', role: 'alert', 'data-refresh': true });
    main.prepend(box);
  }
  box.textContent = `Could not load: ${e.message}`;
}

window.addEventListener('hashchange', show);
watch(['jobs', 'nodes', 'queues'], (topic) => {
  if (current && current.topics.includes(topic)) refresh();
}, (text) => { live.textContent = text; });
show();
