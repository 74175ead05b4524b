// Line charts of the cluster over time, drawn as SVG by hand: a few series
// on one time axis, a value axis from zero, and a legend with each series'
// latest value in words (the chart's text for readers that do not see it).
// The samples come from the server's history ring (/api/v1/history).

const kSvg = 'http://www.w3.org/2000/svg';
const kWidth = 560;
const kHeight = 200;
const kPad = { left: 52, right: 12, top: 10, bottom: 24 };

// Colours with enough contrast on white, for series that have none given.
export const kPalette = ['#1f5f8b', '#a4161a', '#2f6b2f', '#6d3fb0', '#8a3b12', '#00666b', '#5c4100', '#4a5563'];

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(kSvg, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null && v !== false) el.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c !== undefined && c !== null && c !== false) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// The smallest of 1, 2, 5 x 10^k at or above x (at least `least`).
function niceCeil(x, least = 1) {
  if (!(x > least)) return least;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

// A time of day; with seconds when the axis spans less than 10 minutes.
const clock = (ms, span) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: span < 600000 ? '2-digit' : undefined });

// Seconds in the largest units that keep it short: 45s, 3m 20s, 2h 5m.
export function seconds(s) {
  if (s === null || s === undefined) return '—';
  if (s > 0 && s < 1) return `${Math.round(s * 1000)}ms`;
  const r = Math.round(s);
  if (r < 60) return `${r}s`;
  if (r < 3600) return `${Math.floor(r / 60)}m${r % 60 ? ` ${r % 60}s` : ''}`;
  return `${Math.floor(r / 3600)}h ${Math.floor((r % 3600) / 60)}m`;
}

// A figure with the chart and its legend. `series`: [{key, name, colour,
// dashed, points: [[unixMs, value or null], ...]}], points ascending in
// time; a null value breaks the line. `format` writes a value (axis and
// legend). `from`..`to` is the time axis.
export function lineChart({ id, title, series, from, to, format = String, least = 1 }) {
  const values = series.flatMap((s) => s.points.map((p) => p[1])).filter((v) => v !== null && v !== undefined);
  const top = niceCeil(values.reduce((m, v) => Math.max(m, v), 0), least);
  const w = kWidth - kPad.left - kPad.right;
  const hgt = kHeight - kPad.top - kPad.bottom;
  const span = Math.max(1, to - from);
  const x = (t) => kPad.left + (w * (t - from)) / span;
  const y = (v) => kPad.top + hgt - (hgt * v) / top;

  const grid = [0, 0.5, 1].map((f) => svg('g', {},
    svg('line', { x1: kPad.left, x2: kPad.left + w, y1: y(top * f), y2: y(top * f), stroke: '#d3d9e0' }),
    svg('text', { x: kPad.left - 6, y: y(top * f) + 4, 'text-anchor': 'end', class: 'chart-axis' }, format(top * f))));
  const times = svg('g', {},
    svg('text', { x: kPad.left, y: kHeight - 6, class: 'chart-axis' }, clock(from, span)),
    svg('text', { x: kPad.left + w, y: kHeight - 6, 'text-anchor': 'end', class: 'chart-axis' }, clock(to, span)));

  const lines = series.map((s, i) => {
    const colour = s.colour || kPalette[i % kPalette.length];
    const g = svg('g', { 'data-series': s.key });
    let run = [];
    const flush = () => {
      if (run.length === 1) g.append(svg('circle', { cx: run[0][0], cy: run[0][1], r: 2.5, fill: colour }));
      else if (run.length > 1) {
        g.append(svg('polyline', {
          points: run.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(' '),
          fill: 'none', stroke: colour, 'stroke-width': 2, 'stroke-dasharray': s.dashed ? '5 4' : null,
        }));
      }
      run = [];
    };
    for (const [t, v] of s.points) {
      if (v === null || v === undefined || t < from) flush();
      else run.push([x(t), y(v)]);
    }
    flush();
    return g;
  });

  const latest = (s) => {
    for (let i = s.points.length - 1; i >= 0; --i) if (s.points[i][1] !== null && s.points[i][1] !== undefined) return s.points[i][1];
    return null;
  };
  const words = series.map((s) => `${s.name} ${latest(s) === null ? 'none' : format(latest(s))}`).join(', ');
  const titleId = `chart-${id}-title`;
  const chart = svg('svg', { viewBox: `0 0 ${kWidth} ${kHeight}`, role: 'img', 'aria-labelledby': titleId, class: 'chart-plot' },
    svg('title', { id: titleId }, `${title}, ${clock(from, span)} to ${clock(to, span)}: now ${words}`),
    ...grid, times, ...lines);
  const legend = document.createElement('figcaption');
  const heading = document.createElement('strong');
  heading.textContent = title;
  legend.append(heading);
  series.forEach((s, i) => {
    const item = document.createElement('span');
    item.className = 'chart-key';
    const v = latest(s);
    item.dataset.series = s.key;
    item.dataset.last = v === null ? '' : String(v);
    const swatch = document.createElement('span');
    swatch.className = `chart-swatch${s.dashed ? ' chart-swatch-dashed' : ''}`;
    swatch.style.borderColor = s.colour || kPalette[i % kPalette.length];
    item.append(swatch, `${s.name}: ${v === null ? 'none' : format(v)}`);
    legend.append(item);
  });
  const figure = document.createElement('figure');
  figure.className = 'chart';
  figure.dataset.chart = id;
  figure.append(chart, legend);
  return figure;
}
