# SPDX-License-Identifier: MIT
"""The torch training sample, samples/torch-keeps-graph.py, run unchanged as a
bench workload: what memtrace's Python frames cost on a real training loop.

    bench-torch.py [STEPS]

Loads the sample as a module and calls its main() with --steps STEPS (the
sample's own default, 25, without an argument), so the frames traced are the
sample's plus this file's two. The sample prints its own result (the mean
validation loss and the bytes its kept graphs hold per step); this file
prints it, then the result line run-bench reads: calls= is the number of
training steps, not of allocator calls, and checksum= is the CRC-32 of the
sample's output, which is deterministic (fixed seed, one thread), so a run
that changed the training shows a different one. With BENCH_RUSAGE set, the
process's own CPU time and peak RSS go to stderr as the C workloads print
them."""
import contextlib
import importlib.util
import io
import os
import resource
import sys
import zlib

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples",
                      "torch-keeps-graph.py")


def report_rusage():
    if not os.environ.get("BENCH_RUSAGE"):
        return
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"bench-rusage: utime_us={round(ru.ru_utime * 1e6)} stime_us={round(ru.ru_stime * 1e6)}"
          f" maxrss_kb={ru.ru_maxrss}", file=sys.stderr)


def main():
    steps = 25
    if len(sys.argv) > 1:
        try:
            steps = int(sys.argv[1])
        except ValueError:
            steps = 0
        if steps <= 0:
            sys.exit(f"{sys.argv[0]}: expected a positive count, got '{sys.argv[1]}'")
    sys.dont_write_bytecode = True  # no __pycache__ in samples/ of the source tree
    spec = importlib.util.spec_from_file_location("torch_keeps_graph", SAMPLE)
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    sys.argv = [SAMPLE, "--steps", str(steps)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        sample.main()
    text = out.getvalue()
    print(text, end="")
    print(f"bench-torch: steps={steps} calls={steps} checksum={zlib.crc32(text.encode()):08x}",
          flush=True)
    report_rusage()


if __name__ == "__main__":
    main()
