# SPDX-License-Identifier: MIT
"""GPU memory against the stand-in libcudart (no GPU here): exact per-device
peak and leaks, pinned host memory on its own, and a failed cudaMalloc
reported with its size, the device's free and total bytes, and the stack of
the failing call."""
import json
import os
import shutil

from harness import BIN, check, main, program, run, run_traced, workdir

MIB = 1 << 20
STANDIN = {"MEMTRACE_STANDIN_DEVICES": "2", "MEMTRACE_STANDIN_MEMORY": str(64 * MIB)}


def report(argv):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    r = run_traced(argv, trace, extra=STANDIN)
    check(r.returncode == 0, f"{argv} exited {r.returncode}: {r.stderr!r}")
    out = run([BIN, "report", "--json", "--top", "100", trace])
    check(out.returncode == 0, f"memtrace report failed: {out.stderr!r}")
    text = run([BIN, "report", trace]).stdout.decode()
    shutil.rmtree(d)
    (proc,) = json.loads(out.stdout)["processes"]
    return r, proc, text


def figures(mem):
    return (mem["leaked_bytes"], mem["leaked_blocks"], mem["peak_bytes"])


def test_devices_managed_and_pinned_apart():
    r, proc, _ = report([program("gpu-alloc")])
    m = proc["memories"]
    check(r.stdout == b"2\n", f"the 100 MiB cudaMalloc did not fail with 2: {r.stdout!r}")
    check(figures(m["cuda:0"]) == (4 * MIB, 2, 6 * MIB), f"cuda:0 {figures(m['cuda:0'])}")
    check(figures(m["cuda:1"]) == (4 * MIB + 512 * 1024, 2, 4 * MIB + 512 * 1024),
          f"cuda:1 {figures(m['cuda:1'])}")
    check(figures(m["cuda-managed"]) == (MIB, 1, MIB), f"cuda-managed {figures(m['cuda-managed'])}")
    check(figures(m["cuda-host"]) == (72 * 1024, 2, 96 * 1024), f"cuda-host {figures(m['cuda-host'])}")
    # pinned host memory is its own kind: none of it is in the host heap's figures
    check(m["host"]["leaked_bytes"] < 64 * 1024, f"host leaked {m['host']['leaked_bytes']}")


def test_failed_cudamalloc_diagnosed():
    _, proc, text = report([program("gpu-alloc")])
    fails = proc["memories"]["cuda:0"]["failures"]
    check(len(fails) == 1, f"failures on cuda:0: {fails}")
    f = fails[0]
    check((f["function"], f["size"], f["cuda_error"]) == ("cudaMalloc", 100 * MIB, 2),
          f"the failure: {f}")
    check((f["device_free"], f["device_total"]) == (59 * MIB, 64 * MIB),
          f"free/total on the device: {f.get('device_free')}/{f.get('device_total')}")
    check(f["live_bytes"] == 4 * MIB, f"live on cuda:0 at the failure: {f['live_bytes']}")
    names = [fr["function"] for fr in f["stack"]["frames"]]
    check(names[:2] == ["grow_too_far", "main"], f"the failing call's stack: {names}")
    held = [(s["bytes"], s["frames"][0]["function"]) for s in f["top_stacks"]]
    check(held == [(3 * MIB, "make_tensors"), (MIB, "make_tensors")], f"held at the failure: {held}")
    check("the device had 59.0 MiB free of 64.0 MiB" in text, f"no diagnosis line in:\n{text}")


def test_check_gate_per_device():
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    check(run_traced([program("gpu-alloc")], trace, extra=STANDIN).returncode == 0, "traced run failed")
    limits = ["--max-leaked", "64K", "--max-leaked", "cuda:1=4608K", "--max-leaked", "cuda-host=72K",
              "--max-leaked", "cuda-managed=1M"]
    ok = run([BIN, "check", *limits, "--max-leaked", "cuda:0=4M", trace])
    check(ok.returncode == 0, f"check with cuda:0=4M: {ok.returncode} {ok.stdout!r}")
    bad = run([BIN, "check", *limits, "--max-leaked", "cuda:0=4095K", trace])
    check(bad.returncode == 1 and b"cuda:0 leaked 4.00 MiB in 2 blocks" in bad.stdout,
          f"check with cuda:0=4095K: {bad.returncode} {bad.stdout!r}")
    shutil.rmtree(d)


main({
    "check_gate_per_device": test_check_gate_per_device,
    "devices_managed_and_pinned_apart": test_devices_managed_and_pinned_apart,
    "failed_cudamalloc_diagnosed": test_failed_cudamalloc_diagnosed,
})
