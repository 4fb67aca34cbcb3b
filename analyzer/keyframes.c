/* SPDX-License-Identifier: MIT */
/*
 * The ring's keyframes (see keyframes.h). Two walks over the consumer's
 * chunks, in seq order: the first finds the newest whole round and the
 * round it names usable; the second decodes that round's keyframes and the
 * final ones, and hands the copies' definitions to the caller. Only whole
 * keyframes are kept: one the consumer died writing has no KEY_END, or
 * fewer items than its KEYFRAME says.
 *
 * May not: print; keep keyframes of other rounds (memory grows with the
 * live blocks of one round, not with the rounds in the file).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "keyframes.h"

/* What a consumer stream (a tid of instance 0) is in the middle of. */
struct stream_state {
	uint32_t tid;
	uint32_t owner; /* a COPY's instance: its definitions follow; 0 none */
	struct mt_keyframe *building;
	uint64_t kinds_seen[4]; /* items of threads, blocks, ranges, stacks so far */
};

#define MAX_STREAMS 8

struct walk {
	struct mt_keyframes *k;
	const struct mt_trace *t;
	struct stream_state streams[MAX_STREAMS];
	uint32_t nstreams;
	mt_key_definition_fn def;
	void *ctx;
};

bool mt_key_is_definition(unsigned type)
{
	switch (type) {
	case MT_REC_PROCESS:
	case MT_REC_MODULE:
	case MT_REC_MODULE_GONE:
	case MT_REC_STACK:
	case MT_REC_PYCODE:
	case MT_REC_PYSTACK:
	case MT_REC_EXIT:
	case MT_REC_EXEC:
	case MT_REC_LOST:
	case MT_REC_REACH:
	case MT_REC_REACH_BLOCKS:
		return true;
	default:
		return false;
	}
}

static void frame_free(struct mt_keyframe *f)
{
	if (!f)
		return;
	free(f->threads);
	free(f->blocks);
	free(f->ranges);
	free(f->stacks);
}

void mt_keyframes_free(struct mt_keyframes *k)
{
	for (uint32_t i = 0; i < k->nframes; i++)
		frame_free(&k->frames[i]);
	free(k->frames);
	mt_map_free(&k->round_of);
	mt_map_free(&k->final_of);
	mt_map_free(&k->copied);
	mt_map_free(&k->copy_chunks);
	memset(k, 0, sizeof(*k));
}

static struct stream_state *stream_of(struct walk *w, uint32_t tid)
{
	for (uint32_t i = 0; i < w->nstreams; i++)
		if (w->streams[i].tid == tid)
			return &w->streams[i];
	if (w->nstreams == MAX_STREAMS)
		return NULL;
	w->streams[w->nstreams].tid = tid;
	return &w->streams[w->nstreams++];
}

static void drop_building(struct stream_state *s)
{
	frame_free(s->building);
	free(s->building);
	s->building = NULL;
}

static int start_frame(struct stream_state *s, const struct mt_record *rec, uint64_t limit)
{
	struct mt_keyframe *f;

	drop_building(s);
	/* an item takes a byte a field at least: a corrupt count cannot ask for silly memory */
	if (rec->u.keyframe.nthreads > limit || rec->u.keyframe.nblocks > limit ||
	    rec->u.keyframe.nranges > limit || rec->u.keyframe.nstacks > limit)
		return 0;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->instance = (uint32_t)rec->u.keyframe.instance;
	f->round = rec->u.keyframe.round;
	f->time = rec->u.keyframe.time;
	f->events = rec->u.keyframe.events;
	f->nkinds = rec->u.keyframe.nkinds;
	memcpy(f->kinds, rec->u.keyframe.kinds, sizeof(f->kinds));
	/* the counts are what the parts must add up to; the arrays fill as they come */
	f->nthreads = rec->u.keyframe.nthreads;
	f->nblocks = rec->u.keyframe.nblocks;
	f->nranges = rec->u.keyframe.nranges;
	f->nstacks = rec->u.keyframe.nstacks;
	memset(s->kinds_seen, 0, sizeof(s->kinds_seen));
	s->building = f;
	return 0;
}

/* Room for n more items of `size` bytes in *arr, which holds `have` of at most `max`. */
static int room(void **arr, uint64_t have, uint64_t n, uint64_t max, size_t size)
{
	void *p;

	if (n > max - have)
		return -EBADMSG;
	if (have == 0) {
		p = malloc((max ? max : 1) * size);
		if (!p)
			return -ENOMEM;
		*arr = p;
	}
	return 0;
}

/* One parts record into the keyframe being built. */
static int add_parts(struct stream_state *s, const struct mt_record *rec)
{
	struct mt_keyframe *f = s->building;
	unsigned part = rec->type - MT_REC_KEY_THREADS;
	uint64_t v[MT_KEY_FIELDS_MAX] = {0}, *have = &s->kinds_seen[part];
	const uint8_t *pos = rec->u.key_items.items;
	static const size_t sizes[4] = {sizeof(struct mt_key_thread), sizeof(struct mt_key_block),
	                                sizeof(struct mt_key_block), sizeof(struct mt_key_stack)};
	uint64_t max[4] = {f->nthreads, f->nblocks, f->nranges, f->nstacks};
	void **arrays[4] = {(void **)&f->threads, (void **)&f->blocks, (void **)&f->ranges,
	                    (void **)&f->stacks};
	int r = room(arrays[part], *have, rec->u.key_items.n, max[part], sizes[part]);

	if (r == -EBADMSG) {
		drop_building(s); /* more items than it said: not this keyframe's */
		return 0;
	}
	if (r < 0)
		return r;
	while (mt_key_next(rec, &pos, v)) {
		uint64_t i = (*have)++;
		switch (rec->type) {
		case MT_REC_KEY_THREADS:
			f->threads[i] = (struct mt_key_thread){(uint32_t)v[MT_KT_TID],
			                                       (uint32_t)v[MT_KT_OFFSET],
			                                       v[MT_KT_SEQ], v[MT_KT_PHASE] != 0};
			break;
		case MT_REC_KEY_BLOCKS:
			f->blocks[i] = (struct mt_key_block){
			        v[MT_KB_ADDR],
			        v[MT_KB_SIZE],
			        (uint32_t)v[MT_KB_STACK],
			        (uint32_t)v[MT_KB_STACK_INSTANCE],
			        (uint32_t)v[MT_KB_KIND],
			        v[MT_KB_BLOCKS] ? (uint32_t)v[MT_KB_BLOCKS] : 1};
			break;
		case MT_REC_KEY_RANGES:
			f->ranges[i] = (struct mt_key_block){v[MT_KR_ADDR],
			                                     v[MT_KR_LEN],
			                                     (uint32_t)v[MT_KR_STACK],
			                                     (uint32_t)v[MT_KR_STACK_INSTANCE],
			                                     MT_KIND_MMAP,
			                                     1};
			break;
		default:
			f->stacks[i] = (struct mt_key_stack){
			        (uint32_t)v[MT_KS_KIND],  (uint32_t)v[MT_KS_STACK_INSTANCE],
			        (uint32_t)v[MT_KS_STACK], v[MT_KS_ALLOCATIONS],
			        v[MT_KS_BYTES_ALLOCATED], v[MT_KS_PEAK_BYTES],
			        v[MT_KS_PEAK_BLOCKS]};
			break;
		}
	}
	return 0;
}

/* KEY_END: the keyframe is kept if whole. */
static int end_frame(struct walk *w, struct stream_state *s, const struct mt_record *rec)
{
	struct mt_keyframes *k = w->k;
	struct mt_keyframe *f = s->building;
	struct mt_map *m;
	uint32_t *idx;
	bool created;

	if (rec->u.key_end.instance != f->instance || rec->u.key_end.round != f->round ||
	    s->kinds_seen[0] != f->nthreads || s->kinds_seen[1] != f->nblocks ||
	    s->kinds_seen[2] != f->nranges || s->kinds_seen[3] != f->nstacks) {
		drop_building(s);
		return 0;
	}
	m = f->round ? &k->round_of : &k->final_of;
	if (mt_map_get(m, f->instance)) {
		drop_building(s); /* one per instance: a repeat adds nothing */
		return 0;
	}
	if (mt_grow((void **)&k->frames, &k->cap, k->nframes + 1, sizeof(*k->frames)) < 0)
		return -ENOMEM;
	idx = mt_map_put(m, f->instance, &created);
	if (!idx)
		return -ENOMEM;
	*idx = k->nframes;
	k->frames[k->nframes++] = *f;
	free(f);
	s->building = NULL;
	return 0;
}

static int on_record(struct walk *w, struct stream_state *s, const struct mt_record *rec)
{
	struct mt_keyframes *k = w->k;
	bool created;

	switch (rec->type) {
	case MT_REC_COPY:
		s->owner = (uint32_t)rec->u.copy.instance;
		drop_building(s);
		return mt_map_put(&k->copied, rec->u.copy.seq, &created) ? 0 : -ENOMEM;
	case MT_REC_KEYFRAME:
		s->owner = 0;
		if (rec->u.keyframe.round == 0 || rec->u.keyframe.round == k->usable)
			return start_frame(s, rec, w->t->size);
		drop_building(s);
		return 0;
	case MT_REC_KEY_THREADS:
	case MT_REC_KEY_BLOCKS:
	case MT_REC_KEY_RANGES:
	case MT_REC_KEY_STACKS:
		return s->building ? add_parts(s, rec) : 0;
	case MT_REC_KEY_END:
		return s->building ? end_frame(w, s, rec) : 0;
	case MT_REC_ROUND:
		s->owner = 0;
		drop_building(s);
		return 0;
	default:
		if (s->owner && mt_key_is_definition(rec->type))
			return w->def(w->ctx, s->owner, rec);
		return 0;
	}
}

/* Every record of the consumer's chunks in seq order; rounds_only: the ROUND records. */
static int walk_chunks(struct walk *w, bool rounds_only, struct mt_error *err)
{
	struct mt_keyframes *k = w->k;
	const struct mt_trace *t = w->t;
	uint64_t n = mt_reader_chunk_slots(t);
	struct mt_record *rec = malloc(sizeof(*rec));
	int r = 0;

	if (!rec)
		return -ENOMEM;
	for (uint64_t i = 0; i < n && r >= 0; i++) {
		uint64_t slot = mt_reader_slot_by_seq(t, i);
		struct stream_state *s = NULL;
		struct mt_cursor c;
		bool created;

		if (!t->header.ring_size || t->slots[slot].state != MT_SLOT_CHUNK)
			continue;
		r = mt_cursor_init(&c, t, slot, err);
		if (r <= 0 || c.chunk.instance != 0)
			continue;
		k->ring = true;
		if (!rounds_only) {
			s = stream_of(w, c.chunk.tid);
			if (!s || !mt_map_put(&k->copy_chunks, slot, &created)) {
				r = -ENOMEM;
				break;
			}
		}
		while ((r = mt_cursor_next(&c, rec, err)) > 0) {
			if (rounds_only && rec->type == MT_REC_ROUND &&
			    rec->u.round.round > k->round) {
				k->round = rec->u.round.round;
				k->usable = rec->u.round.usable;
			} else if (!rounds_only) {
				r = on_record(w, s, rec);
				if (r < 0)
					break;
			}
		}
	}
	free(rec);
	return r < 0 ? r : 0;
}

void mt_keyframes_init(struct mt_keyframes *k)
{
	memset(k, 0, sizeof(*k));
	mt_map_init(&k->round_of, sizeof(uint32_t));
	mt_map_init(&k->final_of, sizeof(uint32_t));
	mt_map_init(&k->copied, 0);
	mt_map_init(&k->copy_chunks, 0);
}

int mt_keyframes_read(struct mt_keyframes *k, const struct mt_trace *t, mt_key_definition_fn def,
                      void *ctx, struct mt_error *err)
{
	struct walk w = {.k = k, .t = t, .def = def, .ctx = ctx};
	int r;

	mt_keyframes_init(k);
	r = walk_chunks(&w, true, err);
	if (r == 0 && k->usable > k->round)
		k->usable = k->round; /* a corrupt ROUND: read from the newest */
	if (r == 0)
		r = walk_chunks(&w, false, err);
	for (uint32_t i = 0; i < w.nstreams; i++)
		drop_building(&w.streams[i]);
	if (r == 0 && k->nframes) {
		for (uint32_t i = 0; i < k->nframes; i++)
			if (k->frames[i].round == k->usable)
				k->usable_time = k->frames[i].time;
	}
	if (r == -ENOMEM && err) {
		err->offset = 0;
		snprintf(err->message, sizeof(err->message), "out of memory");
	}
	if (r < 0)
		mt_keyframes_free(k);
	return r;
}

const struct mt_keyframe *mt_keyframes_of(const struct mt_keyframes *k, uint32_t instance)
{
	const uint32_t *i = k->usable ? mt_map_get(&k->round_of, instance) : NULL;

	if (!i)
		i = mt_map_get(&k->final_of, instance);
	return i ? &k->frames[*i] : NULL;
}

bool mt_keyframes_copied(const struct mt_keyframes *k, uint64_t seq)
{
	return k->ring && mt_map_get(&k->copied, seq) != NULL;
}
