/* SPDX-License-Identifier: MIT */
/*
 * memtrace's API for the traced program: put marks in the trace, so that a
 * report can say how memory grew per step ("grows by 12.0 MiB per mark").
 *
 * The function lives in libmemtrace.so; a program that may run without it
 * looks it up at run time rather than linking it:
 *
 *   C:       int (*mark)(const char *) = dlsym(RTLD_DEFAULT, "memtrace_mark");
 *            if (mark) mark("epoch 3");
 *   Python:  import ctypes
 *            try: mark = ctypes.CDLL(None).memtrace_mark
 *            except AttributeError: mark = None   # not traced
 *            if mark: mark(b"step 12")
 */
#ifndef MEMTRACE_MEMTRACE_H
#define MEMTRACE_MEMTRACE_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Records a mark named label (at most 256 bytes are kept) at this moment.
 * Returns 0, or -1 when nothing is being traced. Any thread, any time;
 * errno is left alone.
 */
int memtrace_mark(const char *label);

#ifdef __cplusplus
}
#endif

#endif
