# SPDX-License-Identifier: MIT
"""A traced process that execs a program memtrace cannot enter (a static
executable here; a setuid one is the same) ends "replaced by an untraced
program", not killed, and its live blocks are not "live at death"; an exec
that fails changes nothing; a vfork child (the parent's memory, the parent's
memtrace) records nothing into its parent.

With MEMTRACE_SAMPLING in the environment (capture-exec-sampled) the same in
sampled mode; the cases that check exact figures run at an interval under
which the program's blocks are recorded exactly (harness.exact_above)."""
import json
import os
import re
import shutil

from harness import BIN, check, exact_above, main, program, run, run_traced, workdir

STATIC = program("static-exit")
FNS = ["execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve", "execveat"]


def traced(argv, extra=None, expect_stdout=None):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced(argv, trace, extra)
    check(r.returncode == 0, f"{argv} exited {r.returncode} under the preload: {r.stderr.decode()}")
    if expect_stdout is not None:
        check(r.stdout.decode() == expect_stdout, f"{argv} printed {r.stdout.decode()!r}, not {expect_stdout!r}")
    return d, trace


def report(trace):
    r = run([BIN, "report", "--json", trace])
    check(r.returncode == 0, f"memtrace report --json exited {r.returncode}: {r.stderr.decode()}")
    return json.loads(r.stdout)["processes"]


def report_text(trace):
    r = run([BIN, "report", trace])
    check(r.returncode == 0, f"memtrace report exited {r.returncode}: {r.stderr.decode()}")
    return r.stdout.decode()


def dump_lines(trace, record):
    r = run([BIN, "dump", trace])
    check(r.returncode == 0, f"memtrace dump exited {r.returncode}: {r.stderr.decode()}")
    return [l for l in r.stdout.decode().splitlines() if re.search(rf"\b{record}\b", l)]


def host(p):
    h = p["memories"]["host"]
    return {k: h[k] for k in ("allocations", "frees", "leaked_bytes", "leaked_blocks",
                              "live_at_end_bytes", "live_at_end_blocks")}


def test_static_child_is_replaced_not_killed():
    d, trace = traced([program("exec-untraced"), "fork", STATIC], exact_above(1000),
                      expect_stdout=f"- {STATIC} one two\n")
    procs = report(trace)
    check(len(procs) == 2, f"{len(procs)} processes, not the parent and its child: {procs}")
    parent, child = procs
    check(child["ppid"] == parent["pid"], "the second process is not the parent's child")
    check(parent["end"] == "exit" and parent["exit_status"] == 0, f"parent: end {parent['end']}")
    check(child["end"] == "exec-untraced" and child["exec_path"] == STATIC,
          f"child: end {child['end']}, exec_path {child.get('exec_path')}: not replaced by {STATIC}")
    check(child["exit_status"] is None, f"child exit_status {child['exit_status']}")
    want = {"allocations": 3, "frees": 0, "leaked_bytes": 0, "leaked_blocks": 0,
            "live_at_end_bytes": 3000, "live_at_end_blocks": 3}
    check(host(child) == want, f"child's host figures {host(child)}, not {want}")
    check(parent["exec_path"] is None, f"parent exec_path {parent['exec_path']}")
    text = report_text(trace)
    check(f"  replaced by an untraced program {STATIC}\n" in text,
          f"the text report does not say the child was replaced:\n{text}")
    check("killed (no exit record)" not in text and "live at death" not in text,
          f"the text report says killed:\n{text}")
    shutil.rmtree(d)


def test_every_exec_function():
    name = os.path.basename(STATIC)
    out = "".join(f"{fn} {name} one two\n" for fn in FNS)
    d, trace = traced([program("exec-untraced"), "each", STATIC], expect_stdout=out)
    procs = report(trace)
    check(len(procs) == 1 + len(FNS), f"{len(procs)} processes, not 1 + {len(FNS)}")
    real = os.path.realpath(STATIC)
    want = {"execvp": name, "execvpe": name, "execlp": name, "fexecve": real, "execveat": real}
    for fn, p in zip(FNS, procs[1:]):
        path = want.get(fn, STATIC)
        check(p["end"] == "exec-untraced" and p["exec_path"] == path,
              f"{fn}: end {p['end']}, exec_path {p.get('exec_path')}, not replaced by {path}")
        check(p["memories"]["host"]["leaked_bytes"] == 0, f"{fn}: leaked {host(p)}")
    shutil.rmtree(d)


def test_failed_exec_changes_nothing():
    d, trace = traced([program("exec-untraced"), "missing"],
                      {"PATH": "/nonexistent-memtrace-test", **exact_above(500)})
    (p,) = report(trace)
    check(p["end"] == "exit" and p["exit_status"] == 0 and p["exit_how"] == "main returned",
          f"end {p['end']} status {p['exit_status']} how {p.get('exit_how')}")
    want = {"allocations": 5, "frees": 2, "leaked_bytes": 1500, "leaked_blocks": 3,
            "live_at_end_bytes": 1500, "live_at_end_blocks": 3}
    check(host(p) == want, f"host figures {host(p)}, not {want}")
    # every attempt is recorded, with what it was given
    paths = [re.search(r' path "(.*)"', l).group(1) for l in dump_lines(trace, "EXEC")]
    name, missing = "nonexistent-memtrace-test", "/tmp/nonexistent-memtrace-test"
    # in FNS order, fexecve (on /dev/null) last; execveat's path is its folder's and the name
    want = [missing, missing, name, name, missing, name, missing, missing, "/dev/null"]
    check(paths == want, f"EXEC records {paths}, not {want}")
    shutil.rmtree(d)


def test_vfork_child_records_nothing_into_its_parent():
    d, trace = traced([program("exec-untraced"), "vfork"], exact_above(300))
    (p,) = report(trace)
    check(p["end"] == "exit" and p["exit_status"] == 0 and p["exit_how"] == "main returned",
          f"end {p['end']} status {p['exit_status']} how {p.get('exit_how')}: the vfork child's _exit(127)?")
    want = {"allocations": 4, "frees": 1, "leaked_bytes": 900, "leaked_blocks": 3,
            "live_at_end_bytes": 900, "live_at_end_blocks": 3}
    check(host(p) == want, f"host figures {host(p)}, not {want}")
    check(len(dump_lines(trace, "EXIT")) == 1, "not one EXIT record")
    check(not dump_lines(trace, "EXEC"), "the vfork child's exec was recorded into its parent")
    shutil.rmtree(d)


main({
    "static_child_is_replaced_not_killed": test_static_child_is_replaced_not_killed,
    "every_exec_function": test_every_exec_function,
    "failed_exec_changes_nothing": test_failed_exec_changes_nothing,
    "vfork_child_records_nothing_into_its_parent": test_vfork_child_records_nothing_into_its_parent,
})
