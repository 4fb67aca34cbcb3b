// SPDX-License-Identifier: MIT
// Times how long the page `memtrace view` wrote takes to open and draw in
// headless Chromium: from the start of navigation to the second animation
// frame after the page's script has drawn its first panel (so the timeline,
// the flame graph and the tables have been laid out and painted). Each run
// is a new browser context, with nothing cached.
//
// usage: node page-open.mjs PAGE.html [RUNS]    (VIEWER_DIR: viewer/, with node_modules)
// Prints one line per run and the median, in ms.
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';

const require = createRequire(join(resolve(process.env.VIEWER_DIR || 'viewer'), 'package.json'));
const { chromium } = require('playwright-core');
const [page, runs = '5'] = process.argv.slice(2);
if (!page) {
  console.error('usage: node page-open.mjs PAGE.html [RUNS]');
  process.exit(2);
}
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const times = [];
for (let i = 0; i < Number(runs); i++) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const tab = await context.newPage();
  await tab.goto(`file://${resolve(page)}`);
  await tab.waitForSelector('body[data-drawn]', { timeout: 60000 });
  const ms = await tab.evaluate(() => new Promise((done) =>
    requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now())))));
  const script = await tab.evaluate(() => Number(document.body.dataset.drawn));
  console.log(`run ${i + 1}: drawn and painted at ${ms.toFixed(0)} ms (script done at ${script.toFixed(0)} ms)`);
  times.push(ms);
  await context.close();
}
await browser.close();
times.sort((a, b) => a - b);
console.log(`median ${times[Math.floor(times.length / 2)].toFixed(0)} ms over ${times.length} runs`);
