# SPDX-License-Identifier: MIT
"""Python frames against known truth, under each CPython 3.10-3.13 here
(pyenv's installs; a version that is missing is named, and at least one
must be present). known.py allocates bytearray(N) (malloc of N + 1 bytes) at
lines marked "# SITE name" in nested calls, a method, a comprehension, a
generator, a thread and a multiprocessing worker (fork and spawn), keeps
every block and ends with os._exit(0). In `memtrace report --json`, each
site's block must be the leak stack and a peak stack of exactly N + 1
bytes, whose Python frames (module "python") are exactly that site's
function, file and line and its callers' lines, innermost first.
A C program that loads libpython with dlopen and runs one line (embed.c)
must see that line's frame too: the interpreter came after memtrace started.
With MEMTRACE_PYTHON=0, and in a process without Python (git), the trace
holds no PYCODE record and no Python frame; under a CPython older than 3.10
(pyenv's newest 3.x below it) memtrace says so in one line and the trace
has no Python frame either.
A torch DataLoader with two forked workers (dataloader.py, Debian's
/usr/bin/python3 with torch) must show each worker's blocks at the
__getitem__ line: one group of exactly its two items' bytes.
Usage: test-known.py MEMTRACE PRELOAD KNOWN_PY EMBED"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

MEMTRACE, PRELOAD, KNOWN, EMBED = sys.argv[1:5]
VERSIONS = [(3, 10), (3, 11), (3, 12), (3, 13)]

with open(KNOWN) as f:
    LINES = {m.group(1): n for n, line in enumerate(f, 1)
             for m in [re.search(r"# SITE ([a-z-]+)$", line)] if m}


def interpreter(v):
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", "%d.%d.*" % v, "bin", "python%d.%d" % v)))
    return found[-1] if found else None


def traced_report(label, argv, trace):
    """The JSON report of argv run under the preload, or None (a failure said)."""
    env = dict(os.environ, LD_PRELOAD=PRELOAD, MEMTRACE_OUTPUT=trace)
    env.pop("MEMTRACE_TREE", None)
    env.pop("PYTHONMALLOC", None)
    r = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    check(r.returncode == 0, f"{label}: {argv[0]} exits {r.returncode}: {r.stderr[-500:]!r}")
    rep = subprocess.run([MEMTRACE, "report", "--json", "--top", "50", trace],
                         capture_output=True, text=True, timeout=300)
    check(rep.returncode == 0, f"{label}: report exits {rep.returncode}: {rep.stderr}")
    return json.loads(rep.stdout)["processes"] if rep.returncode == 0 else None


def expected(v):
    """Per site: bytes, and the Python frames (function, line), innermost first."""
    def q(cls, name):  # 3.10 code objects have no qualified name
        return name if v < (3, 11) else cls + "." + name
    comp = "comprehension" if v >= (3, 12) else q("comprehension.<locals>", "<listcomp>")
    module = "<module>"
    sites = {
        "nested": (1_000_001, [("inner", LINES["nested"]), ("outer", LINES["nested-caller"]),
                               (module, LINES["nested-module"])]),
        "method": (2_000_001, [(q("Holder", "method"), LINES["method"])]),
        # 3.12 inlines a comprehension into its function (PEP 709): no frame of its own
        "comprehension": (3_000_001, [(comp, LINES["comprehension"])]
                          + ([("comprehension", LINES["comprehension"])] if v < (3, 12) else [])),
        "generator": (4_000_001, [("generator", LINES["generator"])]),
        "thread": (5_000_001, [("in_thread", LINES["thread"])]),
    }
    return sites, (6_000_001, [("worker", LINES["worker"])])


def python_frames(stack):
    return [(f["function"], f["line"]) for f in stack["frames"] if f["module"] == "python"]


def files(stack):
    return {f["file"] for f in stack["frames"] if f["module"] == "python"}


def find(kind, listing, size):
    return [s for s in kind[listing] if s["bytes"] == size]


failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("FAIL " + what)


def site(label, kind, size, frames, whole, file=KNOWN):
    """The block of `size` bytes: one leak stack and one peak stack, each of exactly that
    size, whose Python frames are `frames` (with whole), or begin with them (the callers
    beyond are checked once, by the nested site; a thread's and a worker's are the
    interpreter's own)."""
    for listing in ("leak_stacks", "peak_stacks"):
        got = find(kind, listing, size)
        check(len(got) == 1, f"{label}: {len(got)} {listing} of {size} bytes")
        if len(got) != 1:
            continue
        py = python_frames(got[0])
        seen = py if whole else py[:len(frames)]
        check(seen == frames, f"{label}: {listing} Python frames {py}, expected {frames}")
        check(files(got[0]).issuperset({file}) and (not whole or files(got[0]) == {file}),
              f"{label}: {listing} files {files(got[0])}")
        check(got[0]["blocks"] == 1, f"{label}: {listing} blocks {got[0]['blocks']}")


checked = 0
with tempfile.TemporaryDirectory() as tmp:
    for v in VERSIONS:
        py = interpreter(v)
        if not py:
            print("%d.%d: not installed here (pyenv), not checked" % v)
            continue
        for method in ("fork", "spawn"):
            label = "%d.%d %s" % (v + (method,))
            trace = os.path.join(tmp, label.replace(" ", "-") + ".bin")
            procs = traced_report(label, [py, KNOWN, method], trace)
            if procs is None:
                continue
            sites, worker = expected(v)
            root = [p for p in procs if p["origin"] == "root"]
            check(len(root) == 1, f"{label}: {len(root)} root processes")
            for name, (size, frames) in sites.items():
                site(f"{label} {name}", root[0]["memories"]["host"], size, frames,
                     name == "nested")
            workers = [p for p in procs if p is not root[0] and
                       find(p["memories"]["host"], "leak_stacks", worker[0])]
            check(len(workers) == 1, f"{label}: {len(workers)} processes leak the worker's block")
            for p in workers:
                site(f"{label} worker", p["memories"]["host"], worker[0], worker[1], False)
            checked += 1
            print(f"{'ok' if not failed else 'after'} {label}")
        libs = glob.glob(os.path.join(os.path.dirname(os.path.dirname(py)), "lib",
                                      "libpython%d.%d.so.1.0" % v))
        if not libs:
            print("%d.%d: no libpython to embed, embedding not checked" % v)
            continue
        label = "%d.%d embedded" % v
        procs = traced_report(label, [EMBED, libs[0]], os.path.join(tmp, "embed.bin"))
        if procs is not None:
            site(label, procs[0]["memories"]["host"], 7_000_001, [("<module>", 1)], True,
                 "<string>")
            print(f"{'ok' if not failed else 'after'} {label}")
    # DataLoader workers: forked by torch, their blocks theirs
    loader = os.path.join(os.path.dirname(KNOWN), "dataloader.py")
    with open(loader) as f:
        line = [n for n, text in enumerate(f, 1) if text.rstrip().endswith("# SITE getitem")][0]
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode:
        print("no torch for /usr/bin/python3: the DataLoader case is not checked")
    else:
        procs = traced_report("dataloader", ["/usr/bin/python3", loader],
                              os.path.join(tmp, "dataloader.bin"))
        if procs is not None:
            # items go to the workers in turn: 0 and 2 to one, 1 and 3 to the other; the
            # report groups each worker's two blocks of the one line
            groups = [(p["origin"], s["bytes"], s["blocks"], python_frames(s)[:1])
                      for p in procs for s in p["memories"]["host"]["leak_stacks"]
                      if python_frames(s)[:1] == [("Items.__getitem__", line)]]
            want = [("fork", 4_000_002, 2, [("Items.__getitem__", line)]),
                    ("fork", 6_000_002, 2, [("Items.__getitem__", line)])]
            check(sorted(groups) == want, f"dataloader: __getitem__'s leaks {groups}")
            print(f"{'ok' if not failed else 'after'} dataloader: 4 blocks in forked workers")

    # off, and not Python at all: nothing of the above in the trace
    py = interpreter(VERSIONS[-1]) or sys.executable
    cases = [("MEMTRACE_PYTHON=0", [py, KNOWN, "fork"], {"MEMTRACE_PYTHON": "0"}),
             ("git", ["git", "--version"], {})]
    old = [p for v in [(3, 9), (3, 8), (3, 7)] for p in [interpreter(v)] if p]
    if old:
        cases.append(("unknown version", [old[0], KNOWN, "fork"], {}))
    else:
        print("no CPython 3.7-3.9 here: the unknown-version case is not checked")
    for label, argv, extra in cases:
        trace = os.path.join(tmp, "plain.bin")
        env = dict(os.environ, LD_PRELOAD=PRELOAD, MEMTRACE_OUTPUT=trace, **extra)
        env.pop("MEMTRACE_TREE", None)
        r = subprocess.run(argv, env=env, capture_output=True, timeout=120)
        dump = subprocess.run([MEMTRACE, "dump", trace], capture_output=True, text=True)
        check(r.returncode == 0 and dump.returncode == 0, f"{label}: {r.returncode} {dump.stderr}")
        said = [line for line in r.stderr.decode().splitlines() if line.startswith("memtrace:")]
        if label == "unknown version":
            version = os.path.basename(argv[0])[len("python"):]
            check(said == [f"memtrace: Python {version}: memtrace reads the frames of 3.10 to 3.13 "
                           "only; stacks are native only"], f"{label}: memtrace said {said}")
        else:
            check(said == [], f"{label}: memtrace said {said}")
        stacks = [line for line in dump.stdout.splitlines() if " STACK " in line]
        check(stacks and "PYCODE" not in dump.stdout and not any(" python " in s for s in stacks),
              f"{label}: {len(stacks)} stacks, Python records in the trace")
        print(f"{'ok' if not failed else 'after'} {label}: {len(stacks)} stacks, none with Python frames")
if not checked:
    print("FAIL no CPython 3.10-3.13 here: nothing checked")
    failed += 1
sys.exit(1 if failed else 0)
