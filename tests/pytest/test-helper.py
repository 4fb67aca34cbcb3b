# SPDX-License-Identifier: MIT
"""The Python helper (python/memtrace) under the real preload and without
it: memtrace.mark and memtrace.step put exactly their marks in the trace,
with the figures `report --json` gives at each; without the preload every
function is a no-op. Runs Debian's /usr/bin/python3 (argv: memtrace,
libmemtrace.so, the folder of the helper)."""
import json
import os
import re
import subprocess
import sys
import tempfile

BIN, LIB, HELPER = sys.argv[1:4]
PYTHON = "/usr/bin/python3"
MiB = 1 << 20

SCRIPT = r"""
import ctypes, memtrace
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
kept = []

def keep_one():
    kept.append(libc.malloc(1 << 20))

@memtrace.step("batch")
def batch():
    return 7

print(memtrace.tracing(), memtrace.mark("epoch 3"), memtrace.mark(b"raw bytes"))
print(batch(), batch())
with memtrace.step("epoch", 40) as i:
    print(i)
for _ in range(10):
    with memtrace.step("epoch") as i:
        keep_one()
"""


def fail(what):
    print(f"FAIL {what}")
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


def run(argv, env):
    return subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)


def base_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRACE_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = HELPER
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_traced():
    d = tempfile.mkdtemp(prefix="memtrace-helper-")
    trace = os.path.join(d, "t.bin")
    r = run([BIN, "run", "-o", trace, "--", PYTHON, "-c", SCRIPT], base_env())
    check(r.returncode == 0, f"the script exited {r.returncode}: {r.stderr.decode()}")
    check(r.stdout.decode() == "True True True\n7 7\n40\n", f"it printed {r.stdout.decode()!r}")
    rep = run([BIN, "report", "--json", trace], base_env())
    check(rep.returncode == 0, f"report --json exited {rep.returncode}: {rep.stderr.decode()}")
    proc = json.loads(rep.stdout)["processes"][0]
    marks = proc["diagnosis"]["marks"]
    labels = [m["label"] for m in marks]
    want = ["epoch 3", "raw bytes", "batch 1", "batch 2", "epoch 40"] + [f"epoch {i}" for i in range(1, 11)]
    check(labels == want, f"marks {labels}, not {want}")
    # each step keeps 1 MiB from one line: from the first epoch's mark to the tenth's, 9 of them
    gate = run([BIN, "check", "--from-mark", "epoch 1", "--to-mark", "epoch 10", "--max-leaked", "8M", trace],
               base_env())
    out = gate.stdout.decode()
    check(gate.returncode == 1, f"check over the epochs exited {gate.returncode}, not 1: {out}")
    check(re.search(r"^  9\.00 MiB in 9 blocks by <string>:\d+ in keep_one ", out, re.M),
          f"check does not give keep_one 9.00 MiB in 9 blocks: {out}")
    leaks = [s for s in proc["memories"]["host"]["leak_stacks"]
             if any(f["function"] == "keep_one" for f in s["frames"])]
    check(len(leaks) == 1 and leaks[0]["bytes"] == 10 * MiB and leaks[0]["blocks"] == 10,
          f"keep_one leaked {[(s['bytes'], s['blocks']) for s in leaks]}, not 10 MiB in 10 blocks")
    print("ok traced")


def test_untraced():
    r = run([PYTHON, "-c", SCRIPT + "\nprint(memtrace.trace_path(), memtrace.command() is None or 'cmd')"],
            base_env())
    check(r.returncode == 0, f"the script exited {r.returncode} untraced: {r.stderr.decode()}")
    out = r.stdout.decode().splitlines()
    check(out[:3] == ["False False False", "7 7", "40"], f"untraced it printed {out}")
    print("ok untraced")


test_traced()
test_untraced()
