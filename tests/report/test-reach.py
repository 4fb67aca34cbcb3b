# SPDX-License-Identifier: MIT
"""Leak classes end to end (docs/reachability.md): programs/reach-classes,
run by `memtrace run` under the real preload, leaves 100 B reachable from a
global, 200 B dropped (definite), a list of 3 nodes of 48 B whose head is
dropped (48 B definite, 96 B indirect) and 64 B held by an interior pointer
(possible). The JSON split to the byte and block, per kind and per stack;
the text report's leak line and stack order; check's exit status with and
without --count-possible and --count-reachable; and the same program
killed, and with the scan turned off, counted whole as before."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

from harness import BIN, LIB, check, main, run, traced_env, workdir

PROGRAM = os.path.join(os.environ["MEMTRACE_REPORT_PROGRAMS"], "reach-classes")


def traced(mode, extra_env=None):
    """The trace of one run, and the directory that holds it."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    env = dict(os.environ)
    env.pop("MEMTRACE_REACHABILITY", None)
    env.update(extra_env or {})
    r = run([BIN, "run", "-o", trace, "--", PROGRAM, mode], env=env)
    check(r.returncode == (-9 if mode == "kill" else 0),
          f"memtrace run reach-classes {mode}: {r.returncode} {r.stderr.decode()}")
    return d, trace


def report_json(trace):
    r = run([BIN, "report", "--json", trace])
    check(r.returncode == 0, f"memtrace report --json: {r.returncode} {r.stderr.decode()}")
    (proc,) = json.loads(r.stdout)["processes"]
    return proc


def split(**c):
    """A leak_kinds object: every class, 0 where not given."""
    return {k: {"bytes": c.get(k, (0, 0))[0], "blocks": c.get(k, (0, 0))[1]}
            for k in ("definite", "indirect", "possible", "reachable", "unclassified")}


ALL = split(definite=(248, 2), indirect=(96, 2), possible=(64, 1), reachable=(100, 1))
BY_LABEL = {
    "lose_block": split(definite=(200, 1)),
    "new_node": split(definite=(48, 1), indirect=(96, 2)),
    "keep_interior": split(possible=(64, 1)),
    "keep_cache": split(reachable=(100, 1)),
}


def check_status(trace, args, want):
    r = run([BIN, "check", *args, trace])
    check(r.returncode == want,
          f"check {' '.join(args)} exits {r.returncode}, not {want}:\n{r.stdout.decode()}")
    return r.stdout.decode()


def test_classes():
    d, trace = traced("exit")
    proc = report_json(trace)
    host = proc["memories"]["host"]
    check(host["leaked_bytes"] == 508 and host["leaked_blocks"] == 6,
          f"leaked {host['leaked_bytes']} B in {host['leaked_blocks']}")
    check(host["leak_kinds"] == ALL, f"leak_kinds {host['leak_kinds']}")
    check(host["leak_kinds_missing"] is None, f"leak_kinds_missing {host['leak_kinds_missing']}")
    scan = proc["reachability_scan"]
    check(scan is not None and scan["status"] == "done" and scan["detail"] == 0
          and scan["blocks"] == 6 and scan["bytes"] == 508 and scan["scanned_bytes"] > 508,
          f"reachability_scan {scan}")
    got = [(re.match(r"\w+", s["label"])[0], s["bytes"], s["blocks"], s["reachability"])
           for s in host["leak_stacks"]]
    want = [(label, sum(c["bytes"] for c in kinds.values()), sum(c["blocks"] for c in kinds.values()),
             kinds) for label, kinds in BY_LABEL.items()]
    check(got == want, f"leak_stacks:\n{got}\nwant\n{want}")
    mmap = proc["memories"]["mmap"]
    check(mmap["leak_kinds"] is None
          and mmap["leak_kinds_missing"] == "not a malloc-family kind: only malloc's blocks are classified",
          f"mmap: {mmap['leak_kinds']} {mmap['leak_kinds_missing']}")

    r = run([BIN, "report", trace])
    check(r.returncode == 0, f"memtrace report: {r.returncode}")
    text = r.stdout.decode()
    check("    leaked 508 B in 6 blocks: definite 248 B in 2, indirect 96 B in 2, possible 64 B in 1, "
          "reachable 100 B in 1\n" in text, f"the leak line:\n{text}")
    leak_part = text[text.index("    leaked 508 B"):]
    lines = re.findall(r"^      (\d+ B in \d+ blocks?) by (\w+) \(reach-classes\.c:\d+\) \((.*)\)$",
                       leak_part, re.M)
    check(lines == [("200 B in 1 block", "lose_block", "definite 200 B in 1"),
                    ("144 B in 3 blocks", "new_node", "definite 48 B in 1, indirect 96 B in 2"),
                    ("64 B in 1 block", "keep_interior", "possible 64 B in 1"),
                    ("100 B in 1 block", "keep_cache", "reachable 100 B in 1")],
          f"the leak stacks in order:\n{lines}\n{leak_part}")

    # definite + indirect: 344 B; + possible 408; + reachable 444; both 508
    out = check_status(trace, [], 1)
    check("host leaked 344 B in 4 blocks (definite + indirect), more than 0 B" in out, out)
    check(out.endswith("; not counted: possible 64 B in 1, reachable 100 B in 1\n"), out)
    check_status(trace, ["--max-leaked", "344"], 0)
    check_status(trace, ["--max-leaked", "343"], 1)
    check_status(trace, ["--max-leaked", "344", "--count-possible"], 1)
    out = check_status(trace, ["--max-leaked", "408", "--count-possible"], 0)
    check(out == "memtrace check: ok: 1 process; not counted: reachable 100 B in 1\n", out)
    check_status(trace, ["--max-leaked", "443", "--count-reachable"], 1)
    check_status(trace, ["--max-leaked", "444", "--count-reachable"], 0)
    out = check_status(trace, ["--max-leaked", "507", "--count-possible", "--count-reachable"], 1)
    check("host leaked 508 B in 6 blocks (definite + indirect + possible + reachable), more than 507 B"
          in out, out)
    out = check_status(trace, ["--max-leaked", "508", "--count-possible", "--count-reachable"], 0)
    check(out == "memtrace check: ok: 1 process\n", out)
    sup = os.path.join(d, "suppressions")
    with open(sup, "w") as f:
        f.write("leak:lose_block\n")
    check_status(trace, ["--max-leaked", "144", "--suppressions", sup], 0)
    check_status(trace, ["--max-leaked", "143", "--suppressions", sup], 1)
    shutil.rmtree(d)


def unclassified(mode, env, why):
    """Every live block counted, as before the scan, and the reason given."""
    d, trace = traced(mode, env)
    proc = report_json(trace)
    host = proc["memories"]["host"]
    check(host["leaked_bytes"] == 508 and host["leak_kinds"] is None
          and host["leak_kinds_missing"] == why,
          f"{mode}: {host['leaked_bytes']} {host['leak_kinds']} {host['leak_kinds_missing']}")
    check(all(s["reachability"] is None for s in host["leak_stacks"]), f"{mode}: {host['leak_stacks']}")
    text = run([BIN, "report", trace]).stdout.decode()
    check(f"in 6 blocks\n      not classified: {why}\n" in text, f"{mode}: the report says\n{text}")
    check_status(trace, ["--max-leaked", "507"], 1)
    check_status(trace, ["--max-leaked", "508"], 0)
    shutil.rmtree(d)
    return proc


def test_killed():
    proc = unclassified("kill", None, "killed")
    check(proc["reachability_scan"] is None, f"killed: {proc['reachability_scan']}")


def test_off():
    proc = unclassified("exit", {"MEMTRACE_REACHABILITY": "0"}, "turned off (MEMTRACE_REACHABILITY=0)")
    scan = proc["reachability_scan"]
    check(scan is not None and scan["status"] == "off", f"off: {scan}")


def test_nothing_live():
    """A process with no live block at its exit (true, a real program) is not
    scanned: nothing to classify, and the 1.6 MiB of roots a traced true
    has would cost it milliseconds at every start of a shell's commands."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run([BIN, "run", "-o", trace, "--", shutil.which("true")])
    check(r.returncode == 0, f"memtrace run true: {r.returncode} {r.stderr.decode()}")
    proc = report_json(trace)
    scan = proc["reachability_scan"]
    check(scan is not None and scan["status"] == "done" and scan["blocks"] == 0
          and scan["scanned_bytes"] == 0, f"reachability_scan {scan}")
    host = proc["memories"]["host"]
    check(host["leaked_bytes"] == 0 and host["leak_kinds"] == split(),
          f"{host['leaked_bytes']} {host['leak_kinds']}")
    shutil.rmtree(d)


def test_fork_temporary():
    """A block allocated just before a fork and freed by the parent once the
    child has begun: to the child's scan, which reads the parent's records
    up to its own start, it is live (the child holds it: 777 B reachable),
    although the two records stand in a row, as a temporary's do."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    program = os.path.join(os.environ["MEMTRACE_REPORT_PROGRAMS"], "reach-fork-temporary")
    r = run([BIN, "run", "-o", trace, "--", program])
    check(r.returncode == 0, f"memtrace run reach-fork-temporary: {r.returncode} {r.stderr.decode()}")
    r = run([BIN, "report", "--json", trace])
    check(r.returncode == 0, f"memtrace report --json: {r.returncode} {r.stderr.decode()}")
    procs = {p["origin"]: p for p in json.loads(r.stdout)["processes"]}
    check(sorted(procs) == ["fork", "root"], f"processes {sorted(procs)}")
    child, parent = procs["fork"]["memories"]["host"], procs["root"]["memories"]["host"]
    check(child["leak_kinds"] == split(reachable=(777, 1)), f"the child's leak_kinds {child['leak_kinds']}")
    check(parent["leak_kinds"] == split(), f"the parent's leak_kinds {parent['leak_kinds']}")
    shutil.rmtree(d)


def test_tree_reads_its_own_chunks():
    """In a process tree each exit's scan reads back its own process's chunks
    (and a fork child its ancestors' too), not the whole tree's trace so far,
    and still knows every live block. A real bash: a subshell (a fork child
    that exits) and 12 exec'd true and seq."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run([BIN, "run", "-o", trace, "--", shutil.which("bash"), "-c",
             "( : ); for i in $(seq 12); do " + shutil.which("true") + "; done"])
    check(r.returncode == 0, f"memtrace run bash: {r.returncode} {r.stderr.decode()}")
    dump = run([BIN, "dump", trace])
    check(dump.returncode == 0, f"memtrace dump: {dump.returncode}")
    own = {}
    for inst in re.findall(rb"^0x[0-9a-f]+ chunk \d+ size \d+ instance (\d+) ", dump.stdout, re.M):
        own[int(inst)] = own.get(int(inst), 0) + 1
    r = run([BIN, "report", "--json", trace])
    procs = json.loads(r.stdout)["processes"]
    scanned = [p for p in procs if p["reachability_scan"]]
    check(len(scanned) == 15, f"{len(scanned)} scans: {[p['exe'] for p in scanned]}")
    for p in scanned:
        scan, host = p["reachability_scan"], p["memories"]["host"]
        unclassified = host["leak_kinds"]["unclassified"]["blocks"]
        check(scan["status"] == "done" and scan["blocks"] + unclassified == host["live_at_end_blocks"],
              f"{p['exe']} ({p['origin']}): scan knew {scan['blocks']} + {unclassified} blocks, "
              f"{host['live_at_end_blocks']} were live")
        if p["origin"] != "fork":  # its chunks claimed after the scan (EXIT's) are not read
            check(1 <= scan["trace_chunks_read"] <= own[p["instance"]],
                  f"{p['exe']} ({p['origin']}) read {scan['trace_chunks_read']} chunks back, "
                  f"it wrote {own[p['instance']]}, the tree {sum(own.values())}")
        else:
            parent = own[p["parent_instance"]]
            check(1 < scan["trace_chunks_read"] <= own[p["instance"]] + parent,
                  f"the subshell read {scan['trace_chunks_read']} chunks back: its own "
                  f"{own[p['instance']]} and some of its parent's {parent}")
    shutil.rmtree(d)


# the peak RSS of the largest process a command ran (the exit's copy is the traced program's child)
# (traced with LD_PRELOAD=sys.argv[1]; the wrapper itself is not)
LARGEST_RSS = ("import os, resource, subprocess, sys; "
               "subprocess.run(sys.argv[2:], env=dict(os.environ, LD_PRELOAD=sys.argv[1]), "
               "stdout=subprocess.DEVNULL); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)")


def test_reads_back_in_little_memory():
    """The exit's copy reads its process's records back from the trace, chunk by chunk, and lets
    each chunk's pages go: its RSS does not grow with the trace (it held the whole trace mapped:
    34.6 MB for a 32 MiB trace, 10.9 GB for 11 GB). `memtrace report` likewise (it kept 15% of a
    trace mapped, the pages a fault maps around it: 55.7 MB at 222 MB). bench-small's 20M pairs,
    a trace of about 220 MB, against 300,000 pairs without the scan (3.4 MB; the same stacks
    and live set): each peak within 1/16 of the big trace of the small run's."""
    d = workdir()
    bench = os.path.join(os.path.dirname(PROGRAM), "..", "..", "bench", "bench-small")
    peaks, traces = {}, {}
    for name, scan, pairs in (("big", "1", "20000000"), ("small", "0", "300000")):
        trace = traces[name] = os.path.join(d, f"{name}.bin")
        env = dict(os.environ, MEMTRACE_OUTPUT=trace, MEMTRACE_REACHABILITY=scan)
        r = run([sys.executable, "-c", LARGEST_RSS, LIB, bench, pairs], env=env)
        check(r.returncode == 0, f"bench-small traced: {r.returncode} {r.stderr.decode()}")
        peaks[name] = int(r.stdout)
    size = os.path.getsize(traces["big"])
    check(size > 160 << 20, f"the trace is {size} bytes, too small to tell")
    (proc,) = json.loads(run([BIN, "report", "--json", traces["big"]]).stdout)["processes"]
    check(proc["reachability_scan"]["status"] == "done", f"the scan did not run: {proc['reachability_scan']}")
    check(peaks["big"] <= peaks["small"] + size // 16,
          f"with the scan the largest process peaked at {peaks['big']} bytes, without it "
          f"{peaks['small']}: the copy held {peaks['big'] - peaks['small']} of the trace's {size}")
    report = {}
    for name, trace in traces.items():
        r = run([sys.executable, "-c", LARGEST_RSS, "", BIN, "report", "--json", trace])
        check(r.returncode == 0, f"memtrace report: {r.returncode} {r.stderr.decode()}")
        report[name] = int(r.stdout)
    check(report["big"] <= report["small"] + size // 16,
          f"memtrace report peaked at {report['big']} bytes on a trace of {size}, at "
          f"{report['small']} on one of {os.path.getsize(traces['small'])}")
    shutil.rmtree(d)


def test_out_of_time():
    """The scan holds the program's exit for at most MEMTRACE_REACHABILITY_MS
    (a container's stop, a service manager's, kills a program whose exit
    takes too long, and the trace then says killed): bench-churn's 12 million
    records take the copy hundreds of ms to read back, even on two cores; given 50 ms, it stops
    there, the program exits as it would, its 3 live blocks (libc's, which
    the whole scan finds possible or reachable, so that check passes) are
    counted whole with the reason, so that check fails, and the line on
    stderr says so once."""
    d = workdir()
    churn = os.path.join(os.path.dirname(PROGRAM), "..", "..", "bench", "bench-churn")
    scans = {}
    for name, limit in (("whole", None), ("cut", "50")):
        trace = os.path.join(d, f"{name}.bin")
        env = dict(os.environ, MEMTRACE_OUTPUT=trace, LD_PRELOAD=LIB)
        env.pop("MEMTRACE_REACHABILITY", None)
        if limit:
            env["MEMTRACE_REACHABILITY_MS"] = limit
        r = run([churn, "3000000"], env=env)
        check(r.returncode == 0, f"bench-churn {name}: {r.returncode} {r.stderr.decode()}")
        lines = [x for x in r.stderr.decode().splitlines() if "not classified" in x]
        proc = report_json(trace)
        scans[name] = proc["reachability_scan"]
        host = proc["memories"]["host"]
        check(host["leaked_blocks"] == 3, f"{name}: leaked {host['leaked_blocks']} blocks, not 3")
        if not limit:
            check(scans[name]["status"] == "done" and not lines, f"whole: {scans[name]} {lines}")
            check(host["leak_kinds"]["definite"]["blocks"] + host["leak_kinds"]["indirect"]["blocks"] == 0,
                  f"whole: {host['leak_kinds']}")
            check_status(trace, ["--max-leaked", "0"], 0)
            continue
        why = "the scan ran out of time: 50 ms (MEMTRACE_REACHABILITY_MS)"
        check(lines == [f"memtrace: leaks not classified: {why}"], f"stderr: {lines}")
        check(host["leak_kinds"] is None and host["leak_kinds_missing"] == why,
              f"{host['leak_kinds']} {host['leak_kinds_missing']}")
        check_status(trace, ["--max-leaked", "0"], 1)
    cut, whole = scans["cut"], scans["whole"]
    check(cut["status"] == "timeout" and cut["detail"] == 50, f"cut: {cut}")
    check(whole["ns"] > 3 * 50_000_000, f"the whole scan took {whole['ns']} ns: too fast to tell")
    check(50_000_000 <= cut["ns"] < whole["ns"] / 2,
          f"the cut scan held the exit {cut['ns']} ns, the whole one {whole['ns']}")
    shutil.rmtree(d)


def test_root_that_faults():
    """A writable shared mapping of a file cut to nothing is a root whose
    every page raises SIGBUS when read: the copy steps over each (its
    handlers set by the raw syscall, as no other library's sigaction may run
    in it), and classifies the 100 B a global holds and the 200 B dropped."""
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    prog = os.path.join(os.environ["MEMTRACE_REPORT_PROGRAMS"], "reach-cut-map")
    r = run([BIN, "run", "-o", trace, "--", prog, os.path.join(d, "mapped")])
    check(r.returncode == 0, f"memtrace run reach-cut-map: {r.returncode} {r.stderr.decode()}")
    proc = report_json(trace)
    scan = proc["reachability_scan"]
    check(scan["status"] == "done" and scan["blocks"] == 2 and scan["bytes"] == 300, f"{scan}")
    kinds = proc["memories"]["host"]["leak_kinds"]
    check(kinds == split(definite=(200, 1), reachable=(100, 1)), f"leak_kinds {kinds}")
    shutil.rmtree(d)


def children(pid):
    """The pids of the children of pid's first thread; none once it is gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def exit_watched(mode, trace, kill_copy, namespace=False):
    """reach-subreaper run traced (with namespace, as the first process of a pid namespace of
    its own, as in a container: under `unshare --pid --fork`); while it exits, its children
    (the exit's copy) and theirs (the copy's second process) looked at without pause, and with
    kill_copy the copy killed once it has one, as the OOM killer may (oom_score_adj 1000 makes
    the copy its first choice). Its exit status, stdout, and whether a second process was
    seen."""
    prog = os.path.join(os.environ["MEMTRACE_REPORT_PROGRAMS"], "reach-subreaper")
    env = traced_env(trace)
    env.pop("MEMTRACE_REACHABILITY", None)
    wrap = []
    if namespace:
        # unshare itself untraced: the copy of a process whose pid namespace has ended
        # cannot be made (clone: ENOMEM), and its scan fails, as memtrace then says
        wrap = ["unshare", "--pid", "--fork", "env", f"LD_PRELOAD={env.pop('LD_PRELOAD')}"]
    p = subprocess.Popen(wrap + [prog, mode, str(SUBREAPER_PAIRS)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = False
    while p.poll() is None:
        progs = children(p.pid) if namespace else [p.pid]
        for copy in (c for pid in progs for c in children(pid)):
            if children(copy):
                seen = True
                if kill_copy:
                    os.kill(copy, signal.SIGKILL)
    out, err = p.communicate(timeout=60)
    return p.returncode, out.decode(), err.decode(), seen


# about 22 MB of records: read back on two cores (more than 4 MiB) for some 60 ms
SUBREAPER_PAIRS = 2_000_000


def test_subreaper_gets_no_orphan():
    """A program that takes in orphans (a child subreaper, or the first process of a pid
    namespace, as a container's is) never gets one of memtrace's: had the copy a second process and died first (killed: the
    OOM killer's first choice), the kernel would hand that process to the program, which
    would get a SIGCHLD and a child it never made. Its copy reads on one core. A plain
    program's copy reads the same trace on two (the size is enough), so that the watch can
    see a second process."""
    check((os.cpu_count() or 1) >= 2, "one core: the copy never reads on two")
    d = workdir()
    trace = os.path.join(d, "plain.bin")
    code, out, err, seen = exit_watched("plain", trace, kill_copy=False)
    check(code == 0 and out == "done\n", f"plain: exit {code}, stdout {out!r}, stderr {err}")
    check(seen, "plain: no second process was seen: the trace is too small to tell")
    trace = os.path.join(d, "subreaper.bin")
    code, out, err, seen = exit_watched("subreaper", trace, kill_copy=True)
    check(code == 0 and out == "done\n", f"subreaper: exit {code}, stdout {out!r}, stderr {err}")
    check(not seen and not err, f"subreaper: a second process {seen}, stderr {err!r}")
    proc = report_json(trace)
    scan = proc["reachability_scan"]
    check(scan["status"] == "done", f"subreaper: {scan}")
    kinds = proc["memories"]["host"]["leak_kinds"]
    check(kinds == split(definite=(200, 1), reachable=(100, 1)), f"leak_kinds {kinds}")
    # pid 1 of its namespace: neither a subreaper nor handed the orphan by a flag of its own
    trace = os.path.join(d, "pid1.bin")
    code, out, err, seen = exit_watched("plain", trace, kill_copy=True, namespace=True)
    check(code == 0 and out == "done\n", f"pid 1: exit {code}, stdout {out!r}, stderr {err}")
    check(not seen and not err, f"pid 1: a second process {seen}, stderr {err!r}")
    check(report_json(trace)["reachability_scan"]["status"] == "done", "pid 1: no scan")
    shutil.rmtree(d)


main({"classes": test_classes, "root-that-faults": test_root_that_faults, "out-of-time": test_out_of_time, "killed": test_killed, "off": test_off,
      "nothing-live": test_nothing_live, "tree": test_tree_reads_its_own_chunks,
      "fork-temporary": test_fork_temporary, "little-memory": test_reads_back_in_little_memory,
      "subreaper": test_subreaper_gets_no_orphan})
