/* SPDX-License-Identifier: MIT */
/*
 * A stack's frames as the commands show them (mt_analysis_native_frames,
 * analysis.h), each frame kept once in a table: a native return address is
 * symbolized and classified once per instance, a Python frame once per
 * code object and instruction. Grouping (group.c) asks for every frame of
 * every stack, 44 million of them on an import torch trace, and with the
 * table it reads, compares and keeps them as numbers: a frame's index, and
 * the id of its content, which is what a group's key tells apart.
 *
 * May not: print. Errors are negative errno.
 */
#ifndef MEMTRACE_ANALYZER_FRAMES_H
#define MEMTRACE_ANALYZER_FRAMES_H

#include <stdint.h>

#include "analysis.h"

/* Its module is "python": a Python frame (group.c's test, by name). */
#define MT_FRAME_PYTHON 1u

struct mt_frame {
	struct mt_sym sym;
	/* equal for frames with the same function, file, module and line (strings compared,
	 * NULL as ""), and, for an unnamed frame, the same offset in its module (the same
	 * address outside any) */
	uint32_t content;
	uint8_t flags; /* MT_FRAME_*, and frames.c's own */
};

struct mt_frames;

/*
 * The frames of a stack as mt_analysis_native_frames gives them, as indices
 * into the table: the number written to out (at most max), or a negative
 * errno.
 */
int mt_frames_of_stack(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                       uint32_t *out, unsigned max);
/* A frame of the table; valid until the next mt_frames_of_stack. */
const struct mt_frame *mt_frames_at(const struct mt_analysis *a, uint32_t i);
void mt_frames_free(struct mt_frames *f);

#endif
