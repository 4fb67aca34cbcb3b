# SPDX-License-Identifier: MIT
"""A process killed with SIGKILL (by hand, and by the kernel's OOM killer at
a cgroup's memory limit) leaves a trace that memtrace reads to its last
record: every allocation made before the kill is there.

With MEMTRACE_SAMPLING in the environment (capture-killed-sampled) the same in
sampled mode, at an interval under which the blocks of 1000 bytes are
recorded exactly (harness.exact_above): every one must be there."""
import os
import re
import shutil
import signal
import subprocess
import time

from harness import BIN, check, dump_summary, exact_above, main, program, run, traced_env, workdir

CGROUP_V1 = "/sys/fs/cgroup/memory"


def start(argv, trace, preexec=None):
    p = subprocess.Popen(argv, env=traced_env(trace, exact_above(1000)), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=preexec)
    line = p.stdout.readline()
    if line != b"ready\n":
        p.kill()
        check(False, f"{argv} did not get ready: {line!r} {p.stderr.read()!r}")
    return p


def allocs_in_dump(trace, size):
    out = run([BIN, "dump", trace])
    check(out.returncode == 0, f"memtrace dump failed on the killed process's trace: {out.stderr.decode()}")
    return len(re.findall(rf"\bALLOC\b.*\bsize {size}\b", out.stdout.decode()))


def test_sigkill_leaves_every_allocation():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    p = start([program("alloc-then-die"), "5000", "1000"], trace)
    p.send_signal(signal.SIGKILL)
    check(p.wait() == -signal.SIGKILL, "the process was not killed")
    check(allocs_in_dump(trace, 1000) == 5000, "memtrace dump does not show the 5000 allocations")
    (proc,) = dump_summary(trace)["processes"]
    check(proc["end"] == "killed", f"end is {proc['end']}, not killed")
    host = proc["memories"]["host"]
    check((host["live_bytes"], host["live_blocks"]) == (5000 * 1000, 5000),
          f"live at death {host['live_bytes']} bytes in {host['live_blocks']} blocks, not 5000000 in 5000")
    shutil.rmtree(d)


def test_oom_killer_at_a_cgroup_limit():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    group = os.path.join(CGROUP_V1, f"memtrace-test-{os.getpid()}")
    os.mkdir(group)
    try:
        with open(os.path.join(group, "memory.limit_in_bytes"), "w") as f:
            f.write(str(64 << 20))

        def enter():
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

        p = start([program("alloc-then-die"), "100", "1000", "oom"], trace, preexec=enter)
        status = p.wait(timeout=120)
        check(status == -signal.SIGKILL, f"expected the OOM killer's SIGKILL, got {status}")
        (proc,) = dump_summary(trace)["processes"]
        check(proc["end"] == "killed", f"end is {proc['end']}, not killed")
        host = proc["memories"]["host"]
        # the 100 small blocks and k blocks of 1 MiB, k as many as fitted
        k = host["live_blocks"] - 100
        check(k >= 10 and host["live_bytes"] == 100 * 1000 + k * (1 << 20),
              f"live at death is not 100 x 1000 bytes + k x 1 MiB: {host}")
        check(allocs_in_dump(trace, 1000) == 100, "the 100 blocks of 1000 bytes are not all there")
        # the sampler saw the cgroup's limit, and RSS close to it, before the kill
        sample = proc["last_sample"]
        check(sample["cgroup_max"] == 64 << 20, f"the last sample's cgroup limit: {sample}")
        check(sample["rss"] > 32 << 20, f"the last sample's RSS is not near the limit: {sample}")
    finally:
        os.rmdir(group)
        shutil.rmtree(d)


main({
    "sigkill_leaves_every_allocation": test_sigkill_leaves_every_allocation,
    "oom_killer_at_a_cgroup_limit": test_oom_killer_at_a_cgroup_limit,
})
