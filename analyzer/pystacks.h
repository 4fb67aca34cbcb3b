/* SPDX-License-Identifier: MIT */
/*
 * The Python side of one process instance's stacks (docs/trace-format.md,
 * STACK, PYSTACK and PYCODE): its code objects by id, its Python stacks by
 * id, and the Python stack each native stack names. The replay keeps one
 * per instance and fills it in its first pass; the three kinds of record
 * arrive in any order, so a stack's frames are looked up only when asked.
 *
 * May not: print, or interpret a line table (pyframes.c does). Errors are
 * negative errno.
 */
#ifndef MEMTRACE_ANALYZER_PYSTACKS_H
#define MEMTRACE_ANALYZER_PYSTACKS_H

#include <stdint.h>

#include "map.h"
#include "reader.h"

/* A code object (PYCODE record); strings are NUL-terminated copies. */
struct mt_pycode {
	uint64_t id;
	uint32_t version; /* major << 8 | minor */
	uint64_t first_line;
	char *file;
	char *name;
	uint8_t *linetable; /* what the trace kept of it */
	uint32_t linetable_len;
	uint64_t linetable_size; /* the whole table's length */
};

struct mt_pystacks {
	struct mt_map codes;    /* id -> struct mt_pycode */
	struct mt_map pystacks; /* PYSTACK id -> struct { first, n } into frames */
	/*
	 * stack id -> PYSTACK id, for stacks that name one: by_id for the ids a
	 * writer numbers from 1 up (0: none), stacks for those far beyond
	 */
	uint64_t *by_id;
	size_t by_id_cap;
	struct mt_map stacks;
	struct mt_pyframe *frames;
	size_t nframes, cap;
};

void mt_pystacks_init(struct mt_pystacks *p);
void mt_pystacks_free(struct mt_pystacks *p);
/* A PYCODE record; the first of an id wins (the format writes each once). */
int mt_pystacks_add_code(struct mt_pystacks *p, const struct mt_record *rec);
/* A PYSTACK record; the first of an id wins (the format writes each once). */
int mt_pystacks_add_pystack(struct mt_pystacks *p, const struct mt_record *rec);
/* The PYSTACK a STACK record names under stack id `id`, if any; call once per stack. */
int mt_pystacks_add_stack(struct mt_pystacks *p, uint32_t id, const struct mt_record *rec);
/* The code object of id, or NULL when the trace does not describe it. */
const struct mt_pycode *mt_pystacks_code(const struct mt_pystacks *p, uint64_t id);
/*
 * The Python frames of a stack, innermost first: their count, *frames set;
 * 0 for a stack that names no PYSTACK or one the instance does not have.
 */
uint32_t mt_pystacks_frames(const struct mt_pystacks *p, uint32_t id,
                            const struct mt_pyframe **frames);

#endif
