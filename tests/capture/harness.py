# SPDX-License-Identifier: MIT
"""Shared helpers of the capture tests: run a program under the preload,
read the trace back with `memtrace dump`, and fail with a clear message.

meson passes the build's paths in the environment: MEMTRACE_LIB (the
preload library), MEMTRACE_BIN (the memtrace command) and
MEMTRACE_PROGRAMS (the folder of the test programs)."""
import os
import re
import subprocess
import sys
import tempfile

LIB = os.environ["MEMTRACE_LIB"]
BIN = os.environ["MEMTRACE_BIN"]
PROGRAMS = os.environ["MEMTRACE_PROGRAMS"]
# The harm tests' second run, in sampled mode (meson.build's *-sampled): the same
# programs must behave the same; the figures are estimates (docs/sampling.md)
SAMPLED = bool(os.environ.get("MEMTRACE_SAMPLING"))
# its interval in bytes (K, M or G: powers of 1024, as the preload reads it)
INTERVAL = (int(os.environ["MEMTRACE_SAMPLING"].rstrip("KMG")) *
            1024 ** (" KMG".index(os.environ["MEMTRACE_SAMPLING"][-1]) if
                     os.environ["MEMTRACE_SAMPLING"][-1] in "KMG" else 0)) if SAMPLED else 0


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


# A case that must fill its trace's room (a disk, a file size limit) with a million blocks
# of 24 bytes: sampled at the suite's interval their trace is some 68 KB and fills nothing.
# Sampled, such a case runs at an interval of 1024 (some 260 KB, in chunks of up to
# 128 KiB) in a room of FILL_ROOM; a smaller interval would fill the table of sampled
# blocks with leaker's 500,000 live ones first.
FILL_SAMPLING = {"MEMTRACE_SAMPLING": "1024"} if SAMPLED else {}
FILL_ROOM = 128 << 10


def figure(got, truth, at_least=False):
    """got is the program's truth: exactly (or at least), or, sampled, within a quarter
    (for hundreds of samples: the sampler's own error is a few percent)."""
    if SAMPLED:
        return 0.75 * truth <= got and (at_least or got <= 1.25 * truth)
    return got >= truth if at_least else got == truth


def exact_above(smallest):
    """Settings under which a sampled run records every block of at least `smallest`
    bytes, as sampled mode does for blocks above 5 times its interval: its pass and its
    set at work, and a case's exact figures still exact. Nothing in full mode."""
    return {"MEMTRACE_SAMPLING": str((smallest - 1) // 5)} if SAMPLED else {}


def exact_size(size):
    """A block size of at least `size` that sampled mode records exactly (above 5 intervals)."""
    return max(size, 5 * INTERVAL + 1) if SAMPLED else size


def program(name):
    return os.path.join(PROGRAMS, name)


def workdir():
    return tempfile.mkdtemp(prefix="memtrace-test-")


def run(argv, env=None, cwd=None, timeout=600, stdin=None):
    return subprocess.run(argv, env=env, cwd=cwd, timeout=timeout, input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def traced_env(trace, extra=None):
    env = dict(os.environ)
    env["LD_PRELOAD"] = LIB
    env["MEMTRACE_OUTPUT"] = trace
    env.pop("MEMTRACE_TREE", None)
    env.update(extra or {})
    return env


def untraced_env(extra=None):
    """This environment without the preload and without any MEMTRACE_ setting (the
    harness's own included), for a program that `memtrace run` traces itself, or none."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRACE_") and k != "LD_PRELOAD"}
    env.update(extra or {})
    return env


def run_traced(argv, trace, extra=None, **kw):
    return run(argv, env=traced_env(trace, extra), **kw)


def dump_summary(trace):
    """The per-process summary of `memtrace dump --summary`, as a list of
    dicts with pid, ppid, origin, end and, per memory kind, the figures."""
    out = run([BIN, "dump", "--summary", "--json", trace])
    check(out.returncode == 0, f"memtrace dump failed ({out.returncode}): {out.stderr.decode()}")
    import json
    return json.loads(out.stdout)


def marked_lines(path, tag="SITE"):
    """{name: line} of the lines of a source file that end with `# TAG name`."""
    found = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            m = re.search(rf"# {tag} ([a-z-]+)$", line)
            if m:
                found[m.group(1)] = n
    return found


def main(tests):
    """Runs the named test functions; prints one line each; exits non-zero on any failure."""
    names = sys.argv[1:] or list(tests)
    failed = 0
    for name in names:
        try:
            tests[name]()
            print(f"ok {name}")
        except Failure as e:
            failed += 1
            print(f"FAIL {name}: {e}")
    sys.exit(1 if failed else 0)
