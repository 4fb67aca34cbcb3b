# SPDX-License-Identifier: MIT
"""The Python helper (python/memtrace) under the real preload and without
it: memtrace.mark and memtrace.step put exactly their marks in the trace,
with the figures `report --json` and `check --from-mark` give; without the
preload every function is a no-op. Runs Debian's /usr/bin/python3; meson
passes the helper's folder in MEMTRACE_HELPER."""
import json
import os
import re

from harness import BIN, check, main, run, untraced_env, workdir

HELPER = os.environ["MEMTRACE_HELPER"]
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


def helper_env():
    return untraced_env({"PYTHONPATH": HELPER, "PYTHONDONTWRITEBYTECODE": "1"})


def test_traced():
    trace = os.path.join(workdir(), "t.bin")
    r = run([BIN, "run", "-o", trace, "--", PYTHON, "-c", SCRIPT], env=helper_env())
    check(r.returncode == 0, f"the script exited {r.returncode}: {r.stderr.decode()}")
    check(r.stdout.decode() == "True True True\n7 7\n40\n", f"it printed {r.stdout.decode()!r}")
    rep = run([BIN, "report", "--json", trace])
    check(rep.returncode == 0, f"report --json exited {rep.returncode}: {rep.stderr.decode()}")
    proc = json.loads(rep.stdout)["processes"][0]
    labels = [m["label"] for m in proc["diagnosis"]["marks"]]
    want = ["epoch 3", "raw bytes", "batch 1", "batch 2", "epoch 40"] + [f"epoch {i}" for i in range(1, 11)]
    check(labels == want, f"marks {labels}, not {want}")
    # each step keeps 1 MiB from one line: from the first epoch's mark to the tenth's, 9 of them
    gate = run([BIN, "check", "--from-mark", "epoch 1", "--to-mark", "epoch 10", "--max-leaked", "8M", trace])
    out = gate.stdout.decode()
    check(gate.returncode == 1, f"check over the epochs exited {gate.returncode}, not 1: {out}")
    check(re.search(r"^  9\.00 MiB in 9 blocks by <string>:\d+ in keep_one ", out, re.M),
          f"check does not give keep_one 9.00 MiB in 9 blocks: {out}")
    # no process made the marks, or half a window: no verdict (2), never a pass
    none = run([BIN, "check", "--from-mark", "epoch 0", "--to-mark", "epoch 10", trace])
    check(none.returncode == 2 and none.stdout.decode() == "memtrace check: no verdict: no process made the marks\n",
          f"check without the from-mark exited {none.returncode}: {none.stdout.decode()}")
    half = run([BIN, "check", "--from-mark", "epoch 1", trace])
    check(half.returncode == 2 and "go together" in half.stderr.decode(), f"--from-mark alone exited {half.returncode}")
    leaks = [s for s in proc["memories"]["host"]["leak_stacks"]
             if any(f["function"] == "keep_one" for f in s["frames"])]
    check(len(leaks) == 1 and leaks[0]["bytes"] == 10 * MiB and leaks[0]["blocks"] == 10,
          f"keep_one leaked {[(s['bytes'], s['blocks']) for s in leaks]}, not 10 MiB in 10 blocks")


def test_untraced():
    r = run([PYTHON, "-c", SCRIPT + "\nprint(memtrace.trace_path())"], env=helper_env())
    check(r.returncode == 0, f"the script exited {r.returncode} untraced: {r.stderr.decode()}")
    out = r.stdout.decode().splitlines()
    check(out == ["False False False", "7 7", "40", "None"], f"untraced it printed {out}")


if __name__ == "__main__":
    main({"traced": test_traced, "untraced": test_untraced})
