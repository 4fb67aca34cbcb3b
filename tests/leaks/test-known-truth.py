# SPDX-License-Identifier: MIT
"""Leak classes of programs whose every block's class is known from their
source (tests/leaks/programs/), under memtrace and under valgrind's memcheck:
both give the program's known figures to the byte and block, and libc's own
blocks are named by the function that allocated them and accounted for
explicitly. `memtrace check` counts exactly definite + indirect, + possible
with --count-possible, + reachable with --count-reachable."""
import os
import shutil

from harness import LIB, check, main, program
from versus import add, check_exit, dtv_bytes, memtrace, valgrind

# The program's own blocks, from the figures in each program's opening comment.
TRUTH = {
    "global-cache": {"reachable": (2990, 40)},
    "dropped-list": {"definite": (48, 2), "indirect": (928, 22), "reachable": (440, 10)},
    "dropped-blocks": {"definite": (218773, 9)},
    "interior-pointer": {"possible": (220, 4), "definite": (60, 1)},
    "thread-stack": {"reachable": (3743, 4), "definite": (500, 1)},
    "thread-local": {"reachable": (624, 3)},
    "freed-struct": {"definite": (560, 10), "reachable": (16, 1)},
}

# stdout's buffer, malloc'd by libc at the first printf: 4096 bytes on the pipe the test
# reads (the pipe's st_blksize), still reachable from libc's data under both tools
STDIO_FUNCTION = "_IO_file_doallocate"
STDIO_BUFFER = {"reachable": (4096, 1)}
PRINTS = {"global-cache"}

# A thread's dtv, calloc'd by pthread_create (_dl_allocate_tls): possible, since the
# thread's control block points at its second slot. Its size counts the loaded objects
# with TLS, and under memtrace the preload brings its own (libmemtrace.so and libunwind):
# 32 bytes more than under valgrind, whose preloads have none (272 vs 304 bytes for
# thread-stack, 288 vs 320 for thread-local, whose __thread variables add the program).
DTV_FUNCTION = "_dl_allocate_tls"
THREADS = {"thread-stack": 1, "thread-local": 1}


def libc_blocks(name, preload):
    """The blocks libc allocates for itself in program NAME, under a tool whose preload
    is PRELOAD (None for valgrind, whose preloads have no TLS)."""
    out = {}
    if name in PRINTS:
        out = add(out, STDIO_BUFFER)
    if name in THREADS:
        out = add(out, {"possible": (dtv_bytes(program(name), preload) * THREADS[name],
                                     THREADS[name])})
    return out


def libc_by_function(result):
    return add(result.by_function(STDIO_FUNCTION), result.by_function(DTV_FUNCTION))


def leaked(classes, *extra):
    return sum(classes.get(cls, (0, 0))[0] for cls in ("definite", "indirect") + extra)


def compare(name):
    argv = [program(name)]
    vg = valgrind(argv)
    mt = memtrace(argv)
    check(mt.returncode == 0 and vg.returncode == 0,
          f"exit status {mt.returncode} under memtrace, {vg.returncode} under valgrind")
    expect_vg = add(TRUTH[name], libc_blocks(name, None))
    expect_mt = add(TRUTH[name], libc_blocks(name, LIB))
    check(vg.classes == expect_vg,
          f"valgrind {vg.classes}, known truth {expect_vg}: the program is not deterministic")
    check(mt.classes == expect_mt,
          f"memtrace {mt.classes}, known truth {expect_mt} (valgrind {vg.classes})")
    # libc's part of those figures is where the allocating function says it is
    check(libc_by_function(vg) == libc_blocks(name, None),
          f"libc's blocks under valgrind {libc_by_function(vg)}, "
          f"expected {libc_blocks(name, None)}")
    check(libc_by_function(mt) == libc_blocks(name, LIB),
          f"libc's blocks under memtrace {libc_by_function(mt)}, "
          f"expected {libc_blocks(name, LIB)}")
    # the gate: exactly at the counted bytes passes, a byte less fails
    for flags, extra in (([], ()), (["--count-possible"], ("possible",)),
                         (["--count-possible", "--count-reachable"], ("possible", "reachable"))):
        n = leaked(mt.classes, *extra)
        status = check_exit(mt.trace, flags + ["--max-leaked", str(n)])
        check(status == 0, f"check {flags} --max-leaked {n}: exit {status}, 0 expected")
        if n:
            status = check_exit(mt.trace, flags + ["--max-leaked", str(n - 1)])
            check(status == 1, f"check {flags} --max-leaked {n - 1}: exit {status}, 1 expected")
    shutil.rmtree(os.path.dirname(mt.trace))


main({name.replace("-", "_"): (lambda n=name: compare(n)) for name in TRUTH})
