// The dashboard in a real headless browser against a running cluster
// (started by tests/integration/dashboard_browser_test.cc, which passes
// what the cluster holds as JSON). Checks what a user sees:
//  - the nodes page shows the placed job's exact GPUs on its node, a GPU
//    held 0.25 by one job and 0.5 by another as 75 % held with both jobs
//    named (its label and its detail), and a
//    cordoned node as CORDONED with the admin's reason;
//  - the nodes page's heat map has a cell per node, the placed job's node
//    drawn darker than the idle one; pages of one node step through every
//    node and back; a state filter and a click on a cell narrow the page;
//  - a queued job shows its pending reason (queues page and job page);
//  - the overview's charts over time end at what the cluster holds, and it
//    names the server that leads the control plane and its store;
//  - the job page's log viewer shows a line within a second of the task
//    printing it (the task prints "tick <unix ms>" lines);
//  - the job page shows what the placed job's task uses (a row of figures)
//    and charts of CPU, memory and GPUs busy whose job line is above zero;
//  - the schedules page lists a paused schedule with its cron and zone;
//  - the main pages have no serious or critical axe-core violations;
//  - a service job's page opens its service in a new tab, sandboxed (an
//    opaque origin that cannot read the dashboard's storage);
//  - Kill on the job page takes the job off the running list, and the
//    history page then lists it KILLED with its user's usage;
//  - the token in the address's fragment (#token=, as `trainyard up` prints
//    it) signs the tab in and leaves the address bar; a tab without a token
//    gets the sign-in form, and signing in there shows the page.
// Screenshots go to --out. Prints one "ok: ..." line per check; exits 1 on
// the first failure with what was seen.
//   node dashboard_test.mjs --url http://HOST:PORT --token TOKEN --out DIR --expect JSON
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { launch } from './browser.mjs';

const { values: args } = parseArgs({ options: { url: { type: 'string' }, token: { type: 'string' }, out: { type: 'string' }, expect: { type: 'string' } } });
const url = args.url.replace(/\/$/, '');
const expect = JSON.parse(args.expect);
const axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
mkdirSync(args.out, { recursive: true });

class CheckFailed extends Error {}
function check(cond, what) {
  if (!cond) throw new CheckFailed(what);
}
const ok = (what) => console.log(`ok: ${what}`);

async function open(page, hash, ready) {
  // A change of the address's fragment alone does not load the page again:
  // the last page's ready mark goes first, so the wait is for this one's.
  // The same address again fires no hashchange at all (the page would draw
  // only at its next live update, which a quiet cluster may not send), so
  // it is loaded again.
  await page.evaluate(() => document.querySelectorAll('main[data-ready]').forEach((m) => delete m.dataset.ready));
  const target = `${url}/${hash}`;
  if (page.url() === target) await page.reload();
  else await page.goto(target);
  await page.waitForSelector(`main[data-ready="${ready}"]`, { timeout: 10000 });
}

async function shot(page, name) {
  await page.screenshot({ path: `${args.out}/${name}.png`, fullPage: true });
}

// The admin's token: in the address's fragment it signs the tab in, and the
// address bar no longer shows it.
async function signsInFromTheAddress(page) {
  await page.goto(`${url}/#token=${encodeURIComponent(args.token)}`);
  await page.waitForSelector('main[data-ready="overview"]', { timeout: 10000 });
  const hash = await page.evaluate(() => location.hash);
  check(!hash.includes(args.token), `the address still shows the token: ${hash}`);
  ok('the #token= address signs the tab in and leaves the address bar');
}

// A tab with no token gets the sign-in form; the token typed there shows
// the page.
async function signInForm(_, browser) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  await open(page, '#/nodes', 'sign-in');
  await page.fill('#token', 'ty_not-a-token');
  await page.click('#sign-in button[type=submit]');
  await page.waitForSelector('main[data-ready="sign-in"]', { timeout: 10000 });
  await page.fill('#token', args.token);
  await page.click('#sign-in button[type=submit]');
  await page.waitForSelector('main[data-ready="nodes"]', { timeout: 10000 });
  await context.close();
  ok('a tab without a token gets the sign-in form; the right token shows the page');
}

async function nodesShowPlacedGpus(page) {
  const { job, node, gpus } = expect.placed;
  await open(page, '#/nodes', 'nodes');
  const seen = await page.$$eval('button.gpu', (cells) => cells.map((c) => ({ ...c.dataset })));
  const held = seen.filter((c) => c.job === job).map((c) => `${c.node}/${c.gpu}`).sort();
  const want = gpus.map((g) => `${node}/${g}`).sort();
  check(JSON.stringify(held) === JSON.stringify(want), `nodes page: job ${job} on ${JSON.stringify(held)}, want ${JSON.stringify(want)}`);
  // Click one of its GPUs: the detail names the task.
  await page.click(`button.gpu[data-node="${node}"][data-gpu="${gpus[0]}"]`);
  const detail = await page.textContent('.detail');
  check(detail.includes(expect.placed.task), `nodes page: the clicked GPU's detail "${detail}" does not name ${expect.placed.task}`);
  await sharedGpuShowsItsShareAndHolders(page);
  const card = await page.textContent(`article.node[data-node="${expect.cordoned.node}"]`);
  check(card.includes('CORDONED') && card.includes(expect.cordoned.reason),
    `nodes page: the card of ${expect.cordoned.node} is "${card}", not CORDONED with "${expect.cordoned.reason}"`);
  ok(`cordoned ${expect.cordoned.node} shows CORDONED and "${expect.cordoned.reason}"`);
  await faultyGpuShown(page);
  await shot(page, 'nodes');
  ok(`nodes page shows ${job} on ${want.join(' ')}; the click names ${expect.placed.task}`);
}

// A GPU its agent found faulty (an Xid): drawn faulty, its label the fault.
async function faultyGpuShown(page) {
  const { node, gpu, xid } = expect.faulty;
  const cell = `button.gpu[data-node="${node}"][data-gpu="${gpu}"]`;
  const cls = await page.getAttribute(cell, 'class');
  const label = await page.getAttribute(cell, 'aria-label');
  check(cls.includes('gpu-faulty') && label.includes('faulty') && label.includes(`Xid ${xid}`),
    `nodes page: ${node} GPU ${gpu} is "${cls}", labelled "${label}": not drawn faulty with Xid ${xid}`);
  ok(`faulty GPU: ${label}`);
}

// The GPU two jobs share: drawn by the share held (75 %), every holder named
// in its label, and in the detail a click shows.
async function sharedGpuShowsItsShareAndHolders(page) {
  const { node, gpu, jobs, percent } = expect.shared;
  const cell = `button.gpu[data-node="${node}"][data-gpu="${gpu}"]`;
  const used = await page.getAttribute(cell, 'data-used');
  check(used === String(percent), `nodes page: ${node} GPU ${gpu} is drawn ${used} % held, want ${percent}`);
  const label = await page.getAttribute(cell, 'aria-label');
  check(label.includes(`${percent} %`) && jobs.every((j) => label.includes(`job ${j}`)),
    `nodes page: ${node} GPU ${gpu}'s label "${label}" does not say ${percent} % and name ${jobs.join(' and ')}`);
  // The page draws again as the cluster changes (a job placed just before
  // changes its node): the fill is read from the cell drawn last.
  const filled = await page.waitForFunction(({ sel, pct }) => {
    const el = document.querySelector(sel);
    return el && getComputedStyle(el).backgroundImage.includes(`${pct}%`);
  }, { sel: cell, pct: percent }, { timeout: 10000 }).then(() => true, () => false);
  const fill = await page.$eval(cell, (el) => getComputedStyle(el).backgroundImage);
  check(filled, `nodes page: ${node} GPU ${gpu} is not filled to ${percent} %: ${fill}`);
  await page.click(cell);
  const detail = await page.textContent('.detail');
  check(detail.includes(`${percent} %`) && jobs.every((j) => detail.includes(j)),
    `nodes page: the shared GPU's detail "${detail}" does not say ${percent} % and name ${jobs.join(' and ')}`);
  ok(`a shared GPU: ${node} GPU ${gpu} drawn ${percent} % held, naming ${jobs.join(' and ')}`);
}

// The heat map's cell colour of node i (one cell per node in name order,
// data-cols to a row): its pixel at the cell's centre, as r + g + b.
async function heatCell(page, i) {
  return page.evaluate((i) => {
    const c = document.querySelector('figure.heatmap canvas');
    const cols = Number(c.dataset.cols);
    const cell = c.width / cols;
    const [r, g, b] = c.getContext('2d').getImageData((i % cols) * cell + cell / 2, Math.floor(i / cols) * cell + cell / 2, 1, 1).data;
    return r + g + b;
  }, i);
}

async function nodesHeatMapAndPaging(page) {
  const { node } = expect.placed;
  const { held } = expect;  // GPUs held, the shares as fractions
  const names = [node, expect.cordoned.node].sort();
  await open(page, '#/nodes?per=1', 'nodes');
  await page.waitForSelector('figure.heatmap canvas', { timeout: 10000 });
  const heat = await page.$eval('figure.heatmap canvas', (c) => ({ ...c.dataset, label: c.getAttribute('aria-label') }));
  check(heat.nodes === String(names.length) && heat.used === String(held),
    `heat map: ${JSON.stringify(heat)}, want ${names.length} nodes and ${held} GPUs held`);
  const placedCell = await heatCell(page, names.indexOf(node));
  const idleCell = await heatCell(page, names.indexOf(expect.cordoned.node));
  check(placedCell < idleCell, `heat map: the cell of ${node} (${placedCell}) is not darker than the idle node's (${idleCell})`);
  const counts = await page.textContent('#node-counts');
  check(counts.includes(`${names.length} nodes`) && counts.includes(`${held} held`), `nodes page counts: "${counts}"`);
  ok(`heat map: ${heat.label}; ${node}'s cell darker than the idle node's`);
  const shown = async () => page.$$eval('article.node', (a) => a.map((e) => e.dataset.node));
  const waitPage = async (n) => page.waitForSelector(`main[data-page="${n}"]`, { timeout: 10000 });
  check(JSON.stringify(await shown()) === JSON.stringify([names[0]]), `page 1 shows ${JSON.stringify(await shown())}, want ${names[0]}`);
  check(await page.isDisabled('#nodes-prev'), 'page 1: Previous is enabled');
  await page.click('#nodes-next');
  await waitPage(2);
  check(JSON.stringify(await shown()) === JSON.stringify([names[1]]), `page 2 shows ${JSON.stringify(await shown())}, want ${names[1]}`);
  const range = await page.textContent('#nodes-range');
  check(range.includes(`2–2 of ${names.length}`) && await page.isDisabled('#nodes-next'), `page 2: "${range}", Next enabled`);
  await page.click('#nodes-prev');
  await waitPage(1);
  check(JSON.stringify(await shown()) === JSON.stringify([names[0]]), 'Previous did not go back to page 1');
  await shot(page, 'nodes-paged');
  ok(`pages of one node: ${names.join(', then ')}, and back`);
  await page.selectOption('#node-state', 'CORDONED');
  await page.waitForFunction((want) => [...document.querySelectorAll('article.node')].map((a) => a.dataset.node).join() === want,
    expect.cordoned.node, { timeout: 30000 });
  await page.selectOption('#node-state', '');
  // The page drawn again without the filter before the map is measured and
  // clicked (on a loaded machine the click could land during the redraw).
  await page.waitForFunction((n) => (document.querySelector('#nodes-range')?.textContent || '').includes(`of ${n}`),
    names.length, { timeout: 30000 });
  // A click on the placed node's cell shows that node.
  const box = await page.$eval('figure.heatmap canvas', (c) => {
    const r = c.getBoundingClientRect();
    const cols = Number(c.dataset.cols);
    return { x: r.left, y: r.top, cell: r.width / cols, cols };
  });
  const i = names.indexOf(node);
  await page.mouse.click(box.x + (i % box.cols + 0.5) * box.cell, box.y + (Math.floor(i / box.cols) + 0.5) * box.cell);
  await page.waitForFunction((want) => [...document.querySelectorAll('article.node')].map((a) => a.dataset.node).join() === want,
    node, { timeout: 30000 });
  // The line names the cell under the pointer. The map is drawn again (a
  // fresh line, until the pointer moves) and may sit elsewhere once the page
  // shows the clicked node, so the pointer moves over the cell where it is
  // now until the line names it, or 10 s pass.
  let hover = '';
  for (const until = Date.now() + 10000; Date.now() < until;) {
    const now = await page.$eval('figure.heatmap canvas', (c) => {
      const r = c.getBoundingClientRect();
      return { x: r.left, y: r.top, cell: r.width / Number(c.dataset.cols) };
    });
    const cx = now.x + (i % box.cols + 0.5) * now.cell, cy = now.y + (Math.floor(i / box.cols) + 0.5) * now.cell;
    await page.mouse.move(cx + 1, cy);
    await page.mouse.move(cx, cy);
    hover = await page.textContent('.heat-hover');
    if (hover.includes(`${node}: `)) break;
    await page.waitForTimeout(100);
  }
  check(hover.includes(`${node}: ${held} of`), `heat map hover line: "${hover}"`);
  ok(`the state filter shows only ${expect.cordoned.node}; a click on ${node}'s cell shows ${node}`);
}

async function queuedJobShowsReason(page) {
  const { job, reason } = expect.queued;
  await open(page, '#/queues', 'queues');
  const row = page.locator('table.waiting tbody tr', { hasText: job });
  const text = await row.textContent({ timeout: 5000 });
  check(text.includes(reason), `queues page: the row of ${job} is "${text}", no reason "${reason}"`);
  // GPUs used count shares as fractions: the queue 3.75, the shares' user 0.75.
  const rows = await page.$$eval('table tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  const queueRow = rows.find((cells) => cells.includes(String(expect.held)));
  const userRow = rows.find((cells) => cells[0] === expect.shared.user);
  check(queueRow && userRow && userRow[1] === '0.75',
    `queues page: no queue row with ${expect.held} GPUs used, or user ${expect.shared.user}'s row is not 0.75: ${JSON.stringify(rows)}`);
  ok(`queues page: ${expect.held} GPUs used in the queue, 0.75 by ${expect.shared.user}`);
  await shot(page, 'queues');
  await open(page, `#/jobs/${job}`, 'job');
  const pending = await page.textContent('#pending-reason');
  check(pending.includes(reason), `job page: pending reason "${pending}", want "${reason}"`);
  await shot(page, 'job-queued');
  ok(`queued ${job} shows its reason "${reason}" on the queues page and its job page`);
}

// The overview's charts over time (the server samples every 250 ms in this
// test): the GPU chart's latest point is the placed job's GPUs of the
// cluster's, the waiting chart has the queued job in its queue, and the
// wait chart shows it waiting.
async function chartsShowHistory(page) {
  const { allocated, total, queue } = expect.charts;
  await open(page, '#/', 'overview');
  try {
    await page.waitForFunction(({ allocated, total, queue }) => {
      const last = (chart, series) => document.querySelector(`figure[data-chart="${chart}"] .chart-key[data-series="${series}"]`)?.dataset.last;
      return last('gpus', 'allocated') === String(allocated) && last('gpus', 'total') === String(total)
        && Number(last('queued', `queue-${queue}`)) >= 1 && Number(last('wait', `longest-${queue}`)) > 0
        && document.querySelectorAll('figure[data-chart="gpus"] g[data-series="allocated"] polyline').length > 0;
    }, { allocated, total, queue }, { timeout: 10000 });
  } catch (e) {
    const seen = await page.$$eval('figure.chart .chart-key', (els) => els.map((e) => `${e.closest('figure').dataset.chart}/${e.dataset.series}=${e.dataset.last}`));
    throw new CheckFailed(`overview charts: want allocated ${allocated} of ${total}, queue ${queue} waiting >= 1 with a wait; saw ${JSON.stringify(seen)} (${e.message})`);
  }
  const title = await page.textContent('figure[data-chart="gpus"] svg title');
  check(title.includes(`allocated ${allocated}`), `GPU chart's text "${title}" does not say allocated ${allocated}`);
  await shot(page, 'overview-charts');
  ok(`overview charts: ${allocated} of ${total} GPUs allocated, queue ${queue} has the waiting job and its wait`);
  // GPUs by queue and by user count shares as fractions, as "GPUs allocated" does.
  const rowsOf = (caption) => page.$$eval('table', (ts, c) => ts.filter((t) => t.caption?.textContent === c)
    .flatMap((t) => [...t.tBodies[0].rows].map((tr) => [...tr.cells].map((td) => td.textContent))), caption);
  const queues = await rowsOf('GPUs by queue');
  const users = await rowsOf('GPUs by user');
  const queueRow = queues.find((cells) => cells[1] === String(expect.held));
  const userRow = users.find((cells) => cells[0] === expect.shared.user);
  check(queueRow && userRow && userRow[1] === '0.75',
    `overview: no queue row with ${expect.held} GPUs used, or user ${expect.shared.user}'s row is not 0.75: ${JSON.stringify({ queues, users })}`);
  ok(`overview: ${expect.held} GPUs used in the queue, 0.75 by ${expect.shared.user}`);
  // Who leads: one server on SQLite here, named by its address.
  const plane = Object.fromEntries((await rowsOf('Control plane')).map(([what, value]) => [what, value]));
  check(plane.Server === expect.server && (plane.Store || '').startsWith('SQLite') && /\d{4}/.test(plane['Up since'] || ''),
    `overview: the control plane should name server ${expect.server} on SQLite with its start; saw ${JSON.stringify(plane)}`);
  ok(`overview: the control plane is server ${plane.Server}, ${plane.Store}, up since ${plane['Up since']}`);
}

async function logViewerFollows(page) {
  const { job, task } = expect.placed;
  const probe = await page.request.get(`${url}/api/v1/jobs/${job}/tasks/${task}/logs?attempt=0&offset=0&limit=1`);
  if (probe.status() === 404 && (await probe.text()).includes('no such resource')) {
    console.log('skipped: log viewer follow (this server has no task log endpoint)');
    return;
  }
  await open(page, `#/jobs/${job}`, 'job');
  await page.selectOption('#log-task', task);
  // Record when each tick line appears in the viewer; the task wrote the
  // time it printed it into the line.
  await page.evaluate(() => {
    const pre = document.getElementById('log-text');
    const ticks = () => Array.from(pre.textContent.matchAll(/tick (\d+)/g), (m) => m[1]);
    window.tickLatencies = [];
    window.ticksSeen = new Set();
    // From now on only lines that come after those on screen count.
    window.measureNewTicks = () => {
      window.ticksSeen = new Set(ticks());
      window.tickLatencies = [];
    };
    new MutationObserver(() => {
      const now = Date.now();
      for (const t of ticks()) {
        if (window.ticksSeen.has(t)) continue;
        window.ticksSeen.add(t);
        window.tickLatencies.push(now - Number(t));
      }
    }).observe(pre, { childList: true, characterData: true, subtree: true });
  });
  await page.waitForFunction(() => document.getElementById('log-text').textContent.includes('tick'), null, { timeout: 10000 });
  // What the viewer shows now is the log's past (its range read), which
  // may have landed before the observer above was in place, unseen by it:
  // those lines were printed seconds ago and are no measure of following.
  await page.evaluate(() => window.measureNewTicks());
  await page.waitForFunction(() => window.tickLatencies.length >= 5, null, { timeout: 10000 });
  const lat = await page.evaluate(() => window.tickLatencies);
  await shot(page, 'job-logs');
  check(Math.max(...lat) < 1000, `log viewer: new lines shown ${JSON.stringify(lat)} ms after printed; want < 1000`);
  ok(`log viewer shows new lines ${Math.min(...lat)}..${Math.max(...lat)} ms after the task printed them`);
  // The page's bulk download link serves the job's archive.
  const href = await page.getAttribute('#download-logs', 'href');
  const archive = await page.request.get(`${url}${href}`, { headers: { Authorization: `Bearer ${args.token}` } });
  const body = await archive.body();
  check(archive.status() === 200 && body[0] === 0x1f && body[1] === 0x8b,
    `download link ${href}: status ${archive.status()}, ${body.length} bytes, not a gzip archive`);
  ok(`the download link ${href} serves a gzip archive (${body.length} bytes)`);
}

// axe-core is injected as a script, which the dashboard's own
// Content-Security-Policy forbids: it runs in a context that bypasses it.
// The schedules page: the paused schedule with its cron and zone.
async function schedulesPage(page) {
  const { name, cron } = expect.schedule;
  await open(page, '#/schedules', 'schedules');
  const row = await page.evaluate((n) => {
    const tr = [...document.querySelectorAll('#schedules tbody tr')].find((r) => r.cells[0].textContent === n);
    return tr ? [...tr.cells].map((c) => c.textContent) : null;
  }, name);
  check(row && row[3] === cron && row[5] === 'PAUSED' && row[6] === '—', `schedules page row of ${name}: ${JSON.stringify(row)}`);
  await shot(page, 'schedules');
  ok(`the schedules page lists ${name}: ${row[3]}, ${row[5]}`);
}

// The job page's resources: the agents' samples of the placed job's task,
// a row of what it uses now and the charts over time.
async function jobPageShowsResources(page) {
  const { job, task } = expect.placed;
  await open(page, `#/jobs/${job}`, 'job');
  await page.waitForFunction(() => Number(document.getElementById('resources')?.dataset.samples || 0) > 1, null, { timeout: 30000 });
  // Later fetches bring only the samples since the newest held: the page's grow.
  const first = Number(await page.evaluate(() => document.getElementById('resources').dataset.samples));
  await page.waitForFunction((n) => Number(document.getElementById('resources').dataset.samples) > n, first, { timeout: 30000 });
  const row = await page.evaluate((name) => {
    const tr = [...document.querySelectorAll('#resources-now tbody tr')].find((r) => r.cells[0].textContent === name);
    return tr ? [...tr.cells].map((c) => c.textContent) : null;
  }, task);
  check(row && /^\d+\.\d\d$/.test(row[2]) && /[MG]iB$/.test(row[4]) && / of /.test(row[6]),
    `resources row of ${task}: ${JSON.stringify(row)}`);
  const last = (chart) => page.evaluate((c) => document.querySelector(`#resources figure[data-chart="${c}"] .chart-key[data-series="total"]`)?.dataset.last, chart);
  const memory = Number(await last('memory'));
  const gpus = Number(await last('gpu'));
  check(memory > 0, `the memory chart's job line ends at ${memory}`);
  check(gpus >= 1, `the GPUs-busy chart's job line ends at ${gpus} (a simulated GPU is busy while held)`);
  check(await page.locator('#resources figure[data-chart="cpu"] polyline, #resources figure[data-chart="cpu"] circle').count() > 0, 'the CPU chart draws a line');
  await shot(page, 'job-resources');
  ok(`the job page shows ${task} using ${row[2]} cores and ${row[4]}, and charts the job's CPU, memory and GPUs busy`);
}

async function accessibility(_, browser) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, bypassCSP: true });
  await context.addInitScript((token) => sessionStorage.setItem('trainyard-token', token), args.token);
  const page = await context.newPage();
  const pages = [['#/', 'overview'], ['#/nodes', 'nodes'], ['#/queues', 'queues'], ['#/jobs', 'jobs'], [`#/jobs/${expect.placed.job}`, 'job'],
    ['#/history', 'history'], ['#/schedules', 'schedules']];
  const report = {};
  for (const [hash, ready] of pages) {
    await open(page, hash, ready);
    await page.addScriptTag({ path: axePath });
    const res = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    const bad = res.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    report[hash] = res.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help }));
    check(bad.length === 0, `axe on ${hash}: ${JSON.stringify(bad.map((v) => ({ id: v.id, impact: v.impact, help: v.help, at: v.nodes.slice(0, 3).map((n) => n.target) })))}`);
    await shot(page, `axe-${ready}`);
  }
  await context.close();
  writeFileSync(`${args.out}/axe.json`, JSON.stringify(report, null, 2));
  ok(`axe-core: no serious or critical violations on ${pages.map((p) => p[0]).join(' ')}`);
}

// A service job's page opens its service in a new tab through the server's
// proxy; the service's page runs sandboxed: an origin of its own, no reach
// into the dashboard's storage (where the token is).
async function serviceOpensSandboxed(page) {
  const { job } = expect.service;
  await open(page, `#/jobs/${job}`, 'job');
  const button = page.locator('#services button.service-open');
  await page.waitForFunction(() => { const b = document.querySelector('#services button.service-open'); return b && !b.disabled; }, null, { timeout: 15000 });
  const [tab] = await Promise.all([page.context().waitForEvent('page'), button.click()]);
  // The tab opens at about:blank and goes to the link once the server made
  // it (a reload before then races that navigation); the service may need a
  // moment to listen after its task started (502 until then).
  await tab.waitForURL(/\/proxy\//, { timeout: 15000 });
  const link = tab.url();
  let text = '';
  for (let i = 0; i < 50 && !text.includes('served by the service'); i++) {
    if (i > 0) {
      await tab.waitForTimeout(200);
      await tab.goto(link).catch(() => {});
    }
    await tab.waitForLoadState();
    text = await tab.evaluate(() => document.body ? document.body.textContent : '').catch(() => '');
  }
  check(text.includes('served by the service'), `the service's tab shows: ${text} at ${tab.url()}`);
  const origin = await tab.evaluate(() => self.origin);
  const storage = await tab.evaluate(() => { try { return `readable (${sessionStorage.length})`; } catch (e) { return `blocked: ${e.name}`; } });
  await shot(tab, 'service');
  await tab.close();
  check(origin === 'null', `the service's page has the origin ${origin}, not one of its own`);
  check(storage.startsWith('blocked'), `the service's page reads the dashboard's storage: ${storage}`);
  ok(`a service opens from its job page in a sandbox: origin ${origin}, storage ${storage}`);
}

// A task that failed once and runs again: the job page's Restarts table
// shows the ended attempt's class and the budget it left.
async function jobPageShowsAttemptClasses(page) {
  const { job, task } = expect.restarted;
  await open(page, `#/jobs/${job}`, 'job');
  await page.waitForFunction((name) => [...document.querySelectorAll('#attempts tbody tr')].some((tr) =>
    tr.cells[0].textContent === name && tr.cells[2].textContent === '1 FAILED'), task, { timeout: 15000 });
  const row = await page.evaluate((name) =>
    [...[...document.querySelectorAll('#attempts tbody tr')].find((tr) => tr.cells[0].textContent === name).cells]
      .map((c) => c.textContent), task);
  check(row[1] === '1' && row[3].startsWith('failure budget 1 of 2 left') && /exited with code 3/.test(row[4]),
    `Restarts row of ${task}: ${JSON.stringify(row)}`);
  await shot(page, 'job-attempts');
  ok(`attempt classes: ${task} shows ${row[2]}, ${row[3]}, its last end: ${row[4]}`);
}

async function killLeavesRunningList(page) {
  const { job } = expect.placed;
  const running = '#/jobs?state=QUEUED,SCHEDULED,STARTING,RUNNING';
  await open(page, running, 'jobs');
  check(await page.locator('#job-list a', { hasText: job }).count() === 1, `running list: ${job} not on it before the kill`);
  await open(page, `#/jobs/${job}`, 'job');
  page.once('dialog', (d) => d.accept());
  await page.click('#kill');
  await page.waitForFunction(() => /KILLED/.test(document.querySelector('.jobhead h1').textContent), null, { timeout: 15000 });
  await shot(page, 'job-killed');
  await open(page, running, 'jobs');
  await page.waitForFunction((name) => ![...document.querySelectorAll('#job-list a')].some((a) => a.textContent === name), job, { timeout: 10000 });
  await shot(page, 'jobs-after-kill');
  ok(`Kill on the job page: ${job} is KILLED and off the running list`);
}

// The killed job on the history page once its tasks stopped: KILLED, its
// GPU-hours settled, and its user's usage row.
async function historyShowsTheKilledJob(page) {
  const { job } = expect.placed;
  await open(page, '#/history?days=1', 'history');
  await page.waitForFunction((name) => [...document.querySelectorAll('#history-list tr')].some((tr) =>
    tr.textContent.includes(name) && tr.textContent.includes('KILLED') && !tr.textContent.includes('stopping')), job, { timeout: 15000 });
  const row = await page.locator('#history-list tr', { hasText: job }).first().innerText();
  const user = await page.locator('#usage-by-user tr', { hasText: expect.placed.user }).first().innerText();
  await shot(page, 'history');
  check(/KILLED/.test(row), `history row: ${row}`);
  ok(`history: ${job} KILLED (${row.replace(/\s+/g, ' ').trim()}); usage of ${expect.placed.user}: ${user.replace(/\s+/g, ' ').trim()}`);
}

const browser = await launch();
let failed = false;
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  // A script error or a breach of the page's Content-Security-Policy (an
  // inline style or script, another origin) fails the run.
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/.test(m.text())) pageErrors.push(m.text()); });
  const noPageErrors = async () => {
    check(pageErrors.length === 0, `page errors: ${JSON.stringify(pageErrors)}`);
    ok('no script errors and no Content-Security-Policy breaches');
  };
  for (const step of [signsInFromTheAddress, signInForm, nodesShowPlacedGpus, nodesHeatMapAndPaging, queuedJobShowsReason, chartsShowHistory, logViewerFollows, jobPageShowsResources, jobPageShowsAttemptClasses, schedulesPage, accessibility, serviceOpensSandboxed, killLeavesRunningList, historyShowsTheKilledJob, noPageErrors]) {
    try {
      await step(page, browser);
    } catch (e) {
      failed = true;
      console.log(`FAILED: ${step.name}: ${e.message}`);
      await shot(page, `failed-${step.name}`).catch(() => {});
      break;
    }
  }
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
