// SPDX-License-Identifier: MIT
// The timeline of one process with uPlot: live bytes per memory kind (each
// point the highest value in its interval, so peaks keep their height),
// the sampler's RSS, Pss, Private_Dirty and cgroup figures, and on top of them the marks,
// each kind's peak and every failed allocation. A click picks the moment
// whose live set the flame graph then shows.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { el, plural, seconds, size } from './format.js';

const KIND_COLOURS = { host: '#1f77b4', mmap: '#17becf', 'cuda-host': '#8c564b', 'cuda-managed': '#2ca02c' };
const GPU_COLOURS = ['#9467bd', '#e377c2', '#7f3fbf', '#bcbd22', '#5a2d82', '#d62728', '#393b79', '#637939'];

const colourOf = (kind) =>
  KIND_COLOURS[kind] || GPU_COLOURS[(parseInt(kind.slice(5), 10) || 0) % GPU_COLOURS.length];

// What is drawn over the series: [{t (s), label, colour, dash, y (bytes, optional)}].
function eventsOf(proc, report) {
  const events = [];
  for (const m of report.diagnosis.marks || [])
    events.push({ t: m.time_ns / 1e9, label: m.label, colour: '#555', dash: [4, 3], what: 'mark' });
  for (const [kind, mem] of Object.entries(report.memories)) {
    if (mem.peak_bytes > 0)
      events.push({ t: mem.peak_time_ns / 1e9, label: `${kind} peak ${size(mem.peak_bytes)}`,
                    colour: colourOf(kind), y: mem.peak_bytes, what: 'peak' });
    for (const f of mem.failures)
      events.push({ t: f.time_ns / 1e9, label: `${f.function} of ${size(f.size)} failed`,
                    colour: '#d62728', dash: [], what: 'failure' });
  }
  return events.sort((a, b) => a.t - b.t);
}

// Series and aligned data: the buckets' x and the samples' x joined.
function seriesOf(proc) {
  const tl = proc.timeline;
  const xs = tl.t_ns.map((t) => t / 1e9);
  const tables = [[xs, ...Object.values(tl.kinds)]];
  const series = [{ label: 'time', value: (u, v) => (v == null ? '' : seconds(v * 1e9)) }];
  for (const kind of Object.keys(tl.kinds))
    series.push({ label: `${kind} live`, stroke: colourOf(kind), width: 2, paths: uPlot.paths.stepped({ align: 1 }) });
  const s = proc.samples;
  if (s && s.t_ns.length) {
    const sx = s.t_ns.map((t) => t / 1e9);
    const limit = s.cgroup_max.some((v) => v > 0);
    // Pss shares each shared page among the processes that map it, and
    // Private_Dirty is what this process alone wrote: in a forked worker, its
    // rise is the copy-on-write growth that RSS (which counts the parent's
    // pages as the worker's) does not show
    const cols = [s.rss, s.pss, s.private_dirty];
    series.push({ label: 'RSS', stroke: '#444', width: 1.5 });
    series.push({ label: 'Pss', stroke: '#999', width: 1.5, dash: [2, 2] });
    series.push({ label: 'Private_Dirty', stroke: '#e377c2', width: 1.5 });
    const highest = Math.max(...s.rss, ...Object.values(tl.kinds).map((v) => Math.max(...v)));
    // the cgroup holds other processes too, and its limit may be far above what this
    // one used: both are off (a click on the legend shows them) unless the limit is near
    const near = limit && Math.max(...s.cgroup_max) <= 4 * highest;
    if (s.cgroup_current.some((v) => v > 0)) {
      cols.push(s.cgroup_current);
      series.push({ label: 'cgroup use', stroke: '#ff7f0e', width: 1.5, show: near });
    }
    if (limit) {
      cols.push(s.cgroup_max.map((v) => (v > 0 ? v : null)));
      series.push({ label: 'cgroup limit', stroke: '#d62728', width: 1.5, dash: [8, 4], show: near });
    }
    tables.push([sx, ...cols]);
  }
  for (const ser of series.slice(1)) {
    ser.value = (u, v) => (v == null ? '' : size(v));
    ser.spanGaps = true;
    ser.points = { show: false }; // points are where values change, not samples
  }
  return { series, data: tables.length === 1 ? tables[0] : uPlot.join(tables) };
}

// Marks' full-height lines at least this far apart (CSS px); a mark closer to
// the last one drawn is a short tick at the foot of the chart, so that a
// hundred marks are a row of ticks rather than a dark band.
const MARK_LINE_GAP = 20;
// Label rows: marks share the first only, peaks and failures use the others,
// so that however many marks there are, the text stays one readable row.
const ROWS = 4;

// Draws the events as vertical lines with their labels, and the picked
// moment. Leaves what it drew on the chart's element (data-events-drawn:
// the plot's left, top and width, markLines, labels [{x, y, w, h, text,
// what}], in CSS px) for tests.
function drawEvents(u, events, picked) {
  const { ctx } = u;
  const dpr = devicePixelRatio;
  const top = u.bbox.top;
  const bottom = top + u.bbox.height;
  const drawn = { left: u.bbox.left / dpr, top: top / dpr, width: u.bbox.width / dpr, markLines: 0, labels: [] };
  ctx.save();
  ctx.font = `${11 * dpr}px sans-serif`;
  ctx.textBaseline = 'top';
  // uPlot leaves the alignment of the axis it drew last ('right' for the y
  // axis): the positions below are of the labels' left ends
  ctx.textAlign = 'left';
  // each label goes on the first row of its own where it does not run into
  // the one before; one that fits nowhere is left out (its line stays, and
  // the list under the chart has it)
  const rowEnds = new Array(ROWS).fill(-Infinity);
  const gap = 6 * dpr;
  let lastMarkLine = -Infinity;
  for (const e of events) {
    const x = u.valToPos(e.t, 'x', true);
    if (x < u.bbox.left - 1 || x > u.bbox.left + u.bbox.width + 1) continue;
    ctx.strokeStyle = e.colour;
    ctx.fillStyle = e.colour;
    ctx.lineWidth = dpr * (e.what === 'failure' ? 2 : 1);
    let line = true;
    if (e.what === 'peak') {
      const y = u.valToPos(e.y, 'y', true);
      ctx.beginPath();
      ctx.arc(x, y, 4 * dpr, 0, 2 * Math.PI);
      ctx.fill();
    } else {
      line = e.what !== 'mark' || x - lastMarkLine >= MARK_LINE_GAP * dpr;
      ctx.setLineDash(line ? (e.dash || []).map((d) => d * dpr) : []);
      ctx.beginPath();
      ctx.moveTo(x, line ? top : bottom - 5 * dpr);
      ctx.lineTo(x, bottom);
      ctx.stroke();
      if (e.what === 'mark' && line) {
        lastMarkLine = x;
        drawn.markLines++;
      }
    }
    if (!line) continue; // a tick has no label
    const text = e.label.length > 28 ? `${e.label.slice(0, 27)}…` : e.label;
    const width = ctx.measureText(text).width;
    // right of the line, or left of it near the right edge
    const left = x + 3 * dpr + width > u.bbox.left + u.bbox.width ? x - 3 * dpr - width : x + 3 * dpr;
    const rows = e.what === 'mark' ? [0] : [1, 2, 3, 0];
    const row = rows.find((r) => left > rowEnds[r] + gap);
    if (row === undefined) continue;
    rowEnds[row] = left + width;
    ctx.setLineDash([]);
    const y = top + (2 + 13 * row) * dpr;
    ctx.fillText(text, left, y);
    drawn.labels.push({ x: left / dpr, y: y / dpr, w: width / dpr, h: 12, text, what: e.what });
  }
  if (picked) {
    // the stretch of time the flame graph's live set holds for
    const x0 = u.valToPos(picked.from, 'x', true);
    const x1 = Math.max(x0 + 2 * dpr, u.valToPos(picked.to, 'x', true));
    ctx.fillStyle = 'rgba(0, 0, 0, 0.08)';
    ctx.fillRect(x0, top, x1 - x0, bottom - top);
    ctx.fillStyle = '#000';
    ctx.fillRect(x0, top, 2 * dpr, bottom - top);
  }
  ctx.restore();
  u.root.dataset.eventsDrawn = JSON.stringify(drawn);
}

// The chart in a section; onPick(seconds) is called on a click.
export function timelinePanel(proc, report, onPick) {
  const box = el('div', { class: 'timeline-chart' });
  const section = el('section', { class: 'timeline' }, el('h3', null, 'Memory over time'),
    el('p', { class: 'hint' }, 'Each point is the highest value in its interval. Click a moment to see what was live then, in the flame graph below; click a name under the chart to hide or show its line.'),
    box);
  if (!proc.timeline) {
    box.append(el('p', null, 'No events in this process.'));
    return { element: section, draw() {}, pick() {} };
  }
  const events = eventsOf(proc, report);
  // every event as text too: a label that does not fit on the chart is still here
  section.append(el('details', { class: 'events' }, el('summary', null, `${plural(events.length, 'event')} on the timeline`),
    el('ul', null, events.map((e) => el('li', null, `${seconds(e.t * 1e9)}: ${e.what} `, el('strong', null, e.label))))));
  let picked = null;
  let plot = null;
  const { series, data } = seriesOf(proc);
  const end = Math.max(proc.timeline.end_ns / 1e9, data[0][data[0].length - 1] || 0, 1e-6);

  function draw() {
    if (plot) plot.destroy();
    const width = Math.max(400, box.clientWidth || 900);
    plot = new uPlot({
      width,
      height: 280,
      series,
      scales: { x: { time: false, range: [0, end] }, y: { range: (u, lo, hi) => [0, hi > 0 ? hi * 1.08 : 1] } },
      axes: [
        { values: (u, vals) => vals.map((v) => seconds(v * 1e9)) },
        { values: (u, vals) => vals.map((v) => size(v)), size: 80 },
      ],
      cursor: { drag: { x: false, y: false } },
      hooks: { draw: [(u) => drawEvents(u, events, picked)] },
    }, data, box);
    // from the click itself: uPlot updates its cursor on the next animation frame
    plot.over.addEventListener('click', (e) => {
      const left = e.clientX - plot.over.getBoundingClientRect().left;
      if (left >= 0) onPick(plot.posToVal(left, 'x'));
    });
  }

  return {
    element: section,
    draw,
    // marks the stretch of time (s) whose live set the flame graph shows
    pick(from, to) {
      picked = { from, to };
      if (plot) plot.redraw(false);
    },
  };
}
