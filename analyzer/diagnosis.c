/* SPDX-License-Identifier: MIT */
/*
 * Diagnosis (see diagnosis.h): the sampler's series, the
 * fragmentation findings, the post-mortem and the tree's combined peak.
 *
 * Findings are sentences built here, not in the report, so that the text and
 * the JSON say the same thing; the thresholds below decide when a figure is
 * worth a finding, and each is named next to its reason.
 *
 * May not: print, symbolize, keep anything per event.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnosis.h"
#include "heap-findings.h"

#define MIB (1024ull * 1024ull)
/* glibc's default mmap threshold and the most its dynamic threshold can reach (64-bit) */
#define GLIBC_MMAP_THRESHOLD_MAX (32 * MIB)
/* Below these, a gap or a free top is the ordinary slack of any allocator. */
#define FINDING_GAP_MIN (16 * MIB)
#define FINDING_TOP_MIN (8 * MIB)

void mt_size_text(char *buf, size_t n, uint64_t bytes)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, n, "%" PRIu64 " B", bytes);
		return;
	}
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, n, "%.*f %s", v < 10.0 ? 2 : v < 100.0 ? 1 : 0, v, units[u]);
}

/* ---- glibc's dynamic mmap threshold ---- */

/*
 * glibc serves a block of at least the mmap threshold (128 KiB) with its own
 * mmap; when such a block is freed, the threshold rises to its size (up to
 * 32 MiB), and from then on blocks below it come from the heap, which keeps
 * their memory after free. We cannot see which blocks were mmapped, so a
 * free of a host block in that range stands for it.
 */
void mt_diagnosis_note_free(struct mt_diagnosis *d, const struct mt_instance *in, uint64_t size,
                            uint64_t time)
{
	struct mt_mmap_threshold *m = &d->mmap_threshold;

	if (size < MT_GLIBC_MMAP_THRESHOLD || size > GLIBC_MMAP_THRESHOLD_MAX ||
	    size <= m->threshold)
		return;
	if (!m->raised) {
		m->raised = true;
		m->raise_sample = in->nsamples;
	}
	m->threshold = size;
	m->threshold_time = time;
}

void mt_diagnosis_note_alloc(struct mt_diagnosis *d, const struct mt_instance *in, uint64_t addr,
                             uint64_t size)
{
	struct mt_mmap_threshold *m = &d->mmap_threshold;

	if (m->raised && size >= MT_GLIBC_MMAP_THRESHOLD && size < m->threshold) {
		m->large_after++;
		m->large_after_bytes += size;
	}
	mt_diagnosis_arena(d, in, addr, size);
}

/* ---- the series ---- */

static void summarize(struct mt_memory_over_time *mem, const struct mt_instance *in)
{
	const struct mt_sample_point *first, *last;

	memset(mem, 0, sizeof(*mem));
	if (!in->nsamples)
		return;
	first = &in->samples[0];
	last = &in->samples[in->nsamples - 1];
	mem->samples = in->nsamples;
	mem->rss_first = first->values[MT_SAMPLE_RSS];
	mem->rss_last = last->values[MT_SAMPLE_RSS];
	mem->pss_first = first->values[MT_SAMPLE_PSS];
	mem->pss_last = last->values[MT_SAMPLE_PSS];
	mem->private_dirty_first = first->values[MT_SAMPLE_PRIVATE_DIRTY];
	mem->private_dirty_last = last->values[MT_SAMPLE_PRIVATE_DIRTY];
	mem->heap_arena_last = last->values[MT_SAMPLE_HEAP_ARENA];
	mem->heap_in_use_last = last->values[MT_SAMPLE_HEAP_IN_USE];
	mem->heap_free_last = last->values[MT_SAMPLE_HEAP_FREE];
	mem->heap_trimmable_last = last->values[MT_SAMPLE_HEAP_TRIMMABLE];
	mem->heap_mmapped_last = last->values[MT_SAMPLE_HEAP_MMAPPED];
	for (uint64_t i = 0; i < in->nsamples; i++) {
		const uint64_t *v = in->samples[i].values;
		if (v[MT_SAMPLE_RSS] > mem->rss_peak) {
			mem->rss_peak = v[MT_SAMPLE_RSS];
			mem->rss_peak_time = in->samples[i].time;
		}
		if (v[MT_SAMPLE_PSS] > mem->pss_peak)
			mem->pss_peak = v[MT_SAMPLE_PSS];
		if (v[MT_SAMPLE_PRIVATE_DIRTY] > mem->private_dirty_peak)
			mem->private_dirty_peak = v[MT_SAMPLE_PRIVATE_DIRTY];
		if (v[MT_SAMPLE_CGROUP_CURRENT] > mem->cgroup_current_peak)
			mem->cgroup_current_peak = v[MT_SAMPLE_CGROUP_CURRENT];
		if (v[MT_SAMPLE_CGROUP_MAX])
			mem->cgroup_max = v[MT_SAMPLE_CGROUP_MAX];
		if (v[MT_SAMPLE_MEM_TOTAL])
			mem->mem_total = v[MT_SAMPLE_MEM_TOTAL];
	}
}

struct mt_finding *mt_diagnosis_add_finding(struct mt_fragmentation *f, const char *name,
                                            uint64_t figure)
{
	struct mt_finding *x;

	if (f->nfindings == MT_FINDINGS_MAX)
		return NULL;
	if (!f->findings && !(f->findings = malloc(MT_FINDINGS_MAX * sizeof(*f->findings))))
		return NULL;
	x = &f->findings[f->nfindings++];
	memset(x, 0, sizeof(*x));
	x->name = name;
	x->figure = figure;
	return x;
}

/* Over the heap's figures of the moment judged (struct mt_fragmentation). */
static void heap_findings(struct mt_fragmentation *f)
{
	char a[32], b[32], c[32];
	struct mt_finding *x;
	/* free memory in pieces smaller than a page: not even malloc_trim(0) returns it (the
	 * whole free pages it does return are trim_would_return, the free top among them) */
	uint64_t pieces =
	        f->heap_free > f->trim_would_return ? f->heap_free - f->trim_would_return : 0;

	if (pieces >= FINDING_GAP_MIN && f->heap_arena && pieces >= f->heap_arena / 4 &&
	    (x = mt_diagnosis_add_finding(f, "heap-fragmented", pieces))) {
		mt_size_text(a, sizeof(a), pieces);
		mt_size_text(b, sizeof(b), f->heap_arena);
		mt_size_text(c, sizeof(c), f->heap_in_use);
		snprintf(x->text, sizeof(x->text),
		         "at the %s %s of the %s heap was free in pieces smaller than a page "
		         "between blocks in use (%s in use): neither free() nor malloc_trim(0) can "
		         "give it back, and a large request may find no piece big enough",
		         f->moment_text, a, b, c);
		snprintf(x->advice, sizeof(x->advice),
		         "allocate long-lived and short-lived objects apart (or from a pool), or "
		         "use jemalloc/tcmalloc, which fragment less");
	}
	/* weighed against the process: 13 MiB kept in a 300 MiB training run is its slack */
	if (f->heap_trimmable >= FINDING_TOP_MIN && f->heap_trimmable >= f->rss / 8 &&
	    (x = mt_diagnosis_add_finding(f, "trimmable-top", f->heap_trimmable))) {
		mt_size_text(a, sizeof(a), f->heap_trimmable);
		snprintf(x->text, sizeof(x->text),
		         "at the %s the top of the heap held %s free that glibc did not give back "
		         "(glibc's trim threshold rises with its mmap threshold)",
		         f->moment_text, a);
		snprintf(x->advice, sizeof(x->advice),
		         "malloc_trim(0) returns these %s at once; MALLOC_TRIM_THRESHOLD_ (in "
		         "bytes) fixes "
		         "the threshold so glibc trims by itself",
		         a);
	}
}

static void mmap_threshold_finding(struct mt_fragmentation *f, const struct mt_instance *in,
                                   const struct mt_mmap_threshold *m)
{
	const struct mt_sample_point *base;
	uint64_t arena_max = 0, mmapped_max = 0, grew;
	char t[32], l[32], g[32], mm[32];
	struct mt_finding *x;

	if (!m->raised || !m->large_after || !in->nsamples)
		return;
	/* the heap before the raise, or the first look at it after */
	base = &in->samples[m->raise_sample ? m->raise_sample - 1 : 0];
	for (uint64_t i = m->raise_sample; i < in->nsamples; i++) {
		const uint64_t *v = in->samples[i].values;
		if (v[MT_SAMPLE_HEAP_ARENA] > arena_max)
			arena_max = v[MT_SAMPLE_HEAP_ARENA];
		if (v[MT_SAMPLE_HEAP_MMAPPED] > mmapped_max)
			mmapped_max = v[MT_SAMPLE_HEAP_MMAPPED];
	}
	/* the large blocks went to the arena, not to mmap */
	if (arena_max <= base->values[MT_SAMPLE_HEAP_ARENA] ||
	    mmapped_max > base->values[MT_SAMPLE_HEAP_MMAPPED])
		return;
	grew = arena_max - base->values[MT_SAMPLE_HEAP_ARENA];
	if (grew < MIB || !(x = mt_diagnosis_add_finding(f, "mmap-threshold-raised", grew)))
		return;
	mt_size_text(t, sizeof(t), m->threshold);
	mt_size_text(l, sizeof(l), m->large_after_bytes);
	mt_size_text(g, sizeof(g), grew);
	mt_size_text(mm, sizeof(mm), base->values[MT_SAMPLE_HEAP_MMAPPED]);
	/* a ring's window may start after the raise (heap-findings.c says the same) */
	snprintf(x->text, sizeof(x->text),
	         in->window_start ? "glibc's dynamic mmap threshold stood at %s or more (a free of "
	                            "a %s block in the ring's window)"
	                          : "a free of a %s block raised glibc's dynamic mmap threshold "
	                            "to %s",
	         t, t);
	snprintf(x->text + strlen(x->text), sizeof(x->text) - strlen(x->text),
	         ": %" PRIu64 " later blocks of 128 KiB or more (%s) came from the heap instead of "
	         "mmap; the arena grew by %s while mmapped memory stayed at %s or below",
	         m->large_after, l, g, mm);
	snprintf(x->advice, sizeof(x->advice),
	         "set MALLOC_MMAP_THRESHOLD_=131072 (any fixed value turns the dynamic threshold "
	         "off), "
	         "so large blocks stay mmapped and go back to the system when freed");
}

int mt_diagnosis_finish(struct mt_diagnosis *d, const struct mt_instance *in,
                        const struct mt_clock_fit *fit)
{
	struct mt_fragmentation *f = &d->frag;

	mt_growth_sort(d);
	summarize(&d->mem, in);
	free(f->findings);
	memset(f, 0, sizeof(*f));
	/* a failed request is the headline: first, whatever follows */
	mt_finding_allocation_failed(f, in, fit);
	/* before the RSS findings: memory memtrace did not see explains part of their gap */
	mt_finding_untraced_heap(f, in);
	if (d->mem.samples) {
		mt_heap_moment(d, in, fit);
		if (f->have)
			heap_findings(f);
		mmap_threshold_finding(f, in, &d->mmap_threshold);
		mt_heap_findings(d, in, fit);
		mt_arena_bloat(d, in, fit);
	}
	memset(&d->post_mortem, 0, sizeof(d->post_mortem));
	d->post_mortem.killed = in->end == MT_END_KILLED;
	if (d->post_mortem.killed && in->nsamples) {
		const struct mt_sample_point *s = &in->samples[in->nsamples - 1];
		d->post_mortem.have_sample = true;
		d->post_mortem.last_rss = s->values[MT_SAMPLE_RSS];
		d->post_mortem.cgroup_current = s->values[MT_SAMPLE_CGROUP_CURRENT];
		d->post_mortem.cgroup_max = s->values[MT_SAMPLE_CGROUP_MAX];
		d->post_mortem.time = s->time;
	}
	return 0;
}

void mt_diagnosis_free(struct mt_diagnosis *d)
{
	free(d->growth);
	free(d->frag.findings);
	memset(d, 0, sizeof(*d));
}

const struct mt_sample_point *mt_diagnosis_sample_before(const struct mt_instance *in,
                                                         uint64_t time)
{
	uint64_t lo = 0, hi = in->nsamples;

	/* samples are in time order: the first one after `time`, less one */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (in->samples[mid].time <= time)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &in->samples[lo - 1] : NULL;
}

/* ---- the tree ---- */

enum tree_what { TREE_SAMPLE, TREE_FORK, TREE_END };

struct tree_event {
	uint64_t ns;
	uint32_t proc;
	uint8_t what; /* enum tree_what; at one moment in this order */
	uint64_t rss, pss;
	uint64_t pss_ns; /* when Pss was read (a sample may repeat an older one) */
};

/* By time; a process's last sample before its end at the same moment. */
static int cmp_event(const void *a, const void *b)
{
	const struct tree_event *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	if (x->what != y->what)
		return x->what < y->what ? -1 : 1;
	return x->proc < y->proc ? -1 : x->proc > y->proc;
}

/* Whether every live process's Pss was read after the last fork. */
static bool pss_fresh(const uint64_t *pss_ns, const bool *live, uint32_t n, uint64_t fork_ns)
{
	for (uint32_t i = 0; i < n; i++)
		if (live[i] && pss_ns[i] < fork_ns)
			return false;
	return true;
}

int mt_diagnosis_tree(struct mt_tree *t, const struct mt_instance *const *ins, uint32_t n,
                      const struct mt_clock_fit *fit)
{
	struct tree_event *ev;
	uint64_t nev = 0, total = 0, origin = UINT64_MAX, rss = 0, pss = 0, fork_ns = 0;
	uint64_t *cur_rss, *cur_pss, *pss_ns;
	bool *live;

	memset(t, 0, sizeof(*t));
	t->processes = n;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t s = mt_clock_ns(fit, ins[i]->start_time);
		if (ins[i]->have_process && s < origin)
			origin = s;
		if (ins[i]->nsamples) {
			total += ins[i]->nsamples + 1;
			t->sampled++;
		}
		total++; /* its fork */
	}
	if (!t->sampled)
		return 0;
	ev = malloc(total * sizeof(*ev));
	cur_rss = calloc(n, sizeof(*cur_rss));
	cur_pss = calloc(n, sizeof(*cur_pss));
	pss_ns = calloc(n, sizeof(*pss_ns));
	live = calloc(n, sizeof(*live));
	if (!ev || !cur_rss || !cur_pss || !pss_ns || !live) {
		free(ev);
		free(cur_rss);
		free(cur_pss);
		free(pss_ns);
		free(live);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct mt_instance *in = ins[i];
		if (in->have_process && in->origin == MT_ORIGIN_FORK)
			ev[nev++] = (struct tree_event){.ns = mt_clock_ns(fit, in->start_time),
			                                .proc = i,
			                                .what = TREE_FORK};
		if (!in->nsamples)
			continue;
		for (uint64_t j = 0; j < in->nsamples; j++) {
			const uint64_t *v = in->samples[j].values;
			uint64_t at = in->samples[j].time;
			uint64_t read = v[MT_SAMPLE_PSS_AGE] < at ? at - v[MT_SAMPLE_PSS_AGE] : 0;
			ev[nev++] =
			        (struct tree_event){mt_clock_ns(fit, at), i,
			                            TREE_SAMPLE,          v[MT_SAMPLE_RSS],
			                            v[MT_SAMPLE_PSS],     mt_clock_ns(fit, read)};
		}
		/* a process counts until its last record */
		ev[nev++] = (struct tree_event){
		        .ns = mt_clock_ns(fit, in->end_time), .proc = i, .what = TREE_END};
	}
	qsort(ev, nev, sizeof(*ev), cmp_event);
	for (uint64_t i = 0; i < nev; i++) {
		const struct tree_event *e = &ev[i];
		if (e->what == TREE_FORK) {
			fork_ns = e->ns;
			continue;
		}
		rss -= cur_rss[e->proc];
		pss -= cur_pss[e->proc];
		live[e->proc] = e->what == TREE_SAMPLE;
		cur_rss[e->proc] = live[e->proc] ? e->rss : 0;
		cur_pss[e->proc] = live[e->proc] ? e->pss : 0;
		pss_ns[e->proc] = e->pss_ns;
		rss += cur_rss[e->proc];
		pss += cur_pss[e->proc];
		if (rss > t->combined_rss_peak) {
			t->combined_rss_peak = rss;
			t->time_ns = origin != UINT64_MAX && e->ns > origin ? e->ns - origin : 0;
		}
		if (pss_fresh(pss_ns, live, n, fork_ns)) {
			t->pss_known = true;
			if (pss > t->combined_pss_peak)
				t->combined_pss_peak = pss;
		}
	}
	free(ev);
	free(cur_rss);
	free(cur_pss);
	free(pss_ns);
	free(live);
	return 0;
}
