# SPDX-License-Identifier: MIT
"""The pytest plugin (python/memtrace/pytest_plugin.py) gating a real pytest
run of Debian's /usr/bin/python3 under `memtrace run`: a suite whose test
keeps 3 MiB fails --memtrace-max-leaked 1M, naming that test's line with
exactly 3.00 MiB in 1 block; keeping 512 KiB passes; a suppression lets the
3 MiB pass; a check that cannot judge fails the run (exit 3); without the
preload nothing is done. The figures are held against `report --json` of
the same trace: the stack's bytes leaked, and the marks' live bytes.
meson passes the helper's folder in MEMTRACE_HELPER."""
import json
import os
import re

from harness import BIN, check, main, run, untraced_env, workdir

HELPER = os.environ["MEMTRACE_HELPER"]
PYTHON = "/usr/bin/python3"
KiB, MiB = 1 << 10, 1 << 20

SUITE = """\
import ctypes
import os

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
kept = []


def test_cheap():
    assert sum(range(10)) == 45


def test_temporary():
    assert len([bytearray(1000) for _ in range(1000)]) == 1000


def test_leak():
    kept.append(libc.malloc(int(os.environ["LEAK_BYTES"])))
"""
LEAK_LINE = SUITE.splitlines().index('    kept.append(libc.malloc(int(os.environ["LEAK_BYTES"])))') + 1
UNITS = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": 1 << 30}


def env_for(leak):
    return untraced_env({"PYTHONPATH": HELPER, "PYTHONDONTWRITEBYTECODE": "1", "LEAK_BYTES": str(leak)})


def pytest_run(leak, *args, traced=True):
    """Runs the suite; its exit status, its output and the trace."""
    d = workdir()
    with open(os.path.join(d, "test_suite.py"), "w") as f:
        f.write(SUITE)
    trace = os.path.join(d, "t.bin")
    argv = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-p", "memtrace.pytest_plugin", *args]
    if traced:
        argv = [BIN, "run", "-o", trace, "--"] + argv
    r = run(argv, cwd=d, env=env_for(leak))
    out = r.stdout.decode()
    check(re.search(r"^=+ 3 passed", out, re.M), f"the suite did not pass its 3 tests: {out}{r.stderr.decode()}")
    return r.returncode, out, trace


def size(text):
    number, unit = text.split()
    return float(number) * UNITS[unit]


def kept_line(out):
    m = re.search(r"^memtrace check: process \d+ \(.*\): host kept ([\d.]+ \w+) in (\d+) blocks? "
                  r'from mark "pytest: tests start" to mark "pytest: tests end"', out, re.M)
    check(m, f"no line of what the tests kept: {out}")
    return size(m.group(1))


def report(trace):
    r = run([BIN, "report", "--json", trace])
    check(r.returncode == 0, f"report --json exited {r.returncode}: {r.stderr.decode()}")
    procs = json.loads(r.stdout)["processes"]
    check(len(procs) >= 1 and procs[0]["exe"].startswith("/usr/bin/python3"), "the trace is not pytest's")
    return procs[0]


def marks_growth(proc):
    """The host bytes live at the tests' end mark less those at their start mark."""
    marks = {m["label"]: m["live"]["host"] for m in proc["diagnosis"]["marks"]}
    check(set(marks) == {"pytest: tests start", "pytest: tests end"}, f"marks {sorted(marks)}")
    return marks["pytest: tests end"] - marks["pytest: tests start"]


def test_leak_fails():
    status, out, trace = pytest_run(3 * MiB, "--memtrace-max-leaked", "1M")
    check(status == 1, f"pytest exited {status}, not 1, with 3 MiB kept over 1M: {out}")
    check(re.search(rf"^  3\.00 MiB in 1 block by test_suite\.py:{LEAK_LINE} in test_leak ", out, re.M),
          f"the gate does not name test_leak's line {LEAK_LINE} with 3.00 MiB in 1 block: {out}")
    check(re.search(r"^memtrace check: FAILED \(1 limit exceeded\)$", out, re.M), f"no FAILED line: {out}")
    kept = kept_line(out)
    proc = report(trace)
    leak = [s for s in proc["memories"]["host"]["leak_stacks"]
            if any(f["function"] == "test_leak" for f in s["frames"])]
    check([(s["bytes"], s["blocks"]) for s in leak] == [(3 * MiB, 1)],
          f"report --json: test_leak leaked {[(s['bytes'], s['blocks']) for s in leak]}, not 3 MiB in 1 block")
    # what the stacks kept adds up to at least the net growth (a stack that shrank offsets none),
    # and pytest's own bookkeeping over 3 tests is a few KiB
    net = marks_growth(proc)
    check(net >= 3 * MiB and kept >= net * 0.995 and kept < 3 * MiB + 64 * KiB,
          f"kept {kept:.0f} against the marks' net growth {net}")
    print(f"kept {kept:.0f}, net {net}")


def test_small_passes():
    status, out, trace = pytest_run(512 * KiB, "--memtrace-max-leaked", "1M")
    check(status == 0, f"pytest exited {status}, not 0, with 512 KiB kept under 1M: {out}")
    check(re.search(r"^memtrace check: ok: 1 process$", out, re.M), f"no ok line: {out}")
    kept = kept_line(out)
    net = marks_growth(report(trace))
    check(net >= 512 * KiB and kept >= net * 0.995 and kept < 512 * KiB + 64 * KiB,
          f"kept {kept:.0f} against the marks' net growth {net}")
    print(f"kept {kept:.0f}, net {net}")


def test_suppressed_passes():
    sup = os.path.join(workdir(), "leaks.supp")
    with open(sup, "w") as f:
        f.write("# the test's own leak, on purpose\nleak:test_leak\n")
    status, out, _ = pytest_run(3 * MiB, "--memtrace-max-leaked", "1M", "--memtrace-suppressions", sup)
    check(status == 0, f"pytest exited {status}, not 0, with the leak suppressed: {out}")
    check(re.search(r"^memtrace check: ok: 1 process, 3\.00 MiB in 1 blocks suppressed", out, re.M),
          f"the 3 MiB are not said suppressed: {out}")


def test_cannot_check():
    status, out, _ = pytest_run(0, "--memtrace-max-leaked", "1M", "--memtrace-suppressions", "/nonexistent")
    check(status == 3, f"pytest exited {status}, not 3, when check cannot read its suppressions: {out}")
    check("/nonexistent" in out, f"the reason is not shown: {out}")


def test_untraced():
    status, out, _ = pytest_run(3 * MiB, "-v", "--memtrace-max-leaked", "1M", traced=False)
    check(status == 0, f"pytest exited {status} without the preload: {out}")
    check("memtrace check" not in out and "memtrace: not traced (no libmemtrace.so)" in out,
          f"without the preload the plugin did something, or did not say it does nothing: {out}")


if __name__ == "__main__":
    check(run([PYTHON, "-c", "import pytest"]).returncode == 0,
          f"{PYTHON} has no pytest (Debian's python3-pytest, .ci/packages)")
    main({"leak_fails": test_leak_fails, "small_passes": test_small_passes,
          "suppressed_passes": test_suppressed_passes, "cannot_check": test_cannot_check,
          "untraced": test_untraced})
