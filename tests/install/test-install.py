# SPDX-License-Identifier: MIT
"""`meson install` into a DESTDIR puts every piece where a Debian system
expects it, and the installed memtrace runs a traced program from there:
`memtrace run` finds the installed libmemtrace.so relative to itself (the
DESTDIR is not the prefix it was configured for), the trace's figures are
exact, the installed Python helper marks that trace and finds that
memtrace, the headers compile alone, pkg-config names the preload, the man
pages format without a warning and bash completes the commands.
argv: meson, the build directory, a traced test program (leaker)."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

MESON, BUILD, LEAKER = sys.argv[1:4]


def fail(what):
    print(f"FAIL {what}")
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


def run(argv, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run(argv, timeout=300, **kw)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRACE_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def options():
    r = run([MESON, "introspect", "--buildoptions", BUILD])
    check(r.returncode == 0, f"meson introspect failed: {r.stderr.decode()}")
    return {o["name"]: o["value"] for o in json.loads(r.stdout)}


opts = options()
prefix, libdir = opts["prefix"], opts["libdir"]
multiarch = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.decode().strip()
version = run([MESON, "introspect", "--projectinfo", BUILD]).stdout
version = json.loads(version)["version"]
dest = tempfile.mkdtemp(prefix="memtrace-install-")
r = run([MESON, "install", "--no-rebuild", "--quiet", "-C", BUILD, "--destdir", dest])
check(r.returncode == 0, f"meson install exited {r.returncode}: {r.stderr.decode()}")
root = dest + prefix


def installed(rel):
    path = os.path.join(root, rel)
    check(os.path.isfile(path), f"{rel} is not installed under {prefix}")
    return path


# where Debian expects each piece (libdir is lib/<multiarch> by default on Debian)
check(libdir in (f"lib/{multiarch}", "lib", f"{prefix}/lib/{multiarch}"), f"libdir {libdir}")
memtrace = installed("bin/memtrace")
preload = installed(f"{libdir}/memtrace/libmemtrace.so")
if os.path.exists(os.path.join(BUILD, "cupti", "libmemtrace-cupti.so")):
    installed(f"{libdir}/memtrace/libmemtrace-cupti.so")
headers = sorted(os.path.basename(h) for h in glob.glob(os.path.join(root, "include/memtrace/*.h")))
source_headers = sorted(os.listdir(os.path.join(os.path.dirname(__file__), "../../include/memtrace")))
check(headers == source_headers, f"headers {headers}, not {source_headers}")
pc = installed(f"{libdir}/pkgconfig/memtrace.pc")
man1 = installed("share/man/man1/memtrace.1")
man7 = installed("share/man/man7/memtrace-env.7")
completion = installed("share/bash-completion/completions/memtrace")
helper = glob.glob(os.path.join(root, "lib/python3*/dist-packages/memtrace/pytest_plugin.py")) or \
    glob.glob(os.path.join(root, "lib/python3*/site-packages/memtrace/pytest_plugin.py"))
check(len(helper) == 1, "the Python helper is not installed under lib/python3.X/dist-packages")
helper_dir = os.path.dirname(os.path.dirname(helper[0]))
print("ok installed where expected")

# --version
r = run([memtrace, "--version"])
check(r.returncode == 0 and r.stdout.decode() == f"memtrace {version}\n", f"--version said {r.stdout!r}")

# a traced program, run from the DESTDIR with the installed preload
work = tempfile.mkdtemp(prefix="memtrace-install-run-")
trace = os.path.join(work, "t.bin")
r = run([memtrace, "run", "-o", trace, "--", LEAKER, "6", "1000"], env=clean_env())
check(r.returncode == 0, f"installed memtrace run exited {r.returncode}: {r.stderr.decode()}")
dump = run([memtrace, "dump", trace]).stdout.decode()
modules = re.findall(r'MODULE .*path "([^"]*libmemtrace\.so)"', dump)
check(modules == [os.path.realpath(preload)], f"the preload in the trace is {modules}, not the installed {preload}")
rep = json.loads(run([memtrace, "report", "--json", trace]).stdout)["processes"]
host = rep[0]["memories"]["host"]
check(len(rep) == 1 and (host["leaked_bytes"], host["leaked_blocks"]) == (3000, 3),
      f"the leaker leaked {host['leaked_bytes']} in {host['leaked_blocks']}, not 3000 in 3")
print("ok a traced program from the DESTDIR")

# the installed Python helper, under the installed preload: its mark, its memtrace
script = "import memtrace; print(memtrace.mark('installed'), memtrace.command())"
trace2 = os.path.join(work, "py.bin")
python = "/usr/bin/python3"
r = run([memtrace, "run", "-o", trace2, "--", python, "-c", script],
        env=clean_env(PYTHONPATH=helper_dir, PYTHONDONTWRITEBYTECODE="1"))
check(r.returncode == 0, f"the helper's script exited {r.returncode}: {r.stderr.decode()}")
check(r.stdout.decode() == f"True {os.path.realpath(memtrace)}\n",
      f"the installed helper printed {r.stdout.decode()!r}, not True and {memtrace}")
marks = json.loads(run([memtrace, "report", "--json", trace2]).stdout)["processes"][0]["diagnosis"]["marks"]
check([m["label"] for m in marks] == ["installed"], f"marks {marks}")
print("ok the installed Python helper")

# each header compiles on its own, from the installed include directory
cc = os.environ.get("CC", "cc")
for h in headers:
    src = os.path.join(work, "h.c")
    with open(src, "w") as f:
        f.write(f"#include <memtrace/{h}>\nint main(void) {{ return 0; }}\n")
    r = run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", os.path.join(root, "include"), src])
    check(r.returncode == 0, f"<memtrace/{h}> does not compile alone: {r.stderr.decode()}")
print("ok headers")

# pkg-config: the header path and the preload, at the configured prefix
pkg = clean_env(PKG_CONFIG_PATH=os.path.dirname(pc), PKG_CONFIG_LIBDIR="")
r = run(["pkg-config", "--variable=preload", "memtrace"], env=pkg)
want = os.path.join(prefix, libdir, "memtrace", "libmemtrace.so")
check(r.returncode == 0 and r.stdout.decode().strip() == want, f"pkg-config's preload is {r.stdout!r}, not {want}")
r = run(["pkg-config", "--cflags", "--libs", "memtrace"], env=pkg)
check(r.stdout.decode().split() == [f"-I{prefix}/include"], f"pkg-config --cflags --libs: {r.stdout!r}")
print("ok pkg-config")

# man pages: no groff warning; a section per command; the environment page
for page in (man1, man7):
    r = run(["groff", "-man", "-ww", "-z", page])
    check(r.returncode == 0 and not r.stderr, f"groff warns on {page}: {r.stderr.decode()}")
text = run(["man", "-l", man1], env=clean_env(MANWIDTH="100", MAN_KEEP_FORMATTING="")).stdout.decode()
for cmd in ("run", "report", "check", "flamegraph", "view", "dump"):
    check(re.search(rf"^   memtrace {cmd}\b", text, re.M), f"memtrace(1) has no section for {cmd}")
text = run(["man", "-l", man7], env=clean_env(MANWIDTH="100")).stdout.decode()
for var in ("MEMTRACE_OUTPUT", "MEMTRACE_DEPTH", "MEMTRACE_SAMPLING", "MEMTRACE_PLUMBING"):
    check(var in text, f"memtrace-env(7) does not name {var}")
print("ok man pages")

# bash completion, with Debian's bash-completion
bc = "/usr/share/bash-completion/bash_completion"
if not os.path.exists(bc) or not shutil.which("bash"):
    fail("bash-completion is not installed (.ci/packages)")


def complete(*words):
    line = " ".join(words)
    cmd = (f"source {bc}; source {completion}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
           f"COMP_LINE='{line}'; COMP_POINT={len(line)}; _memtrace; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    r = run(["bash", "-c", cmd])
    check(r.returncode == 0, f"completing {words}: {r.stderr.decode()}")
    return sorted(r.stdout.decode().split())


check(complete("memtrace", "r") == ["report", "run"], f"memtrace r<TAB>: {complete('memtrace', 'r')}")
check(complete("memtrace", "check", "--max") == ["--max-leaked", "--max-peak"], "memtrace check --max<TAB>")
check(complete("memtrace", "flamegraph", "--metric", "p") == ["peak"], "flamegraph --metric p<TAB>")
print("ok bash completion")
shutil.rmtree(dest)
shutil.rmtree(work)
