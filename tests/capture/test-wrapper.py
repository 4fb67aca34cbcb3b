# SPDX-License-Identifier: MIT
"""memtrace run as a wrapper: a signal sent to it reaches the program (once:
a terminal's Ctrl-C, which the kernel sends to the whole foreground group,
is not sent again), it ends the way the program ended (killed by the same
signal), and its last line names the file the trace went to.

Every wait is bounded; a program a failing test leaves running is killed."""
import fcntl
import os
import pty
import resource
import select
import shutil
import signal
import subprocess
import termios
import time

from harness import BIN, check, main, program, workdir

TARGET = program("signal-target")
FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


def default_signals():
    """A Popen preexec_fn: the signals start at their default actions, in
    memtrace run and so in its program, whatever the test's runner ignored
    (a shell ignores SIGINT and SIGQUIT in a background job)."""
    for sig in FORWARDED:
        signal.signal(sig, signal.SIG_DFL)


class Wrapped:
    """memtrace run [OPTS] -- signal-target PIDFILE MODE, started; pid is the program's."""

    def __init__(self, mode, d, opts=(), **popen):
        self.trace = os.path.join(d, "t.bin")
        pidfile = os.path.join(d, "pid")
        popen.setdefault("preexec_fn", default_signals)
        self.p = subprocess.Popen([BIN, "run", "-o", self.trace, *opts, "--", TARGET, pidfile, mode],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)
        self.pid = None
        self.out = b""
        deadline = time.monotonic() + 20
        while not os.path.exists(pidfile):
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.p.kill()
                check(False, f"the program did not start: {self.p.communicate(timeout=10)}")
            time.sleep(0.01)
        with open(pidfile) as f:
            self.pid = int(f.read())

    def line(self, timeout=10):
        """The program's next line of output, without waiting longer than timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.out:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.p.stdout.fileno(), 4096)
            if not chunk:
                return None
            self.out += chunk
        line, self.out = self.out.split(b"\n", 1)
        return line.decode()

    def finish(self, timeout=20):
        """(returncode, the rest of stdout, stderr) once the wrapper has ended;
        left_running says whether the program outlived it (it is killed then)."""
        try:
            self.p.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(timeout=10)
            timed_out = True
        self.left_running = self.program_running()
        if self.left_running:
            os.kill(self.pid, signal.SIGKILL)
        out, err = self.p.communicate(timeout=10)
        check(not timed_out, f"memtrace run did not end within {timeout} s: {err!r}")
        return self.p.returncode, self.out + out, err.decode()

    def program_running(self):
        """Whether the program's pid is still a process that is not a zombie."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    def cleanup(self):
        if self.pid and self.program_running():
            os.kill(self.pid, signal.SIGKILL)
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate(timeout=10)


def wrapped_test(fn):
    """Runs fn(wrapped-starter, workdir); kills whatever it left running."""
    def test():
        d = workdir()
        started = []

        def start(mode, opts=(), **popen):
            started.append(Wrapped(mode, d, opts, **popen))
            return started[-1]

        try:
            fn(start, d)
        finally:
            for w in started:
                w.cleanup()
            shutil.rmtree(d)
    return test


# memtrace run --ring also runs the ring's consumer beside the program
RING = ("--ring", "16M")


def ends_program_and_wrapper(sig, opts=()):
    def test(start, d):
        w = start("die", opts)
        os.kill(w.p.pid, sig)
        code, _, err = w.finish()
        check(not w.left_running, f"the program (pid {w.pid}) still runs after {sig.name} to memtrace run")
        check(code == -sig, f"memtrace run ended with {code}, not killed by {sig.name} ({-sig}): {err!r}")
        want = f"memtrace: trace of {TARGET} written to {w.trace}\n"
        check(err.endswith(want), f"stderr {err!r} does not end with {want!r}")
    return wrapped_test(test)


test_sigterm = ends_program_and_wrapper(signal.SIGTERM)
test_sigint = ends_program_and_wrapper(signal.SIGINT)
test_sigterm_in_a_ring = ends_program_and_wrapper(signal.SIGTERM, RING)
test_sigint_in_a_ring = ends_program_and_wrapper(signal.SIGINT, RING)


@wrapped_test
def test_sigint_to_a_program_that_handles_it(start, d):
    w = start("catch")
    os.kill(w.p.pid, signal.SIGINT)
    code, _, err = w.finish()
    check(code == 3, f"memtrace run ended with {code}, not the program's exit status 3: {err!r}")


@wrapped_test
def test_hup_quit_usr1_usr2_forwarded(start, d):
    w = start("count")
    for sig in (signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
        os.kill(w.p.pid, sig)
        got, want = w.line(), f"{sig.name[3:]} pid {w.p.pid}"
        check(got == want, f"after {sig.name} to memtrace run the program said {got!r}, not {want!r}")
    os.kill(w.p.pid, signal.SIGUSR2)
    code, out, err = w.finish()
    check((code, out) == (0, b"end\n"), f"after SIGUSR2: status {code}, output {out!r}, {err!r}")


def on_terminal(slave):
    """A Popen preexec_fn: the new session's controlling terminal is slave
    (stdin), and the wrapper's process group is its foreground group."""
    def enter():
        default_signals()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    return dict(stdin=slave, start_new_session=True, preexec_fn=enter)


def ctrl_c_reaches_the_program_once(opts=()):
    """A second SIGINT from the wrapper would either come after the
    terminal's (a second line) or before it (the one delivered is the
    wrapper's, and the terminal's merges into it): 20 Ctrl-C give both
    orders their chance."""
    return wrapped_test(lambda start, d: ctrl_c_once(start, opts))


def ctrl_c_once(start, opts):
    master, slave = pty.openpty()
    try:
        w = start("count", opts, **on_terminal(slave))
        for key, name in [(b"\x03", "INT")] * 20 + [(b"\x1c", "QUIT")]:  # Ctrl-C, Ctrl-\
            os.write(master, key)  # the terminal signals its foreground group
            got = w.line()
            check(got == f"{name} terminal", f"after {key!r} on the terminal the program said {got!r}")
        # forwarded after any second SIGINT the wrapper would have sent
        os.kill(w.p.pid, signal.SIGUSR2)
        code, out, err = w.finish()
        check((code, out) == (0, b"end\n"),
              f"the program said {out!r} after the terminal's signals, not only end (status {code}): {err!r}")
    finally:
        os.close(master)
        os.close(slave)


test_ctrl_c_reaches_the_program_once = ctrl_c_reaches_the_program_once()
test_ctrl_c_in_a_ring_reaches_the_program_once = ctrl_c_reaches_the_program_once(RING)


@wrapped_test
def test_hangup_of_a_wrapper_that_leads_its_session(start, d):
    """ssh -t host memtrace run ...: at a hangup the kernel sends SIGHUP to
    the session leader alone, so the wrapper must pass it on."""
    master, slave = pty.openpty()
    w = start("count", **on_terminal(slave))
    os.close(slave)
    os.close(master)  # the terminal hangs up
    got, want = w.line(), f"HUP pid {w.p.pid}"
    check(got == want, f"after the terminal's hangup the program said {got!r}, not {want!r}")
    os.kill(w.p.pid, signal.SIGUSR2)
    code, out, err = w.finish()
    check((code, out) == (0, b"end\n"), f"after SIGUSR2: status {code}, output {out!r}, {err!r}")


def test_dies_by_the_programs_signal_without_a_core():
    """SIGKILL and SIGSEGV too; with the core pattern "core" a wrapper's core
    dump would replace the program's in its directory: the wrapper dumps none."""
    d = workdir()
    trace = os.path.join(d, "t.bin")
    for sig in (signal.SIGKILL, signal.SIGSEGV):
        p = subprocess.Popen([BIN, "run", "-o", trace, "--", "sh", "-c", f"kill -{sig.name[3:]} $$"],
                             cwd=d, stderr=subprocess.DEVNULL,
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (-1, -1)))
        try:
            _, status = os.waitpid(p.pid, 0)
        finally:
            p.returncode = 0
        check(os.WIFSIGNALED(status) and os.WTERMSIG(status) == sig,
              f"memtrace run's status {status:#x} for a program killed by {sig.name}")
        check(not os.WCOREDUMP(status), f"memtrace run dumped core after the program's {sig.name}")
    shutil.rmtree(d)


def test_cannot_start():
    d = workdir()
    trace = os.path.join(d, "t.bin")
    plain = os.path.join(d, "plain")
    open(plain, "w").close()
    for argv, want in (([os.path.join(d, "missing")], 127), ([plain], 126)):
        r = subprocess.run([BIN, "run", "-o", trace, "--"] + argv, stderr=subprocess.PIPE, timeout=20)
        check(r.returncode == want, f"memtrace run returned {r.returncode} for {argv}, not {want}")
        check(r.stderr.decode().startswith(f"memtrace: cannot run {argv[0]}: "), f"stderr {r.stderr!r}")
    shutil.rmtree(d)


def said(d, files):
    """memtrace run's stderr for fake-trace writing the given headers (name: whose)."""
    trace = os.path.join(d, "t.bin")
    argv = [BIN, "run", "-o", trace, "--", program("fake-trace")]
    for name, whose in files:
        argv += [os.path.join(d, name), whose]
    r = subprocess.run(argv, stderr=subprocess.PIPE, timeout=20)
    check(r.returncode == 0, f"fake-trace failed: {r.stderr!r}")
    return r.stderr.decode()


def test_names_the_file_the_trace_went_to():
    """The first of NAME, NAME.1 .. NAME.99 whose header has the program's pid
    as root_pid (the preload writes NAME.1 when NAME is another live run's)."""
    d = workdir()
    fake = program("fake-trace")
    t = os.path.join(d, "t.bin")
    cases = [
        ([("t.bin", "old"), ("t.bin.1", "old"), ("t.bin.2", "self")], f"memtrace: trace of {fake} written to {t}.2\n"),
        # the last name the preload takes, the ones below it moved aside since
        ([("t.bin", "old"), ("t.bin.99", "self")], f"memtrace: trace of {fake} written to {t}.99\n"),
        ([("t.bin", "old")], f"memtrace: {fake} wrote no trace to {t} (a static or setuid program cannot be traced)\n"),
        ([], f"memtrace: {fake} wrote no trace to {t} (a static or setuid program cannot be traced)\n"),
        # a traced child of an untraced program: a trace made during the run
        ([("t.bin", "old"), ("t.bin.1", "new")], f"memtrace: trace of {fake} written to {t}.1\n"),
    ]
    for files, want in cases:
        for name in os.listdir(d):
            os.unlink(os.path.join(d, name))
        got = said(d, files)
        check(got == want, f"with {files}: memtrace run said {got!r}, not {want!r}")
    shutil.rmtree(d)


@wrapped_test
def test_second_run_with_one_name(start, d):
    """The preload: run B writes NAME.1 while run A's program writes NAME."""
    a = start("die")
    r = subprocess.run([BIN, "run", "-o", a.trace, "--", "/bin/true"], stderr=subprocess.PIPE, timeout=20)
    want = (f"memtrace: {a.trace} is being written by another run; this run writes {a.trace}.1\n"
            f"memtrace: trace of /bin/true written to {a.trace}.1\n")
    check((r.returncode, r.stderr.decode()) == (0, want), f"run B: {r.returncode} {r.stderr!r}, not {want!r}")
    os.kill(a.p.pid, signal.SIGTERM)
    code, _, err = a.finish()
    want = f"memtrace: trace of {TARGET} written to {a.trace}\n"
    check((code, err) == (-signal.SIGTERM, want), f"run A: {code} {err!r}, not {want!r}")


def test_earlier_trace_moved_aside():
    d = workdir()
    t = os.path.join(d, "t.bin")
    for want in (f"memtrace: trace of /bin/true written to {t}\n",
                 f"memtrace: trace of /bin/true written to {t} (the earlier trace is now {t}.old)\n"):
        r = subprocess.run([BIN, "run", "-o", t, "--", "/bin/true"], stderr=subprocess.PIPE, timeout=20)
        check((r.returncode, r.stderr.decode()) == (0, want), f"memtrace run: {r.returncode} {r.stderr!r}, not {want!r}")
    shutil.rmtree(d)


if __name__ == "__main__":
    main({k: v for k, v in globals().items() if k.startswith("test_")})
