# SPDX-License-Identifier: MIT
"""The traced program is never disturbed: bad settings, an unwritable or
full disk, a planted symlink, signals, threads that exit the process,
dlopen, allocations before main, an allocator of its own. memtrace says
what it cannot do in one line on stderr and changes nothing else."""
import os
import re
import shutil
import subprocess

from harness import BIN, LIB, check, dump_summary, main, program, run, run_traced, workdir


def compare(argv, extra=None, expect_stderr=b"", cwd=None):
    """Runs argv plain and traced; returns the traced run's trace path."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    plain = run(argv, cwd=cwd)
    traced = run_traced(argv, trace, extra=extra, cwd=cwd)
    check(plain.returncode == traced.returncode,
          f"{argv}: exit status {plain.returncode} plain, {traced.returncode} traced")
    check(plain.stdout == traced.stdout, f"{argv}: stdout differs: {plain.stdout!r} / {traced.stdout!r}")
    check(traced.stderr == plain.stderr + expect_stderr,
          f"{argv}: stderr is {traced.stderr!r}, expected {plain.stderr + expect_stderr!r}")
    return trace


def test_bad_settings_one_line_each():
    trace = compare([program("leaker"), "10", "10"],
                    extra={"MEMTRACE_DEPTH": "abc", "MEMTRACE_INTERVAL_MS": "-5", "MEMTRACE_MMAP": "maybe",
                           "MEMTRACE_SAMPLING": "64Q", "MEMTRACE_SEED": "x1"},
                    expect_stderr=b"memtrace: MEMTRACE_DEPTH=abc is not a number from 1 to 256; using 64\n"
                                  b"memtrace: MEMTRACE_INTERVAL_MS=-5 is not a number from 0 to 3600000; using 10\n"
                                  b"memtrace: MEMTRACE_MMAP=maybe is not 0 or 1; using 1\n"
                                  b"memtrace: MEMTRACE_SAMPLING=64Q is not a number of bytes (K, M or G allowed) "
                                  b"up to 1G; recording every block\n"
                                  b"memtrace: MEMTRACE_SEED=x1 is not an unsigned number; seeding from the clock\n")
    (p,) = dump_summary(trace)["processes"]
    check(p["memories"]["host"]["live_blocks"] == 5, f"the trace with defaults is wrong: {p}")


def test_unwritable_path():
    compare([program("leaker"), "10", "10"], extra={"MEMTRACE_OUTPUT": "/nonexistent-dir/t.bin"},
            expect_stderr=b"memtrace: cannot create the trace /nonexistent-dir/t.bin: "
                          b"No such file or directory; tracing is off\n")


def test_full_disk():
    mnt = workdir()
    check(subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt]).returncode == 0,
          "cannot mount a 1 MiB tmpfs")
    try:
        trace = os.path.join(mnt, "t.bin")
        compare([program("leaker"), "200000", "24"], extra={"MEMTRACE_OUTPUT": trace},
                expect_stderr=b"memtrace: cannot extend the trace file: No space left on device; "
                              b"tracing stops, the program runs on\n")
        out = run([BIN, "dump", "--summary", trace])
        check(out.returncode == 0, f"the trace of a full disk is not readable: {out.stderr!r}")
    finally:
        subprocess.run(["umount", mnt])


def test_planted_symlink_is_not_followed():
    d = workdir()
    victim = os.path.join(d, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    trace = os.path.join(d, "trace.bin")
    os.symlink(victim, trace)
    r = run_traced([program("leaker"), "10", "10"], trace)
    check(r.returncode == 0 and r.stderr == b"", f"traced run: {r.returncode} {r.stderr!r}")
    with open(victim) as f:
        check(f.read() == "precious\n", "the symlink's target was written")
    check(not os.path.islink(trace) and os.path.islink(trace + ".old"),
          "the planted link was not moved aside to trace.bin.old")
    check(os.stat(trace).st_mode & 0o777 == 0o600, f"mode {oct(os.stat(trace).st_mode)}")
    shutil.rmtree(d)


def test_earlier_trace_kept_as_old():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    run_traced([program("leaker"), "10", "10"], trace)
    run_traced([program("leaker"), "30", "10"], trace)
    old = dump_summary(trace + ".old")["processes"][0]["memories"]["host"]["live_blocks"]
    new = dump_summary(trace)["processes"][0]["memories"]["host"]["live_blocks"]
    check((old, new) == (5, 15), f"live blocks: .old {old}, new {new}; expected 5 and 15")
    shutil.rmtree(d)


def test_errno_unchanged_and_failures_recorded():
    trace = compare([program("errno-check")])
    (p,) = dump_summary(trace)["processes"]
    got = [(f["fn"], f["size"], f["errno"]) for f in p["failed"]]
    huge = (1 << 63) - 1
    want = [("malloc", huge, 12), ("calloc", float(1 << 64), 12), ("realloc", huge, 12),
            ("posix_memalign", 10, 22)]
    check(got == want, f"failed allocations {got}, expected {want}")
    check(all(f["stack"] for f in p["failed"]), "a failed allocation has no stack")


def test_memtrace_run_exit_status():
    d = workdir()
    trace = os.path.join(d, "t.bin")
    r = run([BIN, "run", "-o", trace, "--", "sh", "-c", "exit 3"])
    check(r.returncode == 3, f"memtrace run returned {r.returncode} for exit 3")
    r = run([BIN, "run", "-o", trace, "--", "sh", "-c", "kill -9 $$"])
    check(r.returncode == -9, f"memtrace run returned {r.returncode} for SIGKILL, not killed by it")
    check(b"(the earlier trace is now" in r.stderr, f"no word of the .old trace: {r.stderr!r}")
    shutil.rmtree(d)


def test_signal_handler_allocations():
    compare([program("signals")])


def test_exit_from_a_thread():
    trace = compare([program("thread-exit")])
    (p,) = dump_summary(trace)["processes"]
    check(p["end"] == "exit" and p["exit_status"] == 7, f"end {p['end']} status {p.get('exit_status')}")


def test_dlopen_and_before_main():
    trace = compare([program("dlopen-early")])
    dump = run([BIN, "dump", trace]).stdout.decode()
    check(re.search(r'MODULE .*path "[^"]*libz\.so', dump), "no MODULE record for the dlopen'ed libz")
    for size in (777, 555):
        check(re.search(rf"ALLOC malloc \S+ size {size} ", dump), f"the {size}-byte block is not in the trace")
    # zlib's deflate state (some 5 KiB and more) was allocated and freed in between
    check(re.search(r"ALLOC \S+ \S+ size [5-9]\d{3} ", dump), "zlib's allocations are not in the trace")


def test_own_allocator():
    compare([program("own-allocator")],
            expect_stderr=b"memtrace: the program's own malloc comes before memtrace's; nothing to trace\n")


main({
    "bad_settings_one_line_each": test_bad_settings_one_line_each,
    "unwritable_path": test_unwritable_path,
    "full_disk": test_full_disk,
    "planted_symlink_is_not_followed": test_planted_symlink_is_not_followed,
    "earlier_trace_kept_as_old": test_earlier_trace_kept_as_old,
    "errno_unchanged_and_failures_recorded": test_errno_unchanged_and_failures_recorded,
    "memtrace_run_exit_status": test_memtrace_run_exit_status,
    "signal_handler_allocations": test_signal_handler_allocations,
    "exit_from_a_thread": test_exit_from_a_thread,
    "dlopen_and_before_main": test_dlopen_and_before_main,
    "own_allocator": test_own_allocator,
})
