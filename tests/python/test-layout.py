# SPDX-License-Identifier: MIT
"""preload/python-layout.h against the interpreters' own headers: for every
CPython 3.10-3.13 whose headers are here (pyenv's installs, Debian's
/usr/include/python3.X), layout.c is compiled against them and what it
prints must equal python-layout-table's figures for that version.
At least one interpreter must be checked; those with no headers are named.
Usage: test-layout.py CC LAYOUT_C LAYOUT_TABLE"""
import glob
import os
import subprocess
import sys
import tempfile

CC, LAYOUT_C, TABLE = sys.argv[1:4]
VERSIONS = ["3.10", "3.11", "3.12", "3.13"]


def header_dirs(version):
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    dirs = glob.glob(os.path.join(root, "versions", version + ".*", "include", "python" + version))
    dirs.append("/usr/include/python" + version)
    return [d for d in dirs if os.path.isfile(os.path.join(d, "internal", "pycore_pystate.h"))]


def figures(out):
    return dict(line.split() for line in out.splitlines())


failed = checked = 0
with tempfile.TemporaryDirectory() as tmp:
    for version in VERSIONS:
        table = figures(subprocess.run([TABLE, version], check=True, capture_output=True,
                                       text=True).stdout)
        dirs = header_dirs(version)
        if not dirs:
            print(f"{version}: no headers here, not checked")
        for inc in dirs:
            exe = os.path.join(tmp, "layout")
            subprocess.run([CC, "-w", "-I" + inc, LAYOUT_C, "-o", exe], check=True)
            real = figures(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)
            checked += 1
            if real != table:
                failed += 1
                diff = {k: (table.get(k), real.get(k)) for k in set(real) | set(table)
                        if real.get(k) != table.get(k)}
                print(f"FAIL {version} ({inc}): table vs headers {diff}")
            else:
                print(f"ok {version} ({inc}): {len(real)} figures")
if not checked:
    print("FAIL no CPython 3.10-3.13 headers found: nothing checked")
    failed += 1
sys.exit(1 if failed else 0)
