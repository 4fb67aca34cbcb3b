# SPDX-License-Identifier: MIT
"""memtrace's own stack walker gives exactly the stacks libunwind gives, for
a program whose frames are of every kind the walker meets
(programs/frames.c) and for a workload of 1000 call paths; where a return
address is not code (programs/bad-return.c) it ends the stack there, where
libunwind names the word as a frame."""
import os
import re
import shutil

from harness import BIN, check, main, program, run, run_traced, workdir


def stacks(trace):
    """The trace's stacks as tuples of (module file name, offset): the same
    in two runs whatever the load addresses."""
    out = run([BIN, "dump", trace])
    check(out.returncode == 0, f"memtrace dump failed: {out.stderr!r}")
    text = out.stdout.decode()
    segments = []
    for m in re.finditer(r'MODULE base (0x[0-9a-f]+) path "([^"]*)".*?segments \d+ (.*)', text):
        base = int(m.group(1), 16)
        for seg in re.finditer(r"\[vaddr (0x[0-9a-f]+) memsz (0x[0-9a-f]+)", m.group(3)):
            lo = base + int(seg.group(1), 16)
            segments.append((lo, lo + int(seg.group(2), 16), os.path.basename(m.group(2)), base))
    result = set()
    for m in re.finditer(r"STACK id \d+ gen \d+ frames \d+ ?(.*)", text):
        frames = []
        for a in m.group(1).split():
            a = int(a, 16)
            where = next(((name, a - base) for lo, hi, name, base in segments if lo <= a < hi), ("?", a))
            frames.append(where)
        result.add(tuple(frames))
    return result


def compare(argv):
    d = workdir()
    fast, slow = os.path.join(d, "fast.bin"), os.path.join(d, "libunwind.bin")
    check(run_traced(argv, fast).returncode == 0, "the traced run failed")
    check(run_traced(argv, slow, extra={"MEMTRACE_UNWIND": "libunwind"}).returncode == 0,
          "the traced run with libunwind failed")
    a, b = stacks(fast), stacks(slow)
    check(a == b, f"{len(a - b)} stacks only from memtrace's walker, e.g. {sorted(a - b)[:2]}; "
                  f"{len(b - a)} only from libunwind, e.g. {sorted(b - a)[:2]}")
    shutil.rmtree(d)
    return a


def test_every_kind_of_frame():
    found = compare([program("frames")])
    # grab() sizes 16..96 come from 7 distinct places, each seen more than once
    check(len(found) >= 20, f"only {len(found)} distinct stacks")


def test_thousand_call_paths():
    found = compare([os.path.join(os.path.dirname(program("x")), "..", "..", "bench", "bench-small"), "200000"])
    check(len(found) >= 1000, f"only {len(found)} distinct stacks, the workload has 1000 paths")


def test_return_address_not_code():
    """21 allocations in target, each under a made-up return address (0 to ~0): the program
    runs as untraced, and each stack is target alone, with no frame outside a module."""
    d = workdir()
    trace = os.path.join(d, "t.bin")
    argv = [program("bad-return")]
    plain, traced = run(argv), run_traced(argv, trace)
    check((traced.returncode, traced.stdout) == (plain.returncode, plain.stdout) == (0, b"ok\n"),
          f"traced {traced.returncode} {traced.stdout!r}, plain {plain.returncode} {plain.stdout!r}")
    out = run([BIN, "dump", trace]).stdout.decode()
    ids = re.findall(r"ALLOC malloc 0x[0-9a-f]+ size 24 stack (\d+)", out)
    check(len(ids) == 21, f"{len(ids)} allocations of 24 bytes, not 21")
    found = {s for s in stacks(trace) if any(name == "bad-return" for name, _ in s)}
    used = {tuple(f.split()) for f in re.findall(r"STACK id (?:%s) gen \d+ frames \d+ (.*)" % "|".join(set(ids)), out)}
    check(all(len(f) == 1 for f in used), f"stacks of target with more than its frame: {used}")
    check(all(name != "?" for s in found for name, _ in s), f"a frame outside every module: {found}")
    shutil.rmtree(d)


main({
    "every_kind_of_frame": test_every_kind_of_frame,
    "thousand_call_paths": test_thousand_call_paths,
    "return_address_not_code": test_return_address_not_code,
})
