# SPDX-License-Identifier: MIT
"""The ring (memtrace run --ring): a run of churn-leak kept within its size
reports what a full trace of the same run reports (allocations, bytes,
peak, leaks at exit by stack; the growing stack, over the window it kept),
and a run the OOM killer
ends in a cgroup leaves its live set at death, block for block by stack.

RING_ALLOCATIONS and RING_SIZE change the run (docs/testing.md: the
acceptance run by hand is 50 million allocations in 64 MiB)."""
import os
import re
import signal
import subprocess

from oomtest import BIN, MiB, check, functions, main, memory_cgroup, program, report, run, workdir

ALLOCATIONS = int(os.environ.get("RING_ALLOCATIONS", "3000000"))
RING = int(os.environ.get("RING_SIZE", str(16 * MiB)))
# the pace: each block filled and read back this many times, so that the program allocates
# no faster than the consumer replays on a loaded machine (docs/performance.md, The ring)
WORK = os.environ.get("RING_WORK", "8")
# the pace of the runs that keep 4.6 MiB of stack definitions, whose ring has little room left
# for the consumer to fall behind in: at WORK, beside another test on two cores, it fell behind
# by 128 KiB (too_small's suggested size) and 768 KiB (many_stacks) in CI runs
SLOW = {"CHURN_WORK": str(2 * int(WORK))}
HEADER = 4096
# the start-up stacks' runs: a live set (the leak) that grows with the run would need a larger
# ring at RING_ALLOCATIONS=50000000 (the consumer says so: 18M), so these sizes are fixed
STACKS_RUN = 3000000


def memtrace_run(trace, argv, ring=None, env=None, **kw):
    opts = ["--ring", str(RING if ring is True else ring)] if ring else []
    e = dict(os.environ, MEMTRACE_REACHABILITY="0", CHURN_WORK=WORK)
    e.update(env or {})
    return subprocess.Popen([BIN, "run", "-o", trace] + opts + ["--"] + argv, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def by_function(stacks, function):
    """(bytes, blocks) of the stacks that name function."""
    rows = [s for s in stacks if function in functions(s)]
    return sum(s["bytes"] for s in rows), sum(s["blocks"] for s in rows)


def the_process(trace):
    (proc,) = report(trace)["processes"]
    return proc


def full_and_ring(argv, ring_size=True, env=None):
    """argv run twice, in full and in the ring: {"full": (trace, stderr), "ring": ...}."""
    d = workdir()
    runs = {}
    for name, ring in (("full", False), ("ring", ring_size)):
        trace = os.path.join(d, name + ".bin")
        p = memtrace_run(trace, argv, ring, env)
        _, err = p.communicate(timeout=1800)
        check(p.returncode == 0, f"{name}: memtrace run failed: {err.decode()}")
        runs[name] = (trace, err.decode())
    return runs


def within(runs, ring_size):
    """The ring's trace kept within its size, as the run said: (full, ring) processes."""
    ring_trace, ring_err = runs["ring"]
    size = os.path.getsize(ring_trace)
    check(size <= ring_size + HEADER,
          f"the ring's trace is {size} bytes, past {ring_size} + its header; run said: {ring_err}")
    check("kept the trace within its size" in ring_err, f"memtrace run said: {ring_err}")
    return the_process(runs["full"][0]), the_process(ring_trace)


def same_totals(full, ring, allocations=ALLOCATIONS):
    """The all-time figures and the stacks of leak and churn: the full trace's."""
    f, r = full["memories"]["host"], ring["memories"]["host"]
    for key in ("allocations", "frees", "bytes_allocated", "peak_bytes", "peak_blocks",
                "leaked_bytes", "leaked_blocks", "failed_allocations", "unknown_frees",
                "inherited_bytes"):
        check(f[key] == r[key], f"host {key}: full {f[key]}, ring {r[key]}")
    check(f["allocations"] >= allocations, f"{f['allocations']} allocations, not {allocations}")
    for what in ("leak_stacks", "peak_stacks"):
        for function in ("leak", "churn"):
            a, b = by_function(f[what], function), by_function(r[what], function)
            check(a == b, f"{what} of {function}: full {a}, ring {b}")
    leaks = allocations // 1000
    check(by_function(r["leak_stacks"], "leak")[1] == leaks,
          f"the ring's leak stack holds {by_function(r['leak_stacks'], 'leak')}, not {leaks} blocks")


def test_same_as_full():
    runs = full_and_ring([program("churn-leak"), str(ALLOCATIONS)])
    ring_trace, ring_err = runs["ring"]
    full_trace, _ = runs["full"]
    full, ring = within(runs, RING)
    size = os.path.getsize(ring_trace)
    # chunks were reused: the run says how many (the full trace is about 35 MB at 3M
    # allocations in short records, not many times 16 MiB: its size says little)
    written_again = re.search(r"(\d+) chunks written again", ring_err)
    check(written_again and int(written_again.group(1)) > 0, f"memtrace run said: {ring_err}")
    check(os.path.getsize(full_trace) > size, "the full trace is not larger: nothing was reused")
    check(ring["window"]["start_ns"] > 0 and full["window"]["start_ns"] == 0,
          f"windows: ring {ring['window']}, full {full['window']}")
    # the samples are the window's: those the keyframe holds are not replayed again (the
    # sampler's chunks from before the window may all have been reused: test-keyframes holds
    # such a sample for certain)
    dump = subprocess.run([BIN, "dump", ring_trace], capture_output=True, text=True, check=True)
    def ns(ms, frac):
        return int(ms) * 1000000 + int(frac)

    # the dump's times are from the file's creation, the window's from the process's start
    started = ns(*re.search(r"t=\+(\d+)\.(\d{6})ms PROCESS", dump.stdout).groups())
    times = [ns(ms, frac) for ms, frac in re.findall(r"t=\+(\d+)\.(\d{6})ms SAMPLE", dump.stdout)]
    in_window = sum(t >= started + ring["window"]["start_ns"] for t in times)
    samples = ring["diagnosis"]["memory_over_time"]["samples"]
    check(0 < in_window <= len(times) and samples == in_window,
          f"{samples} samples in the report, {in_window} of the trace's {len(times)} in its window")

    same_totals(full, ring)
    growth = {}
    for name, proc in (("full", full), ("ring", ring)):
        rows = [g for g in proc["diagnosis"]["growth"] if "leak" in functions(g["stack"])]
        check(rows, f"{name}: the leak is not found growing: {proc['diagnosis']['growth']}")
        growth[name] = rows[0]
    # growth is the window's (docs/architecture.md, The ring): the same end, a later start
    check(growth["full"]["end_bytes"] == growth["ring"]["end_bytes"],
          f"growth end: full {growth['full']['end_bytes']}, ring {growth['ring']['end_bytes']}")
    check(growth["ring"]["from_bytes"] >= growth["full"]["from_bytes"],
          f"growth from: full {growth['full']['from_bytes']}, ring {growth['ring']['from_bytes']}")


def test_many_stacks():
    """A start-up that leaves many stack definitions (as a torch import leaves 135 MB), which
    the ring keeps as long as the process lives, and each round's keyframes name: the rounds
    come as often as the room that is left needs, and the trace stays within its size."""
    runs = full_and_ring([program("churn-leak"), str(STACKS_RUN)], 14 * MiB,
                         dict(SLOW, CHURN_STACKS="16"))
    full, ring = within(runs, 14 * MiB)
    check(ring["window"]["keyframe"], f"the ring did not roll over: {ring['window']}")
    same_totals(full, ring, STACKS_RUN)
    stacks = len(re.findall(r" STACK ", subprocess.run([BIN, "dump", runs["ring"][0]],
                            capture_output=True, text=True, check=True).stdout))
    check(stacks > 1 << 16, f"the ring's trace defines {stacks} stacks, not the start-up's 65,536")


def test_too_small():
    """A ring too small for the definitions it keeps (4.6 MiB of them in 4 MiB) grows past its
    size, loses nothing, says why and what size would have held it; and that size holds it."""
    env = {"CHURN_STACKS": "16"}
    runs = full_and_ring([program("churn-leak"), str(STACKS_RUN)], 4 * MiB, env)
    ring_trace, err = runs["ring"]
    said = re.search(r"the ring grew (\d+) bytes past its size, nothing lost: the stack "
                     r"definitions it keeps \(([\d.]+) MiB\).* --ring (\d+)M would have held them",
                     err)
    check(said, f"memtrace run said: {err}")
    past, kept, suggested = int(said.group(1)), float(said.group(2)), int(said.group(3))
    # a claim past the size starts where the last one within it ended, short of the size
    check(4 * MiB + HEADER < os.path.getsize(ring_trace) <= 4 * MiB + HEADER + past,
          f"{os.path.getsize(ring_trace)} bytes, {past} said past 4 MiB")
    check(kept > 4, f"the definitions kept are {kept} MiB")
    same_totals(the_process(runs["full"][0]), the_process(ring_trace), STACKS_RUN)
    trace = os.path.join(workdir(), "suggested.bin")
    p = memtrace_run(trace, [program("churn-leak"), str(STACKS_RUN)], suggested * MiB,
                     dict(env, **SLOW))
    _, err = p.communicate(timeout=1800)
    check(p.returncode == 0 and os.path.getsize(trace) <= suggested * MiB + HEADER,
          f"--ring {suggested}M: {os.path.getsize(trace)} bytes; run said: {err.decode()}")


def test_forked():
    """Each process its own live set, a forked child from its parent's: every instance's
    figures are the full trace's, whether its window starts at a keyframe or not."""
    runs = full_and_ring([program("fork-churn"), str(ALLOCATIONS)])
    procs = {name: report(trace)["processes"] for name, (trace, _) in runs.items()}
    check(len(procs["full"]) == 4 == len(procs["ring"]), f"{len(procs['ring'])} processes")
    check(any(p["origin"] == "fork" and p["window"]["keyframe"] for p in procs["ring"]),
          "no forked child starts from a keyframe: the ring did not roll over a fork")
    for f, r in zip(procs["full"], procs["ring"]):
        a, b = f["memories"]["host"], r["memories"]["host"]
        for key in ("allocations", "frees", "bytes_allocated", "peak_bytes", "peak_blocks",
                    "leaked_bytes", "leaked_blocks", "inherited_bytes", "inherited_blocks",
                    "unknown_frees"):
            check(a[key] == b[key], f"{f['origin']} {f['instance']} {key}: full {a[key]}, ring {b[key]}")
    check(procs["ring"][1]["memories"]["host"]["inherited_blocks"] > 1000, "the first child inherited nothing")


def test_sampled():
    """Sampled mode in a ring (malloc and free in short records, each sampled block the
    consumer keeps with its weight): the same seed samples the same blocks in both runs, and
    the estimated bytes are the full trace's to the byte. Block counts are not compared: a
    block's count is rounded at random by its address and time."""
    env = {"MEMTRACE_SAMPLING": "256", "MEMTRACE_SEED": "7"}
    # a sampled trace is about a third of a full one: a smaller ring, so that it rolls over
    runs = full_and_ring([program("churn-leak"), str(ALLOCATIONS)], 4 * MiB, env)
    full, ring = (the_process(runs[name][0]) for name in ("full", "ring"))
    check(ring["window"]["keyframe"] and not full["window"]["keyframe"],
          f"windows: ring {ring['window']}, full {full['window']}")
    check(ring["sampling"]["interval_bytes"] == full["sampling"]["interval_bytes"] == 256,
          f"sampling: {ring['sampling']}")
    f, r = full["memories"]["host"], ring["memories"]["host"]
    for key in ("bytes_allocated", "peak_bytes", "leaked_bytes", "unknown_frees"):
        check(f[key] == r[key], f"host {key}: full {f[key]}, ring {r[key]}")
    # unsampled, each allocation but the leaks' has its free: some 2 x ALLOCATIONS events
    check(full["events"] < ALLOCATIONS, f"{full['events']} events: not sampled")
    a, b = by_function(f["leak_stacks"], "leak"), by_function(r["leak_stacks"], "leak")
    check(a[0] == b[0], f"the leak's bytes: full {a}, ring {b}")


def test_pairs():
    """Temporaries, which the consumer applies a malloc and its free at once: not the one
    that makes the peak, nor one whose free comes after another thread's new peak, nor a
    sampled one (its weight is drawn); the ring rolls over them all."""
    sampled = {"MEMTRACE_SAMPLING": "256", "MEMTRACE_SEED": "7"}
    for mode, env, peak in (("peak", {}, ["peak_pair"]),
                            ("interleave", {}, ["interleave_first", "interleave_second"]),
                            ("peak", sampled, [])):
        runs = full_and_ring([program("pairs"), str(ALLOCATIONS), mode],
                             4 * MiB if env else True, env)
        full, ring = (the_process(runs[name][0]) for name in ("full", "ring"))
        what = f"{mode}{' sampled' if env else ''}"
        check(ring["window"]["keyframe"], f"{what}: the ring did not roll over: {ring['window']}")
        f, r = full["memories"]["host"], ring["memories"]["host"]
        keys = ["bytes_allocated", "peak_bytes", "leaked_bytes", "unknown_frees"]
        if not env:
            keys += ["allocations", "frees", "peak_blocks"]
        for function in peak:
            a, b = by_function(f["peak_stacks"], function), by_function(r["peak_stacks"], function)
            check(a[1] == 1, f"{what}: {function} holds {a} at the full trace's peak")
            check(a == b, f"{what}: peak_stacks of {function}: full {a}, ring {b}")
        for key in keys:
            check(f[key] == r[key], f"{what}: host {key}: full {f[key]}, ring {r[key]}")


def hold_until_killed(ring, cgroup):
    """churn-leak, then 1 MiB blocks until the OOM killer ends it: (trace, blocks it said it held)."""
    d = workdir()
    trace = os.path.join(d, ("ring" if ring else "full") + ".bin")
    rd, wr = os.pipe()
    p = memtrace_run(trace, [program("churn-leak"), str(ALLOCATIONS // 10), "-1"], ring,
                     env={"CHURN_CGROUP": cgroup, "CHURN_FD": str(wr)}, pass_fds=(wr,))
    os.close(wr)
    held = 0
    while True:
        got = os.read(rd, 4)
        if not got:
            break
        held = int.from_bytes(got, "little")
    os.close(rd)
    p.communicate(timeout=600)
    check(p.returncode == -signal.SIGKILL, f"expected the OOM killer's SIGKILL, got {p.returncode}")
    return trace, held


def test_oom_killed():
    with memory_cgroup(64 * MiB) as enter:
        procs = {}
        for ring in (False, True):
            trace, held = hold_until_killed(ring, enter.procs)
            proc = the_process(trace)
            check(proc["end"] == "killed", f"end is {proc['end']}")
            procs[ring] = (proc, held)
    leaks = ALLOCATIONS // 10 // 1000
    for ring, (proc, held) in procs.items():
        host = proc["memories"]["host"]
        leak, hold, churn = (by_function(host["leak_stacks"], f) for f in
                             ("leak", "hold_until_killed", "churn"))
        check(leak[1] == leaks and leak == by_function(procs[False][0]["memories"]["host"]["leak_stacks"], "leak"),
              f"ring={ring}: the leak at death is {leak}")
        check(churn == (0, 0), f"ring={ring}: churn's blocks live at death: {churn}")
        # the kill came in the memset of the next block, or in its malloc
        check(hold[1] in (held, held + 1) and hold[0] == hold[1] * MiB,
              f"ring={ring}: {hold} held at death, the program said {held} blocks")
        check(host["leaked_blocks"] == leak[1] + hold[1], f"ring={ring}: {host['leaked_blocks']} blocks live at death")


main({"same_as_full": test_same_as_full, "many_stacks": test_many_stacks,
      "too_small": test_too_small, "forked": test_forked, "sampled": test_sampled,
      "pairs": test_pairs,
      "oom_killed": test_oom_killed})
