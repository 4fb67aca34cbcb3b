// SPDX-License-Identifier: MIT
// The page of `memtrace view`: reads the data the command put in
// #memtrace-data and draws one panel per process of the trace: its
// diagnosis, its timeline, a flame graph and the report's tables. A panel
// is drawn when it is first opened, so a tree of many processes opens fast.
import './page.css';
import { el, exact, plural, seconds, size } from './format.js';
import { flamePanel, liveSetAt } from './flame.js';
import { timelinePanel } from './timeline.js';
import { diagnosisSection, kindSection, useTree } from './tables.js';

function ending(p) {
  switch (p.end) {
    case 'exit': return `exited with status ${p.exit_status} (${p.exit_how})`;
    case 'exec': return 'replaced by exec';
    case 'exec-untraced': return `replaced by an untraced program ${p.exec_path}`;
    case 'stopped': return 'tracing stopped: the figures end there';
    default: return 'killed (no exit record)';
  }
}

function processPanel(data, proc, report) {
  const title = `process ${report.pid}: ${report.command || report.exe || '?'}`;
  const body = el('div', { class: 'body' });
  const panel = el('details', { class: 'process', 'data-pid': report.pid, 'data-instance': report.instance },
    el('summary', null, el('h2', null, title)), body);
  let drawn = false;

  function draw() {
    if (drawn) return;
    drawn = true;
    const flame = flamePanel(data, proc, report);
    const timeline = timelinePanel(proc, report, (t) => {
      // what was live at t: the latest snapshot whose stretch holds t, else the
      // latest before t (the first one when there is none before)
      const snaps = proc.snapshots;
      let at = -1;
      let holding = -1;
      snaps.forEach((s, i) => {
        if (s.t_ns / 1e9 > t) return;
        if (at < 0 || s.t_ns >= snaps[at].t_ns) at = i;
        if (t < s.until_ns / 1e9 && (holding < 0 || s.t_ns >= snaps[holding].t_ns)) holding = i;
      });
      at = holding >= 0 ? holding : at >= 0 ? at : 0;
      if (!snaps.length) return;
      const best = liveSetAt(snaps, at);
      timeline.pick(best.t_ns / 1e9, Math.max(best.t_ns, best.until_ns) / 1e9);
      const why = best.why === 'mark' ? ', a mark' : best.why === 'failure' ? ', a failed allocation' : '';
      const clicked = seconds(t * 1e9);
      let label;
      if (best.t_ns / 1e9 <= t && t < best.until_ns / 1e9)
        label = `${clicked}: the same from ${seconds(best.t_ns)} to ${seconds(best.until_ns)}, nothing allocated or freed in between`;
      else if (best.t_ns / 1e9 <= t)
        label = `${seconds(best.t_ns)}${why}, the moment recorded last before ${clicked}`;
      else
        label = `${seconds(best.t_ns)}${why}, the first moment recorded (nothing before ${clicked})`;
      flame.showSnapshot(best, label);
    });
    body.append(...[
      el('p', { class: 'facts' }, `pid ${report.pid}, ppid ${report.ppid}, ${report.origin}; ${ending(report)}; `,
        `${plural(report.threads, 'thread')}, ${exact(report.events)} events`,
        report.lost_stack_events ? `; ${exact(report.lost_stack_events)} events without a stack` : '',
        sampledNote(report.sampling), windowNote(report.window)),
      diagnosisSection(report),
      timeline.element,
      flame.element,
      el('section', { class: 'kinds' }, el('h3', null, 'By memory kind'),
        Object.entries(report.memories).map(([k, mem]) => kindSection(k, mem, report.end))),
    ].filter(Boolean));
    timeline.draw();
    flame.draw();
  }
  panel.addEventListener('toggle', () => { if (panel.open) draw(); });
  return { panel, draw };
}

// Sampled mode (docs/sampling.md): the host figures are estimates; null for a full capture.
function sampledNote(sampling) {
  if (!sampling) return '';
  return `; sampled capture: host figures are estimates (one allocation sampled per ${size(sampling.interval_bytes)} ` +
    `allocated on average; blocks over ${size(sampling.exact_above_bytes)} recorded exactly)`;
}

// A ring (docs/architecture.md, The ring): what it kept starts at a keyframe; absent in older reports.
function windowNote(window) {
  if (!window || !window.keyframe) return '';
  return `; a ring kept the run from ${seconds(window.start_ns)} (a keyframe): the timeline, sizes, ` +
    'temporaries and growth are of that window; allocations, bytes, the peak and the leaks are all-time';
}

// The memory the header gives: Pss first (each shared page divided among the
// processes that map it, so a tree's sum is what it really takes) and RSS.
function headerMemory(report) {
  if (report.tree.processes_sampled > 1) {
    // null: no moment had every Pss read after the last fork
    const pss = report.tree.combined_pss_peak === null ? 'unknown' : size(report.tree.combined_pss_peak);
    return `; the tree's combined peak Pss ${pss}; combined peak RSS ${size(report.tree.combined_rss_peak)} at ${seconds(report.tree.time_ns)}`;
  }
  const m = report.processes.length && report.processes[0].diagnosis.memory_over_time;
  return m ? `; peak Pss ${size(m.pss_peak)}, RSS ${size(m.rss_peak)}` : '';
}

function main() {
  const data = JSON.parse(document.getElementById('memtrace-data').textContent);
  const summary = document.getElementById('summary');
  if (!data) {
    summary.textContent = 'No trace in this page.';
    return;
  }
  const { report } = data;
  useTree(data);
  const root = report.processes[0];
  document.title = `memtrace: ${root ? root.command || root.exe : report.file}`;
  summary.replaceChildren(
    el('span', { class: 'file' }, report.file), `: ${plural(report.processes.length, 'process', 'processes')}, ${exact(report.events)} events`,
    headerMemory(report));
  const main = document.getElementById('processes');
  const panels = data.processes.map((p, i) => processPanel(data, p, report.processes[i]));
  main.replaceChildren(...panels.map((p) => p.panel));
  if (panels.length) {
    panels[0].panel.open = true;
    panels[0].draw();
  }
  // for tests and benchmarks: everything of the first panel is on the page
  document.body.dataset.drawn = String(performance.now());
}

main();
