# SPDX-License-Identifier: MIT
"""Acceptance of issue 12's grouping on samples/torch-keeps-graph.py under
Debian's /usr/bin/python3 with torch (CPU): the loop keeps each step's
held-out loss and, through its graph, the ReLU's output. Grouped by the
Python stack, the report (text and JSON) must name the script's own lines:
the held-out forward pass (`model(val_x)`) in main, inside the loop that
keeps the losses; the top growth per step must be attributed to that line,
within 10% of what the sample counts in the graph (the tolerance of
tests/oom/test-torch-keeps-graph.py); and the text report's top entries are
groups, not hundreds of thousands of stacks. Skipped (77) where
/usr/bin/python3 has no torch.
Usage: test-torch-groups.py MEMTRACE PRELOAD SAMPLE"""
import json
import os
import re
import subprocess
import sys
import tempfile

MEMTRACE, PRELOAD, SAMPLE = sys.argv[1:4]
PYTHON = "/usr/bin/python3"
STEPS = 12
NAME = os.path.basename(SAMPLE)
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


def line_of(text):
    with open(SAMPLE) as f:
        hits = [i + 1 for i, l in enumerate(f) if text in l]
    assert len(hits) == 1, f"{text!r} is on lines {hits} of {SAMPLE}"
    return hits[0]


FORWARD = line_of("model(val_x)")  # in the loop that appends val_loss to val_losses
LOOP = line_of("for step in range(args.steps):")


def script_lines(stack):
    return [(f["function"], f["line"]) for f in stack["frames"]
            if f["module"] == "python" and f["file"] and os.path.basename(f["file"]) == NAME]


def main():
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"skip: {PYTHON} has no torch (Debian's python3-torch)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace.bin")
        env = dict(os.environ, LD_PRELOAD=PRELOAD, MEMTRACE_OUTPUT=trace)
        env.pop("MEMTRACE_TREE", None)
        r = subprocess.run([PYTHON, SAMPLE, "--steps", str(STEPS)], env=env, capture_output=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        m = re.search(rb"kept per step (\d+) bytes, largest (\d+) bytes", r.stdout)
        assert m, r.stdout
        kept, largest = int(m.group(1)), int(m.group(2))
        rep = subprocess.run([MEMTRACE, "report", "--json", trace], capture_output=True,
                             text=True, timeout=600)
        assert rep.returncode == 0, rep.stderr
        text = subprocess.run([MEMTRACE, "report", trace], capture_output=True, text=True,
                              timeout=600).stdout
    (p,) = json.loads(rep.stdout)["processes"]
    host = p["memories"]["host"]

    # the peak's largest entry: the kept activations, named down to the script's forward line
    top = host["peak_stacks"][0]
    check(("main", FORWARD) in script_lines(top),
          f"the peak's top entry does not name main at line {FORWARD}: {script_lines(top)}")
    check(top["bytes"] >= (STEPS - 1) * largest,
          f"the peak's top entry holds {top['bytes']} B, not the {STEPS - 1}+ activations kept")
    check(top["frames"][0]["folded"] and "at::" in top["frames"][0]["folded"],
          f"the top entry's folded label is {top['frames'][0]['folded']!r}")
    check(len(top["stacks"]) >= 1 and top["label"].startswith("functional.py:"),
          f"the top entry's label is {top['label']!r}")

    # the growth per step: attributed to the forward line, the truth within 10%
    growth = [g for g in p["diagnosis"]["growth"] if g["kind"] == "host" and g["bytes_per_mark"]]
    check(growth, "no growth per mark")
    g = growth[0]
    check(("main", FORWARD) in script_lines(g["stack"]),
          f"the top growth is not attributed to line {FORWARD}: {script_lines(g['stack'])}")
    check(abs(g["bytes_per_mark"] - largest) <= 0.10 * largest,
          f"the top growth is {g['bytes_per_mark']} B per step, the activation {largest} B")
    ours = sum(x["bytes_per_mark"] for x in growth if ("main", FORWARD) in script_lines(x["stack"]))
    check(abs(ours - kept) <= 0.10 * kept,
          f"the growth per step at line {FORWARD} is {ours} B, the graph keeps {kept} B")

    # the text: the top entries are groups whose frames show the script's line
    peak = text.split("    peak ", 1)[1].split("    leaked ", 1)[0]
    check(f"main ({NAME}:{FORWARD})" in peak, f"the text peak does not name {NAME}:{FORWARD}:\n{peak}")
    first = peak.splitlines()[1]
    check(re.match(r" +[0-9.]+ MiB in \d+ blocks by functional\.py:\d+ in relu \(at::", first),
          f"the text peak's first entry is {first!r}")
    diag = text.split("  diagnosis:", 1)[1]
    grows = diag.split("    grows", 2)[1]
    check(f"main ({NAME}:{FORWARD})" in grows and "per mark" in grows,
          f"the text's first growth line does not name {NAME}:{FORWARD}:\n{grows}")
    more = re.search(r"\.\.\. (\d+) more stacks", peak)
    check(more and host["peak_stacks_total"] == int(more.group(1)) + 5,
          f"the text's count of entries: {more and more.group(0)}, JSON {host['peak_stacks_total']}")
    print(f"forward line {FORWARD}, loop {LOOP}; peak entries {host['peak_stacks_total']}; "
          f"growth {g['bytes_per_mark']:.0f} B/step, kept {kept} B/step")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("ok")


main()
