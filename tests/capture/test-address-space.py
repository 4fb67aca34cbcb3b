# SPDX-License-Identifier: MIT
"""Address space: what memtrace reserves for itself comes out of the program's
RLIMIT_AS, so it must be small and taken only as needed; and the stack table,
which starts small, grows without changing an id once handed out."""
import json
import os
import re
import resource
import shutil
import subprocess
from collections import Counter, defaultdict

from harness import BIN, LIB, check, main, program, run, run_traced, traced_env, workdir

BLOCKS = 48
BLOCK = (1 << 20) + 1
# memtrace's own reservations for a one-thread program (the stack table, the
# rule table, the thread's scratch area and trace chunk, the sampler's stack,
# the file header) must fit in this much address space above what the same
# program takes with libmemtrace.so and its libraries loaded but switched off
# (MEMTRACE_ENABLE=0). The old capture took 9.3 MiB there (an 8 MiB stack
# table, a 512 KiB rule table, a 256 KiB chunk).
MARGIN_KB = 2048
LINE = re.compile(rb"^allocated (\d+) of (\d+) vmpeak_kb (\d+)$", re.M)


def run_limited(argv, env, kb):
    """argv under RLIMIT_AS = kb KiB."""
    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (kb * 1024, kb * 1024))
    return subprocess.run(argv, env=env, preexec_fn=set_limit, timeout=120,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def result(r, what):
    check(r.returncode == 0, f"{what} exited {r.returncode}: {r.stderr.decode()}")
    m = LINE.search(r.stdout)
    check(m, f"{what} printed no result line: {r.stdout!r}")
    return int(m[1]), int(m[3])


def report(trace):
    r = run([BIN, "report", "--json", trace])
    check(r.returncode == 0, f"memtrace report --json exited {r.returncode}: {r.stderr.decode()}")
    return json.loads(r.stdout)["processes"]


def test_small_rlimit_as():
    prog = program("address-space")
    off = dict(os.environ, LD_PRELOAD=LIB, MEMTRACE_ENABLE="0")
    got, base_kb = result(run([prog], env=off), "the program with memtrace off")
    check(got == BLOCKS, f"without a limit the program got {got} of {BLOCKS} blocks")
    limit_kb = base_kb + MARGIN_KB
    # untraced, every block fits under the limit, memtrace loaded or not
    bare = dict(os.environ)
    bare.pop("LD_PRELOAD", None)
    got, _ = result(run_limited([prog], bare, limit_kb), "the bare program")
    check(got == BLOCKS, f"untraced under RLIMIT_AS {limit_kb} KiB: {got} of {BLOCKS} blocks")
    got, _ = result(run_limited([prog], off, limit_kb), "memtrace off")
    check(got == BLOCKS, f"memtrace off under RLIMIT_AS {limit_kb} KiB: {got} of {BLOCKS} blocks")

    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_limited([prog], traced_env(trace), limit_kb)
    got, peak_kb = result(r, "the traced program")
    check(got == BLOCKS,
          f"traced under RLIMIT_AS {limit_kb} KiB ({MARGIN_KB} KiB above the untraced peak): "
          f"{got} of {BLOCKS} blocks; the traced peak without a limit is "
          f"{result(run_traced([prog], os.path.join(d, 'free.bin')), 'traced')[1] - base_kb} KiB "
          f"above the untraced one; stderr: {r.stderr.decode()}")
    check(not r.stderr, f"memtrace said something: {r.stderr.decode()}")
    (p,) = report(trace)
    host = p["memories"]["host"]
    check(host["failed_allocations"] == 0, f"{host['failed_allocations']} failed allocations")
    top = host["leak_stacks"][0]
    check((top["bytes"], top["blocks"]) == (BLOCKS * BLOCK, BLOCKS),
          f"the largest leak is {top['bytes']} bytes in {top['blocks']} blocks, "
          f"the program leaks {BLOCKS * BLOCK} in {BLOCKS}")
    check(any(f["function"] == "grab" for f in top["frames"]), f"not grab's stack: {top['frames']}")
    shutil.rmtree(d)


def test_small_failures_recorded():
    """Allocations that fail for want of address space are all recorded, in
    full and in sampled mode, where a small one passes memtrace's short path
    (mt_sample_pass) and its failure must still be: 100 asks of 64 KiB (under
    the exact threshold of 64 KiB sampling) with room for about half."""
    prog = program("address-space")
    off = dict(os.environ, LD_PRELOAD=LIB, MEMTRACE_ENABLE="0")
    _, base_kb = result(run([prog, "0"], env=off), "the program with memtrace off")
    for mode, extra in (("full", {}), ("sampled", {"MEMTRACE_SAMPLING": "64K", "MEMTRACE_SEED": "1"})):
        d = workdir()
        trace = os.path.join(d, "trace.bin")
        r = run_limited([prog, "100", "65536"], traced_env(trace, extra),
                        base_kb + MARGIN_KB + 3072)
        got, _ = result(r, f"{mode}: the traced program")
        check(0 < got < 100, f"{mode}: {got} of 100 blocks: the limit did not bite")
        check(not r.stderr, f"{mode}: memtrace said something: {r.stderr.decode()}")
        (p,) = report(trace)
        host = p["memories"]["host"]
        check(host["failed_allocations"] == 100 - got,
              f"{mode}: {host['failed_allocations']} failed allocations recorded, "
              f"the program saw {100 - got}")
        check(all(f["size"] == 65536 for f in host["failures"]), f"{mode}: {host['failures']}")
        shutil.rmtree(d)


STACK = re.compile(r"^\S+ pid \d+ tid \d+ STACK id (\d+) gen \d+ frames \d+ (.*)$", re.M)
ALLOC = re.compile(r"^\S+ pid \d+ tid \d+ t=\S+ ALLOC malloc \S+ size (\d+) stack (\d+)$", re.M)


def many_stacks(count, extra=None):
    """The dump's STACK records {id: frames} and its allocations {stack: [size]}."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced([program("many-stacks"), str(count)], trace, extra)
    check(r.returncode == 0, f"many-stacks exited {r.returncode}: {r.stderr.decode()}")
    out = run([BIN, "dump", trace])
    check(out.returncode == 0, f"memtrace dump exited {out.returncode}: {out.stderr.decode()}")
    text = out.stdout.decode()
    stacks = {}
    for sid, frames in STACK.findall(text):
        check(sid not in stacks, f"stack {sid} written twice")
        stacks[int(sid)] = frames
    allocs = defaultdict(list)
    for size, sid in ALLOC.findall(text):
        allocs[int(sid)].append(int(size))
    (p,) = report(trace)
    shutil.rmtree(d)
    return r.stderr.decode(), stacks, allocs, p


def program_stacks(stacks, allocs):
    """The program's stacks: stack i leaks 1 + i % 3 blocks of (1 + i % 3) * 8 bytes."""
    mine = {s: a for s, a in allocs.items() if s and set(a) <= {8, 16, 24} and len(a) <= 3}
    for s, a in mine.items():
        check(s in stacks, f"stack {s} has allocations but no STACK record")
        check(len(set(a)) == 1 and len(a) == a[0] // 8, f"stack {s}: allocations {a}, "
              "which no single stack of the program makes: two stacks share its id")
    return mine


def test_more_stacks_than_the_first_table():
    count = 50000
    err, stacks, allocs, p = many_stacks(count)
    check(not err, f"memtrace said something: {err}")
    mine = program_stacks(stacks, allocs)
    check(len(mine) == count, f"{len(mine)} stacks of the program, it has {count}")
    check(len({stacks[s] for s in mine}) == count, "two ids have the same frames")
    want = Counter(1 + i % 3 for i in range(count))
    check(Counter(len(a) for a in mine.values()) == want,
          f"stacks by allocations {Counter(len(a) for a in mine.values())}, want {want}")
    host = p["memories"]["host"]
    check(p["lost_stack_events"] == 0, f"{p['lost_stack_events']} events without a stack")
    # the program's stacks and the one of stdio's buffer
    check(host["leak_stacks_total"] == count + 1,
          f"{host['leak_stacks_total']} leaking stacks in the report, want {count + 1}")
    check(host["leaked_blocks"] == sum(1 + i % 3 for i in range(count)) + 1,
          f"{host['leaked_blocks']} leaked blocks")


def test_stack_table_limit():
    """MEMTRACE_STACK_TABLE_BITS=16 still means at most 3/4 of 2^16 stacks."""
    err, stacks, allocs, p = many_stacks(50000, {"MEMTRACE_STACK_TABLE_BITS": "16"})
    check(len(stacks) == 49152, f"{len(stacks)} STACK records, the table holds 49152")
    check(err.count("more than 49152 distinct stacks") == 1 and len(err.splitlines()) == 1,
          f"not one line about the full table: {err}")
    mine = program_stacks(stacks, allocs)
    check(len(mine) == 49152, f"{len(mine)} stacks of the program recorded, want 49152")
    # the first 49152 stacks are recorded, the rest and stdio's buffer have none
    want = sum(1 + i % 3 for i in range(49152, 50000)) + 1
    check(len(allocs[0]) == want, f"{len(allocs[0])} allocations without a stack, want {want}")


main({
    "small_rlimit_as": test_small_rlimit_as,
    "small_failures_recorded": test_small_failures_recorded,
    "more_stacks_than_the_first_table": test_more_stacks_than_the_first_table,
    "stack_table_limit": test_stack_table_limit,
})
