/* SPDX-License-Identifier: MIT */
/*
 * The feed: one process instance's records in replay order, decoded ahead
 * of the replay. Its producer decodes each thread's chunks and merges the
 * threads by ticks, ties broken by file offset, the two halves of a realloc
 * or mremap each at its own time (t0, then t1: docs/trace-format.md), into
 * a ring of units that the replay takes in turn: a thread's records due
 * before any other's next one go into the ring in a row, straight from the
 * reader's fast path, without a merge step each (a process of one thread
 * merges nothing). Given a thread, the producer runs on it, on another
 * core, while the replay applies what it made; otherwise the replay runs
 * the producer itself whenever the ring runs short. Either way the units are the same, and so is
 * every error.
 *
 * A unit of an ALLOC, FREE or REALLOC holds the record's fields (struct
 * mt_event): 64 bytes, where a struct mt_record takes kilobytes. Any other
 * record, and an event whose fields do not fit one (a corrupt trace's), is
 * decoded again on the replay's side, from the registers its chunk had
 * before it.
 *
 * The replay may look at units ahead of the one it applies (mt_feed_peek):
 * the addresses they name can be fetched into the cache before they are
 * needed. An ALLOC whose FREE of the same address the producer makes right
 * after it is marked (MT_UNIT_PAIR), so that the replay may apply the two
 * at once.
 *
 * May not: print; touch anything but the mapped trace, the ring and its
 * own state from the producer's thread.
 */
#ifndef MEMTRACE_ANALYZER_FEED_H
#define MEMTRACE_ANALYZER_FEED_H

#include <stdbool.h>
#include <stdint.h>

#include "reader.h"

/*
 * One record, or one half of a realloc or mremap, in replay order: an
 * event's fields, or (MT_UNIT_WHOLE) only those that order it, with the
 * chunk's registers before it in ev.addr (time), ev.old (address) and
 * ev.size (stack).
 */
struct mt_unit {
	struct mt_event ev;
	uint32_t stream; /* its thread: an index into the streams given to mt_feed_start */
	uint8_t flags;   /* MT_UNIT_* */
};

/* The t0 half of a realloc or mremap: its old block is given back; the record follows at t1. */
#define MT_UNIT_FIRST_HALF 1u
/* Only the record (mt_feed_next decodes it again) holds the fields: ev.type, time, t0 and
 * offset order it. */
#define MT_UNIT_WHOLE 2u
/* An ALLOC whose next unit, at u + 1 in memory (mt_feed_next gives it next), is a FREE of
 * the same address. */
#define MT_UNIT_PAIR 16u

/* A unit's merge key: the moment it takes effect. */
static inline uint64_t mt_unit_key(const struct mt_unit *u)
{
	return u->flags & MT_UNIT_FIRST_HALF ? u->ev.t0 : u->ev.time;
}

struct mt_key_thread;

/*
 * One thread of the instance: its chunks' indices in claim order, and
 * where a ring's keyframe says its records resume (keyframes.h; NULL: from
 * its first): the records before that are held by the keyframe, and the
 * feed leaves them out.
 */
struct mt_feed_stream {
	const uint64_t *chunks;
	uint64_t n;
	const struct mt_key_thread *resume;
};

struct mt_feed;

/* Where the producer runs. */
enum mt_feed_thread {
	MT_FEED_INLINE,     /* on the replay's thread, whenever the ring runs short */
	MT_FEED_THREAD,     /* on a thread of its own, if one can be made */
	MT_FEED_WHILE_FREE, /* the same, given back when the replay waits for it too often */
	MT_FEED_GIVEN_BACK, /* tests: the same, given back when the replay first looks for units */
};

/* A feed over the streams, which (like the trace) must outlive it. */
int mt_feed_start(struct mt_feed **out, const struct mt_trace *trace,
                  const struct mt_feed_stream *streams, uint32_t nstreams,
                  enum mt_feed_thread thread);
/*
 * The next unit, valid until the next call: 1, 0 after the last, < 0 for a
 * record that cannot be read (err says where), as mt_cursor_next says it.
 */
int mt_feed_next(struct mt_feed *f, const struct mt_unit **unit, struct mt_error *err);
/*
 * A unit's record (the realloc's or mremap's whole record for either half),
 * as mt_cursor_next gives it, with rec->thread its stream: valid until the
 * next call; < 0 if it cannot be read again.
 */
int mt_feed_record(struct mt_feed *f, const struct mt_unit *u, const struct mt_record **rec,
                   struct mt_error *err);
/* The unit `ahead` places after the one mt_feed_next gave last, if it is made yet; else NULL. */
const struct mt_unit *mt_feed_peek(const struct mt_feed *f, unsigned ahead);
/* Stops the producer wherever it is and frees the feed. */
void mt_feed_stop(struct mt_feed *f);

/*
 * For the command's SIGBUS handler (a mapped trace that shrank): on the
 * producer's thread, leaves the producer, which hands the fault to the
 * replay's thread to take there; elsewhere, returns.
 */
void mt_feed_fault(void *addr);

#endif
