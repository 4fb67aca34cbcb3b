/* SPDX-License-Identifier: MIT */
/*
 * Diagnosis: from one replayed process instance, the causes of running out
 * of memory rather than the figures alone. Growth (stacks whose live bytes
 * keep rising to the end, with what they gained per MARK and per second);
 * the sampler's series (RSS, Pss, Private_Dirty, the glibc
 * heap, the cgroup) with the fragmentation findings it supports, each with
 * its figure and what to do; the post-mortem of a killed process; and, over
 * all instances, the process tree's combined RSS and Pss.
 *
 * The analysis (analysis.c) feeds it: every stack's growth figures at the
 * end of an instance (judged in growth.c), the frees and large allocations
 * that move glibc's dynamic mmap threshold as they are replayed (O(1)
 * each), then finish.
 *
 * May not: print, symbolize, or keep anything per event. Errors are
 * negative errno.
 */
#ifndef MEMTRACE_ANALYZER_DIAGNOSIS_H
#define MEMTRACE_ANALYZER_DIAGNOSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "replay.h"

/*
 * A stack whose live bytes keep rising to the end of the run (growth.c says
 * when). Its figures are observed, from where the rise began to the end of
 * the growth series (struct mt_growth_series): the last MARK with marks, the
 * instance's last record without. Summing them over stacks is meaningful.
 */
struct mt_growth {
	enum mt_kind kind;
	uint32_t stack, stack_instance;
	/* live bytes where the rise began (the floor of that window) and at the end */
	uint64_t from_bytes, end_bytes;
	/*
	 * With marks: bytes_per_mark x the marks from the rise's start to the
	 * end (each mark starts a step); without: end_bytes - from_bytes.
	 */
	int64_t grown_bytes;
	bool per_mark;           /* the series is the marks: bytes_per_mark is known */
	double bytes_per_mark;   /* (end_bytes - from_bytes) / marks between them */
	double bytes_per_second; /* end_bytes - from_bytes over the time between them */
	double r2;               /* of a least-squares line over all checkpoints: how straight */
	double r2_per_mark;      /* the same over all marks; 0 with fewer than 3 */
};

/* The sampler's series, summed up. */
struct mt_memory_over_time {
	uint64_t samples; /* 0: no SAMPLE records, the rest is meaningless */
	uint64_t rss_first, rss_last, rss_peak, rss_peak_time;
	uint64_t pss_first, pss_last, pss_peak;
	uint64_t private_dirty_first, private_dirty_last, private_dirty_peak;
	uint64_t heap_arena_last, heap_in_use_last, heap_free_last, heap_trimmable_last,
	        heap_mmapped_last;
	uint64_t cgroup_current_peak, cgroup_max; /* cgroup_max: the last known limit, 0 none */
	uint64_t mem_total; /* the machine's physical memory; 0 unknown (an older trace) */
};

#define MT_FINDINGS_MAX 8

struct mt_finding {
	const char *name; /* "allocation-failed" (always first), "untraced-heap",
	                     "rss-above-live", "heap-fragmented", "trimmable-top",
	                     "mmap-threshold-raised", "rss-grows-not-live", "arena-bloat" */
	uint64_t figure;  /* bytes: the figure that justifies it */
	char text[640];   /* what was seen */
	char advice[640]; /* what to do */
};

struct mt_fragmentation {
	bool have; /* a sample with RSS known */
	/*
	 * The moment judged: of the RSS peak, the end of the steady phase
	 * (heap-findings.h) and, for a killed process, death, the one where
	 * anonymous RSS stood highest above the bytes traced live. A process's
	 * start-up and teardown (imports, interpreter exit) are no moment.
	 */
	const char *moment;      /* "rss-peak", "steady-end", "death" */
	const char *moment_text; /* the same in a sentence: "RSS peak", ... */
	uint64_t time;           /* ticks */
	uint64_t rss, rss_anon, rss_file, live_host_bytes, live_mmap_bytes;
	int64_t rss_minus_live_peak; /* rss - live_host_bytes then (may be negative) */
	int64_t anon_minus_traced;   /* rss_anon - live host and mmap bytes then */
	uint64_t live_ahead;         /* the most host and mmap bytes live from then to the end */
	/*
	 * The heap's figures of that moment: of the latest sample at or before
	 * it whose figures were taken at its own moment (a sample may carry
	 * older ones), with the live host bytes of that moment.
	 */
	uint64_t heap_time, heap_live_host;
	uint64_t heap_arena, heap_in_use, heap_free, heap_trimmable;
	/* heap_free less what the program held again later (live_ahead above the moment's live) */
	uint64_t heap_free_kept;
	/*
	 * What malloc_trim(0) would give back at that moment, at most: the
	 * heap's free bytes (fordblks). glibc's malloc_trim releases the top
	 * chunk (keepcost, the trimmable figure) and also every whole free page
	 * inside the arenas (MADV_DONTNEED), so fordblks is its upper bound and
	 * keepcost its lower one.
	 */
	uint64_t trim_would_return;
	struct mt_finding *findings; /* room for MT_FINDINGS_MAX, made by the first: most
	                                processes have none, and each is 1.3 KB of text */
	uint32_t nfindings;
};

/* A killed process: its last sample. */
struct mt_post_mortem {
	bool killed;
	bool have_sample;
	uint64_t last_rss, cgroup_current, cgroup_max;
	uint64_t time; /* ticks of the last sample */
};

/* The state that finds glibc's dynamic mmap threshold rising. */
struct mt_mmap_threshold {
	bool raised;
	uint64_t raise_sample;                   /* samples before the first free that raised it */
	uint64_t threshold_time;                 /* ticks of the free that set the threshold now */
	uint64_t threshold;                      /* the largest such free: the threshold now */
	uint64_t large_after, large_after_bytes; /* blocks of 128 KiB .. threshold since */
};

/*
 * Host blocks glibc served from arenas other than the main heap: nearer the
 * libraries than the executable (whose end the main heap grows from), not
 * mmapped on their own (those start 16 bytes into a page). Each such arena
 * is a heap aligned to 64 MiB: its blocks' addresses say which.
 */
#define MT_ARENAS_MAX       64
#define MT_ARENA_HEAP_SHIFT 26 /* glibc's non-main heaps: 64 MiB, aligned to it */
#define MT_MMAPPED_OFFSET   16 /* a block glibc mmapped alone starts this far into its page */
struct mt_arenas {
	uint32_t modules_seen;         /* in->nmodules when floor was found */
	uint64_t floor;                /* lowest library base; UINT64_MAX: unknown */
	uint64_t heaps[MT_ARENAS_MAX]; /* 64 MiB regions with such blocks (at most) */
	uint32_t nheaps;
	uint32_t last;          /* the heap of the block noted last, when nheaps */
	uint64_t blocks, bytes; /* allocated there */
};

struct mt_diagnosis {
	struct mt_growth *growth; /* sorted by grown_bytes, largest first */
	size_t ngrowth, growth_cap;
	struct mt_memory_over_time mem;
	struct mt_fragmentation frag;
	struct mt_post_mortem post_mortem;
	struct mt_mmap_threshold mmap_threshold;
	struct mt_arenas arenas;
};

/*
 * The tree of processes: at each sample of any of them, the sum of every
 * process's latest sample, a process counting from its first sample to its
 * last record. So a worker that exits no longer counts once the others'
 * samples show the pages it shared with them as theirs alone.
 */
struct mt_tree {
	uint32_t processes;         /* instances in the trace */
	uint32_t sampled;           /* of them, with samples */
	uint64_t combined_rss_peak; /* 0 when no samples */
	/* only at moments when every process's Pss was read after the tree's
	 * last fork (a fork shares pages anew, and an older Pss counts them
	 * again); pss_known: there was such a moment */
	uint64_t combined_pss_peak;
	bool pss_known;
	uint64_t time_ns; /* of the RSS peak, ns from the first process's start */
};

/* One stack's growth figures (after the instance's replay); keeps it if it grows (growth.c). */
int mt_diagnosis_add_stack(struct mt_diagnosis *d, const struct mt_instance *in,
                           const struct mt_stack_stats *s);
/* Largest grown_bytes first (growth.c). */
void mt_growth_sort(struct mt_diagnosis *d);
/*
 * During the replay: a host FREE of `size` bytes; a host allocation of `size` at addr (its
 * threshold figures here, its arena in arenas.c). The inline ones go first: an event that
 * changes nothing the diagnosis keeps, or only an arena's count (nearly all), then costs a
 * test or two and no call.
 */
void mt_diagnosis_note_free(struct mt_diagnosis *d, const struct mt_instance *in, uint64_t size,
                            uint64_t time);
void mt_diagnosis_note_alloc(struct mt_diagnosis *d, const struct mt_instance *in, uint64_t addr,
                             uint64_t size);
void mt_diagnosis_arena(struct mt_diagnosis *d, const struct mt_instance *in, uint64_t addr,
                        uint64_t size);

/* glibc's least mmap threshold: a free or an allocation below it says nothing of the threshold */
#define MT_GLIBC_MMAP_THRESHOLD (128 * 1024ull)

static inline bool mt_diagnosis_free_quiet(const struct mt_diagnosis *d, uint64_t size)
{
	return size < MT_GLIBC_MMAP_THRESHOLD || size <= d->mmap_threshold.threshold;
}

/*
 * mt_diagnosis_note_alloc where it needs no call: a block in the main heap (below the arenas'
 * floor: nothing to note) or in the arena heap of the block noted last (counted here). False,
 * having noted nothing, where mt_diagnosis_note_alloc must be called.
 */
static inline bool mt_diagnosis_alloc_fast(struct mt_diagnosis *d, const struct mt_instance *in,
                                           uint64_t addr, uint64_t size)
{
	struct mt_arenas *a = &d->arenas;

	if ((d->mmap_threshold.raised && size >= MT_GLIBC_MMAP_THRESHOLD) ||
	    a->modules_seen != in->nmodules)
		return false;
	if (addr < a->floor)
		return true;
	if (!in->nmodules || !a->nheaps || addr >> MT_ARENA_HEAP_SHIFT != a->heaps[a->last] ||
	    (addr & 0xfff) == MT_MMAPPED_OFFSET)
		return false;
	a->blocks++;
	a->bytes += size;
	return true;
}
/* After every stack was added: sorts, sums up the series, makes the findings. */
int mt_diagnosis_finish(struct mt_diagnosis *d, const struct mt_instance *in,
                        const struct mt_clock_fit *fit);
void mt_diagnosis_free(struct mt_diagnosis *d);

/* A new finding of f, NULL when f holds MT_FINDINGS_MAX already or memory ran out. */
struct mt_finding *mt_diagnosis_add_finding(struct mt_fragmentation *f, const char *name,
                                            uint64_t figure);
/* Findings in files of their own (finding-*.c), called by mt_diagnosis_finish. */
void mt_finding_allocation_failed(struct mt_fragmentation *f, const struct mt_instance *in,
                                  const struct mt_clock_fit *fit);
void mt_finding_untraced_heap(struct mt_fragmentation *f, const struct mt_instance *in);

/* 1023 B, 1.50 KiB, 12.0 MiB, 100 GiB: sizes as every report prints them. */
void mt_size_text(char *buf, size_t n, uint64_t bytes);

/* The last sample of `in` at or before `time`, NULL if none. */
const struct mt_sample_point *mt_diagnosis_sample_before(const struct mt_instance *in,
                                                         uint64_t time);

int mt_diagnosis_tree(struct mt_tree *t, const struct mt_instance *const *ins, uint32_t n,
                      const struct mt_clock_fit *fit);

#endif
