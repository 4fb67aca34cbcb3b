# SPDX-License-Identifier: MIT
"""samples/arena-bloat: 8 threads take turns with 40 MiB of temporaries,
each keeping a small result above them in its own arena: glibc's arenas
end near 320 MiB for a live peak of 40 MiB. `arena-bloat` must be found,
its figure (the arenas' total) within 5% of mallinfo2's arena as the
program prints it; under MALLOC_ARENA_MAX=1 (one arena, the main heap,
which each turn reuses) it must be absent, and so in a program with one
thread."""
import os
import re
import shutil

from oomtest import MiB, check, diagnosis, main, near, program, report, run_traced, workdir

FINDING = "arena-bloat"
TEMPORARIES = 640 * (64 << 10)


def traced(name, extra=None):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([program(name)], trace, extra)
    check(out.returncode == 0, f"{name} failed: {out.stderr.decode()}")
    (proc,) = report(trace)["processes"]
    shutil.rmtree(d)
    return out.stdout, proc


def findings(proc):
    return {f["finding"]: f for f in diagnosis(proc, "fragmentation")["findings"]}


def arena(stdout):
    m = re.search(rb"arena (\d+)", stdout)
    check(m, f"the program did not print mallinfo2's arena: {stdout!r}")
    return int(m.group(1))


def test_found_with_its_figure():
    stdout, proc = traced("arena-bloat")
    total = arena(stdout)
    check(total > 4 * TEMPORARIES, f"glibc's arenas total {total}: the threads did not get arenas")
    peak = proc["memories"]["host"]["peak_bytes"]
    check(abs(peak - TEMPORARIES) < 1 * MiB, f"host peak {peak}, not the {TEMPORARIES} of one turn")
    found = findings(proc)
    check(FINDING in found, f"no {FINDING} finding: {sorted(found)}")
    near(f"{FINDING}'s figure", found[FINDING]["figure"], total, 0.05)
    check("MALLOC_ARENA_MAX=2" in found[FINDING]["advice"], f"advice: {found[FINDING]['advice']}")


def test_absent_with_one_arena():
    stdout, proc = traced("arena-bloat", {"MALLOC_ARENA_MAX": "1"})
    total = arena(stdout)
    check(total < 2 * TEMPORARIES, f"one arena, yet glibc's arenas total {total}")
    found = findings(proc)
    check(FINDING not in found, f"{FINDING} with MALLOC_ARENA_MAX=1: {found.get(FINDING)}")


def test_absent_with_one_thread():
    _, proc = traced("heap-fragmentation")
    found = findings(proc)
    check(FINDING not in found, f"{FINDING} in a program with one thread: {found.get(FINDING)}")


main({
    "found_with_its_figure": test_found_with_its_figure,
    "absent_with_one_arena": test_absent_with_one_arena,
    "absent_with_one_thread": test_absent_with_one_thread,
})
