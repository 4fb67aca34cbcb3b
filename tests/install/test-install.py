# SPDX-License-Identifier: MIT
"""`meson install` into a DESTDIR puts every piece where a Debian system
expects it, and the installed memtrace runs a traced program from there:
`memtrace run` finds the installed libmemtrace.so relative to itself (the
DESTDIR is not the prefix it was configured for), the trace's figures are
exact, the installed Python helper marks that trace and finds that
memtrace, the headers compile alone, pkg-config names the preload, the man
pages format without a warning and bash completes the commands.
meson passes its own command in MEMTRACE_MESON and the build directory in
MEMTRACE_BUILD; the traced program is the capture tests' leaker."""
import glob
import json
import os
import re
import shutil

from harness import check, main, program, run, untraced_env, workdir

MESON, BUILD = os.environ["MEMTRACE_MESON"], os.environ["MEMTRACE_BUILD"]
SOURCE_HEADERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../include/memtrace")


def introspect(what):
    r = run([MESON, "introspect", what, BUILD])
    check(r.returncode == 0, f"meson introspect {what} failed: {r.stderr.decode()}")
    return json.loads(r.stdout)


OPTIONS = {o["name"]: o["value"] for o in introspect("--buildoptions")}
PREFIX, LIBDIR = OPTIONS["prefix"], OPTIONS["libdir"]
VERSION = introspect("--projectinfo")["version"]
DEST = workdir()
ROOT = DEST + PREFIX


def installed(rel):
    path = os.path.join(ROOT, rel)
    check(os.path.isfile(path), f"{rel} is not installed under {PREFIX}")
    return path


def helper_dir():
    found = glob.glob(os.path.join(ROOT, "lib/python3.*/*-packages/memtrace/pytest_plugin.py"))
    check(len(found) == 1, "the Python helper is not installed under lib/python3.X/dist-packages")
    return os.path.dirname(os.path.dirname(found[0]))


def test_installed_where_expected():
    multiarch = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.decode().strip()
    check(LIBDIR == f"lib/{multiarch}", f"libdir {LIBDIR}, not Debian's lib/{multiarch}")
    for rel in ("bin/memtrace", f"{LIBDIR}/memtrace/libmemtrace.so", f"{LIBDIR}/pkgconfig/memtrace.pc",
                "share/man/man1/memtrace.1", "share/man/man7/memtrace-env.7",
                "share/bash-completion/completions/memtrace"):
        installed(rel)
    if os.path.exists(os.path.join(BUILD, "cupti", "libmemtrace-cupti.so")):
        installed(f"{LIBDIR}/memtrace/libmemtrace-cupti.so")
    headers = sorted(os.path.basename(h) for h in glob.glob(os.path.join(ROOT, "include/memtrace/*.h")))
    check(headers == sorted(os.listdir(SOURCE_HEADERS)), f"headers {headers}")
    where = helper_dir()[len(DEST):]
    path = run(["/usr/bin/python3", "-c", "import sys; print(*sys.path, sep='\\n')"]).stdout.decode().split("\n")
    check(where in path, f"the helper is in {where}, not on Debian's python3's path {path}")


def test_traced_program():
    memtrace = installed("bin/memtrace")
    r = run([memtrace, "--version"])
    check(r.returncode == 0 and r.stdout.decode() == f"memtrace {VERSION}\n", f"--version said {r.stdout!r}")
    trace = os.path.join(workdir(), "t.bin")
    r = run([memtrace, "run", "-o", trace, "--", program("leaker"), "6", "1000"], env=untraced_env())
    check(r.returncode == 0, f"installed memtrace run exited {r.returncode}: {r.stderr.decode()}")
    modules = re.findall(r'MODULE .*path "([^"]*libmemtrace\.so)"', run([memtrace, "dump", trace]).stdout.decode())
    preload = os.path.realpath(installed(f"{LIBDIR}/memtrace/libmemtrace.so"))
    check(modules == [preload], f"the preload in the trace is {modules}, not the installed {preload}")
    procs = json.loads(run([memtrace, "report", "--json", trace]).stdout)["processes"]
    host = procs[0]["memories"]["host"]
    check(len(procs) == 1 and (host["leaked_bytes"], host["leaked_blocks"]) == (3000, 3),
          f"the leaker leaked {host['leaked_bytes']} in {host['leaked_blocks']}, not 3000 in 3")


def test_python_helper():
    """The installed helper, under the installed preload: its mark, its memtrace."""
    memtrace = installed("bin/memtrace")
    trace = os.path.join(workdir(), "py.bin")
    script = "import memtrace; print(memtrace.mark('installed'), memtrace.command())"
    r = run([memtrace, "run", "-o", trace, "--", "/usr/bin/python3", "-c", script],
            env=untraced_env({"PYTHONPATH": helper_dir(), "PYTHONDONTWRITEBYTECODE": "1"}))
    check(r.returncode == 0, f"the helper's script exited {r.returncode}: {r.stderr.decode()}")
    check(r.stdout.decode() == f"True {os.path.realpath(memtrace)}\n",
          f"the installed helper printed {r.stdout.decode()!r}, not True and {memtrace}")
    marks = json.loads(run([memtrace, "report", "--json", trace]).stdout)["processes"][0]["diagnosis"]["marks"]
    check([m["label"] for m in marks] == ["installed"], f"marks {marks}")


def test_headers():
    """Each header compiles on its own, from the installed include directory."""
    src = os.path.join(workdir(), "h.c")
    for h in sorted(os.listdir(SOURCE_HEADERS)):
        with open(src, "w") as f:
            f.write(f"#include <memtrace/{h}>\nint main(void) {{ return 0; }}\n")
        r = run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                 "-I", os.path.join(ROOT, "include"), src])
        check(r.returncode == 0, f"<memtrace/{h}> does not compile alone: {r.stderr.decode()}")


def test_pkg_config():
    """The header path and the preload, at the configured prefix."""
    pc_dir = os.path.dirname(installed(f"{LIBDIR}/pkgconfig/memtrace.pc"))
    env = untraced_env({"PKG_CONFIG_PATH": pc_dir, "PKG_CONFIG_LIBDIR": ""})
    r = run(["pkg-config", "--variable=preload", "memtrace"], env=env)
    want = os.path.join(PREFIX, LIBDIR, "memtrace", "libmemtrace.so")
    check(r.returncode == 0 and r.stdout.decode().strip() == want, f"pkg-config's preload is {r.stdout!r}, not {want}")
    r = run(["pkg-config", "--cflags", "--libs", "memtrace"], env=env)
    check(r.stdout.decode().split() == [f"-I{PREFIX}/include"], f"pkg-config --cflags --libs: {r.stdout!r}")


def test_man_pages():
    """No groff warning; a section per command; every variable in the environment page."""
    man1, man7 = installed("share/man/man1/memtrace.1"), installed("share/man/man7/memtrace-env.7")
    for page in (man1, man7):
        r = run(["groff", "-man", "-ww", "-z", page])
        check(r.returncode == 0 and not r.stderr, f"groff warns on {page}: {r.stderr.decode()}")
    text = run(["man", "-l", man1], env=untraced_env({"MANWIDTH": "100"})).stdout.decode()
    for cmd in ("run", "report", "check", "flamegraph", "view", "dump"):
        check(re.search(rf"^   memtrace {cmd}\b", text, re.M), f"memtrace(1) has no section for {cmd}")
    text = run(["man", "-l", man7], env=untraced_env({"MANWIDTH": "100"})).stdout.decode()
    for var in ("MEMTRACE_OUTPUT", "MEMTRACE_DEPTH", "MEMTRACE_INTERVAL_MS", "MEMTRACE_MMAP", "MEMTRACE_UNWIND",
                "MEMTRACE_SAMPLING", "MEMTRACE_SEED", "MEMTRACE_STACK_TABLE_BITS", "MEMTRACE_PYTHON",
                "MEMTRACE_REACHABILITY", "MEMTRACE_ENABLE", "MEMTRACE_TREE", "MEMTRACE_PLUMBING"):
        check(var in text, f"memtrace-env(7) does not name {var}")


def complete(*words):
    """What Debian's bash-completion offers for the last of words."""
    bc = "/usr/share/bash-completion/bash_completion"
    check(os.path.exists(bc) and shutil.which("bash"), "bash-completion is not installed (.ci/packages)")
    line = " ".join(words)
    cmd = (f"source {bc}; source {installed('share/bash-completion/completions/memtrace')}; "
           f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; COMP_POINT={len(line)}; "
           "_memtrace; printf '%s\\n' \"${COMPREPLY[@]}\"")
    r = run(["bash", "-c", cmd])
    check(r.returncode == 0, f"completing {words}: {r.stderr.decode()}")
    return sorted(r.stdout.decode().split())


def test_bash_completion():
    check(complete("memtrace", "r") == ["report", "run"], f"memtrace r<TAB>: {complete('memtrace', 'r')}")
    check(complete("memtrace", "check", "--max") == ["--max-leaked", "--max-peak"], "memtrace check --max<TAB>")
    check(complete("memtrace", "flamegraph", "--metric", "p") == ["peak"], "flamegraph --metric p<TAB>")


if __name__ == "__main__":
    r = run([MESON, "install", "--no-rebuild", "--quiet", "-C", BUILD, "--destdir", DEST])
    check(r.returncode == 0, f"meson install exited {r.returncode}: {r.stderr.decode()}")
    main({"installed_where_expected": test_installed_where_expected, "traced_program": test_traced_program,
          "python_helper": test_python_helper, "headers": test_headers, "pkg_config": test_pkg_config,
          "man_pages": test_man_pages, "bash_completion": test_bash_completion})
