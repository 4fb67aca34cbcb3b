/* SPDX-License-Identifier: MIT */
/*
 * Frame tree: the frames of one instance's stacks, each stack a node whose
 * chain of parents holds its frames from the innermost out. Stacks share
 * their outer frames (the program's main, the interpreter's loop, the
 * framework's layers): a torch training run's 702,316 stacks hold 39.9 M
 * frames in 2.20 M nodes, 12 bytes each, where a frame of each stack took
 * 4 bytes (a step from the one before) or 12.
 *
 * A table finds a (parent, frame) node while stacks are added; sealed, the
 * tree drops it and takes no more stacks.
 *
 * May not: print.
 */
#ifndef MEMTRACE_ANALYZER_FRAME_TREE_H
#define MEMTRACE_ANALYZER_FRAME_TREE_H

#include <stdbool.h>
#include <stdint.h>

struct mt_frame_tree {
	/* node i (from 1; 0 is the root, no frame): its frame, and its parent's index */
	uint64_t *frame;
	uint32_t *parent;
	uint32_t n, cap; /* nodes, the root included, and the room for them */
	/* (parent, frame) -> node index by open addressing, 0 empty; NULL once sealed */
	uint32_t *table;
	uint32_t table_cap; /* a power of two, or 0 */
	/* the nodes of the stack added last, from the outermost: most stacks share its outer
	 * frames, found with no look-up */
	uint32_t *path;
	uint32_t npath, path_cap;
	bool sealed;
};

void mt_frame_tree_init(struct mt_frame_tree *t);
void mt_frame_tree_free(struct mt_frame_tree *t);
/*
 * The node of a stack of n frames, innermost first, into *node (0 for no
 * frames): -ENOMEM, or -EINVAL once sealed.
 */
int mt_frame_tree_add(struct mt_frame_tree *t, const uint64_t *frames, uint32_t n, uint32_t *node);
/* No more stacks: the table goes. */
void mt_frame_tree_seal(struct mt_frame_tree *t);
/* The frames of node's stack, innermost first, at most max of them; returns how many. */
uint32_t mt_frame_tree_get(const struct mt_frame_tree *t, uint32_t node, uint64_t *frames,
                           uint32_t max);

/* A walk up node's stack, its innermost frame first, that reads no more frames than it needs. */
struct mt_frame_walk {
	const struct mt_frame_tree *tree;
	uint32_t node; /* the next frame's; 0: none left */
};

/* The walk's next frame and its node (the stack of its frames from there out); false at the end. */
static inline bool mt_frame_walk_next(struct mt_frame_walk *w, uint64_t *frame, uint32_t *node)
{
	if (!w->node)
		return false;
	*node = w->node;
	*frame = w->tree->frame[w->node];
	w->node = w->tree->parent[w->node];
	return true;
}

#endif
