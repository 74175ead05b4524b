// The dashboard's entry: a router over the URL's fragment (#/, #/nodes,
// #/queues, #/jobs?state=..., #/jobs/NAME, #/history?days=..., #/schedules) and one watch of the server's
// changes that refreshes the page on view. Each page module exports
// mount(main, params) -> { topics, refresh(), dispose() }, and is loaded
// when first shown: a first load asks for few files at once (each open
// connection holds one of the server's HTTP threads while it lasts).
import { h } from './dom.js';
import { watch, setToken, ApiError, takeStale } from './api.js';

const pages = {
  overview: () => import('./overview.js'),
  nodes: () => import('./nodes.js'),
  queues: () => import('./queues.js'),
  jobs: () => import('./jobs.js'),
  job: () => import('./job.js'),
  history: () => import('./history.js'),
  schedules: () => import('./schedules.js'),
};

const main = document.getElementById('main');
const live = document.getElementById('live');
let current = null;   // the mounted page
let busy = false;     // a refresh is running
let again = false;    // a change came during it

function route() {
  const [path, query] = (location.hash.slice(1) || '/').split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0) return { name: 'overview', page: 'overview', params };
  if (parts[0] === 'jobs' && parts.length === 2) {
    params.set('job', parts[1]);
    return { name: 'jobs', page: 'job', params };
  }
  return ['nodes', 'queues', 'jobs', 'history', 'schedules'].includes(parts[0]) ? { name: parts[0], page: parts[0], params } : null;
}

let shown = 0;  // counts show() calls: a page loaded after the next one began is dropped

async function show() {
  if (current && current.dispose) current.dispose();
  current = null;
  const mine = ++shown;
  delete main.dataset.ready;  // set again by the page once it has drawn its data
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
  const module = await pages[r.page]();
  if (mine !== shown) return;
  main.replaceChildren();
  current = module.mount(main, r.params);
  current.name = r.page;
  refresh();
}

// Refreshes the page on view, one refresh at a time: changes that come
// while one runs fold into a single next one. The same page refreshed
// again first waits three times what its last refresh took (at least
// 500 ms): a large cluster's lists take long to build and send, and a busy
// cluster changes all the time, so a tab costs the server a bounded share.
let paced = { page: null, at: 0 };

async function refresh() {
  if (busy) {
    again = true;
    return;
  }
  busy = true;
  try {
    do {
      again = false;
      let page = current;
      if (!page) break;
      const wait = page === paced.page ? paced.at - performance.now() : 0;
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      page = current;
      if (!page) break;
      const start = performance.now();
      takeStale();
      try {
        await page.refresh();
        // An answer made before the latest change: once more, paced.
        if (takeStale() && page === current) again = true;
        // When the page first had its data on screen (bench/dashboard_paint.mjs).
        if (!page.drawn) performance.mark(`drawn:${page.name}`);
        page.drawn = true;
      } catch (e) {
        if (page === current) showError(e);
      }
      paced = { page, at: performance.now() + Math.max(500, 3 * (performance.now() - start)) };
    } while (again);
  } finally {
    busy = false;
  }
}

// Asks for a token: the first /api/ answer without a valid one (401) shows
// this in place of the page.
function signIn(message) {
  if (main.querySelector('#sign-in')) return;
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true });
  const form = h('form', { id: 'sign-in' },
    h('h1', {}, 'Sign in'),
    h('p', {}, message),
    h('p', {}, 'Paste your Trainyard token (trainyard token create USER makes one; `trainyard up` prints the dashboard\'s address with its admin token).'),
    h('label', { for: 'token' }, 'Token '), input, ' ',
    h('button', { type: 'submit' }, 'Sign in'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    setToken(input.value);
    show();
  });
  main.replaceChildren(form);
  main.dataset.ready = 'sign-in';
}

function showError(e) {
  if (e instanceof ApiError && e.status === 401) return signIn(e.message);
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
