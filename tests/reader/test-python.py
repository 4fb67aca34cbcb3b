# SPDX-License-Identifier: MIT
"""Python frames in the commands' outputs, on traces make-python-trace
writes (it plays the interpreter: its own functions are the native frames).
dump prints the PYSTACK id a STACK record names, the PYSTACK record's
frames and the PYCODE records, names escaped. The reports show the hybrid stack: each native
_PyEval_EvalFrameDefault frame replaced by the Python frames of its
activation (up to the next entry frame), frames left over after the last
native one, an eval frame with none left kept; a stack without Python
frames reads byte for byte as before.
Usage: test-python.py MEMTRACE MAKE-PYTHON-TRACE"""
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
    for name in ("hybrid", "truncated", "spare", "native", "native-0", "native-unknown"):
        traces[name] = os.path.join(tmp, name + ".trace")
        subprocess.run([MAKE, name, traces[name]], check=True)

    got = dump_records(traces["hybrid"], "STACK")
    check(got == ["id 1 gen 0 frames 5 ADDR ADDR ADDR ADDR ADDR python 7"], f"dump STACK: {got}")
    got = [l for l in run("dump", traces["hybrid"]).splitlines() if " PYSTACK " in l]
    check(len(got) == 1 and re.match(r"0x[0-9a-f]+ pid 4242 tid 4242 PYSTACK ", got[0]),
          f"dump PYSTACK, which has no time: {got}")
    got = dump_records(traces["hybrid"], "PYSTACK")
    check(got == ["id 7 frames 3 [code 1 lasti 5] [code 2 lasti 6 entry] [code 0 lasti 1 entry]"],
          f"dump PYSTACK: {got}")
    got = dump_records(traces["native-0"], "STACK")
    check(got == ["id 1 gen 0 frames 5 ADDR ADDR ADDR ADDR ADDR"], f"dump STACK native-0: {got}")
    got = dump_records(traces["truncated"], "PYCODE")
    check(got == ['id 1 version 3.10 first_line 10 file "/app/inner.py" name "inner" '
                  'linetable 4 bytes 06010802',
                  'id 2 version 3.10 first_line 20 file "/app/mid\\x1b[8m.py" name "Cls.middle" '
                  'linetable 4 bytes 0a000205',
                  'id 3 version 3.10 first_line 30 file "/app/outer.py" name "<module>" '
                  'linetable 2 bytes 0402'], f"dump PYCODE: {got}")

    EVAL = "_PyEval_EvalFrameDefault"

    def py(function, file, line):
        return {"function": function, "file": file, "line": line, "module": "python",
                "address": 0, "offset": 0, "inlined": False}

    def frames(trace):
        """The host peak stack's frames: Python ones whole, native ones by function and module."""
        rep = json.loads(run("report", "--json", trace))
        got = []
        for f in rep["processes"][0]["memories"]["host"]["peak_stacks"][0]["frames"]:
            if f["module"] == "python":
                got.append(f)
            else:
                got.append((f["function"], f["module"] == MAKE_REAL))
        return got

    def folded(trace):
        return run("flamegraph", trace).splitlines()

    MAKE_REAL = os.path.realpath(MAKE)
    INNER = py("inner", "/app/inner.py", 13)
    MIDDLE = py("Cls.middle", "/app/mid\x1b[8m.py", 25)
    UNKNOWN = py("<unknown Python frame>", None, 0)
    OUTER = py("<module>", "/app/outer.py", 32)
    native = [("alloc_site", True), (EVAL, True), ("call_native", True), (EVAL + ".cold", True),
              ("main", True)]

    got = frames(traces["hybrid"])
    check(got == [native[0], INNER, MIDDLE, native[2], UNKNOWN, native[4]],
          f"hybrid frames: {got}")
    got = folded(traces["hybrid"])
    check(got == ["main;<unknown_Python_frame>;call_native;Cls.middle;inner;alloc_site 100"],
          f"hybrid flamegraph: {got}")
    got = frames(traces["truncated"])
    check(got == [native[0], INNER, MIDDLE, OUTER], f"truncated frames: {got}")
    got = folded(traces["truncated"])
    check(got == ["<module>;Cls.middle;inner;alloc_site 100"], f"truncated flamegraph: {got}")
    got = frames(traces["spare"])
    check(got == [native[0], INNER] + native[2:], f"spare frames: {got}")
    got = folded(traces["spare"])
    check(got == [f"main;{EVAL}.cold;call_native;inner;alloc_site 100"], f"spare flamegraph: {got}")
    report = run("report", traces["hybrid"])
    check("inner (inner.py:13)" in report and "Cls.middle (mid\\x1b[8m.py:25)" in report
          and "<unknown Python frame>" in report, f"report: {report}")

    # check's suppressions see the Python frames: by name, file, or module "python"
    for pattern, trace, status in (("^python$", "hybrid", 0), ("^python$", "native", 1),
                                   ("Cls.middle", "hybrid", 0), ("outer.py", "truncated", 0),
                                   ("outer.py", "hybrid", 1)):
        sup = os.path.join(tmp, "sup")
        with open(sup, "w") as f:
            f.write(f"leak:{pattern}\n")
        r = subprocess.run([MEMTRACE, "check", "--suppressions", sup, traces[trace]],
                           capture_output=True)
        check(r.returncode == status, f"check leak:{pattern} {trace}: exit {r.returncode} "
              f"{r.stdout!r}")

    got = frames(traces["native"])
    check(got == native, f"native frames: {got}")
    for other in ("native-0", "native-unknown"):
        for args in (["report"], ["report", "--json"], ["flamegraph"], ["check"]):
            a = subprocess.run([MEMTRACE, *args, traces["native"]], capture_output=True)
            b = subprocess.run([MEMTRACE, *args, traces[other]], capture_output=True)
            same = (a.returncode, a.stdout.replace(b"native.trace", b"X"), a.stderr) == \
                   (b.returncode, b.stdout.replace(f"{other}.trace".encode(), b"X"), b.stderr)
            check(same, f"{' '.join(args)}: {other} differs from native:\n{a.stdout}\n{b.stdout}")

sys.exit(1 if failed else 0)
