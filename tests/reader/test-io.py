# SPDX-License-Identifier: MIT
"""The files the commands open and write: a trace whose module path is a
FIFO (report must not block in open), an output name that is a planted
symlink (the victim stays untouched), an output name that is a device, a
FIFO or standard output's file (written in place, never replaced), a trace truncated while it is read
(one line and exit 2, never SIGBUS).
Usage: test-io.py MEMTRACE MAKE-IO-TRACE TRUNCATE-SHIM"""
import os
import stat
import subprocess
import sys
import tempfile

MEMTRACE, MAKE, SHIM = sys.argv[1], sys.argv[2], sys.argv[3]
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print(f"FAIL {what}")


def memtrace(*args, timeout=20, env=None):
    try:
        return subprocess.run([MEMTRACE, *args], capture_output=True, text=True, timeout=timeout,
                              env=env)
    except subprocess.TimeoutExpired:
        return None


def fifo_module(d):
    """A module path that names a FIFO nobody writes: open() would wait for a writer forever."""
    fifo = os.path.join(d, "libfifo.so")
    os.mkfifo(fifo)
    trace = os.path.join(d, "fifo.bin")
    subprocess.run([MAKE, "module", fifo, trace], check=True)
    r = memtrace("report", trace, timeout=10)
    check(r is not None, "report on a trace naming a FIFO did not finish in 10 s")
    if r is not None:
        check(r.returncode == 0, f"report exits {r.returncode}: {r.stderr!r}")
        check("libfifo.so+0x100" in r.stdout, f"the frame is not module+offset: {r.stdout!r}")


def planted_symlink(d):
    """view -o NAME and view's default NAME, each a symlink to a victim: the
    link is replaced by a regular file holding the page, the victim is
    untouched; a name view cannot replace leaves no temporary behind."""
    trace = os.path.join(d, "view.bin")
    subprocess.run([MAKE, "module", "/nonexistent/lib.so", trace], check=True)
    if "built without the viewer" in memtrace("view", "-o", "-", trace).stderr:
        print("skip planted_symlink: memtrace view is not built")
        return
    for out, args in [(os.path.join(d, "out.html"), ["-o", os.path.join(d, "out.html")]),
                      (os.path.join(d, "view.html"), [])]:
        victim = out + ".victim"
        with open(victim, "w") as f:
            f.write("victim\n")
        os.symlink(victim, out)
        r = memtrace("view", *args, trace)
        check(r is not None and r.returncode == 0, f"view {args}: {r and r.returncode} {r and r.stderr!r}")
        with open(victim) as f:
            check(f.read() == "victim\n", f"view {args} wrote through the symlink into the victim")
        check(not os.path.islink(out), f"view {args}: {out} is still a symlink")
        check(os.path.isfile(out) and os.stat(out).st_mode & 0o777 == 0o644,
              f"view {args}: {out} is not a regular file of mode 0644")
        with open(out) as f:
            page = f.read()
        check(page.startswith("<!doctype html>") and "lib.so+0x100" in page, f"view {args}: not the page")
    # a directory at the name: rename fails, and the temporary is gone
    os.mkdir(os.path.join(d, "dir.html"))
    before = sorted(os.listdir(d))
    r = memtrace("view", "-o", os.path.join(d, "dir.html"), trace)
    check(r is not None and r.returncode == 2 and r.stderr.count("\n") == 1
          and r.stderr.startswith(f"memtrace view: {d}/dir.html: "), f"view -o DIR: {r and r.returncode} {r and r.stderr!r}")
    check(sorted(os.listdir(d)) == before, f"view -o DIR left {set(os.listdir(d)) - set(before)}")
    check(os.listdir(os.path.join(d, "dir.html")) == [], "view -o DIR wrote into the directory")


def place_id(path):
    st = os.lstat(path)
    return (st.st_mode, st.st_ino, st.st_rdev)


def names_not_files(d):
    """-o naming a device, a FIFO or the file standard output writes: each is
    written in place, never replaced (view -o /dev/null replaced the system's
    /dev/null with a regular file; every later `>/dev/null` wrote into it)."""
    trace = os.path.join(d, "names.bin")
    subprocess.run([MAKE, "module", "/nonexistent/lib.so", trace], check=True)
    null = os.path.join(d, "null")
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    link = os.path.join(d, "null-link")
    os.symlink(null, link)
    for cmd in (["view"], ["export", "--format", "pprof", "--at", "peak"],
                ["export", "--format", "chrome-trace"], ["export", "--format", "pprof"]):
        for name in (null, link):
            before, listing = (place_id(null), place_id(link)), sorted(os.listdir(d))
            r = memtrace(*cmd, "-o", name, trace)
            if cmd[-1] == "pprof":  # two profiles, and no name for the second beside a device
                check(r is not None and r.returncode == 1 and r.stderr == f"memtrace export: two "
                      f"profiles cannot both go to {name}: add --at peak or --at end\n",
                      f"{cmd} -o {name}: {r and r.returncode} {r and r.stderr!r}")
            else:
                check(r is not None and r.returncode == 0 and r.stderr.startswith(f"memtrace {cmd[0]}: wrote {name}"),
                      f"{cmd} -o {name}: {r and r.returncode} {r and r.stderr!r}")
            check((place_id(null), place_id(link)) == before, f"{cmd} -o {name} replaced it: "
                  f"{before} -> {(place_id(null), place_id(link))}")
            check(sorted(os.listdir(d)) == listing, f"{cmd} -o {name} left {set(os.listdir(d)) - set(listing)}")

    fifo = os.path.join(d, "page.fifo")
    os.mkfifo(fifo)
    got = os.path.join(d, "from-fifo.html")
    with open(got, "wb") as f:
        reader = subprocess.Popen(["cat", fifo], stdout=f)
    r = memtrace("view", "-o", fifo, trace)
    try:  # a view that never opened the FIFO (it failed, or waits for ever) leaves cat waiting
        reader.wait(timeout=10)
    except subprocess.TimeoutExpired:
        reader.kill()
        reader.wait()
    with open(got, "rb") as f:
        page = f.read()
    check(r is not None and r.returncode == 0, f"view -o FIFO: {r and r.returncode} {r and r.stderr!r}")
    check(page.startswith(b"<!doctype html>") and b"lib.so+0x100" in page, f"view -o FIFO: the reader got {page[:60]!r}")
    check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "view -o FIFO replaced the FIFO")

    # /dev/stdout while standard output is redirected to a file: the page goes
    # there through the descriptor, and the link stays (a rename put a regular
    # file in /dev's place of /dev/stdout)
    out = os.path.join(d, "shell-redirect.html")
    stdout_link = os.path.join(d, "stdout")
    os.symlink("/proc/self/fd/1", stdout_link)
    with open(out, "w") as f:
        f.write("old\n")
    with open(out, "a") as f:
        r = subprocess.run([MEMTRACE, "view", "-o", stdout_link, trace], stdout=f,
                           stderr=subprocess.PIPE, text=True, timeout=20)
    with open(out) as f:
        page = f.read()
    check(r.returncode == 0 and r.stderr.startswith("memtrace view: wrote"),
          f"view -o /dev/stdout: {r.returncode} {r.stderr!r}")
    check(page.startswith("old\n<!doctype html>") and "lib.so+0x100" in page,
          f"view -o /dev/stdout, >>FILE: FILE holds {page[:60]!r}")
    check(os.path.islink(stdout_link), "view -o /dev/stdout replaced the link")


def shrinks_while_read(d):
    """The shim cuts the trace to its first 4 KiB right after the reader maps
    it (deterministic: no race with a truncating process): every command that
    reads it says so in one line and exits 2, where SIGBUS killed it (135)."""
    trace = os.path.join(d, "big.bin")
    subprocess.run([MAKE, "big", "200000", trace], check=True)
    check(os.path.getsize(trace) > 1 << 20, f"the big trace has {os.path.getsize(trace)} bytes")
    r = memtrace("report", trace)
    check(r is not None and r.returncode == 0 and "200000" in r.stdout.replace(",", ""),
          f"report on the whole big trace: {r and r.returncode} {r and r.stdout!r}")
    env = dict(os.environ, LD_PRELOAD=SHIM, MEMTRACE_TEST_TRUNCATE="4096")
    for args in [["report"], ["report", "--json"], ["flamegraph"], ["check"], ["dump", "--summary"],
                 ["dump"], ["view", "-o", os.path.join(d, "big.html")]]:
        subprocess.run([MAKE, "big", "200000", trace], check=True)
        r = memtrace(*args, trace, env=env)
        check(os.path.getsize(trace) == 4096, f"{args}: the shim did not cut the trace")
        check(r is not None and r.returncode == 2, f"{args} exits {r and r.returncode}")
        check(r is not None and r.stderr == f"memtrace: {trace}: the file shrank while it was read "
              "(another program truncated it)\n", f"{args} says {r and r.stderr!r}")
    check(not os.path.exists(os.path.join(d, "big.html")), "view wrote a page of a cut read")


os.umask(0o022)
with tempfile.TemporaryDirectory() as d:
    fifo_module(d)
with tempfile.TemporaryDirectory() as d:
    planted_symlink(d)
with tempfile.TemporaryDirectory() as d:
    names_not_files(d)
with tempfile.TemporaryDirectory() as d:
    shrinks_while_read(d)

print("ok" if not failed else f"{failed} failed")
sys.exit(1 if failed else 0)
