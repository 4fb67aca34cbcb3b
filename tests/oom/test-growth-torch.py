# SPDX-License-Identifier: MIT
"""Growth in PyTorch (CPU) programs under Debian's /usr/bin/python3: correct
programs get no growth at all, whatever torch does at start-up, and a real
leak is found at the script's line with its figure.

- `import torch` alone: no growth (its import allocates for seconds, then
  stops).
- tests/oom/programs/torch-train.py, a correct 20-step float32 loop, with
  marks and without: none.
- the same in float64 with Adam, whose state (twice the parameters) is
  allocated once at the first step and lives to the end: none, with marks
  and without.
- samples/torch-keeps-graph.py, which keeps each step's graph: growth found,
  its stack through the script's own lines, the growth per mark of all
  growing stacks within 5% of what the sample prints it keeps per step
  (counted from the graph), and grown_bytes that per mark x the steps.
Skipped (77) where /usr/bin/python3 has no torch."""
import os
import re
import shutil

from oomtest import SAMPLES_SOURCE, check, diagnosis, functions, main, near, report, run, run_traced, workdir

PYTHON = "/usr/bin/python3"
TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "torch-train.py")
KEEPS_GRAPH = os.path.join(SAMPLES_SOURCE, "torch-keeps-graph.py")
STEPS = 20


def traced(argv):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([PYTHON] + argv, trace)
    check(out.returncode == 0, f"{argv} failed: {out.stderr.decode()[-2000:]}")
    (proc,) = report(trace)["processes"]
    shutil.rmtree(d)
    return out.stdout, proc


def check_no_growth(argv):
    """A correct program: no growth, and no finding of any kind (issue 13)."""
    _, proc = traced(argv)
    growth = diagnosis(proc, "growth")
    check(not growth and diagnosis(proc, "growth_total") == 0,
          f"{argv}: {diagnosis(proc, 'growth_total')} growing stacks, the first: "
          f"{[(g['grown_bytes'], g['stack'].get('label')) for g in growth[:3]]}")
    frag = diagnosis(proc, "fragmentation") or {}
    findings = [(f["finding"], f["figure"]) for f in frag.get("findings", [])]
    check(not findings, f"{argv}: findings on a correct program: {findings}")


def test_keeps_graph():
    out, proc = traced([KEEPS_GRAPH, "--steps", str(STEPS), "--dtype", "float64"])
    m = re.search(rb"kept per step (\d+) bytes", out)
    check(m, f"the sample did not print what it keeps: {out!r}")
    kept = int(m.group(1))
    growth = diagnosis(proc, "growth")
    check(growth, "no growth found")
    per_mark = sum(g["bytes_per_mark"] for g in growth)
    near("the growth per mark of all growing stacks", per_mark, kept, 0.05)
    near("grown_bytes of all growing stacks", sum(g["grown_bytes"] for g in growth), STEPS * kept, 0.05)
    top = growth[0]
    script = [f for f in top["stack"]["frames"] if f["module"] == "python" and f["file"] == KEEPS_GRAPH]
    check(script and all(f["line"] > 0 for f in script),
          f"the growing stack does not go through the script's lines: {functions(top['stack'])[:12]}")


if run([PYTHON, "-c", "import torch"]).returncode != 0:
    print(f"skip: {PYTHON} has no torch (Debian's python3-torch)")
    raise SystemExit(77)
main({
    "import_torch": lambda: check_no_growth(["-c", "import torch"]),
    # small steps, so that the import is most of the run: each of its stacks rises through it
    "train_float32": lambda: check_no_growth([TRAIN, "--steps", str(STEPS), "--hidden", "256"]),
    "train_float32_unmarked": lambda: check_no_growth([TRAIN, "--steps", str(STEPS), "--hidden", "256", "--no-marks"]),
    # Adam's state: 2 x 37.9 MB with marks, 2 x 10.6 MB without
    "train_float64_adam": lambda: check_no_growth([TRAIN, "--steps", str(STEPS), "--dtype", "float64", "--optim", "adam"]),
    "train_float64_adam_unmarked": lambda: check_no_growth([TRAIN, "--steps", str(STEPS), "--dtype", "float64", "--optim", "adam",
                                                            "--hidden", "1024", "--no-marks"]),
    "keeps_graph": test_keeps_graph,
})
