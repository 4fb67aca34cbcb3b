# SPDX-License-Identifier: MIT
"""Known truth for the grouping by Python stack (test-grouped.py): one line
of build() allocates through three native paths (two bytearrays, a
bytes.join, a list repeat); build is called from two lines; a last
bytearray at its own line makes the end the peak. Every block is kept and
the process ends with os._exit(0), so the leaks are what was kept. The
sizes are the caller's: argv N1 N2 M FINAL."""
import os
import sys

N1, N2, M, FINAL = (int(a) for a in sys.argv[1:5])
keep = []


def build(n):
    keep.append((bytearray(n), bytearray(2 * n), b"".join([b"a" * n, b"b" * n]), [0] * M))  # SITE mixed


build(N1)  # SITE call-a
build(N2)  # SITE call-b
keep.append(bytearray(FINAL))  # SITE final
sys.stdout.flush()
os._exit(0)
