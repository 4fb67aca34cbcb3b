# SPDX-License-Identifier: MIT
"""The files the commands open and write: a trace whose module path is a
FIFO (report must not block in open). Usage: test-io.py MEMTRACE MAKE-IO-TRACE"""
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


def memtrace(*args, timeout=20):
    try:
        return subprocess.run([MEMTRACE, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def fifo_module(d):
    """A module path that names a FIFO nobody writes: open() would wait for a writer forever."""
    fifo = os.path.join(d, "libfifo.so")
    os.mkfifo(fifo)
    trace = os.path.join(d, "fifo.bin")
    subprocess.run([MAKE, "module", fifo, trace], check=True)
    r = memtrace("report", trace, timeout=10)
    check(r is not None, "report on a trace naming a FIFO did not finish in 10 s")
    if r is not None:
        check(r.returncode == 0, f"report exits {r.returncode}: {r.stderr!r}")
        check("libfifo.so+0x100" in r.stdout, f"the frame is not module+offset: {r.stdout!r}")


os.umask(0o022)
with tempfile.TemporaryDirectory() as d:
    fifo_module(d)

print("ok" if not failed else f"{failed} failed")
sys.exit(1 if failed else 0)
