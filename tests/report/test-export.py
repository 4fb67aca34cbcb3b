# SPDX-License-Identifier: MIT
"""memtrace export on traces of real processes run under the preload
(docs/export.md): pprof profiles read back by Go's own pprof
(`go tool pprof -raw`, Debian's golang-go) whose totals per process are the
report's exactly, with the functions, files and lines of known allocations;
Trace Event JSON whose counters go through every live figure of a known
program and reach the report's peak at its moment, end at its live bytes,
with its marks, failure, RSS and end as the report has them.

Usage: test-export.py [TEST...]; meson passes the paths in the environment
(tests/report/meson.build)."""
import json
import os
import re
import shutil
import subprocess
import sys

from harness import BIN, check, main, marked_lines, program, run, run_traced, workdir

OWN = os.environ["MEMTRACE_REPORT_PROGRAMS"]
CAPTURE_SOURCES = os.environ["MEMTRACE_CAPTURE_SOURCES"]
GROUPED_PY = os.environ["MEMTRACE_GROUPED_PY"]
GO = shutil.which("go")


def trace_of(argv, extra=None):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced(argv, trace, extra)
    check(r.returncode == 0, f"{argv} exited {r.returncode} under the preload: {r.stderr.decode()}")
    return d, trace


def report(trace):
    r = run([BIN, "report", "--json", "--top", "1000", trace])
    check(r.returncode == 0, f"memtrace report --json exited {r.returncode}: {r.stderr.decode()}")
    return json.loads(r.stdout)


def source_line(path, text):
    with open(path) as f:
        hits = [i + 1 for i, l in enumerate(f) if text in l]
    check(len(hits) == 1, f"{text!r} is on lines {hits} of {path}")
    return hits[0]


def export(trace, *args):
    r = run([BIN, "export", *args, trace])
    check(r.returncode == 0, f"memtrace export {args} exited {r.returncode}: {r.stderr.decode()}")
    return r


def pprof(*args):
    """go tool pprof's output; its home and temporary files in a folder of the test's."""
    check(GO, "go not found (Debian: golang-go, .ci/packages)")
    d = workdir()
    env = dict(os.environ, HOME=d, PPROF_TMPDIR=d, GOCACHE=os.path.join(d, "cache"))
    r = run([GO, "tool", "pprof", *args], env=env)
    shutil.rmtree(d)
    check(r.returncode == 0, f"go tool pprof {args} exited {r.returncode}: {r.stderr.decode()[:800]}")
    return r.stdout.decode()


def pprof_raw(path):
    """`go tool pprof -raw`: the header lines, the sample types, and the samples as
    (values, location ids, labels), the locations as id -> [(function, file, line)]."""
    lines = pprof("-raw", path).splitlines()
    head, samples, locations = {}, [], {}
    i = 0
    while lines[i] != "Samples:":
        k, _, v = lines[i].partition(": ")
        head[k] = v
        i += 1
    types = [t.replace("[dflt]", "") for t in lines[i + 1].split()]
    i += 2
    while lines[i] != "Locations":
        m = re.fullmatch(r"\s*([-\d ]+): ([\d ]*)", lines[i])
        if m:
            samples.append(([int(v) for v in m.group(1).split()], [int(x) for x in m.group(2).split()], {}))
        else:
            m = re.fullmatch(r"\s+(\w+):\[(.*)\]", lines[i])
            check(m and samples, f"not a sample or label line: {lines[i]!r}")
            samples[-1][2][m.group(1)] = m.group(2)
        i += 1
    i += 1
    loc = None
    while i < len(lines) and lines[i] != "Mappings":
        # "ID: ADDRESS M=MAPPING FUNCTION FILE:LINE s=START(SYSTEM NAME)", an inlined call's
        # line without the first three; a file name with a space is cut at it
        m = re.fullmatch(r"\s*(?:(\d+): 0x[0-9a-f]+ M=\d+ )?(.*) (.*):(\d+) s=\d+(?:\(.*\))?", lines[i])
        check(m, f"not a location line: {lines[i]!r}")
        if m.group(1):
            loc = locations.setdefault(int(m.group(1)), [])
        loc.append((m.group(2).strip(), m.group(3), int(m.group(4))))
        i += 1
    return head, types, samples, locations


TYPES = ["alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"]


def per_pid(samples):
    sums = {}
    for values, _, labels in samples:
        s = sums.setdefault(int(labels["pid"]), [0, 0, 0, 0])
        for j, v in enumerate(values):
            s[j] += v
    return sums


def want_per_pid(procs, kind, at):
    want = {}
    for p in procs:
        m = p["memories"].get(kind)
        if not m:
            continue
        inuse = (m["peak_blocks"], m["peak_bytes"]) if at == "peak" else (m["leaked_blocks"], m["leaked_bytes"])
        w = want.setdefault(p["pid"], [0, 0, 0, 0])
        for j, v in enumerate((m["allocations"], m["bytes_allocated"]) + inuse):
            w[j] += v
    return {pid: w for pid, w in want.items() if any(w)}


def test_pprof_totals():
    """Each process's four values add up to the report's, at the peak and at the end, every kind."""
    for argv in [[program("every-function")], [program("fork-exec"), program("leaker")],
                 [os.path.join(OWN, "report-cases")]]:
        d, trace = trace_of(argv)
        procs = report(trace)["processes"]
        for kind in ["host", "mmap"]:
            out = os.path.join(d, f"{kind}.pb.gz")
            export(trace, "--format", "pprof", "--kind", kind, "-o", out)
            for at, path in (("peak", out), ("end", os.path.join(d, f"{kind}.end.pb.gz"))):
                head, types, samples, _ = pprof_raw(path)
                check(types == TYPES, f"sample types {types}")
                got, want = per_pid(samples), want_per_pid(procs, kind, at)
                check(got == want, f"{argv[0]} {kind} at the {at}: per pid {got} != the report's {want}")
                check(head.get("Comment") == f"memtrace: {kind} memory; in use at each process's {at}",
                      f"the profile's comment: {head.get('Comment')!r}")
        shutil.rmtree(d)


def test_pprof_lines():
    """every-function's leaks at the end, by line of main, and pprof's own total of them."""
    d, trace = trace_of([program("every-function")])
    out = os.path.join(d, "p.pb.gz")
    export(trace, "--format", "pprof", "--at", "end", "-o", out)
    check(not os.path.exists(os.path.join(d, "p.end.pb.gz")), "--at end wrote a second profile")
    _, _, samples, locations = pprof_raw(out)
    src = os.path.join(CAPTURE_SOURCES, "every-function.c")
    want = sorted([(100, "malloc(100)"), (150, "calloc(3, 50)"), (300, "realloc(p, 300)"),
                   (40, "realloc(p, 40)"), (70, "realloc(NULL, 70)"), (100, "reallocarray(NULL"),
                   (200, "posix_memalign(&keep"), (256, "aligned_alloc("), (96, "memalign(32"),
                   (1000, "valloc(1000)"), (0, "realloc(NULL, 0)"), (8192, "pvalloc(5000)")])
    want = sorted((b, source_line(src, ("" if t.startswith("posix") else "keep[k++] = ") + t)) for b, t in want)
    got = []
    for values, ids, _ in samples:
        if not values[2]:
            continue
        fn, file, line = locations[ids[0]][0]
        check((fn, os.path.basename(file)) == ("main", "every-function.c"), f"a leak in {fn} ({file})")
        check(values[2] == 1, f"{values[2]} blocks on one line")
        got.append((values[3], line))
    check(sorted(got) == want, f"leaks (bytes, line) {sorted(got)} != the source's {want}")
    top = pprof("-top", "-unit=B", "-sample_index=inuse_space", out)
    check("Showing nodes accounting for 10504B, 100% of 10504B total" in top, f"pprof -top:\n{top}")
    shutil.rmtree(d)


def test_pprof_python():
    """grouped.py's Python lines: a function, its file and line, the native label folded in."""
    n1, n2, m, final = 100_000, 300_000, 20_000, 8_000_000
    d, trace = trace_of([sys.executable, GROUPED_PY, str(n1), str(n2), str(m), str(final)])
    out = os.path.join(d, "p.pb.gz")
    export(trace, "--format", "pprof", "--at", "end", "-o", out)
    _, _, samples, locations = pprof_raw(out)
    sites = marked_lines(GROUPED_PY)
    by_line = {}
    for values, ids, _ in samples:
        fn, file, line = locations[ids[0]][0]
        if os.path.basename(file) == "grouped.py":
            check(fn.startswith("build (") or fn.startswith("<module> ("), f"a Python leaf named {fn!r}")
            by_line[line] = by_line.get(line, 0) + values[3]
    # build(n) keeps n + 1, 2n + 1, 2n + 33 and 8m bytes (test-grouped.py)
    want = {sites["mixed"]: sum(5 * n + 35 + 8 * m for n in (n1, n2)), sites["final"]: final + 1}
    check(by_line == want, f"bytes at the end by line of grouped.py {by_line} != {want}")
    shutil.rmtree(d)


def test_pprof_sampled():
    """A sampled capture: the period is the interval, a comment says the figures are estimates,
    and they are the report's estimates."""
    d, trace = trace_of([program("leaker"), "2000", "1000"], {"MEMTRACE_SAMPLING": "64K"})
    procs = report(trace)["processes"]
    out = os.path.join(d, "p.pb.gz")
    r = export(trace, "--format", "pprof", "--at", "peak", "-o", out)
    check("estimates" in r.stderr.decode(), f"export does not say the figures are estimates: {r.stderr.decode()}")
    head, _, samples, _ = pprof_raw(out)
    check(head.get("Period") == "65536", f"period {head.get('Period')}")
    check(per_pid(samples) == want_per_pid(procs, "host", "peak"), "sampled totals are not the report's")
    raw = pprof("-raw", out)
    check("memtrace: sampled capture: the figures are estimates" in raw, "no comment on the estimates")
    shutil.rmtree(d)


def chrome(trace, d):
    out = os.path.join(d, "trace.json")
    export(trace, "--format", "chrome-trace", "-o", out)
    with open(out) as f:
        j = json.load(f)
    check(isinstance(j.get("traceEvents"), list) and j.get("displayTimeUnit") in ("ms", "ns"),
          f"not a Trace Event object: {list(j)}")
    for e in j["traceEvents"]:
        # what the Trace Event Format asks of each phase written
        check(isinstance(e.get("name"), str) and isinstance(e.get("pid"), int) and e.get("ph") in ("M", "C", "i"),
              f"an event without name, pid or a known phase: {e}")
        if e["ph"] != "M":
            check(isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, f"an event without its time: {e}")
        if e["ph"] == "C":
            check(list(e["args"]) == ["bytes"] and isinstance(e["args"]["bytes"], int), f"a counter's args: {e}")
        if e["ph"] == "i":
            check(e.get("s") == "p" and e.get("tid") == e["pid"], f"an instant event's scope: {e}")
    return j["traceEvents"]


def ns(e):
    return round(e["ts"] * 1000)


def counter(events, pid, name):
    return sorted((e for e in events if e["ph"] == "C" and e["pid"] == pid and e["name"] == name), key=ns)


def test_chrome_known():
    """export-cases: every live figure of the host counter, in order; the peak at its moment;
    the marks, the failure, the RSS peak and the end as the report says them."""
    table, lost = 1_000_000, 300
    d, trace = trace_of([os.path.join(OWN, "export-cases"), str(table), str(lost)])
    (p,) = report(trace)["processes"]
    events = chrome(trace, d)
    host = counter(events, p["pid"], "host")
    want = [0, 100] + [100 + 4096, 100] * 8 + [100 + lost, 100 + lost + table, 100 + lost]
    check([e["args"]["bytes"] for e in host] == want, f"host counter {[e['args']['bytes'] for e in host]} != {want}")
    m = p["memories"]["host"]
    top = max(host, key=lambda e: e["args"]["bytes"])
    check((top["args"]["bytes"], ns(top)) == (m["peak_bytes"], m["peak_time_ns"]),
          f"the counter's top {top} is not the report's peak {m['peak_bytes']} at {m['peak_time_ns']} ns")
    check(host[-1]["args"]["bytes"] == m["live_at_end_bytes"], f"the counter ends at {host[-1]}")
    check([e["args"]["bytes"] for e in counter(events, p["pid"], "mmap")] == [0], "an mmap counter moved")
    (name,) = [e for e in events if e["ph"] == "M" and e["pid"] == p["pid"]]
    check(name["name"] == "process_name" and name["args"]["name"] == p["command"], f"process name {name}")
    instants = sorted((e for e in events if e["ph"] == "i"), key=ns)
    marks = [(e["name"], ns(e), e["args"]) for e in instants if e["name"] in ("start", "loaded", "done")]
    want = [(mk["label"], mk["time_ns"], mk["live"]) for mk in p["diagnosis"]["marks"]]
    check(marks == want and len(want) == 3, f"marks {marks} != the report's {want}")
    (f,) = m["failures"]
    fails = [(ns(e), e["args"]) for e in instants if e["name"] == "failed malloc"]
    check(fails == [(f["time_ns"], {"kind": "host", "size": f["size"], "errno": 12})], f"failures {fails}")
    check(instants[-1]["name"] == "end: exit" and instants[-1]["args"] == {"status": 0}, f"the last event {instants[-1]}")
    rss = counter(events, p["pid"], "RSS")
    over = p["diagnosis"]["memory_over_time"]
    check(rss and max(e["args"]["bytes"] for e in rss) == over["rss_peak"],
          f"RSS counter's top {max((e['args']['bytes'] for e in rss), default=None)} != rss_peak {over['rss_peak']}")
    check(len(rss) <= over["samples"], f"{len(rss)} RSS points from {over['samples']} samples")
    shutil.rmtree(d)


def test_chrome_many_events():
    """150,000 events: intervals, each kind at most 3 points in each, the peak and end exact."""
    d, trace = trace_of([program("leaker"), "100000", "100"])
    (p,) = report(trace)["processes"]
    host = counter(chrome(trace, d), p["pid"], "host")
    m = p["memories"]["host"]
    check(len(host) <= 3 * 10000 + 1, f"{len(host)} host points")
    top = max(host, key=lambda e: e["args"]["bytes"])
    check((top["args"]["bytes"], ns(top)) == (m["peak_bytes"], m["peak_time_ns"]),
          f"the counter's top {top} is not the report's peak {m['peak_bytes']} at {m['peak_time_ns']} ns")
    check(host[-1]["args"]["bytes"] == m["live_at_end_bytes"], f"the counter ends at {host[-1]}")
    shutil.rmtree(d)


def test_chrome_processes():
    """fork-exec: a counter per pid, whose top is the highest peak of the pid's processes and
    whose last value the last one's live bytes; an exec event where each exec'd program began."""
    d, trace = trace_of([program("fork-exec"), program("leaker")])
    procs = report(trace)["processes"]
    events = chrome(trace, d)
    for pid in {p["pid"] for p in procs}:
        mine = [p for p in procs if p["pid"] == pid]
        host = counter(events, pid, "host")
        top = max(e["args"]["bytes"] for e in host)
        check(top == max(p["memories"]["host"]["peak_bytes"] for p in mine), f"pid {pid}: top {top}")
        check(host[-1]["args"]["bytes"] == mine[-1]["memories"]["host"]["live_at_end_bytes"],
              f"pid {pid}: the counter ends at {host[-1]}")
        execs = [e for e in events if e["ph"] == "i" and e["pid"] == pid and e["name"] == "exec"]
        check(len(execs) == sum(p["origin"] == "exec" for p in mine), f"pid {pid}: exec events {execs}")
    shutil.rmtree(d)


def test_bad_trace():
    """A trace that cannot be read: exit 2, one line, no file made."""
    d, trace = trace_of([program("leaker"), "10", "100"])
    with open(trace, "rb") as f:
        data = bytearray(f.read())
    data[4096] ^= 0xff  # the first chunk's magic
    with open(trace, "wb") as f:
        f.write(data)
    for fmt, name in (("pprof", "p.pb.gz"), ("chrome-trace", "t.json")):
        out = os.path.join(d, name)
        r = run([BIN, "export", "--format", fmt, "-o", out, trace])
        err = r.stderr.decode().strip()
        check(r.returncode == 2, f"export --format {fmt} of a corrupt trace exits {r.returncode}")
        check(re.fullmatch(rf"memtrace: {re.escape(trace)}: byte 4096 \(0x1000\): .+", err), f"{fmt}: {err!r}")
        check(sorted(os.listdir(d)) == ["trace.bin"], f"{fmt}: files left {os.listdir(d)}")
    shutil.rmtree(d)


main({
    "pprof-totals": test_pprof_totals,
    "pprof-lines": test_pprof_lines,
    "pprof-python": test_pprof_python,
    "pprof-sampled": test_pprof_sampled,
    "chrome-known": test_chrome_known,
    "chrome-many-events": test_chrome_many_events,
    "chrome-processes": test_chrome_processes,
    "bad-trace": test_bad_trace,
})
