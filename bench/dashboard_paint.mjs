// The dashboard's first paint in headless chromium: loads the overview
// (and the nodes page) of the cluster at --url in a fresh browser context
// each run (no cache), and prints, per page, the median and worst of:
// first contentful paint (the browser's own entry) and the time until the
// page has drawn the cluster's data (the page's "drawn:PAGE" mark, set once
// its first refresh is in the DOM), both from the start of navigation.
// Target: overview of a 1,000-node cluster drawn in < 1 s.
//   node bench/dashboard_paint.mjs --url http://HOST:PORT [--runs 5]
// (bench/dashboard_bench starts such a cluster and runs this.)
import { parseArgs } from 'node:util';
import { launch } from '../tests/browser/browser.mjs';

const { values: args } = parseArgs({ options: { url: { type: 'string' }, runs: { type: 'string', default: '5' } } });
const url = args.url.replace(/\/$/, '');
const runs = Number(args.runs);

async function measure(browser, hash, ready, mark) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
  page.on('requestfailed', (r) => console.log(`request failed: ${r.url()} ${r.failure().errorText}`));
  await page.goto(`${url}/${hash}`);
  await page.waitForSelector(`main[data-ready="${ready}"]`, { timeout: 30000 });
  // One frame after the data is in the DOM: it has been painted.
  await page.waitForFunction((m) => performance.getEntriesByName(m).length > 0, mark);
  const m = await page.evaluate((name) => {
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    return { fcp: fcp ? fcp.startTime : NaN, drawn: performance.getEntriesByName(name)[0].startTime };
  }, mark);
  await context.close();
  return m;
}

const stats = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return `median ${s[Math.floor(s.length / 2)].toFixed(0)} ms, worst ${s[s.length - 1].toFixed(0)} ms`;
};

const browser = await launch();
try {
  // The summary where the server has it (the whole node list of 10,000
  // nodes is 12 MB); else the list.
  const summary = await fetch(`${url}/api/v1/node-summary`);
  const nodes = summary.ok ? await summary.json() : await (await fetch(`${url}/api/v1/nodes`)).json();
  const count = summary.ok ? nodes.nodes : nodes.nodes.length;
  const gpus = summary.ok ? nodes.gpus.total : nodes.nodes.reduce((s, n) => s + n.gpu_count, 0);
  const jobs = await (await fetch(`${url}/api/v1/jobs?all=true`)).json();
  console.log(`cluster: ${count} nodes, ${gpus} GPUs, ${jobs.jobs.length} jobs`);
  await measure(browser, '#/', 'overview', 'drawn:overview');  // the browser's own start-up, not counted
  for (const [hash, ready, name] of [['#/', 'overview', 'overview'], ['#/nodes', 'nodes', 'nodes page']]) {
    const r = [];
    for (let i = 0; i < runs; i++) r.push(await measure(browser, hash, ready, `drawn:${ready}`));
    console.log(`${name}: first contentful paint ${stats(r.map((x) => x.fcp))}; drawn with the cluster's data ${stats(r.map((x) => x.drawn))} (${runs} cold loads)`);
  }
} finally {
  await browser.close();
}
