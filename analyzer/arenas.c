/* SPDX-License-Identifier: MIT */
/*
 * arena-bloat (see heap-findings.h): which host blocks glibc served from
 * arenas besides the main heap, noted as they are replayed (O(1) each), and
 * the finding when the arenas together stood far above the live peak.
 *
 * May not: print, symbolize, keep anything per event.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap-findings.h"

#define MIB (1024ull * 1024ull)

/* Arenas hold far more than the live peak: three times it (two arenas each holding a
 * peak's worth is what MALLOC_ARENA_MAX=2 costs at most) and this much more. */
#define ARENA_TIMES_PEAK 3
#define ARENA_EXCESS_MIN (32 * MIB)

/*
 * The main heap grows up from the executable's end (brk); the other arenas
 * are mappings, below the libraries as every mapping the kernel places: far
 * apart either way. Blocks closer to the libraries than to the executable
 * are not in the main heap.
 */
static void find_floor(struct mt_arenas *a, const struct mt_instance *in)
{
	/* the executable is the first module */
	uint64_t exe = in->nmodules ? in->modules[0].base : 0, lib = UINT64_MAX;

	for (uint32_t i = 1; i < in->nmodules; i++)
		if (in->modules[i].base > exe && in->modules[i].base < lib)
			lib = in->modules[i].base;
	a->floor = lib == UINT64_MAX ? UINT64_MAX : exe + (lib - exe) / 2;
	a->modules_seen = in->nmodules;
}

void mt_diagnosis_arena(struct mt_diagnosis *d, const struct mt_instance *in, uint64_t addr,
                        uint64_t size)
{
	struct mt_arenas *a = &d->arenas;
	uint64_t heap = addr >> MT_ARENA_HEAP_SHIFT;
	uint32_t i;

	if (a->modules_seen != in->nmodules)
		find_floor(a, in);
	if (!in->nmodules || addr < a->floor || (addr & 0xfff) == MT_MMAPPED_OFFSET)
		return;
	a->blocks++;
	a->bytes += size;
	for (i = 0; i < a->nheaps && a->heaps[i] != heap; i++)
		;
	if (i == a->nheaps && a->nheaps < MT_ARENAS_MAX)
		a->heaps[a->nheaps++] = heap;
	if (i < a->nheaps)
		a->last = i;
}

/*
 * arena-bloat: blocks were live in arenas besides the main heap, and glibc's
 * arenas together (mallinfo2's arena at its most) stood far above the live
 * peak. Its figure is that arena total.
 */
void mt_arena_bloat(struct mt_diagnosis *d, const struct mt_instance *in,
                    const struct mt_clock_fit *clk)
{
	const struct mt_arenas *a = &d->arenas;
	uint64_t most = 0, at = 0, peak = in->kind[MT_KIND_HOST].peak_bytes;
	char total[32], live[32], there[32];
	struct mt_finding *x;

	if (!a->nheaps)
		return; /* one arena: the main heap */
	for (uint64_t i = 0; i < in->nsamples; i++)
		if (in->samples[i].values[MT_SAMPLE_HEAP_ARENA] > most) {
			most = in->samples[i].values[MT_SAMPLE_HEAP_ARENA];
			at = in->samples[i].time;
		}
	if (most < ARENA_TIMES_PEAK * peak || most - peak < ARENA_EXCESS_MIN ||
	    !(x = mt_diagnosis_add_finding(&d->frag, "arena-bloat", most)))
		return;
	mt_size_text(total, sizeof(total), most);
	mt_size_text(live, sizeof(live), peak);
	mt_size_text(there, sizeof(there), a->bytes);
	snprintf(x->text, sizeof(x->text),
	         "glibc's arenas held %s (at %.3f s) for a live peak of %s: %" PRIu64
	         " blocks (%s) came from %s%u heaps of arenas besides the main one; each thread "
	         "that "
	         "allocates while others do gets an arena of its own, which keeps what it freed "
	         "for that thread",
	         total, (double)(mt_clock_ns(clk, at) - mt_clock_ns(clk, in->start_time)) / 1e9,
	         live, a->blocks, there, a->nheaps == MT_ARENAS_MAX ? "at least " : "", a->nheaps);
	snprintf(x->advice, sizeof(x->advice),
	         "set MALLOC_ARENA_MAX=2 (or 1): threads then share arenas and reuse each other's "
	         "free memory; or use an allocator whose thread caches give memory back "
	         "(jemalloc, tcmalloc)");
}
