# SPDX-License-Identifier: MIT
"""samples/rss-grows-not-live: glibc's dynamic mmap threshold raised at
start-up, then each step's 2 MiB temporary comes from the heap and stays
there as a hole below a 256-byte record kept. RSS grows about 2 MiB a step
while live memory grows 256 bytes. The program prints its RSS from /proc
after each step: the least-squares slope of those figures over the step
index is the truth of `rss-grows-not-live`'s figure (RSS growth per mark
not explained by live growth). Under MALLOC_MMAP_THRESHOLD_=131072 the
temporaries are mmapped, RSS stays flat and the finding must be absent; so
it must be for grows-per-step, whose RSS grows because live memory does."""
import os
import re
import shutil

from oomtest import MiB, check, diagnosis, main, near, program, report, run_traced, workdir

STEPS = 40
FINDING = "rss-grows-not-live"


def slope(ys):
    n = len(ys)
    mx, my = (n - 1) / 2, sum(ys) / n
    return sum((x - mx) * (y - my) for x, y in enumerate(ys)) / sum((x - mx) ** 2 for x in range(n))


def traced(argv, extra=None):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced(argv, trace, extra)
    check(out.returncode == 0, f"{argv[0]} failed: {out.stderr.decode()}")
    (proc,) = report(trace)["processes"]
    shutil.rmtree(d)
    return out.stdout, proc


def step_rss(stdout):
    rss = [int(x) for x in re.findall(rb"step \d+ rss (\d+)", stdout)]
    check(len(rss) == STEPS, f"the program printed {len(rss)} steps, not {STEPS}: {stdout!r}")
    return rss


def findings(proc):
    fr = diagnosis(proc, "fragmentation")
    check(fr is not None, "no fragmentation section (no samples?)")
    return {f["finding"]: f for f in fr["findings"]}


def test_found_with_its_figure():
    stdout, proc = traced([program("rss-grows-not-live"), str(STEPS)])
    truth = slope(step_rss(stdout)) - 256  # the record kept per step is live growth
    check(truth > 1.5 * MiB, f"the program's RSS grew {truth:.0f} bytes a step: glibc did not reproduce")
    found = findings(proc)
    check(FINDING in found, f"no {FINDING} finding: {sorted(found)}")
    f = found[FINDING]
    near(f"{FINDING}'s figure (RSS growth per mark)", f["figure"], truth, 0.05)
    check("MALLOC_MMAP_THRESHOLD_=131072" in f["advice"], f"advice without the fix: {f['advice']}")
    check("8.00 MiB" in f["text"], f"the threshold raise (to 8 MiB) is not named: {f['text']}")


def test_absent_with_fixed_threshold():
    stdout, proc = traced([program("rss-grows-not-live"), str(STEPS)],
                          {"MALLOC_MMAP_THRESHOLD_": "131072"})
    truth = slope(step_rss(stdout))
    check(truth < 64 * 1024, f"RSS grew {truth:.0f} bytes a step with the threshold fixed")
    found = findings(proc)
    check(FINDING not in found, f"{FINDING} with MALLOC_MMAP_THRESHOLD_=131072: {found.get(FINDING)}")


def test_absent_when_live_grows():
    _, proc = traced([program("grows-per-step"), "30"])
    found = findings(proc)
    check(FINDING not in found, f"{FINDING} where live memory explains RSS: {found.get(FINDING)}")


main({
    "found_with_its_figure": test_found_with_its_figure,
    "absent_with_fixed_threshold": test_absent_with_fixed_threshold,
    "absent_when_live_grows": test_absent_when_live_grows,
})
