# SPDX-License-Identifier: MIT
"""The program's descriptors are its own (issue 10, defects 1 and 2): a
traced program that closes numbers twice, closes every number, or dup2s
onto any number gives the same output, files and return values as
untraced, and its trace stays readable with exact figures.

The sampler's part (double closes, shell pipelines, every wrapper's return
values) and the trace writer's part (the trace's own descriptor: close-all
by a loop, close_range, closefrom) are separate tests: the writer's are
named close_all_*.

With MEMTRACE_SAMPLING in the environment (capture-descriptors-sampled) the
same programs run in sampled mode, its short pass in front of glibc: the
same output, files and return values; the figures are estimates, each
within a quarter of the program's (hundreds of samples: the sampler's own
error is a few percent, docs/sampling.md), which a trace writer that lost
its descriptor would not reach."""
import os
import shutil

from harness import check, dump_summary, figure, main, program, run, run_traced, workdir

FAST = {"MEMTRACE_INTERVAL_MS": "1"}  # the sampler at its busiest


def traced_and_not(argv, extra=FAST, timeout=120, **kw):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    plain = run(argv, timeout=timeout, **kw)
    traced = run_traced(argv, trace, extra, timeout=timeout, **kw)
    return d, trace, plain, traced


def same_output(plain, traced, what):
    check(plain.returncode == 0, f"{what} untraced: {plain.returncode} {plain.stdout[-300:]!r}")
    check(traced.returncode == plain.returncode,
          f"{what} traced returned {traced.returncode}: {traced.stdout[-300:]!r} {traced.stderr[-300:]!r}")
    check(traced.stdout == plain.stdout,
          f"{what}: traced output differs: {traced.stdout[-300:]!r} vs {plain.stdout[-300:]!r}")


def host(trace):
    (proc,) = [p for p in dump_summary(trace)["processes"]]
    check(proc["end"] == "exit", f"the process's end is {proc['end']}")
    return proc["memories"]["host"], proc


def test_double_close_pipes():
    """10,000 pipes, each write end closed twice: no payload lost, no hang,
    every second close EBADF as untraced."""
    argv = [program("double-close"), "10000"]
    d, trace, plain, traced = traced_and_not(argv)
    same_output(plain, traced, "double-close")
    check(plain.stdout.endswith(b"ebadf 10000\n"), f"untraced: {plain.stdout!r}")
    h, proc = host(trace)
    check(figure(h["allocations"], 10000, True) and figure(h["frees"], 10000, True),
          f"{h['allocations']} allocations, {h['frees']} frees: not the program's 10,000")
    check(proc["last_sample"]["count"] > 0, "no sample in the trace")
    shutil.rmtree(d)


BASH_SCRIPT = r"""
log=$1
for i in $(seq 1 200); do
    exec 3<>"$log"
    echo "line $i" >&3
    exec 3>&-
    echo "$i" | cat
    echo "pipe $i" | tr a-z A-Z | cat
    exec 5>&-; exec 5>&-
    exec 4>/dev/null 4>&-; exec 4>&-
done
cat "$log"
"""


def test_bash_pipelines():
    """bash's redirections, double closes and pipelines: byte-identical output
    and file in every one of 4 traced runs (3 of 8 lost output before)."""
    d = workdir()
    plain_log = os.path.join(d, "plain.log")
    plain = run(["bash", "-c", BASH_SCRIPT, "bash", plain_log], timeout=120)
    check(plain.returncode == 0 and plain.stdout.count(b"\n") == 401,
          f"untraced bash: {plain.returncode} {plain.stderr[-300:]!r}")
    for n in range(4):
        log = os.path.join(d, f"traced{n}.log")
        trace = os.path.join(d, f"trace{n}.bin")
        traced = run_traced(["bash", "-c", BASH_SCRIPT, "bash", log], trace, FAST, timeout=120)
        check(traced.returncode == 0, f"run {n}: bash returned {traced.returncode}: {traced.stderr[-300:]!r}")
        check(traced.stdout == plain.stdout, f"run {n}: the output differs from untraced")
        check(open(log, "rb").read() == open(plain_log, "rb").read(), f"run {n}: the log differs")
        procs = dump_summary(trace)["processes"]
        check(len(procs) >= 400 and all(p["end"] in ("exit", "exec") for p in procs),
              f"run {n}: {len(procs)} processes, ends {sorted({p['end'] for p in procs})}")
    shutil.rmtree(d)


def test_wrappers_as_untraced():
    """close, dup2, dup3 and close_range on every number up to 1023 return
    what they return untraced, and the file written through the dups is the
    same; the trace keeps its samples to the end."""
    d = workdir()
    out_plain, out_traced = os.path.join(d, "plain.txt"), os.path.join(d, "traced.txt")
    trace = os.path.join(d, "trace.bin")
    plain = run([program("fd-games"), out_plain], timeout=120)
    traced = run_traced([program("fd-games"), out_traced], trace, FAST, timeout=120)
    same_output(plain, traced, "fd-games")
    check(b"1020 fine, 0 not" in plain.stdout, f"untraced fd-games: {plain.stdout!r}")
    check(open(out_traced, "rb").read() == open(out_plain, "rb").read(), "the file differs from untraced")
    h, proc = host(trace)
    check(figure(h["allocations"], 600, True),
          f"{h['allocations']} allocations: the program's 600 are not all there")
    check(proc["last_sample"]["count"] >= 10, f"{proc['last_sample']['count']} samples: the sampler stopped")
    shutil.rmtree(d)


def close_all(how):
    """Closes every descriptor (by how), opens its own file (fd 3), writes
    it while allocating 100,000 blocks: the file and output byte-identical,
    the trace's figures exact (the trace writer's own descriptor)."""
    def test():
        d = workdir()
        out_plain, out_traced = os.path.join(d, "plain.txt"), os.path.join(d, "traced.txt")
        trace = os.path.join(d, "trace.bin")
        plain = run([program("close-all"), how, out_plain], timeout=120)
        traced = run_traced([program("close-all"), how, out_traced], trace, FAST, timeout=120)
        same_output(plain, traced, f"close-all {how}")
        check(plain.stdout == b"fd 3 blocks 100000 bytes 3990400\n", f"untraced: {plain.stdout!r}")
        size = os.path.getsize(out_traced)
        check(open(out_traced, "rb").read() == open(out_plain, "rb").read(),
              f"the program's file differs from untraced ({size} bytes, not {os.path.getsize(out_plain)})")
        h, _ = host(trace)
        check(figure(h["allocations"], 100000) and figure(h["live_blocks"], 100000) and
              figure(h["live_bytes"], 3990400),
              f"the trace says {h['allocations']} allocations, {h['live_blocks']} live blocks of "
              f"{h['live_bytes']} bytes, not 100,000 of 3,990,400")
        shutil.rmtree(d)
    return test


main({
    "double_close_pipes": test_double_close_pipes,
    "bash_pipelines": test_bash_pipelines,
    "wrappers_as_untraced": test_wrappers_as_untraced,
    "close_all_loop": close_all("loop"),
    "close_all_range": close_all("range"),
    "close_all_from": close_all("from"),
})
