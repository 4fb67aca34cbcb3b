// SPDX-License-Identifier: MIT
// Flame graphs (icicles: the outermost frame on top) with d3-flame-graph.
// The data gives each one as rows (node, value, blocks) over the trace's
// tree of frames (data.nodes: node n is parent nodes[2n-2], frame label
// data.frames[nodes[2n-1]]); this folds them into the nested
// {name, value, blocks, children} d3-flame-graph draws. Values are totals:
// a frame's value includes its callees'. A flame graph's small frames come
// merged into one "[N smaller, each under 0.1%]" node per caller; the live
// set of a snapshot is its largest stacks and one box for the rest.
import flamegraph, { tooltip } from 'd3-flame-graph';
import { select } from 'd3-selection';
import { el, exact, size, plural } from './format.js';
import { leakWord } from './tables.js';

// The tree of one flame graph. `unit` is 'bytes' or 'allocations'.
export function buildTree(data, flame, rootName) {
  const root = { name: rootName, value: 0, blocks: 0, children: [], parent: null };
  const made = new Map([[0, root]]);
  const nodeOf = (id) => {
    let t = made.get(id);
    if (t) return t;
    // build the missing ancestors first, outermost first, without recursion
    const chain = [];
    for (let n = id; !made.has(n); n = data.nodes[2 * n - 2]) chain.push(n);
    for (let i = chain.length - 1; i >= 0; i--) {
      const n = chain[i];
      const parent = made.get(data.nodes[2 * n - 2]);
      t = { name: data.frames[data.nodes[2 * n - 1]], value: 0, blocks: 0, children: [], parent };
      parent.children.push(t);
      made.set(n, t);
    }
    return t;
  };
  const rows = flame.rows;
  for (let i = 0; i < rows.length; i += 3) {
    for (let t = nodeOf(rows[i]); t; t = t.parent) {
      t.value += rows[i + 1];
      t.blocks += rows[i + 2];
    }
  }
  if (flame.cut_stacks) {
    root.children.push({
      name: `[${plural(flame.cut_stacks, 'smaller stack')}, not shown one by one]`,
      value: flame.cut_value, blocks: flame.cut_blocks, children: [], parent: root, cut: true,
    });
    root.value += flame.cut_value;
    root.blocks += flame.cut_blocks;
  }
  // d3-hierarchy walks `children`; the parent links would make the tree cyclic for it
  for (const t of made.values()) delete t.parent;
  return root;
}

// The live set of snapshot i: each snapshot is written as its change from
// the one before (a node's new bytes and blocks; 0, 0 when it is gone).
export function liveSetAt(snapshots, i) {
  const held = {};
  for (let j = 0; j <= i; j++) {
    for (const [kind, change] of Object.entries(snapshots[j].kinds)) {
      const m = held[kind] || (held[kind] = new Map());
      const r = change.rows;
      for (let n = 0; n < r.length; n += 3) {
        if (r[n + 1] === 0 && r[n + 2] === 0) m.delete(r[n]);
        else m.set(r[n], [r[n + 1], r[n + 2]]);
      }
    }
  }
  const kinds = {};
  for (const [kind, m] of Object.entries(held)) {
    const { kept_stacks, cut_stacks, cut_value, cut_blocks } = snapshots[i].kinds[kind];
    kinds[kind] = { rows: [...m].flatMap(([node, [v, b]]) => [node, v, b]), kept_stacks, cut_stacks, cut_value, cut_blocks };
  }
  return { ...snapshots[i], kinds };
}

function describe(d, unit, rootValue) {
  const v = d.data.value;
  const share = rootValue ? ` (${((100 * v) / rootValue).toFixed(1)}%)` : '';
  const what = unit === 'bytes'
    ? `${size(v)}, ${exact(v)} bytes${share} in ${plural(d.data.blocks, 'block')}`
    : `${plural(v, 'allocation')}${share}` +
      (d.data.blocks !== v ? `, ${exact(d.data.blocks)} bytes` : '');
  return `${d.data.name}\n${what}`;
}

// One flame graph in `container`, redrawn by show(); hover text goes to `details`.
export class Flame {
  constructor(container, details) {
    this.container = container;
    this.details = details;
    this.chart = null;
  }

  show(tree, unit) {
    this.tree = tree;
    this.unit = unit;
    const width = Math.max(400, this.container.clientWidth || 900);
    const tip = tooltip.defaultFlamegraphTooltip().text((d) => describe(d, unit, tree.value));
    this.container.replaceChildren();
    this.chart = flamegraph()
      .width(width)
      .cellHeight(18)
      .transitionDuration(0)
      .minFrameSize(2)
      .inverted(true)
      .sort(true)
      .tooltip(tip)
      .label((d) => describe(d, unit, tree.value))
      .setDetailsHandler((text) => { this.details.textContent = text || ''; })
      .setSearchMatch((d, term) => !!term && d.data.name.toLowerCase().includes(term.toLowerCase()))
      .setSearchHandler((results, sum, total) => {
        this.details.textContent = results.length
          ? `search: ${plural(results.length, 'frame')} match, ${unit === 'bytes' ? size(sum) : exact(sum)} of ${unit === 'bytes' ? size(total) : exact(total)}`
          : '';
      });
    if (this.tip) this.tip.destroy();
    this.tip = tip;
    select(this.container).datum(tree).call(this.chart);
  }

  search(term) {
    if (this.chart) this.chart.search(term);
  }

  resetZoom() {
    if (this.chart) this.chart.resetZoom();
  }
}

// The controls and the graph for one process: kind, what to weigh by, search.
export function flamePanel(data, proc, report) {
  const kinds = Object.keys(proc.flames);
  const state = { kind: kinds.includes('host') ? 'host' : kinds[0], metric: 'peak', snapshot: null };
  // show the kind that held the most at its peak, GPU memory included
  let best = -1;
  for (const k of kinds) {
    const peak = report.memories[k] ? report.memories[k].peak_bytes : 0;
    if (peak > best) { best = peak; state.kind = k; }
  }
  const heading = el('p', { class: 'flame-heading' });
  const details = el('p', { class: 'flame-details' }, 'Hover over a frame for its bytes and blocks; click it to zoom.');
  const graph = el('div', { class: 'flame-graph' });
  const flame = new Flame(graph, details);
  const metricNames = { peak: 'at the peak', leaked: leakWord(report.end), allocated: 'all allocations', temporary: 'temporary allocations' };
  const metricButtons = {};
  const kindSelect = el('select', { 'aria-label': 'memory kind',
    onchange: () => { state.kind = kindSelect.value; draw(); } },
    kinds.map((k) => el('option', { value: k, selected: k === state.kind }, k)));
  const search = el('input', { type: 'search', placeholder: 'search frames', 'aria-label': 'search frames',
    oninput: () => flame.search(search.value) });
  const bar = el('div', { class: 'flame-bar' },
    el('label', null, 'memory ', kindSelect),
    Object.entries(metricNames).map(([m, label]) => {
      metricButtons[m] = el('button', { type: 'button', 'data-metric': m,
        onclick: () => { state.metric = m; state.snapshot = null; draw(); } }, label);
      return metricButtons[m];
    }),
    metricButtons.snapshot = el('button', { type: 'button', 'data-metric': 'snapshot', hidden: true }, ''),
    search,
    el('button', { type: 'button', onclick: () => flame.resetZoom() }, 'reset zoom'));

  function draw() {
    const kindData = proc.flames[state.kind];
    let flameData;
    let unit = 'bytes';
    let rootName = `all ${state.kind}`;
    if (state.snapshot) {
      const s = state.snapshot;
      flameData = s.kinds[state.kind] || { rows: [], kept_stacks: 0, cut_stacks: 0, cut_value: 0, cut_blocks: 0 };
      heading.textContent = `${state.kind} live at ${s.label}`;
    } else {
      flameData = kindData[state.metric];
      const mem = report.memories[state.kind];
      if (state.metric === 'peak') heading.textContent = `${state.kind} at its peak: ${size(mem.peak_bytes)} (${exact(mem.peak_bytes)} bytes) in ${plural(mem.peak_blocks, 'block')}`;
      else if (state.metric === 'leaked') {
        heading.textContent = `${state.kind} ${leakWord(report.end)}: ${size(mem.leaked_bytes)} (${exact(mem.leaked_bytes)} bytes) in ${plural(mem.leaked_blocks, 'block')}`;
        // the graph weighs every live block: its classes are the kind's figures below
        if (mem.leak_kinds) heading.textContent += ', every leak class together (the split is under By memory kind)';
      } else if (state.metric === 'allocated') heading.textContent = `${state.kind}, every allocation: ${size(mem.bytes_allocated)} (${exact(mem.bytes_allocated)} bytes) in ${plural(mem.allocations, 'allocation')}`;
      else {
        unit = 'allocations';
        heading.textContent = `${state.kind}, temporary allocations (freed before the thread's next one): ${exact(mem.temporary_allocations)}`;
      }
    }
    if (flameData.merged_nodes) {
      const min = unit === 'bytes' ? size(flameData.min_value) : exact(flameData.min_value);
      heading.append(el('span', { class: 'cut' },
        ` — ${plural(flameData.merged_nodes, 'frame')} under ${min} (0.1%) merged, per caller, into one box each`));
    }
    if (flameData.cut_stacks) {
      heading.append(el('span', { class: 'cut' },
        ` — the ${plural(flameData.kept_stacks, 'largest stack')} one by one, the other ${exact(flameData.cut_stacks)} (${unit === 'bytes' ? size(flameData.cut_value) : exact(flameData.cut_value)}) as one box`));
    }
    for (const [m, b] of Object.entries(metricButtons))
      b.classList.toggle('on', state.snapshot ? m === 'snapshot' : m === state.metric);
    const tree = buildTree(data, flameData, rootName);
    graph.classList.toggle('empty', tree.value === 0);
    if (tree.value === 0) {
      graph.replaceChildren(el('p', null, 'Nothing to show here.'));
      return;
    }
    flame.show(tree, unit);
    if (search.value) flame.search(search.value);
  }

  return {
    element: el('section', { class: 'flame' }, el('h3', null, 'Flame graph'), bar, heading, details, graph),
    draw,
    // the live set of a snapshot (from a click on the timeline)
    showSnapshot(snapshot, label) {
      state.snapshot = { ...snapshot, label };
      metricButtons.snapshot.hidden = false;
      metricButtons.snapshot.textContent = `live at ${label}`;
      metricButtons.snapshot.onclick = () => { state.snapshot = { ...snapshot, label }; draw(); };
      draw();
    },
  };
}
