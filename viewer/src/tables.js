// SPDX-License-Identifier: MIT
// The text report's parts as HTML: each memory kind's figures, the stacks
// that held the peak and the leaks, the failed allocations and the
// diagnosis, from the report the page carries (`memtrace report --json`).
import { el, exact, plural, seconds, size, sizeExact } from './format.js';

const FRAMES_SHOWN = 6;

// The trace's tree of frames (data.frames, data.nodes): the report's stacks are nodes of it.
let tree = { frames: [], nodes: [] };
export function useTree(data) {
  tree = data;
}

// A stack's frames as the text report prints them, innermost first.
export function framesOf(node) {
  const out = [];
  for (let n = node; n > 0; n = tree.nodes[2 * n - 2]) out.push(tree.frames[tree.nodes[2 * n - 1]]);
  return out.length === 1 && out[0] === '[no stack]' ? [] : out;
}

// A stack, cut to a few frames with the rest behind a <details>.
export function stackList(node) {
  const frames = framesOf(node);
  if (!frames.length) return el('span', { class: 'stack' }, '(no stack recorded)');
  const items = frames.map((f) => el('li', null, f));
  if (items.length <= FRAMES_SHOWN) return el('ol', { class: 'stack' }, items);
  return el('div', null, el('ol', { class: 'stack' }, items.slice(0, FRAMES_SHOWN)),
    el('details', null, el('summary', null, `${items.length - FRAMES_SHOWN} more frames`),
      el('ol', { class: 'stack', start: FRAMES_SHOWN + 1 }, items.slice(FRAMES_SHOWN))));
}

// The leak classes of docs/reachability.md in the report's order, and those
// `memtrace check --max-leaked` counts by default: what no scan judged counts.
const CLASSES = ['definite', 'indirect', 'possible', 'reachable', 'unclassified'];
const COUNTED = ['definite', 'indirect', 'unclassified'];

// A leak stack's classes as the text report says them: "definite 48 B in 1, indirect 96 B in 2".
function stackClasses(reach) {
  return CLASSES.filter((c) => reach[c].blocks).map((c) => `${c} ${size(reach[c].bytes)} in ${exact(reach[c].blocks)}`).join(', ');
}

// The memory held at a failure is known by stack, not by allocation: no such column there.
// A leak table of a classified kind has each stack's classes, in the order the report ranks them.
function stacksTable(title, stacks, total, { allocations = true, classes = false } = {}) {
  if (!stacks.length) return null;
  return el('div', { class: 'stacks' }, el('h4', null, title),
    el('table', null,
      el('thead', null, el('tr', null, el('th', null, 'bytes'), el('th', null, 'blocks'), allocations && el('th', null, 'allocations'),
        classes && el('th', null, 'class'), el('th', null, 'stack (innermost first)'))),
      el('tbody', null, stacks.map((s) => el('tr', null,
        el('td', { class: 'n', 'data-bytes': s.bytes }, sizeExact(s.bytes)),
        el('td', { class: 'n' }, exact(s.blocks)),
        allocations && el('td', { class: 'n' }, exact(s.allocations)),
        classes && el('td', { class: 'reach' }, stackClasses(s.reachability)),
        el('td', null, s.label ? el('p', { class: 'label' }, s.label) : null, stackList(s.node)))))),
    total > stacks.length ? el('p', { class: 'more' }, `… and ${plural(total - stacks.length, 'more stack')} (memtrace report --top N)`) : null);
}

function failure(f) {
  const code = 'cuda_error' in f ? `CUDA error ${f.cuda_error}` : `errno ${f.errno}`;
  const lines = [el('p', null, el('strong', null, `${f.function} of ${sizeExact(f.size)} failed`),
    ` at ${seconds(f.time_ns)} (${code}), with ${sizeExact(f.live_bytes)} live in ${plural(f.live_blocks, 'block')}`)];
  if (f.heap_free_before != null && f.heap_free_before > 0)
    lines.push(el('p', null, `The heap had ${size(f.heap_free_before)} free (RSS ${size(f.rss_before)}): `,
      f.size > f.heap_free_before ? 'more than everything free was asked for.' : 'enough in total, but not in one piece.'));
  if (f.device_total)
    lines.push(el('p', null, `The device had ${size(f.device_free)} free of ${size(f.device_total)}: `,
      f.size > f.device_free ? 'the request is larger than all that is free.'
        : 'enough in total, but not in one piece (fragmentation, or a caching allocator holding it).'));
  lines.push(el('h5', null, 'asked by'), stackList(f.stack.node));
  if (f.top_stacks.length)
    lines.push(stacksTable('held then by', f.top_stacks, f.top_stacks.length, { allocations: false }));
  return el('div', { class: 'failure' }, lines);
}

// What the memory live at the end of a process is, by how it ended (as the text report says).
export function leakWord(end) {
  return { exit: 'leaked', exec: 'live at the exec', 'exec-untraced': 'live at the exec', killed: 'live at death' }[end] ||
    'live when tracing stopped';
}

// What is live at the end by leak class (docs/reachability.md), as the summary
// says it, the figure's note, and what check counts of it; null when nothing is.
function leakClasses(mem) {
  if (!mem.leaked_blocks) return null;
  const blocks = plural(mem.leaked_blocks, 'block');
  if (!mem.leak_kinds)
    return { summary: `, not classified: ${mem.leak_kinds_missing}; check counts all of it`,
      note: `${blocks}, not classified: ${mem.leak_kinds_missing}`,
      counted: [sizeExact(mem.leaked_bytes), `all of it: no scan judged these ${blocks}`] };
  const k = mem.leak_kinds;
  // unclassified (a block made after the scan) only when there is one, as the text report
  const shown = CLASSES.filter((c) => c !== 'unclassified' || k[c].blocks);
  const counted = COUNTED.filter((c) => shown.includes(c));
  const bytes = counted.reduce((n, c) => n + k[c].bytes, 0);
  return { summary: `: ${shown.map((c) => `${c} ${size(k[c].bytes)}`).join(', ')}; check counts ${size(bytes)}`,
    note: `${blocks}: ${shown.map((c) => `${c} ${size(k[c].bytes)} in ${exact(k[c].blocks)}`).join(', ')}`,
    counted: [sizeExact(bytes), `${counted.join(' + ')}: what memtrace check --max-leaked counts`] };
}

export function kindSection(kind, mem, end) {
  const leakedWord = leakWord(end);
  const classes = leakClasses(mem);
  const figures = [
    ['peak', sizeExact(mem.peak_bytes), `${plural(mem.peak_blocks, 'block')} at ${seconds(mem.peak_time_ns)}`],
    [leakedWord, sizeExact(mem.leaked_bytes), classes ? classes.note : plural(mem.leaked_blocks, 'block')],
    ['allocations', exact(mem.allocations), `${exact(mem.frees)} frees, ${size(mem.bytes_allocated)} in all`],
    ['temporary', exact(mem.temporary_allocations), 'freed before the next allocation'],
  ];
  if (classes) figures.splice(2, 0, ['counted by check', ...classes.counted]);
  if (mem.failed_allocations) figures.push(['failed', exact(mem.failed_allocations), 'allocations']);
  return el('details', { class: 'kind', 'data-kind': kind, open: mem.peak_bytes > 0 || mem.failed_allocations > 0 },
    el('summary', null, el('h3', null, kind), ` peak ${size(mem.peak_bytes)}, ${leakedWord} ${size(mem.leaked_bytes)}${classes ? classes.summary : ''}`),
    el('dl', { class: 'figures' }, figures.map(([k, v, note]) =>
      el('div', { 'data-figure': k }, el('dt', null, k), el('dd', null, v), el('dd', { class: 'note' }, note)))),
    stacksTable('held at the peak', mem.peak_stacks, mem.peak_stacks_total),
    mem.leak_kinds ? stacksTable(`${leakedWord}, what check counts first`, mem.leak_stacks, mem.leak_stacks_total, { classes: true })
      : stacksTable(leakedWord, mem.leak_stacks, mem.leak_stacks_total),
    mem.failures.length ? el('div', { class: 'failures' }, el('h4', null, `failed allocations (${exact(mem.failed_allocations)})`), mem.failures.map(failure)) : null);
}

// The analyzer's findings, when it has some: null otherwise.
export function diagnosisSection(proc) {
  const d = proc.diagnosis;
  const items = [];
  // the findings first, each with its figure: the causes, in the analyzer's order
  // (a failed allocation before anything else)
  for (const f of (d.fragmentation && d.fragmentation.findings) || [])
    items.push(el('li', { class: f.finding === 'allocation-failed' ? 'bad' : 'warn' },
      el('strong', null, `${f.finding}: `), el('strong', { 'data-figure': f.figure }, size(f.figure)), ' — ', f.text,
      el('br'), el('em', null, f.advice)));
  if (d.post_mortem) {
    const pm = d.post_mortem;
    const live = Object.entries(pm.live_at_death).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${size(v)}`).join(', ');
    items.push(el('li', { class: 'bad' }, el('strong', null, 'Killed. '),
      pm.cgroup_max ? `RSS ${size(pm.last_rss)} against a cgroup limit of ${size(pm.cgroup_max)} (memory.current ${size(pm.cgroup_current)}) at the last sample. `
        : pm.last_rss != null ? `RSS ${size(pm.last_rss)} at the last sample, no cgroup limit known. ` : 'No samples. ',
      `Live at death: ${live || 'nothing'}.`));
  }
  const GROWTH_SHOWN = 3; // as the text report
  for (const g of d.growth.slice(0, GROWTH_SHOWN)) {
    const top = g.stack.label || '(no stack recorded)';
    items.push(el('li', { class: 'warn' }, el('strong', null, 'Grows: '),
      g.bytes_per_mark != null && g.bytes_per_mark > 0 ? `${size(g.bytes_per_mark)} per mark, ` : '',
      `${size(Math.max(0, g.grown_bytes))} in all (live ${size(g.from_bytes)} to ${size(g.end_bytes)}), ${size(Math.max(0, g.bytes_per_second))}/s (${g.kind}), by `,
      el('code', null, top)));
  }
  if (d.growth_total > Math.min(d.growth.length, GROWTH_SHOWN))
    items.push(el('li', null, `… and ${plural(d.growth_total - Math.min(d.growth.length, GROWTH_SHOWN), 'more growing stack')} (memtrace report --json)`));
  const m = d.memory_over_time;
  // about 0 at the fork (every page shared): the last figure is the copies, however late the first sample
  if (m && m.private_dirty_last > 0 && proc.origin === 'fork')
    items.push(el('li', null, `Copy-on-write: Private_Dirty ${size(m.private_dirty_last)} since the fork (${size(m.private_dirty_first)} at the first sample) in this forked process.`));
  if (!items.length) return null;
  return el('section', { class: 'diagnosis' }, el('h3', null, 'Diagnosis'), el('ul', null, items));
}
