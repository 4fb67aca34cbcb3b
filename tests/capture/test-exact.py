# SPDX-License-Identifier: MIT
"""Exact figures: programs with known allocations, traced, give the bytes
and blocks live at exit that the program left, and the same figures that
valgrind reports as "in use at exit" for the same program.

valgrind runs with --run-libc-freeres=no --run-cxx-freeres=no: like
memtrace, it then leaves libc's and libstdc++'s exit-time clean-up out. It
runs the program with libmemtrace.so loaded but switched off
(MEMTRACE_ENABLE=0), so that both see the same process: every loaded
library with thread-local storage makes the block glibc allocates for each
new thread's TLS table (dtv) 16 bytes larger."""
import os
import re
import shutil

from harness import LIB, check, dump_summary, main, program, run, run_traced, workdir

VALGRIND = ["valgrind", "--run-libc-freeres=no", "--run-cxx-freeres=no", "--trace-children=yes"]


def valgrind_in_use(argv):
    """{pid: (command, bytes, blocks)} for every process valgrind ran; the
    command is None for a forked child that did not exec."""
    env = dict(os.environ, LD_PRELOAD=LIB, MEMTRACE_ENABLE="0")
    out = run(VALGRIND + argv, env=env, timeout=900).stderr.decode()
    commands = {int(p): c.split()[0] for p, c in re.findall(r"==(\d+)== Command: (.*)", out)}
    use = {}
    for pid, nbytes, blocks in re.findall(r"==(\d+)==\s+in use at exit: ([\d,]+) bytes in ([\d,]+) blocks", out):
        use[int(pid)] = (commands.get(int(pid)), int(nbytes.replace(",", "")), int(blocks.replace(",", "")))
    check(use, f"valgrind printed no 'in use at exit':\n{out[-3000:]}")
    return use


def traced(argv):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced(argv, trace)
    check(r.returncode == 0, f"{argv} exited {r.returncode} under the preload: {r.stderr.decode()}")
    summary = dump_summary(trace)
    shutil.rmtree(d)
    return summary["processes"]


def host(p):
    h = p["memories"].get("host", {})
    return (h.get("live_bytes", 0), h.get("live_blocks", 0))


def mmap(p):
    m = p["memories"].get("mmap", {})
    return (m.get("live_bytes", 0), m.get("live_blocks", 0))


def only(processes):
    check(len(processes) == 1, f"expected one process, got {len(processes)}")
    check(processes[0]["end"] == "exit", f"the process did not end cleanly: {processes[0]['end']}")
    return processes[0]


def test_every_interposed_function():
    prog = program("every-function")
    p = only(traced([prog]))
    check(host(p) == (10504, 12), f"host live at exit {host(p)}, the program leaves (10504, 12)")
    check(mmap(p) == (524288, 1), f"mmap live at exit {mmap(p)}, the program leaves (524288, 1)")
    (vg,) = valgrind_in_use([prog]).values()
    # valgrind 3.19 does not intercept pvalloc: its one block of 8192 bytes is
    # invisible to valgrind (tests/capture/programs/every-function.c)
    check((vg[1] + 8192, vg[2] + 1) == host(p),
          f"valgrind in use {vg[1:]} + the pvalloc block != memtrace {host(p)}")


def test_eight_threads_cross_thread_frees():
    prog = program("threads")
    p = only(traced([prog]))
    (vg,) = valgrind_in_use([prog]).values()
    check(host(p) == vg[1:], f"memtrace live at exit {host(p)} != valgrind in use {vg[1:]}")
    # the program's own part: 8 kept blocks of 16 + 8k bytes, k = 0..7
    check(host(p)[0] >= 352 and host(p)[1] >= 8, f"fewer than the program's 352 bytes in 8 blocks: {host(p)}")


def by_role(processes, key_pid, key_ppid):
    """root, its child, its grandchild: the same roles in two runs with other pids."""
    pids = {key_pid(p) for p in processes}
    root = [p for p in processes if key_ppid(p) not in pids]
    check(len(root) == 1, f"not one root process: {processes}")
    child = [p for p in processes if key_ppid(p) == key_pid(root[0])]
    check(len(child) == 1, f"not one child: {processes}")
    grand = [p for p in processes if key_ppid(p) == key_pid(child[0])]
    return root[0], child[0], grand


def test_fork_and_exec():
    argv = [program("fork-exec"), program("leaker")]
    procs = traced(argv)
    # the forked grandchild is replaced by exec: keep the program it became
    procs = [p for p in procs if p["end"] != "exec"]
    root, child, grand = by_role(procs, lambda p: p["pid"], lambda p: p["ppid"])
    check(len(grand) == 1, f"expected one exec'd grandchild: {procs}")
    check(host(root) == (333, 3), f"parent live {host(root)}, it leaves (333, 3)")
    check(host(child) == (666, 4), f"forked child live {host(child)}, it leaves (666, 4)")
    check(host(grand[0]) == (1332, 4), f"exec'd grandchild live {host(grand[0])}, it leaves (1332, 4)")
    check(child["origin"] == "fork" and grand[0]["origin"] == "exec",
          f"origins {child['origin']}, {grand[0]['origin']}")
    # valgrind names the program of the root and of the exec'd grandchild;
    # the forked child, which did not exec, is the one without a command
    vg = {v[0]: v[1:] for v in valgrind_in_use(argv).values()}
    check(set(vg) == {argv[0], argv[1], None}, f"valgrind's processes: {vg}")
    check(host(root) == vg[argv[0]], f"parent: memtrace {host(root)}, valgrind {vg[argv[0]]}")
    check(host(child) == vg[None], f"child: memtrace {host(child)}, valgrind {vg[None]}")
    check(host(grand[0]) == vg[argv[1]], f"grandchild: memtrace {host(grand[0])}, valgrind {vg[argv[1]]}")


def test_cxx_new_delete():
    prog = program("cxx-new-delete")
    p = only(traced([prog]))
    (vg,) = valgrind_in_use([prog]).values()
    check(host(p) == vg[1:], f"memtrace live at exit {host(p)} != valgrind in use {vg[1:]}")
    check(host(p)[0] >= 428 and host(p)[1] >= 4, f"fewer than the program's 428 bytes in 4 blocks: {host(p)}")


main({
    "every_interposed_function": test_every_interposed_function,
    "eight_threads_cross_thread_frees": test_eight_threads_cross_thread_frees,
    "fork_and_exec": test_fork_and_exec,
    "cxx_new_delete": test_cxx_new_delete,
})
