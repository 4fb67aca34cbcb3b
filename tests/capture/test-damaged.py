# SPDX-License-Identifier: MIT
"""Damaged and live traces read honestly (issue 11, points 1, 2 and 6): a
file cut inside a chunk or at a chunk boundary gives every complete record
before the cut, one warning line, and `end: cut`; a trace a running program
still writes says `running`; `memtrace check` gives no verdict (exit 2) on a
cut, running, stopped or empty trace."""
import json
import os
import re
import shutil
import struct
import subprocess
import time

from harness import BIN, LIB, check, main, program, run, run_traced, workdir

HEADER_EXTENDED = 72  # offset of the header's `extended` field


def full_trace(d):
    """A leaker of 40,000 blocks: several chunks, the last one large."""
    trace = os.path.join(d, "full.bin")
    r = run_traced([program("leaker"), "40000", "24"], trace)
    check(r.returncode == 0, f"traced leaker: {r.returncode}")
    return trace


def records(trace):
    """(offset, kind) of every record `memtrace dump` prints, and the chunk starts."""
    out = run([BIN, "dump", trace])
    recs, chunks = [], []
    for line in out.stdout.decode().splitlines():
        m = re.match(r"0x([0-9a-f]+) (chunk \d+|pid \d+ tid \d+ t=\S+ (\w+))", line)
        if not m:
            continue
        if m.group(2).startswith("chunk"):
            chunks.append(int(m.group(1), 16))
        else:
            recs.append((int(m.group(1), 16), m.group(3)))
    return recs, chunks


def cut_copy(trace, at, d, name):
    path = os.path.join(d, name)
    with open(trace, "rb") as f:
        data = f.read(at)
    with open(path, "wb") as f:
        f.write(data)
    return path


def summary(trace):
    out = run([BIN, "dump", "--summary", "--json", trace])
    return out, json.loads(out.stdout) if out.returncode == 0 else None


def expect_cut(path, at, recs, what):
    """Every record that starts before the cut and ends before it is read."""
    out, s = summary(path)
    check(out.returncode == 0, f"{what}: dump exits {out.returncode}: {out.stderr!r}")
    err = out.stderr.decode()
    check(err.count("\n") == 1 and f"the file ends at byte {at}," in err and "'cut'" in err,
          f"{what}: the warning is {err!r}")
    (p,) = s["processes"]
    check(p["end"] == "cut", f"{what}: the process ends {p['end']!r}")
    # a record that starts at the cut's last byte or later is not whole (the
    # inside cut is made one byte into a record)
    want = sum(1 for off, kind in recs if off < at - 1 and kind == "ALLOC")
    got = p["memories"]["host"]["allocations"]
    check(got == want, f"{what}: {got} allocations read, {want} complete before the cut")
    for cmd in (["report"], ["report", "--json"], ["flamegraph"]):
        r = run([BIN, *cmd, path])
        check(r.returncode == 0 and r.stderr.decode() == err,
              f"{what}: {' '.join(cmd)} exits {r.returncode}: {r.stderr!r}")
    r = run([BIN, "check", path])
    check(r.returncode == 2 and r.stdout == b"memtrace check: no verdict: the trace was cut: "
          b"its end is missing\n", f"{what}: check exits {r.returncode}: {r.stdout!r}")


def exit_chunk(recs, chunks):
    """The start of the chunk that holds the EXIT record, and that record's offset:
    a cut there leaves the process without its end (other threads' chunks, the
    sampler's, may come later in the file)."""
    (exit_off,) = [off for off, kind in recs if kind == "EXIT"]
    return max(c for c in chunks if c < exit_off), exit_off


def test_cut_inside_a_chunk():
    d = workdir()
    trace = full_trace(d)
    recs, chunks = records(trace)
    start, exit_off = exit_chunk(recs, chunks)
    inside = [off for off, kind in recs if start < off < exit_off]
    at = inside[len(inside) // 2] + 1  # inside that record
    expect_cut(cut_copy(trace, at, d, "inside.bin"), at, recs, "cut inside a chunk")
    shutil.rmtree(d)


def test_cut_at_a_chunk_boundary():
    d = workdir()
    trace = full_trace(d)
    recs, chunks = records(trace)
    at, _ = exit_chunk(recs, chunks)
    expect_cut(cut_copy(trace, at, d, "boundary.bin"), at, recs, "cut at a chunk boundary")
    shutil.rmtree(d)


def test_no_process():
    d = workdir()
    trace = full_trace(d)
    path = cut_copy(trace, 4096, d, "header.bin")
    with open(path, "r+b") as f:  # a header whose writers never extended the file
        f.seek(HEADER_EXTENDED)
        f.write(struct.pack("<Q", 4096))
    r = run([BIN, "check", path])
    check(r.returncode == 2 and r.stdout == b"memtrace check: no verdict: the trace holds no "
          b"process\n", f"check of an empty trace exits {r.returncode}: {r.stdout!r}")
    shutil.rmtree(d)


def test_stopped():
    import resource
    d = workdir()
    trace = os.path.join(d, "t.bin")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    env = dict(os.environ, LD_PRELOAD=LIB, MEMTRACE_OUTPUT=trace)
    env.pop("MEMTRACE_TREE", None)
    subprocess.run([program("leaker"), "300000", "24"], env=env, preexec_fn=limit,
                   capture_output=True, timeout=120)
    r = run([BIN, "check", trace])
    check(r.returncode == 2 and re.match(rb"memtrace check: no verdict: tracing stopped early in "
                                         rb"process \d+ \(File too large\)\n$", r.stdout),
          f"check of a stopped trace exits {r.returncode}: {r.stdout!r}")
    shutil.rmtree(d)


def test_running():
    d = workdir()
    trace = os.path.join(d, "t.bin")
    env = dict(os.environ, LD_PRELOAD=LIB, MEMTRACE_OUTPUT=trace)
    env.pop("MEMTRACE_TREE", None)
    p = subprocess.Popen([program("leaker"), "10", "10", "wait"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        check(p.stdout.readline() == b"ready\n", "the program did not start")
        out, s = summary(trace)
        check(out.returncode == 0 and s["processes"][0]["end"] == "running",
              f"a running program's process ends {s and s['processes'][0]['end']!r}")
        check(out.stderr.decode().endswith("a running program is still writing this trace: its "
                                           "processes that have not ended are 'running'\n"),
              f"the warning: {out.stderr!r}")
        r = run([BIN, "check", trace])
        check(r.returncode == 2 and r.stdout == b"memtrace check: no verdict: a running program "
              b"is still writing the trace\n", f"check of a live trace: {r.returncode} {r.stdout!r}")
    finally:
        p.kill()
        p.wait()
    out, s = summary(trace)
    check(out.returncode == 0 and out.stderr == b"" and s["processes"][0]["end"] == "killed",
          f"after the kill: {out.stderr!r} {s and s['processes'][0]['end']!r}")
    shutil.rmtree(d)


def test_flipped_bit():
    """A bit flipped inside a given-up chunk's records fails its checksum: said,
    and no gate passes on it. Without the checksum a flip in a size changes the
    figures without a word."""
    d = workdir()
    trace = full_trace(d)
    recs, chunks = records(trace)
    with open(trace, "rb") as f:
        data = f.read()
    # a chunk its thread gave up (its checksum set: offset 36 of its header) holding allocations
    for i, c in enumerate(chunks[:-1]):
        allocs = [off for off, kind in recs if kind == "ALLOC" and c < off < chunks[i + 1]]
        if struct.unpack_from("<I", data, c + 36)[0] and allocs:
            break
    at = allocs[len(allocs) // 2] + 4  # in the record's payload
    with open(trace, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x01]))
    out, s = summary(trace)
    err = out.stderr.decode()
    check(out.returncode == 0 and err == f"memtrace: {trace}: 1 chunk of records fails its checksum "
          f"(the first at byte {c}): the file was damaged there, and its figures may be "
          "wrong\n", f"dump of a damaged trace: {out.returncode} {err!r}")
    r = run([BIN, "check", trace])
    check(r.returncode == 2 and r.stdout == b"memtrace check: no verdict: the trace is damaged: "
          b"records fail their checksum\n", f"check of a damaged trace: {r.returncode} {r.stdout!r}")
    shutil.rmtree(d)


def test_fifo_named_as_the_trace():
    """A FIFO given as the trace is refused at once, not waited on."""
    d = workdir()
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    try:
        r = run([BIN, "report", fifo], timeout=10)
    except subprocess.TimeoutExpired:
        r = None
    check(r is not None and r.returncode == 2 and r.stderr == f"memtrace: {fifo}: not a regular "
          "file\n".encode(), f"report of a FIFO: {r and (r.returncode, r.stderr)}")
    shutil.rmtree(d)


main({
    "cut_inside_a_chunk": test_cut_inside_a_chunk,
    "cut_at_a_chunk_boundary": test_cut_at_a_chunk_boundary,
    "no_process": test_no_process,
    "stopped": test_stopped,
    "running": test_running,
    "fifo_named_as_the_trace": test_fifo_named_as_the_trace,
    "flipped_bit": test_flipped_bit,
})
