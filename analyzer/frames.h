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
#include "map.h"

/* Its module is "python": a Python frame (group.c's test, by name). */
#define MT_FRAME_PYTHON 1u

/*
 * The table, a column a field, so that a walk over a stack's flags or
 * contents stays in the cache; the fields after col are frames.c's.
 */
struct mt_frame_columns {
	struct mt_sym *sym;
	/* equal for frames with the same function, file, module and line (strings compared,
	 * NULL as ""), and, for an unnamed frame, the same offset in its module (the same
	 * address outside any) */
	uint32_t *content;
	uint8_t *flags; /* MT_FRAME_*, and frames.c's own */
};

struct mt_frames {
	struct mt_frame_columns col;
	uint32_t n;
	size_t cap[3];           /* of each column */
	struct mt_map contents;  /* hash -> uint32_t content id + 1; a collision probes hash + 1 */
	uint32_t *content_frame; /* content id -> the first frame with it */
	uint32_t ncontents;
	size_t contents_cap;
	/* a code object (its address, 8-aligned, under 2^48) and lasti (under 2^19) -> frame + 1 */
	struct mt_map python;
	/* a hash of a Python frame's name, file (addresses) and line -> uint32_t frame + 1;
	 * a collision probes hash + 1 */
	struct mt_map python_of;
	struct mt_map instances; /* instance id -> uint32_t index into inst + 1 */
	struct instance_frames *inst;
	uint32_t ninst;
	size_t inst_cap;
	uint32_t *py_idx; /* the PYSTACKs' frames, as the table's */
	size_t npy_idx, py_idx_cap;
	uint32_t *scratch; /* mt_analysis_native_frames' indices */
	unsigned scratch_cap;
};

/*
 * The frames of a stack as mt_analysis_native_frames gives them, as indices
 * into the table: the number written to out (at most max), or a negative
 * errno. The table may move with each call.
 */
int mt_frames_of_stack(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                       uint32_t *out, unsigned max);
/*
 * Where a stack's frames reach its first Python activation (an eval frame
 * with Python frames left to put in its place): the frame tree's node of
 * that eval frame (0: none is reached), the eval frame's place among its
 * return address's frames (inlined ones first), and the stack's Python
 * frames (the replay's, which stay put). mt_frames_of_stack gives the same
 * frames from there on for every stack with the same three.
 */
struct mt_frames_at {
	const void *pystack;
	uint32_t node;
	uint32_t inlined;
};

/*
 * mt_frames_of_stack's frames up to the stack's first Python activation,
 * *at saying where that is; all of them when there is none (at->node 0).
 */
int mt_frames_until_python(struct mt_analysis *a, uint32_t stack_instance, uint32_t stack,
                           uint32_t *out, unsigned max, struct mt_frames_at *at);
void mt_frames_free(struct mt_frames *f);

/* The table's columns (after an mt_frames_of_stack: the table is made by the first). */
static inline const struct mt_frame_columns *mt_frames_col(const struct mt_analysis *a)
{
	return &a->frames->col;
}

#endif
