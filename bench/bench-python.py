# SPDX-License-Identifier: MIT
"""A pure-Python allocation-heavy workload: what memtrace's Python frames cost
on code that does nothing but make and drop objects.

    bench-python.py [COUNT]

Each of COUNT iterations builds one record, 4 to 8 Python frames below the
module (main -> run -> step -> one of four builders -> helpers), out of lists,
dicts, strings and tuples, and puts it in a rolling window of WINDOW live
records, dropping the record it replaces. One iteration in four also builds
objects above pymalloc's 512-byte limit (a list of 96 items, a string of
600-odd characters, a dict of 48 keys), which go to malloc even with the
default allocator; under PYTHONMALLOC=malloc every object does.

Deterministic: no hash() of strings (randomized per process), no id(), no
clock; dicts keep insertion order. The result line's calls= is the number of
iterations, not of allocator calls (CPython's allocations are not counted
here); checksum= mixes every record's contents, so a run that changed the
program's behaviour shows a different one. With BENCH_RUSAGE set, the
process's own CPU time and peak RSS go to stderr as the C workloads print
them."""
import os
import resource
import sys

WINDOW = 4096
MASK = (1 << 64) - 1
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")


def mix(acc, value):
    """FNV-style step over a 64-bit accumulator."""
    return ((acc ^ value) * 0x100000001B3) & MASK


def label(i, width):
    """A string built piece by piece: concatenation and a join."""
    parts = [WORDS[(i + k) % len(WORDS)] for k in range(width)]
    return "-".join(parts) + f":{i}"


def fields(i, n):
    """A dict of n small entries: str keys, tuple and int values."""
    return {f"k{k}": (k, i % (k + 1)) for k in range(n)}


def small_record(i):
    return {"id": i, "name": label(i, 3), "tags": [i & 7, i & 15, i & 31], "pos": (i, -i)}


def nested_record(i):
    inner = [small_record(i + k) for k in range(3)]
    return {"id": i, "children": inner, "path": tuple(label(i + k, 2) for k in range(2))}


def wide_record(i):
    """Objects pymalloc passes to malloc: a list of 96 pointers (776 bytes of
    items), a string over 600 characters and a dict of 48 keys."""
    return {"id": i, "items": list(range(i, i + 96)), "text": label(i, 80),
            "fields": fields(i, 48)}


def table_record(i):
    rows = [(k, str(i * k), [k] * (k % 5)) for k in range(8)]
    return {"id": i, "rows": rows, "index": fields(i, 6)}


BUILDERS = (small_record, nested_record, wide_record, table_record)


def digest(record):
    """The record's contents as an integer, in a fixed order."""
    acc = record["id"]
    for key, value in record.items():
        acc = mix(acc, len(key))
        if isinstance(value, str):
            acc = mix(acc, len(value) + ord(value[-1]))
        elif isinstance(value, (list, tuple, dict)):
            acc = mix(acc, len(value))
    return acc


def step(i, window):
    record = BUILDERS[i % len(BUILDERS)](i)
    window[i % WINDOW] = record  # the record replaced here is freed
    return digest(record)


def run(count):
    window = [None] * WINDOW
    acc = 0xCBF29CE484222325
    for i in range(count):
        acc = mix(acc, step(i, window))
    return acc


def report_rusage():
    if not os.environ.get("BENCH_RUSAGE"):
        return
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"bench-rusage: utime_us={round(ru.ru_utime * 1e6)} stime_us={round(ru.ru_stime * 1e6)}"
          f" maxrss_kb={ru.ru_maxrss}", file=sys.stderr)


def main():
    count = 200_000
    if len(sys.argv) > 1:
        try:
            count = int(sys.argv[1])
        except ValueError:
            count = 0
        if count <= 0:
            sys.exit(f"{sys.argv[0]}: expected a positive count, got '{sys.argv[1]}'")
    checksum = run(count)
    print(f"bench-python: iterations={count} window={WINDOW} calls={count} "
          f"checksum={checksum:016x}", flush=True)
    report_rusage()


if __name__ == "__main__":
    main()
