// SPDX-License-Identifier: MIT
// End-to-end tests of `memtrace view`: real programs run under the preload,
// the page opened in headless Chromium (Debian's, driven by playwright-core),
// what it shows compared with `memtrace report --json`, a flame-graph frame
// hovered, the timeline clicked, screenshots saved for a person to look at.
//
// usage: node test-viewer.mjs SCENARIO PROGRAM...
//   sample PROGRAM         a sample with marks and growth (samples/grows-per-step)
//   phases PROGRAM         tests/viewer/programs/phases: a click shows the live set then
//   hostile PROGRAM        tests/viewer/programs/hostile-names: names shown as text
//   gpu-standin PROGRAM    samples/caching-allocator against the stand-in libcudart
//   post-mortem PROGRAM    samples/cgroup-oom killed by the OOM killer in a 64 MiB cgroup
//   many-stacks PROGRAM    tests/viewer/programs/many-stacks: small stacks merged per caller
//   three-callers PROGRAM  tests/viewer/programs/three-callers: 5,000 small stacks, 3 callers
//   worker PROGRAM         samples/worker-pool: a forked worker's copy-on-write drawn, Pss in the header
//   marks PROGRAM          samples/grows-per-step with 100 steps: 100 mark labels legible
//   failure PROGRAM        samples/big-request: allocation-failed first, with its figure
//   sampled PROGRAM        tests/sampling/programs/known under MEMTRACE_SAMPLING: estimates said
//   reach PROGRAM HELLO    tests/report/programs/reach-classes: the leak classes, or why none;
//                          tests/viewer/programs/hello-stdout: stdout's buffer said reachable
// Environment: MEMTRACE_BIN, MEMTRACE_LIB (post-mortem), VIEWER_DIR (viewer/, with
// node_modules), SCREENSHOTS (a folder), CHROMIUM (/usr/bin/chromium by default).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(join(process.env.VIEWER_DIR, 'package.json'));
const { chromium } = require('playwright-core');

const BIN = process.env.MEMTRACE_BIN;
const SHOTS = process.env.SCREENSHOTS;
const [scenario, ...programs] = process.argv.slice(2);
const failures = [];
let checks = 0;

function check(ok, what) {
  checks++;
  if (!ok) {
    failures.push(what);
    console.error(`FAIL: ${what}`);
  }
}

const exact = (n) => n.toLocaleString('en-US');
// the page's sizes (viewer/src/format.js), for figures the page must show as the report's
const size = (n) => {
  const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  if (n < 1024) return `${n} B`;
  let v = n;
  let u = -1;
  while (v >= 1024 && u < 5) { v /= 1024; u++; }
  return `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[u]}`;
};
const MIB = 1 << 20;

// Runs argv under memtrace, writes its page; the report and the page's path.
function traceAndView(dir, name, argv, env = {}) {
  const trace = join(dir, `${name}.trace`);
  const html = join(dir, `${name}.html`);
  execFileSync(BIN, ['run', '-o', trace, '--', ...argv], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync(BIN, ['view', '-o', html, trace], { stdio: ['ignore', 'ignore', 'inherit'] });
  const report = JSON.parse(execFileSync(BIN, ['report', '--json', '--top', '10', trace], { maxBuffer: 1 << 28 }));
  console.log(`${name}: page ${statSync(html).size} bytes`);
  return { report, html, data: pageData(html) };
}

// Writes the page of an existing trace; the report and the page's path.
function view(dir, name, trace) {
  const html = join(dir, `${name}.html`);
  execFileSync(BIN, ['view', '-o', html, trace], { stdio: ['ignore', 'ignore', 'inherit'] });
  const report = JSON.parse(execFileSync(BIN, ['report', '--json', '--top', '10', trace], { maxBuffer: 1 << 28 }));
  return { report, html, data: pageData(html) };
}

// The data the page carries, read back as the page reads it.
function pageData(html) {
  const text = readFileSync(html, 'utf8');
  const m = text.match(/<script id="memtrace-data" type="application\/json">([^<]*)<\/script>/);
  check(m, `${html}: no data element, or a '<' inside it`);
  return m ? JSON.parse(m[1]) : null;
}

async function open(browser, html) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(`page error: ${e}`));
  page.on('dialog', (d) => { errors.push(`dialog: ${d.message()}`); d.dismiss(); });
  page.on('request', (r) => { if (!r.url().startsWith('file:')) errors.push(`network request: ${r.url()}`); });
  await page.goto(`file://${html}`);
  await page.waitForSelector('body[data-drawn]', { timeout: 20000 });
  return { page, errors };
}

const text = (page, selector) => page.locator(selector).first().textContent();

// The hover text of the first flame-graph frame whose name starts with prefix.
async function hoverFrame(page, prefix) {
  const name = prefix.replace(/["\\]/g, (c) => `\\${c}`);
  const frame = page.locator(`.process[open] .flame-graph g.frame[name^="${name}"]`).first();
  await frame.hover();
  const tip = page.locator('.d3-flame-graph-tip');
  await tip.waitFor({ state: 'visible' });
  await page.waitForTimeout(300); // the tip fades in
  return tip.textContent();
}

// Clicks the first panel's timeline at t seconds (the x scale runs from 0 to its end).
async function clickTimeline(page, data, t) {
  const tl = data.processes[0].timeline;
  const end = Math.max(tl.end_ns / 1e9, ...(data.processes[0].samples ? [data.processes[0].samples.t_ns.at(-1) / 1e9] : []), 1e-6);
  const over = page.locator('.process[open] .u-over').first();
  await over.scrollIntoViewIfNeeded(); // a hover below may have scrolled it away
  const box = await over.boundingBox();
  await page.mouse.move(box.x + (box.width * t) / end, box.y + box.height / 2);
  await page.mouse.click(box.x + (box.width * t) / end, box.y + box.height / 2);
  await page.locator('.process[open] button[data-metric=snapshot]:not([hidden])').waitFor();
}

// Every figure of every kind card of the first process equals the report's.
async function checkFigures(page, proc) {
  for (const [kind, mem] of Object.entries(proc.memories)) {
    const card = `.process[open] details.kind[data-kind="${kind}"]`;
    const peak = await text(page, `${card} [data-figure=peak] dd`);
    check(peak.includes(mem.peak_bytes < 1024 ? `${mem.peak_bytes} B` : `(${exact(mem.peak_bytes)} B)`),
      `${kind}: the page's peak "${peak}" is not the report's ${mem.peak_bytes}`);
    const allocs = await text(page, `${card} [data-figure=allocations] dd`);
    check(allocs === exact(mem.allocations), `${kind}: the page's allocations "${allocs}" are not the report's ${mem.allocations}`);
    const rows = await page.locator(`${card} .stacks`).first().locator('td[data-bytes]').evaluateAll((tds) => tds.map((td) => Number(td.dataset.bytes)));
    if (mem.peak_stacks.length)
      check(JSON.stringify(rows) === JSON.stringify(mem.peak_stacks.map((s) => s.bytes)),
        `${kind}: the page's peak stacks ${rows} are not the report's ${mem.peak_stacks.map((s) => s.bytes)}`);
  }
}

async function sample(browser, dir) {
  const { report, html, data } = traceAndView(dir, 'grows-per-step', [programs[0], '12']);
  const proc = report.processes[0];
  const host = proc.memories.host;
  const { page, errors } = await open(browser, html);
  await checkFigures(page, proc);
  const summary = await text(page, '#summary');
  check(summary.includes(`${exact(report.events)} events`), `summary "${summary}" lacks the report's ${report.events} events`);
  // the timeline: its highest host value is the peak, and each mark is there
  check(Math.max(...data.processes[0].timeline.kinds.host) === host.peak_bytes,
    `the timeline's highest host value ${Math.max(...data.processes[0].timeline.kinds.host)} is not the peak ${host.peak_bytes}`);
  check(proc.diagnosis.marks.length === 12, `${proc.diagnosis.marks.length} marks, not 12`);
  // the flame graph of the peak: the root is the whole peak, keep_records its growing part
  const heading = await text(page, '.process[open] .flame-heading');
  check(heading.includes(`${exact(host.peak_bytes)} bytes`), `flame heading "${heading}" lacks the peak ${host.peak_bytes}`);
  const root = await hoverFrame(page, 'all host');
  check(root.includes(`${exact(host.peak_bytes)} bytes`) && root.includes(`${exact(host.peak_blocks)} block`),
    `root frame "${root}" is not the peak ${host.peak_bytes} in ${host.peak_blocks} blocks`);
  const keep = await hoverFrame(page, 'keep_records');
  const keepStack = host.peak_stacks.find((s) => s.frames[0].function === 'keep_records');
  check(keepStack && keep.includes(`${exact(keepStack.bytes)} bytes`) && keep.includes(`${exact(keepStack.blocks)} blocks`),
    `keep_records frame "${keep}" is not the report's ${keepStack && keepStack.bytes}`);
  check(keepStack && keepStack.bytes === 12 * 16 * 65536, `keep_records holds ${keepStack && keepStack.bytes} at the peak, not 12 MiB`);
  await page.screenshot({ path: join(SHOTS, 'sample-hover.png') });
  // the growth the diagnosis found, as the report says it
  const diag = await text(page, '.process[open] .diagnosis');
  check(diag.includes('1.00 MiB per mark') && diag.includes('keep_records'), `diagnosis "${diag}" lacks 1.00 MiB per mark by keep_records`);
  // a click after the sixth mark shows the live set then: keep_records held 6 or 7 MiB
  const m = proc.diagnosis.marks;
  await clickTimeline(page, data, (m[5].time_ns + m[6].time_ns) / 2e9);
  const live = await hoverFrame(page, 'keep_records');
  const held = Number((live.match(/([\d,]+) bytes/) || ['', '0'])[1].replace(/,/g, ''));
  check(held === 6 * MIB || held === 7 * MIB, `after the 6th mark keep_records shows ${held} bytes, not 6 or 7 MiB: "${live}"`);
  await page.screenshot({ path: join(SHOTS, 'sample-clicked.png'), fullPage: true });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

async function phases(browser, dir) {
  const { report, html, data } = traceAndView(dir, 'phases', [programs[0]]);
  const proc = report.processes[0];
  const { page, errors } = await open(browser, html);
  await checkFigures(page, proc);
  const m = proc.diagnosis.marks;
  check(m.length === 3, `${m.length} marks, not 3`);
  const failed = proc.memories.host.failures;
  check(failed.length === 1 && failed[0].size > 2 ** 62, `failures ${JSON.stringify(failed.map((f) => f.size))}`);
  const failText = await text(page, '.process[open] details.kind[data-kind=host] .failure');
  check(failText.includes('malloc of') && failText.includes('failed'), `the failure is not shown: "${failText}"`);
  // in the middle of each phase: exactly what that phase holds
  const expect = [[3 * MIB, 0], [3 * MIB, 5 * MIB], [0, 5 * MIB]];
  for (let i = 0; i < 3; i++) {
    const end = i < 2 ? m[i + 1].time_ns : failed[0].time_ns;
    await clickTimeline(page, data, (m[i].time_ns + end) / 2e9);
    for (const [j, fn] of ['keep_a', 'keep_b'].entries()) {
      const shown = await page.locator(`.process[open] .flame-graph g[name^="${fn}"]`).count();
      if (!expect[i][j]) {
        check(shown === 0, `phase ${'ABC'[i]}: ${fn} is shown, though it held nothing then (${await text(page, '.process[open] .flame-heading')})`);
        continue;
      }
      const tip = await hoverFrame(page, fn);
      check(tip.includes(`${exact(expect[i][j])} bytes`) && tip.includes('1 block'),
        `phase ${'ABC'[i]}: ${fn} shows "${tip}", not ${expect[i][j]} bytes in 1 block`);
    }
    await page.screenshot({ path: join(SHOTS, `phases-${'abc'[i]}.png`) });
  }
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

async function hostile(browser, dir) {
  const arg = '"><script>window.__pwned=4</script>';
  const { report, html } = traceAndView(dir, 'hostile', [programs[0], arg]);
  const fn = "<script>window.__pwned=1</script>'<img src=x onerror=window.__pwned=2>";
  const leak = report.processes[0].memories.host.leak_stacks.find((s) => s.bytes === 1234);
  check(leak && leak.frames[0].function === fn, `the report does not name the hostile function: ${JSON.stringify(leak && leak.frames[0])}`);
  const { page, errors } = await open(browser, html);
  await page.waitForTimeout(500); // an image's onerror would have fired by now
  check(await page.evaluate(() => window.__pwned === undefined), 'script from the trace ran in the page');
  check(await page.locator('script').count() === 2, 'the page has a script element it did not bring');
  check(await page.locator('img').count() === 0, 'the page has an img element from the trace');
  const title = await text(page, '.process h2');
  check(title.includes(arg), `the command line is not shown as text: "${title}"`);
  const body = await page.locator('body').textContent();
  check(body.includes(fn), 'the hostile function name is not shown as text in the tables');
  await page.locator('.process[open] button[data-metric=leaked]').click();
  const tip = await hoverFrame(page, '<script>');
  check(tip.startsWith(fn), `the flame graph's hover does not show the name as text: "${tip}"`);
  await page.screenshot({ path: join(SHOTS, 'hostile-names.png'), fullPage: true });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

async function gpuStandin(browser, dir) {
  const { report, html, data } = traceAndView(dir, 'caching-allocator', [programs[0]],
    { MEMTRACE_STANDIN_MEMORY: String(1024 * MIB) });
  const proc = report.processes[0];
  const gpu = proc.memories['cuda:0'];
  check(gpu && gpu.failed_allocations === 3, `cuda:0 failures: ${gpu && gpu.failed_allocations}, not 3`);
  check(data.processes[0].timeline.kinds['cuda:0'] && Math.max(...data.processes[0].timeline.kinds['cuda:0']) === gpu.peak_bytes,
    'the cuda:0 timeline does not reach the peak');
  const { page, errors } = await open(browser, html);
  await checkFigures(page, proc);
  // the page opens on the kind that held the most: the device
  const heading = await text(page, '.process[open] .flame-heading');
  check(heading.startsWith('cuda:0 at its peak') && heading.includes(`${exact(gpu.peak_bytes)} bytes`), `flame heading "${heading}"`);
  const shown = await page.locator('.process[open] details.kind[data-kind="cuda:0"] .failure').count();
  check(shown === 3, `${shown} failures shown for cuda:0, not 3`);
  const failText = await text(page, '.process[open] details.kind[data-kind="cuda:0"] .failure');
  check(failText.includes(`free of ${'1.00 GiB'}`), `the first failure lacks the device's total: "${failText}"`);
  const seg = await hoverFrame(page, 'reserve_segment');
  check(seg.includes(`${exact(gpu.peak_bytes)} bytes`), `reserve_segment shows "${seg}", not the peak ${gpu.peak_bytes}`);
  await page.screenshot({ path: join(SHOTS, 'gpu-standin.png'), fullPage: true });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

// A new memory cgroup with a limit (v2 memory.max where the unified hierarchy
// has the memory controller, else v1); null where none can be made.
function memoryCgroup(limit) {
  const name = `memtrace-viewer-test-${process.pid}`;
  const v2 = '/sys/fs/cgroup';
  const candidates = [];
  try {
    if (readFileSync(join(v2, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('memory'))
      candidates.push([v2, 'memory.max']);
  } catch { /* no unified hierarchy */ }
  if (existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes'))
    candidates.push(['/sys/fs/cgroup/memory', 'memory.limit_in_bytes']);
  for (const [root, file] of candidates) {
    const path = join(root, name);
    try {
      mkdirSync(path);
      writeFileSync(join(path, file), String(limit));
      return path;
    } catch {
      try { rmdirSync(path); } catch { /* not made */ }
    }
  }
  return null;
}

async function postMortem(browser, dir) {
  const LIMIT = 64 * MIB;
  const group = memoryCgroup(LIMIT);
  check(group, 'no memory cgroup could be made (this test needs root and a memory controller)');
  if (!group) return;
  const trace = join(dir, 'oom.trace');
  let run;
  try {
    // the shell joins the group, then becomes the program, traced (the shell is not)
    run = spawnSync('/bin/sh', ['-c', 'echo $$ > "$0/cgroup.procs" && LD_PRELOAD="$2" MEMTRACE_OUTPUT="$3" exec "$1"',
      group, programs[0], process.env.MEMTRACE_LIB, trace], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 120000 });
  } finally {
    rmdirSync(group);
  }
  check(run.signal === 'SIGKILL', `cgroup-oom ended by ${run.signal || run.status}, not the OOM killer's SIGKILL`);
  const { report, html, data } = view(dir, 'oom', trace);
  const proc = report.processes[0];
  const pm = proc.diagnosis.post_mortem;
  check(proc.end === 'killed' && pm && pm.cgroup_max === LIMIT, `the report's post-mortem: ${JSON.stringify(pm)}`);
  const { page, errors } = await open(browser, html);
  await checkFigures(page, proc);
  const diag = await text(page, '.process[open] .diagnosis');
  check(diag.includes('Killed.') && diag.includes('against a cgroup limit of 64.0 MiB'), `the diagnosis does not tell the kill: "${diag}"`);
  const title = await text(page, '.process[open] .facts');
  check(title.includes('killed (no exit record)'), `the process is not shown killed: "${title}"`);
  // the limit is near what was used: the cgroup's use and limit are drawn, the limit at 64 MiB
  const limits = data.processes[0].samples.cgroup_max;
  check(limits.length && limits.every((v) => v === LIMIT), 'the samples do not carry the 64 MiB limit');
  const legend = await page.locator('.process[open] .u-legend .u-series').allTextContents();
  const off = await page.locator('.process[open] .u-legend .u-series.u-off').allTextContents();
  check(legend.some((l) => l.includes('cgroup limit')) && !off.some((l) => l.includes('cgroup')),
    `the cgroup's use and limit are not both drawn: legend ${legend}, off ${off}`);
  // what was live at death is the leak flame graph's whole
  await page.locator('.process[open] button[data-metric=leaked]').click();
  const heading = await text(page, '.process[open] .flame-heading');
  const host = proc.memories.host;
  check(heading.includes('live at death') && heading.includes(`${exact(host.leaked_bytes)} bytes`),
    `the leak flame graph's heading "${heading}" is not the ${host.leaked_bytes} bytes live at death`);
  const resp = await hoverFrame(page, 'build_response');
  const k = Math.floor(host.leaked_bytes / MIB);
  check(resp.includes(`${exact(k * MIB)} bytes`), `build_response holds "${resp}" at death, not ${k} MiB`);
  await page.screenshot({ path: join(SHOTS, 'post-mortem.png'), fullPage: true });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

async function manyStacks(browser, dir) {
  const { report, html, data } = traceAndView(dir, 'many-stacks', [programs[0]]);
  const host = report.processes[0].memories.host;
  const TOTAL = 2500 * 64 + (2499 * 2500) / 2;
  check(host.peak_bytes === TOTAL && host.peak_stacks_total === 2500, `the report: ${host.peak_bytes} in ${host.peak_stacks_total} stacks`);
  // the cases of outer() and inner() are macros, each on one line: symbolized, the 2,500
  // stacks read the same, and the flame graph has them as one node, whole
  for (const metric of ['peak', 'leaked']) {
    const f = data.processes[0].flames.host[metric];
    const name = data.frames[data.nodes[2 * f.rows[0] - 1]];
    check(f.rows.length === 3 && name.startsWith('leaf (many-stacks.c:') && f.rows[1] === TOTAL && f.rows[2] === 2500,
      `${metric}: rows ${f.rows.slice(0, 9)} at ${name}, not one of ${TOTAL} bytes in 2,500 blocks at leaf`);
    check(f.total === TOTAL && f.stacks === 2500 && f.merged_nodes === 0 && !f.cut_stacks,
      `${metric}: total ${f.total}, ${f.stacks} stacks, ${f.merged_nodes} merged, ${f.cut_stacks} cut`);
  }
  const { page, errors } = await open(browser, html);
  const heading = await text(page, '.process[open] .flame-heading');
  check(!heading.includes('—'), `a cut is said where there is none: "${heading}"`);
  const root = await hoverFrame(page, 'all host');
  check(root.includes(`${exact(TOTAL)} bytes`) && root.includes('2,500 blocks'), `the root "${root}" is not ${TOTAL} bytes in 2,500 blocks`);
  const leaf = await hoverFrame(page, 'leaf');
  check(leaf.includes(`${exact(TOTAL)} bytes`) && leaf.includes('2,500 blocks'), `leaf "${leaf}" is not ${TOTAL} bytes in 2,500 blocks`);
  await page.screenshot({ path: join(SHOTS, 'many-stacks.png') });
  // the live set near the end (a snapshot): 200 stacks one by one and the rest in one box, one block each
  await clickTimeline(page, data, data.processes[0].timeline.end_ns / 1e9 * 0.999);
  const live = await text(page, '.process[open] .flame-heading');
  const m = live.match(/the 200 largest stacks one by one, the other ([\d,]+)/);
  check(m, `the snapshot's cut is not said: "${live}"`);
  const liveRoot = await hoverFrame(page, 'all host');
  const blocks = Number((liveRoot.match(/in ([\d,]+) blocks/) || ['', '0'])[1].replace(/,/g, ''));
  check(m && blocks === 200 + Number(m[1].replace(/,/g, '')), `the snapshot's root has ${blocks} blocks, not 200 + the ${m && m[1]} cut`);
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

// 5,000 small stacks under 3 callers: the flame graph shows each caller with its exact bytes.
async function threeCallers(browser, dir) {
  const { report, html, data } = traceAndView(dir, 'three-callers', [programs[0]]);
  const host = report.processes[0].memories.host;
  const callers = { caller_a: [26672, 1667], caller_b: [53344, 1667], caller_c: [79968, 1666] };
  const TOTAL = 26672 + 53344 + 79968;
  check(host.peak_bytes === TOTAL && host.peak_stacks_total === 5000, `the report: ${host.peak_bytes} in ${host.peak_stacks_total} stacks`);
  for (const metric of ['peak', 'leaked']) {
    const f = data.processes[0].flames.host[metric];
    let sum = 0;
    for (let i = 1; i < f.rows.length; i += 3) sum += f.rows[i];
    check(sum === TOTAL && f.total === TOTAL && f.stacks === 5000 && !f.cut_stacks,
      `${metric}: rows add up to ${sum}, total ${f.total}, ${f.stacks} stacks, ${f.cut_stacks} cut`);
  }
  console.log(`three-callers: ${data.processes[0].flames.host.peak.rows.length / 3} rows, ${data.nodes.length / 2} nodes in the page`);
  const { page, errors } = await open(browser, html);
  const heading = await text(page, '.process[open] .flame-heading');
  check(!heading.includes('stacks one by one'), `a box of smaller stacks is said: "${heading}"`);
  check(heading.includes('(0.1%) merged, per caller'), `the merge is not said: "${heading}"`);
  for (const [fn, [bytes, blocks]] of Object.entries(callers)) {
    const tip = await hoverFrame(page, fn);
    check(tip.includes(`${exact(bytes)} bytes`) && tip.includes(`${exact(blocks)} blocks`),
      `${fn}: "${tip}" is not ${bytes} bytes in ${blocks} blocks`);
  }
  const boxes = await page.locator('.process[open] .flame-graph g.frame[name^="["]').evaluateAll((gs) => gs.map((g) => g.getAttribute('name')));
  check(boxes.length > 0 && boxes.every((n) => /^\[\d+ smaller, each under 0\.1%\]/.test(n)), `boxes other than merged nodes: ${boxes.slice(0, 5)}`);
  await page.screenshot({ path: join(SHOTS, 'three-callers.png') });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

// Sampled mode: the page says the figures are estimates and gives the interval, and shows
// the report's (estimated) figures.
async function sampled(browser, dir) {
  const { report, html } = traceAndView(dir, 'sampled', [programs[0]],
    { MEMTRACE_SAMPLING: '64K', MEMTRACE_SEED: '1' });
  const proc = report.processes[0];
  check(proc.sampling && proc.sampling.interval_bytes === 65536, `the report's sampling: ${JSON.stringify(proc.sampling)}`);
  const { page, errors } = await open(browser, html);
  const facts = await text(page, '.process[open] .facts');
  check(facts.includes('sampled capture: host figures are estimates (one allocation sampled per 64.0 KiB allocated on average; blocks over 320 KiB recorded exactly)'),
    `the page does not say the figures are estimates: "${facts}"`);
  await checkFigures(page, proc);
  // no leak classes in sampled mode (docs/reachability.md), and the page says why
  const host = proc.memories.host;
  const summary = await text(page, '.process[open] details.kind[data-kind=host] > summary');
  check(host.leaked_blocks > 0 && host.leak_kinds_missing === 'off in sampled mode: the scan needs every live block' &&
    summary.endsWith(`leaked ${size(host.leaked_bytes)}, not classified: ${host.leak_kinds_missing}; check counts all of it`),
    `the host summary "${summary}" does not say the report's ${host.leak_kinds_missing}`);
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

// The legend entries of the open panel: [label, drawn].
async function legendOf(page, panel) {
  return page.locator(`${panel} .u-legend .u-series`).evaluateAll((els) =>
    els.map((e) => [e.textContent, !e.classList.contains('u-off')]));
}

// A forked worker's copy-on-write is drawn: Private_Dirty and Pss are series shown
// from the start, and the header gives the tree's combined Pss.
async function worker(browser, dir) {
  const { report, html, data } = traceAndView(dir, 'worker-pool', [programs[0], '4']);
  const wi = report.processes.findIndex((p) => p.origin === 'fork');
  check(wi > 0, 'no forked worker in the report');
  const w = report.processes[wi];
  const pd = data.processes[wi].samples && data.processes[wi].samples.private_dirty;
  check(pd && pd.length, 'the page carries no Private_Dirty series for the worker');
  // about 0 at the fork: its last figure is the copies, however late the first sample came
  // (its growth from the first sample is less on a busy machine)
  const copied = pd && pd.length ? pd[pd.length - 1] : 0;
  check(Math.abs(copied - 16 * MIB) <= 0.1 * 16 * MIB, `the worker's Private_Dirty series ends at ${copied}, not 16 MiB`);
  const { page, errors } = await open(browser, html);
  const summary = await text(page, '#summary');
  check(summary.includes(`Pss ${size(report.tree.combined_pss_peak)}`),
    `the header "${summary}" does not give the combined Pss ${report.tree.combined_pss_peak}`);
  const panel = `details.process[data-instance="${w.instance}"]`;
  await page.locator(`${panel} > summary`).click();
  await page.locator(`${panel} .u-legend`).waitFor();
  const legend = await legendOf(page, panel);
  for (const name of ['Private_Dirty', 'Pss'])
    check(legend.some(([l, on]) => l.includes(name) && on), `${name} is not drawn for the worker: ${JSON.stringify(legend)}`);
  const diag = await text(page, `${panel} .diagnosis`);
  const said = `Copy-on-write: Private_Dirty ${size(w.diagnosis.memory_over_time.private_dirty_last)} since the fork`;
  check(diag.includes(said), `the worker's diagnosis does not say "${said}": "${diag}"`);
  await page.locator(`${panel} .timeline`).screenshot({ path: join(SHOTS, 'worker.png') });
  await page.screenshot({ path: join(SHOTS, 'worker-page.png'), fullPage: true });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

// samples/torch-keeps-graph.py under Debian's python3 with torch (programs: the interpreter and
// the sample): grouped by the Python stack, the page names the script's line of the held-out
// forward pass, in main's loop that keeps the losses, as a flame-graph frame holding the kept
// activations and in the peak table's top entry. Skipped (77) without torch.
async function torch(browser, dir) {
  const [python, sample] = programs;
  try {
    execFileSync(python, ['-c', 'import torch'], { stdio: 'ignore' });
  } catch {
    console.log(`skip: ${python} has no torch (Debian's python3-torch)`);
    process.exit(77);
  }
  const STEPS = 12;
  const trace = join(dir, 'torch.trace');
  const out = execFileSync(BIN, ['run', '-o', trace, '--', python, sample, '--steps', String(STEPS)], { maxBuffer: 1 << 24 }).toString();
  const kept = out.match(/kept per step (\d+) bytes, largest (\d+) bytes/);
  check(kept, `the sample did not say what it keeps: ${out}`);
  const largest = Number(kept[2]);
  const lines = readFileSync(sample, 'utf8').split('\n');
  const forward = lines.findIndex((l) => l.includes('model(val_x)')) + 1;
  const name = `main (torch-keeps-graph.py:${forward})`;
  const { html, data } = view(dir, 'torch', trace);
  const peak = data.report.processes[0].memories.host.peak_stacks[0];
  // a stack's frames, as the page's tables read them from the tree (viewer/src/tables.js)
  const framesOf = (node) => {
    const out = [];
    for (let n = node; n > 0; n = data.nodes[2 * n - 2]) out.push(data.frames[data.nodes[2 * n - 1]]);
    return out;
  };
  check(framesOf(peak.node).includes(name), `the page's top peak entry has no frame ${name}: ${framesOf(peak.node).slice(0, 12)}`);
  check(peak.bytes >= (STEPS - 1) * largest, `the page's top peak entry holds ${peak.bytes} B, not ${STEPS - 1}+ activations of ${largest} B`);
  const { page, errors } = await open(browser, html);
  const tip = await hoverFrame(page, name);
  const bytes = Number((tip.match(/([\d,]+) bytes/) || ['', '0'])[1].replace(/,/g, ''));
  check(bytes >= (STEPS - 1) * largest, `the flame graph's ${name}: "${tip}"`);
  const table = await page.locator('.process[open] details.kind[data-kind="host"] .stacks').first().textContent();
  check(table.includes(name), `the peak table does not name ${name}`);
  check(table.includes('in relu (at::'), 'the peak table does not show the folded label of the ReLU');
  await page.screenshot({ path: join(SHOTS, 'torch.png') });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

// 100 marks: labels that do not overlap, and lines thinned so that they do not fill the chart.
async function marks(browser, dir) {
  const STEPS = 100;
  const { report, html } = traceAndView(dir, 'grows-100', [programs[0], String(STEPS)]);
  check(report.processes[0].diagnosis.marks.length === STEPS, `${report.processes[0].diagnosis.marks.length} marks, not ${STEPS}`);
  const { page, errors } = await open(browser, html);
  const chart = page.locator('.process[open] .timeline-chart .uplot').first();
  const drawn = JSON.parse(await chart.getAttribute('data-events-drawn'));
  const boxes = drawn.labels;
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, b] = [boxes[i], boxes[j]];
      const apart = a.x + a.w <= b.x || b.x + b.w <= a.x || a.y + a.h <= b.y || b.y + b.h <= a.y;
      check(apart, `labels "${a.text}" and "${b.text}" overlap`);
    }
  check(boxes.filter((b) => b.what === 'mark').length >= 5, `only ${boxes.length} labels drawn of ${STEPS} marks`);
  // lines at least 8 CSS pixels apart: the rest of the marks are ticks at the foot
  check(drawn.markLines <= drawn.width / 8, `${drawn.markLines} full mark lines on ${drawn.width} px`);
  // the plot's pixels: the band of the labels (its top 60 px) is not a dark bar
  const dark = await page.evaluate((d) => {
    const c = document.querySelector('.process[open] .timeline-chart canvas');
    const r = devicePixelRatio;
    const { data } = c.getContext('2d').getImageData(Math.round(d.left * r), Math.round(d.top * r), Math.round(d.width * r), Math.round(60 * r));
    let n = 0;
    for (let i = 0; i < data.length; i += 4)
      if (data[i + 3] > 0 && data[i] + data[i + 1] + data[i + 2] < 3 * 128) n++;
    return n / (data.length / 4);
  }, drawn);
  // labels packed on four rows over a line per mark measured 37% here; one row and thinned lines 19%
  check(dark < 0.25, `${(dark * 100).toFixed(1)}% of the top band's pixels are dark`);
  const events = await page.locator('.process[open] details.events li').count();
  check(events >= STEPS, `${events} events listed as text, fewer than the ${STEPS} marks`);
  await page.locator('.process[open] .timeline').screenshot({ path: join(SHOTS, 'growth-100-marks.png') });
  const diag = await text(page, '.process[open] .diagnosis');
  check(diag.includes('1.00 MiB per mark'), `the growth is not in the diagnosis: "${diag}"`);
  await page.screenshot({ path: join(SHOTS, 'growth-page.png'), fullPage: true });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

// A failed request is the first thing the diagnosis says, with its figure.
async function failure(browser, dir) {
  // the sample exits 1, having failed: memtrace run passes that on
  const trace = join(dir, 'big-request.trace');
  const run = spawnSync(BIN, ['run', '-o', trace, '--', programs[0]], { stdio: ['ignore', 'ignore', 'inherit'] });
  check(run.status === 1, `big-request under memtrace run exited ${run.status}, not 1`);
  const { report, html } = view(dir, 'big-request', trace);
  const proc = report.processes[0];
  const first = proc.diagnosis.fragmentation.findings[0];
  check(first.finding === 'allocation-failed' && first.figure === 32 * MIB, `the report's first finding: ${JSON.stringify(first)}`);
  const { page, errors } = await open(browser, html);
  const item = await text(page, '.process[open] .diagnosis li');
  check(item.startsWith('allocation-failed') && item.includes(`${size(first.figure)}`),
    `the diagnosis does not start with allocation-failed and its figure: "${item}"`);
  const fig = await page.locator('.process[open] .diagnosis li [data-figure]').first().getAttribute('data-figure');
  check(Number(fig) === first.figure, `the first finding's figure on the page is ${fig}, not ${first.figure}`);
  await page.screenshot({ path: join(SHOTS, 'failure.png') });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();
}

// A leak stack's or a kind's classes as the page must say them, from the report's counts.
const CLASSES = ['definite', 'indirect', 'possible', 'reachable', 'unclassified'];
const classesText = (reach, all) => CLASSES.filter((c) => reach[c].blocks || (all && c !== 'unclassified'))
  .map((c) => `${c} ${size(reach[c].bytes)}${all ? '' : ` in ${exact(reach[c].blocks)}`}`).join(', ');

// The host card of the first panel: its summary line, the leaked figure and its note,
// what check counts, and the leak table's class column and bytes.
async function leakCard(page) {
  const card = '.process[open] details.kind[data-kind=host]';
  const table = page.locator(`${card} .stacks`).nth(1);
  return {
    summary: await text(page, `${card} > summary`),
    // the second figure: leaked, or live at death
    note: await page.locator(`${card} dl.figures > div`).nth(1).locator('dd.note').textContent(),
    counted: await text(page, `${card} [data-figure="counted by check"] dd`),
    countedNote: await text(page, `${card} [data-figure="counted by check"] dd.note`),
    title: await table.locator('h4').textContent(),
    header: await table.locator('th').allTextContents(),
    classes: await table.locator('td.reach').allTextContents(),
    bytes: await table.locator('td[data-bytes]').evaluateAll((tds) => tds.map((td) => Number(td.dataset.bytes))),
  };
}

// tests/report/programs/reach-classes (figures as tests/report/test-reach.py): the split
// of the leaked figure and of each leak stack is the report's, and when no scan ran, why.
async function reach(browser, dir) {
  const KNOWN = { definite: [248, 2], indirect: [96, 2], possible: [64, 1], reachable: [100, 1], unclassified: [0, 0] };
  const { report, html } = traceAndView(dir, 'reach', [programs[0], 'exit']);
  const host = report.processes[0].memories.host;
  const known = Object.fromEntries(Object.entries(KNOWN).map(([c, [bytes, blocks]]) => [c, { bytes, blocks }]));
  check(JSON.stringify(host.leak_kinds) === JSON.stringify(known), `the report's leak_kinds ${JSON.stringify(host.leak_kinds)}`);
  let { page, errors } = await open(browser, html);
  let card = await leakCard(page);
  check(card.summary.endsWith(`leaked ${size(host.leaked_bytes)}: ${classesText(host.leak_kinds, true)}; check counts 344 B`) &&
    card.summary.endsWith('leaked 508 B: definite 248 B, indirect 96 B, possible 64 B, reachable 100 B; check counts 344 B'),
    `the host summary "${card.summary}" is not the report's split`);
  check(card.note === '6 blocks: definite 248 B in 2, indirect 96 B in 2, possible 64 B in 1, reachable 100 B in 1',
    `the leaked figure's note "${card.note}"`);
  check(card.counted === '344 B' && card.countedNote === 'definite + indirect: what memtrace check --max-leaked counts',
    `counted by check "${card.counted}", "${card.countedNote}"`);
  // the rows in the report's order, what check counts first, each with the report's split
  check(card.title === 'leaked, what check counts first' && card.header.includes('class'), `the leak table's title and header: ${card.title} ${card.header}`);
  const want = host.leak_stacks.map((s) => classesText(s.reachability, false));
  check(JSON.stringify(card.classes) === JSON.stringify(want) &&
    JSON.stringify(want) === JSON.stringify(['definite 200 B in 1', 'definite 48 B in 1, indirect 96 B in 2', 'possible 64 B in 1', 'reachable 100 B in 1']),
    `the leak table's classes ${JSON.stringify(card.classes)}, the report's ${JSON.stringify(want)}`);
  check(JSON.stringify(card.bytes) === JSON.stringify(host.leak_stacks.map((s) => s.bytes)),
    `the leak table's bytes ${card.bytes}, the report's ${host.leak_stacks.map((s) => s.bytes)}`);
  await page.locator('.process[open] button[data-metric=leaked]').click();
  const heading = await text(page, '.process[open] .flame-heading');
  check(heading.includes('every leak class together'), `the leak flame graph's heading "${heading}"`);
  await page.locator('.process[open] details.kind[data-kind=host]').screenshot({ path: join(SHOTS, 'reach-classes.png') });
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  await page.close();

  // killed: no scan, every block counted; turned off the same, with its own reason
  const trace = join(dir, 'reach-kill.trace');
  const run = spawnSync(BIN, ['run', '-o', trace, '--', programs[0], 'kill'], { stdio: ['ignore', 'ignore', 'inherit'] });
  check(run.signal === 'SIGKILL', `reach-classes kill under memtrace run ended by ${run.signal || run.status}`);
  const unjudged = [['live at death', 'killed', view(dir, 'reach-kill', trace)],
    ['leaked', 'turned off (MEMTRACE_REACHABILITY=0)', traceAndView(dir, 'reach-off', [programs[0], 'exit'], { MEMTRACE_REACHABILITY: '0' })]];
  for (const [word, why, v] of unjudged) {
    const mem = v.report.processes[0].memories.host;
    check(mem.leak_kinds === null && mem.leak_kinds_missing === why, `${why}: the report's ${mem.leak_kinds_missing}`);
    ({ page, errors } = await open(browser, v.html));
    card = await leakCard(page);
    check(card.summary.endsWith(`${word} 508 B, not classified: ${why}; check counts all of it`), `${why}: the host summary "${card.summary}"`);
    check(card.note === `6 blocks, not classified: ${why}`, `${why}: the leaked figure's note "${card.note}"`);
    check(card.counted === '508 B' && card.countedNote === 'all of it: no scan judged these 6 blocks',
      `${why}: counted by check "${card.counted}", "${card.countedNote}"`);
    check(card.title === word && !card.header.includes('class') && !card.classes.length, `${why}: the leak table ${card.title} ${card.header}`);
    check(errors.length === 0, `${why}: page errors: ${errors.join('; ')}`);
    await page.close();
  }

  // a program whose only live block is stdout's buffer: reachable, nothing for check
  const hello = traceAndView(dir, 'hello', [programs[1]]);
  const buffer = hello.report.processes[0].memories.host;
  check(buffer.leaked_blocks === 1 && buffer.leak_kinds.reachable.bytes === 4096, `hello-stdout's leak_kinds ${JSON.stringify(buffer.leak_kinds)}`);
  ({ page, errors } = await open(browser, hello.html));
  card = await leakCard(page);
  check(card.summary.endsWith('leaked 4.00 KiB: definite 0 B, indirect 0 B, possible 0 B, reachable 4.00 KiB; check counts 0 B'),
    `hello-stdout: the host summary "${card.summary}"`);
  check(card.counted === '0 B' && JSON.stringify(card.classes) === '["reachable 4.00 KiB in 1"]',
    `hello-stdout: counted by check "${card.counted}", classes ${JSON.stringify(card.classes)}`);
  check(errors.length === 0, `hello-stdout: page errors: ${errors.join('; ')}`);
  await page.close();
}

const scenarios = { torch, sample, phases, hostile, 'gpu-standin': gpuStandin, 'post-mortem': postMortem, 'many-stacks': manyStacks, 'three-callers': threeCallers, worker, marks, failure, sampled, reach };
if (!scenarios[scenario] || !programs.length || !BIN || !SHOTS) {
  console.error('usage: node test-viewer.mjs sample|phases|hostile|gpu-standin|post-mortem|many-stacks|three-callers|worker|marks|failure|torch|sampled|reach PROGRAM... (MEMTRACE_BIN, VIEWER_DIR, SCREENSHOTS set)');
  process.exit(2);
}
mkdirSync(SHOTS, { recursive: true });
const dir = mkdtempSync(join(tmpdir(), 'memtrace-viewer-'));
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
try {
  await scenarios[scenario](browser, dir);
} catch (e) {
  failures.push(String(e.stack || e));
  console.error(e);
} finally {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`${scenario}: ${checks - failures.length} passed, ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
