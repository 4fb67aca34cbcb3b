/* SPDX-License-Identifier: MIT */
/*
 * The trace reader: maps a trace read-only, checks its file header, walks
 * its chunks and decodes records into struct mt_record
 * (docs/trace-format.md).
 *
 * It may not print, allocate per record, or trust a single byte of the
 * file: every length and count is checked against the chunk it lives in.
 * Errors are negative errno with struct mt_error naming the byte offset.
 * What a killed process leaves behind (a zero type byte, chunks claimed but
 * never written) is a clean end, not an error.
 */
#ifndef MEMTRACE_ANALYZER_READER_H
#define MEMTRACE_ANALYZER_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <memtrace/trace-format.h>

struct mt_error {
	uint64_t offset;   /* byte offset in the file of what is wrong */
	char message[192]; /* what is wrong, without the offset */
};

/*
 * Ticks to CLOCK_MONOTONIC ns: the straight line through the earliest and
 * the latest (ticks, ns) pair seen (chunk headers, SAMPLE records). With
 * clock 0 ticks are ns already. With one pair only, the rate is unknown and
 * taken as 1.
 */
struct mt_clock_fit {
	uint32_t clock; /* enum mt_clock */
	uint64_t pairs;
	uint64_t lo_ticks, lo_ns, hi_ticks, hi_ns;
};

void mt_clock_fit_add(struct mt_clock_fit *fit, uint64_t ticks, uint64_t ns);
uint64_t mt_clock_ns(const struct mt_clock_fit *fit, uint64_t ticks);

enum mt_slot_state {
	MT_SLOT_CHUNK, /* a chunk, whole in the file */
	MT_SLOT_CUT,   /* the file ends inside this chunk or its header */
	MT_SLOT_BAD,   /* not a chunk header: an error when read */
	/* a chunk whose records fail its checksum: read up to the first record that
	 * does not decode, and said */
	MT_SLOT_DAMAGED,
};

/* What mt_cursor_skim found of the event records it passed over (or the open's walk: see
 * mt_chunk_slot). */
struct mt_skim {
	uint64_t events;
	uint64_t first_time, last_time; /* the least and the greatest of their times */
	/* the latest of them by (time, offset), replay order */
	uint64_t latest_time, latest_offset;
};

struct mt_chunk_slot {
	uint64_t offset;
	uint32_t size; /* 0 when unknown */
	uint8_t state; /* enum mt_slot_state */
	/*
	 * Every record of the chunk is an event that mt_cursor_skim reads
	 * without the general decoder, and skim is what it would find: the
	 * open's checksum walk, which steps over every record anyway, took
	 * their times, and a first pass need not read the chunk again.
	 */
	bool skimmed;
	uint64_t seq; /* the chunk header's (version 4), else the slot's place in the file */
	struct mt_skim skim;
};

struct mt_trace {
	const uint8_t *data; /* the whole file */
	size_t size;
	bool mapped;                  /* data is our mmap (else the caller's memory) */
	struct mt_file_header header; /* a copy: a live writer may still change next_chunk */
	struct mt_clock_fit fit;      /* from the chunk headers (replay adds SAMPLE pairs) */
	struct mt_chunk_slot *slots;  /* the chunks in file order (reader.c, index_chunks) */
	uint64_t slot_count;
	uint64_t *by_seq;       /* slot indices in claim order: by seq, then by file offset */
	uint32_t chunk_header;  /* bytes of a chunk header: 48, or 40 in versions 2 and 3 */
	uint64_t chunk_count;   /* whole chunks present in the file */
	uint64_t unused_chunks; /* stretches claimed by writers that never wrote them */
	bool truncated;         /* the last slot is a chunk the file ends inside */
	/* the file ends before its writers had extended it (header `extended`,
	 * or inside a chunk): `missing` bytes are not there */
	bool cut;
	uint64_t missing;
	bool live;           /* writers of a running program hold the file (mt_reader_open only) */
	uint64_t damaged;    /* chunks that fail their checksum */
	uint64_t damaged_at; /* the first one's offset */
};

/* A chunk's header, decoded. */
struct mt_chunk {
	uint64_t index;
	uint64_t offset;
	uint32_t size;  /* bytes, header included */
	uint32_t avail; /* of them in the file: less than size for a chunk the file ends inside */
	bool damaged;   /* its records fail its checksum */
	uint32_t instance;
	uint32_t pid;
	uint32_t tid;
	uint64_t base_ticks; /* the time register's start */
	uint64_t base_ns;    /* CLOCK_MONOTONIC ns at base_ticks */
	uint64_t seq;        /* its claim's place in the run (struct mt_chunk_slot) */
};

/* A string or byte field: points into the mapped trace, no terminator. */
struct mt_bytes {
	const uint8_t *data;
	uint32_t len;
};
/* A copy of b with a terminating NUL (it may hold NULs of its own); NULL without memory. */
char *mt_bytes_dup(struct mt_bytes b);

/* A Python frame of a PYSTACK record (docs/trace-format.md). */
struct mt_pyframe {
	uint64_t code;  /* the PYCODE record's id; 0: a code object that could not be read */
	uint64_t lasti; /* as written: the current instruction's code unit + 1, 0 not started */
	bool entry;     /* the outermost frame of one interpreter activation */
};

struct mt_segment {
	uint64_t vaddr;
	uint64_t memsz;
	uint64_t flags;
};

/* A KEYFRAME's running totals of one memory kind (struct mt_kind_stats without the live set). */
struct mt_key_kind {
	uint64_t kind;
	uint64_t allocations, frees, bytes_allocated, peak_bytes, peak_blocks, peak_time, failed,
	        unknown_frees, inherited_bytes, inherited_blocks;
};

/* The items of a KEY_THREADS, KEY_BLOCKS, KEY_RANGES or KEY_STACKS record (mt_key_next). */
#define MT_KEY_FIELDS_MAX 7
enum mt_key_thread_field { MT_KT_TID, MT_KT_SEQ, MT_KT_OFFSET, MT_KT_PHASE, MT_KT_FIELDS };
enum mt_key_block_field {
	MT_KB_ADDR,
	MT_KB_SIZE,
	MT_KB_STACK,
	MT_KB_STACK_INSTANCE,
	MT_KB_KIND,
	MT_KB_BLOCKS,
	MT_KB_FIELDS
};
enum mt_key_range_field { MT_KR_ADDR, MT_KR_LEN, MT_KR_STACK, MT_KR_STACK_INSTANCE, MT_KR_FIELDS };
enum mt_key_stack_field {
	MT_KS_KIND,
	MT_KS_STACK_INSTANCE,
	MT_KS_STACK,
	MT_KS_ALLOCATIONS,
	MT_KS_BYTES_ALLOCATED,
	MT_KS_PEAK_BYTES,
	MT_KS_PEAK_BLOCKS,
	MT_KS_FIELDS
};

/* One decoded record; the union member follows `type`. */
struct mt_record {
	unsigned type;   /* enum mt_record_type, or an unknown type (payload skipped) */
	uint64_t offset; /* of the type byte in the file */
	uint32_t length; /* payload bytes */
	uint64_t time;   /* ticks: the time register after this record (t1 for realloc, mremap) */
	const struct mt_chunk *chunk;
	uint32_t thread; /* in a replay's callbacks: the index of the instance's thread; else 0 */
	union {
		struct {
			uint64_t pid, ppid, origin, parent_instance, realtime, depth;
			uint64_t sampling; /* 0: every block; else the interval T */
			struct mt_bytes exe, cmdline;
		} process;
		struct {
			uint64_t base;
			struct mt_bytes path, build_id;
			uint32_t nseg;
			struct mt_segment seg[MT_MAX_SEGMENTS];
		} module;
		struct {
			uint64_t base, gen;
		} module_gone;
		struct {
			uint64_t id, gen;
			uint32_t n;
			uint64_t frames[MT_MAX_DEPTH];
			uint64_t pystack; /* the PYSTACK record of its Python frames; 0: none */
		} stack;
		struct {
			uint64_t fn, addr, size, stack;
			uint64_t kind; /* enum mt_kind */
		} alloc;
		struct {
			uint64_t fn, addr;
			uint64_t kind;
		} free;
		struct {
			uint64_t t0, fn, old, addr, size, stack;
		} realloc;
		struct {
			uint64_t fn, size, stack, err;
			uint64_t kind;
			uint64_t device_free, device_total; /* CUDA failures; 0 when unknown */
		} fail;
		struct {
			uint64_t fn, addr, len, prot, flags, stack;
		} mmap;
		struct {
			uint64_t addr, len;
		} munmap;
		struct {
			uint64_t t0, old, old_len, addr, len, stack;
		} mremap;
		struct {
			uint64_t ns; /* CLOCK_MONOTONIC ns at `time`: a clock pair */
			uint64_t n;  /* values in the record; only the first MT_SAMPLE_FIELD_COUNT
			                are kept */
			uint64_t values[MT_SAMPLE_FIELD_COUNT];
		} sample;
		struct {
			uint64_t how, status;
			uint64_t ns; /* CLOCK_MONOTONIC ns at the record's time; 0 if not written */
		} exit;
		struct {
			uint64_t reason, count;
		} lost;
		struct {
			struct mt_bytes label;
		} mark;
		struct {
			struct mt_bytes path; /* the program as the exec function was given it */
		} exec;
		struct {
			uint64_t id, version, first_line; /* version: major << 8 | minor */
			struct mt_bytes file, name;
			struct mt_bytes linetable; /* what the record keeps of it */
			uint64_t linetable_size;   /* the whole table's length */
		} pycode;
		struct {
			uint64_t id;
			uint32_t n; /* 1 to MT_MAX_PYFRAMES, innermost first */
			struct mt_pyframe frames[MT_MAX_PYFRAMES];
		} pystack;
		struct {
			uint64_t
			        time; /* the scan's moment in ticks (rec->time is the register's) */
			uint64_t status; /* enum mt_reach_status */
			uint64_t detail, blocks, bytes, scanned, ns;
			uint64_t chunks; /* trace chunks read back; 0 before 2026-11-26 */
		} reach;
		struct {
			uint64_t cls; /* enum mt_reach_class */
			uint64_t n;
			/* n zigzag address deltas, each checked to decode: read them with
			 * mt_reach_blocks_next */
			const uint8_t *addrs, *end;
		} reach_blocks;
		struct {
			uint64_t round; /* 0: the final keyframe of an instance that ended */
			uint64_t instance;
			uint64_t time;   /* ticks: every record half before it is in the keyframe */
			uint64_t events; /* events the keyframe holds */
			uint64_t nthreads, nblocks, nranges, nstacks; /* items of its parts */
			uint32_t nkinds;
			struct mt_key_kind kinds[MT_KIND_COUNT];
		} keyframe;
		struct {
			uint64_t n;
			uint32_t fields; /* each item's: MT_KT_FIELDS, MT_KB_FIELDS, ... */
			/* n items, each checked to decode: read them with mt_key_next */
			const uint8_t *items, *end;
		} key_items; /* KEY_THREADS, KEY_BLOCKS, KEY_RANGES, KEY_STACKS */
		struct {
			uint64_t instance, round;
		} key_end;
		struct {
			uint64_t round, time;
			uint64_t usable; /* the oldest round the file keeps every record after */
			uint64_t instances;
		} round;
		struct {
			uint64_t instance, seq; /* whose records, from which chunk */
		} copy;
	} u;
};

/*
 * The items of a KEY_* parts record in turn: *pos starts at
 * rec->u.key_items.items and v[] at zeros; each call fills v[0 ..
 * fields) (an address field, the first of blocks and ranges, is a delta on
 * the item before). False after the last.
 */
bool mt_key_next(const struct mt_record *rec, const uint8_t **pos, uint64_t v[MT_KEY_FIELDS_MAX]);

/*
 * The addresses of a REACH_BLOCKS record in turn: *pos starts at
 * rec->u.reach_blocks.addrs and *addr at 0; false after the last.
 */
bool mt_reach_blocks_next(const struct mt_record *rec, const uint8_t **pos, uint64_t *addr);

/*
 * The events that make up nearly every trace, ALLOC, FREE and REALLOC, in
 * 56 bytes, where a struct mt_record takes kilobytes: what a reader that
 * holds many of them at once keeps (mt_cursor_next_event).
 */
struct mt_event {
	uint64_t t0; /* REALLOC: when the call began (the old block is gone from then); else time */
	uint64_t time;   /* the record's time (t1) */
	uint64_t offset; /* of its type byte in the file */
	uint64_t addr;   /* the block: ALLOC's, FREE's, REALLOC's new one */
	uint64_t old;    /* REALLOC's old block */
	uint64_t size;   /* ALLOC, REALLOC */
	uint32_t stack;  /* ALLOC, REALLOC */
	uint8_t type;    /* MT_REC_ALLOC, MT_REC_FREE or MT_REC_REALLOC */
	uint8_t fn;
	uint8_t kind; /* ALLOC, FREE */
	uint8_t length;
};

/* Reads records of one chunk in file order. */
struct mt_cursor {
	const struct mt_trace *trace;
	struct mt_chunk chunk;
	const uint8_t *pos, *end;
	uint64_t time, addr, stack; /* the chunk's registers */
	bool done;
	/*
	 * Set by a caller that wants only the times of event records (a first
	 * pass over the file): their other fields are skipped by length, and
	 * the address register is then not kept.
	 */
	bool skim_events;
};

/* Maps path read-only and checks its header. */
int mt_reader_open(struct mt_trace *t, const char *path, struct mt_error *err);
/* The same over bytes the caller owns (tests, fuzzers); they must outlive t. */
int mt_reader_open_memory(struct mt_trace *t, const void *data, size_t size, struct mt_error *err);
void mt_reader_close(struct mt_trace *t);
/*
 * The file's bytes [offset, offset + len) are not needed again soon: their
 * pages, and the 64 KiB of pages on each side, leave the process (a mapped
 * file's pages are read back from the page cache if they are touched again),
 * so that what the reader's process holds does not grow with the trace it
 * reads.
 */
void mt_reader_release(const struct mt_trace *t, uint64_t offset, uint64_t len);
/*
 * For the command's SIGBUS handler (a mapped trace that shrank): on a
 * thread that helps the open walk its chunks, leaves the walk, whose chunk
 * the opening thread then reads and meets the fault itself; elsewhere,
 * returns.
 */
void mt_reader_fault(void *addr);

/*
 * Number of chunks to visit: the whole ones, plus a cut-off last one
 * whose mt_reader_chunk() reports the truncation.
 */
uint64_t mt_reader_chunk_slots(const struct mt_trace *t);
/*
 * The slot index of the i-th chunk in claim order. A thread's chunks are
 * in the order it wrote them this way; in file order too, but for a ring,
 * which puts a new chunk wherever an extent was given back.
 */
uint64_t mt_reader_slot_by_seq(const struct mt_trace *t, uint64_t i);
/* Decodes chunk header `index`: 1 in use (a chunk the file ends inside too: its records up
 * to the cut are read), 0 nothing readable (the file ends inside its header), < 0 error. */
int mt_reader_chunk(const struct mt_trace *t, uint64_t index, struct mt_chunk *out,
                    struct mt_error *err);

/* Positions c at the first record of chunk `index`; same returns as mt_reader_chunk. */
int mt_cursor_init(struct mt_cursor *c, const struct mt_trace *t, uint64_t index,
                   struct mt_error *err);
/* 1 and *rec filled, 0 at the end of the chunk's data, < 0 corrupt record. */
int mt_cursor_next(struct mt_cursor *c, struct mt_record *rec, struct mt_error *err);

/*
 * mt_cursor_next for a reader that keeps events compact: 2 with the record
 * in *ev when it is an ALLOC, FREE or REALLOC whose fields fit one (every
 * event a capture writes), 1 with any other in *rec; 0 and < 0 as
 * mt_cursor_next.
 */
int mt_cursor_next_event(struct mt_cursor *c, struct mt_event *ev, struct mt_record *rec,
                         struct mt_error *err);
/*
 * The first step of mt_cursor_next_event alone, for a reader that takes
 * many events in a row: true with the next record in *ev when it is an
 * event read whole without the general decoder (nearly every one); false,
 * with nothing of c changed, for anything else, which mt_cursor_next_event
 * then reads.
 */
bool mt_cursor_next_fast(struct mt_cursor *c, struct mt_event *ev);
/*
 * mt_cursor_next_fast for up to n events in a row into ev[0..]: how many
 * (0 when the next record is not one it reads), for a reader that takes a
 * thread's events in runs, without a call for each.
 */
size_t mt_cursor_next_events(struct mt_cursor *c, struct mt_event *ev, size_t n);
/*
 * mt_cursor_next_events for a merge of threads, into events `stride` bytes
 * apart from ev (each inside a larger unit): it stops after the first event
 * due at or after (key, offset) (a later time, or the same and an offset
 * not before), or that is a realloc of a block (old != 0), which it reads
 * and counts too, and says so in *stopped.
 */
size_t mt_cursor_next_events_due(struct mt_cursor *c, struct mt_event *ev, size_t stride, size_t n,
                                 uint64_t key, uint64_t offset, bool *stopped);
/* The record of an event, as mt_cursor_next gives it (rec->chunk is left alone). */
void mt_event_record(const struct mt_event *ev, struct mt_record *rec);

/*
 * Reads on over event records, taking only their times (a first pass: the
 * cursor is skim_events), up to the next record that is not an event: 1
 * with it in *rec, 0 at the end of the chunk's data, < 0 as mt_cursor_next.
 * Whatever it returns, the events passed over are in *s (its times mean
 * nothing while s->events is 0).
 */
int mt_cursor_skim(struct mt_cursor *c, struct mt_skim *s, struct mt_record *rec,
                   struct mt_error *err);

/* "ALLOC", "malloc", ... or NULL when unknown. */
const char *mt_record_name(unsigned type);
const char *mt_fn_name(uint64_t fn);
/* Events are what the replay counts: ALLOC to MREMAP. */
static inline bool mt_record_is_event(unsigned type)
{
	return type >= MT_REC_ALLOC && type <= MT_REC_MREMAP;
}
const char *mt_kind_name(unsigned kind); /* NULL for a value that is no kind */
int mt_kind_parse(const char *name);     /* the kind, or -EINVAL */
/* REACH's status ("done", "off", "no-memory", ...) and REACH_BLOCKS' class ("definite", ...):
 * NULL for a value that is none */
const char *mt_reach_status_name(uint64_t status);
const char *mt_reach_class_name(uint64_t cls);

#endif
