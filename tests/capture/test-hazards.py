# SPDX-License-Identifier: MIT
"""The trace survives what happens to a run: children made without fork(),
two runs that share an output name, a full disk on a real file system, a
file size limit, many short processes; and the preload's own environment
work leaves no trace of itself in the program's figures.

With MEMTRACE_SAMPLING in the environment (capture-hazards-sampled) the same
cases run in sampled mode, its pass in front of glibc: the same output,
status and files; figures exact where sampled mode records every block
(blocks of a few intervals and more), else estimates checked as such."""
import os
import shutil
import subprocess
import time

from harness import (BIN, FILL_ROOM, FILL_SAMPLING, INTERVAL, LIB, SAMPLED, Failure, check,
                     dump_summary, exact_size, figure, main, program, run, run_traced, workdir)


def host(p):
    return p["memories"]["host"]


def test_raw_clone(mode):
    d = workdir()
    trace = os.path.join(d, "t.bin")
    r = run_traced([program("raw-clone"), mode], trace)
    check(r.returncode == 0 and r.stderr == b"", f"traced run: {r.returncode} {r.stderr!r}")
    procs = dump_summary(trace)["processes"]
    check(len(procs) == 2, f"{len(procs)} processes in the trace, expected the parent and its child")
    parent, child = procs
    check(parent["origin"] == "root" and child["origin"] == "fork",
          f"origins {parent['origin']}, {child['origin']}")
    check(child["ppid"] == parent["pid"] and child["pid"] != parent["pid"], "the child's pids are wrong")
    want_parent = (8, 1443, 1443, 8)
    got = (host(parent)["allocations"], host(parent)["bytes_allocated"], host(parent)["live_bytes"],
           host(parent)["live_blocks"])
    want_child = (20000, 960000, 960000 + 333, 20003, 333)
    c = host(child)
    got_child = (c["allocations"], c["bytes_allocated"], c["live_bytes"], c["live_blocks"],
                 c["inherited_bytes"])
    if not SAMPLED:
        check(got == want_parent, f"parent: allocations, bytes, live bytes, live blocks {got}, "
                                  f"expected {want_parent}")
        check(got_child == want_child, f"child: allocations, bytes, live bytes, live blocks, inherited "
                                       f"{got_child}, expected {want_child}")
    else:
        # the parent's 8 blocks are too few to estimate; each one sampled weighs at most its
        # size and an interval, which the child's 960,000 bytes recorded as the parent's pass
        check(got[2] == got[1] and got[3] == got[0] and got[1] <= 1443 + 8 * INTERVAL,
              f"parent: allocations, bytes, live bytes, live blocks {got}, expected at most "
              f"{1443 + 8 * INTERVAL} bytes, all live")
        # the child's 20,000 an estimate; its inherited blocks (3 of 111 bytes) likewise bounded
        check(figure(got_child[0], 20000) and figure(got_child[1], 960000) and
              got_child[2] == got_child[1] + got_child[4] and got_child[3] >= got_child[0] and
              got_child[4] <= 333 + 3 * INTERVAL,
              f"child: allocations, bytes, live bytes, live blocks, inherited {got_child}, "
              f"expected estimates of {want_child}")
    check(child["end"] == "exit" and child["exit_status"] == 0, f"child end {child['end']}")
    shutil.rmtree(d)


def test_two_runs_one_name():
    """Run A starts, run B with the same name runs to its end while A lives,
    then A's shell execs a program that must join A's trace: both kept."""
    d = workdir()
    trace = os.path.join(d, "same.bin")
    go = os.path.join(d, "go")
    size = str(exact_size(10))  # sampled, the runs' figures stay exact
    script = f'while [ ! -e {go} ]; do sleep 0.02; done; exec {program("leaker")} 10 {size}'
    env = dict(os.environ, LD_PRELOAD=LIB, MEMTRACE_OUTPUT=trace)
    env.pop("MEMTRACE_TREE", None)
    a = subprocess.Popen(["sh", "-c", script], env=env, stderr=subprocess.PIPE)
    try:
        for _ in range(500):
            if os.path.exists(trace):
                break
            time.sleep(0.01)
        check(os.path.exists(trace), "run A made no trace")
        b = run_traced([program("leaker"), "30", size], trace)
        check(b.returncode == 0, f"run B: {b.returncode}")
        check(b.stderr == f"memtrace: {trace} is being written by another run; this run writes "
                          f"{trace}.1\n".encode(), f"run B said {b.stderr!r}")
        open(go, "w").close()
        check(a.wait(timeout=60) == 0, "run A failed")
        check(a.stderr.read() == b"", "run A printed something")
    finally:
        a.kill()
    pa = dump_summary(trace)["processes"]
    # run A: the shell, its sleeps, and the leaker it became
    check(pa[0]["origin"] == "root" and pa[-1]["exe"] == program("leaker"),
          f"run A's trace: {[(p['origin'], p['exe']) for p in pa]}")
    check(host(pa[-1])["live_blocks"] == 5, f"run A's leaker: {host(pa[-1])}")
    (pb,) = dump_summary(trace + ".1")["processes"]
    # sampled, the 31st (leaker's array of 240 bytes, freed) is an estimate: at least the 30
    allocations = host(pb)["allocations"]
    check(host(pb)["live_blocks"] == 15 and (allocations >= 30 if SAMPLED else allocations == 31),
          f"run B's leaker: {host(pb)}")
    check(not os.path.exists(trace + ".old"), "a live trace was moved aside")
    # a later run, with nothing live, moves the finished trace aside as before
    r = run_traced([program("leaker"), "4", "10"], trace)
    check(r.returncode == 0 and r.stderr == b"", f"third run: {r.stderr!r}")
    check(dump_summary(trace + ".old")["processes"][0]["exe"] == "/usr/bin/dash",
          "run A's trace is not NAME.old")
    shutil.rmtree(d)


def stopped_trace(trace, extra=None, preexec=None, expect=b""):
    """Runs leaker with many events (a trace of about 6 MB: more than the 2 MiB
    disk or the 1 MiB file size limit of the tests that use it; sampled, see
    harness.FILL_SAMPLING); the program's
    output and status must be untouched, and the trace must read to where it
    stopped."""
    argv = [program("leaker"), "1000000", "24"]
    plain = run(argv)
    env = dict(os.environ, LD_PRELOAD=LIB, MEMTRACE_OUTPUT=trace, **FILL_SAMPLING, **(extra or {}))
    env.pop("MEMTRACE_TREE", None)
    traced = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=preexec, timeout=300)
    check((traced.returncode, traced.stdout) == (plain.returncode, plain.stdout),
          f"traced: {traced.returncode} {traced.stdout!r}, plain: {plain.returncode} {plain.stdout!r}")
    check(traced.stderr == expect, f"stderr {traced.stderr!r}, expected {expect!r}")
    out = run([BIN, "dump", "--summary", "--json", trace])
    check(out.returncode == 0, f"the stopped trace does not read: {out.stderr!r}")
    import json
    (p,) = json.loads(out.stdout)["processes"]
    check(p["end"] == "stopped", f"the process ends {p['end']!r}, expected 'stopped'")
    h = host(p)
    check(0 < h["allocations"] < 1000001, f"{h['allocations']} allocations read")
    rep = run([BIN, "report", "--json", trace])
    check(rep.returncode == 0, f"report of the stopped trace: {rep.stderr!r}")
    (rp,) = json.loads(rep.stdout)["processes"]
    check((rp["end"], rp["stop_errno"]) == ("stopped", p["stop_errno"]),
          f"report: end {rp['end']} stop_errno {rp['stop_errno']}")
    text = run([BIN, "report", trace]).stdout.decode()
    check("tracing stopped: " in text and "the program ran on" in text, f"report text: {text[:300]}")
    return p


def test_full_ext4():
    """posix_fallocate on ext4 can fail after extending the file in part."""
    d = workdir()
    img, mnt = os.path.join(d, "img"), os.path.join(d, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(2 << 20)
    check(run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", img]).returncode == 0, "mkfs.ext4 failed")
    m = run(["mount", "-o", "loop", img, mnt])
    check(m.returncode == 0, f"cannot mount a loop ext4 image: {m.stderr!r}")
    try:
        if SAMPLED:  # a file of the disk's free room but FILL_ROOM
            st = os.statvfs(mnt)
            with open(os.path.join(mnt, "filler"), "wb") as f:
                f.write(bytes(st.f_bavail * st.f_frsize - FILL_ROOM))
        p = stopped_trace(os.path.join(mnt, "t.bin"),
                          expect=b"memtrace: cannot extend the trace file: No space left on device; "
                                 b"tracing stops, the program runs on\n")
        check(p["stop_errno"] == 28, f"the stop record's errno is {p.get('stop_errno')}")
    finally:
        run(["umount", mnt])
        shutil.rmtree(d)


def test_file_size_limit():
    import resource
    d = workdir()
    size = FILL_ROOM if SAMPLED else 1 << 20

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    p = stopped_trace(os.path.join(d, "t.bin"), preexec=limit,
                      expect=b"memtrace: the trace would pass the file size limit (ulimit -f); "
                             b"tracing stops, the program runs on\n")
    check(p["stop_errno"] == 27, f"the stop record's errno is {p.get('stop_errno')}")
    check(os.path.getsize(os.path.join(d, "t.bin")) <= size, "the trace passed the limit")
    shutil.rmtree(d)


def test_short_processes_cost_little():
    """200 runs of /bin/true from a traced shell (and the seq that counts them):
    each process a few KiB."""
    d = workdir()
    trace = os.path.join(d, "t.bin")
    r = run_traced(["bash", "-c", "for i in $(seq 200); do /bin/true; done"], trace)
    check(r.returncode == 0 and r.stderr == b"", f"traced run: {r.returncode} {r.stderr!r}")
    procs = dump_summary(trace)["processes"]
    pids = {p["pid"] for p in procs}
    check(len(pids) == 202, f"{len(pids)} processes, expected bash, seq and 200 children")
    st = os.stat(trace)
    per = st.st_size / len(pids)
    disk = st.st_blocks * 512 / len(pids)
    check(per < 20 * 1024 and disk < 20 * 1024,
          f"{per:.0f} bytes of trace ({disk:.0f} on disk) per process, expected under 20 KiB")
    shutil.rmtree(d)


def test_setenv_no_unknown_free():
    d = workdir()
    trace = os.path.join(d, "t.bin")
    r = run_traced([program("setenv-twice")], trace)
    check(r.returncode == 0 and r.stdout == b"1 2\n", f"traced run: {r.returncode} {r.stdout!r}")
    (p,) = dump_summary(trace)["processes"]
    check(host(p)["unknown_frees"] == 0, f"unknown frees: {host(p)['unknown_frees']}")
    shutil.rmtree(d)


def test_not_ours_said_once():
    """A traced shell whose exec'd programs bring their own malloc: said once."""
    d = workdir()
    own = program("own-allocator")
    argv = ["sh", "-c", f"{own}; {own}; {own}"]
    plain = run(argv)
    traced = run_traced(argv, os.path.join(d, "t.bin"))
    check(traced.stdout == plain.stdout, f"{argv}: output differs")
    check(traced.stderr == b"memtrace: the program's own malloc comes before memtrace's; "
                           b"nothing to trace\n", f"{argv}: said {traced.stderr!r}")
    shutil.rmtree(d)


def test_low_descriptors_left_free():
    """The program's next descriptor is the one it gets untraced: memtrace
    (and libunwind, whose memory checks use a pipe) keep nothing below."""
    d = workdir()
    code = ("import os\n"
            "fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(4)]\n"
            "print(fds)\n"
            "os.closerange(3, 1024)\n"
            "print(os.open('/dev/null', os.O_RDONLY))\n")
    plain = run(["python3", "-c", code])
    for unwind in ("fast", "libunwind"):
        traced = run_traced(["python3", "-c", code], os.path.join(d, "t.bin"),
                            extra={"MEMTRACE_UNWIND": unwind})
        check(traced.stdout == plain.stdout and traced.returncode == plain.returncode == 0,
              f"MEMTRACE_UNWIND={unwind}: descriptors {traced.stdout!r}, untraced {plain.stdout!r}")
        (p,) = dump_summary(os.path.join(d, "t.bin"))["processes"]
        check(p["end"] == "exit" and host(p)["allocations"] > 1000, f"the trace: {p['end']} {host(p)}")
    shutil.rmtree(d)


def test_exit_from_a_signal_handler_inside_malloc():
    """_exit from a handler that interrupted malloc: no wait on glibc's
    arena lock (the exit sample's heap figures), the status as untraced."""
    d = workdir()
    for i in range(20):
        try:
            r = run_traced([program("signal-exit")], os.path.join(d, "t.bin"), timeout=20)
        except subprocess.TimeoutExpired:
            raise Failure(f"run {i}: the program hung in its exit")
        check(r.returncode == 3 and r.stderr == b"", f"run {i}: status {r.returncode} {r.stderr!r}")
        (p,) = dump_summary(os.path.join(d, "t.bin"))["processes"]
        check(p["end"] == "exit" and p["exit_status"] == 3, f"run {i}: end {p['end']}")
    shutil.rmtree(d)


main({
    "raw_clone_glibc": lambda: test_raw_clone("glibc"),
    "raw_clone_syscall": lambda: test_raw_clone("syscall"),
    "two_runs_one_name": test_two_runs_one_name,
    "full_ext4": test_full_ext4,
    "file_size_limit": test_file_size_limit,
    "short_processes_cost_little": test_short_processes_cost_little,
    "setenv_no_unknown_free": test_setenv_no_unknown_free,
    "not_ours_said_once": test_not_ours_said_once,
    "low_descriptors_left_free": test_low_descriptors_left_free,
    "exit_from_a_signal_handler_inside_malloc": test_exit_from_a_signal_handler_inside_malloc,
})
