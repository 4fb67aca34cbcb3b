/* SPDX-License-Identifier: MIT */
/*
 * The exit's reachability scan (docs/reachability.md), shared by its three
 * files: reach.c (the parent: the copy made, waited for, its result
 * written), reach-live.c (the copy: its live blocks from its own records in
 * the trace) and reach-scan.c (the copy: roots and blocks scanned, every
 * block classified).
 *
 * Context of everything but reach.c: the copy, a raw clone of the exiting
 * process with one thread, whose other threads may have held any lock of
 * libc's at the clone: no malloc, no stdio, no lock, memory from raw mmap.
 */
#ifndef MT_REACH_H
#define MT_REACH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct mt_reach_block {
	uint64_t addr, size;
};

struct mt_reach_range {
	uintptr_t lo, hi;
};

/* What the copy hands back through the shared page (reach.c reads it). */
struct mt_reach_result {
	uint32_t status; /* enum mt_reach_status */
	uint64_t detail;
	uint64_t blocks, bytes, scanned;
	uint64_t chunks; /* trace chunks read back */
};

/* What the parent knows that the copy needs. */
struct mt_reach_input {
	int trace_fd;      /* the trace, readable */
	ino_t trace_ino;   /* its mappings are not roots */
	uint32_t instance; /* the exiting process instance */
	uint64_t cutoff;   /* ticks: the snapshot's moment */
	uintptr_t sp;      /* the exiting thread's stack pointer, its registers saved above */
	uintptr_t self_lo, self_hi; /* libmemtrace.so's own mappings: not roots */
	uintptr_t out_lo, out_hi;   /* the shared result area: not a root */
	uintptr_t libc_lo, libc_hi; /* libc's writable segment, where its main arena is */
	uintptr_t brk;              /* the program break: where the main arena's top chunk ends */
	uint64_t budget;            /* bytes the copy may map for itself */
	/* the program takes in orphans (reaps_orphans): the copy makes no second process */
	bool one_core;
	/* the chunks of this process and of its fork ancestors (reach.c), or
	 * NULL when the list could not be kept: then every chunk of the file */
	uint64_t *const *chunks;
	uint64_t nchunks;
};

/* Raw mappings of the copy's own (munmap'd by its exit). NULL when refused. */
void *mt_reach_map(size_t bytes);
void *mt_reach_remap(void *p, size_t old, size_t bytes);
void mt_reach_unmap(void *p, size_t bytes);
/* Bytes mapped so far, held against the budget: bytes the copy may map. */
extern uint64_t mt_reach_mapped, mt_reach_budget;
/*
 * A MAP_SHARED mapping, for the copy's second process to hand its results
 * back through; not a root, not held against the budget (the caller holds
 * what it touches). NULL when refused.
 */
void *mt_reach_map_shared(size_t bytes);
void mt_reach_unmap_shared(void *p, size_t bytes);
/*
 * A second process of the copy's, for the copy's second core: 0 in it, its
 * pid in the copy, -1 when it could not be made. In it, mt_reach_hand says
 * its results are whole and ends it; any other end is a failure. In the
 * copy, mt_reach_handed waits for either: true when the results are whole;
 * mt_reach_reap waits for its end (killed first if kill), and must come
 * before the copy's own.
 */
long mt_reach_fork(void);
/* The copy's handler of sig (SA_SIGINFO, SA_NODEFER; it never returns), set by the raw syscall. */
void mt_reach_handle(int sig, void (*fn)(int, siginfo_t *, void *));
_Noreturn void mt_reach_hand(void);
bool mt_reach_handed(void);
void mt_reach_reap(bool kill);
/* The copy's resident bytes. */
uint64_t mt_reach_rss(void);
/* CPUs the copy may run on. */
unsigned mt_reach_cpus(void);
/* The copy's own mappings (not roots): up to room of them into out, *n advanced. */
void mt_reach_own_ranges(struct mt_reach_range *out, size_t room, size_t *n);
/* memtrace's own mappings in the program (own.c): not roots either. */
void mt_own_ranges(struct mt_reach_range *out, size_t room, size_t *n);

/*
 * The live host blocks of the instance at in->cutoff, sorted by address,
 * from the trace's records of it and, for a forked process, of its
 * ancestors up to each one's fork. 0, or an enum mt_reach_status with
 * *detail set.
 */
int mt_reach_live(const struct mt_reach_input *in, struct mt_reach_block **blocks, size_t *n,
                  uint64_t *chunks, uint64_t *detail);

/* The chunk list's blocks: CHUNK_BLOCK offsets each, 0 for a slot not yet written. */
#define MT_REACH_CHUNK_BLOCK_BITS 12
#define MT_REACH_CHUNK_BLOCKS     4096

/*
 * Classifies blocks (sorted, n of them) into cls[] (enum mt_reach_class):
 * scans the roots (every readable and writable mapping that is not malloc
 * heap, the exiting thread's stack from in->sp) and the blocks they reach.
 * *scanned: bytes read. 0, or an enum mt_reach_status.
 */
int mt_reach_scan(const struct mt_reach_input *in, const struct mt_reach_block *blocks, size_t n,
                  uint8_t *cls, uint64_t *scanned, uint64_t *detail);

/* Reads a word of the copy's memory; false when it faults. */
bool mt_reach_peek(uintptr_t addr, uint64_t *v);

#endif
