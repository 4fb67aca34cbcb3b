# SPDX-License-Identifier: MIT
"""memtrace dump on known traces: the summary's figures, the exit statuses
(0 ok, 1 usage, 2 unreadable trace) and the one-line error with the byte
offset. Usage: test-cli.py MEMTRACE MAKE-TRACE"""
import json
import os
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


def dump(*args):
    return subprocess.run([MEMTRACE, "dump", *args], capture_output=True, text=True)


with tempfile.TemporaryDirectory() as d:
    traces = {}
    for s in ["good", "cut", "newer"]:
        traces[s] = os.path.join(d, s + ".bin")
        subprocess.run([MAKE, s, traces[s]], check=True)

    r = dump("--summary", traces["good"])
    check(r.returncode == 0, f"dump --summary exits {r.returncode}: {r.stderr}")
    lines = r.stdout.splitlines()
    check("process 1 pid 4242 host allocations 3 frees 1 bytes_allocated 1300 live 300 bytes 2 blocks "
          "peak 1300 bytes 3 blocks at +1.000300ms" in r.stdout, f"root host line: {lines}")
    check("process 1 pid 4242 mmap allocations 1 frees 1 bytes_allocated 16384 live 12288 bytes 2 blocks"
          in r.stdout, f"root mmap line: {lines}")
    check(any(l.startswith("process 1 pid 4242 ppid 1 origin root") and " end exit status 3 how exit " in l
              and l.endswith(" command prog --flag") for l in lines), f"root line: {lines}")
    check(any(l.startswith("process 2 pid 4243 ppid 4242 origin fork parent 1") and " end killed " in l
              for l in lines), f"child line: {lines}")
    check("process 2 pid 4243 host allocations 0 frees 1 bytes_allocated 0 live 1200 bytes 2 blocks" in r.stdout,
          f"child host line: {lines}")

    r = dump("--json", traces["good"])
    check(r.returncode == 0, f"dump --json exits {r.returncode}")
    j = json.loads(r.stdout)
    p1, p2 = j["processes"]
    check(p1["end"] == "exit" and p1["exit_status"] == 3, f"json root end: {p1}")
    check(p1["memories"]["host"]["live_bytes"] == 300 and p1["memories"]["host"]["live_blocks"] == 2,
          f"json root host: {p1['memories']['host']}")
    check(p2["memories"]["host"]["inherited_bytes"] == 1300, f"json child: {p2['memories']['host']}")
    check(j["events"] == 7, f"json events {j['events']}")

    r = dump(traces["good"])
    check(r.returncode == 0, "dump exits non-zero")
    check(any(l.startswith("0x") and " ALLOC calloc 0x20000 size 200 stack 0" in l for l in r.stdout.splitlines()),
          "no ALLOC line")
    # a REACH record as written before 2026-11-26: its chunks field absent, read as 0
    check(any(l.endswith(" t=+1.000650ms REACH status done detail 0 blocks 2 bytes 300 scanned 8192 ns 40000 chunks 0")
              for l in r.stdout.splitlines()), "no REACH line")
    check(any(l.endswith(" REACH_BLOCKS class definite blocks 1 0x20000") for l in r.stdout.splitlines()),
          "no REACH_BLOCKS line")

    r = dump(traces["cut"])
    check(r.returncode == 0, f"a cut trace exits {r.returncode}")
    check(r.stderr == f"memtrace: {traces['cut']}: the file ends at byte 11288, 1000 bytes short of "
          "what was written (a copy or a write cut short): its complete records are read, and a "
          "process whose end may be in what is missing ends 'cut'\n", f"cut message: {r.stderr!r}")
    check(" ALLOC calloc" in r.stdout, "the records before the cut are not printed")

    r = dump("--summary", traces["newer"])
    check(r.returncode == 2, f"a newer trace exits {r.returncode}")
    check(r.stderr.endswith("trace format version 4 is newer than this memtrace reads (3)\n"), r.stderr)

    check(dump().returncode == 1, "no file is not a usage error")
    check(dump("--bogus", traces["good"]).returncode == 1, "a bad option is not a usage error")
    r = dump(os.path.join(d, "missing.bin"))
    check(r.returncode == 2 and r.stderr.count("\n") == 1, f"a missing file: {r.returncode} {r.stderr!r}")
    check(subprocess.run([MEMTRACE, "frobnicate"], capture_output=True).returncode == 1, "unknown command")

print("ok" if not failed else f"{failed} failed")
sys.exit(1 if failed else 0)
