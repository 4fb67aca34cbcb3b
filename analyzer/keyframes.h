/* SPDX-License-Identifier: MIT */
/*
 * The ring's keyframes as a reader takes them (docs/trace-format.md, The
 * ring's records): the chunks of instance 0, which the consumer of
 * `memtrace run --ring` wrote, hold copies of definitions whose chunks were
 * given back, the rounds of keyframes, and final keyframes of instances
 * that ended. This module reads them before the first pass: the copies go
 * to a callback as the instance's own records, and each instance gets the
 * keyframe its replay starts from.
 *
 * May not: print. Errors are negative errno with struct mt_error.
 */
#ifndef MEMTRACE_ANALYZER_KEYFRAMES_H
#define MEMTRACE_ANALYZER_KEYFRAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "map.h"
#include "reader.h"

/* Where a thread's records resume after the keyframe (KEY_THREADS). */
struct mt_key_thread {
	uint32_t tid;
	uint32_t offset; /* in chunk seq, from the chunk's start */
	uint64_t seq;
	bool phase; /* the first half of the two-phase record at offset is held too */
};

/* A live block or mapping (KEY_BLOCKS, KEY_RANGES). */
struct mt_key_block {
	uint64_t addr, size;
	uint32_t stack, stack_instance;
	uint32_t kind, blocks;
};

/* A stack's totals and its figures at its kind's peak (KEY_STACKS). */
struct mt_key_stack {
	uint32_t kind, stack_instance, stack;
	uint64_t allocations, bytes_allocated, peak_bytes, peak_blocks;
};

struct mt_keyframe {
	uint32_t instance;
	uint64_t round; /* 0: final */
	uint64_t time;
	uint64_t events;
	uint32_t nkinds;
	struct mt_key_kind kinds[MT_KIND_COUNT];
	struct mt_key_thread *threads;
	struct mt_key_block *blocks, *ranges; /* in address order */
	struct mt_key_stack *stacks;
	uint64_t nthreads, nblocks, nranges, nstacks;
};

struct mt_keyframes {
	bool ring;                  /* the consumer wrote something */
	uint64_t round;             /* the newest whole round; 0 none */
	uint64_t usable;            /* the round replays start from (that round's `usable`) */
	uint64_t usable_time;       /* its moment in ticks */
	struct mt_keyframe *frames; /* of round `usable`, and final ones */
	uint32_t nframes;
	size_t cap;
	struct mt_map round_of;    /* instance -> index into frames (round `usable`) */
	struct mt_map final_of;    /* instance -> index into frames (final) */
	struct mt_map copied;      /* seq of a chunk whose definitions were copied */
	struct mt_map copy_chunks; /* slot of a consumer chunk -> 0, for the first pass */
};

/* Definitions read from a COPY: the instance's, as if in the copied chunk. */
typedef int (*mt_key_definition_fn)(void *ctx, uint32_t instance, const struct mt_record *rec);

/* An empty set: no ring. */
void mt_keyframes_init(struct mt_keyframes *k);
/* Reads the consumer's chunks of t (none: k->ring false). */
int mt_keyframes_read(struct mt_keyframes *k, const struct mt_trace *t, mt_key_definition_fn def,
                      void *ctx, struct mt_error *err);
void mt_keyframes_free(struct mt_keyframes *k);

/*
 * The keyframe an instance's replay starts from: its keyframe in the round
 * the file is read from; failing that its final keyframe (the consumer
 * gives an ended instance's chunks back once that is written); NULL: every
 * record of the instance is in the file.
 */
const struct mt_keyframe *mt_keyframes_of(const struct mt_keyframes *k, uint32_t instance);
/* Whether a COPY holds chunk seq's definitions: the reader takes the copy's. */
bool mt_keyframes_copied(const struct mt_keyframes *k, uint64_t seq);
/* The records a COPY carries: what any window needs of an instance. */
bool mt_key_is_definition(unsigned type);

#endif
