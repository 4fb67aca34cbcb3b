# SPDX-License-Identifier: MIT
"""One program run under valgrind's memcheck and under memtrace, each run's
leak classes read back in one shape: a dict class -> (bytes, blocks) with
memtrace's class names, and the loss records (valgrind) or leak stacks
(memtrace) as (class, bytes, blocks, function names), so that a test can set
apart the blocks libc allocates for itself by the function that did.

meson passes MEMTRACE_BIN, MEMTRACE_LIB and MEMTRACE_PROGRAMS as for the
capture tests, and VALGRIND, empty where valgrind is not installed: then the
tests are skipped (exit 77, meson's skip)."""
import json
import os
import re
import shutil
import sys

from harness import BIN, check, run, workdir

if not os.environ.get("VALGRIND"):
    print("valgrind is not installed: nothing to compare with")
    sys.exit(77)
CLASSES = ("definite", "indirect", "possible", "reachable")

VALGRIND = [os.environ["VALGRIND"], "--leak-check=full", "--show-leak-kinds=all",
            # libc's own buffers stay as the program left them at exit, as under
            # memtrace, which changes nothing in how a program ends
            "--run-libc-freeres=no",
            # nothing hidden: memtrace has no suppressions of its own
            "--default-suppressions=no",
            # deep enough to name the libc function under any allocation
            "--num-callers=40"]

VALGRIND_CLASS = {"definitely lost": "definite", "indirectly lost": "indirect",
                  "possibly lost": "possible", "still reachable": "reachable"}
NUMBER = r"([\d,]+)"
KIND = r"(definitely lost|indirectly lost|possibly lost|still reachable)"
SUMMARY_LINE = re.compile(r"==\d+==\s+" + KIND + ": " + NUMBER + " bytes in " + NUMBER + " blocks")
# "952 (24 direct, 928 indirect) bytes in 1 blocks are definitely lost in loss record 3 of 4":
# the block's own bytes are the direct ones
RECORD_LINE = re.compile(r"==\d+== " + NUMBER + r"(?: \(" + NUMBER + r" direct, [\d,]+ indirect\))?"
                         r" bytes in " + NUMBER + r" blocks are " + KIND + " in loss record")
FRAME_LINE = re.compile(r"==\d+==\s+(?:at|by) 0x[0-9A-Fa-f]+: (\S+)")


class Run:
    def __init__(self, classes, records, out, trace=None):
        self.classes = classes
        self.records = records
        self.stdout = out.stdout
        self.returncode = out.returncode
        self.trace = trace

    def by_function(self, function):
        """The classes of the blocks whose allocation stack names FUNCTION."""
        out = {}
        for cls, nbytes, blocks, functions in self.records:
            if function in functions:
                out = add(out, {cls: (nbytes, blocks)})
        return out


def number(s):
    return int(s.replace(",", ""))


def add(a, b):
    """Class figures added, class by class."""
    out = dict(a)
    for cls, (nbytes, blocks) in b.items():
        was = out.get(cls, (0, 0))
        out[cls] = (was[0] + nbytes, was[1] + blocks)
    return {cls: v for cls, v in out.items() if v != (0, 0)}


def nonzero(classes):
    return {cls: tuple(v) for cls, v in classes.items() if tuple(v) != (0, 0)}


def tool_env(extra, own):
    """The environment of a run: the test's, without MALLOC_PERTURB_ (meson sets it:
    glibc's free would then overwrite a freed block, and with it the stale pointers a
    scan must not take for roots; valgrind's malloc ignores it), with every variable
    either tool adds, so that the program sees as many under both. Programs copy their
    environment (git's setenv reallocs glibc's array of its pointers: 8 bytes a
    variable). Debian's valgrind is a shell script that sets LD_LIBRARY_PATH,
    GLIBCPP_FORCE_NEW and GLIBCXX_FORCE_NEW (its shell exports PWD), then valgrind
    LD_PRELOAD; `memtrace run` sets LD_PRELOAD, MEMTRACE_OUTPUT and CUDA_INJECTION64_PATH
    (an existing one kept: an empty one loads nothing here), its preload
    MEMTRACE_TREE. OWN: what the tool itself does not set."""
    env = dict(os.environ)
    for name in ("MALLOC_PERTURB_", "LD_PRELOAD", "MEMTRACE_TREE"):
        env.pop(name, None)
    env.setdefault("PWD", os.getcwd())
    env.setdefault("LD_LIBRARY_PATH", "/nonexistent")
    env.update({"GLIBCPP_FORCE_NEW": "1", "GLIBCXX_FORCE_NEW": "1", "CUDA_INJECTION64_PATH": "",
                "MEMTRACE_OUTPUT": "/nonexistent/trace.bin"})
    env.update(own)
    env.update(extra or {})
    return env


def valgrind(argv, env=None, cwd=None, stdin=None, timeout=120):
    d = workdir()
    log = os.path.join(d, "valgrind.log")
    own = {"MEMTRACE_TREE": "0:0:/nonexistent/trace.bin"}
    out = run(VALGRIND + ["--log-file=" + log, "--"] + argv, env=tool_env(env, own), cwd=cwd,
              stdin=stdin, timeout=timeout)
    with open(log) as f:
        text = f.read()
    shutil.rmtree(d)
    classes, records, current = {}, [], None
    for line in text.splitlines():
        m = SUMMARY_LINE.match(line)
        if m:
            classes[VALGRIND_CLASS[m.group(1)]] = (number(m.group(2)), number(m.group(3)))
            continue
        m = RECORD_LINE.match(line)
        if m:
            direct = m.group(2) or m.group(1)
            current = (VALGRIND_CLASS[m.group(4)], number(direct), number(m.group(3)), set())
            records.append(current)
            continue
        m = FRAME_LINE.match(line)
        if m and current:
            current[3].add(m.group(1))
        elif re.fullmatch(r"==\d+==\s*", line):
            current = None
    # with no block live at exit valgrind prints no summary
    check(classes or "All heap blocks were freed" in text,
          f"no LEAK SUMMARY from valgrind on {argv}:\n{text[-3000:]}")
    return Run(nonzero(classes), records, out)


def memtrace_classes(trace):
    rep = run([BIN, "report", "--json", "--top", "100000", trace])
    check(rep.returncode == 0, f"memtrace report failed: {rep.stderr.decode()[-2000:]}")
    processes = json.loads(rep.stdout)["processes"]
    check(len(processes) == 1, f"{len(processes)} processes in the trace, one expected")
    host = processes[0]["memories"]["host"]
    check(host.get("leak_kinds") is not None,
          f"no leak_kinds in the report: {host.get('leak_kinds_missing')!r}")
    classes = {cls: (v["bytes"], v["blocks"]) for cls, v in host["leak_kinds"].items()}
    records = []
    for s in host["leak_stacks"]:
        functions = {f["function"] for f in s["frames"] if f["function"]}
        for cls, v in s["reachability"].items():
            if v["blocks"]:
                records.append((cls, v["bytes"], v["blocks"], functions))
    return nonzero(classes), records


def memtrace(argv, env=None, cwd=None, stdin=None, timeout=120):
    """The run's classes; its trace is left in a folder of its own for `memtrace check`."""
    trace = os.path.join(workdir(), "trace.bin")
    out = run([BIN, "run", "-o", trace, "--"] + argv, env=tool_env(env, {}), cwd=cwd,
              stdin=stdin, timeout=timeout)
    check(os.path.exists(trace), f"memtrace run left no trace: {out.stderr.decode()[-2000:]}")
    classes, records = memtrace_classes(trace)
    return Run(classes, records, out, trace)


def check_exit(trace, args):
    """`memtrace check` ARGS on TRACE: its exit status."""
    return run([BIN, "check"] + args + [trace]).returncode


def tls_objects(path):
    """The objects with thread-local storage among PATH and what it loads."""
    out = run(["ldd", path])
    check(out.returncode == 0, f"ldd {path} failed: {out.stderr.decode()}")
    paths = {os.path.realpath(path)}
    for line in out.stdout.decode().splitlines():
        m = re.match(r"\s*(?:\S+ => )?(/\S+) \(0x", line)
        if m:
            paths.add(os.path.realpath(m.group(1)))
    return {p for p in paths if has_tls(p)}


def has_tls(path):
    """Whether the ELF64 little-endian object at PATH has a PT_TLS segment."""
    with open(path, "rb") as f:
        header = f.read(64)
        phoff = int.from_bytes(header[32:40], "little")
        phentsize = int.from_bytes(header[54:56], "little")
        phnum = int.from_bytes(header[56:58], "little")
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return any(int.from_bytes(table[i * phentsize:i * phentsize + 4], "little") == 7
               for i in range(phnum))


def dtv_bytes(path, preload=None):
    """The size of the dtv (a thread's vector of TLS blocks) glibc's pthread_create
    calloc's for a thread of PATH: one 16-byte slot per object with TLS
    (dl_tls_max_dtv_idx), 14 spare (DTV_SURPLUS) and 2 of its own (elf/dl-tls.c,
    allocate_dtv). A preload's objects with TLS count too."""
    objects = tls_objects(path) | (tls_objects(preload) if preload else set())
    return (len(objects) + 16) * 16
