# SPDX-License-Identifier: MIT
"""programs/trimmable-top: glibc keeps a 12 MiB free top after its
thresholds rose. `trimmable-top` must be found, its figure within 1% of
the keepcost mallinfo2 gives the program at the end; under
MALLOC_TRIM_THRESHOLD_=131072 (glibc trims at once) it must be absent. A
free top that is a small part of a large process is no finding: the float64
Adam training loop of oom-growth-torch kept 13 MiB of a 300 MiB process."""
import os
import re
import shutil

from oomtest import MiB, check, diagnosis, main, near, run_traced, report, workdir

PROGRAM = os.path.join(os.environ["MEMTRACE_OOM_PROGRAMS"], "trimmable-top")


def traced(extra=None):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([PROGRAM], trace, extra)
    check(out.returncode == 0, f"trimmable-top failed: {out.stderr.decode()}")
    (proc,) = report(trace)["processes"]
    shutil.rmtree(d)
    m = re.search(rb"keepcost (\d+)", out.stdout)
    check(m, f"the program did not print keepcost: {out.stdout!r}")
    found = {f["finding"]: f for f in diagnosis(proc, "fragmentation")["findings"]}
    return int(m.group(1)), found


def test_found():
    keepcost, found = traced()
    check(keepcost >= 10 * MiB, f"glibc kept only {keepcost} bytes: the program's premise fails")
    check("trimmable-top" in found, f"no trimmable-top: {sorted(found)}")
    near("trimmable-top's figure", found["trimmable-top"]["figure"], keepcost, 0.01)


def test_absent_when_trimmed():
    keepcost, found = traced({"MALLOC_TRIM_THRESHOLD_": "131072"})
    check(keepcost < MiB, f"glibc kept {keepcost} bytes under MALLOC_TRIM_THRESHOLD_")
    check("trimmable-top" not in found, f"trimmable-top under MALLOC_TRIM_THRESHOLD_: {found}")


main({"found": test_found, "absent_when_trimmed": test_absent_when_trimmed})
