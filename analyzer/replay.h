/* SPDX-License-Identifier: MIT */
/*
 * Replay: turns a trace's records into per process instance figures.
 *
 * mt_replay_open() makes the first pass over every chunk and collects what
 * is not an event (PROCESS, MODULE, MODULE_GONE, STACK, PYSTACK, PYCODE,
 * EXIT) and which chunks each thread wrote. mt_replay_run() then replays
 * every instance in time order: a k-way merge of its threads' chunk
 * sequences, ties broken by file offset, streamed chunk by chunk, through a
 * table of live blocks.
 * Memory grows with live blocks, distinct stacks, threads and chunks, and
 * with SAMPLE and MARK records (each is kept, with the live bytes at its
 * moment), never with the number of events.
 *
 * Semantics (docs/trace-format.md): a forked child starts with a copy of
 * its parent's live set at the child's start; realloc and mremap give the
 * old block back at t0 and take the new one at t1; munmap trims and splits
 * the anonymous ranges it overlaps, a length rounded up to 4096 bytes as the
 * kernel rounds it to pages; a free of an unknown address is counted, not an
 * error. Bytes of different kinds are never added together.
 *
 * May not: print. Errors are negative errno with struct mt_error.
 */
#ifndef MEMTRACE_ANALYZER_REPLAY_H
#define MEMTRACE_ANALYZER_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "frame-tree.h"
#include "reader.h"

/*
 * Growth sums need 128 bits: bytes (to 2^40) times ns (to 2^47) summed over
 * every checkpoint. A GCC and Clang extension, as everywhere we build.
 */
__extension__ typedef unsigned __int128 mt_u128;
__extension__ typedef __int128 mt_i128;

/* Per memory kind figures of one instance. */
struct mt_kind_stats {
	uint64_t allocations; /* successful allocations (realloc to a new block counts; mmap) */
	uint64_t frees; /* tracked blocks given back (a munmap that released something counts once)
	                 */
	uint64_t bytes_allocated; /* sum of sizes allocated (mremap growth included) */
	uint64_t live_bytes;      /* live now (at the end, once the instance is replayed) */
	uint64_t live_blocks;
	uint64_t peak_bytes;      /* highest live_bytes seen */
	uint64_t peak_blocks;     /* live_blocks at that moment */
	uint64_t peak_time;       /* ticks of the peak (see mt_replay_clock); 0 if none */
	uint64_t failed;          /* FAIL records */
	uint64_t unknown_frees;   /* frees (or realloc old blocks) of addresses not live */
	uint64_t inherited_bytes; /* live bytes copied from the parent at a fork */
	uint64_t inherited_blocks;
};

enum mt_end {
	MT_END_KILLED = 0, /* no EXIT record: killed by a signal */
	MT_END_EXIT,       /* an EXIT record: exit_how, exit_status */
	MT_END_EXEC,       /* replaced by a program exec'd with the same pid */
	MT_END_STOPPED,    /* tracing stopped (LOST reason 2): the end is not known */
	/* its last record is an EXEC and no traced program of its pid follows: it became a
	 * program memtrace cannot enter (static, setuid, no LD_PRELOAD) */
	MT_END_EXEC_UNTRACED,
	/* no EXIT, and a running program still writes the trace: it is alive */
	MT_END_RUNNING,
	/* no EXIT, and the file was cut (reader: cut): its end may be in what is missing */
	MT_END_CUT,
};

/* The process image ended in an exec: the kernel dropped its memory, nothing leaked. */
static inline bool mt_end_replaced(enum mt_end end)
{
	return end == MT_END_EXEC || end == MT_END_EXEC_UNTRACED;
}

/* A failed allocation; the first MT_REPLAY_MAX_FAILS of an instance are kept. */
struct mt_fail_event {
	uint64_t time;
	uint64_t offset;
	uint32_t fn;
	uint32_t err;
	uint64_t size;
	uint32_t stack;
	enum mt_kind kind;
	uint64_t device_free, device_total; /* CUDA: the device right after; 0 when unknown */
};
#define MT_REPLAY_MAX_FAILS 1024

struct mt_module {
	uint64_t time;
	uint64_t base;
	uint64_t gone_time; /* 0 while loaded */
	char *path;
	uint8_t build_id[MT_MAX_BUILD_ID];
	uint32_t build_id_len;
	uint32_t nseg;
	struct mt_segment *seg;
};

/* One SAMPLE record, and the bytes live when it was taken. */
struct mt_sample_point {
	uint64_t time;             /* ticks */
	uint64_t live_host;        /* live host bytes at that moment in the replay */
	uint64_t live_host_blocks; /* and the blocks that hold them */
	uint64_t live_mmap;        /* live anonymous mmap bytes then */
	uint64_t host_pages;       /* bytes of the pages live host blocks touched then */
	/*
	 * The most host + mmap bytes live at the sample, just before the last
	 * change before it and just after the first change after it: RSS read
	 * at this moment may still hold a block whose free was under way (the
	 * FREE is recorded before the memory goes back) or already one whose
	 * allocation was (its ALLOC comes after), so RSS is set against this.
	 */
	uint64_t traced_max;
	/*
	 * The most host + mmap bytes live from the sample to the next one: what
	 * the program held again after RSS was read, which tells memory the heap
	 * keeps for its next use from memory it keeps for nothing.
	 */
	uint64_t traced_until_next;
	uint64_t values[MT_SAMPLE_FIELD_COUNT]; /* enum mt_sample_field */
};

/* One MARK record, and the bytes live of every kind when it was made. */
struct mt_mark_point {
	uint64_t time; /* ticks */
	uint64_t ns;   /* the same moment on the clock of the samples */
	char *label;   /* NUL-terminated copy */
	uint64_t live[MT_KIND_COUNT];
};

/*
 * Growth checkpoints (see struct mt_stack_stats): 32 evenly spaced moments
 * over the instance's life, from its start to its last record, and every
 * MARK; x is ns since the first checkpoint. Their x sums, for the fit.
 */
#define MT_EVEN_CHECKPOINTS 32
struct mt_checkpoints {
	uint32_t n;
	uint64_t first_ns, last_x; /* the first one's ns; the last one's x */
	mt_u128 sx, sxx;
};

/*
 * The positions at which growth is judged: the instance's MARKs when it
 * made at least MT_GROWTH_WINDOWS of them (a step of the program each), else
 * the MT_EVEN_CHECKPOINTS evenly spaced checkpoints from start_tick to
 * end_tick. Cut in MT_GROWTH_WINDOWS windows of consecutive positions,
 * position i in window i * MT_GROWTH_WINDOWS / n.
 */
#define MT_GROWTH_WINDOWS 8
struct mt_growth_series {
	bool marks;
	uint32_t n;
	uint64_t start_ns, end_ns; /* of the evenly spaced checkpoints */
};

struct mt_instance_priv;

/* One process instance (PROCESS record) and, after mt_replay_run(), its figures. */
struct mt_instance {
	uint32_t id;
	bool have_process; /* false: chunks of this instance but no PROCESS record */
	uint64_t process_offset;
	uint32_t pid, ppid;
	uint32_t origin; /* enum mt_origin */
	uint32_t parent_instance;
	uint32_t depth;
	/* 0: every block was recorded; else sampled mode's interval (docs/sampling.md): the
	 * host figures (bytes, blocks, allocations, frees) are estimates */
	uint64_t sampling;
	uint64_t start_time; /* ticks, like every time here (see mt_replay_clock) */
	uint64_t realtime;
	char *exe;     /* NUL-terminated copies */
	char *cmdline; /* arguments joined by spaces, for display */
	enum mt_end end;
	uint32_t exit_how, exit_status;
	char *exec_path;   /* ended by exec (see end): the program the EXEC record names */
	uint64_t end_time; /* the EXIT record's time, or the last record's */
	/*
	 * Where the program's own run ended: the moment of the exit's
	 * reachability scan (REACH), after which only memtrace worked (a scan
	 * of 100 MiB of blocks takes 50-150 ms, which the growth series and
	 * the steady phase must not take for a flat end of the program's);
	 * end_time without one. Set by mt_replay_run.
	 */
	uint64_t program_end;
	/*
	 * A ring (keyframes.h): the moment of the keyframe the replay started
	 * from; the figures of moments (samples, marks, growth, temporaries)
	 * are those from it on, the totals all-time. 0: the whole run.
	 */
	uint64_t window_start;
	uint64_t records; /* records of all kinds in this instance's chunks */
	uint64_t events;  /* ALLOC .. MREMAP records */
	uint64_t chunks;
	uint32_t threads;
	struct mt_kind_stats kind[MT_KIND_COUNT];
	uint64_t sample_count; /* SAMPLE records; the last one by time: */
	uint64_t sample_time;
	uint64_t sample[MT_SAMPLE_FIELD_COUNT];
	struct mt_sample_point *samples; /* every SAMPLE, in time order */
	uint64_t nsamples;
	struct mt_mark_point *marks; /* every MARK, in time order */
	uint32_t nmarks;
	struct mt_checkpoints checkpoints;
	struct mt_growth_series series;
	uint32_t marks_total; /* MARK records, counted by the first pass */
	/* During the record callback of a FREE: the size of the block it gave back, 0 if unknown
	 * (its own size, not a sampled block's weight). */
	uint64_t last_free_size;
	uint64_t lost_stack_events; /* LOST reason 1: events whose stack is 0 */
	int64_t stopped_errno;      /* LOST reason 2 */
	struct mt_fail_event *fails;
	uint32_t nfails;
	struct mt_module *modules;
	uint32_t nmodules;
	uint64_t stack_count;
	bool replayed;
	struct mt_instance_priv *priv;
};

/*
 * A live block or range. stack_instance names whose stack table `stack` is in.
 * In a sampled instance a host block's size and blocks are the estimate it
 * stands for (sampling.h); otherwise its size and 1.
 */
struct mt_block {
	uint64_t addr;
	uint64_t size;
	uint32_t stack;
	uint32_t stack_instance;
	enum mt_kind kind;
	uint32_t blocks;
	uint64_t own_size; /* the block's own bytes (size is a sampled block's weight) */
};

/* Figures of one (stack, kind) within an instance; peak_* is at that kind's peak. */
struct mt_stack_stats {
	uint32_t stack;
	uint32_t stack_instance;
	enum mt_kind kind;
	uint64_t allocations;
	uint64_t bytes_allocated;
	uint64_t live_bytes;
	uint64_t live_blocks;
	uint64_t peak_bytes;
	uint64_t peak_blocks;
	uint64_t epoch; /* internal: the peak generation peak_* was last brought up to */
	/*
	 * Least-squares sums of live_bytes (y) over the instance's growth
	 * checkpoints: t_* against x = ns since the first checkpoint (struct
	 * mt_checkpoints), m_* against the mark index 0, 1, ... Complete once
	 * the instance is replayed. first_bytes: y at the first checkpoint.
	 */
	uint64_t first_bytes;
	mt_u128 t_sy, t_sxy, t_syy;
	mt_u128 m_sy, m_sxy, m_syy;
	uint32_t t_synced, m_synced; /* internal: checkpoints and marks the sums include */
	/*
	 * The shape of the rise, over the instance's growth series (struct
	 * mt_growth_series): floor[w] is the least live_bytes at a position of
	 * window w, last the live bytes at the series' last position. Least, so
	 * that blocks freed within a step do not count, only what stays.
	 */
	uint64_t floor[MT_GROWTH_WINDOWS];
	uint64_t last;
	uint32_t g_synced; /* internal: positions of the series the floors include */
};

/* Host and mmap are always shown; another kind once something of it happened. */
static inline bool mt_kind_shown(const struct mt_instance *in, unsigned k)
{
	const struct mt_kind_stats *s = &in->kind[k];

	return k <= MT_KIND_MMAP || s->allocations || s->failed || s->unknown_frees ||
	       s->inherited_blocks;
}

/* "exit", "exec", "exec-untraced", "stopped" or "killed". */
const char *mt_end_name(enum mt_end end);

/*
 * The key of a block in the live set. Blocks of every kind but mmap live in
 * one map by address: host, pinned host and device addresses never overlap
 * (CUDA's unified addressing). The handles of the CUDA virtual-memory API
 * are not addresses: they get the top bit, which no user-space address has.
 */
static inline uint64_t mt_block_key(uint64_t fn, uint64_t addr)
{
	return fn == MT_FN_CU_MEM_CREATE || fn == MT_FN_CU_MEM_RELEASE ? addr | 1ull << 63 : addr;
}

struct mt_replay;

struct mt_replay_callbacks {
	/*
	 * Every record of an instance in replay order (PROCESS, MODULE, STACK
	 * included unless skip_definitions), after it was applied. Non-zero
	 * stops the replay and is returned by mt_replay_run().
	 */
	int (*record)(void *ctx, const struct mt_instance *in, const struct mt_record *rec);
	/* An instance is replayed; its live blocks can be walked with mt_replay_foreach_live()
	 * until it returns. */
	int (*instance_done)(void *ctx, struct mt_replay *r, const struct mt_instance *in);
	/*
	 * Optional: before each record is applied (each half of a realloc or
	 * mremap, at its own time), so that the figures are those of every
	 * moment before `time`. Non-zero stops the replay, as for record.
	 */
	int (*before)(void *ctx, const struct mt_instance *in, const struct mt_record *rec,
	              uint64_t time);
	/*
	 * Optional, for a callback on the hot path: the records a struct
	 * mt_event holds (nearly every ALLOC, FREE and REALLOC) come here
	 * instead of to record, with the index of the instance's thread
	 * (rec->thread). Not called while before is set.
	 */
	int (*event)(void *ctx, const struct mt_instance *in, const struct mt_event *ev,
	             uint32_t thread);
	/*
	 * Optional, with event: an ALLOC and the FREE of its block that is the
	 * instance's next event, both applied (last_free_size is the FREE's), come
	 * here instead of to event one by one, each with its thread. Without it,
	 * event gets each after it was applied.
	 */
	int (*pair)(void *ctx, const struct mt_instance *in, const struct mt_event *alloc,
	            uint32_t alloc_thread, const struct mt_event *free_ev, uint32_t free_thread);
	/*
	 * The stacks' definitions (STACK, PYSTACK, PYCODE), which the first pass
	 * took, not decoded again for record and before: a torch run's 702,000
	 * STACK records of 57 frames each.
	 */
	bool skip_definitions;
};

/* First pass. *out owns nothing of trace, which must outlive it. */
int mt_replay_open(struct mt_replay **out, const struct mt_trace *trace, struct mt_error *err);
/*
 * Where the second pass decodes: by default (AUTO) on a thread of its own
 * for an instance of 65,536 events or more where there are two cores or
 * more, given back when the replay waits for it too often (feed.c: on a
 * machine whose cores are all busy, two threads that wait for each other
 * are slower than one); tests choose either way, or a thread given back at
 * once (GIVEN_BACK).
 */
enum mt_replay_thread {
	MT_REPLAY_THREAD_AUTO,
	MT_REPLAY_THREAD_ALWAYS,
	MT_REPLAY_THREAD_NEVER,
	MT_REPLAY_THREAD_GIVEN_BACK,
};
void mt_replay_set_thread(struct mt_replay *r, enum mt_replay_thread how);
/* Second pass over all instances, parents before their forked children. */
int mt_replay_run(struct mt_replay *r, const struct mt_replay_callbacks *cb, void *ctx,
                  struct mt_error *err);
void mt_replay_free(struct mt_replay *r);

/* Instances in id order. */
uint32_t mt_replay_instance_count(const struct mt_replay *r);
const struct mt_instance *mt_replay_instance(const struct mt_replay *r, uint32_t index);
const struct mt_instance *mt_replay_find_instance(const struct mt_replay *r, uint32_t id);

/* Figures of the whole file, filled by the first pass. */
struct mt_trace_stats {
	uint64_t chunks, unused_chunks;
	uint64_t records, events, unknown_records;
};
const struct mt_trace_stats *mt_replay_trace_stats(const struct mt_replay *r);
/* A ring's consumer records as read (keyframes.h): ring is false for a trace without. */
struct mt_keyframes;
const struct mt_keyframes *mt_replay_keyframes(const struct mt_replay *r);
/* Ticks to ns for this trace: the chunk headers' pairs and every SAMPLE's. */
const struct mt_clock_fit *mt_replay_clock(const struct mt_replay *r);

/*
 * The return addresses of the instance's stacks, each frame of its frame
 * tree once (an address in several places of the tree more than once):
 * *n of them, valid and unchanged from the end of the first pass until the
 * replay is freed.
 */
const uint64_t *mt_replay_frames(const struct mt_instance *in, uint32_t *n);
/* The frames of a stack of instance `instance`, innermost first, into frames; -ENOENT if
 * unknown. */
int mt_replay_stack(const struct mt_replay *r, uint32_t instance, uint32_t id,
                    uint64_t frames[MT_MAX_DEPTH], uint32_t *n, uint32_t *gen);
/*
 * mt_replay_stack's frames as a walk of the instance's frame tree, which
 * also gives each frame's node: stacks with a frame of the same node have
 * the same frames from there out. -ENOENT for an unknown stack.
 */
int mt_replay_stack_walk(const struct mt_replay *r, uint32_t instance, uint32_t id,
                         struct mt_frame_walk *w);

/*
 * The Python frames of a stack, innermost first: its PYSTACK's (*n 0 when it
 * names none, or one the instance's PYSTACK records do not hold), and the
 * code object they name (pystacks.h): NULL for an id the instance's PYCODE
 * records do not describe. -ENOENT for an unknown stack.
 */
int mt_replay_pystack(const struct mt_replay *r, uint32_t instance, uint32_t id,
                      const struct mt_pyframe **frames, uint32_t *n);
struct mt_pycode;
const struct mt_pycode *mt_replay_pycode(const struct mt_replay *r, uint32_t instance,
                                         uint64_t code);

/* The live blocks of an instance, during its instance_done callback only. */
int mt_replay_foreach_live(struct mt_replay *r, const struct mt_instance *in,
                           int (*fn)(void *ctx, const struct mt_block *b), void *ctx);
/*
 * Per-stack figures of an instance during its instance_done callback (they
 * go after it, once its forked children are seeded); also during its record
 * callback, where live_* are current and peak_* may lag.
 */
int mt_replay_foreach_stack(struct mt_replay *r, const struct mt_instance *in,
                            int (*fn)(void *ctx, const struct mt_stack_stats *s), void *ctx);

/*
 * The ring's consumer (ring.c): the replay fed as the records come, with
 * no first pass. Instances are made and found by id (a pointer lasts until
 * the next instance is made); each record goes to mt_replay_stream_define
 * (what the first pass takes of it), each event half (ALLOC .. MREMAP, no
 * other record), in time order, to mt_replay_stream_apply once the
 * instance is begun (a forked child from
 * its parent's live set at that moment). mt_replay_foreach_live and
 * mt_replay_foreach_stack read the state; mt_replay_stream_peaks brings
 * the per-stack peak figures up to date first. Free with mt_replay_free.
 */
struct mt_replay *mt_replay_stream_new(const struct mt_trace *trace);
struct mt_instance *mt_replay_stream_instance(struct mt_replay *r, uint32_t id);
int mt_replay_stream_define(struct mt_replay *r, struct mt_instance *in,
                            const struct mt_record *rec);
int mt_replay_stream_begin(struct mt_instance *in, const struct mt_instance *parent);
bool mt_replay_stream_begun(const struct mt_instance *in);
int mt_replay_stream_apply(struct mt_instance *in, const struct mt_record *rec, int phase,
                           uint64_t key, bool *mremap_tracked);
/* mt_replay_stream_apply for an event the reader's fast path read (mt_cursor_next_fast). */
int mt_replay_stream_apply_event(struct mt_instance *in, const struct mt_event *ev, int phase,
                                 uint64_t key);
/*
 * An ALLOC and the FREE that is the instance's next event half, applied
 * together: 1, or 0 when they must go one by one to mt_replay_stream_apply_event
 * (nothing applied), < 0 an error.
 */
int mt_replay_stream_apply_pair(struct mt_instance *in, const struct mt_event *alloc,
                                const struct mt_event *free_ev);
void mt_replay_stream_peaks(struct mt_instance *in);
/* The items a keyframe of the instance would hold now: live blocks, ranges, stack figures. */
uint64_t mt_replay_stream_items(const struct mt_instance *in);
struct mt_instance *mt_replay_find_instance_mut(struct mt_replay *r, uint32_t id);
/* Whether a record is two-phase: a realloc or mremap that gives an old block back at t0. */
static inline bool mt_replay_two_phase(const struct mt_record *rec)
{
	return (rec->type == MT_REC_REALLOC && rec->u.realloc.old != 0) ||
	       (rec->type == MT_REC_MREMAP && rec->u.mremap.old_len != 0);
}

#endif
