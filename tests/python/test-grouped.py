# SPDX-License-Identifier: MIT
"""Stacks grouped by their Python stack (issue 12, docs/python.md), against
known truth: grouped.py allocates at one line through three native paths
(bytearray(n) and bytearray(2n): n + 1 and 2n + 1 bytes, from two
bytecode offsets of the line, so two stacks; bytes.join: 2n + 33 bytes; a
list of M items: 8M bytes), called from two lines, and keeps everything.
The report's peak and leak lists must hold exactly one entry per (Python
stack, native label), whose bytes and blocks are the sums of its stacks,
the innermost frame folded as `grouped.py:LINE in build (LABEL)`;
--native must show the old per-stack entries; and check must suppress by a
stack's native frames (a function folded away in the group) and list the
rest grouped.
Usage: test-grouped.py MEMTRACE PRELOAD GROUPED_PY"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

MEMTRACE, PRELOAD, SCRIPT = sys.argv[1:4]
N1, N2, M, FINAL = 100_000, 300_000, 20_000, 8_000_000
NAME = os.path.basename(SCRIPT)

with open(SCRIPT) as f:
    LINES = {m.group(1): n for n, line in enumerate(f, 1)
             for m in [re.search(r"# SITE ([a-z-]+)$", line)] if m}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


def interpreter():
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", "3.11.*", "bin", "python3.11")))
    return found[-1] if found else "/usr/bin/python3"


def report(trace, *extra):
    r = subprocess.run([MEMTRACE, "report", *extra, trace], capture_output=True, text=True,
                       timeout=300)
    check(r.returncode == 0, f"report {extra} exits {r.returncode}: {r.stderr}")
    return r.stdout


def ours(stacks):
    """The entries whose stack has a frame of the script."""
    return [s for s in stacks if any(f["module"] == "python" and f["file"] and
                                     os.path.basename(f["file"]) == NAME for f in s["frames"])]


def python_lines(s):
    return [f["line"] for f in s["frames"] if f["module"] == "python"]


def expected_groups():
    """{(caller line, site line): sorted [(bytes, blocks, stacks)]}"""
    want = {}
    for caller, n in (("call-a", N1), ("call-b", N2)):
        want[(LINES[caller], LINES["mixed"])] = sorted([(3 * n + 2, 2, 2), (2 * n + 33, 1, 1),
                                                        (8 * M, 1, 1)])
    return want


def check_grouped(label, stacks):
    got = {}
    for s in ours(stacks):
        inner = s["frames"][0]
        lines = python_lines(s)
        if lines[0] == LINES["final"]:
            check((s["bytes"], s["blocks"]) == (FINAL + 1, 1),
                  f"{label}: the final bytearray is {s['bytes']} B in {s['blocks']} blocks")
            continue
        check(inner["module"] == "python" and inner["folded"],
              f"{label}: the innermost frame is not a Python frame with a folded label: {inner}")
        check(lines[0] == LINES["mixed"] and len(lines) >= 2,
              f"{label}: Python lines {lines}, not the mixed line {LINES['mixed']} first")
        check(s["frames"][-1]["module"] == "python",
              f"{label}: a group's outermost frame is native: {s['frames'][-1]}")
        got.setdefault((lines[1], lines[0]), []).append(
            (s["bytes"], s["blocks"], len(s["stacks"]), inner["folded"]))
    want = expected_groups()
    plain = {k: sorted(e[:3] for e in v) for k, v in got.items()}
    check(plain == want, f"{label}: groups {plain} != {want}")
    for k, v in got.items():
        labels = [e[3] for e in v]
        check(len(set(labels)) == len(labels), f"{label}: {k} has one label twice: {labels}")
        # the text names the group by its line, the native label a suffix
        for e in v:
            check(e[3] and not e[3].startswith("_PyEval_EvalFrame"),
                  f"{label}: the folded label is {e[3]!r}")


def check_native(label, stacks):
    got = {}
    for s in ours(stacks):
        check(s["frames"][0]["module"] != "python" and not any("folded" in f for f in s["frames"]),
              f"{label}: --native shows a folded stack: {s['frames'][0]}")
        check("stacks" not in s, f"{label}: --native lists merged stacks: {s.get('stacks')}")
        lines = python_lines(s)
        if lines[0] == LINES["final"]:
            continue
        got.setdefault(lines[1], []).append(s["bytes"])
    want = {LINES[c]: sorted([n + 1, 2 * n + 1, 2 * n + 33, 8 * M])
            for c, n in (("call-a", N1), ("call-b", N2))}
    got = {k: sorted(v) for k, v in got.items()}
    check(got == want, f"{label}: --native stacks {got} != {want}")


def check_suppressed(d, trace):
    """check suppresses by a stack's native frames (the bytearrays' PyByteArray_Resize, which no
    group frame names: it is folded), then lists what is left grouped."""
    sup = os.path.join(d, "sup")
    with open(sup, "w") as f:
        f.write("leak:PyByteArray_Resize\n")
    r = subprocess.run([MEMTRACE, "check", "--suppressions", sup, trace], capture_output=True,
                       text=True, timeout=300)
    check(r.returncode == 1, f"check exits {r.returncode}: {r.stdout}")
    # the five bytearrays: two per call of build and the final one, no other
    check(r.stdout.rstrip().endswith(" in 5 blocks suppressed"),
          f"check does not suppress exactly the 5 bytearrays:\n{r.stdout}")
    check("PyByteArray_Resize" not in r.stdout, f"check lists a suppressed stack:\n{r.stdout}")
    for caller in ("call-a", "call-b"):
        line = (f" in 1 block by {NAME}:{LINES['mixed']} in build (")
        callers = [l for l in r.stdout.splitlines() if line in l and l.endswith(f"<module> ({NAME}:{LINES[caller]})")]
        check(len(callers) >= 1, f"check does not list the join of {caller} grouped:\n{r.stdout}")


def check_flamegraph(trace):
    """The folded innermost frames of build's bytearrays and of the final one at module level
    share a native label (PyByteArray_Resize) but not a function: each line its own, and its
    bytes (a shared label once gave build's text to the final bytearray)."""
    r = subprocess.run([MEMTRACE, "flamegraph", "--metric", "leaked", trace], capture_output=True,
                       text=True, timeout=300)
    check(r.returncode == 0, f"flamegraph exits {r.returncode}: {r.stderr}")
    got = {}
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"<module>(;build)? \((\w+)\) (\d+)", line)
        if m:
            got[(m.group(1) or "") + " " + m.group(2)] = int(m.group(3))
    want = {";build PyByteArray_Resize": 3 * N1 + 2 + 3 * N2 + 2,
            ";build _PyBytes_FromSize": 2 * N1 + 33 + 2 * N2 + 33,
            ";build list_new_prealloc": 8 * M * 2,
            " PyByteArray_Resize": FINAL + 1}
    check(got == want, f"flamegraph --metric leaked: {got} != {want}")


def check_view(trace):
    """memtrace view's flame of the leaks: one node per group under each caller, named by its
    own native label: three groups at build's line share its Python frame (a frame memo that
    left the label out named all three by the bytearray's, 1,660,035 bytes under call-b)."""
    r = subprocess.run([MEMTRACE, "view", "-o", "-", trace], capture_output=True, text=True,
                       timeout=300)
    if not check(r.returncode == 0, f"view exits {r.returncode}: {r.stderr}"):
        return
    start = r.stdout.find('{"memtrace_view"')
    data, _ = json.JSONDecoder().raw_decode(r.stdout, start)
    frames, nodes = data["frames"], data["nodes"]
    (proc,) = data["processes"]
    rows = proc["flames"]["host"]["leaked"]["rows"]
    got = {}
    for i in range(0, len(rows), 3):
        node = rows[i]
        text = frames[nodes[2 * node - 1]]
        if NAME not in text:
            continue
        parent = frames[nodes[2 * nodes[2 * node - 2] - 1]] if nodes[2 * node - 2] else ""
        got[(parent, text)] = (rows[i + 1], rows[i + 2])
    want = {}
    for caller, n in (("call-a", N1), ("call-b", N2)):
        parent = f"<module> ({NAME}:{LINES[caller]})"
        site = f"{NAME}:{LINES['mixed']} in build"
        want[(parent, f"{site} (PyByteArray_Resize)")] = (3 * n + 2, 2)
        want[(parent, f"{site} (_PyBytes_FromSize)")] = (2 * n + 33, 1)
        want[(parent, f"{site} (list_new_prealloc)")] = (8 * M, 1)
    final = [k for k in got if k[1] == f"{NAME}:{LINES['final']} in <module> (PyByteArray_Resize)"]
    check(len(final) == 1 and got[final[0]] == (FINAL + 1, 1), f"view: the final bytearray {final}")
    for k in final:
        del got[k]
    check(got == want, f"view's leaked flame: {got} != {want}")


def main():
    python = interpreter()
    print("interpreter:", python)
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace.bin")
        env = dict(os.environ, LD_PRELOAD=PRELOAD, MEMTRACE_OUTPUT=trace)
        env.pop("MEMTRACE_TREE", None)
        env.pop("PYTHONMALLOC", None)
        r = subprocess.run([python, SCRIPT, str(N1), str(N2), str(M), str(FINAL)], env=env,
                           capture_output=True, timeout=120)
        if not check(r.returncode == 0, f"grouped.py exits {r.returncode}: {r.stderr[-500:]!r}"):
            return
        (p,) = json.loads(report(trace, "--json", "--top", "1000"))["processes"]
        host = p["memories"]["host"]
        check_grouped("leak", host["leak_stacks"])
        check_grouped("peak", host["peak_stacks"])
        (p,) = json.loads(report(trace, "--json", "--native", "--top", "100000"))["processes"]
        host = p["memories"]["host"]
        check_native("leak", host["leak_stacks"])
        check_native("peak", host["peak_stacks"])
        text = report(trace, "--top", "1000")
        by = f" in 2 blocks by {NAME}:{LINES['mixed']} in build ("
        check(text.count(by) == 4, f"the text report has not 4 lines with {by!r}:\n{text}")
        caller = f"<module> ({NAME}:{LINES['call-b']})"
        check(caller in text, f"the text report does not name the caller {caller!r}")
        check_suppressed(d, trace)
        check_flamegraph(trace)
        check_view(trace)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("ok")


main()
