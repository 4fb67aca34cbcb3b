# SPDX-License-Identifier: MIT
"""samples/grows-per-step: exactly 1 MiB kept per step, a mark per step.
The growth diagnosis must find keep_records' stack at the top, 1 MiB per
mark within 10% (the precise check of the fit), at a rate per second near
1 MiB per 20 ms step, and list the marks with the live bytes at each."""
import os
import shutil

from oomtest import MiB, check, diagnosis, functions, main, names, near, program, report, run_traced, workdir

STEPS = 30


def test_growth_per_mark():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([program("grows-per-step"), str(STEPS)], trace)
    check(out.returncode == 0, f"grows-per-step failed: {out.stderr.decode()}")
    (proc,) = report(trace)["processes"]

    marks = diagnosis(proc, "marks")
    check([m["label"] for m in marks] == [f"step {i}" for i in range(STEPS)], f"marks: {[m['label'] for m in marks]}")
    check(all(m["live"]["host"] == (i + 1) * MiB for i, m in enumerate(marks)),
          f"live at the marks: {[m['live']['host'] for m in marks]}")

    growth = diagnosis(proc, "growth")
    check(growth, "no growth found")
    top = growth[0]
    check(top["kind"] == "host" and names(top["stack"], "keep_records"),
          f"the top growth is not keep_records': {functions(top['stack'])}")
    near("bytes_per_mark", top["bytes_per_mark"], MiB, 0.10)
    # each mark adds exactly 1 MiB: the fit per mark is exact (the fit over time depends on
    # how the 20 ms sleeps fall on a loaded machine, and is not asserted)
    check(abs(top["r2_per_mark"] - 1) < 1e-9, f"the fit per mark has r2 {top['r2_per_mark']}")
    # a step is 20 ms of sleep and a little work: at most 50 MiB/s, not less than 35
    check(35 * MiB <= top["bytes_per_second"] <= 52 * MiB, f"bytes_per_second {top['bytes_per_second']}")
    near("grown_bytes", top["grown_bytes"], STEPS * MiB, 0.10)
    check(not any(names(g["stack"], "parse_batch") for g in growth), "parse_batch's freed scratch reported as growth")
    shutil.rmtree(d)


main({"growth_per_mark": test_growth_per_mark})
