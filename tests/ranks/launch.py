# SPDX-License-Identifier: MIT
"""launch.py N SCRIPT: what torchrun and mpirun do, in small: starts N
workers of SCRIPT with this Python, each with its RANK, LOCAL_RANK and
WORLD_SIZE in its environment (fork and exec), and waits for them all.
Exits 0 when all exited 0, else 1 (a worker killed by a signal included).
The launcher itself has no rank. (Debian's torch 1.13 torchrun fails
under Python 3.11 before it starts a worker.)"""
import os
import subprocess
import sys

n, script = int(sys.argv[1]), sys.argv[2]
workers = []
for rank in range(n):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n))
    workers.append(subprocess.Popen([sys.executable, script], env=env))
codes = [w.wait() for w in workers]
print("worker exit codes:", " ".join(map(str, codes)), flush=True)
sys.exit(0 if not any(codes) else 1)
