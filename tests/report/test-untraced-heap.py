# SPDX-License-Identifier: MIT
"""The untraced-heap finding: programs/untraced-heap takes 100 MiB of heap
from glibc's __libc_malloc, linked directly, which memtrace cannot see. The
finding's figure (glibc's in-use bytes less the traced live host bytes, at
the last sample) must be within 2% of the growth of mallinfo2's in-use
bytes (uordblks + hblkhd) the program printed around those blocks; the
same blocks from malloc (a correct program) give no such finding."""
import json
import os
import re
import shutil
import sys

from harness import BIN, check, main, run, run_traced, workdir

PROGRAM = os.path.join(os.environ["MEMTRACE_REPORT_PROGRAMS"], "untraced-heap")


def traced(mode):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([PROGRAM, mode], trace)
    check(out.returncode == 0, f"untraced-heap {mode}: {out.returncode} {out.stderr.decode()}")
    m = re.search(rb"in use before (\d+) after (\d+)", out.stdout)
    check(m, f"the program did not print mallinfo2's figures: {out.stdout!r}")
    rep = run([BIN, "report", "--json", trace])
    check(rep.returncode == 0, f"memtrace report failed: {rep.stderr.decode()}")
    (proc,) = json.loads(rep.stdout)["processes"]
    shutil.rmtree(d)
    frag = proc["diagnosis"]["fragmentation"]
    check(frag is not None, "no fragmentation object (no samples?)")
    return int(m.group(2)) - int(m.group(1)), {f["finding"]: f for f in frag["findings"]}


def test_untraced():
    truth, findings = traced("untraced")
    check("untraced-heap" in findings, f"no untraced-heap finding: {sorted(findings)}")
    figure = findings["untraced-heap"]["figure"]
    check(abs(figure - truth) <= 0.02 * truth,
          f"the untraced-heap figure {figure} is not within 2% of mallinfo2's growth {truth}")


def test_traced():
    _, findings = traced("traced")
    check("untraced-heap" not in findings,
          f"untraced-heap on a correct program: {findings.get('untraced-heap')}")


main({"untraced": test_untraced, "traced": test_traced})
