# SPDX-License-Identifier: MIT
"""The allocation-failed finding: a request that returned no memory is the
first finding of the diagnosis (JSON and text), its figure the exact size
asked, set beside the machine's physical memory, which the report's
memory_over_time.mem_total gives equal to /proc/meminfo's MemTotal.

Two programs: samples/big-request (C: a 32 MiB malloc fails under an
address-space limit while the heap holds 40 MiB free in holes) and a torch
CPU script that catches the failure of torch.empty of 4 TiB under Debian's
/usr/bin/python3 (skipped, 77, where it has no torch)."""
import os
import re
import shutil
import subprocess

from oomtest import BIN, MiB, check, diagnosis, main, program, report, run, run_traced, workdir

PYTHON = "/usr/bin/python3"
HUGE = 4 << 40  # bytes torch.empty is asked for: uint8, one dimension
TORCH_SCRIPT = f"""
import torch
try:
    torch.empty({HUGE}, dtype=torch.uint8)
except RuntimeError as e:
    print("caught:", str(e).splitlines()[0])
"""


def mem_total():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


def check_first(trace, size, fn):
    """The finding is first in the JSON and the text, with size as its figure."""
    (proc,) = [p for p in report(trace)["processes"] if p["memories"]["host"]["failed_allocations"]]
    findings = diagnosis(proc, "fragmentation")["findings"]
    check(findings and findings[0]["finding"] == "allocation-failed",
          f"allocation-failed is not the first finding: {[f['finding'] for f in findings]}")
    first = findings[0]
    check(first["figure"] == size, f"the figure is {first['figure']}, not the {size} bytes asked")
    mt = diagnosis(proc, "memory_over_time")["mem_total"]
    check(mt == mem_total(), f"mem_total {mt} is not /proc/meminfo's MemTotal {mem_total()}")
    check(fn in first["text"], f"the finding does not name {fn}: {first['text']}")
    out = run([BIN, "report", trace])
    check(out.returncode == 0, f"memtrace report failed: {out.stderr.decode()}")
    text = out.stdout.decode()
    after = text.split("  diagnosis:\n", 1)
    check(len(after) == 2 and after[1].startswith("    allocation-failed: "),
          f"the text's diagnosis does not start with allocation-failed:\n{text[-3000:]}")
    return first


def test_c_malloc():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([program("big-request")], trace)
    check(out.returncode == 1 and b"failed" in out.stdout, f"big-request: {out.returncode} {out.stdout!r}")
    first = check_first(trace, 32 * MiB, "malloc")
    # below physical memory and the heap had that much free: not a size error
    check("size or shape" not in first["advice"] and "not in one piece" in first["advice"],
          f"the advice for a request the heap could hold in one piece: {first['advice']}")
    shutil.rmtree(d)


def test_torch_empty_4tib():
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode:
        print("skip: /usr/bin/python3 has no torch")
        raise SystemExit(77)
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([PYTHON, "-c", TORCH_SCRIPT], trace)
    check(out.returncode == 0 and b"caught:" in out.stdout,
          f"the torch script: {out.returncode} {out.stdout!r} {out.stderr.decode()[-2000:]}")
    m = re.search(rb"allocate (\d+) bytes", out.stdout)
    check(m and int(m.group(1)) == HUGE, f"torch's message names another size: {out.stdout!r}")
    first = check_first(trace, HUGE, "memalign")
    check(first["text"].startswith("4.00 TiB asked"), f"the text: {first['text']}")
    check("size or shape" in first["advice"], f"no size-or-shape advice for 4 TiB: {first['advice']}")
    shutil.rmtree(d)


main({"c_malloc": test_c_malloc, "torch_empty_4tib": test_torch_empty_4tib})
