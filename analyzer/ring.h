/* SPDX-License-Identifier: MIT */
/*
 * The ring's consumer (memtrace run --ring, docs/architecture.md): in the
 * memtrace run process, never in the program, it reads the trace's chunks
 * as they are written, keeps each process instance's live set and totals
 * through the replay (replay.h, mt_replay_stream_*), writes them into the
 * file as rounds of keyframes, and gives back the extents whose records a
 * usable round holds, so that the writers can write them again.
 *
 * May not: touch the program; print (the caller says what went wrong);
 * give back an extent before its records are held by a keyframe the
 * reader will start from and its definitions are copied.
 */
#ifndef MEMTRACE_ANALYZER_RING_H
#define MEMTRACE_ANALYZER_RING_H

#include <stdbool.h>
#include <stdint.h>

struct mt_ring;

/* Opens the trace at path (its header already written) for consuming; -errno. */
int mt_ring_open(struct mt_ring **out, const char *path);
/*
 * One pass: everything written since the last, applied up to the margin
 * before now; a round of keyframes when the ring needs room. ended: every
 * process of the trace has ended, so every record is final. 0 or -errno
 * (the consumer cannot go on: the writers grow the file from then on).
 */
int mt_ring_poll(struct mt_ring *c, bool ended);
/*
 * Rounds written, extents given back, bytes claimed past the ring (header),
 * the bytes of the kept definitions and of the last round's chunks, the
 * ring size that would have left room for the records between two rounds
 * (0: the ring had it), and the consumer's process's own memory now
 * (RssAnon: not the trace's pages it maps; 0 when unknown).
 */
struct mt_ring_stats {
	uint64_t rounds, released, overflow;
	uint64_t keep_bytes, round_bytes, needed;
	uint64_t rss_anon_kib;
};
void mt_ring_stats(const struct mt_ring *c, struct mt_ring_stats *s);
void mt_ring_close(struct mt_ring *c);

#endif
