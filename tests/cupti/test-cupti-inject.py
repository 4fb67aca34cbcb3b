# SPDX-License-Identifier: MIT
"""libmemtrace-cupti.so on a machine without a CUDA driver or GPU: loaded as
the driver would load it (inject-host dlopens it and calls
InitializeInjection), under the real libmemtrace.so preload. memtrace must
say in exactly one line that the driver's allocations are not traced, and the
program's output and exit status must be what they are without memtrace; a
program that put a file of its own at descriptor 2 gets nothing written into it.
Also: the library exports InitializeInjection only and links no C++ runtime.

Usage: test-cupti-inject.py INJECT_HOST LIBMEMTRACE_CUPTI LIBMEMTRACE
"""
import os
import re
import subprocess
import sys
import tempfile

HOST, CUPTI_LIB, PRELOAD = sys.argv[1:4]
PREFIX = "memtrace: CUDA allocations through the driver are not traced: "
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(args, preload, tmp):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMTRACE_") and k not in ("LD_PRELOAD", "CUDA_INJECTION64_PATH")}
    env["MEMTRACE_OUTPUT"] = os.path.join(tmp, "trace.bin")
    if preload:
        env["LD_PRELOAD"] = PRELOAD
    return subprocess.run(args, env=env, capture_output=True, timeout=60)


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True,
                         check=True).stdout.decode()
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def test_exports():
    names = exported(CUPTI_LIB)
    check(names == {"InitializeInjection"}, f"exports beyond InitializeInjection: {sorted(names)}")
    dyn = subprocess.run(["readelf", "-d", CUPTI_LIB], capture_output=True,
                         check=True).stdout.decode()
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)
    check(not any(re.match(r"lib(stdc\+\+|c\+\+)", n) for n in needed),
          f"links a C++ runtime: {needed}")
    check(not any(n.startswith("libcuda.") for n in needed),
          f"links libcuda (it must only look it up): {needed}")
    check(any(n.startswith("libcupti.") for n in needed), f"does not link libcupti: {needed}")


def test_under_preload(tmp):
    base = run([HOST], False, tmp)
    check(base.returncode == 3 and base.stderr == b"", f"baseline run: {base}")

    r = run([HOST, CUPTI_LIB], True, tmp)
    err = r.stderr.decode()
    lines = err.splitlines()
    check(len(lines) == 1, f"expected exactly one line on stderr, got {lines!r}")
    if "memtrace_capture_stack" in exported(PRELOAD):
        want = PREFIX + "no CUDA driver (libcuda.so.1 is not loaded); the CUDA runtime's are"
    else:
        # libmemtrace.so without its capture API yet: the line says that instead
        want = PREFIX + "this libmemtrace.so has no capture API (memtrace_capture_*)"
    check(lines == [want], f"stderr line {lines!r}, expected {want!r}")
    check(err.endswith("\n"), "the line ends with a newline")
    check(r.stdout == base.stdout, f"stdout changed: {r.stdout!r} vs {base.stdout!r}")
    check(r.returncode == base.returncode,
          f"exit status changed: {r.returncode} vs {base.returncode}")
    check(os.path.exists(os.path.join(tmp, "trace.bin")), "the preload wrote no trace")


def test_stderr_reused(tmp):
    """The program put a file of its own at descriptor 2 before the driver
    loaded the module: memtrace's line must not go into it (it did, through
    the module's own fprintf), and has nowhere else to go."""
    log = os.path.join(tmp, "daemon.log")
    r = run([HOST, CUPTI_LIB, log], True, tmp)
    with open(log, "rb") as f:
        got = f.read()
    check(got == b"", f"the program's file at descriptor 2 holds {got!r}")
    check(r.stderr == b"" and r.returncode == 3, f"{r.returncode} {r.stderr!r}")


def test_without_preload(tmp):
    r = run([HOST, CUPTI_LIB], False, tmp)
    want = PREFIX + "libmemtrace.so is not loaded (run the program under memtrace run)"
    check(r.stderr.decode().splitlines() == [want], f"stderr without the preload: {r.stderr!r}")
    check(r.returncode == 3, f"exit status without the preload: {r.returncode}")
    check(r.stdout == b"InitializeInjection: 1 1\nwork done: 4950\n" or
          r.stdout.startswith(b"InitializeInjection: 1 1\n"), f"stdout: {r.stdout!r}")


test_exports()
with tempfile.TemporaryDirectory() as tmp:
    test_under_preload(tmp)
with tempfile.TemporaryDirectory() as tmp:
    test_stderr_reused(tmp)
with tempfile.TemporaryDirectory() as tmp:
    test_without_preload(tmp)
sys.exit(1 if failures else 0)
