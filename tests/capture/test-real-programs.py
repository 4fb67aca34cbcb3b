# SPDX-License-Identifier: MIT
"""Programs nobody here wrote give the same output and exit status under
the preload as without it, and leave a readable trace: python3 training a
small torch model, sqlite3 running a script, git working on a repository."""
import os
import shutil

from harness import BIN, check, main, program, run, run_traced, workdir

TORCH_PYTHON = "/usr/bin/python3"


def same_with_and_without(argv, cwd=None, env_extra=None, stdin=None):
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    env = dict(os.environ)
    env.update(env_extra or {})
    plain = run(argv, env=env, cwd=cwd, stdin=stdin)
    traced_env = dict(env)
    traced = run_traced(argv, trace, extra=env_extra, cwd=cwd, stdin=stdin)
    check(plain.returncode == traced.returncode,
          f"exit status {plain.returncode} plain, {traced.returncode} traced")
    check(plain.stdout == traced.stdout,
          f"stdout differs:\n--- plain\n{plain.stdout[-2000:]!r}\n--- traced\n{traced.stdout[-2000:]!r}")
    check(plain.stderr == traced.stderr,
          f"stderr differs:\n--- plain\n{plain.stderr[-2000:]!r}\n--- traced\n{traced.stderr[-2000:]!r}")
    dump = run([BIN, "dump", "--summary", trace])
    check(dump.returncode == 0, f"memtrace dump cannot read the trace: {dump.stderr.decode()}")
    shutil.rmtree(d)
    return plain


def test_python_torch_training():
    out = same_with_and_without([TORCH_PYTHON, program("torch-train.py")])
    check(b"step 99 loss" in out.stdout, f"the training did not finish: {out.stdout!r}")


def test_sqlite3_script():
    with open(program("sqlite-script.sql"), "rb") as f:
        script = f.read()
    out = same_with_and_without(["sqlite3", ":memory:"], stdin=script)
    check(out.stdout.count(b"\n") >= 7, f"sqlite3 printed too little: {out.stdout!r}")


def test_git_on_a_repository():
    repo = workdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
           "HOME": repo, "GIT_CONFIG_NOSYSTEM": "1"}
    full = dict(os.environ, **env)
    check(run(["git", "init", "-q", "-b", "main", repo], env=full).returncode == 0, "git init failed")
    for i in range(30):
        with open(os.path.join(repo, f"f{i}.txt"), "w") as f:
            f.write("line\n" * (i + 1))
        run(["git", "-C", repo, "add", "."], env=full)
        run(["git", "-C", repo, "commit", "-q", "-m", f"commit {i}"], env=full)
    # the traced commands, each compared with its plain run
    same_with_and_without(["git", "-C", repo, "log", "--stat", "--format=%H %s"], env_extra=env)
    same_with_and_without(["git", "-C", repo, "gc", "-q"], env_extra=env)
    same_with_and_without(["git", "-C", repo, "log", "-p", "-5"], env_extra=env)
    out = same_with_and_without(["git", "-C", repo, "fsck", "--full"], env_extra=env)
    shutil.rmtree(repo)


main({
    "python_torch_training": test_python_torch_training,
    "sqlite3_script": test_sqlite3_script,
    "git_on_a_repository": test_git_on_a_repository,
})
