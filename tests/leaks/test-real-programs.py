# SPDX-License-Identifier: MIT
"""Programs nobody here wrote, under memtrace and under valgrind's memcheck:
sqlite3 running a script, git log on a small repository, python3 running a
small script (with its own allocator and with PYTHONMALLOC=malloc). memtrace's
definitely lost figure equals valgrind's to the byte and block, and `memtrace
check --max-leaked 0` passes on sqlite3 and git, which valgrind finds leak
nothing, while counting their reachable blocks too fails it. Every class of
both tools is printed (docs/reachability.md records them)."""
import os
import shutil

from harness import check, main, run, workdir
from versus import CLASSES, check_exit, memtrace, valgrind

PYTHON = "/usr/bin/python3"

SQL = b"""
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, name TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
INSERT INTO t SELECT i, i % 97, printf('row-%05d', i) FROM n;
CREATE INDEX t_k ON t(k);
SELECT k, count(*), sum(id) FROM t WHERE k < 5 GROUP BY k ORDER BY k;
SELECT length(group_concat(name, ',')) FROM t WHERE k = 42;
DELETE FROM t WHERE k > 90;
SELECT count(*), min(name), max(name) FROM t;
"""

SCRIPT = """
import json
d = {str(i): [i] * 3 for i in range(2000)}
s = json.dumps(d)
print(len(s), len(json.loads(s)))
"""

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
           "GIT_CONFIG_NOSYSTEM": "1"}


def figures(classes):
    return ", ".join("%s %d bytes in %d blocks" % ((cls,) + classes.get(cls, (0, 0)))
                     for cls in CLASSES)


def compare(name, argv, env=None, stdin=None):
    vg = valgrind(argv, env=env, stdin=stdin)
    mt = memtrace(argv, env=env, stdin=stdin)
    print(f"# {name}")
    print(f"#   valgrind: {figures(vg.classes)}")
    print(f"#   memtrace: {figures(mt.classes)}")
    check(mt.returncode == vg.returncode == 0,
          f"exit status {mt.returncode} under memtrace, {vg.returncode} under valgrind")
    check(mt.stdout == vg.stdout, f"output differs: {mt.stdout[-500:]!r} vs {vg.stdout[-500:]!r}")
    definite = (mt.classes.get("definite", (0, 0)), vg.classes.get("definite", (0, 0)))
    check(definite[0] == definite[1],
          f"definitely lost {definite[0]} under memtrace, {definite[1]} under valgrind")
    return mt, vg


def gate_passes(mt):
    """check --max-leaked 0 passes; counting every live block, as before, fails."""
    status = check_exit(mt.trace, ["--max-leaked", "0"])
    check(status == 0, f"check --max-leaked 0: exit {status}, 0 expected")
    check(mt.classes.get("reachable", (0, 0))[0] > 0, "nothing reachable: the gate proves nothing")
    status = check_exit(mt.trace, ["--max-leaked", "0", "--count-possible", "--count-reachable"])
    check(status == 1, f"check --max-leaked 0 counting every class: exit {status}, 1 expected")


def test_sqlite3():
    mt, vg = compare("sqlite3", ["sqlite3", ":memory:"], stdin=SQL)
    check(vg.classes.get("definite") is None, f"valgrind finds sqlite3 leaks: {vg.classes}")
    gate_passes(mt)
    shutil.rmtree(os.path.dirname(mt.trace))


def test_git_log():
    repo = workdir()
    env = dict(GIT_ENV, HOME=repo)
    full = dict(os.environ, **env)
    git = ["git", "-C", repo]
    check(run(git + ["init", "-q", "-b", "main"], env=full).returncode == 0, "git init failed")
    for i in range(10):
        with open(os.path.join(repo, f"f{i}.txt"), "w") as f:
            f.write("line\n" * (i + 1))
        run(git + ["add", "."], env=full)
        out = run(git + ["commit", "-q", "-m", f"commit {i}"], env=full)
        check(out.returncode == 0, f"git commit failed: {out.stderr.decode()}")
    mt, vg = compare("git log", git + ["log", "--stat"], env=env)
    check(vg.classes.get("definite") is None, f"valgrind finds git leaks: {vg.classes}")
    gate_passes(mt)
    shutil.rmtree(os.path.dirname(mt.trace))
    shutil.rmtree(repo)


def test_python3():
    mt, _ = compare("python3", [PYTHON, "-c", SCRIPT])
    shutil.rmtree(os.path.dirname(mt.trace))


def test_python3_malloc():
    """Every object a malloc block (no pymalloc arenas): hundreds of blocks to classify."""
    mt, _ = compare("python3, PYTHONMALLOC=malloc", [PYTHON, "-c", SCRIPT],
                    env={"PYTHONMALLOC": "malloc"})
    shutil.rmtree(os.path.dirname(mt.trace))


main({
    "sqlite3": test_sqlite3,
    "git_log": test_git_log,
    "python3": test_python3,
    "python3_malloc": test_python3_malloc,
})
