# SPDX-License-Identifier: MIT
"""A 4-rank torch.distributed job on the CPU (gloo), launched as torchrun
does (tests/ranks/launch.py: fork and exec with RANK in the environment)
under `memtrace run -o DIR/rank%r.trace`: each rank writes its own trace,
the launcher its own, and `memtrace report` over the four puts them side
by side: each trace's peak per kind as its own `report --json` gives it,
rank 2's failed 1 PiB allocation first and rank 3's SIGKILL after it, and
the stack that differs most, the line where each rank holds (rank + 1) x 32
MiB, with exactly those bytes. Sampled capture (--sampling 256K) keeps the
traces small and the test short: every block it asserts on is over 5 x 256
KiB and recorded exactly, and failures are always recorded.
Exit 77 (skip) without torch in /usr/bin/python3."""
import json
import os
import re
import sys

from harness import BIN, check, main, run, untraced_env, workdir

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
MiB = 1 << 20


def report_json(*traces):
    r = run([BIN, "report", "--json", *traces])
    check(r.returncode == 0, f"report --json {traces} exited {r.returncode}: {r.stderr.decode()}")
    return json.loads(r.stdout)


def test_gloo_job():
    d = workdir()
    env = untraced_env({"GLOO_INIT_FILE": os.path.join(d, "gloo-init"), "PYTHONDONTWRITEBYTECODE": "1",
                        "OMP_NUM_THREADS": "1"})
    r = run([BIN, "run", "--sampling", "256K", "-o", os.path.join(d, "rank%r.trace"), "--", PYTHON,
             os.path.join(HERE, "launch.py"), "4", os.path.join(HERE, "gloo-job.py")], env=env)
    out = r.stdout.decode()
    check(r.returncode == 1 and out == "worker exit codes: 0 0 0 -9\n",
          f"the job exited {r.returncode} with {out!r}, not rank 3 killed alone: {r.stderr.decode()[-2000:]}")
    check(f"written to {d}/ranknorank.trace" in r.stderr.decode(), f"memtrace run did not name the launcher's trace")
    files = sorted(f for f in os.listdir(d) if f.endswith(".trace"))
    check(files == ["rank0.trace", "rank1.trace", "rank2.trace", "rank3.trace", "ranknorank.trace"], f"traces {files}")
    traces = [os.path.join(d, f"rank{k}.trace") for k in range(4)]

    # the launcher's trace holds the launcher, not its workers
    for p in report_json(os.path.join(d, "ranknorank.trace"))["processes"]:
        check("launch.py" in p["command"], f"a worker is in the launcher's trace: {p['command']}")

    # each rank's own report: one process, and the line that holds its bytes
    singles = []
    for k, t in enumerate(traces):
        procs = report_json(t)["processes"]
        check(len(procs) == 1 and procs[0]["command"].endswith("gloo-job.py"), f"rank {k}: {[p['command'] for p in procs]}")
        held = [s["bytes"] for s in procs[0]["memories"]["host"]["peak_stacks"]
                if any(f["function"] == "hold" for f in s["frames"])]
        check(held == [(k + 1) * 32 * MiB], f"rank {k} held {held} at its peak in hold(), not {(k + 1) * 32} MiB")
        singles.append(procs[0])

    # side by side
    side = report_json(*traces)
    check([t["file"] for t in side["traces"]] == traces, "the traces are not in the order given")
    for k, (t, p) in enumerate(zip(side["traces"], singles)):
        check(t["pid"] == p["pid"] and t["processes"] == 1, f"rank {k}: pid {t['pid']}, not {p['pid']}")
        for kind, m in t["memories"].items():
            check(m["peak_bytes"] == p["memories"][kind]["peak_bytes"],
                  f"rank {k} {kind} peak {m['peak_bytes']}, its own report says {p['memories'][kind]['peak_bytes']}")
        check(t["memories"]["host"]["failed_allocations"] == (1 if k == 2 else 0), f"rank {k} failed allocations")
    check([t["end"] for t in side["traces"]] == ["exit", "exit", "exit", "killed"], "ends")
    check(side["trouble_order"] == [2, 3], f"trouble order {side['trouble_order']}, not rank 2 then rank 3")
    failed, killed = side["traces"][2]["trouble"], side["traces"][3]["trouble"]
    check(failed["what"] == "failed" and failed["function"] == "posix_memalign" and failed["size"] == 1 << 50
          and failed["error"] == 12 and failed["kind"] == "host", f"rank 2's trouble: {failed}")
    check(killed["what"] == "killed" and killed["time_ns"] > failed["time_ns"], f"rank 3's trouble: {killed}")
    top = side["differing_stacks"][0]
    check(top["kind"] == "host" and top["peak_bytes"] == [32 * MiB, 64 * MiB, 96 * MiB, 128 * MiB]
          and top["spread_bytes"] == 96 * MiB and "in hold" in top["frames"][0],
          f"the stack that differs most: {top['label']} {top['peak_bytes']}")

    text = run([BIN, "report", *traces]).stdout.decode()
    check(re.search(r"^  first: \+[\d.]+ s  rank2\.trace \(process \d+\): posix_memalign of 1\.00 PiB failed "
                    r"\(ENOMEM\)", text, re.M), f"the text does not put rank 2's failure first: {text}")
    check(re.search(r"^  \+[\d.]+ s  rank3\.trace \(process \d+\): killed", text, re.M), "rank 3's kill")
    check(re.search(r"^  host, 96\.0 MiB apart: 32\.0 MiB \| 64\.0 MiB \| 96\.0 MiB \| 128 MiB by gloo-job\.py:\d+ in hold ",
                    text, re.M), f"the text's first differing stack: {text}")


if __name__ == "__main__":
    if run([PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"]).returncode:
        print("skip: /usr/bin/python3 has no torch with gloo (python3-torch)")
        sys.exit(77)
    main({"gloo_job": test_gloo_job})
