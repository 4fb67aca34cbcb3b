# SPDX-License-Identifier: MIT
"""memtrace diff on traces of real processes run under the preload
(docs/diff.md): export-cases with known sizes, BASE from one build and NEW
from another whose code and lines moved, so that only names can match the
stacks; every change exact, the totals the reports', the gates' exit
statuses to the byte and the percent, no verdict (exit 2) on a damaged or
cut trace, grouped.py's changes per Python line, and a sampled capture said
to be estimates.

Usage: test-diff.py [TEST...]; meson passes the paths in the environment
(tests/report/meson.build)."""
import json
import os
import re
import shutil
import struct
import sys

from harness import BIN, check, main, marked_lines, program, run, run_traced, workdir

OWN = os.environ["MEMTRACE_REPORT_PROGRAMS"]
GROUPED_PY = os.environ["MEMTRACE_GROUPED_PY"]
CASES = os.path.join(OWN, "export-cases")
SHIFTED = os.path.join(OWN, "export-cases-shifted")
COUNTED = ("definite", "indirect", "unclassified")  # what check counts, and diff by default


def traced(d, name, argv, extra=None):
    trace = os.path.join(d, name)
    r = run_traced(argv, trace, extra)
    check(r.returncode == 0, f"{argv} exited {r.returncode} under the preload: {r.stderr.decode()}")
    return trace


def report(trace):
    r = run([BIN, "report", "--json", trace])
    check(r.returncode == 0, f"memtrace report --json exited {r.returncode}: {r.stderr.decode()}")
    return json.loads(r.stdout)


def diff(*args, status=0):
    r = run([BIN, "diff", *args])
    check(r.returncode == status, f"diff {args} exits {r.returncode}, not {status}: {r.stdout.decode()[-800:]}"
          f" {r.stderr.decode()[-800:]}")
    return r


def diff_json(*args, status=0):
    return json.loads(diff("--json", "--top", "1000", *args, status=status).stdout)


def group(j, program, kind):
    (g,) = [g for g in j["programs"] if g["program"] == program and g["kind"] == kind]
    return g


def totals(rep, kind):
    """The report's figures summed over its processes, as diff counts them."""
    t = {"peak_bytes": 0, "leaked_bytes": 0, "bytes_allocated": 0, "allocations": 0}
    for p in rep["processes"]:
        m = p["memories"][kind]
        t["peak_bytes"] += m["peak_bytes"]
        t["bytes_allocated"] += m["bytes_allocated"]
        t["allocations"] += m["allocations"]
        lk = m["leak_kinds"] or {"unclassified": {"bytes": m["leaked_bytes"]}}
        t["leaked_bytes"] += sum(lk.get(c, {"bytes": 0})["bytes"] for c in COUNTED)
    return t


def by_function(g):
    return {s["frames"][0]["function"] if s["frames"] else "[no stack]": s for s in g["stacks"]}


def other_build(d):
    """The shifted build under the program's own name, as a new build of it would be."""
    os.mkdir(os.path.join(d, "build2"))
    path = os.path.join(d, "build2", "export-cases")
    shutil.copy(SHIFTED, path)
    return path


def test_known_changes():
    """BASE: 1,000,000 B table, 300 B lost; NEW, the other build: 2,000,000 and 700."""
    d = workdir()
    base = traced(d, "base.bin", [CASES, "1000000", "300"])
    new = traced(d, "new.bin", [other_build(d), "2000000", "700"])
    j = diff_json(base, new)
    check((j["memtrace_diff"], j["lines"], j["estimates"], j["gate"]) == (1, "python", False, None),
          f"the header {[j[k] for k in ('memtrace_diff', 'lines', 'estimates', 'gate')]}")
    g = group(j, "export-cases", "host")
    check(g["base"] == totals(report(base), "host") and g["new"] == totals(report(new), "host"),
          f"totals {g['base']} {g['new']} are not the reports' {totals(report(base), 'host')} "
          f"{totals(report(new), 'host')}")
    want = {"peak_bytes": 1000400, "leaked_bytes": 400, "bytes_allocated": 1000400, "allocations": 0}
    got = {k: g["change"][k] for k in want}
    check(got == want, f"the change {got} != {want}")
    check(g["change"]["peak_percent"] == 100.0, f"percent {g['change']['peak_percent']}")
    stacks = by_function(g)
    check(sorted(stacks) == ["load_table", "lose_block"], f"stacks changed: {sorted(stacks)}")
    lt, lb = stacks["load_table"], stacks["lose_block"]
    check((lt["status"], lt["change"]["peak_bytes"], lt["change"]["leaked_bytes"], lt["base"]["peak_bytes"],
           lt["new"]["peak_bytes"]) == ("changed", 1000000, 0, 1000000, 2000000), f"load_table {lt}")
    check((lb["status"], lb["change"]["peak_bytes"], lb["change"]["leaked_bytes"], lb["new"]["leaked_bytes"])
          == ("changed", 400, 400, 700), f"lose_block {lb}")
    # shown from NEW: the other build's file and lines
    check(lt["frames"][0]["line"] >= 500 and lt["label"].startswith("load_table (export-cases.c:"),
          f"load_table is not shown from NEW: {lt['frames'][0]} {lt['label']}")
    check(g["stacks_changed"] == 2 and g["stacks_total"] >= 4, f"{g['stacks_changed']} of {g['stacks_total']}")
    mm = group(j, "export-cases", "mmap")
    check(mm["change"]["peak_bytes"] == 0 and mm["stacks"] == [], f"mmap {mm}")
    # every line numbered anew: with lines in the names nothing matches, and the totals still agree
    j = diff_json("--lines", "all", base, new)
    g = group(j, "export-cases", "host")
    statuses = sorted((s["frames"][0]["function"], s["status"]) for s in g["stacks"] if s["frames"])
    want = sorted((f, st) for f in ("keep_cache", "load_table", "lose_block", "scratch") for st in ("gone", "new"))
    check(statuses == want, f"--lines all: {statuses}")
    for k in ("peak_bytes", "leaked_bytes", "bytes_allocated"):
        check(sum(s["change"][k] for s in g["stacks"]) == g["change"][k], f"--lines all: the stacks' {k} do not add up")
    text = diff(base, new).stdout.decode()
    check(re.search(r"^  peak +977 KiB -> 1\.91 MiB +\+977 KiB \(\+100\.0%\)$", text, re.M) and
          re.search(r"^ +\+977 KiB +0 B +\+977 KiB  load_table \(export-cases\.c:\d+\)$", text, re.M),
          f"the text:\n{text}")
    shutil.rmtree(d)


def test_gates():
    """--fail-on-increase and --fail-on-leak-increase, to the percent and the byte."""
    d = workdir()
    base = traced(d, "base.bin", [CASES, "1000000", "300"])
    shifted = other_build(d)
    new = traced(d, "new.bin", [shifted, "2000000", "700"])
    same = traced(d, "same.bin", [shifted, "1000000", "300"])
    # the peak: 1,000,400 -> 2,000,800 B, +100%; the leak: 300 -> 700 B, +400
    for args, status in ((["--fail-on-increase", "99.9"], 1), (["--fail-on-increase", "100"], 0),
                         (["--fail-on-leak-increase", "399"], 1), (["--fail-on-leak-increase", "400"], 0),
                         (["--fail-on-increase", "100", "--fail-on-leak-increase", "399"], 1)):
        r = diff(*args, base, new, status=status)
        last = r.stdout.decode().splitlines()[-1]
        check(last == ("memtrace diff: ok" if status == 0 else "memtrace diff: FAILED (1 limit exceeded)"),
              f"{args}: the last line {last!r}")
    j = diff_json("--fail-on-increase", "50", "--fail-on-leak-increase", "1K", base, new, status=1)
    (f,) = j["gate"]["failures"]
    check(not j["gate"]["passed"] and (f["program"], f["kind"], f["figure"], f["base"], f["new"])
          == ("export-cases", "host", "peak_bytes", 1000400, 2000800), f"the gate {j['gate']}")
    # the same figures from the other build pass any gate; NEW lower passes too
    diff("--fail-on-increase", "0", "--fail-on-leak-increase", "0", base, same)
    diff("--fail-on-increase", "0", "--fail-on-leak-increase", "0", new, base)
    diff("--fail-on-increase", "ten", base, new, status=2)
    diff("--fail-on-leak-increase", "-1", base, new, status=2)
    diff(base, status=2)
    shutil.rmtree(d)


def test_no_verdict():
    """A damaged or cut trace never passes a gate: exit 2, whichever side it is."""
    d = workdir()
    base = traced(d, "base.bin", [program("leaker"), "40000", "24"])
    out = run([BIN, "dump", base]).stdout.decode()
    chunks = [int(m.group(1), 16) for m in re.finditer(r"^0x([0-9a-f]+) chunk \d+", out, re.M)]
    allocs = [int(m.group(1), 16) for m in re.finditer(r"^0x([0-9a-f]+) pid \d+ tid \d+ t=\S+ ALLOC", out, re.M)]
    with open(base, "rb") as f:
        data = bytearray(f.read())
    # a bit flipped in an ALLOC of a chunk its thread gave up (its checksum set)
    for i, c in enumerate(chunks[:-1]):
        inside = [a for a in allocs if c < a < chunks[i + 1]]
        if struct.unpack_from("<I", data, c + 36)[0] and inside:
            break
    damaged = bytearray(data)
    damaged[inside[len(inside) // 2] + 4] ^= 0x01
    bad = os.path.join(d, "damaged.bin")
    with open(bad, "wb") as f:
        f.write(damaged)
    cut = os.path.join(d, "cut.bin")
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 2 // 3])
    for new, why in ((bad, "the trace is damaged: records fail their checksum"),
                     (cut, "the trace was cut: its end is missing")):
        for a, b in ((base, new), (new, base)):
            r = diff("--fail-on-leak-increase", "1G", a, b, status=2)
            check(r.stdout.decode() == f"memtrace diff: no verdict: {new}: {why}\n", f"no verdict: {r.stdout!r}")
            r = diff("--json", "--fail-on-increase", "1000", a, b, status=2)
        # without a gate, the changes are shown with the warning
        r = diff(base, new)
        check(f"memtrace diff: {new}: {why}" in r.stderr.decode(), f"no warning: {r.stderr!r}")
    shutil.rmtree(d)


def test_python_lines():
    """grouped.py, NEW with build(200,000) in place of build(100,000) at the call-a line: the
    stacks of that line change by the bytes build keeps, per native path; call-b's do not."""
    sites = marked_lines(GROUPED_PY)
    d = workdir()
    base = traced(d, "base.bin", [sys.executable, GROUPED_PY, "100000", "300000", "20000", "8000000"])
    new = traced(d, "new.bin", [sys.executable, GROUPED_PY, "200000", "300000", "20000", "8000000"])
    g = group(diff_json(base, new), os.path.basename(os.path.realpath(sys.executable)), "host")
    ours = []
    for s in g["stacks"]:
        lines = [f["line"] for f in s["frames"] if f["module"] == "python" and f["file"] and
                 os.path.basename(f["file"]) == "grouped.py"]
        if lines:
            c = s["change"]
            ours.append((lines[:2], s["status"], c["peak_bytes"], c["leaked_bytes"], c["bytes_allocated"]))
    # build(n) keeps n + 1 and 2n + 1 (two bytearrays: one group), 2n + 33 (a join), 8m (a
    # list), and frees the join's parts, b"a" * n and b"b" * n (n + 33 each)
    line = [sites["mixed"], sites["call-a"]]
    want = sorted([(line, "changed", 300000, 300000, 300000), (line, "changed", 200000, 200000, 200000),
                   (line, "changed", 0, 0, 200000)])
    check(sorted(ours) == want, f"grouped.py's stacks changed {sorted(ours)} != {want}")
    shutil.rmtree(d)


def test_sampled():
    """Sampled captures: the figures are estimates, and said to be."""
    d = workdir()
    env = {"MEMTRACE_SAMPLING": "64K"}
    base = traced(d, "base.bin", [program("leaker"), "2000", "1000"], env)
    new = traced(d, "new.bin", [program("leaker"), "4000", "1000"], env)
    text = diff(base, new).stdout.decode()
    check("memtrace diff: BASE: sampled capture: host figures are estimates" in text and
          "memtrace diff: NEW: sampled capture: host figures are estimates" in text, f"the text:\n{text}")
    j = diff_json(base, new)
    g = group(j, "leaker", "host")
    check(j["estimates"] is True and g["base"] == totals(report(base), "host") and
          g["new"] == totals(report(new), "host"), f"sampled: {j['estimates']} {g['base']} {g['new']}")
    shutil.rmtree(d)


main({
    "known-changes": test_known_changes,
    "gates": test_gates,
    "no-verdict": test_no_verdict,
    "python-lines": test_python_lines,
    "sampled": test_sampled,
})
