# SPDX-License-Identifier: MIT
"""MEMTRACE_OUTPUT's escapes (include/memtrace/output-name.h): %p the pid,
%r the rank (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID: the first set to a
number), %h the host name. A forked child stays in its parent's file; an
exec'd program whose own expansion names another file writes that file (a
launcher's workers, one trace per rank), and one whose expansion is the
same joins it. Each file holds exactly its processes, with their figures."""
import json
import os
import shlex

from harness import BIN, check, main, program, run, run_traced, workdir

LEAKER = program("leaker")
HOST = os.uname().nodename


def processes(trace):
    r = run([BIN, "report", "--json", trace])
    check(r.returncode == 0, f"memtrace report --json {trace} exited {r.returncode}: {r.stderr.decode()}")
    return json.loads(r.stdout)["processes"]


def leaked(p):
    h = p["memories"]["host"]
    return h["leaked_bytes"], h["leaked_blocks"]


def leaker_line(env, n, size):
    """A shell line that runs `leaker n size` with env: ceil(n/2) blocks of size bytes live."""
    return " ".join(f"{k}={v}" for k, v in env.items()) + f" {shlex.quote(LEAKER)} {n} {size}"


def test_rank_per_exec():
    d = workdir()
    lines = [leaker_line({"RANK": 0}, 2, 1000), leaker_line({"RANK": 1}, 4, 1000),
             leaker_line({"RANK": "x", "OMPI_COMM_WORLD_RANK": 2}, 6, 1000),
             leaker_line({"SLURM_PROCID": 3}, 8, 1000)]
    r = run_traced(["sh", "-c", "; ".join(lines)], os.path.join(d, "t.%r.%h"))
    check(r.returncode == 0, f"sh exited {r.returncode}: {r.stderr.decode()}")
    names = sorted(os.listdir(d))
    want = sorted([f"t.{k}.{HOST}" for k in ("0", "1", "2", "3", "norank")])
    check(names == want, f"files {names}, not {want}")
    for rank in range(4):
        procs = processes(os.path.join(d, f"t.{rank}.{HOST}"))
        check(len(procs) == 1 and procs[0]["exe"] == LEAKER,
              f"rank {rank}: {[p['exe'] for p in procs]}, not one leaker")
        got = leaked(procs[0])
        check(got == ((rank + 1) * 1000, rank + 1), f"rank {rank} leaked {got}, not {(rank + 1) * 1000} in {rank + 1}")
    shell = processes(os.path.join(d, f"t.norank.{HOST}"))
    check(len(shell) == 1 and shell[0]["exe"] != LEAKER,
          f"the launcher's file holds {[p['exe'] for p in shell]}, not the shell alone")


def test_same_rank_joins():
    """The rank is inherited: the launcher and everything it execs share one file."""
    d = workdir()
    r = run_traced(["sh", "-c", f"{shlex.quote(LEAKER)} 2 500; {shlex.quote(LEAKER)} 4 500"],
                   os.path.join(d, "r%r"), {"RANK": "12"})
    check(r.returncode == 0, f"sh exited {r.returncode}: {r.stderr.decode()}")
    check(os.listdir(d) == ["r12"], f"files {os.listdir(d)}, not r12")
    procs = processes(os.path.join(d, "r12"))
    leakers = [leaked(p) for p in procs if p["exe"] == LEAKER]
    check(len(procs) == 3 and sorted(leakers) == [(500, 1), (1000, 2)],
          f"{len(procs)} processes, leakers {leakers}: not the shell and two leakers")


def test_pid_per_exec():
    """%p: fork-exec's forked processes share the parent's file; the program
    its grandchild execs writes its own (its pid names another file)."""
    d = workdir()
    r = run_traced([program("fork-exec"), LEAKER], os.path.join(d, "p.%p"))
    check(r.returncode == 0, f"fork-exec exited {r.returncode}: {r.stderr.decode()}")
    files = sorted(os.listdir(d), key=lambda f: int(f[2:]))
    check(len(files) == 2, f"files {files}, not the parent's and the exec'd program's")
    first, second = (processes(os.path.join(d, f)) for f in files)
    check(files[0] == f"p.{first[0]['pid']}" and len(first) == 3,
          f"{files[0]}: pids {[p['pid'] for p in first]}, not the parent, child and grandchild")
    check(files[1] == f"p.{second[0]['pid']}" and len(second) == 1 and second[0]["exe"] == LEAKER,
          f"{files[1]}: {[(p['pid'], p['exe']) for p in second]}, not the exec'd leaker")
    check(leaked(second[0]) == (1332, 4), f"the exec'd leaker leaked {leaked(second[0])}, not 1332 in 4")
    check(second[0]["pid"] == first[2]["pid"], "the leaker is not the grandchild's pid")


def test_run_names_the_file():
    """memtrace run expands the name as the preload does and says it."""
    d = workdir()
    r = run([BIN, "run", "-o", os.path.join(d, "w.%r.%h"), "--", LEAKER, "2", "64"],
            env=dict(os.environ, SLURM_PROCID="4"))
    check(r.returncode == 0, f"memtrace run exited {r.returncode}: {r.stderr.decode()}")
    want = os.path.join(d, f"w.4.{HOST}")
    check(f"written to {want}\n" in r.stderr.decode(), f"memtrace run said {r.stderr.decode()!r}, not {want}")
    check(leaked(processes(want)[0]) == (64, 1), "the trace is not the leaker's")


if __name__ == "__main__":
    main({"rank_per_exec": test_rank_per_exec, "same_rank_joins": test_same_rank_joins,
          "pid_per_exec": test_pid_per_exec, "run_names_the_file": test_run_names_the_file})
