# SPDX-License-Identifier: MIT
"""tests/oom/programs/growth-shapes under the preload: growth is a rise of
live bytes that goes on to the end of the run, and its figure is the live
change observed. A leak of exactly 100 MiB over the steps is found at the
stack that keeps it, grown_bytes 100 MiB within 1% with marks and without;
a one-time 190 MiB at start-up, a rise then a plateau, a rise then a fall
are no growth at all (with marks and without)."""
import os
import shutil

from oomtest import MiB, check, diagnosis, functions, main, names, near, report, run_traced, workdir

PROGRAM = os.path.join(os.environ.get("MEMTRACE_OOM_PROGRAMS", ""), "growth-shapes")
STEPS = 100


def traced(shape, marks):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([PROGRAM, shape, str(STEPS), "marks" if marks else "nomarks"], trace)
    check(out.returncode == 0, f"growth-shapes {shape} failed: {out.stderr.decode()}")
    (proc,) = report(trace)["processes"]
    shutil.rmtree(d)
    return proc


def check_leak(marks):
    proc = traced("leak", marks)
    growth = diagnosis(proc, "growth")
    check(len(growth) == 1, f"not one growing stack but {len(growth)}: {[functions(g['stack'])[:4] for g in growth]}")
    g = growth[0]
    check(g["kind"] == "host" and names(g["stack"], "keep"), f"the growth is not keep's: {functions(g['stack'])}")
    near("grown_bytes", g["grown_bytes"], 100 * MiB, 0.01)
    if marks:
        near("bytes_per_mark", g["bytes_per_mark"], 100 * MiB / STEPS, 0.01)
    else:
        check(g["bytes_per_mark"] is None, f"bytes_per_mark {g['bytes_per_mark']} without marks")
    # the rise is observed: from nothing to all that was kept at the end, or at the last
    # mark, made before the last step kept its share
    end = 100 * MiB - (100 * MiB // STEPS if marks else 0)
    check(g["from_bytes"] < MiB and g["end_bytes"] == end, f"live from {g['from_bytes']} to {g['end_bytes']}, not to {end}")
    check(g["bytes_per_second"] > 0, f"bytes_per_second {g['bytes_per_second']}")


def check_none(shape):
    for marks in (True, False):
        proc = traced(shape, marks)
        growth = diagnosis(proc, "growth")
        check(not growth and diagnosis(proc, "growth_total") == 0,
              f"{shape} ({'marks' if marks else 'no marks'}): growth found: "
              f"{[(g['grown_bytes'], functions(g['stack'])[:4]) for g in growth]}")


main({
    "leak_with_marks": lambda: check_leak(True),
    "leak_without_marks": lambda: check_leak(False),
    "startup_once": lambda: check_none("startup"),
    "rise_then_plateau": lambda: check_none("plateau"),
    "rise_then_fall": lambda: check_none("fall"),
})
