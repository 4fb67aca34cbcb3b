# SPDX-License-Identifier: MIT
"""memtrace's helper for Python programs: marks in the trace, steps, and
where the trace and the memtrace command are.

    import memtrace
    memtrace.mark("epoch 3")          # a mark named "epoch 3", now
    with memtrace.step("epoch"):      # marks "epoch 1", then "epoch 2", ...
        train_one_epoch()

Pure Python with ctypes: the functions call libmemtrace.so's memtrace_mark()
(include/memtrace/memtrace.h) when the preload is in the process, and do
nothing at all when it is not, so a program keeps its marks in production.
docs/python-helper.md says more; the pytest plugin is memtrace.pytest_plugin.
"""
import ctypes
import functools
import itertools
import os
import shutil

__all__ = ["mark", "step", "tracing", "trace_path", "command"]


def _lookup():
    # The process's global scope (dlopen(NULL)) holds LD_PRELOAD's libraries:
    # memtrace_mark is there exactly when libmemtrace.so was preloaded.
    try:
        fn = ctypes.CDLL(None).memtrace_mark
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_char_p]
    fn.restype = ctypes.c_int
    return fn


_memtrace_mark = _lookup()
_counters = {}


def mark(label):
    """Records a mark named label (str or bytes; 256 bytes are kept) at this
    moment. True when it went into a trace; False, and nothing done, when
    the process is not traced."""
    if _memtrace_mark is None:
        return False
    if isinstance(label, str):
        label = label.encode("utf-8", "surrogateescape")
    return _memtrace_mark(bytes(label)) == 0


class step:
    """A step of the program: entering it marks "NAME N", N counting the
    steps of that name from 1 (or index, when given). Each mark starts a
    step, so `memtrace report` gives growth per step ("grows by 12.0 MiB
    per mark"); the step ends where the next one begins, and nothing is
    marked on the way out. Also a decorator: each call is a step.

        with memtrace.step("epoch"):
            ...
        @memtrace.step("batch")
        def train_batch(x): ...
    """

    def __init__(self, name, index=None):
        self.name = name
        self.index = index

    def __enter__(self):
        index = self.index
        if index is None:
            index = next(_counters.setdefault(self.name, itertools.count(1)))
        mark(f"{self.name} {index}")
        return index

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def stepped(*args, **kwargs):
            with step(self.name):
                return fn(*args, **kwargs)
        return stepped


def trace_path():
    """The trace this process writes, or None when it is not traced. The
    preload names it in MEMTRACE_TREE (device:inode:path) for the programs
    the process execs; the path counts only while it is still that file."""
    if _memtrace_mark is None:
        return None
    token = os.environ.get("MEMTRACE_TREE", "")
    parts = token.split(":", 2)
    if len(parts) != 3:
        return None
    try:
        st = os.stat(parts[2])
        if (st.st_dev, st.st_ino) != (int(parts[0]), int(parts[1])):
            return None
    except (OSError, ValueError):
        return None
    return parts[2]


def tracing():
    """True when libmemtrace.so is in this process and writing a trace."""
    return trace_path() is not None


def _preload_dir():
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(None, 5)[-1].strip()
            if path.endswith("/libmemtrace.so"):
                return os.path.dirname(path)
    return None


def command():
    """The memtrace command that goes with the preload in this process: the
    build tree's (preload/ beside analyzer/), the installed one (LIBDIR/memtrace
    below PREFIX/bin), else the first on PATH. None when none is found."""
    here = _preload_dir() if _memtrace_mark is not None else None
    candidates = []
    if here:
        candidates.append(os.path.join(here, "..", "analyzer", "memtrace"))
        up = here
        for _ in range(3):
            up = os.path.dirname(up)
            candidates.append(os.path.join(up, "bin", "memtrace"))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.normpath(c)
    return shutil.which("memtrace")
