# SPDX-License-Identifier: MIT
"""The traced program is never disturbed: bad settings, an unwritable or
full disk, a planted symlink, a name that is not a file (a device, a FIFO,
the program's own output), signals, threads that exit the process,
dlopen, allocations before main, an allocator of its own. memtrace says
what it cannot do in one line on stderr and changes nothing else.

With MEMTRACE_SAMPLING in the environment (capture-robustness-sampled) the
same cases in sampled mode: the same output, status, stderr and files. A case
that fills a disk does so at harness.FILL_SAMPLING in a smaller room; a case
that finds given blocks in the trace makes them large enough to be recorded
exactly (harness.exact_above, or leaker's block size)."""
import os
import re
import shutil
import stat
import subprocess

from harness import (BIN, FILL_ROOM, FILL_SAMPLING, LIB, SAMPLED, check, dump_summary, exact_above,
                     exact_size, main, program, run, run_traced, traced_env, untraced_env, workdir)

# a tmpfs the programs below fill: 1 MiB, or sampled FILL_ROOM (harness.FILL_SAMPLING)
FILL_TMPFS = f"size={FILL_ROOM if SAMPLED else 1 << 20}"
FILL_BLOCKS = "1000000" if SAMPLED else "200000"


def mount_fill_tmpfs():
    mnt = workdir()
    check(subprocess.run(["mount", "-t", "tmpfs", "-o", FILL_TMPFS, "tmpfs", mnt]).returncode == 0,
          f"cannot mount a tmpfs of {FILL_TMPFS}")
    return mnt


def stopped(trace):
    """The trace reads, to a stop."""
    out = run([BIN, "dump", "--summary", "--json", trace])
    check(out.returncode == 0, f"the trace of a full disk is not readable: {out.stderr!r}")
    import json
    ends = [p["end"] for p in json.loads(out.stdout)["processes"]]
    check(ends == ["stopped"], f"the trace's processes end {ends}: the disk never filled")


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
                           "MEMTRACE_SAMPLING": "64Q", "MEMTRACE_SEED": "x1", "MEMTRACE_CLOCK": "hpet"},
                    expect_stderr=b"memtrace: MEMTRACE_DEPTH=abc is not a number from 1 to 256; using 64\n"
                                  b"memtrace: MEMTRACE_INTERVAL_MS=-5 is not a number from 0 to 3600000; using 10\n"
                                  b"memtrace: MEMTRACE_MMAP=maybe is not 0 or 1; using 1\n"
                                  b"memtrace: MEMTRACE_SAMPLING=64Q is not a number of bytes (K, M or G allowed) "
                                  b"up to 1G; recording every block\n"
                                  b"memtrace: MEMTRACE_SEED=x1 is not an unsigned number; seeding from the clock\n"
                                  b"memtrace: MEMTRACE_CLOCK=hpet is not tsc or monotonic; using tsc where the "
                                  b"kernel does\n")
    (p,) = dump_summary(trace)["processes"]
    check(p["memories"]["host"]["live_blocks"] == 5, f"the trace with defaults is wrong: {p}")


def test_unwritable_path():
    compare([program("leaker"), "10", "10"], extra={"MEMTRACE_OUTPUT": "/nonexistent-dir/t.bin"},
            expect_stderr=b"memtrace: cannot create the trace /nonexistent-dir/t.bin: "
                          b"No such file or directory; tracing is off\n")


def test_full_disk():
    mnt = mount_fill_tmpfs()
    try:
        trace = os.path.join(mnt, "t.bin")
        compare([program("leaker"), FILL_BLOCKS, "24"], extra={"MEMTRACE_OUTPUT": trace, **FILL_SAMPLING},
                expect_stderr=b"memtrace: cannot extend the trace file: No space left on device; "
                              b"tracing stops, the program runs on\n")
        stopped(trace)
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


def test_no_word_into_a_reused_stderr():
    """A program that closes its standard error and opens a file of its own
    at descriptor 2, then fills the disk of the trace: memtrace's line about
    the full disk went into the program's file. Its file holds its own two
    lines, and memtrace says nothing, having nowhere to say it."""
    mnt = mount_fill_tmpfs()
    d = workdir()
    try:
        own = b"the program's own first line\nthe program's own last line\n"
        log = os.path.join(d, "daemon.log")
        plain = run([program("stderr-reuse"), log, FILL_BLOCKS])
        with open(log, "rb") as f:
            check(plain.returncode == 0 and f.read() == own, f"the plain run: {plain.returncode}")
        trace = os.path.join(mnt, "t.bin")
        traced = run_traced([program("stderr-reuse"), log, FILL_BLOCKS], trace, FILL_SAMPLING)
        with open(log, "rb") as f:
            got = f.read()
        check(traced.returncode == 0 and traced.stderr == b"", f"traced: {traced.returncode} {traced.stderr!r}")
        check(got == own, f"the program's file holds {got!r}")
        stopped(trace)
    finally:
        subprocess.run(["umount", mnt])
        shutil.rmtree(d)


def place_id(path):
    st = os.lstat(path)
    return (st.st_mode, st.st_ino, st.st_rdev)


def test_trace_name_not_a_file_is_left_alone():
    """MEMTRACE_OUTPUT naming a device, a FIFO, a directory, a link to one, or
    the program's own standard output: the name and its directory stay as
    they were, the program runs as untraced, one line says why. (The trace
    named /dev/null moved the system's /dev/null aside to /dev/null.old and
    took its name.)"""
    d = workdir()
    null, fifo, folder = (os.path.join(d, n) for n in ("null", "fifo", "folder"))
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mkfifo(fifo)
    os.mkdir(folder)
    link = os.path.join(d, "null-link")
    os.symlink(null, link)
    argv = [program("leaker"), "10", "10"]
    plain = run(argv)
    for name, why in ((null, "is not a regular file"), (fifo, "is not a regular file"),
                      (link, "is not a regular file"), (folder, "is a directory")):
        before = {n: place_id(os.path.join(d, n)) for n in os.listdir(d)}
        traced = run_traced(argv, name)
        check((traced.returncode, traced.stdout) == (plain.returncode, plain.stdout),
              f"{name}: the traced run differs: {traced.returncode} {traced.stdout!r}")
        check(traced.stderr == plain.stderr + f"memtrace: the trace {name} {why}; tracing is off\n".encode(),
              f"{name}: stderr {traced.stderr!r}")
        after = {n: place_id(os.path.join(d, n)) for n in os.listdir(d)}
        check(after == before, f"{name}: the directory changed: {before} -> {after}")
        check(os.listdir(folder) == [], f"the trace went into the directory: {os.listdir(folder)}")

    # an earlier trace at the name, and a device where it would be moved aside to
    trace = os.path.join(d, "trace.bin")
    run_traced(argv, trace)
    os.rename(null, trace + ".old")
    before = {n: place_id(os.path.join(d, n)) for n in os.listdir(d)}
    traced = run_traced(argv, trace)
    check((traced.returncode, traced.stdout) == (plain.returncode, plain.stdout),
          f"NAME.old a device: the traced run differs: {traced.returncode} {traced.stdout!r}")
    check(traced.stderr == plain.stderr + f"memtrace: the earlier trace would go to {trace}.old, which "
          "is not a regular file; tracing is off\n".encode(), f"NAME.old a device: stderr {traced.stderr!r}")
    after = {n: place_id(os.path.join(d, n)) for n in os.listdir(d)}
    check(after == before, f"NAME.old a device: the directory changed: {before} -> {after}")

    # the program's standard output, by its name and through a link to /proc/self/fd/1
    out = os.path.join(d, "out.txt")
    stdout_link = os.path.join(d, "stdout")
    os.symlink("/proc/self/fd/1", stdout_link)
    for name in (out, stdout_link):
        with open(out, "wb") as f:
            r = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, timeout=60,
                               env=traced_env(name))
        with open(out, "rb") as f:
            written = f.read()
        check(r.returncode == plain.returncode and written == plain.stdout,
              f"{name}: the program's output became {written[:40]!r} (exit {r.returncode})")
        check(r.stderr == plain.stderr + f"memtrace: the trace {name} is the program's standard output; "
              "tracing is off\n".encode(), f"{name}: stderr {r.stderr!r}")
        check(os.path.islink(stdout_link) and not os.path.exists(out + ".old"),
              f"{name}: moved aside: {sorted(os.listdir(d))}")
    shutil.rmtree(d)


def test_memtrace_run_refuses_a_name_not_a_file():
    """memtrace run -o /dev/null says so and runs nothing, rather than run
    the program untraced (or, before, replace the device)."""
    d = workdir()
    null = os.path.join(d, "null")
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    before = place_id(null)
    marker = os.path.join(d, "ran")
    r = run([BIN, "run", "-o", null, "--", "sh", "-c", f"touch {marker}"], env=untraced_env())
    check(r.returncode == 1 and r.stderr == f"memtrace run: {null} is not a regular file; a trace needs a "
          "file of its own\n".encode(), f"memtrace run -o DEVICE: {r.returncode} {r.stderr!r}")
    check(not os.path.exists(marker), "memtrace run -o DEVICE ran the program")
    check(place_id(null) == before and sorted(os.listdir(d)) == ["null"],
          f"memtrace run -o DEVICE: {sorted(os.listdir(d))}")
    shutil.rmtree(d)


def test_earlier_trace_kept_as_old():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    size = str(exact_size(10))  # sampled, the live blocks stay exact
    run_traced([program("leaker"), "10", size], trace)
    run_traced([program("leaker"), "30", size], trace)
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


def test_errno_unchanged_when_the_table_fills():
    """Sampled mode, whatever the suite's: 200,000 live blocks, every one recorded, fill the
    table of sampled blocks; memtrace stops, and the malloc it stopped in leaves errno as
    glibc did, though its word had nowhere to go (the program closed its standard error)."""
    argv = [program("errno-check"), "live", "200000"]
    trace = compare(argv, extra={"MEMTRACE_SAMPLING": "1"})
    (p,) = dump_summary(trace)["processes"]
    check(p["end"] == "stopped", f"the process ends {p['end']}: the table never filled")


def test_stop_said_by_a_thread_without_a_chunk():
    """A thread that cannot map its first chunk stops the tracing with no chunk of its own to
    say so in: the program runs on as untraced, says memtrace once, and the trace says the
    tracing stopped (written by the exit, in main's chunk), not that the process was killed."""
    trace = compare([program("late-thread")],
                    expect_stderr=b"memtrace: cannot map the trace file: Cannot allocate memory; "
                    b"tracing stops, the program runs on\n")
    (p,) = dump_summary(trace)["processes"]
    check(p["end"] == "stopped", f"the process ends {p['end']}, not stopped")


def drained(argv, env):
    """Runs argv, reading its standard error only once it says "drain" on its standard output:
    (status, stdout, stderr)."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = p.stdout.readline()
        err = p.stderr.read()
        out = first + p.stdout.read()
        return p.wait(timeout=60), out, err
    finally:
        p.kill()


def test_stop_said_while_the_others_let_go():
    """The same stop, but while memtrace's line about it waits on a full standard error, main
    finds the tracing stopped and gives its chunk back, and then exits with no chunk: the stop
    was noted for a later thread to say only after the line, so main's chunk went without it
    and the trace read as a process killed."""
    argv = [program("stop-window")]
    trace = os.path.join(workdir(), "trace.bin")
    plain = drained(argv, untraced_env())
    traced = drained(argv, traced_env(trace))
    check(plain[0] == traced[0] == 0, f"exit status {plain[0]} plain, {traced[0]} traced")
    check(plain[1] == traced[1] and plain[1].startswith(b"drain\nlate thread: malloc "),
          f"stdout differs: {plain[1]!r} / {traced[1]!r}")
    check(traced[2] == plain[2] + b"memtrace: cannot map the trace file: Cannot allocate memory; "
          b"tracing stops, the program runs on\n",
          f"stderr ends {traced[2][-200:]!r} ({len(plain[2])} bytes of filler plain)")
    (p,) = dump_summary(trace)["processes"]
    check(p["end"] == "stopped", f"the process ends {p['end']}, not stopped")


def test_fork_without_room():
    """A child forked with no address space left cannot map its stack table: it says so once
    and runs on untraced (it said twice, and turned tracing back on without a table); the
    parent's trace ends as the parent did. The sampler is off so the parent needs no chunk."""
    trace = compare([program("fork-no-room")], extra={"MEMTRACE_INTERVAL_MS": "0"},
                    expect_stderr=b"memtrace: cannot map the stack table in a forked child; "
                    b"tracing stops, the program runs on\n")
    (p,) = dump_summary(trace)["processes"]
    check(p["end"] == "exit", f"the parent ends {p['end']}, not exit")


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
    trace = compare([program("dlopen-early")], extra=exact_above(555))  # sampled: blocks sought exact
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
    "no_word_into_a_reused_stderr": test_no_word_into_a_reused_stderr,
    "trace_name_not_a_file_is_left_alone": test_trace_name_not_a_file_is_left_alone,
    "memtrace_run_refuses_a_name_not_a_file": test_memtrace_run_refuses_a_name_not_a_file,
    "earlier_trace_kept_as_old": test_earlier_trace_kept_as_old,
    "errno_unchanged_and_failures_recorded": test_errno_unchanged_and_failures_recorded,
    "errno_unchanged_when_the_table_fills": test_errno_unchanged_when_the_table_fills,
    "stop_said_by_a_thread_without_a_chunk": test_stop_said_by_a_thread_without_a_chunk,
    "stop_said_while_the_others_let_go": test_stop_said_while_the_others_let_go,
    "fork_without_room": test_fork_without_room,
    "memtrace_run_exit_status": test_memtrace_run_exit_status,
    "signal_handler_allocations": test_signal_handler_allocations,
    "exit_from_a_thread": test_exit_from_a_thread,
    "dlopen_and_before_main": test_dlopen_and_before_main,
    "own_allocator": test_own_allocator,
})
