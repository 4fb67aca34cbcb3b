# SPDX-License-Identifier: MIT
"""A memory gate for a pytest run, like `memtrace check`:

    memtrace run -- pytest -p memtrace.pytest_plugin --memtrace-max-leaked 1M

The run marks the trace when the tests start (after collection) and when
they are all done (after the last teardown), each time after a full garbage
collection, and then runs `memtrace check --from-mark --to-mark` on the
trace of its own process: what each stack kept from the first mark to the
second, per memory kind, may not pass the limit. Over it, the stacks are
printed in the terminal summary and pytest exits 1; a check that cannot
judge (memtrace not found, an unreadable trace) exits 3. Without the preload
(a plain `pytest`) the plugin does nothing. docs/pytest.md.
"""
import gc
import os
import subprocess

import pytest

import memtrace

START = "pytest: tests start"
END = "pytest: tests end"


def pytest_addoption(parser):
    group = parser.getgroup("memtrace", "memory gate (under memtrace run or libmemtrace.so)")
    group.addoption("--memtrace-max-leaked", metavar="BYTES", default=None,
                    help="fail the run when the tests keep more than BYTES (K, M, G allowed) "
                         "of any memory kind from their start to their end")
    group.addoption("--memtrace-suppressions", metavar="FILE", default=None,
                    help="LeakSanitizer-style leak:PATTERN lines, for memtrace check")


class Gate:
    def __init__(self, config, trace, command):
        self.config = config
        self.trace = trace
        self.command = command
        self.marked = None  # whether both marks went into the trace; None: no run to gate
        self.output = None
        self.status = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session):
        gc.collect()
        started = memtrace.mark(START)
        outcome = yield
        if outcome.excinfo is None:
            gc.collect()
            self.marked = memtrace.mark(END) and started

    def check(self):
        argv = [self.command, "check", "--from-mark", START, "--to-mark", END,
                "--max-leaked", self.config.getoption("memtrace_max_leaked")]
        suppressions = self.config.getoption("memtrace_suppressions")
        if suppressions:
            argv += ["--suppressions", suppressions]
        argv.append(self.trace)
        # memtrace itself runs untraced: it reads the trace, it is not part of it
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MEMTRACE_TREE")}
        r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = r.stdout.decode(errors="replace")
        # its stderr says the trace is still being written, which is known; unless it failed
        if r.returncode not in (0, 1):
            out += r.stderr.decode(errors="replace")
        return r.returncode, out

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.marked is None:
            return  # interrupted: pytest's own status says so
        if self.marked:
            self.status, self.output = self.check()
        else:  # the gate must not pass on marks that are not there
            self.status, self.output = 2, "memtrace: the marks could not be written (tracing stopped)\n"
        if self.status == 1 and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif self.status not in (0, 1) and session.exitstatus in (pytest.ExitCode.OK,
                                                                  pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter):
        if self.output is None:
            return
        terminalreporter.section("memtrace")
        terminalreporter.write(self.output)


def pytest_configure(config):
    if config.getoption("memtrace_max_leaked") is None:
        return
    trace = memtrace.trace_path()
    if trace is None:
        return  # not traced: nothing to gate on, and nothing is done
    command = memtrace.command()
    if command is None:
        raise pytest.UsageError("memtrace: the memtrace command is neither beside "
                                "libmemtrace.so nor on PATH")
    config.pluginmanager.register(Gate(config, trace, command), "memtrace-gate")


def pytest_report_header(config):
    if config.getoption("memtrace_max_leaked") is not None and not memtrace.tracing():
        return "memtrace: not traced (no libmemtrace.so): --memtrace-max-leaked is not checked"
    return None
