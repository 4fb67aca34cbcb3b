/* SPDX-License-Identifier: MIT */
/*
 * The capture API of libmemtrace.so for other event sources in the traced
 * process: libmemtrace-cupti.so writes the CUDA driver's allocations
 * through it, into the same trace, with the same stacks. Not for programs.
 *
 * Every function is safe to call from any thread at any time and returns
 * quickly; when tracing is off (or libmemtrace.so is not loaded: the CUPTI
 * module looks these up with dlsym and does nothing without them) nothing
 * is recorded. None changes errno.
 */
#ifndef MEMTRACE_CAPTURE_H
#define MEMTRACE_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

/*
 * The id of the calling thread's stack, taken here: in a driver API-entry
 * callback, before the driver does anything. Frames of the caller's callers
 * (the driver, CUPTI) are included; the analyzer hides them. 0 when none.
 */
uint32_t memtrace_capture_stack(void);

/* An allocation of size bytes at addr, of kind (enum mt_kind) by fn (enum mt_fn). */
void memtrace_capture_alloc(uint32_t stack, unsigned fn, unsigned kind, uint64_t addr,
                            uint64_t size);

/* addr of kind is given back; call before it is, as for free. */
void memtrace_capture_free(unsigned fn, unsigned kind, uint64_t addr);

/*
 * An allocation that failed: size asked, err (the CUresult or cudaError_t),
 * and the device's free and total bytes right after (0, 0 when unknown).
 */
void memtrace_capture_fail(uint32_t stack, unsigned fn, unsigned kind, uint64_t size, int err,
                           uint64_t device_free, uint64_t device_total);

/*
 * True while this thread is inside an interposed CUDA runtime function that
 * records the allocation itself: the driver call it makes must not be
 * counted a second time.
 */
bool memtrace_capture_runtime_active(void);

/*
 * One line, "memtrace: " and text, said as libmemtrace.so says its own: on
 * the standard error the process was given, and not at all once the
 * program has put a file of its own at descriptor 2.
 */
void memtrace_capture_say(const char *text);

#endif
