# SPDX-License-Identifier: MIT
"""Names from a trace (argv, marks, paths) in every output: text escapes
control characters and bytes that are not UTF-8, so a name can neither
forge a line nor reach the terminal as an escape sequence; JSON escapes
the bytes that are not UTF-8 reversibly and never drops a key
(docs/json-report.md). And every key that document lists for a PROCESS,
KIND, STACK and FRAME is in each of them, whatever the process's end
(exit, exec), null where it does not apply.
Usage: test-names.py MEMTRACE MAKE-NAMES-TRACE"""
import json
import os
import re
import subprocess
import sys
import tempfile

MEMTRACE, MAKE = sys.argv[1], sys.argv[2]
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print(f"FAIL {what}")


def run(*args):
    return subprocess.run([MEMTRACE, *args], capture_output=True)


def raw_controls(out):
    """The control bytes (C0 but the newline ending a line, DEL, C1 as UTF-8) and invalid UTF-8."""
    bad = [c for c in out if (c < 0x20 and c != 0x0a) or c == 0x7f]
    bad += [i for i in range(len(out) - 1) if out[i] == 0xc2 and 0x80 <= out[i + 1] < 0xa0]
    try:
        out.decode("utf-8")
    except UnicodeDecodeError as e:
        bad.append(str(e))
    return bad


CMD = rb"prog \x0amemtrace check: ok: 1 process \x1b]52;c;aGk=\x07 \xc2\x9b2J\x7f"
FRAME = rb"lib\x0amemtrace check: ok: 1 process\x1b[8m.so+0x100"

with tempfile.TemporaryDirectory() as d:
    trace = os.path.join(d, "inject.bin")
    subprocess.run([MAKE, "inject", trace], check=True)
    outputs = {
        "report": run("report", trace),
        "check": run("check", trace),
        "check-ok": run("check", "--max-leaked", "1K", trace),
        "flamegraph": run("flamegraph", "--metric", "leaked", trace),
        "dump": run("dump", trace),
        "dump --summary": run("dump", "--summary", trace),
    }
    for name, r in outputs.items():
        check(not raw_controls(r.stdout + r.stderr), f"{name}: raw control bytes {raw_controls(r.stdout)}")
    lines = outputs["report"].stdout.splitlines()
    check(b"process 4242 (ppid 1): " + CMD in lines, f"report: the command line: {lines}")
    check(b"        " + FRAME in lines, f"report: the frame: {lines}")
    check(b'    1 mark, the last "\\x0amemtrace check: ok: 1 process\\x1b]52;c;aGk=\\x07"' in lines,
          f"report: the mark: {lines}")
    check(b"process 4243 (ppid 4242): /bin/x\\x0amemtrace check: ok: 1 process\\x1b[8m" in lines,
          f"report: the exec'd program: {lines}")
    r = outputs["check"]
    check(r.returncode == 1, f"check exits {r.returncode}")
    check(r.stdout.splitlines() == [
        b"memtrace check: process 4242 (" + CMD + b"): host leaked 100 B in 1 block, more than 0 B",
        b"  100 B in 1 block by " + FRAME + b": " + FRAME,
        b"memtrace check: FAILED (1 limit exceeded)"], f"check: {r.stdout}")
    r = outputs["check-ok"]
    check(r.returncode == 0, f"check --max-leaked 1K exits {r.returncode}")
    check(r.stdout == b"memtrace check: ok: 3 processes\n", f"check --max-leaked 1K: {r.stdout}")
    r = outputs["flamegraph"]
    check(r.stdout == b"pid_4242_(prog);lib\\x0amemtrace_check:_ok:_1_process\\x1b[8m.so+0x100 100\n",
          f"flamegraph: {r.stdout}")
    r = outputs["dump --summary"]
    check(b" command " + CMD + b"\n" in r.stdout, f"dump --summary: {r.stdout}")


# docs/json-report.md
PROCESS = {"pid", "ppid", "instance", "parent_instance", "origin", "command", "exe", "end", "stop_errno",
           "exit_status", "exit_how", "exec_path", "threads", "events", "lost_stack_events", "sampling", "window",
           "memories",
           "diagnosis", "reachability_scan"}
KIND = {"allocations", "frees", "bytes_allocated", "temporary_allocations", "peak_bytes", "peak_blocks",
        "peak_time_ns", "leaked_bytes", "leaked_blocks", "live_at_end_bytes", "live_at_end_blocks",
        "inherited_bytes", "inherited_blocks", "unknown_frees", "failed_allocations", "peak_stacks",
        "peak_stacks_total", "leak_stacks", "leak_stacks_total", "failures", "histogram", "leak_kinds",
        "leak_kinds_missing"}
STACK = {"bytes", "blocks", "allocations", "temporary", "stack", "stack_instance", "frames", "label",
         "reachability"}
FRAME = {"function", "file", "line", "module", "address", "offset", "inlined"}


def unescape(s):
    """docs/json-report.md: \\\\ is a backslash, \\xNN a byte."""
    return re.sub(rb"\\(\\|x([0-9a-f]{2}))",
                  lambda m: bytes([int(m[2], 16)]) if m[2] else b"\\", s.encode())


with tempfile.TemporaryDirectory() as d:
    trace = os.path.join(d, "latin1.bin")
    subprocess.run([MAKE, "latin1", trace], check=True)
    r = run("report", "--json", trace)
    check(r.returncode == 0, f"report --json exits {r.returncode}: {r.stderr}")
    procs = json.loads(r.stdout)["processes"]
    got = [(p.get("command"), p.get("exe"), p.get("exec_path", "missing")) for p in procs]
    check(got == [("caf\\xe9 na\\xefve\\\\x41", "/bin/caf\\xe9", None),
                  ("caf\\xe9 na\\xefve\\\\x41", "/bin/caf\\xe9", "/bin/tr\\xe9s"),
                  ("/bin/tr\\xe9s", "/bin/tr\\xe9s", None)], f"report --json: {got}")
    command = procs[0].get("command", "")
    check(unescape(command) == b"caf\xe9 na\xefve\\x41", f"unescaped: {command}")
    check([(p["end"], p["exit_status"], p["exit_how"]) for p in procs if "exit_how" in p]
          == [("exit", 0, "exit()"), ("exec", None, None), ("exit", 0, "main returned")],
          f"report --json exit_how: {[(p['end'], p.get('exit_how', 'missing')) for p in procs]}")
    for p in procs:
        check(set(p) == PROCESS, f"instance {p['instance']} ({p['end']}): keys {set(p) ^ PROCESS}")
        for kind, k in p["memories"].items():
            check(set(k) == KIND, f"instance {p['instance']} {kind}: keys {set(k) ^ KIND}")
            stacks = k["peak_stacks"] + k["leak_stacks"]
            for f in k["failures"]:
                stacks += [f["stack"]] + f["top_stacks"]
            for st in stacks:
                check(set(st) == STACK, f"instance {p['instance']} {kind}: stack keys {set(st) ^ STACK}")
                for fr in st["frames"]:
                    check(set(fr) == FRAME, f"frame keys {set(fr) ^ FRAME}")
    marks = procs[0]["diagnosis"].get("marks", [])
    check([m.get("label") for m in marks] == ["\\xe9t\\xe9"], f"report --json marks: {marks}")
    frames = procs[0]["memories"]["host"]["peak_stacks"][0]["frames"]
    check([(f["function"], f["file"], f["module"]) for f in frames] == [(None, None, "/lib/libcaf\\xe9.so")],
          f"report --json frames: {frames}")
    failures = procs[0]["memories"]["host"]["failures"]
    check([f["stack"] for f in failures] == [
        {"bytes": 1 << 30, "blocks": 0, "allocations": 1, "temporary": 0, "stack": 1, "stack_instance": 1,
         "frames": frames, "label": "libcaf\\xe9.so+0x100",
         "reachability": None}], f"report --json failure stack: {failures}")
    check([[(st["bytes"], st["blocks"], st["allocations"]) for st in f["top_stacks"]] for f in failures]
          == [[(100, 1, 1)]], f"report --json failure top_stacks: {failures}")
    r = run("dump", "--summary", "--json", trace)
    got = [(p.get("command"), p.get("exe"), p.get("exec_path", "missing"))
           for p in json.loads(r.stdout)["processes"]]
    check(got == [("caf\\xe9 na\\xefve\\\\x41", "/bin/caf\\xe9", None),
                  ("caf\\xe9 na\\xefve\\\\x41", "/bin/caf\\xe9", "/bin/tr\\xe9s"),
                  ("/bin/tr\\xe9s", "/bin/tr\\xe9s", None)], f"dump --json: {got}")
    page = os.path.join(d, "page.html")
    r = run("view", "-o", page, trace)
    if b"built without the viewer" not in r.stderr:
        check(r.returncode == 0, f"view exits {r.returncode}: {r.stderr}")
        html = open(page, "rb").read() if os.path.exists(page) else b""
        check(b'"command":"caf\\\\xe9 na\\\\xefve\\\\\\\\x41"' in html
              and b"libcaf\\\\xe9.so+0x100" in html, "view: the escaped names in the page")

sys.exit(1 if failed else 0)
