/* SPDX-License-Identifier: MIT */
/*
 * The Python side of an instance's stacks (see pystacks.h). Frames of all
 * Python stacks share one array, as replay.c keeps native frames; a stack
 * that names no Python stack takes no entry, so a native-only trace costs
 * nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pystacks.h"

struct py_stack {
	uint64_t first; /* index into frames */
	uint32_t n;
};

void mt_pystacks_init(struct mt_pystacks *p)
{
	memset(p, 0, sizeof(*p));
	mt_map_init(&p->codes, sizeof(struct mt_pycode));
	mt_map_init(&p->pystacks, sizeof(struct py_stack));
	mt_map_init(&p->stacks, sizeof(uint64_t));
}

static void code_free(struct mt_pycode *c)
{
	free(c->file);
	free(c->name);
	free(c->linetable);
}

void mt_pystacks_free(struct mt_pystacks *p)
{
	uint64_t key;
	void *v;

	for (size_t i = 0; mt_map_next(&p->codes, &i, &key, &v);)
		code_free(v);
	mt_map_free(&p->codes);
	mt_map_free(&p->pystacks);
	mt_map_free(&p->stacks);
	free(p->by_id);
	free(p->frames);
	memset(p, 0, sizeof(*p));
}

int mt_pystacks_add_code(struct mt_pystacks *p, const struct mt_record *rec)
{
	struct mt_pycode c = {
	        .id = rec->u.pycode.id,
	        .version = rec->u.pycode.version > UINT32_MAX ? 0 : (uint32_t)rec->u.pycode.version,
	        .first_line = rec->u.pycode.first_line,
	        .linetable_len = rec->u.pycode.linetable.len,
	        .linetable_size = rec->u.pycode.linetable_size,
	};
	struct mt_pycode *slot;
	bool created;

	if (mt_map_get(&p->codes, c.id))
		return 0;
	c.file = mt_bytes_dup(rec->u.pycode.file);
	c.name = mt_bytes_dup(rec->u.pycode.name);
	c.linetable = malloc(c.linetable_len ? c.linetable_len : 1);
	if (!c.file || !c.name || !c.linetable)
		goto nomem;
	if (c.linetable_len)
		memcpy(c.linetable, rec->u.pycode.linetable.data, c.linetable_len);
	slot = mt_map_put(&p->codes, c.id, &created);
	if (!slot)
		goto nomem;
	*slot = c;
	return 0;
nomem:
	code_free(&c);
	return -ENOMEM;
}

int mt_pystacks_add_pystack(struct mt_pystacks *p, const struct mt_record *rec)
{
	uint32_t n = rec->u.pystack.n;
	struct py_stack *s;
	bool created;

	if (mt_map_get(&p->pystacks, rec->u.pystack.id))
		return 0;
	if (p->nframes + n > p->cap) {
		size_t cap = p->cap ? p->cap : 256;
		void *q;
		while (cap < p->nframes + n)
			cap *= 2;
		q = realloc(p->frames, cap * sizeof(*p->frames));
		if (!q)
			return -ENOMEM;
		p->frames = q;
		p->cap = cap;
	}
	s = mt_map_put(&p->pystacks, rec->u.pystack.id, &created);
	if (!s)
		return -ENOMEM;
	memcpy(p->frames + p->nframes, rec->u.pystack.frames, n * sizeof(*p->frames));
	s->first = p->nframes;
	s->n = n;
	p->nframes += n;
	return 0;
}

/*
 * Whether id goes in by_id, grown for it if need be: ids up to twice as
 * many as it holds room for and 4096 more, so that a trace whose ids jump
 * cannot make it hold mostly nothing. A torch trace's 722,234 stacks in a
 * map took a probe that missed the cache to add each and another to find
 * it, and rehashes as it grew.
 */
static bool in_array(struct mt_pystacks *p, uint32_t id)
{
	size_t cap = p->by_id_cap ? p->by_id_cap : 4096;
	uint64_t *q;

	if (id < p->by_id_cap)
		return true;
	if (id >= 2 * p->by_id_cap + 4096)
		return false;
	while (cap <= id)
		cap *= 2;
	if (!(q = realloc(p->by_id, cap * sizeof(*q))))
		return false; /* the map's, then */
	memset(q + p->by_id_cap, 0, (cap - p->by_id_cap) * sizeof(*q));
	p->by_id = q;
	p->by_id_cap = cap;
	return true;
}

int mt_pystacks_add_stack(struct mt_pystacks *p, uint32_t id, const struct mt_record *rec)
{
	uint64_t *pystack;
	bool created;

	if (!rec->u.stack.pystack)
		return 0;
	/* the first of an id wins, wherever it went */
	if (in_array(p, id) && !(p->stacks.count && mt_map_get(&p->stacks, id))) {
		if (!p->by_id[id])
			p->by_id[id] = rec->u.stack.pystack;
		return 0;
	}
	pystack = mt_map_put(&p->stacks, id, &created);
	if (!pystack)
		return -ENOMEM;
	if (created)
		*pystack = rec->u.stack.pystack;
	return 0;
}

const struct mt_pycode *mt_pystacks_code(const struct mt_pystacks *p, uint64_t id)
{
	return mt_map_get(&p->codes, id);
}

uint32_t mt_pystacks_frames(const struct mt_pystacks *p, uint32_t id,
                            const struct mt_pyframe **frames)
{
	const uint64_t *pystack = id < p->by_id_cap && p->by_id[id] ? &p->by_id[id]
	                          : p->stacks.count                 ? mt_map_get(&p->stacks, id)
	                                                            : NULL;
	const struct py_stack *s = pystack ? mt_map_get(&p->pystacks, *pystack) : NULL;

	*frames = s ? p->frames + s->first : NULL;
	return s ? s->n : 0;
}
