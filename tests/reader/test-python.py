# SPDX-License-Identifier: MIT
"""Python frames in the commands' outputs, on traces make-python-trace
writes (it plays the interpreter: its own functions are the native frames).
dump prints the STACK record's Python frames and the PYCODE records, names
escaped.
Usage: test-python.py MEMTRACE MAKE-PYTHON-TRACE"""
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
    r = subprocess.run([MEMTRACE, *args], capture_output=True)
    check(r.returncode == 0, f"memtrace {' '.join(args)}: exit {r.returncode} {r.stderr!r}")
    return r.stdout.decode()


def dump_records(trace, kind):
    """The dump's lines of records of one kind, without their offset and addresses."""
    out = []
    for line in run("dump", trace).splitlines():
        m = re.match(r"0x[0-9a-f]+ pid 4242 tid 4242 (?:t=\S+ )?(\w+) (.*)", line)
        if m and m.group(1) == kind:
            out.append(re.sub(r"0x[0-9a-f]+", "ADDR", m.group(2)))
    return out


with tempfile.TemporaryDirectory() as tmp:
    traces = {}
    for name in ("hybrid", "truncated", "spare", "native", "native-0"):
        traces[name] = os.path.join(tmp, name + ".trace")
        subprocess.run([MAKE, name, traces[name]], check=True)

    got = dump_records(traces["hybrid"], "STACK")
    check(got == ["id 1 gen 0 frames 5 ADDR ADDR ADDR ADDR ADDR python 3 [code 1 lasti 5] "
                  "[code 2 lasti 6 entry] [code 0 lasti 1 entry]"], f"dump STACK: {got}")
    got = dump_records(traces["native-0"], "STACK")
    check(got == ["id 1 gen 0 frames 5 ADDR ADDR ADDR ADDR ADDR"], f"dump STACK native-0: {got}")
    got = dump_records(traces["truncated"], "PYCODE")
    check(got == ['id 1 version 3.10 first_line 10 file "/app/inner.py" name "inner" '
                  'linetable 4 bytes 06010802',
                  'id 2 version 3.10 first_line 20 file "/app/mid\\x1b[8m.py" name "Cls.middle" '
                  'linetable 4 bytes 0a000205',
                  'id 3 version 3.10 first_line 30 file "/app/outer.py" name "<module>" '
                  'linetable 2 bytes 0402'], f"dump PYCODE: {got}")

sys.exit(1 if failed else 0)
