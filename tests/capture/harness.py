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


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


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
