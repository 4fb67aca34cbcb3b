# SPDX-License-Identifier: MIT
"""Run by each interpreter under test: the code objects of a few stdlib
modules (compiled from their sources, then recursively through co_consts)
and, per code object, the line CPython gives every instruction. One line per
code object:

    VERSION FIRST_LINE LINETABLE_HEX LINE0 LINE1 ...

VERSION is major << 8 | minor; LINEi is the line of code unit i (3.11 and
later: co_positions(); 3.10: co_lines(), at byte offset 2 * i), "-" for
none. Usage: python3.X dump-linetables.py > FIXTURE"""
import importlib.util
import sys

MODULES = ["argparse", "json.decoder", "dataclasses", "collections", "typing",
           "asyncio.base_events", "email.message", "inspect", "difflib", "textwrap"]


def walk(code):
    yield code
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            yield from walk(c)


def lines_310(code):
    units = len(code.co_code) // 2
    out = [None] * units
    for start, end, line in code.co_lines():
        for off in range(start, end, 2):
            if off // 2 < units:
                out[off // 2] = line
    return out


def lines_311(code):
    return [pos[0] for pos in code.co_positions()]


def main():
    version = sys.version_info.major << 8 | sys.version_info.minor
    lines = lines_310 if sys.version_info < (3, 11) else lines_311
    for name in MODULES:
        path = importlib.util.find_spec(name).origin
        with open(path, "rb") as f:
            top = compile(f.read(), path, "exec")
        for code in walk(top):
            got = ["-" if l is None else str(l) for l in lines(code)]
            print(version, code.co_firstlineno, code.co_linetable.hex() or "-", *got)


main()
