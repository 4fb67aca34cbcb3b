# SPDX-License-Identifier: MIT
"""libmemtrace.so exports only the functions it interposes and memtrace_*,
and links no C++ runtime (a C++ runtime in every traced program would be
memory the program did not ask for, and a library it may not expect)."""
import re

from harness import LIB, check, main, run

INTERPOSED = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size",
    "mmap", "mmap64", "munmap", "mremap", "exit", "_exit", "_Exit", "__libc_start_main",
    "close", "close_range", "closefrom", "dup2", "dup3", "pipe2", "dlsym", "dlvsym",
    "execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve", "execveat",
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaMallocFromPoolAsync",
    "cudaMallocManaged", "cudaMallocPitch", "cudaMalloc3D", "cudaMallocHost", "cudaHostAlloc",
    "cudaFreeHost", "cudaHostRegister", "cudaHostUnregister",
}


def test_only_interposed_symbols_exported():
    out = run(["nm", "-D", "--defined-only", LIB]).stdout.decode()
    names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    extra = {n for n in names if n not in INTERPOSED and not n.startswith("memtrace_")}
    check(not extra, f"exported beyond the interposed functions: {sorted(extra)}")
    missing = INTERPOSED - names
    check(not missing, f"interposed functions not exported: {sorted(missing)}")


def test_no_cxx_runtime():
    dyn = run(["readelf", "-d", LIB]).stdout.decode()
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)
    check(needed, "readelf found no NEEDED entries at all")
    cxx = [n for n in needed if re.match(r"lib(stdc\+\+|c\+\+|c\+\+abi|supc\+\+)", n)]
    check(not cxx, f"links a C++ runtime: {cxx}")
    syms = run(["nm", "-D", "--undefined-only", LIB]).stdout.decode()
    check("GLIBCXX" not in syms and "CXXABI" not in syms,
          "uses symbols of a C++ runtime")


main({
    "only_interposed_symbols_exported": test_only_interposed_symbols_exported,
    "no_cxx_runtime": test_no_cxx_runtime,
})
