# SPDX-License-Identifier: MIT
"""When the sampler reads smaps_rollup (preload/sampler.c): only when the
process's pages moved by 1/64 of RSS since its last read (statm, page
faults), or that read is 100 ms old. A process that sleeps has its Pss read
about every 100 ms, never older than that; one whose pages move at every
sample has it read at every sample. A SAMPLE's pss_age says how old its Pss
is (ticks); a read is a sample whose Pss is under 1 ms old."""
import os
import re
import shutil
import time

from harness import BIN, LIB, check, main, program, run, run_traced, workdir

SAMPLE = re.compile(r" SAMPLE ns (\d+) .* pss_age (\d+)")


def samples(argv):
    """(monotonic ns, pss age in ticks) of every SAMPLE of argv's traced run."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced(argv, trace, {"MEMTRACE_REACHABILITY": "0"})
    check(out.returncode == 0, f"{argv} failed: {out.stderr.decode()}")
    dump = run([BIN, "dump", trace])
    check(dump.returncode == 0, f"memtrace dump failed: {dump.stderr.decode()}")
    shutil.rmtree(d)
    return [(int(ns), int(age)) for ns, age in SAMPLE.findall(dump.stdout.decode())]


def ticks_per_ns(s):
    """The clock's rate, from the samples at which no read happened: their age grows by the
    ticks that passed."""
    grew = [(b[1] - a[1], b[0] - a[0]) for a, b in zip(s, s[1:]) if b[1] > a[1] + 1000]
    check(grew, "no sample of a sleeping process without a read")
    return sum(t for t, _ in grew) / sum(ns for _, ns in grew)


def reads(s, per_ns):
    """The samples whose Pss was read at them: those whose age is under 1 ms."""
    return sum(age < 1e6 * per_ns for _, age in s)


def test_reads():
    """A sleeping process, then one whose pages move at every sample (the sleeping one's
    samples give the clock's rate)."""
    s = samples(["/bin/sleep", "1"])
    check(len(s) >= 60, f"{len(s)} samples in 1 s of sleep")
    per_ns = ticks_per_ns(s)
    n = reads(s, per_ns)
    # 1 s: a read at the start, one every 100 ms, the last sample's own (a read per sample: 100)
    check(8 <= n <= 14, f"{n} smaps_rollup reads in {len(s)} samples of a sleeping process")
    oldest_ms = max(age for _, age in s) / per_ns / 1e6
    check(oldest_ms < 130, f"a sample's Pss was {oldest_ms:.1f} ms old")

    s = samples([program("page-toucher"), "600"])
    check(len(s) >= 30, f"{len(s)} samples in 600 ms")
    n = reads(s, per_ns)
    check(n >= 0.9 * len(s), f"{n} smaps_rollup reads in {len(s)} samples while 1 MiB of pages "
                             f"was written and unmapped every 2 ms")


def test_reads_within_their_budget():
    """A process alone whose pages move at every sample, each smaps_rollup read made to cost
    2 ms of CPU (slow-smaps.so): the sampler reads it within a hundredth of its interval, 0.1
    ms, so about every 21st sample, besides the first and the last (at a twentieth, torch's 5%
    of a core, every 5th: some 20 reads in the second)."""
    d = workdir()
    out_path = os.path.join(d, "reads")
    env = {"LD_PRELOAD": program("slow-smaps.so") + " " + LIB, "SLOW_SMAPS_OUT": out_path,
           "MEMTRACE_REACHABILITY": "0"}
    t0 = time.monotonic()
    out = run_traced([program("page-toucher"), "1000"], os.path.join(d, "trace.bin"), env)
    ms = (time.monotonic() - t0) * 1000
    check(out.returncode == 0, f"page-toucher failed: {out.stderr.decode()}")
    with open(out_path) as f:
        reads = int(f.read())
    spent = (reads - 2) * 2
    check(reads >= 3 and spent <= 0.015 * ms,
          f"{reads} smaps_rollup reads of 2 ms in {ms:.0f} ms: {spent} ms after the first and "
          f"last, more than 1.5% of the run")
    shutil.rmtree(d)


main({"reads": test_reads, "reads_within_their_budget": test_reads_within_their_budget})
