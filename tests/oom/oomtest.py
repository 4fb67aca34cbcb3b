# SPDX-License-Identifier: MIT
"""Shared helpers of the out-of-memory tests: run a sample of samples/ under
the preload, read `memtrace report --json`, compare a figure with the truth
within a tolerance, and put a process in a cgroup with a memory limit.

meson passes MEMTRACE_LIB, MEMTRACE_BIN, MEMTRACE_PROGRAMS (the built
samples) and MEMTRACE_SAMPLES_SOURCE (samples/, for the Python one)."""
import contextlib
import json
import os

from harness import BIN, Failure, check, main, program, run, run_traced, traced_env, workdir  # noqa: F401

SAMPLES_SOURCE = os.environ.get("MEMTRACE_SAMPLES_SOURCE", "")
MiB = 1 << 20


def report(trace):
    out = run([BIN, "report", "--json", trace])
    check(out.returncode == 0, f"memtrace report failed ({out.returncode}): {out.stderr.decode()}")
    return json.loads(out.stdout)


def size(text):
    """Bytes of a size as the text report prints it ("16.1 MiB")."""
    number, unit = text.split()
    return float(number) * {"B": 1, "KiB": 1 << 10, "MiB": MiB, "GiB": 1 << 30, "TiB": 1 << 40}[unit]


def diagnosis(proc, key):
    d = proc.get("diagnosis")
    check(d is not None and key in d, f"the report has no diagnosis.{key} (keys: {sorted(d or {})})")
    return d[key]


def near(what, got, truth, tolerance):
    """got within tolerance (0.05 = 5%) of truth, else a failure naming both."""
    check(got is not None and abs(got - truth) <= tolerance * abs(truth),
          f"{what} is {got}, not within {tolerance:.0%} of {truth}")


def functions(stack):
    return [f["function"] for f in stack["frames"]]


def names(stack, function):
    """True when a frame of stack is function (or, for C++, starts with it)."""
    return any(f and (f == function or f.startswith(function + "(")) for f in functions(stack))


@contextlib.contextmanager
def memory_cgroup(limit):
    """A new memory cgroup limited to limit bytes, yielding a function that
    moves the calling process into it (for Popen's preexec_fn). cgroup v2
    (memory.max) where the unified hierarchy has the memory controller,
    else v1 (memory.limit_in_bytes). Exits 77, meson's skip, when neither
    can be used (not root, no memory controller)."""
    name = f"memtrace-oom-test-{os.getpid()}"
    v2_root = "/sys/fs/cgroup"
    v1_root = "/sys/fs/cgroup/memory"
    candidates = []
    try:
        with open(os.path.join(v2_root, "cgroup.subtree_control")) as f:
            if "memory" in f.read().split():
                candidates.append((v2_root, "memory.max"))
    except OSError:
        pass
    if os.path.exists(os.path.join(v1_root, "memory.limit_in_bytes")):
        candidates.append((v1_root, "memory.limit_in_bytes"))
    group = None
    for root, limit_file in candidates:
        path = os.path.join(root, name)
        try:
            os.mkdir(path)
            with open(os.path.join(path, limit_file), "w") as f:
                f.write(str(limit))
            group = path
            break
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(path)
    if group is None:
        print("skip: no memory cgroup can be made here (root and a memory controller are needed)")
        raise SystemExit(77)

    def enter():
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    enter.procs = os.path.join(group, "cgroup.procs")  # for a process that enters itself

    try:
        yield enter
    finally:
        os.rmdir(group)
