# SPDX-License-Identifier: MIT
"""The symbolizer on traces of real processes: runs programs/ under the
preload, then check-symbols on each trace. The module+offset cases trace a
copy of sym-c and then replace the copy with another build (sym-c-other) or
delete it; the stripped case traces a copy without debug info; the
debuglink cases a copy whose debug info is in a separate file named by
.gnu_debuglink, and a copy whose .gnu_debuglink names a FIFO (whose open()
would wait for a writer for ever).

argv: the preload library, check-symbols, the folder of the built programs,
the folder of their sources."""
import os
import shutil
import subprocess
import sys
import tempfile

LIB, CHECK, BUILT, SOURCES = sys.argv[1:5]


def traced(argv, trace):
    env = dict(os.environ, LD_PRELOAD=LIB, MEMTRACE_OUTPUT=trace)
    env.pop("MEMTRACE_TREE", None)
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if r.returncode != 0 or not os.path.exists(trace):
        raise SystemExit(f"{argv[0]} under the preload: status {r.returncode}: {r.stderr.decode()}")


def check(name, mode, trace, source, *extra):
    try:
        r = subprocess.run([CHECK, mode, trace, os.path.join(SOURCES, source), *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    except subprocess.TimeoutExpired:
        print(f"FAIL {name}: check-symbols did not finish in 60 s")
        return False
    print(("ok " if r.returncode == 0 else "FAIL ") + name)
    if r.returncode != 0:
        print(r.stdout.decode())
    return r.returncode == 0


def main():
    tmp = tempfile.mkdtemp(prefix="memtrace-sym-")
    ok = True
    try:
        for prog, mode, source in [("sym-c", "c", "sym-c.c"), ("sym-inline", "inline", "sym-inline.c"),
                                   ("sym-cxx", "cxx", "sym-cxx.cc")]:
            trace = os.path.join(tmp, prog + ".mtrace")
            traced([os.path.join(BUILT, prog)], trace)
            ok &= check(prog, mode, trace, source)

        # Debug info stripped, .symtab kept: names without file and line.
        stripped = os.path.join(tmp, "sym-c-stripped")
        subprocess.run(["objcopy", "--strip-debug", os.path.join(BUILT, "sym-c"), stripped], check=True)
        traced([stripped], os.path.join(tmp, "stripped.mtrace"))
        ok &= check("stripped", "stripped", os.path.join(tmp, "stripped.mtrace"), "sym-c.c")

        # Debug info in a separate file named by .gnu_debuglink, next to the
        # program: file and line come from it. Then the same name as a FIFO:
        # names from .symtab only, and no wait.
        for case, debug, mode in [("debuglink", "sym-c-linked.debug", "c"),
                                  ("debuglink-fifo", "sym-c-fifo.debug", "stripped")]:
            prog = os.path.join(tmp, case)
            debug = os.path.join(tmp, debug)
            subprocess.run(["objcopy", "--only-keep-debug", os.path.join(BUILT, "sym-c"), debug],
                           check=True)
            subprocess.run(["objcopy", "--strip-debug", "--add-gnu-debuglink=" + debug,
                            os.path.join(BUILT, "sym-c"), prog], check=True)
            if mode == "stripped":
                os.unlink(debug)
                os.mkfifo(debug)
            trace = os.path.join(tmp, case + ".mtrace")
            traced([prog], trace)
            ok &= check(case, mode, trace, "sym-c.c")

        # Replaced by another build after the trace: build-id mismatch, no names.
        replaced = os.path.join(tmp, "replaced")
        shutil.copy(os.path.join(BUILT, "sym-c"), replaced)
        traced([replaced], os.path.join(tmp, "replaced.mtrace"))
        shutil.copy(os.path.join(BUILT, "sym-c-other"), replaced)
        ok &= check("replaced", "gone", os.path.join(tmp, "replaced.mtrace"), "sym-c.c", replaced)

        # Deleted after the trace.
        deleted = os.path.join(tmp, "deleted")
        shutil.copy(os.path.join(BUILT, "sym-c"), deleted)
        traced([deleted], os.path.join(tmp, "deleted.mtrace"))
        os.unlink(deleted)
        ok &= check("deleted", "gone", os.path.join(tmp, "deleted.mtrace"), "sym-c.c", deleted)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0 if ok else 1)


main()
