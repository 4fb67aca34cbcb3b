# SPDX-License-Identifier: MIT
"""samples/torch-keeps-graph.py under Debian's /usr/bin/python3 with
python3-torch (CPU): a training loop that keeps each step's held-out loss
tensor, and with it the autograd graph and the ReLU activation saved in it.
The growth diagnosis must find it per mark (the sample marks each step
through ctypes): the top growing stack within 10% of the activation's bytes
per step (the sample prints the truth, counted from the graph), the group
named by torch's C++ operator that allocated; float64 about twice float32. Skipped (77) where
/usr/bin/python3 has no torch."""
import os
import re
import shutil

from oomtest import SAMPLES_SOURCE, check, diagnosis, functions, main, near, report, run, run_traced, workdir

PYTHON = "/usr/bin/python3"
SAMPLE = os.path.join(SAMPLES_SOURCE, "torch-keeps-graph.py")
STEPS = 12


def traced(dtype):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([PYTHON, SAMPLE, "--steps", str(STEPS), "--dtype", dtype], trace)
    check(out.returncode == 0, f"the torch sample failed: {out.stderr.decode()[-2000:]}")
    m = re.search(rb"kept per step (\d+) bytes, largest (\d+) bytes", out.stdout)
    check(m, f"the sample did not print what it keeps: {out.stdout!r}")
    procs = report(trace)["processes"]
    shutil.rmtree(d)
    return int(m.group(1)), int(m.group(2)), procs[0]


def top_growth(proc):
    growth = diagnosis(proc, "growth")
    check(growth, "no growth found")
    return growth


def check_dtype(dtype):
    kept, largest, proc = traced(dtype)
    marks = diagnosis(proc, "marks")
    check([m["label"] for m in marks] == [f"step {i}" for i in range(STEPS)],
          f"the marks are not step 0..{STEPS - 1}: {[m['label'] for m in marks]}")
    growth = top_growth(proc)
    top = growth[0]
    near(f"{dtype}: the top stack's bytes_per_mark", top["bytes_per_mark"], largest, 0.10)
    # all growth per mark: the activation, the prediction and the loss
    per_mark = sum(g["bytes_per_mark"] or 0 for g in growth if g["kind"] == "host")
    near(f"{dtype}: the growth per mark of all stacks", per_mark, kept, 0.10)
    # grouped by the Python stack (docs/python.md): the native tail below the innermost Python
    # frame is folded into it, named by torch's C++ operator that allocated
    folded = top["stack"]["frames"][0]["folded"]
    check(folded and ("at::" in folded or "c10::" in folded),
          f"no torch operator folded into the growing group: {folded!r}, {functions(top['stack'])[:12]}")
    return top["bytes_per_mark"]


def test_growth_per_step_float64_twice_float32():
    f64 = check_dtype("float64")
    f32 = check_dtype("float32")
    near("float64's growth against twice float32's", f64, 2 * f32, 0.10)


if run([PYTHON, "-c", "import torch"]).returncode != 0:
    print(f"skip: {PYTHON} has no torch (Debian's python3-torch)")
    raise SystemExit(77)
main({"growth_per_step_float64_twice_float32": test_growth_per_step_float64_twice_float32})
