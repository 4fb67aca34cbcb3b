/* SPDX-License-Identifier: MIT */
/*
 * The feed (see feed.h): a producer that decodes and merges, a ring of
 * units, and the replay's side that turns a unit back into a record.
 *
 * The ring is single-producer, single-consumer. Each side keeps its own
 * index and publishes it to the other now and then (tail_pub, head_pub),
 * so a unit costs neither side an atomic operation. The replay, finding the
 * ring empty, sleeps on a condition variable, and the producer wakes it when
 * it publishes (wait_for); the producer, finding it full, sleeps a while
 * and looks again (poll_for).
 *
 * Besides records the ring carries two units of the feed's own: CHUNK says
 * that a thread's next records come from another chunk, whose header the
 * next slot holds (the replay's copy of that thread's chunk header, which
 * every record of the thread points to, changes; the file's page is not
 * read again after the producer let it go), ERROR that a thread's next
 * record cannot be read, at the
 * point in replay order where reading it one record at a time finds out:
 * after the record before it was applied.
 *
 * May not: print; let the producer's thread touch anything but the trace,
 * the ring and the producer's own state.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "feed.h"
#include "keyframes.h"

#define RING          16384u /* units: 1 MiB, a power of two */
#define PUBLISH       64u    /* units between two publications of an index */
#define AHEAD         32u    /* units the replay's side keeps made beyond the one it applies */
#define MT_UNIT_CHUNK 4u     /* the feed's own: the next slot holds the stream's next chunk */
#define MT_UNIT_ERROR 8u     /* the feed's own: the stream's next record is unreadable */
#define SHORT_RUN     4u     /* records of a run among other threads' decoded one at a time */

struct stream {
	const uint64_t *chunks;
	uint64_t n, next;                   /* chunks, and the next to open */
	const struct mt_key_thread *resume; /* until the first record a keyframe does not hold */
	struct mt_cursor cur;
	struct mt_unit head; /* its next unit, decoded */
	bool new_chunk;      /* head is the first of the chunk cur is in */
};

/* An index one side publishes, and what the other, asleep, waits for it to reach. */
struct index {
	alignas(64) _Atomic uint64_t value;
	_Atomic uint64_t wanted; /* UINT64_MAX: nobody waits */
};

struct mt_feed {
	const struct mt_trace *trace;
	struct mt_unit *ring;
	uint32_t nstreams;

	/* the producer's side */
	struct stream *streams;
	struct stream **heap; /* by key, offset, half: the stream whose head is due first */
	uint32_t nheap;
	struct mt_record *scratch;
	uint64_t tail;      /* units made */
	uint64_t head_seen; /* the consumer's head, as last published */
	bool started, done;
	int perr;                /* the error the ERROR unit stands for */
	struct mt_error perr_at; /* and where it is */

	/* the replay's side */
	struct mt_chunk *chunks; /* each stream's chunk: what its records point to */
	/*
	 * Whether a record of it was decoded again here (record_of): that maps
	 * its pages again where the producer had given them back, and they
	 * stayed (up to 150 MB of a 160 MB torch trace's, most of it STACK
	 * records, in one run of two): they go back once the stream moves on.
	 */
	bool *reread;
	struct mt_record *rec;
	uint64_t head;      /* units taken */
	uint64_t tail_seen; /* the producer's tail, as last published */
	bool fin_seen;      /* the producer had made its last unit when tail_seen was read */

	/* shared */
	bool threaded;
	enum mt_feed_thread how;
	uint64_t start_ns, waited; /* the feed's start, the replay's waits for units (ns) */
	clockid_t producer_clock;  /* the producer's CPU time */
	bool have_clock;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct index tail_pub, head_pub;
	atomic_bool finished, stop;
	void *fault; /* the producer's SIGBUS: the address it could not read */
	sigjmp_buf fault_jump;
};

static _Thread_local struct mt_feed *producing;

void mt_feed_fault(void *addr)
{
	struct mt_feed *f = producing;

	if (!f)
		return;
	f->fault = addr;
	siglongjmp(f->fault_jump, 1);
}

/* ---- the producer ---- */

/* The registers of a chunk before a record: what reading it again starts from. */
struct registers {
	uint64_t time, addr, stack;
};

/* A record that is no event (or one that does not fit an event), as a unit of stream i. */
static void whole_unit(const struct mt_record *rec, uint32_t i, const struct registers *before,
                       struct mt_unit *u)
{
	memset(u, 0, sizeof(*u));
	u->ev.type = (uint8_t)rec->type;
	u->ev.offset = rec->offset;
	u->ev.time = u->ev.t0 = rec->time;
	u->ev.addr = before->time;
	u->ev.old = before->addr;
	u->ev.size = before->stack;
	u->stream = i;
	u->flags = MT_UNIT_WHOLE;
	if (rec->type == MT_REC_MREMAP && rec->u.mremap.old_len != 0) {
		u->ev.t0 = rec->u.mremap.t0;
		u->flags |= MT_UNIT_FIRST_HALF;
	} else if (rec->type == MT_REC_REALLOC && rec->u.realloc.old != 0) {
		u->ev.t0 = rec->u.realloc.t0;
		u->flags |= MT_UNIT_FIRST_HALF;
	}
}

/*
 * Whether the keyframe the replay started from holds the record just read:
 * 1 whole, 0 not at all, -1 its first half (the old block of a realloc or
 * mremap). The first record it does not hold ends the stream's resume.
 */
static int held(struct stream *s, uint64_t offset)
{
	const struct mt_key_thread *k = s->resume;
	uint64_t off = offset - s->cur.chunk.offset;

	if (s->cur.chunk.seq < k->seq || (s->cur.chunk.seq == k->seq && off < k->offset))
		return 1;
	s->resume = NULL;
	return s->cur.chunk.seq == k->seq && off == k->offset && k->phase ? -1 : 0;
}

/* Decodes stream i's next record into its head, across its chunks: 1, 0 at its end, < 0. */
static int advance(struct mt_feed *f, uint32_t i)
{
	struct stream *s = &f->streams[i];

	for (;;) {
		struct registers before = {s->cur.time, s->cur.addr, s->cur.stack};
		int ret = mt_cursor_next_event(&s->cur, &s->head.ev, f->scratch, &f->perr_at);
		int part = 0;
		if (ret < 0)
			return ret;
		if (ret > 0 && s->resume &&
		    (part = held(s, ret == 2 ? s->head.ev.offset : f->scratch->offset)) == 1)
			continue;
		if (ret == 2) {
			s->head.stream = i;
			s->head.flags = s->head.ev.type == MT_REC_REALLOC && s->head.ev.old != 0
			                        ? MT_UNIT_FIRST_HALF
			                        : 0;
		} else if (ret > 0) {
			whole_unit(f->scratch, i, &before, &s->head);
		}
		if (ret > 0) {
			/* the keyframe gave the old block back: the record at t1 is due */
			if (part < 0)
				s->head.flags &= (uint8_t)~MT_UNIT_FIRST_HALF;
			return 1;
		}
		if (s->next)
			mt_reader_release(f->trace, s->cur.chunk.offset, s->cur.chunk.avail);
		if (s->next >= s->n)
			return 0;
		if (s->resume && f->trace->slots[s->chunks[s->next]].seq < s->resume->seq) {
			s->next++; /* held whole by the keyframe */
			continue;
		}
		ret = mt_cursor_init(&s->cur, f->trace, s->chunks[s->next++], &f->perr_at);
		if (ret < 0)
			return ret;
		s->new_chunk = true;
	}
}

static bool due_before(const struct stream *a, const struct stream *b)
{
	uint64_t ka = mt_unit_key(&a->head), kb = mt_unit_key(&b->head);

	if (ka != kb)
		return ka < kb;
	if (a->head.ev.offset != b->head.ev.offset)
		return a->head.ev.offset < b->head.ev.offset;
	/* a record's own halves: the first one first */
	return (a->head.flags & MT_UNIT_FIRST_HALF) > (b->head.flags & MT_UNIT_FIRST_HALF);
}

static void heap_down(struct stream **h, uint32_t n, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, m = i;
		if (l < n && due_before(h[l], h[m]))
			m = l;
		if (l + 1 < n && due_before(h[l + 1], h[m]))
			m = l + 1;
		if (m == i)
			return;
		struct stream *t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void heap_up(struct stream **h, uint32_t i)
{
	while (i > 0 && due_before(h[i], h[(i - 1) / 2])) {
		struct stream *t = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

/*
 * After stream i's head was emitted as the first due: its next records
 * decoded straight into the ring while they stay due before `next`, the
 * stream due after it (NULL: none), in slots before `end`. The records of a
 * process's only thread, or of one thread between two of another's, need no
 * merge each. What ends the run (a record due after next's, a realloc's
 * first half, one that the reader's fast path does not read, the end of the
 * room) leaves the stream as advance does: 1 with its head, 0 or < 0.
 */
/* The unit that ended a run becomes its stream's head: a realloc of a block's first half first. */
static int ends_run(struct stream *s, const struct mt_unit *u)
{
	s->head = *u;
	if (u->ev.type == MT_REC_REALLOC && u->ev.old != 0)
		s->head.flags = MT_UNIT_FIRST_HALF;
	return 1;
}

/*
 * u, made at slot `at`, frees the block of the unit made just before it in
 * the same call of produce (the stream's head or its run's, not published
 * yet): that one is marked MT_UNIT_PAIR (feed.h). Not across the ring's
 * wrap, nor across two calls (the first one's last unit may be taken).
 */
static inline void mark_pair(struct mt_feed *f, uint64_t at, const struct mt_unit *u)
{
	struct mt_unit *prev;

	if (u->ev.type != MT_REC_FREE || (at & (RING - 1)) == 0)
		return;
	prev = &f->ring[(at - 1) & (RING - 1)];
	if (prev->ev.type == MT_REC_ALLOC && prev->flags == 0 && prev->ev.addr == u->ev.addr)
		prev->flags = MT_UNIT_PAIR;
}

static int run(struct mt_feed *f, uint32_t i, const struct stream *next, uint64_t end)
{
	struct stream *s = &f->streams[i];
	/* next's key and offset; none: later than any record */
	uint64_t key = next ? mt_unit_key(&next->head) : UINT64_MAX;
	uint64_t offset = next ? next->head.ev.offset : UINT64_MAX;

	if (s->resume)
		return advance(f, i); /* its records may be the keyframe's */
	/*
	 * Between other threads' records a run is mostly a few records long:
	 * those one at a time, without the set-up of a longer run
	 * (mt_cursor_next_events_due), which pays from about this many on.
	 */
	for (unsigned k = 0; next && k < SHORT_RUN && f->tail < end; k++) {
		struct mt_unit *u = &f->ring[f->tail & (RING - 1)];
		if (!mt_cursor_next_fast(&s->cur, &u->ev))
			return advance(f, i);
		u->stream = i;
		u->flags = 0;
		/* as due_before: a tie goes to the earlier offset (no record is in two streams) */
		if ((u->ev.type == MT_REC_REALLOC && u->ev.old != 0) || u->ev.time > key ||
		    (u->ev.time == key && u->ev.offset >= offset))
			return ends_run(s, u);
		mark_pair(f, f->tail++, u);
	}
	while (f->tail < end) {
		/* the rest decoded in as few calls as the ring's wrap allows */
		uint64_t at = f->tail & (RING - 1),
		         room = RING - at < end - f->tail ? RING - at : end - f->tail;
		struct mt_unit *u = &f->ring[at];
		bool stopped;
		size_t n = mt_cursor_next_events_due(&s->cur, &u->ev, sizeof(*u), room, key, offset,
		                                     &stopped);
		for (size_t k = 0; k < n; k++) {
			u[k].stream = i;
			u[k].flags = 0;
			if (k + stopped < n) /* made: not the one that ends the run */
				mark_pair(f, f->tail + k, &u[k]);
		}
		if (stopped) {
			f->tail += n - 1;
			return ends_run(s, &u[n - 1]);
		}
		f->tail += n;
		if (n < room)
			break;
	}
	return advance(f, i);
}

static void emit(struct mt_feed *f, const struct mt_unit *u)
{
	f->ring[f->tail++ & (RING - 1)] = *u;
}

static void emit_error(struct mt_feed *f, int err)
{
	struct mt_unit u = {.flags = MT_UNIT_ERROR};

	f->perr = err;
	emit(f, &u);
	f->done = true;
}

/* Every stream's first record, each in turn, as the replay met them. */
static void start(struct mt_feed *f)
{
	f->started = true;
	for (uint32_t i = 0; i < f->nstreams; i++) {
		struct stream *s = &f->streams[i];
		int ret;
		s->cur.done = true;
		ret = advance(f, i);
		if (ret < 0) {
			emit_error(f, ret);
			return;
		}
		if (ret > 0) {
			f->heap[f->nheap] = s;
			heap_up(f->heap, f->nheap++);
		}
	}
	if (!f->nheap)
		f->done = true;
}

/*
 * Emits the next record or half, after the chunk it opens, and those of its
 * stream due before any other's in slots before `end` (run), before the
 * error after them: at most four slots more than the run's.
 */
static void produce(struct mt_feed *f, uint64_t end)
{
	const struct stream *next = NULL;
	struct stream *s;
	uint32_t i;
	int ret;

	if (!f->started) {
		start(f);
		return;
	}
	s = f->heap[0];
	i = (uint32_t)(s - f->streams);
	if (s->new_chunk) {
		struct mt_unit c = {.flags = MT_UNIT_CHUNK, .stream = i};
		emit(f, &c);
		/* the header as read, so that the replay's side need not read the file again */
		_Static_assert(sizeof(struct mt_chunk) <= sizeof(struct mt_unit),
		               "a chunk fits a slot");
		memcpy(&f->ring[f->tail++ & (RING - 1)], &s->cur.chunk, sizeof(struct mt_chunk));
		s->new_chunk = false;
	}
	emit(f, &s->head);
	if (s->head.flags & MT_UNIT_FIRST_HALF) {
		s->head.flags &= (uint8_t)~MT_UNIT_FIRST_HALF;
		heap_down(f->heap, f->nheap, 0);
		return;
	}
	/* the stream due after s: the first of the heap's second row */
	if (f->nheap > 1)
		next = f->nheap == 2 || due_before(f->heap[1], f->heap[2]) ? f->heap[1]
		                                                           : f->heap[2];
	ret = run(f, i, next, end);
	if (ret < 0) {
		emit_error(f, ret);
		return;
	}
	if (ret == 0) {
		f->heap[0] = f->heap[--f->nheap];
		if (!f->nheap) {
			f->done = true;
			return;
		}
	}
	heap_down(f->heap, f->nheap, 0);
}

/*
 * Sleeps until the other side's index reaches `target`, or the feed
 * finished or stopped. The other side stores its index, then reads
 * `wanted`; this side stores `wanted`, then reads the index (all
 * sequentially consistent), so one of the two sees the other's store, and
 * a wake-up cannot be lost: it is sent under the lock this side holds until
 * it waits. A side waits for a good part of the ring at once, so that the
 * two do not wake each other for every few units.
 */
static void wait_for(struct mt_feed *f, struct index *ix, uint64_t target)
{
	pthread_mutex_lock(&f->lock);
	atomic_store(&ix->wanted, target);
	while (atomic_load(&ix->value) < target && !atomic_load(&f->finished) &&
	       !atomic_load(&f->stop))
		pthread_cond_wait(&f->wake, &f->lock);
	atomic_store(&ix->wanted, UINT64_MAX);
	pthread_mutex_unlock(&f->lock);
}

static void publish(struct mt_feed *f, struct index *ix, uint64_t value)
{
	atomic_store(&ix->value, value);
	if (atomic_load(&ix->wanted) <= value) {
		pthread_mutex_lock(&f->lock);
		pthread_cond_broadcast(&f->wake);
		pthread_mutex_unlock(&f->lock);
	}
}

/*
 * The producer, a ring ahead, waits for the replay to take half of it by
 * sleeping a while and looking again, not on the condition variable: the
 * replay's thread, the busier one, then publishes its index without a
 * wake-up (a system call on its side every half ring), and the producer's,
 * which has time to spare, pays for the looks. Half a ring is taken in
 * about 150 us at 13M units a second.
 */
#define POLL_NS 50000

static void poll_for(struct mt_feed *f, uint64_t target)
{
	const struct timespec ts = {0, POLL_NS};

	while (atomic_load(&f->head_pub.value) < target && !atomic_load(&f->stop))
		nanosleep(&ts, NULL);
}

static void finish(struct mt_feed *f)
{
	atomic_store(&f->tail_pub.value, f->tail);
	atomic_store(&f->finished, true);
	pthread_mutex_lock(&f->lock);
	pthread_cond_broadcast(&f->wake);
	pthread_mutex_unlock(&f->lock);
}

/* Makes units until the last, an error, or the replay stops the feed. */
static void produce_all(struct mt_feed *f)
{
	uint64_t last_pub = 0, end;

	while (!f->done && !atomic_load(&f->stop)) {
		/* room for the four slots one record may take */
		while (f->tail + 4 > f->head_seen + RING) {
			f->head_seen = atomic_load(&f->head_pub.value);
			if (f->tail + 4 <= f->head_seen + RING)
				break;
			if (f->tail != last_pub)
				publish(f, &f->tail_pub, last_pub = f->tail);
			/* until half the ring is free */
			poll_for(f, f->tail + 4 + RING / 2 - RING);
			if (atomic_load(&f->stop))
				return;
		}
		/* a run up to the next publication, a slot left for an error after it */
		end = last_pub + PUBLISH;
		produce(f, end < f->head_seen + RING - 1 ? end : f->head_seen + RING - 1);
		if (f->tail - last_pub >= PUBLISH)
			publish(f, &f->tail_pub, last_pub = f->tail);
	}
}

static void *producer(void *arg)
{
	struct mt_feed *f = arg;

	producing = f;
	if (sigsetjmp(f->fault_jump, 1)) {
		/* the mapped trace shrank under the producer: the replay's thread meets it too */
		f->ring[f->tail++ & (RING - 1)] = (struct mt_unit){.flags = MT_UNIT_ERROR};
		f->perr = -EFAULT;
		f->done = true;
	} else {
		produce_all(f);
	}
	producing = NULL;
	finish(f);
	return NULL;
}

/* ---- the replay's side ---- */

/*
 * Where the producer has a core of its own, the replay waits for units
 * while it starts, and where the producer's work is the greater: the
 * threads of a process whose records interleave finely are merged unit by
 * unit (bench-threads: the producer ran 147.6 ms of the 148.2 ms the replay
 * had waited 14.4 ms in). A wait while the producer did not run says that
 * other programs want the cores: once the replay has waited so a sixteenth
 * of the time since the feed started, and WAIT_FREE_NS more, it stops the
 * producer (between two of its runs) and makes the units itself. (Replays
 * that waited 8 to 14% of their time took 2.04-2.44 s where the replay
 * alone took 1.65-2.06 s.) A wait while the producer ran most of it is
 * not counted: made on one thread, bench-threads' report took 1.13-1.31 s,
 * on two 0.97-1.19 s.
 */
#define WAIT_FREE_NS 5000000u

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The producer's CPU time (ns); 0 where it cannot be read: every wait then counts. */
static uint64_t producer_cpu_ns(const struct mt_feed *f)
{
	struct timespec ts;

	if (!f->have_clock || clock_gettime(f->producer_clock, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void take_back(struct mt_feed *f)
{
	atomic_store(&f->stop, true); /* produce_all stops after a whole run */
	pthread_join(f->thread, NULL);
	f->threaded = false;
}

/* Makes units ahead, or learns of those made: false when there are none left. */
static bool top_up(struct mt_feed *f)
{
	if (f->threaded && f->how == MT_FEED_GIVEN_BACK)
		take_back(f);
	if (!f->threaded) {
		while (!f->done && f->tail - f->head < AHEAD + PUBLISH)
			produce(f, f->head + AHEAD + PUBLISH);
		f->tail_seen = f->tail;
		f->fin_seen = f->done;
		return f->tail_seen > f->head;
	}
	for (bool published = false;;) {
		uint64_t t, cpu, wall;
		/* finished is read first: once it is true, the tail it published is whole */
		f->fin_seen = atomic_load(&f->finished);
		f->tail_seen = atomic_load(&f->tail_pub.value);
		if (f->tail_seen > f->head || f->fin_seen)
			return f->tail_seen > f->head;
		if (!published) {
			/* every unit made is taken: let the producer fill the whole ring */
			publish(f, &f->head_pub, f->head);
			published = true;
			continue;
		}
		t = now_ns();
		if (f->how == MT_FEED_WHILE_FREE &&
		    f->waited > WAIT_FREE_NS + (t - f->start_ns) / 16) {
			take_back(f);
			return top_up(f);
		}
		cpu = producer_cpu_ns(f);
		/* until a good part of the ring is made */
		wait_for(f, &f->tail_pub, f->head + RING / 4);
		wall = now_ns() - t;
		if (producer_cpu_ns(f) - cpu < wall / 2)
			f->waited += wall;
	}
}

/* The record of a unit that holds its fields, as mt_cursor_next would give it. */
static inline void fill(struct mt_feed *f, const struct mt_unit *u)
{
	mt_event_record(&u->ev, f->rec);
	f->rec->chunk = &f->chunks[u->stream];
	f->rec->thread = u->stream;
}

/* A unit's record, as mt_cursor_next would give it. */
static int record_of(struct mt_feed *f, const struct mt_unit *u, struct mt_error *err)
{
	struct mt_record *rec = f->rec;
	const struct mt_chunk *ch = &f->chunks[u->stream];
	struct mt_cursor c;
	int ret;

	if (u->flags & MT_UNIT_WHOLE) {
		memset(&c, 0, sizeof(c));
		c.trace = f->trace;
		c.chunk = *ch;
		c.pos = f->trace->data + u->ev.offset;
		c.end = f->trace->data + ch->offset + ch->avail;
		c.time = u->ev.addr;
		c.addr = u->ev.old;
		c.stack = u->ev.size;
		ret = mt_cursor_next(&c, rec, err);
		if (ret <= 0) {
			/* the producer read it: the bytes changed under us */
			if (err && ret == 0) {
				err->offset = u->ev.offset;
				snprintf(err->message, sizeof(err->message),
				         "the record changed while it was read");
			}
			return ret < 0 ? ret : -EIO;
		}
		rec->chunk = ch;
		rec->thread = u->stream;
		f->reread[u->stream] = true;
		return 1;
	}
	fill(f, u);
	return 1;
}

/* A stream's chunk, done with: its pages back if a record of it was decoded again here. */
static void reread_release(struct mt_feed *f, uint32_t stream)
{
	if (f->reread[stream]) {
		mt_reader_release(f->trace, f->chunks[stream].offset, f->chunks[stream].avail);
		f->reread[stream] = false;
	}
}

/* mt_feed_next when the ring runs short, the index is due to be published, or the unit is the
 * feed's own: out of line, so that the common case saves no registers. */
static __attribute__((noinline)) int next_slow(struct mt_feed *f, const struct mt_unit **unit,
                                               struct mt_error *err)
{
	for (;;) {
		const struct mt_unit *u;

		if (f->tail_seen - f->head <= AHEAD && !f->fin_seen && !top_up(f))
			return 0;
		if (f->head == f->tail_seen)
			return 0; /* the last unit was taken */
		u = &f->ring[f->head++ & (RING - 1)];
		if (f->threaded && (f->head & (PUBLISH - 1)) == 0)
			publish(f, &f->head_pub, f->head - 1);
		if (u->flags & MT_UNIT_CHUNK) {
			reread_release(f, u->stream);
			memcpy(&f->chunks[u->stream], &f->ring[f->head++ & (RING - 1)],
			       sizeof(struct mt_chunk));
			continue;
		}
		if (u->flags & MT_UNIT_ERROR) {
			if (f->perr == -EFAULT && f->fault) {
				/* raise it here, where the command's handler can leave the command
				 */
				(void)*(volatile const uint8_t *)f->fault;
				if (err) {
					err->offset = 0;
					snprintf(err->message, sizeof(err->message),
					         "the file changed while it was read");
				}
				return -EIO;
			}
			if (err)
				*err = f->perr_at;
			return f->perr;
		}
		*unit = u;
		return 1;
	}
}

int mt_feed_next(struct mt_feed *f, const struct mt_unit **unit, struct mt_error *err)
{
	const struct mt_unit *u = &f->ring[f->head & (RING - 1)];

	/* most units: made well ahead, a record's, no index to publish */
	if (__builtin_expect(f->tail_seen - f->head > AHEAD &&
	                             ((f->head + 1) & (PUBLISH - 1)) != 0 &&
	                             !(u->flags & (MT_UNIT_CHUNK | MT_UNIT_ERROR)),
	                     1)) {
		f->head++;
		*unit = u;
		return 1;
	}
	return next_slow(f, unit, err);
}

int mt_feed_record(struct mt_feed *f, const struct mt_unit *u, const struct mt_record **rec,
                   struct mt_error *err)
{
	int ret = record_of(f, u, err);

	*rec = f->rec;
	return ret;
}

const struct mt_unit *mt_feed_peek(const struct mt_feed *f, unsigned ahead)
{
	uint64_t i = f->head - 1 + ahead;

	if (i >= f->tail_seen)
		return NULL;
	return &f->ring[i & (RING - 1)];
}

int mt_feed_start(struct mt_feed **out, const struct mt_trace *trace,
                  const struct mt_feed_stream *streams, uint32_t nstreams,
                  enum mt_feed_thread thread)
{
	/* its indices on cache lines of their own */
	struct mt_feed *f = aligned_alloc(alignof(struct mt_feed), sizeof(*f));

	*out = NULL;
	if (!f)
		return -ENOMEM;
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->wake, NULL);
	atomic_store(&f->tail_pub.wanted, UINT64_MAX);
	atomic_store(&f->head_pub.wanted, UINT64_MAX);
	f->trace = trace;
	f->nstreams = nstreams;
	f->ring = malloc(RING * sizeof(*f->ring));
	f->streams = calloc(nstreams + 1, sizeof(*f->streams));
	f->heap = calloc(nstreams + 1, sizeof(*f->heap));
	f->chunks = calloc(nstreams + 1, sizeof(*f->chunks));
	f->reread = calloc(nstreams + 1, sizeof(*f->reread));
	f->scratch = malloc(sizeof(*f->scratch));
	f->rec = calloc(1, sizeof(*f->rec));
	if (!f->ring || !f->streams || !f->heap || !f->chunks || !f->reread || !f->scratch ||
	    !f->rec) {
		mt_feed_stop(f);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < nstreams; i++) {
		f->streams[i].chunks = streams[i].chunks;
		f->streams[i].n = streams[i].n;
		f->streams[i].resume = streams[i].resume;
	}
	f->how = thread;
	f->start_ns = now_ns();
	if (thread != MT_FEED_INLINE) {
		/* the command's signals stay the replay thread's; a fault is the producer's own */
		sigset_t all, was;
		sigfillset(&all);
		sigdelset(&all, SIGBUS);
		sigdelset(&all, SIGSEGV);
		pthread_sigmask(SIG_BLOCK, &all, &was);
		f->threaded = pthread_create(&f->thread, NULL, producer, f) == 0;
		f->have_clock =
		        f->threaded && pthread_getcpuclockid(f->thread, &f->producer_clock) == 0;
		pthread_sigmask(SIG_SETMASK, &was, NULL);
	}
	*out = f;
	return 0;
}

void mt_feed_stop(struct mt_feed *f)
{
	if (!f)
		return;
	if (f->threaded) {
		atomic_store(&f->stop, true); /* poll_for looks at it */
		pthread_join(f->thread, NULL);
	}
	for (uint32_t i = 0; f->reread && i < f->nstreams; i++)
		reread_release(f, i);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->wake);
	free(f->ring);
	free(f->streams);
	free(f->heap);
	free(f->chunks);
	free(f->reread);
	free(f->scratch);
	free(f->rec);
	free(f);
}
