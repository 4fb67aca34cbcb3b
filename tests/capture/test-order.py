# SPDX-License-Identifier: MIT
"""The order of two threads' events on one address. An allocation's time is
taken after it returned, behind an lfence, so it is never before the loads
that found its block free, and so never before the free that gave the block
back in another thread, whose time is taken before that free's stores. A
free's time is taken behind an lfence too, so it is never before the load
that gave it its pointer, and so never before the allocation another thread
handed over (mt.h, mt_now). ping-pong makes every allocation follow such a
free, and every free such an allocation, within a few hundred instructions,
a million times: with the free's time read unfenced, one free in about 5
million was timed before the allocation it freed (a run of 100,000 rounds
failed 1 time in 20 to 40, a run of a million 4 times in 20).

With MEMTRACE_SAMPLING in the environment (capture-order-sampled) the same in
sampled mode, at an interval under which ping-pong's blocks of 48 bytes are
all recorded (harness.exact_above): its traced halves and its set of sampled
addresses, which one thread fills and the other empties, keep the order."""
import os
import re
import shutil

from harness import BIN, check, exact_above, main, program, run, run_traced, workdir

ROUNDS = 1000000
EVENT = re.compile(r"^\S+ pid \d+ tid (\d+) t=\+([0-9.]+)ms (ALLOC|FREE) \w+ (0x[0-9a-f]+)", re.M)


def test_allocation_after_the_free_before_it():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    # no tcache and one arena: the main thread's malloc takes back the block
    # the other thread just freed
    tunables = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1",
                "MEMTRACE_REACHABILITY": "0", **exact_above(48)}
    out = run_traced([program("ping-pong"), str(ROUNDS)], trace, tunables)
    check(out.returncode == 0, f"ping-pong failed: {out.stderr.decode()}")
    reused = int(out.stdout.split()[1])
    check(reused > ROUNDS * 9 // 10, f"only {reused} of {ROUNDS} allocations took the freed block back")
    dump = run([BIN, "dump", trace])
    check(dump.returncode == 0, f"memtrace dump failed: {dump.stderr.decode()}")
    per_addr = {}
    for tid, t, kind, addr in EVENT.findall(dump.stdout.decode()):
        per_addr.setdefault(addr, []).append((float(t), kind != "FREE", tid, kind))
    # in time order (a free first at the same time), each address's events
    # alternate: an allocation timed before the free that gave its block
    # back comes before it, beside the allocation before that
    handed, wrong = 0, []
    for addr, events in per_addr.items():
        events.sort()
        for (t0, _, tid0, k0), (t1, _, tid1, k1) in zip(events, events[1:]):
            if k0 == k1:
                wrong.append((addr, k0, t0, k1, t1))
            elif k0 == "FREE" and tid0 != tid1:
                handed += 1
    check(handed >= reused, f"{handed} allocations after another thread's free, the program saw {reused}")
    check(not wrong, f"{len(wrong)} addresses out of order, e.g. {wrong[:3]} (event, ms, next event, ms)")
    shutil.rmtree(d)


main({"allocation_after_the_free_before_it": test_allocation_after_the_free_before_it})
