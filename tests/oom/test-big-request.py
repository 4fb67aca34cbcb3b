# SPDX-License-Identifier: MIT
"""samples/big-request: under an address-space limit, a 32 MiB malloc fails
while the heap holds 40 MiB free in 100 KiB holes. The failure must be in
the report with the size, the heap's free bytes just before (mallinfo2's
fordblks, printed by the sample), RSS then, and the holder: load_records'
400 blocks of 100 KiB."""
import os
import re
import shutil

from oomtest import MiB, check, functions, main, names, near, program, report, run_traced, workdir

RECORDS, RECORD_SIZE, REQUEST = 400, 100 << 10, 32 * MiB


def test_failure_with_free_and_holders():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([program("big-request")], trace)
    check(out.returncode == 1 and b"failed" in out.stdout, f"big-request: {out.returncode} {out.stdout!r}")
    m = re.search(rb"fordblks (\d+) request (\d+)", out.stdout)
    check(m, f"the sample did not print mallinfo2's fordblks: {out.stdout!r}")
    fordblks = int(m.group(1))
    check(fordblks > REQUEST, f"the heap's free {fordblks} is not more than the request: the sample is wrong")

    (proc,) = report(trace)["processes"]
    host = proc["memories"]["host"]
    check(host["failed_allocations"] == 1, f"{host['failed_allocations']} failed allocations, not 1")
    (f,) = host["failures"]
    check((f["function"], f["size"], f["errno"]) == ("malloc", REQUEST, 12),
          f"the failure is {f['function']} of {f['size']} errno {f['errno']}, not malloc of 32 MiB ENOMEM")
    check(names(f["stack"], "assemble_report"), f"the failure's stack: {functions(f['stack'])}")
    check((f["live_bytes"], f["live_blocks"]) == (RECORDS * RECORD_SIZE, RECORDS),
          f"live at the failure {f['live_bytes']} in {f['live_blocks']}")
    check("heap_free_before" in f and "rss_before" in f, f"the failure has no heap_free_before/rss_before: {sorted(f)}")
    near("heap_free_before", f["heap_free_before"], fordblks, 0.05)
    check(f["rss_before"] >= RECORDS * 2 * RECORD_SIZE * 0.95,
          f"rss_before {f['rss_before']} is below the 80 MiB the heap had touched")
    holder = f["top_stacks"][0]
    check(names(holder, "load_records") and holder["bytes"] == RECORDS * RECORD_SIZE
          and holder["blocks"] == RECORDS, f"the top holder: {holder['bytes']} in {holder['blocks']} by {functions(holder)}")
    shutil.rmtree(d)


main({"failure_with_free_and_holders": test_failure_with_free_and_holders})
