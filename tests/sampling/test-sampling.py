# SPDX-License-Identifier: MIT
"""Sampled mode's statistics (docs/sampling.md), on programs/known.c under
the real preload, against the truths the program's fixed sizes give and a
full capture of the same program confirms.

A block of s bytes is recorded with probability p = 1 - exp(-s/T) and then
counts s/p bytes and 1/p blocks (rounded so that the sum stays unbiased): an
estimate X of a set of blocks has mean the true sum and variance
sum(s^2 (1-p)/p) in bytes, sum((1-p)/p) in blocks (plus at most 1/4 a block
for the rounding). Each run must be within 5 standard deviations (a chance
of 6e-7 each to be outside by bad luck), the mean of SEEDS runs within 3% of
the truth (5 standard deviations of the mean are 2.8% for the leaked bytes);
blocks of more than 5T bytes are exact in every run."""
import json
import math
import os
import shutil

from harness import BIN, check, main, program, run, run_traced, workdir

T = 65536
SEEDS = 50
LEAKS, HELD, BIG = 20000, 10000, 409607


def sizes(n):
    """The sizes known.c's next_size() gives, in order."""
    x, out = 88172645463325252, []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append(16 + (x >> 33) % 4081)
    return out


def variance(blocks):
    """The estimator's variance in bytes and in blocks for these sizes."""
    vb = vn = 0.0
    for s in blocks:
        p = -math.expm1(-s / T)
        vb += s * s * (1 - p) / p
        vn += (1 - p) / p + 0.25
    return vb, vn


S = sizes(LEAKS + HELD)
LEAK_BYTES = sum(S[3:LEAKS]) + 3 * BIG  # leak_big reallocs the first three to BIG
LEAK_BLOCKS = LEAKS
PEAK_BYTES = sum(S)                     # leak_small's and hold's blocks live at once
VAR_LEAK = variance(S[3:LEAKS])
VAR_PEAK = variance(S)


def report(argv, extra):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced(argv, trace, extra)
    check(r.returncode == 0, f"{argv} exited {r.returncode}: {r.stderr.decode()}")
    out = run([BIN, "report", "--json", trace])
    check(out.returncode == 0, f"memtrace report failed: {out.stderr.decode()}")
    shutil.rmtree(d)
    procs = json.loads(out.stdout)["processes"]
    check(len(procs) == 1, f"{len(procs)} processes")
    return procs[0]


def sampled(argv, seed):
    return report(argv, {"MEMTRACE_SAMPLING": str(T), "MEMTRACE_SEED": str(seed)})


def stack_of(stacks, function):
    return [s for s in stacks if any(f["function"] == function for f in s["frames"])]


def test_truth():
    """The full capture gives the figures the program's sizes say."""
    p = report([program("known")], {})
    h = p["memories"]["host"]
    check(p["sampling"] is None, f"sampling {p['sampling']} in a full capture")
    check((h["leaked_bytes"], h["leaked_blocks"]) == (LEAK_BYTES, LEAK_BLOCKS),
          f"leaked {h['leaked_bytes']} B in {h['leaked_blocks']}, want {LEAK_BYTES} in {LEAK_BLOCKS}")
    check(h["peak_bytes"] == PEAK_BYTES, f"peak {h['peak_bytes']}, want {PEAK_BYTES}")


def within(name, values, truth, var):
    sd = math.sqrt(var)
    for seed, v in enumerate(values, 1):
        check(abs(v - truth) <= 5 * sd,
              f"{name} seed {seed}: {v} against {truth}, more than 5 sd ({sd:.0f}) off")
    mean = sum(values) / len(values)
    check(abs(mean - truth) <= 0.03 * truth,
          f"{name}: mean {mean:.0f} over {len(values)} seeds, {100 * (mean / truth - 1):+.2f}% "
          f"from {truth}")
    return mean


def test_leaks_and_peak():
    """Over SEEDS seeds: leaked and peak bytes and blocks unbiased, large blocks exact."""
    leaked, blocks, peak = [], [], []
    for seed in range(1, SEEDS + 1):
        p = sampled([program("known")], seed)
        h = p["memories"]["host"]
        check(p["sampling"] == {"interval_bytes": T, "exact_above_bytes": 5 * T},
              f"sampling {p['sampling']}")
        check(h["unknown_frees"] == 0, f"seed {seed}: {h['unknown_frees']} unknown frees")
        big = stack_of(h["leak_stacks"], "leak_big")
        check(len(big) == 1 and (big[0]["bytes"], big[0]["blocks"]) == (3 * BIG, 3),
              f"seed {seed}: leak_big's leak {[(s['bytes'], s['blocks']) for s in big]}, "
              f"want exactly {3 * BIG} B in 3 blocks")
        leaked.append(h["leaked_bytes"])
        blocks.append(h["leaked_blocks"])
        peak.append(h["peak_bytes"])
    m1 = within("leaked bytes", leaked, LEAK_BYTES, VAR_LEAK[0])
    m2 = within("leaked blocks", blocks, LEAK_BLOCKS, VAR_LEAK[1] + 3)
    m3 = within("peak bytes", peak, PEAK_BYTES, VAR_PEAK[0])
    print(f"  means over {SEEDS} seeds: leaked {100 * (m1 / LEAK_BYTES - 1):+.2f}% "
          f"(sd of one run {100 * math.sqrt(VAR_LEAK[0]) / LEAK_BYTES:.1f}%), blocks "
          f"{100 * (m2 / LEAK_BLOCKS - 1):+.2f}%, peak {100 * (m3 / PEAK_BYTES - 1):+.2f}%")


def test_free_all():
    """A program that frees all it allocates (realloc, cross-thread frees, large blocks)
    has no leak in any seed: its one live block at exit, glibc's TLS block of the thread
    it made (kept in glibc's stack cache), is the full capture's one too."""
    full = report([program("known"), "free-all"], {})["memories"]["host"]
    check(full["leaked_blocks"] == 1 and stack_of(full["leak_stacks"], "allocate_dtv"),
          f"full capture: {full['leaked_bytes']} B leaked in {full['leaked_blocks']}")
    for seed in range(1, SEEDS + 1):
        h = sampled([program("known"), "free-all"], seed)["memories"]["host"]
        check(h["unknown_frees"] == 0, f"seed {seed}: {h['unknown_frees']} unknown frees")
        other = [s for s in h["leak_stacks"] if not stack_of([s], "allocate_dtv")]
        check(not other, f"seed {seed}: leaked {[(s['bytes'], s['label']) for s in other]}")
        check(h["allocations"] > 0 and h["frees"] > 0, f"seed {seed}: nothing recorded")


def test_reproducible():
    """MEMTRACE_SEED makes a single-threaded run's sampling the same every time."""
    a = sampled([program("known")], 1)["memories"]["host"]
    b = sampled([program("known")], 1)["memories"]["host"]
    check((a["leaked_bytes"], a["peak_bytes"]) == (b["leaked_bytes"], b["peak_bytes"]),
          f"seed 1 twice: {a['leaked_bytes']}/{a['peak_bytes']} and "
          f"{b['leaked_bytes']}/{b['peak_bytes']}")


def test_tracing_off():
    """MEMTRACE_SAMPLING with tracing off (MEMTRACE_ENABLE=0): every call passes through
    and the program runs as untraced. The free's pass once read the set of sampled
    blocks that only a started capture maps, and the first free crashed."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced([program("known"), "free-all"], trace,
                   {"MEMTRACE_SAMPLING": str(T), "MEMTRACE_ENABLE": "0"})
    check(r.returncode == 0, f"exited {r.returncode}: {r.stderr.decode()}")
    check(not os.path.exists(trace), "a trace was written with MEMTRACE_ENABLE=0")
    shutil.rmtree(d)


def test_run_option():
    """memtrace run --sampling 64K: the interval in the trace, the note in the report."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run([BIN, "run", "-o", trace, "--sampling", "64K", "--", program("known")])
    check(r.returncode == 0, f"memtrace run exited {r.returncode}: {r.stderr.decode()}")
    text = run([BIN, "report", trace]).stdout.decode()
    check("sampled capture: host figures are estimates (one allocation sampled per 64.0 KiB "
          "allocated on average; blocks over 320 KiB recorded exactly)" in text,
          f"no sampling note in the report:\n{text[:600]}")
    check_out = run([BIN, "check", trace]).stdout.decode()
    check("memtrace check: sampled capture" in check_out, f"no note in check:\n{check_out}")
    bad = run([BIN, "run", "--sampling", "2G", "--", "true"])
    check(bad.returncode == 1 and b"--sampling takes bytes" in bad.stderr,
          f"--sampling 2G: exit {bad.returncode}, {bad.stderr.decode()}")
    shutil.rmtree(d)


if __name__ == "__main__":
    main({"truth": test_truth, "leaks-and-peak": test_leaks_and_peak,
          "free-all": test_free_all, "reproducible": test_reproducible,
          "tracing-off": test_tracing_off, "run-option": test_run_option})
