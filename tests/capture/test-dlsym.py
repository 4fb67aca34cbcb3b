# SPDX-License-Identifier: MIT
"""dlsym and dlvsym under the preload. A look-up of libc's malloc by a handle
(dlopen("libc.so.6"), ctypes.CDLL) gets the traced malloc, so its memory is
seen: dlsym-probe's 3,000,017 bytes and a Python script's 100,000,007 bytes
through ctypes are leaks of exactly that size in the report. Everything else
dlsym answers is what it answers without memtrace: RTLD_NEXT from a library
finds the next library's symbol (next-b's next_probe, not next-a's), a
missing symbol is NULL. Before memtrace interposed dlsym, the handle's
malloc was libc's own and neither leak appeared.

With MEMTRACE_SAMPLING in the environment (capture-dlsym-sampled) the same in
sampled mode, whose pass is what the handle's malloc reaches first: blocks
this large (above 5 intervals) are recorded exactly, so the leaks stay exact."""
import json
import os

from harness import BIN, Failure, check, program, run, run_traced, workdir

PY = "/usr/bin/python3"


def leaks(trace, size):
    out = run([BIN, "report", "--json", "--top", "50", trace])
    check(out.returncode == 0, f"report failed: {out.stderr.decode()}")
    return [(p["exe"], s) for p in json.loads(out.stdout)["processes"]
            for s in p["memories"]["host"]["leak_stacks"] if s["bytes"] == size]


def test_probe():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    bare = run([program("dlsym-probe")])
    traced = run_traced([program("dlsym-probe")], trace)
    check(bare.returncode == 0 and traced.returncode == 0,
          f"dlsym-probe: {bare.returncode} {traced.returncode} {traced.stderr.decode()}")
    want = "next b\nhandle default\nversion default\nmissing null\nleak made\n"
    check(bare.stdout.decode() == want, f"without memtrace: {bare.stdout.decode()!r}")
    check(traced.stdout.decode() == want, f"under memtrace: {traced.stdout.decode()!r}")
    found = leaks(trace, 3000017)
    check(len(found) == 1 and found[0][1]["blocks"] == 1, f"the 3,000,017-byte leak: {found}")


def test_ctypes():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    script = os.path.join(d, "ctypes-leak.py")
    with open(script, "w") as f:
        f.write("import ctypes, os\n"
                "libc = ctypes.CDLL('libc.so.6')\n"
                "libc.malloc.restype = ctypes.c_void_p\n"
                "p = libc.malloc(100_000_007)\n"
                "os._exit(0 if p else 1)\n")
    out = run_traced([PY, script], trace)
    check(out.returncode == 0, f"{PY} {script}: {out.returncode} {out.stderr.decode()}")
    found = leaks(trace, 100000007)
    check(len(found) == 1, f"the 100,000,007-byte leak: {found}")
    frames = [(f["function"], f["file"], f["line"]) for f in found[0][1]["frames"]
              if f["module"] == "python"]
    check(frames == [("<module>", script, 4)], f"its Python frames: {frames}")


failed = 0
for name, fn in [("probe", test_probe), ("ctypes", test_ctypes)]:
    try:
        fn()
        print("ok " + name)
    except Failure as e:
        failed += 1
        print(f"FAIL {name}: {e}")
raise SystemExit(1 if failed else 0)
