# SPDX-License-Identifier: MIT
"""The line of a Python frame (analyzer/pyframes.c) against CPython itself:
each pyenv interpreter here (3.10 to 3.13) prints the code objects of
several stdlib modules and the line of every instruction
(dump-linetables.py); check-pyframes computes every one of them from the
line table and must agree on all. A version not installed is said and
skipped; at least one must be there.
Usage: test-pyframes.py CHECK-PYFRAMES DUMP-LINETABLES.PY"""
import os
import shutil
import subprocess
import sys
import tempfile

CHECK, DUMP = sys.argv[1], sys.argv[2]
VERSIONS = ["3.10.13", "3.11.7", "3.12.1", "3.13.0"]


def pyenv_root():
    pyenv = shutil.which("pyenv") or os.path.expanduser("~/.pyenv/bin/pyenv")
    try:
        return subprocess.run([pyenv, "root"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))


root = pyenv_root()
checked, failed = 0, 0
with tempfile.TemporaryDirectory() as tmp:
    for v in VERSIONS:
        python = os.path.join(root, "versions", v, "bin", "python" + v.rsplit(".", 1)[0])
        if not os.access(python, os.X_OK):
            print(f"Python {v}: not installed ({python}), not checked")
            continue
        fixture = os.path.join(tmp, v)
        with open(fixture, "w") as out:
            subprocess.run([python, "-I", DUMP], stdout=out, check=True)
        r = subprocess.run([CHECK, fixture], capture_output=True, text=True)
        print(f"Python {v}: {r.stdout.strip()}")
        sys.stdout.write(r.stderr)
        checked += 1
        failed += r.returncode != 0

if not checked:
    print("no pyenv Python 3.10 to 3.13 found under", root)
sys.exit(1 if failed or not checked else 0)
