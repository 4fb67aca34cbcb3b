// SPDX-License-Identifier: MIT
// Numbers as a person reads them, and the one way this page makes elements:
// every string from a trace goes in as text, never as HTML.

const UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

// 1023 B, 1.50 KiB, 12.0 MiB, 100 GiB: as `memtrace report` prints sizes.
export function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  let v = bytes;
  let u = -1;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${UNITS[u]}`;
}

// 1,048,576
export const exact = (n) => Math.round(n).toLocaleString('en-US');

// "1.00 MiB (1,048,576 B)": the size and the exact figure the report has. A
// number past 2^53 (an overflowed size asked of malloc) is not exact in
// JavaScript, and says so.
export function sizeExact(bytes) {
  if (bytes < 1024) return size(bytes);
  if (!Number.isSafeInteger(bytes)) return `${size(bytes)} (about ${bytes.toExponential(4)} B)`;
  return `${size(bytes)} (${exact(bytes)} B)`;
}

export function seconds(ns) {
  const s = ns / 1e9;
  if (s < 1e-3) return `${(ns / 1e3).toFixed(1)} µs`;
  if (s < 1) return `${(s * 1e3).toFixed(1)} ms`;
  if (s < 120) return `${s.toFixed(3)} s`;
  return `${Math.floor(s / 60)} min ${(s % 60).toFixed(1)} s`;
}

// el('td', {class: 'n', title: 'x'}, 'text', childNode, ...): attributes and
// children; strings become text nodes.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export const plural = (n, one, many) => `${exact(n)} ${n === 1 ? one : many || `${one}s`}`;
