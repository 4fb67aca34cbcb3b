# SPDX-License-Identifier: MIT
"""samples/cgroup-oom under a 64 MiB cgroup limit: the kernel's OOM killer
ends it with SIGKILL, and the report's post-mortem names the cause: the last
RSS close to the limit, the live set at death (k responses of 1 MiB and
their cache entries) and cache's growth by build_response's stack."""
import os
import re
import shutil
import signal
import subprocess

from oomtest import BIN, MiB, check, diagnosis, functions, main, memory_cgroup, names, near, program, report, run, traced_env, workdir

LIMIT = 64 * MiB


def alloc_times_ms(trace, size):
    """The times (ms from the process's start) of the trace's allocations of size bytes."""
    out = run([BIN, "dump", trace])
    check(out.returncode == 0, f"memtrace dump failed: {out.stderr.decode()}")
    return [float(m.group(1)) for m in re.finditer(rf"t=\+([0-9.]+)ms ALLOC \w+ \S+ size {size} ",
                                                   out.stdout.decode())]


def test_killed_at_the_limit():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    with memory_cgroup(LIMIT) as enter:
        p = subprocess.Popen([program("cgroup-oom")], env=traced_env(trace), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, preexec_fn=enter)
        check(p.stdout.readline() == b"ready\n", f"cgroup-oom did not start: {p.stderr.read()!r}")
        status = p.wait(timeout=120)
    check(status == -signal.SIGKILL, f"expected the OOM killer's SIGKILL, got {status}")
    (proc,) = report(trace)["processes"]
    check(proc["end"] == "killed", f"end is {proc['end']}, not killed")

    pm = diagnosis(proc, "post_mortem")
    check(pm is not None, "no post_mortem for a killed process")
    check(pm["cgroup_max"] == LIMIT, f"post_mortem cgroup_max {pm['cgroup_max']}, not {LIMIT}")
    # RSS counts shared file pages (libc, ...) charged to other groups, so it may pass the limit a little
    check(0.75 * LIMIT <= pm["last_rss"] <= 1.1 * LIMIT, f"the last RSS {pm['last_rss']} is not near the 64 MiB limit")
    check(pm["cgroup_current"] >= 0.9 * LIMIT, f"the cgroup's last use {pm['cgroup_current']} is not at the limit")

    # live at death: k responses of 1 MiB and a cache entry (24 bytes) for each
    # but perhaps the last, whose memset the kill interrupted
    host = proc["memories"]["host"]
    live = pm["live_at_death"]["host"]
    k = live // MiB
    check(k >= 40 and live == host["leaked_bytes"], f"live at death {live}, leaked {host['leaked_bytes']}")
    check(live in (k * MiB + k * 24, k * MiB + (k - 1) * 24), f"live at death {live} is not {k} x (1 MiB + 24)")

    growing = pm["growing"]
    check(growing, "post_mortem.growing is empty")
    top = growing[0]
    check(top["kind"] == "host" and names(top["stack"], "build_response"),
          f"the top growing stack is not build_response's: {functions(top['stack'])}")
    # The rise is what was observed from the floor where it began to death: j of the k responses.
    # It begins from nothing unless an eighth of the life passed with no response made (the
    # floors must rise through every eighth: on a loaded machine a 1 s stall made the rise the
    # 59 responses after it); either way it spans the later half at least.
    times = alloc_times_ms(trace, MiB)
    check(len(times) == k, f"the dump shows {len(times)} allocations of 1 MiB, not {k}")
    out = run([BIN, "dump", trace])
    life_ms = max(float(t) for t in re.findall(rb"t=\+([0-9.]+)ms", out.stdout))
    j = top["grown_bytes"] // MiB
    check(top["grown_bytes"] == j * MiB and k / 2 <= j <= k,
          f"build_response's grown_bytes {top['grown_bytes']} is not a whole number of the "
          f"{k} responses, at least half of them")
    stalled = max(b - a for a, b in zip(times, times[1:])) >= life_ms / 8
    check(j == k or stalled, f"the rise is {j} of {k} responses, though none stalled an eighth "
                             f"of the life ({life_ms} ms)")
    # its rate: no faster than over the span of its j allocations themselves, no slower than over
    # the process's whole life (both from the trace's own records)
    fastest = j * MiB / ((times[-1] - times[k - j]) / 1e3)
    slowest = j * MiB / (life_ms / 1e3)
    check(slowest <= top["bytes_per_second"] <= fastest,
          f"build_response's bytes_per_second {top['bytes_per_second']} is not within "
          f"[{slowest}, {fastest}]")
    shutil.rmtree(d)


main({"killed_at_the_limit": test_killed_at_the_limit})
