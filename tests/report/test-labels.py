# SPDX-License-Identifier: MIT
"""Stack labels: a stack is known by its first frame outside allocation
plumbing (analyzer/label.c, docs/guide.md), in the text report, the growth
lines, check's output and report --json's `label`. Programs run under the
real preload: a C program whose blocks all come through xmalloc, one whose
blocks come through operator new, new[] and std::vector, and torch in
Debian's /usr/bin/python3 keeping a tensor alive.

Usage: test-labels.py native|cxx|torch; the torch test exits 77 (meson's
skip) where /usr/bin/python3 has no torch."""
import os
import shutil
import sys

from harness import BIN, check, main, run, run_traced, workdir

OWN = os.environ["MEMTRACE_REPORT_PROGRAMS"]
SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
PYTHON = "/usr/bin/python3"


def line_of(name, text):
    with open(os.path.join(SOURCES, name)) as f:
        hits = [i + 1 for i, l in enumerate(f) if text in l]
    check(len(hits) == 1, f"{text!r} is on lines {hits} of {name}")
    return hits[0]


def traced(argv, extra=None):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced(argv, trace, extra)
    check(r.returncode == 0, f"{argv} exited {r.returncode}: {r.stderr.decode()[-2000:]}")
    return d, trace


def report_json(trace, extra=None, opts=()):
    import json
    env = dict(os.environ, **(extra or {}))
    r = run([BIN, "report", "--json", "--top", "1000", *opts, trace], env=env)
    check(r.returncode == 0, f"report --json exited {r.returncode}: {r.stderr.decode()}")
    (p,) = json.loads(r.stdout)["processes"]
    return p


def leak_labels(p):
    return sorted((s["bytes"], s["label"]) for s in p["memories"]["host"]["leak_stacks"])


def test_native():
    d, trace = traced([os.path.join(OWN, "labels")])
    table = line_of("labels.c", "keep[0] = xmalloc(1000)")
    name = line_of("labels.c", 'keep[1] = xstrdup("name", 200)')
    pool = line_of("labels.c", "keep[2] = mylib_alloc(64)")
    mylib = line_of("labels.c", "return xmalloc(n);")
    want = sorted([(1000, f"load_table (labels.c:{table}, via xmalloc)"),
                   (200, f"parse_name (labels.c:{name}, via xmalloc)"),
                   (64, f"mylib_alloc (labels.c:{mylib}, via xmalloc)")])
    p = report_json(trace)
    check(leak_labels(p) == want, f"labels {leak_labels(p)} != {want}")
    # the JSON keeps the whole stack: the wrapper is still its first frame
    for s in p["memories"]["host"]["leak_stacks"]:
        check(s["frames"][0]["function"] == "xmalloc", f"the first frame is {s['frames'][0]['function']}")
    # the user's own plumbing, a C++ scope among them (its "::" is no separator)
    extra = {"MEMTRACE_PLUMBING": "my::pool:mylib_*"}
    want_user = sorted([w for w in want if w[0] != 64] + [(64, f"pool_refill (labels.c:{pool}, via xmalloc)")])
    p = report_json(trace, extra)
    check(leak_labels(p) == want_user, f"with MEMTRACE_PLUMBING: {leak_labels(p)} != {want_user}")
    text = run([BIN, "report", trace]).stdout.decode()
    for line in [f"      1000 B in 1 block by load_table (labels.c:{table}, via xmalloc)",
                 f"      200 B in 1 block by parse_name (labels.c:{name}, via xmalloc)"]:
        check(line in text.splitlines(), f"the text report has no line {line!r}:\n{text}")
    # the blocks are held by a global until exit: reachable, counted only when asked
    r = run([BIN, "check", trace])
    check(r.returncode == 0, f"check exits {r.returncode}: {r.stdout.decode()}")
    r = run([BIN, "check", "--count-reachable", trace])
    out = r.stdout.decode()
    check(r.returncode == 1, f"check --count-reachable exits {r.returncode}")
    check(f"  1000 B in 1 block by load_table (labels.c:{table}, via xmalloc): xmalloc (labels.c:"
          in out, f"check does not name load_table:\n{out}")
    shutil.rmtree(d)


def test_cxx():
    d, trace = traced([os.path.join(OWN, "labels-cxx")])
    p = report_json(trace)
    src = "labels-cxx.cc"
    ours = [l for l in leak_labels(p) if src in l[1]]
    want = sorted([(40, f"make_node ({src}:{line_of(src, 'kept_node = new node()')})"),
                   (400, f"make_buffer ({src}:{line_of(src, 'kept_buffer = new int[100]')})"),
                   (24, f"fill_vector ({src}:{line_of(src, 'kept_vector = new std::vector<int>')})"),
                   (256, f"fill_vector ({src}:{line_of(src, 'kept_vector->resize(64)')}, "
                         "via std::__new_allocator<int>::allocate)")])
    check(ours == want, f"labels {ours} != {want}")
    shutil.rmtree(d)


TORCH = """
import os, torch
keep = torch.zeros(1 << 22, dtype=torch.uint8)
os._exit(0)
"""


def test_torch():
    if run([PYTHON, "-c", "import torch"]).returncode != 0:
        print("skip: /usr/bin/python3 has no torch")
        sys.exit(77)
    d, trace = traced([PYTHON, "-c", TORCH])
    # the native stack's label (a Python process's stacks are grouped without --native)
    p = report_json(trace, opts=["--native"])
    tensors = [s for s in p["memories"]["host"]["leak_stacks"] if s["bytes"] == 1 << 22]
    check(len(tensors) == 1 and tensors[0]["blocks"] == 1, f"{len(tensors)} stacks leak the 4 MiB tensor")
    (s,) = tensors
    check(s["frames"][0]["function"].startswith("c10::alloc_cpu("), f"the first frame is {s['frames'][0]['function']}")
    # the frame torch.zeros reaches after the allocator, the factories and the dispatcher
    zeros = [f for f in s["frames"] if (f["function"] or "").startswith("at::native::zeros_symint(")]
    check(zeros, f"no at::native::zeros_symint in {[f['function'] for f in s['frames']]}")
    want = f"at::native::zeros_symint ({os.path.basename(zeros[0]['module'])}, via c10::alloc_cpu)"
    check(s["label"] == want, f"the tensor's label is {s['label']!r}, not {want!r}")
    shutil.rmtree(d)


main({"native": test_native, "cxx": test_cxx, "torch": test_torch})
