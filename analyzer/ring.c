/* SPDX-License-Identifier: MIT */
/*
 * The ring's consumer (see ring.h; the format: docs/trace-format.md, The
 * ring's records).
 *
 * Each poll reads the clock first, walks the file's extents for chunks it
 * has not seen, reads every record written since (the writers' type bytes
 * and checksums are release stores, so a record is whole once its type is
 * seen), and applies, per instance in time order (a k-way merge of its
 * threads), every record half whose time is before the poll's start less
 * a margin. A record whose time is older than that is taken to be written
 * by then: a writer stores a record right after it reads its time, so only
 * a thread stalled longer than the margin between the two could be late.
 *
 * A round of keyframes, one per instance begun, says for each thread where
 * its records resume (the records before that are applied), so a reader
 * that starts from it replays exactly the rest. The consumer gives back a
 * writer's chunk once it was wholly applied and final (its writer gave it
 * up, or its process ended) before the usable round was written, copying
 * its definitions first; and its own round chunks once two newer rounds
 * are whole. Round n names round n - 1 usable: the window a reader sees
 * holds the records since then.
 *
 * May not: write into a writer's chunk; give an extent back twice; keep
 * anything per event (memory: the replay's live sets, per block).
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grow.h"
#include "keyframes.h"
#include "map.h"
#include "memtrace/crc32c.h"
#include "memtrace/ring-claim.h"
#include "reader.h"
#include "replay.h"
#include "ring.h"

/*
 * Address space for the file's mapping, which never moves: this much, or by
 * halves down to RESERVE_MIN where less is to be had (ulimit -v, valgrind);
 * a file that grows past it stops the consumer (map_to), never the writers.
 */
#define RESERVE     (64ull << 30)
#define RESERVE_MIN (1ull << 30)
#define OWN_CHUNK   (64u * 1024) /* the consumer's chunks */
#define PAYLOAD_MAX (16u * 1024) /* a keyframe part's payload before another record starts */
#define MARGIN_NS   (100 * 1000000ull)
#define RUN         16 /* events a thread's cursor reads in a row (mt_cursor_next_events) */

enum { STREAM_KEEP = 1, STREAM_ROUNDS = 2 }; /* the consumer's chunk tids */

/* A writer's chunk the consumer knows (map by offset). */
struct chunk {
	uint64_t seq;
	uint32_t size, instance, tid;
	bool done;           /* wholly applied and final: waits to be given back */
	uint64_t held_round; /* the first round written after it was done; 0 none yet */
};

/* One writing thread: its chunks not yet wholly applied, in seq order, and its next record. */
struct thread {
	uint32_t instance, tid;
	uint64_t *chunks; /* offsets; chunks[0] is being read */
	size_t n, cap;
	uint64_t last_seq; /* the latest chunk wholly applied, + 1; 0 none */
	bool open;
	struct mt_cursor cur;
	bool have; /* the next record is read and not (wholly) applied */
	/* it is *ev (an event the reader's fast path read: nearly every one), else in rec */
	bool fast;
	const struct mt_event *ev;
	struct mt_record rec;
	/* the events read in a run: ev is run[next - 1], the rest follow it */
	struct mt_event run[RUN];
	uint32_t next, nrun;
	/* of the next record, whichever holds it */
	uint64_t offset, time;
	bool event, two_phase;
	int phase;
	uint64_t key;
	bool tracked;
};

/* One process instance's threads and what the merge needs of it. */
struct inst {
	uint32_t id;
	uint32_t *threads; /* indices into c->threads */
	uint32_t nthreads;
	size_t cap;
	uint64_t events; /* applied */
	bool dead;
};

/* A chunk of the consumer's own, being written. */
struct own {
	uint8_t *base, *pos, *end;
	uint64_t offset, time;
	uint32_t size;
	uint64_t round; /* STREAM_ROUNDS: the round it holds */
};

struct mt_ring {
	int fd;
	struct mt_file_header *header; /* read-write: the writers' atomics */
	uint8_t *data;                 /* the file, read-only, at a place that never moves */
	uint64_t reserve;              /* the address space data has */
	uint64_t mapped;
	struct mt_trace trace; /* data for the cursors */
	struct mt_replay *replay;
	struct mt_map chunks; /* offset -> struct chunk */
	struct thread *threads;
	uint32_t nthreads;
	size_t threads_cap;
	struct mt_map thread_of; /* instance << 32 | tid -> index */
	struct inst *insts;
	uint32_t ninsts;
	size_t insts_cap;
	struct mt_map inst_of; /* id -> index */
	uint64_t *done;        /* offsets of done chunks, in the order they were done */
	size_t ndone, done_cap;
	struct own keep, rounds;
	/* the round chunks written: offset << 12 | size class << 8 | round (an extent keeps
	 * its size: a chunk may be larger than OWN_CHUNK when that is what was free) */
	uint64_t *own_rounds;
	size_t nown, own_cap;
	uint64_t round, since_round;
	uint64_t keep_bytes;  /* stream 1's chunks: never given back */
	uint64_t done_bytes;  /* writers' chunks wholly applied, not yet given back */
	uint64_t round_bytes; /* the chunks the last round took (the one being written's so far) */
	uint64_t round_items; /* the items the last round's keyframes held */
	uint64_t margin_ticks;
	struct mt_ring_stats stats;
	uint8_t payload[PAYLOAD_MAX + 1024];
	size_t plen;
};

/* ---- time ---- */

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Now in the trace's ticks, read as the writers read them (preload/mt.h, mt_now). */
static uint64_t now_ticks(const struct mt_ring *c)
{
#if defined(__x86_64__)
	if (c->header->clock == MT_CLOCK_TSC) {
		uint32_t lo, hi;
		__asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
		return (uint64_t)hi << 32 | lo;
	}
#endif
	return mono_ns();
}

/* The margin in ticks: the clock against CLOCK_MONOTONIC over 20 ms. */
static void calibrate(struct mt_ring *c)
{
	uint64_t t0 = now_ticks(c), n0 = mono_ns(), t1, n1;
	struct timespec wait = {0, 20 * 1000000};

	if (c->header->clock != MT_CLOCK_TSC) {
		c->margin_ticks = MARGIN_NS;
		return;
	}
	nanosleep(&wait, NULL);
	t1 = now_ticks(c);
	n1 = mono_ns();
	c->margin_ticks =
	        n1 > n0 ? (uint64_t)((long double)(t1 - t0) * MARGIN_NS / (n1 - n0)) : MARGIN_NS;
}

/* ---- the file ---- */

static int map_to(struct mt_ring *c, uint64_t end)
{
	if (end <= c->mapped)
		return 0;
	if (end > c->reserve)
		return -EFBIG;
	if (mmap(c->data + c->mapped, end - c->mapped, PROT_READ, MAP_SHARED | MAP_FIXED, c->fd,
	         (off_t)c->mapped) == MAP_FAILED)
		return -errno;
	c->mapped = end;
	return 0;
}

int mt_ring_open(struct mt_ring **out, const char *path)
{
	struct mt_ring *c = calloc(1, sizeof(*c));
	void *p;
	int r;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (c->fd < 0) {
		r = -errno;
		free(c);
		return r;
	}
	p = mmap(NULL, MT_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	for (c->reserve = RESERVE;; c->reserve /= 2) {
		c->data = mmap(NULL, c->reserve, PROT_NONE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (c->data != MAP_FAILED || c->reserve == RESERVE_MIN)
			break;
	}
	if (p == MAP_FAILED || c->data == MAP_FAILED) {
		r = -errno;
		if (p != MAP_FAILED)
			munmap(p, MT_HEADER_SIZE);
		if (c->data != MAP_FAILED)
			munmap(c->data, c->reserve);
		close(c->fd);
		free(c);
		return r;
	}
	c->header = p;
	if (memcmp(c->header->magic, MT_FILE_MAGIC, 8) || c->header->version != MT_FORMAT_VERSION ||
	    !c->header->ring_size) {
		c->data = c->data ? c->data : NULL;
		mt_ring_close(c);
		return -EINVAL;
	}
	c->trace.data = c->data;
	c->trace.size = c->reserve;
	c->trace.header = *c->header;
	c->trace.chunk_header = sizeof(struct mt_chunk_header);
	c->replay = mt_replay_stream_new(&c->trace);
	mt_map_init(&c->chunks, sizeof(struct chunk));
	mt_map_init(&c->thread_of, sizeof(uint32_t));
	mt_map_init(&c->inst_of, sizeof(uint32_t));
	if (!c->replay) {
		mt_ring_close(c);
		return -ENOMEM;
	}
	calibrate(c);
	*out = c;
	return 0;
}

void mt_ring_close(struct mt_ring *c)
{
	if (!c)
		return;
	if (c->keep.base)
		munmap(c->keep.base, c->keep.size);
	if (c->rounds.base)
		munmap(c->rounds.base, c->rounds.size);
	for (uint32_t i = 0; i < c->nthreads; i++)
		free(c->threads[i].chunks);
	free(c->threads);
	for (uint32_t i = 0; i < c->ninsts; i++)
		free(c->insts[i].threads);
	free(c->insts);
	free(c->done);
	free(c->own_rounds);
	mt_map_free(&c->chunks);
	mt_map_free(&c->thread_of);
	mt_map_free(&c->inst_of);
	mt_replay_free(c->replay);
	if (c->data)
		munmap(c->data, c->reserve);
	if (c->header)
		munmap(c->header, MT_HEADER_SIZE);
	close(c->fd);
	free(c);
}

static uint64_t rss_anon_kib(void)
{
	char line[128];
	unsigned long long kib = 0;
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

void mt_ring_stats(const struct mt_ring *c, struct mt_ring_stats *s)
{
	*s = c->stats;
	s->keep_bytes = c->keep_bytes;
	s->round_bytes = c->round_bytes; /* the last round's: no round is being written here */
	s->rss_anon_kib = rss_anon_kib();
	s->overflow = atomic_load((_Atomic uint64_t *)&c->header->ring_overflow);
}

/* ---- extents: claimed and given back as the writers do (preload/writer.c) ---- */

/* Gives an extent back: zeros, its link, on its class's free stack. */
static int give_back(struct mt_ring *c, uint64_t off, uint32_t size)
{
	_Atomic uint64_t *head = (_Atomic uint64_t *)&c->header->free_head[mt_ring_class(size)];
	uint64_t unit = (off - c->header->header_size) / MT_CHUNK_UNIT + 1, h, link;

	if (fallocate(c->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, size) < 0)
		return -errno;
	h = atomic_load(head);
	do {
		link = h & 0xffffffffu;
		if (pwrite(c->fd, &link, sizeof(link), (off_t)(off + MT_FREE_LINK_OFFSET)) !=
		    (ssize_t)sizeof(link))
			return -EIO;
	} while (!atomic_compare_exchange_weak(head, &h, ((h >> 32) + 1) << 32 | unit));
	c->stats.released++;
	return 0;
}

static bool read_link(void *ctx, uint64_t off, uint64_t *link)
{
	return pread(*(int *)ctx, link, sizeof(*link), (off_t)(off + MT_FREE_LINK_OFFSET)) ==
	       (ssize_t)sizeof(*link);
}

/* ---- the consumer's own chunks ---- */

static void own_seal(struct own *o)
{
	struct mt_chunk_header *ch = (struct mt_chunk_header *)o->base;
	size_t hdr = sizeof(*ch);

	if (!o->base)
		return;
	atomic_store_explicit((_Atomic uint32_t *)&ch->crc32c,
	                      mt_crc32c(o->base + hdr, (size_t)(o->pos - o->base) - hdr),
	                      memory_order_release);
	munmap(o->base, o->size);
	o->base = NULL;
}

static int own_new(struct mt_ring *c, struct own *o, uint32_t tid)
{
	uint32_t size = OWN_CHUNK;
	uint64_t off = mt_ring_claim(c->header, &size, size, read_link, &c->fd), end = off + size;
	struct mt_chunk_header *ch;
	int r;

	own_seal(o);
	if ((r = posix_fallocate(c->fd, (off_t)off, size)) != 0)
		return -r;
	for (uint64_t e = atomic_load((_Atomic uint64_t *)&c->header->extended);
	     e < end &&
	     !atomic_compare_exchange_weak((_Atomic uint64_t *)&c->header->extended, &e, end);)
		;
	o->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, (off_t)off);
	if (o->base == MAP_FAILED) {
		o->base = NULL;
		return -errno;
	}
	o->offset = off;
	o->size = size;
	o->pos = o->base + sizeof(*ch);
	o->end = o->base + size;
	ch = (struct mt_chunk_header *)o->base;
	ch->instance = 0;
	ch->pid = (uint32_t)getpid();
	ch->tid = tid;
	ch->seq = atomic_fetch_add((_Atomic uint64_t *)&c->header->next_seq, 1);
	ch->base_ticks = o->time = now_ticks(c);
	ch->base_ns = mono_ns();
	ch->size = size;
	atomic_store_explicit((_Atomic uint32_t *)&ch->magic, MT_CHUNK_MAGIC, memory_order_release);
	if (tid == STREAM_ROUNDS) {
		if (mt_grow((void **)&c->own_rounds, &c->own_cap, c->nown + 1,
		            sizeof(*c->own_rounds)) < 0)
			return -ENOMEM;
		c->own_rounds[c->nown++] = off << 12 | mt_ring_class(size) << 8 | (c->round & 0xff);
		c->round_bytes += size;
	} else {
		c->keep_bytes += size;
	}
	return 0;
}

/* Payload building: the record is written by emit. */
static void put(struct mt_ring *c, uint64_t v)
{
	c->plen = (size_t)(mt_put_varint(c->payload + c->plen, v) - c->payload);
}

/* The payload as a record of `type` in stream o; its length as three padded bytes. */
static int emit(struct mt_ring *c, struct own *o, uint32_t tid, uint8_t type)
{
	size_t need = 4 + c->plen;
	uint8_t *rec;
	int r;

	if (!o->base || (size_t)(o->end - o->pos) < need + 1) {
		if ((r = own_new(c, o, tid)) < 0)
			return r;
	}
	rec = o->pos;
	memcpy(rec + 4, c->payload, c->plen);
	rec[1] = (uint8_t)(0x80 | (c->plen & 0x7f));
	rec[2] = (uint8_t)(0x80 | ((c->plen >> 7) & 0x7f));
	rec[3] = (uint8_t)((c->plen >> 14) & 0x7f);
	atomic_store_explicit((_Atomic uint8_t *)rec, type, memory_order_release);
	o->pos += need;
	c->plen = 0;
	return 0;
}

/* ---- instances and threads ---- */

static struct inst *inst_get(struct mt_ring *c, uint32_t id)
{
	uint32_t *idx;
	bool created;

	idx = mt_map_put(&c->inst_of, id, &created);
	if (!idx)
		return NULL;
	if (created) {
		if (mt_grow((void **)&c->insts, &c->insts_cap, c->ninsts + 1, sizeof(*c->insts)) <
		    0)
			return NULL;
		memset(&c->insts[c->ninsts], 0, sizeof(*c->insts));
		c->insts[c->ninsts].id = id;
		if (!mt_replay_stream_instance(c->replay, id))
			return NULL;
		*idx = c->ninsts++;
	}
	return &c->insts[*idx];
}

static struct thread *thread_get(struct mt_ring *c, uint32_t instance, uint32_t tid)
{
	uint32_t *idx;
	struct inst *in;
	bool created;

	idx = mt_map_put(&c->thread_of, (uint64_t)instance << 32 | tid, &created);
	if (!idx)
		return NULL;
	if (!created)
		return &c->threads[*idx];
	in = inst_get(c, instance);
	if (!in)
		return NULL;
	if (mt_grow((void **)&c->threads, &c->threads_cap, c->nthreads + 1, sizeof(*c->threads)) <
	            0 ||
	    mt_grow((void **)&in->threads, &in->cap, in->nthreads + 1, sizeof(*in->threads)) < 0)
		return NULL;
	memset(&c->threads[c->nthreads], 0, sizeof(*c->threads));
	c->threads[c->nthreads].instance = instance;
	c->threads[c->nthreads].tid = tid;
	in->threads[in->nthreads++] = c->nthreads;
	*idx = c->nthreads++;
	return &c->threads[*idx];
}

/* A chunk found in the walk: into its thread's list, in seq order. */
static int add_chunk(struct mt_ring *c, uint64_t off, const struct mt_chunk_header *h)
{
	struct thread *t = thread_get(c, h->instance, h->tid);
	struct chunk *ch;
	bool created;
	size_t i;

	if (!t)
		return -ENOMEM;
	ch = mt_map_put(&c->chunks, off, &created);
	if (!ch)
		return -ENOMEM;
	*ch = (struct chunk){h->seq, h->size, h->instance, h->tid, false, 0};
	if (mt_grow((void **)&t->chunks, &t->cap, t->n + 1, sizeof(*t->chunks)) < 0)
		return -ENOMEM;
	for (i = t->n; i > (t->open ? 1u : 0u); i--) {
		const struct chunk *prev = mt_map_get(&c->chunks, t->chunks[i - 1]);
		if (prev->seq < h->seq)
			break;
		t->chunks[i] = t->chunks[i - 1];
	}
	t->chunks[i] = off;
	t->n++;
	return 0;
}

/* New chunks: every extent from the header to where the writers extended the file. */
static int walk(struct mt_ring *c, uint64_t end)
{
	uint64_t off = c->header->header_size;
	int r;

	while (off + sizeof(struct mt_chunk_header) <= end) {
		const struct mt_chunk_header *h = (const void *)(c->data + off);
		uint32_t magic =
		        atomic_load_explicit((_Atomic uint32_t *)&h->magic, memory_order_acquire);
		const struct chunk *known;

		if (magic != MT_CHUNK_MAGIC || h->size < MT_CHUNK_UNIT || h->size % MT_CHUNK_UNIT ||
		    off + h->size > end) {
			off += MT_CHUNK_UNIT; /* free, claimed and not yet written, or not whole yet
			                       */
			continue;
		}
		known = mt_map_get(&c->chunks, off);
		if (h->instance != 0 && (!known || known->seq != h->seq)) {
			if (known)
				mt_map_del(&c->chunks, off); /* given back and written again */
			if ((r = add_chunk(c, off, h)) < 0)
				return r;
		}
		off += h->size;
	}
	return 0;
}

/* ---- reading ---- */

static bool process_gone(const struct mt_instance *in)
{
	return in && in->pid && kill((pid_t)in->pid, 0) < 0 && errno == ESRCH;
}

/* The chunk's last records are all there: its writer gave it up, or its process ended. */
static bool chunk_final(const struct mt_ring *c, uint64_t off, bool ended, const struct inst *in)
{
	const struct mt_chunk_header *h = (const void *)(c->data + off);

	return ended || in->dead ||
	       atomic_load_explicit((_Atomic uint32_t *)&h->crc32c, memory_order_acquire) != 0;
}

static void open_chunk(struct mt_ring *c, struct thread *t)
{
	uint64_t off = t->chunks[0];
	const struct mt_chunk_header *h = (const void *)(c->data + off);

	memset(&t->cur, 0, sizeof(t->cur));
	t->cur.trace = &c->trace;
	t->cur.chunk = (struct mt_chunk){.offset = off,
	                                 .size = h->size,
	                                 .avail = h->size,
	                                 .instance = h->instance,
	                                 .pid = h->pid,
	                                 .tid = h->tid,
	                                 .base_ticks = h->base_ticks,
	                                 .base_ns = h->base_ns,
	                                 .seq = h->seq};
	t->cur.pos = c->data + off + sizeof(*h);
	t->cur.end = c->data + off + h->size;
	t->cur.time = h->base_ticks;
	t->open = true;
}

/* A chunk wholly applied: it waits for a round to hold it. */
static int chunk_done(struct mt_ring *c, struct thread *t)
{
	struct chunk *ch = mt_map_get(&c->chunks, t->chunks[0]);

	ch->done = true;
	t->last_seq = ch->seq + 1;
	c->since_round += ch->size;
	c->done_bytes += ch->size;
	if (mt_grow((void **)&c->done, &c->done_cap, c->ndone + 1, sizeof(*c->done)) < 0)
		return -ENOMEM;
	c->done[c->ndone++] = t->chunks[0];
	memmove(t->chunks, t->chunks + 1, (t->n - 1) * sizeof(*t->chunks));
	t->n--;
	t->open = false;
	return 0;
}

/* The next record is the run's next event: what the merge needs of it. */
static inline void took_event(struct thread *t)
{
	const struct mt_event *ev = &t->run[t->next++];

	t->ev = ev;
	t->have = t->fast = t->event = true;
	t->offset = ev->offset;
	t->time = ev->time;
	t->two_phase = ev->type == MT_REC_REALLOC && ev->old != 0;
	t->phase = !t->two_phase;
	t->key = t->two_phase ? ev->t0 : ev->time;
}

/* A run of events from the thread's open chunk: false when its next record is not one. */
static inline bool read_run(struct thread *t)
{
	t->cur.done = false;
	t->next = 0;
	t->nrun = (uint32_t)mt_cursor_next_events(&t->cur, t->run, RUN);
	return t->nrun != 0;
}

/* fill for a thread whose chunk is not open, or whose next record the fast path does not read. */
static int fill_slow(struct mt_ring *c, struct thread *t, const struct inst *in, bool ended)
{
	struct mt_error err;
	int r;

	while (!t->have) {
		if (!t->open) {
			if (!t->n)
				return 0;
			open_chunk(c, t);
		}
		if (read_run(t)) {
			took_event(t);
			break;
		}
		r = mt_cursor_next(&t->cur, &t->rec, &err);
		if (r == 0 && chunk_final(c, t->chunks[0], ended, in)) {
			/* the records stored before its checksum are seen now: read once more */
			t->cur.done = false;
			r = mt_cursor_next(&t->cur, &t->rec, &err);
			if (r == 0 && (r = chunk_done(c, t)) == 0)
				continue;
		}
		if (r < 0 && chunk_final(c, t->chunks[0], ended, in)) {
			/* a record that does not decode ends a final chunk, as the reader takes it
			 */
			if ((r = chunk_done(c, t)) < 0)
				return r;
			continue;
		}
		if (r <= 0)
			return 0; /* not written yet (or damaged: it stays, and the file grows) */
		/* what the first pass takes of how the instance starts and ends; not the
		 * stacks, modules and code objects (the reader has them from the trace) */
		if ((t->rec.type == MT_REC_PROCESS || t->rec.type == MT_REC_EXIT ||
		     t->rec.type == MT_REC_EXEC || t->rec.type == MT_REC_LOST) &&
		    (r = mt_replay_stream_define(
		             c->replay, mt_replay_find_instance_mut(c->replay, t->instance),
		             &t->rec)) < 0)
			return r;
		t->have = true;
		t->fast = false;
		t->event = mt_record_is_event(t->rec.type);
		t->offset = t->rec.offset;
		t->time = t->rec.time;
		t->two_phase = mt_replay_two_phase(&t->rec);
		t->phase = !t->two_phase;
		t->key = t->phase ? t->rec.time
		                  : (t->rec.type == MT_REC_REALLOC ? t->rec.u.realloc.t0
		                                                   : t->rec.u.mremap.t0);
	}
	return 1;
}

/*
 * The thread's next record: 1, 0 none yet, < 0 error. Events come inline
 * from runs the reader's fast path read, with no copy into a struct
 * mt_record: decoding was a third of the consumer's instructions. A thread
 * without its next record has no run left (fill takes from it first).
 */
static inline int fill(struct mt_ring *c, struct thread *t, const struct inst *in, bool ended)
{
	if (t->next < t->nrun || (t->open && read_run(t))) {
		took_event(t);
		return 1;
	}
	return fill_slow(c, t, in, ended);
}

/* ---- applying ---- */

static bool earlier(const struct thread *a, const struct thread *b)
{
	if (a->key != b->key)
		return a->key < b->key;
	if (a->offset != b->offset)
		return a->offset < b->offset;
	return a->phase < b->phase;
}

/*
 * The thread's next event is an ALLOC whose FREE follows it in its run and
 * is the instance's next event half too (before the next thread's, before
 * w, and no child seeded before it): both applied at once when the replay
 * can (mt_replay_stream_apply_pair), the FREE taken from the run. 1 applied,
 * 0 not (nothing done), < 0 error. Most allocations of many programs are
 * such temporaries, and their live set's put and take were the dearest part
 * of an event.
 */
static inline int try_pair(struct mt_instance *in, struct thread *t, const struct thread *second,
                           uint64_t w, uint64_t next_child)
{
	const struct mt_event *f = &t->run[t->next];
	int r;

	if (t->ev->type != MT_REC_ALLOC || t->next >= t->nrun || f->addr != t->ev->addr ||
	    f->type != MT_REC_FREE || f->time >= w || f->time > next_child ||
	    (second &&
	     (second->key < f->time || (second->key == f->time && second->offset < f->offset))))
		return 0;
	if ((r = mt_replay_stream_apply_pair(in, t->ev, f)) > 0)
		t->next++;
	return r;
}

/*
 * Forked children of instance id not begun whose start is before `before`:
 * seeded now. The earliest start of those left waits in *next.
 */
static int seed_children(struct mt_ring *c, uint32_t id, uint64_t before, uint64_t *next)
{
	const struct mt_instance *parent = mt_replay_find_instance(c->replay, id);

	*next = UINT64_MAX;
	for (uint32_t i = 0; i < c->ninsts; i++) {
		struct mt_instance *ch = mt_replay_find_instance_mut(c->replay, c->insts[i].id);
		int r;
		if (!ch || mt_replay_stream_begun(ch) || !ch->have_process ||
		    ch->origin != MT_ORIGIN_FORK || ch->parent_instance != id)
			continue;
		if (ch->start_time >= before) {
			*next = ch->start_time < *next ? ch->start_time : *next;
			continue;
		}
		if ((r = mt_replay_stream_begin(ch, parent)) < 0)
			return r;
	}
	return 0;
}

/*
 * The earliest thread *best passed *second, and only it moved since the look
 * at every thread (every: each had its next record; third: the earliest of
 * the rest): second is the earliest now, and best the next unless the third
 * is earlier. true with the two swapped when the merge goes on without
 * another look (two threads that take turns, the most common, never look at
 * the rest), false for a look.
 */
static inline bool turn(struct thread **best, struct thread **second, const struct thread *third,
                        bool every, uint64_t w)
{
	struct thread *t = *best;

	if (!every || (third && earlier(third, t)) || (*second)->key >= w)
		return false;
	*best = *second;
	*second = t;
	return true;
}

/* Every record half of an instance before w, in time order. */
static int merge(struct mt_ring *c, struct inst *ci, uint64_t w, bool ended)
{
	struct mt_instance *in = mt_replay_find_instance_mut(c->replay, ci->id);
	uint64_t next_child = 0;
	int r;

	if (!in || !in->have_process)
		return 0; /* its PROCESS, the first record it writes, is not here yet */
	if (!mt_replay_stream_begun(in)) {
		if (in->origin == MT_ORIGIN_FORK &&
		    mt_replay_find_instance(c->replay, in->parent_instance))
			return 0; /* its parent's merge seeds it */
		if ((r = mt_replay_stream_begin(in, NULL)) < 0)
			return r;
	}
	for (;;) {
		struct thread *best = NULL, *second = NULL, *third = NULL;
		bool every = true; /* every thread has its next record */
		for (uint32_t i = 0; i < ci->nthreads; i++) {
			struct thread *t = &c->threads[ci->threads[i]];
			if (!t->have && (r = fill(c, t, ci, ended)) < 0)
				return r;
			if (!t->have) {
				every = false;
				continue;
			}
			if (!best || earlier(t, best)) {
				third = second;
				second = best;
				best = t;
			} else if (!second || earlier(t, second)) {
				third = second;
				second = t;
			} else if (!third || earlier(t, third)) {
				third = t;
			}
		}
		if (!best || best->key >= w)
			break;
		/* the earliest thread runs on until it passes the next one: no look at every
		 * thread for each record (a thread with nothing yet is looked at again then: what
		 * it writes now is past w, but for a stalled writer's, which may come late) */
		while (best->have && best->key < w &&
		       (!second || earlier(best, second) ||
		        turn(&best, &second, third, every, w))) {
			/* instances are made only by walk(): the pointer holds through the merge */
			if (best->key > next_child &&
			    (r = seed_children(c, ci->id, best->key, &next_child)) < 0)
				return r;
			if (best->fast && (r = try_pair(in, best, second, w, next_child)) != 0) {
				if (r < 0)
					return r;
				ci->events += 2;
				best->have = false;
				if ((r = fill(c, best, ci, ended)) < 0)
					return r;
				continue;
			}
			/* events only: a sample or a mark is a moment's, which the consumer does
			 * not keep */
			r = best->fast    ? mt_replay_stream_apply_event(in, best->ev, best->phase,
			                                                 best->key)
			    : best->event ? mt_replay_stream_apply(in, &best->rec, best->phase,
			                                           best->key, &best->tracked)
			                  : 0;
			if (r < 0)
				return r;
			if (best->phase == 0) {
				best->phase = 1;
				best->key = best->time;
				continue;
			}
			ci->events += best->event;
			best->have = false;
			if ((r = fill(c, best, ci, ended)) < 0)
				return r;
		}
	}
	return seed_children(c, ci->id, w, &next_child);
}

/* ---- keyframes ---- */

struct kf_writer {
	struct mt_ring *c;
	uint8_t type;
	uint32_t n; /* items in the payload, after its count's room */
	uint64_t prev_addr;
	uint64_t count;
	int err;
};

/* Items go into records of at most PAYLOAD_MAX bytes: n, then the items. */
static int kf_flush(struct kf_writer *k)
{
	struct mt_ring *c = k->c;
	uint8_t items[PAYLOAD_MAX + 512];
	size_t len = c->plen;
	int r;

	if (!k->n)
		return 0;
	memcpy(items, c->payload, len);
	c->plen = 0;
	put(c, k->n);
	memcpy(c->payload + c->plen, items, len);
	c->plen += len;
	r = emit(c, &c->rounds, STREAM_ROUNDS, k->type);
	k->n = 0;
	k->prev_addr = 0;
	return r;
}

static int kf_item(struct kf_writer *k, const uint64_t *v, unsigned fields, bool delta)
{
	for (unsigned f = 0; f < fields; f++) {
		uint64_t x = v[f];
		if (f == 0 && delta) {
			x = mt_zigzag((int64_t)(v[0] - k->prev_addr));
			k->prev_addr = v[0];
		}
		put(k->c, x);
	}
	k->n++;
	k->count++;
	return k->c->plen >= PAYLOAD_MAX ? kf_flush(k) : 0;
}

static int count_block(void *ctx, const struct mt_block *b)
{
	uint64_t *n = ctx;

	n[b->kind == MT_KIND_MMAP]++;
	return 0;
}

static int count_stack(void *ctx, const struct mt_stack_stats *s)
{
	(void)s;
	(*(uint64_t *)ctx)++;
	return 0;
}

static int block_item(void *ctx, const struct mt_block *b)
{
	struct kf_writer *k = ctx;
	bool range = k->type == MT_REC_KEY_RANGES;

	if ((b->kind == MT_KIND_MMAP) != range)
		return 0;
	if (range) {
		const uint64_t v[MT_KR_FIELDS] = {b->addr, b->size, b->stack, b->stack_instance};
		return kf_item(k, v, MT_KR_FIELDS, true);
	}
	/* size: the block's own, not a sampled block's weight (the reader weighs it again) */
	const uint64_t v[MT_KB_FIELDS] = {b->addr,           b->own_size, b->stack,
	                                  b->stack_instance, b->kind,     b->blocks};
	return kf_item(k, v, MT_KB_FIELDS, true);
}

static int stack_item(void *ctx, const struct mt_stack_stats *s)
{
	const uint64_t v[MT_KS_FIELDS] = {s->kind,        s->stack_instance,  s->stack,
	                                  s->allocations, s->bytes_allocated, s->peak_bytes,
	                                  s->peak_blocks};

	return kf_item(ctx, v, MT_KS_FIELDS, false);
}

/* Where a thread's records resume: its next record, or the end of what it wrote. */
static void resume_point(const struct mt_ring *c, const struct thread *t, uint64_t v[4])
{
	v[MT_KT_TID] = t->tid;
	v[MT_KT_PHASE] = 0;
	if (t->have) {
		v[MT_KT_SEQ] = t->cur.chunk.seq;
		v[MT_KT_OFFSET] = t->offset - t->cur.chunk.offset;
		v[MT_KT_PHASE] = t->phase == 1 && t->two_phase;
	} else if (t->open) {
		v[MT_KT_SEQ] = t->cur.chunk.seq;
		v[MT_KT_OFFSET] = (uint64_t)(t->cur.pos - c->data) - t->cur.chunk.offset;
	} else {
		v[MT_KT_SEQ] = t->last_seq; /* every chunk before it is applied */
		v[MT_KT_OFFSET] = 0;
	}
}

/* One instance's keyframe at w into the round's stream. */
static int keyframe(struct mt_ring *c, struct inst *ci, uint64_t w)
{
	struct mt_instance *in = mt_replay_find_instance_mut(c->replay, ci->id);
	struct kf_writer k = {.c = c};
	uint64_t blocks[2] = {0, 0}, nstacks = 0, nkinds = 0;
	int r;

	mt_replay_stream_peaks(in);
	mt_replay_foreach_live(c->replay, in, count_block, blocks);
	mt_replay_foreach_stack(c->replay, in, count_stack, &nstacks);
	for (unsigned kind = 0; kind < MT_KIND_COUNT; kind++)
		nkinds += mt_kind_shown(in, kind);
	put(c, c->round);
	put(c, ci->id);
	put(c, w);
	put(c, ci->events);
	put(c, ci->nthreads);
	put(c, blocks[0]);
	put(c, blocks[1]);
	put(c, nstacks);
	put(c, nkinds);
	for (unsigned kind = 0; kind < MT_KIND_COUNT; kind++) {
		const struct mt_kind_stats *s = &in->kind[kind];
		if (!mt_kind_shown(in, kind))
			continue;
		const uint64_t v[] = {kind,
		                      s->allocations,
		                      s->frees,
		                      s->bytes_allocated,
		                      s->peak_bytes,
		                      s->peak_blocks,
		                      s->peak_time,
		                      s->failed,
		                      s->unknown_frees,
		                      s->inherited_bytes,
		                      s->inherited_blocks};
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			put(c, v[i]);
	}
	if ((r = emit(c, &c->rounds, STREAM_ROUNDS, MT_REC_KEYFRAME)) < 0)
		return r;
	k.type = MT_REC_KEY_THREADS;
	for (uint32_t i = 0; i < ci->nthreads && r == 0; i++) {
		uint64_t v[4];
		resume_point(c, &c->threads[ci->threads[i]], v);
		r = kf_item(&k, v, MT_KT_FIELDS, false);
	}
	if (r == 0)
		r = kf_flush(&k);
	for (uint8_t type = MT_REC_KEY_BLOCKS; type <= MT_REC_KEY_RANGES && r == 0; type++) {
		k.type = type;
		r = mt_replay_foreach_live(c->replay, in, block_item, &k);
		if (r == 0)
			r = kf_flush(&k);
	}
	k.type = MT_REC_KEY_STACKS;
	if (r == 0)
		r = mt_replay_foreach_stack(c->replay, in, stack_item, &k);
	if (r == 0)
		r = kf_flush(&k);
	if (r < 0)
		return r;
	put(c, ci->id);
	put(c, c->round);
	return emit(c, &c->rounds, STREAM_ROUNDS, MT_REC_KEY_END);
}

/* ---- giving back ---- */

/* Re-encodes a record whose first field is its time (`dt`) on the keep stream's register. */
static bool timed(unsigned type)
{
	return type == MT_REC_PROCESS || type == MT_REC_MODULE || type == MT_REC_MODULE_GONE ||
	       type == MT_REC_EXIT || type == MT_REC_EXEC;
}

/* Copies what any window needs of a chunk (keyframes.c, mt_key_is_definition) to stream 1. */
static int copy_definitions(struct mt_ring *c, uint64_t off, const struct chunk *ch)
{
	struct thread tmp = {.chunks = &off, .n = 1};
	struct mt_record *rec = &tmp.rec;
	struct mt_error err;
	bool said = false;
	int r;

	open_chunk(c, &tmp);
	while (mt_cursor_next(&tmp.cur, rec, &err) > 0) {
		const uint8_t *p = c->data + rec->offset + 1, *payload;
		uint64_t len = 0, dt = 0;
		if (!mt_key_is_definition(rec->type))
			continue;
		if (!said) {
			put(c, ch->instance);
			put(c, ch->seq);
			if ((r = emit(c, &c->keep, STREAM_KEEP, MT_REC_COPY)) < 0)
				return r;
			said = true;
		}
		mt_get_varint(&p, tmp.cur.end, &len);
		payload = p;
		if (timed(rec->type)) {
			mt_get_varint(&p, payload + len, &dt);
			/* the keep chunk's register: emit may start a new chunk, at its own base */
			if (!c->keep.base || (size_t)(c->keep.end - c->keep.pos) < 4 + len + 16)
				if ((r = own_new(c, &c->keep, STREAM_KEEP)) < 0)
					return r;
			put(c, mt_zigzag((int64_t)(rec->time - c->keep.time)));
			c->keep.time = rec->time;
			len -= (uint64_t)(p - payload);
			payload = p;
		}
		if (len > PAYLOAD_MAX + 512 - c->plen)
			continue; /* no definition is this long (a PYCODE is at most 9 KiB) */
		memcpy(c->payload + c->plen, payload, len);
		c->plen += len;
		if ((r = emit(c, &c->keep, STREAM_KEEP, (uint8_t)rec->type)) < 0)
			return r;
	}
	return 0;
}

/* After round n: the chunks round n - 1 holds, and round n - 2's own chunks, are given back. */
static int release(struct mt_ring *c)
{
	size_t kept = 0;
	int r;

	for (size_t i = 0; i < c->ndone; i++) {
		uint64_t off = c->done[i];
		struct chunk *ch = mt_map_get(&c->chunks, off);
		if (!ch->held_round)
			ch->held_round = c->round;
		if (ch->held_round + 1 > c->round) {
			c->done[kept++] = off;
			continue;
		}
		if ((r = copy_definitions(c, off, ch)) < 0)
			return r;
		if ((r = give_back(c, off, ch->size)) < 0)
			return r;
		c->done_bytes -= ch->size;
		mt_map_del(&c->chunks, off);
	}
	/* the keep stream's chunk stays open until it is full: sealed each round, its rest
	 * would be lost each round, and the stream would grow with time, not with stacks */
	c->ndone = kept;
	kept = 0;
	for (size_t i = 0; i < c->nown; i++) {
		uint64_t off = c->own_rounds[i] >> 12, round = c->own_rounds[i] & 0xff;
		uint32_t size = MT_CHUNK_SIZE_FIRST << (c->own_rounds[i] >> 8 & 0xf);
		if (((c->round - round) & 0xff) < 2) {
			c->own_rounds[kept++] = c->own_rounds[i];
			continue;
		}
		if ((r = give_back(c, off, size)) < 0)
			return r;
	}
	c->nown = kept;
	return 0;
}

/* The items the keyframes of a round at this moment would hold. */
static uint64_t round_items(struct mt_ring *c)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < c->ninsts; i++) {
		const struct mt_instance *in = mt_replay_find_instance(c->replay, c->insts[i].id);
		if (in && mt_replay_stream_begun(in))
			n += mt_replay_stream_items(in);
	}
	return n;
}

/*
 * Whether the ring needs a round now. Just before round n + 2 is whole the
 * file holds the kept definitions, rounds n and n + 1 and the one being
 * written, the writers' chunks done since round n (those done before were
 * given back after round n + 1) and those not yet done. A round comes when
 * the records of a late poll or two (a margin of 1/16 of the ring) would
 * leave no room for the next, and when the chunks done since the last
 * round are half of what the rest leaves: stretches between rounds stay
 * even, so that what a round gives back makes room for the next. At most
 * a quarter of the ring, so that a consumer late by a stretch still fits.
 * The next round's size is the last's per item (16 bytes before the
 * first), its items now, and a chunk. At least half a round and 1/64 of
 * the ring between rounds (never twice as many keyframe bytes as event
 * bytes): a ring too small for what it keeps grows past its size, and
 * says what would have held it.
 */
static bool round_due(struct mt_ring *c)
{
	uint64_t size = c->header->ring_size, items = round_items(c);
	uint64_t per = c->round_items ? (c->round_bytes + c->round_items - 1) / c->round_items : 16;
	uint64_t round = per * items + OWN_CHUNK, least, rest;
	uint64_t held = c->keep_bytes + OWN_CHUNK + 3 * round + size / 16;

	for (uint32_t i = 0; i < c->nthreads; i++)
		for (size_t j = 0; j < c->threads[i].n; j++)
			held += ((const struct chunk *)mt_map_get(&c->chunks,
			                                          c->threads[i].chunks[j]))
			                ->size;
	least = round / 2 > size / 64 ? round / 2 : size / 64;
	/* of a ring too small, the size that would hold the rest with stretches of an eighth
	 * of it and its own margin: x = rest + x / 16 + x / 4 */
	if (held + 2 * least > size && c->stats.needed < (held - size / 16) * 16 / 11)
		c->stats.needed = (held - size / 16) * 16 / 11;
	if (c->since_round < least)
		return false;
	rest = held < size ? size - held : 0;
	return c->since_round >= size / 4 || 2 * c->since_round >= rest ||
	       held + c->done_bytes >= size;
}

/* A round: every begun instance's keyframe at w, then ROUND, then what it frees. */
static int round_at(struct mt_ring *c, uint64_t w)
{
	uint64_t n = 0, items = round_items(c);
	int r;

	c->round++;
	own_seal(&c->rounds); /* a round's chunks are its own, given back together */
	c->round_bytes = 0;
	for (uint32_t i = 0; i < c->ninsts; i++) {
		const struct mt_instance *in = mt_replay_find_instance(c->replay, c->insts[i].id);
		if (!in || !mt_replay_stream_begun(in))
			continue;
		if ((r = keyframe(c, &c->insts[i], w)) < 0)
			return r;
		n++;
	}
	put(c, c->round);
	put(c, w);
	put(c, c->round > 1 ? c->round - 1 : 1);
	put(c, n);
	if ((r = emit(c, &c->rounds, STREAM_ROUNDS, MT_REC_ROUND)) < 0)
		return r;
	own_seal(&c->rounds);
	c->stats.rounds++;
	c->round_items = items;
	c->since_round = 0;
	/* what the tables left as they doubled since is free heap: the system gets its pages */
	malloc_trim(0);
	return release(c);
}

int mt_ring_poll(struct mt_ring *c, bool ended)
{
	uint64_t start = now_ticks(c), w = start > c->margin_ticks ? start - c->margin_ticks : 0;
	uint64_t end = atomic_load((_Atomic uint64_t *)&c->header->extended);
	int r;

	if (ended)
		w = UINT64_MAX;
	if ((r = map_to(c, end)) < 0 || (r = walk(c, end)) < 0)
		return r;
	/* every new instance's PROCESS first: a parent's merge seeds the children forked
	 * before the records it applies, so it must know them all */
	for (uint32_t i = 0; i < c->ninsts; i++) {
		const struct mt_instance *in = mt_replay_find_instance(c->replay, c->insts[i].id);
		for (uint32_t t = 0; in && !in->have_process && t < c->insts[i].nthreads; t++)
			if ((r = fill(c, &c->threads[c->insts[i].threads[t]], &c->insts[i],
			              ended)) < 0)
				return r;
	}
	for (uint32_t i = 0; i < c->ninsts; i++) {
		const struct mt_instance *in = mt_replay_find_instance(c->replay, c->insts[i].id);
		if (!c->insts[i].dead && in && in->end == MT_END_EXIT && process_gone(in))
			c->insts[i].dead = true;
		if ((r = merge(c, &c->insts[i], w, ended)) < 0)
			return r;
	}
	if (!ended && round_due(c))
		return round_at(c, w);
	return 0;
}
