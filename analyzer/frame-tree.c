/* SPDX-License-Identifier: MIT */
/* Frame tree (see frame-tree.h). */
#include <errno.h>
#include <stdlib.h>

#include "frame-tree.h"
#include "map.h"

void mt_frame_tree_init(struct mt_frame_tree *t)
{
	*t = (struct mt_frame_tree){0};
}

void mt_frame_tree_free(struct mt_frame_tree *t)
{
	free(t->frame);
	free(t->parent);
	free(t->table);
	free(t->path);
	mt_frame_tree_init(t);
}

static uint32_t home(const struct mt_frame_tree *t, uint32_t parent, uint64_t frame)
{
	return (uint32_t)mt_map_mix(frame ^ (uint64_t)parent << 32 ^ parent) & (t->table_cap - 1);
}

/* Whether a node more needs grow first. */
static bool full(const struct mt_frame_tree *t)
{
	return t->n == t->cap || (uint64_t)(t->n + 1) * 4 > (uint64_t)t->table_cap * 3;
}

/* Room for one more node, and a table at most 3/4 full with it. */
static int grow(struct mt_frame_tree *t)
{
	void *q;

	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		if (cap <= t->cap)
			return -ENOMEM;
		if (!(q = realloc(t->frame, (size_t)cap * sizeof(*t->frame))))
			return -ENOMEM;
		t->frame = q;
		if (!(q = realloc(t->parent, (size_t)cap * sizeof(*t->parent))))
			return -ENOMEM;
		t->parent = q;
		t->cap = cap;
	}
	if ((uint64_t)(t->n + 1) * 4 > (uint64_t)t->table_cap * 3) {
		uint32_t cap = t->table_cap ? t->table_cap * 2 : 512;
		if (cap <= t->table_cap || !(q = calloc(cap, sizeof(*t->table))))
			return -ENOMEM;
		free(t->table);
		t->table = q;
		t->table_cap = cap;
		/* every node is unique: each takes the first empty slot from its home */
		for (uint32_t i = 1; i < t->n; i++) {
			uint32_t s = home(t, t->parent[i], t->frame[i]);
			while (t->table[s])
				s = (s + 1) & (cap - 1);
			t->table[s] = i;
		}
	}
	return 0;
}

/* The node (parent, f), or 0 and in *slot the empty slot where it would go. */
static uint32_t find(const struct mt_frame_tree *t, uint32_t parent, uint64_t f, uint32_t *slot)
{
	uint32_t s = home(t, parent, f), x;

	while ((x = t->table[s]) && (t->frame[x] != f || t->parent[x] != parent))
		s = (s + 1) & (t->table_cap - 1);
	*slot = s;
	return x;
}

int mt_frame_tree_add(struct mt_frame_tree *t, const uint64_t *frames, uint32_t n, uint32_t *node)
{
	uint32_t at = 0, d = 0;
	int ret;

	if (t->sealed)
		return -EINVAL;
	if (t->n == 0) {
		if ((ret = grow(t)) < 0)
			return ret;
		t->frame[0] = 0;
		t->parent[0] = 0;
		t->n = 1;
	}
	if (n > t->path_cap) {
		void *q = realloc(t->path, n * sizeof(*t->path));
		if (!q)
			return -ENOMEM;
		t->path = q;
		t->path_cap = n;
	}
	/* the outer frames it shares with the stack added last: their nodes without a look-up */
	while (d < n && d < t->npath && t->frame[t->path[d]] == frames[n - 1 - d])
		at = t->path[d++];
	/* the rest from the outermost in, each a child of the one outside it */
	for (; d < n; d++) {
		uint64_t f = frames[n - 1 - d];
		uint32_t s, x = find(t, at, f, &s);
		if (!x) {
			if (full(t)) {
				if ((ret = grow(t)) < 0) {
					t->npath = 0; /* the nodes of d and deeper are not this
					                 stack's */
					return ret;
				}
				find(t, at, f, &s); /* the table was made again */
			}
			x = t->n++;
			t->frame[x] = f;
			t->parent[x] = at;
			t->table[s] = x;
		}
		at = x;
		t->path[d] = x;
	}
	t->npath = n;
	*node = at;
	return 0;
}

void mt_frame_tree_seal(struct mt_frame_tree *t)
{
	free(t->table);
	free(t->path);
	t->table = NULL;
	t->table_cap = 0;
	t->path = NULL;
	t->npath = t->path_cap = 0;
	t->sealed = true;
}

uint32_t mt_frame_tree_get(const struct mt_frame_tree *t, uint32_t node, uint64_t *frames,
                           uint32_t max)
{
	uint32_t n = 0;

	for (; node && n < max; node = t->parent[node])
		frames[n++] = t->frame[node];
	return n;
}
