/* SPDX-License-Identifier: MIT */
/*
 * A compilation unit's code scopes by address (see scopes.h).
 *
 * Why: dwarf_getscopes walks the unit's DIEs down to the pc at every call,
 * and dwarf_getscopes_die walks them again from the top to find the chain
 * above the DIE found. On a trace of pyenv's CPython (built with -g), whose
 * ceval.c unit inlines thousands of subroutines, the two walks were 53% of
 * `memtrace report`: the same unit walked again for each of its addresses.
 * Here it is walked once, and a look-up is a binary search.
 *
 * The walk goes where libdw's goes (libdw_visit_scopes.c, with
 * dwarf_getscopes' pruning): into the children of the unit, and of a DIE
 * that holds the pc and is a scope or may own scopes (a namespace, class or
 * struct: they hold no pc, so libdw never enters them either). So a DIE
 * holds a pc for libdw only where it and every DIE above it do: each scope
 * is kept as its ranges clipped to those of the DIEs above it (pieces).
 * Pieces then nest (sibling scopes do not overlap in what compilers emit),
 * and sorted by start the innermost piece holding pc is the last to start
 * at or before pc, or the innermost piece around that one that holds pc.
 */
#include <dwarf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "grow.h"
#include "scopes.h"

/* DIEs nested deeper than this are not entered (a hostile file's recursion). */
#define MAX_DEPTH 256

struct scope {
	Dwarf_Die die;
	int tag;
	int up;
};

struct piece {
	uint64_t lo, hi; /* [lo, hi) */
	int scope;
	int up;         /* the innermost piece around this one, or -1 */
	unsigned depth; /* of the scope's DIE: a scope outranges its child on a tie */
};

struct range {
	uint64_t lo, hi;
};

struct mt_scopes {
	struct scope *scopes;
	size_t nscopes, scopes_cap;
	struct piece *pieces;
	size_t npieces, pieces_cap;
	/* the walk's path: each DIE's clipped ranges, outermost first */
	struct range *path;
	size_t npath, path_cap;
};

/* Whether libdw's walk enters a DIE of this tag that holds the pc (classify_die). */
static bool enters(int tag)
{
	switch (tag) {
	case DW_TAG_compile_unit:
	case DW_TAG_module:
	case DW_TAG_lexical_block:
	case DW_TAG_with_stmt:
	case DW_TAG_catch_block:
	case DW_TAG_try_block:
	case DW_TAG_entry_point:
	case DW_TAG_inlined_subroutine:
	case DW_TAG_subprogram:
	case DW_TAG_namespace:
	case DW_TAG_class_type:
	case DW_TAG_structure_type:
		return true;
	default:
		return false;
	}
}

/* die's ranges clipped to path[from, to), appended to the path; -ENOMEM. */
static int clip(struct mt_scopes *s, Dwarf_Die *die, size_t from, size_t to)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;

	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		for (size_t i = from; i < to; i++) {
			uint64_t a = lo > s->path[i].lo ? lo : s->path[i].lo;
			uint64_t b = hi < s->path[i].hi ? hi : s->path[i].hi;

			if (a >= b)
				continue;
			if (mt_grow((void **)&s->path, &s->path_cap, s->npath + 1,
			            sizeof(*s->path)))
				return -ENOMEM;
			s->path[s->npath++] = (struct range){a, b};
		}
	}
	return 0;
}

/* A scope whose pieces are path[from, npath); its index, or -ENOMEM. */
static int add_scope(struct mt_scopes *s, Dwarf_Die *die, int tag, int up, size_t from,
                     unsigned depth)
{
	int id = (int)s->nscopes;

	if (mt_grow((void **)&s->scopes, &s->scopes_cap, s->nscopes + 1, sizeof(*s->scopes)) ||
	    mt_grow((void **)&s->pieces, &s->pieces_cap, s->npieces + (s->npath - from),
	            sizeof(*s->pieces)))
		return -ENOMEM;
	s->scopes[s->nscopes++] = (struct scope){*die, tag, up};
	for (size_t i = from; i < s->npath; i++)
		s->pieces[s->npieces++] =
		        (struct piece){s->path[i].lo, s->path[i].hi, id, -1, depth};
	return id;
}

/* The children of parent, whose clipped ranges are path[from, to), inside scope up. */
static int walk(struct mt_scopes *s, Dwarf_Die *parent, size_t from, size_t to, int up,
                unsigned depth)
{
	Dwarf_Die child;
	int r;

	if (depth > MAX_DEPTH || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		size_t mark = s->npath;
		int tag, inner = up;

		if ((r = clip(s, &child, from, to)) < 0)
			return r;
		if (s->npath == mark)
			continue; /* holds no pc: libdw prunes it */
		tag = dwarf_tag(&child);
		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
			if ((inner = add_scope(s, &child, tag, up, mark, depth)) < 0)
				return inner;
		}
		if (enters(tag) && (r = walk(s, &child, mark, s->npath, inner, depth + 1)) < 0)
			return r;
		s->npath = mark;
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	if (x->hi != y->hi)
		return x->hi > y->hi ? -1 : 1;
	return (x->depth > y->depth) - (x->depth < y->depth);
}

/* Each piece's innermost piece around it, in start order. */
static int nest(struct mt_scopes *s)
{
	int *open = malloc((s->npieces ? s->npieces : 1) * sizeof(*open));
	size_t n = 0;

	if (!open)
		return -ENOMEM;
	qsort(s->pieces, s->npieces, sizeof(*s->pieces), cmp_piece);
	for (size_t i = 0; i < s->npieces; i++) {
		while (n && s->pieces[open[n - 1]].hi <= s->pieces[i].lo)
			n--;
		s->pieces[i].up = n ? open[n - 1] : -1;
		open[n++] = (int)i;
	}
	free(open);
	return 0;
}

struct mt_scopes *mt_scopes_new(Dwarf_Die *cudie)
{
	struct mt_scopes *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	/* the unit's own ranges prune nothing: libdw starts at its children */
	if (mt_grow((void **)&s->path, &s->path_cap, 1, sizeof(*s->path))) {
		free(s);
		return NULL;
	}
	s->path[s->npath++] = (struct range){0, UINT64_MAX};
	if (walk(s, cudie, 0, 1, -1, 1) < 0 || nest(s) < 0) {
		mt_scopes_free(s);
		return NULL;
	}
	free(s->path); /* the walk's only */
	s->path = NULL;
	s->npath = s->path_cap = 0;
	return s;
}

void mt_scopes_free(struct mt_scopes *s)
{
	if (!s)
		return;
	free(s->scopes);
	free(s->pieces);
	free(s->path);
	free(s);
}

int mt_scopes_at(const struct mt_scopes *s, Dwarf_Addr pc)
{
	size_t lo = 0, hi = s->npieces;

	while (lo < hi) { /* the first piece starting after pc */
		size_t mid = lo + (hi - lo) / 2;

		if (s->pieces[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int i = (int)lo - 1; i >= 0; i = s->pieces[i].up)
		if (pc < s->pieces[i].hi)
			return s->pieces[i].scope;
	return -1;
}

Dwarf_Die *mt_scopes_die(const struct mt_scopes *s, int scope)
{
	return &s->scopes[scope].die;
}

int mt_scopes_tag(const struct mt_scopes *s, int scope)
{
	return s->scopes[scope].tag;
}

int mt_scopes_up(const struct mt_scopes *s, int scope)
{
	return s->scopes[scope].up;
}
