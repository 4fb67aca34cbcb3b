# SPDX-License-Identifier: MIT
"""Allocates known byte counts at known lines, under the preload, for
test-known.py. Each site allocates one bytearray(N), which asks malloc for
N + 1 bytes, and keeps it; the process ends with os._exit(0), so every block
is live at the end ("leaked") and at the peak. A line that allocates ends
with a marker comment naming the site; test-known.py reads the markers.
argv[1]: the multiprocessing start method for the worker (fork or spawn)."""
import multiprocessing
import os
import sys
import threading

keep = []


def inner():
    keep.append(bytearray(1_000_000))  # SITE nested


def outer():
    inner()  # SITE nested-caller


class Holder:
    def method(self):
        keep.append(bytearray(2_000_000))  # SITE method


def comprehension():
    return [bytearray(3_000_000) for _ in range(1)]  # SITE comprehension


def generator():
    yield bytearray(4_000_000)  # SITE generator


def in_thread():
    keep.append(bytearray(5_000_000))  # SITE thread


def worker():
    keep.append(bytearray(6_000_000))  # SITE worker
    os._exit(0)


if __name__ == "__main__":
    outer()  # SITE nested-module
    Holder().method()
    keep.extend(comprehension())
    keep.extend(generator())
    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    p = multiprocessing.get_context(sys.argv[1]).Process(target=worker)
    p.start()
    p.join()
    sys.stdout.flush()
    os._exit(0)
