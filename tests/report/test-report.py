# SPDX-License-Identifier: MIT
"""memtrace report, flamegraph and check on traces of real processes run
under the preload: exact peak, leaks, temporaries and failures per process,
leak stacks that name the function, file and line that leaked, a SIGKILLed
process's live set at death, flame graphs whose totals are the report's and
that flamegraph.pl renders, and check's exit statuses.

Usage: test-report.py [TEST...]; meson passes the paths in the environment
(tests/report/meson.build)."""
import json
import os
import re
import shutil
import signal
import subprocess

from harness import BIN, check, main, program, run, run_traced, traced_env, workdir

OWN = os.environ["MEMTRACE_REPORT_PROGRAMS"]
CAPTURE_SOURCES = os.environ["MEMTRACE_CAPTURE_SOURCES"]
REPORT_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
METRICS = ["peak", "leaked", "allocated", "allocations", "temporary"]
# what each flame graph metric adds up to, in the report's JSON
METRIC_KEYS = {"peak": "peak_bytes", "leaked": "leaked_bytes", "allocated": "bytes_allocated",
               "allocations": "allocations", "temporary": "temporary_allocations"}
# Debian ships flamegraph.pl inside libdevel-nytprof-perl (.ci/packages)
FLAMEGRAPH_PL = [shutil.which("flamegraph.pl"), "/usr/share/perl5/Devel/NYTProf/flamegraph.pl"]


def trace_of(argv, expect_status=0):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced(argv, trace)
    check(r.returncode == expect_status, f"{argv} exited {r.returncode} under the preload: {r.stderr.decode()}")
    return d, trace


def report(trace, *args):
    r = run([BIN, "report", "--json", "--top", "1000", *args, trace])
    check(r.returncode == 0, f"memtrace report --json exited {r.returncode}: {r.stderr.decode()}")
    j = json.loads(r.stdout)
    check(j["memtrace_report"] == 1, f"memtrace_report is {j['memtrace_report']}")
    return j


def source_line(path, text):
    """The 1-based line of the source file that holds text (exactly one)."""
    with open(path) as f:
        hits = [i + 1 for i, l in enumerate(f) if text in l]
    check(len(hits) == 1, f"{text!r} is on lines {hits} of {path}")
    return hits[0]


def figures(p, kind):
    m = p["memories"][kind]
    return (m["leaked_bytes"], m["leaked_blocks"])


def first_frame(stack):
    check(stack["frames"], f"a stack without frames: {stack}")
    f = stack["frames"][0]
    return (f["function"], os.path.basename(f["file"] or ""), f["line"])


def no_allocator_frames(stack):
    for f in stack["frames"]:
        fn = f["function"] or ""
        check(not fn.startswith("operator new") and not fn.startswith("_Zn"),
              f"an allocator frame is left in a stack: {fn}")
        check("libmemtrace" not in (f["module"] or ""), f"a libmemtrace.so frame in a stack: {f}")


def test_every_function_exact():
    d, trace = trace_of([program("every-function")])
    (p,) = report(trace)["processes"]
    check(p["end"] == "exit" and p["exit_status"] == 0, f"end {p['end']} status {p['exit_status']}")
    host, mm = p["memories"]["host"], p["memories"]["mmap"]
    check(figures(p, "host") == (10504, 12), f"host leaked {figures(p, 'host')}, the program leaves (10504, 12)")
    check(figures(p, "mmap") == (524288, 1), f"mmap leaked {figures(p, 'mmap')}, the program leaves (524288, 1)")
    # the last block (pvalloc) makes the peak: everything else is live by then
    check((host["peak_bytes"], host["peak_blocks"]) == (10504, 12), f"host peak {host['peak_bytes']}")
    check((mm["peak_bytes"], mm["peak_blocks"]) == (1 << 20, 1), f"mmap peak {mm['peak_bytes']}")
    # 16 successful allocations; malloc(1000) freed at once and three reallocs
    # of the block just allocated are temporary (heaptrack's definition)
    check((host["allocations"], host["temporary_allocations"]) == (16, 4),
          f"host allocations {host['allocations']} temporary {host['temporary_allocations']}")
    check(sum(b["count"] for b in host["histogram"]) == host["allocations"], "histogram != allocations")
    check(host["failed_allocations"] == 0 and host["failures"] == [], "failures where there are none")
    src = os.path.join(CAPTURE_SOURCES, "every-function.c")
    want = sorted([(100, source_line(src, "keep[k++] = " + "malloc(100)")), (150, source_line(src, "keep[k++] = " + "calloc(3, 50)")),
                   (300, source_line(src, "keep[k++] = " + "realloc(p, 300)")), (40, source_line(src, "keep[k++] = " + "realloc(p, 40)")),
                   (70, source_line(src, "keep[k++] = " + "realloc(NULL, 70)")), (100, source_line(src, "keep[k++] = " + "reallocarray(NULL")),
                   (200, source_line(src, "posix_memalign(&keep")), (256, source_line(src, "keep[k++] = " + "aligned_alloc(")),
                   (96, source_line(src, "keep[k++] = " + "memalign(32")), (1000, source_line(src, "keep[k++] = " + "valloc(1000)")),
                   (0, source_line(src, "keep[k++] = " + "realloc(NULL, 0)")), (8192, source_line(src, "keep[k++] = " + "pvalloc(5000)"))])
    got = []
    for s in host["leak_stacks"]:
        no_allocator_frames(s)
        fn, f, line = first_frame(s)
        check((fn, f) == ("main", "every-function.c"), f"leak stack starts at {fn} in {f}")
        check(s["blocks"] == 1, f"{s['blocks']} blocks on one line")
        got.append((s["bytes"], line))
    check(sorted(got) == want, f"leak stacks (bytes, line) {sorted(got)} != the source's {want}")
    (ms,) = mm["leak_stacks"]
    check(first_frame(ms) == ("main", "every-function.c", source_line(src, "mmap(NULL, 1 << 20")),
          f"mmap leak stack {first_frame(ms)}")
    shutil.rmtree(d)


def test_fork_exec_per_process():
    d, trace = trace_of([program("fork-exec"), program("leaker")])
    procs = report(trace)["processes"]
    check(len(procs) == 4, f"{len(procs)} process instances, not 4 (parent, child, grandchild before and after exec)")
    parent, child, before_exec, grandchild = procs
    check(figures(parent, "host") == (333, 3), f"parent leaked {figures(parent, 'host')}")
    check(figures(child, "host") == (666, 4), f"child leaked {figures(child, 'host')}")
    check(before_exec["end"] == "exec" and figures(before_exec, "host") == (0, 0),
          f"the grandchild before exec: end {before_exec['end']}, leaked {figures(before_exec, 'host')}")
    check(grandchild["end"] == "exit" and figures(grandchild, "host") == (1332, 4),
          f"grandchild leaked {figures(grandchild, 'host')}")
    check(child["ppid"] == parent["pid"] and grandchild["pid"] == before_exec["pid"], "pids do not line up")
    fe = os.path.join(CAPTURE_SOURCES, "fork-exec.c")
    lk = os.path.join(CAPTURE_SOURCES, "leaker.c")
    stacks = lambda p: sorted((s["bytes"], s["blocks"]) + first_frame(s) for s in p["memories"]["host"]["leak_stacks"])
    line111, line222 = source_line(fe, "malloc(111)"), source_line(fe, "keep[3] = malloc(222)")
    check(stacks(parent) == [(333, 3, "main", "fork-exec.c", line111)], f"parent stacks {stacks(parent)}")
    check(stacks(child) == sorted([(222, 2, "main", "fork-exec.c", line111), (222, 1, "main", "fork-exec.c", line222),
                                   (222, 1, "main", "fork-exec.c", line222 + 1)]), f"child stacks {stacks(child)}")
    check(stacks(grandchild) == [(1332, 4, "main", "leaker.c", source_line(lk, "blocks[i] = malloc(size)"))],
          f"grandchild stacks {stacks(grandchild)}")
    shutil.rmtree(d)


def test_cxx_demangled_and_no_operator_new():
    d, trace = trace_of([program("cxx-new-delete")])
    (p,) = report(trace)["processes"]
    src = os.path.join(CAPTURE_SOURCES, "cxx-new-delete.cc")
    host = p["memories"]["host"]
    ours = []
    for s in host["leak_stacks"]:
        no_allocator_frames(s)
        mains = [f for f in s["frames"] if f["function"] == "main"]
        if mains:
            ours.append((s["bytes"], s["blocks"], mains[0]["line"], s["frames"][0]["function"]))
    line_vec = source_line(src, "new std::vector<int>(64)")
    got = sorted(o[:3] for o in ours)
    want = sorted([(100, 1, source_line(src, "new int[25]")), (48, 1, source_line(src, "kept_node = new Node()")),
                   (24, 1, line_vec), (256, 1, line_vec)])
    check(got == want, f"the program's leaks (bytes, blocks, line in main) {got} != {want}")
    # the vector's buffer comes through the allocator's demangled templates
    buf = [o for o in ours if o[0] == 256][0]
    check(buf[3].startswith("std::") and "allocate" in buf[3], f"the vector buffer's first frame is {buf[3]}")
    # the rest is libstdc++'s emergency exception pool, allocated before main
    check(host["leaked_blocks"] == 5, f"{host['leaked_blocks']} blocks leaked, not the program's 4 + the pool")
    shutil.rmtree(d)


def test_sigkill_live_at_death():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    p = subprocess.Popen([program("alloc-then-die"), "5000", "1000"], env=traced_env(trace),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(p.stdout.readline() == b"ready\n", "alloc-then-die did not get ready")
    p.send_signal(signal.SIGKILL)
    check(p.wait() == -signal.SIGKILL, "the process was not killed")
    (proc,) = report(trace)["processes"]
    check(proc["end"] == "killed" and proc["exit_status"] is None, f"end {proc['end']} status {proc['exit_status']}")
    check(figures(proc, "host") == (5000 * 1000, 5000), f"live at death {figures(proc, 'host')}, not (5000000, 5000)")
    (s,) = proc["memories"]["host"]["leak_stacks"]
    src = os.path.join(CAPTURE_SOURCES, "alloc-then-die.c")
    check(first_frame(s) == ("main", "alloc-then-die.c", source_line(src, "memset(malloc(size)")),
          f"the stack at death {first_frame(s)}")
    text = run([BIN, "report", trace]).stdout.decode().splitlines()
    check(any(l.strip() == "killed (no exit record): 4.77 MiB live at death" for l in text),
          f"the text report does not say it was killed:\n" + "\n".join(text[:6]))
    shutil.rmtree(d)


def test_temporaries_failures_histogram():
    d, trace = trace_of([os.path.join(OWN, "report-cases")])
    (p,) = report(trace)["processes"]
    h = p["memories"]["host"]
    src = os.path.join(REPORT_SOURCES, "report-cases.c")
    check((h["allocations"], h["frees"], h["bytes_allocated"]) == (7, 6, 460),
          f"totals {h['allocations']} {h['frees']} {h['bytes_allocated']}")
    check(h["temporary_allocations"] == 5, f"temporary {h['temporary_allocations']}, not 5")
    check((h["peak_bytes"], h["peak_blocks"]) == (300, 2), f"peak {h['peak_bytes']} in {h['peak_blocks']}")
    check(sorted((s["bytes"], first_frame(s)[2]) for s in h["peak_stacks"]) ==
          [(100, source_line(src, "a = malloc(100)")), (200, source_line(src, "keep = malloc(200)"))],
          f"peak stacks {h['peak_stacks']}")
    check(figures(p, "host") == (200, 1), f"leaked {figures(p, 'host')}")
    check(h["failed_allocations"] == 1, f"failed {h['failed_allocations']}")
    (f,) = h["failures"]
    check((f["function"], f["size"], f["errno"], f["live_bytes"], f["live_blocks"]) == ("malloc", 1 << 62, 12, 200, 1),
          f"failure {f}")
    check(first_frame(f["stack"]) == ("main", "report-cases.c", source_line(src, "malloc((size_t)1 << 62)")),
          f"failure stack {first_frame(f['stack'])}")
    check([(s["bytes"], first_frame(s)[2]) for s in f["top_stacks"]] == [(200, source_line(src, "keep = malloc(200)"))],
          f"held at the failure {f['top_stacks']}")
    check([(b["min"], b["max"], b["count"]) for b in h["histogram"]] == [(32, 63, 5), (64, 127, 1), (128, 255, 1)],
          f"histogram {h['histogram']}")
    shutil.rmtree(d)


def folded(trace, metric, kind):
    r = run([BIN, "flamegraph", "--metric", metric, "--kind", kind, trace])
    check(r.returncode == 0, f"flamegraph --metric {metric} exited {r.returncode}: {r.stderr.decode()}")
    lines = r.stdout.decode().splitlines()
    sums = {}
    for l in lines:
        m = re.fullmatch(r"([^ ;]+(?:;[^ ;]+)*) (\d+)", l)
        check(m, f"not a folded stack line: {l!r}")
        root = m.group(1).split(";")[0]
        sums[root] = sums.get(root, 0) + int(m.group(2))
    check(len(set(l.rsplit(" ", 1)[0] for l in lines)) == len(lines), "a stack on two lines")
    return lines, sums


def test_flamegraph_totals_and_svg():
    renderer = next((p for p in FLAMEGRAPH_PL if p and os.path.exists(p)), None)
    check(renderer, "flamegraph.pl not found (Debian: libdevel-nytprof-perl)")
    for argv in [[program("every-function")], [program("fork-exec"), program("leaker")],
                 [os.path.join(OWN, "report-cases")]]:
        d, trace = trace_of(argv)
        procs = report(trace)["processes"]
        for kind in ["host", "mmap"]:
            for metric in METRICS:
                lines, sums = folded(trace, metric, kind)
                if len(procs) == 1:
                    want = procs[0]["memories"][kind][METRIC_KEYS[metric]]
                    check(sum(sums.values()) == want, f"{argv[0]} {kind} {metric}: folded total {sum(sums.values())} != {want}")
                else:
                    want = {}
                    for p in procs:
                        v = p["memories"][kind][METRIC_KEYS[metric]]
                        if v:
                            root = f"pid_{p['pid']}_({os.path.basename(p['command'].split(' ')[0])})"
                            want[root] = want.get(root, 0) + v
                    check(sums == want, f"{argv[0]} {kind} {metric}: per-process totals {sums} != {want}")
                if lines:
                    folded_file = os.path.join(d, "folded.txt")
                    with open(folded_file, "w") as f:
                        f.write("\n".join(lines) + "\n")
                    r = run(["perl", renderer, folded_file])
                    check(r.returncode == 0 and b"<svg" in r.stdout and b"main" in r.stdout,
                          f"flamegraph.pl did not render {kind} {metric}: {r.stderr.decode()[:500]}")
        shutil.rmtree(d)


def test_check_exit_statuses():
    def check_run(trace, *args):
        return run([BIN, "check", *args, trace])

    d, clean = trace_of([program("leaker"), "0", "100"])
    r = check_run(clean)
    check(r.returncode == 0, f"check on a clean program exits {r.returncode}: {r.stdout.decode()}")
    _, leaky = trace_of([program("leaker"), "10", "100"])
    os.rename(leaky, os.path.join(d, "leaky.bin"))
    leaky = os.path.join(d, "leaky.bin")
    r = check_run(leaky)
    out = r.stdout.decode()
    check(r.returncode == 1, f"check on a leak exits {r.returncode}")
    check("host leaked 500 B in 5 blocks" in out and "main (leaker.c:" in out, f"check's failure output:\n{out}")
    sup = os.path.join(d, "suppressions")
    with open(sup, "w") as f:
        f.write("# the test's own leak\nleak:leaker.c\n")
    r = check_run(leaky, "--suppressions", sup)
    check(r.returncode == 0, f"check with a suppression of the leak exits {r.returncode}: {r.stdout.decode()}")
    with open(sup, "w") as f:
        f.write("leak:^mai*$\n")
    check(check_run(leaky, "--suppressions", sup).returncode == 0, "leak:^mai*$ does not cover main")
    with open(sup, "w") as f:
        f.write("leak:no_such_function\n")
    check(check_run(leaky, "--suppressions", sup).returncode == 1, "a suppression that covers nothing passes")
    check(check_run(leaky, "--max-leaked", "500").returncode == 0, "--max-leaked 500 fails on 500 bytes")
    check(check_run(leaky, "--max-leaked", "1K").returncode == 0, "--max-leaked 1K fails on 500 bytes")
    check(check_run(leaky, "--max-leaked", "499").returncode == 1, "--max-leaked 499 passes 500 bytes")
    check(check_run(leaky, "--max-leaked", "1K", "--max-peak", "1K").returncode == 1,
          "--max-peak 1K passes a peak of 1080 bytes")
    check(check_run(leaky, "--max-leaked", "1K", "--max-peak", "2K").returncode == 0, "--max-peak 2K fails")
    corrupt = os.path.join(d, "corrupt.bin")
    with open(leaky, "rb") as f:
        data = bytearray(f.read())
    data[4096] ^= 0xff  # the first chunk's magic
    with open(corrupt, "wb") as f:
        f.write(data)
    page = os.path.join(d, "corrupt.html")
    commands = [["check"], ["report"], ["report", "--json"], ["flamegraph"]]
    if run([BIN, "view", "--help"]).returncode == 0:  # built with the viewer
        commands.append(["view", "-o", page])
    for cmd in commands:
        r = run([BIN, *cmd, corrupt])
        err = r.stderr.decode().strip()
        check(r.returncode == 2, f"{cmd} on a corrupt trace exits {r.returncode}")
        check(re.fullmatch(rf"memtrace: {re.escape(corrupt)}: byte 4096 \(0x1000\): .+", err),
              f"{cmd}: not one line with the offset: {err!r}")
    check(not os.path.exists(page), "view wrote a page for a corrupt trace")
    shutil.rmtree(d)


main({
    "every-function": test_every_function_exact,
    "fork-exec": test_fork_exec_per_process,
    "cxx": test_cxx_demangled_and_no_operator_new,
    "sigkill": test_sigkill_live_at_death,
    "temporaries-failures-histogram": test_temporaries_failures_histogram,
    "flamegraph": test_flamegraph_totals_and_svg,
    "check": test_check_exit_statuses,
})
