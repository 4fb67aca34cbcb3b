# SPDX-License-Identifier: MIT
"""samples/caching-allocator against the stand-in libcudart (a 1 GiB device,
no GPU here): the report shows the reserve, the flush and the retry, with
the device's free and total bytes at each failed cudaMalloc."""
import json
import os
import shutil
import sys

from harness import BIN, check, main, run, run_traced, workdir

MIB = 1 << 20
SAMPLE = sys.argv.pop(1)


def test_reserve_flush_retry():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced([SAMPLE], trace, extra={"MEMTRACE_STANDIN_MEMORY": str(1024 * MIB)})
    check(r.returncode == 0, f"the sample exited {r.returncode}: {r.stdout!r} {r.stderr!r}")
    check(r.stdout == b"cudaMalloc of 512 MiB failed: flushed 512 MiB of cached segments, retrying\n"
                      b"cudaMalloc of 512 MiB failed: flushed 0 MiB of cached segments, retrying\n"
                      b"out of memory: 512 MiB could not be allocated\n", f"output {r.stdout!r}")
    out = run([BIN, "report", "--json", "--top", "100", trace])
    check(out.returncode == 0, f"memtrace report failed: {out.stderr!r}")
    (proc,) = json.loads(out.stdout)["processes"]
    dev = proc["memories"]["cuda:0"]
    # the reserve: six 128 MiB segments, then the 512 MiB one after the flush
    check((dev["allocations"], dev["frees"]) == (7, 4), f"allocations/frees {dev['allocations']}/{dev['frees']}")
    check(dev["peak_bytes"] == 768 * MIB, f"peak {dev['peak_bytes']}")
    check((dev["leaked_bytes"], dev["leaked_blocks"]) == (768 * MIB, 3), f"live at exit {dev['leaked_bytes']}")
    fails = [(f["size"], f["device_free"], f["device_total"], f["live_bytes"]) for f in dev["failures"]]
    # before the flush 768 MiB are held, 256 MiB free; after the retry succeeds, the same again
    check(fails == [(512 * MIB, 256 * MIB, 1024 * MIB, 768 * MIB)] * 3, f"failures {fails}")
    names = [[fr["function"] for fr in f["stack"]["frames"][:2]] for f in dev["failures"]]
    check(names == [["reserve_segment", "allocate"]] * 3, f"the failing calls' stacks {names}")
    shutil.rmtree(d)


main({"reserve_flush_retry": test_reserve_flush_retry})
