/* SPDX-License-Identifier: MIT */
/*
 * `memtrace report --json`: the report as one object (docs/json-report.md),
 * also the figures `memtrace view` puts in its page.
 *
 * May not: compute figures (analysis.c does) or symbolize a stack it does
 * not include.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>

#include "analysis.h"
#include "commands.h"
#include "report-json.h"

#define MAX_FRAMES 512

/* A stack's row, or its group's (a failure's stack is the stack itself). */
static struct mt_stack_row find_row(struct mt_analysis *a, const struct mt_kind_result *k,
                                    uint32_t si, uint32_t stack)
{
	struct mt_stack_row none;

	mt_analysis_representative(a, &si, &stack); /* without memory: the stack as it is */
	none = (struct mt_stack_row){.stack = stack, .stack_instance = si};
	for (size_t i = 0; i < k->nrows; i++)
		if (k->rows[i].stack == stack && k->rows[i].stack_instance == si)
			return k->rows[i];
	return none;
}

json_t *mt_json_u64(uint64_t v)
{
	/* jansson integers are signed 64-bit; larger sizes (an overflowed calloc) become reals */
	return v > INT64_MAX ? json_real((double)v) : json_integer((json_int_t)v);
}

json_t *mt_json_frames(struct mt_analysis *a, struct mt_sym *syms, uint32_t si, uint32_t stack,
                       int *count)
{
	json_t *frames = json_array();
	int n = *count = mt_analysis_frames(a, si, stack, syms, MAX_FRAMES);

	for (int i = 0; i < n; i++) {
		json_t *f = json_object();
		json_object_set_new(f, "function", mt_json_text(syms[i].function));
		json_object_set_new(f, "file", mt_json_text(syms[i].file));
		json_object_set_new(f, "line", json_integer(syms[i].line));
		json_object_set_new(f, "module", mt_json_text(syms[i].module));
		json_object_set_new(f, "address", mt_json_u64(syms[i].address));
		json_object_set_new(f, "offset", mt_json_u64(syms[i].offset));
		json_object_set_new(f, "inlined", json_boolean(syms[i].inlined));
		/* a native-only trace reads as before: the groups' keys only with groups */
		if (mt_analysis_has_groups(a))
			json_object_set_new(f, "folded", mt_json_text(syms[i].tail));
		json_array_append_new(frames, f);
	}
	return frames;
}

/* The stacks a row holds: a group's, or the row's own stack. */
static json_t *merged_json(const struct mt_stack_row *row)
{
	struct mt_stack_ref own = {row->stack_instance, row->stack};
	const struct mt_stack_ref *refs = row->merged ? row->merged : &own;
	json_t *a = json_array();

	for (uint32_t i = 0; i < (row->merged ? row->nmerged : 1); i++) {
		json_t *o = json_object();
		json_object_set_new(o, "stack", json_integer(refs[i].stack));
		json_object_set_new(o, "stack_instance", json_integer(refs[i].stack_instance));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *stack_json(struct mt_analysis *a, struct mt_sym *syms,
                          const struct mt_stack_row *row, uint64_t bytes, uint64_t blocks)
{
	json_t *o = json_object();
	char label[1024];
	int n;

	json_object_set_new(o, "bytes", mt_json_u64(bytes));
	json_object_set_new(o, "blocks", mt_json_u64(blocks));
	json_object_set_new(o, "allocations", mt_json_u64(row->allocations));
	json_object_set_new(o, "temporary", mt_json_u64(row->temporary));
	json_object_set_new(o, "stack", json_integer(row->stack));
	json_object_set_new(o, "stack_instance", json_integer(row->stack_instance));
	if (mt_analysis_has_groups(a))
		json_object_set_new(o, "stacks", merged_json(row));
	json_object_set_new(o, "frames",
	                    mt_json_frames(a, syms, row->stack_instance, row->stack, &n));
	/* the label is text already escaped, as the report prints it */
	if (n > 0)
		mt_cmd_label_text(label, sizeof(label), syms, n);
	json_object_set_new(o, "label", n > 0 ? json_string(label) : json_null());
	/* a leak stack's split (stacks_json); every STACK has the key */
	json_object_set_new(o, "reachability", json_null());
	return o;
}

/* {"definite": {"bytes", "blocks"}, ... "unclassified": {...}} */
static json_t *leak_kinds_json(const struct mt_leak_count *c)
{
	json_t *o = json_object();

	for (int i = 0; i < MT_LEAK_CLASS_COUNT; i++) {
		json_t *x = json_object();
		json_object_set_new(x, "bytes", mt_json_u64(c[i].bytes));
		json_object_set_new(x, "blocks", mt_json_u64(c[i].blocks));
		json_object_set_new(o, mt_leak_class_name((enum mt_leak_class)i), x);
	}
	return o;
}

static json_t *stacks_json(struct mt_analysis *a, struct mt_sym *syms,
                           const struct mt_kind_result *k, enum mt_metric m, unsigned top,
                           size_t *total)
{
	json_t *arr = json_array();
	size_t n;
	struct mt_stack_row *rows = mt_cmd_ranked(k, m, &n);

	*total = n;
	for (size_t i = 0; rows && i < n && i < top; i++) {
		const struct mt_stack_row *r = &rows[i];
		json_t *o;
		if (m == MT_METRIC_PEAK) {
			json_array_append_new(
			        arr, stack_json(a, syms, r, r->peak_bytes, r->peak_blocks));
			continue;
		}
		o = stack_json(a, syms, r, r->leaked_bytes, r->leaked_blocks);
		json_object_set_new(o, "reachability",
		                    k->classified ? leak_kinds_json(r->reach) : json_null());
		json_array_append_new(arr, o);
	}
	free(rows);
	return arr;
}

/* null for a full capture; the interval and the exact threshold of a sampled one */
static json_t *sampling_json(const struct mt_instance *in)
{
	json_t *o;

	if (!in->sampling)
		return json_null();
	o = json_object();
	json_object_set_new(o, "interval_bytes", mt_json_u64(in->sampling));
	json_object_set_new(o, "exact_above_bytes",
	                    mt_json_u64(mt_sampling_exact_above(in->sampling)));
	return o;
}

static json_t *kind_json(struct mt_analysis *a, struct mt_sym *syms,
                         const struct mt_process_result *p, enum mt_kind kind, unsigned top)
{
	const struct mt_kind_result *k = &p->kind[kind];
	const struct mt_kind_stats *s = &k->stats;
	json_t *o = json_object(), *fails = json_array(), *hist = json_array();
	char why[128];
	const char *missing = mt_reach_missing(p->in, &p->reach, kind, why, sizeof(why));
	size_t total;

	json_object_set_new(o, "allocations", mt_json_u64(s->allocations));
	json_object_set_new(o, "frees", mt_json_u64(s->frees));
	json_object_set_new(o, "bytes_allocated", mt_json_u64(s->bytes_allocated));
	json_object_set_new(o, "temporary_allocations", mt_json_u64(k->temporary));
	json_object_set_new(o, "peak_bytes", mt_json_u64(s->peak_bytes));
	json_object_set_new(o, "peak_blocks", mt_json_u64(s->peak_blocks));
	json_object_set_new(o, "peak_time_ns",
	                    mt_json_u64(mt_analysis_since_start(a, p->in, s->peak_time)));
	json_object_set_new(o, "leaked_bytes", mt_json_u64(k->leaked_bytes));
	json_object_set_new(o, "leaked_blocks", mt_json_u64(k->leaked_blocks));
	json_object_set_new(o, "leak_kinds",
	                    k->classified ? leak_kinds_json(k->leak_kinds) : json_null());
	json_object_set_new(o, "leak_kinds_missing",
	                    k->classified ? json_null() : json_string(missing ? missing : ""));
	json_object_set_new(o, "live_at_end_bytes", mt_json_u64(s->live_bytes));
	json_object_set_new(o, "live_at_end_blocks", mt_json_u64(s->live_blocks));
	json_object_set_new(o, "inherited_bytes", mt_json_u64(s->inherited_bytes));
	json_object_set_new(o, "inherited_blocks", mt_json_u64(s->inherited_blocks));
	json_object_set_new(o, "unknown_frees", mt_json_u64(s->unknown_frees));
	json_object_set_new(o, "failed_allocations", mt_json_u64(s->failed));
	json_object_set_new(o, "peak_stacks", stacks_json(a, syms, k, MT_METRIC_PEAK, top, &total));
	json_object_set_new(o, "peak_stacks_total", mt_json_u64(total));
	json_object_set_new(o, "leak_stacks",
	                    stacks_json(a, syms, k, MT_METRIC_LEAKED, top, &total));
	json_object_set_new(o, "leak_stacks_total", mt_json_u64(total));
	for (uint32_t i = 0; i < k->nfails; i++) {
		const struct mt_fail_snapshot *f = &k->fails[i];
		const char *fn = mt_fn_name(f->event.fn);
		/* a STACK like the others: bytes asked for, no block, the stack's counts */
		struct mt_stack_row row = find_row(a, k, p->in->id, f->event.stack);
		json_t *fo = json_object(), *held = json_array();
		json_object_set_new(fo, "function", json_string(fn ? fn : "unknown"));
		json_object_set_new(fo, "size", mt_json_u64(f->event.size));
		/* a CUDA failure's code is a cudaError_t or CUresult, not an errno */
		json_object_set_new(fo, f->event.kind >= MT_KIND_CUDA_HOST ? "cuda_error" : "errno",
		                    json_integer(f->event.err));
		json_object_set_new(fo, "time_ns",
		                    mt_json_u64(mt_analysis_since_start(a, p->in, f->event.time)));
		json_object_set_new(fo, "live_bytes", mt_json_u64(f->live_bytes));
		json_object_set_new(fo, "live_blocks", mt_json_u64(f->live_blocks));
		if (f->event.kind < MT_KIND_CUDA_HOST) {
			json_object_set_new(fo, "heap_free_before",
			                    f->have_sample_before ? mt_json_u64(f->heap_free_before)
			                                          : json_null());
			json_object_set_new(fo, "rss_before",
			                    f->have_sample_before ? mt_json_u64(f->rss_before)
			                                          : json_null());
		}
		if (f->event.device_total) {
			json_object_set_new(fo, "device_free", mt_json_u64(f->event.device_free));
			json_object_set_new(fo, "device_total", mt_json_u64(f->event.device_total));
		}
		json_object_set_new(fo, "stack", stack_json(a, syms, &row, f->event.size, 0));
		for (uint32_t t = 0; t < f->ntop; t++) {
			/* the snapshot holds what was live then; the counts are the stack's */
			struct mt_stack_row held_row =
			        find_row(a, k, f->top[t].stack_instance, f->top[t].stack);
			json_array_append_new(held,
			                      stack_json(a, syms, &held_row, f->top[t].leaked_bytes,
			                                 f->top[t].leaked_blocks));
		}
		json_object_set_new(fo, "top_stacks", held);
		json_array_append_new(fails, fo);
	}
	json_object_set_new(o, "failures", fails);
	for (int b = 0; b < MT_HISTOGRAM_BUCKETS; b++) {
		json_t *h;
		if (!k->histogram[b])
			continue;
		h = json_object();
		json_object_set_new(h, "min", mt_json_u64(b ? UINT64_C(1) << (b - 1) : 0));
		json_object_set_new(h, "max",
		                    mt_json_u64(b == 0    ? 0
		                                : b == 64 ? UINT64_MAX
		                                          : (UINT64_C(1) << b) - 1));
		json_object_set_new(h, "count", mt_json_u64(k->histogram[b]));
		json_array_append_new(hist, h);
	}
	json_object_set_new(o, "histogram", hist);
	return o;
}

static json_t *growth_json(struct mt_analysis *a, struct mt_sym *syms,
                           const struct mt_process_result *p, const struct mt_growth *g)
{
	json_t *o = json_object();
	struct mt_stack_row row = find_row(a, &p->kind[g->kind], g->stack_instance, g->stack);

	json_object_set_new(o, "kind", json_string(mt_kind_name(g->kind)));
	json_object_set_new(o, "bytes_per_second", json_real(g->bytes_per_second));
	json_object_set_new(o, "grown_bytes", json_integer(g->grown_bytes));
	json_object_set_new(o, "from_bytes", mt_json_u64(g->from_bytes));
	json_object_set_new(o, "end_bytes", mt_json_u64(g->end_bytes));
	json_object_set_new(o, "bytes_per_mark",
	                    g->per_mark ? json_real(g->bytes_per_mark) : json_null());
	json_object_set_new(o, "r2", json_real(g->r2));
	json_object_set_new(o, "r2_per_mark",
	                    g->per_mark ? json_real(g->r2_per_mark) : json_null());
	json_object_set_new(o, "stack",
	                    stack_json(a, syms, &row,
	                               g->grown_bytes > 0 ? (uint64_t)g->grown_bytes : 0,
	                               row.leaked_blocks));
	return o;
}

static json_t *live_json(const struct mt_instance *in, const uint64_t *live)
{
	json_t *o = json_object();

	for (int k = 0; k < MT_KIND_COUNT; k++)
		if (mt_kind_shown(in, (unsigned)k))
			json_object_set_new(o, mt_kind_name((unsigned)k), mt_json_u64(live[k]));
	return o;
}

static json_t *diagnosis_json(struct mt_analysis *a, struct mt_sym *syms,
                              const struct mt_process_result *p, unsigned top)
{
	const struct mt_instance *in = p->in;
	const struct mt_diagnosis *d = &p->diag;
	const struct mt_memory_over_time *m = &d->mem;
	const struct mt_fragmentation *f = &d->frag;
	json_t *o = json_object(), *growth = json_array(), *marks = json_array();

	for (size_t i = 0; i < d->ngrowth && i < top; i++)
		json_array_append_new(growth, growth_json(a, syms, p, &d->growth[i]));
	json_object_set_new(o, "growth", growth);
	json_object_set_new(o, "growth_total", mt_json_u64(d->ngrowth));
	for (uint32_t i = 0; i < in->nmarks; i++) {
		json_t *mk = json_object();
		json_object_set_new(mk, "label", mt_json_text(in->marks[i].label));
		json_object_set_new(mk, "time_ns",
		                    mt_json_u64(mt_analysis_since_start(a, in, in->marks[i].time)));
		json_object_set_new(mk, "live", live_json(in, in->marks[i].live));
		json_array_append_new(marks, mk);
	}
	json_object_set_new(o, "marks", marks);
	if (m->samples) {
		json_t *mo = json_object();
		json_object_set_new(mo, "samples", mt_json_u64(m->samples));
#define SET(key) json_object_set_new(mo, #key, mt_json_u64(m->key))
		SET(rss_first);
		SET(rss_last);
		SET(rss_peak);
		SET(pss_first);
		SET(pss_last);
		SET(pss_peak);
		SET(private_dirty_first);
		SET(private_dirty_last);
		SET(private_dirty_peak);
		SET(heap_arena_last);
		SET(heap_in_use_last);
		SET(heap_free_last);
		SET(heap_trimmable_last);
		SET(heap_mmapped_last);
		SET(cgroup_current_peak);
		SET(cgroup_max);
		SET(mem_total);
#undef SET
		json_object_set_new(mo, "rss_peak_time_ns",
		                    mt_json_u64(mt_analysis_since_start(a, in, m->rss_peak_time)));
		json_object_set_new(mo, "private_dirty_growth",
		                    json_integer((json_int_t)m->private_dirty_last -
		                                 (json_int_t)m->private_dirty_first));
		json_object_set_new(o, "memory_over_time", mo);
	} else {
		json_object_set_new(o, "memory_over_time", json_null());
	}
	if (f->have) {
		json_t *fo = json_object(), *fs = json_array();
		json_object_set_new(fo, "rss_minus_live_peak",
		                    json_integer(f->rss_minus_live_peak));
		json_object_set_new(fo, "time_ns",
		                    mt_json_u64(mt_analysis_since_start(a, in, f->time)));
		json_object_set_new(fo, "moment", json_string(f->moment));
		json_object_set_new(fo, "rss", mt_json_u64(f->rss));
		json_object_set_new(fo, "rss_anon", mt_json_u64(f->rss_anon));
		json_object_set_new(fo, "rss_file", mt_json_u64(f->rss_file));
		json_object_set_new(fo, "live_host_bytes", mt_json_u64(f->live_host_bytes));
		json_object_set_new(fo, "live_mmap_bytes", mt_json_u64(f->live_mmap_bytes));
		json_object_set_new(fo, "anon_minus_traced", json_integer(f->anon_minus_traced));
		json_object_set_new(fo, "live_ahead_bytes", mt_json_u64(f->live_ahead));
		json_object_set_new(fo, "heap_time_ns",
		                    mt_json_u64(mt_analysis_since_start(a, in, f->heap_time)));
		json_object_set_new(fo, "heap_live_host_bytes", mt_json_u64(f->heap_live_host));
		json_object_set_new(fo, "heap_arena", mt_json_u64(f->heap_arena));
		json_object_set_new(fo, "heap_in_use", mt_json_u64(f->heap_in_use));
		json_object_set_new(fo, "heap_free", mt_json_u64(f->heap_free));
		json_object_set_new(fo, "heap_trimmable", mt_json_u64(f->heap_trimmable));
		json_object_set_new(fo, "heap_free_kept", mt_json_u64(f->heap_free_kept));
		json_object_set_new(fo, "trim_would_return", mt_json_u64(f->trim_would_return));
		for (uint32_t i = 0; i < f->nfindings; i++) {
			json_t *x = json_object();
			json_object_set_new(x, "finding", json_string(f->findings[i].name));
			json_object_set_new(x, "figure", mt_json_u64(f->findings[i].figure));
			json_object_set_new(x, "text", json_string(f->findings[i].text));
			json_object_set_new(x, "advice", json_string(f->findings[i].advice));
			json_array_append_new(fs, x);
		}
		json_object_set_new(fo, "findings", fs);
		json_object_set_new(o, "fragmentation", fo);
	} else {
		json_object_set_new(o, "fragmentation", json_null());
	}
	if (d->post_mortem.killed) {
		const struct mt_post_mortem *pm = &d->post_mortem;
		json_t *po = json_object(), *grow = json_array();
		uint64_t live[MT_KIND_COUNT];
		for (int k = 0; k < MT_KIND_COUNT; k++)
			live[k] = p->kind[k].leaked_bytes;
		json_object_set_new(po, "last_rss",
		                    pm->have_sample ? mt_json_u64(pm->last_rss) : json_null());
		json_object_set_new(po, "cgroup_current",
		                    pm->have_sample ? mt_json_u64(pm->cgroup_current)
		                                    : json_null());
		json_object_set_new(po, "cgroup_max",
		                    pm->have_sample ? mt_json_u64(pm->cgroup_max) : json_null());
		json_object_set_new(po, "time_ns",
		                    pm->have_sample
		                            ? mt_json_u64(mt_analysis_since_start(a, in, pm->time))
		                            : json_null());
		json_object_set_new(po, "end_time_ns",
		                    mt_json_u64(mt_analysis_since_start(a, in, in->end_time)));
		json_object_set_new(po, "live_at_death", live_json(in, live));
		for (size_t i = 0; i < d->ngrowth && i < 3; i++)
			json_array_append_new(grow, growth_json(a, syms, p, &d->growth[i]));
		json_object_set_new(po, "growing", grow);
		json_object_set_new(o, "post_mortem", po);
	} else {
		json_object_set_new(o, "post_mortem", json_null());
	}
	return o;
}

/* The exit's reachability scan (REACH), or null when the process wrote none. */
static json_t *scan_json(const struct mt_reach_scan *s)
{
	const char *status = mt_reach_status_name(s->status);
	json_t *o;

	if (!s->seen)
		return json_null();
	o = json_object();
	json_object_set_new(o, "status", status ? json_string(status) : mt_json_u64(s->status));
	json_object_set_new(o, "detail", mt_json_u64(s->detail));
	json_object_set_new(o, "blocks", mt_json_u64(s->blocks));
	json_object_set_new(o, "bytes", mt_json_u64(s->bytes));
	json_object_set_new(o, "scanned_bytes", mt_json_u64(s->scanned));
	json_object_set_new(o, "ns", mt_json_u64(s->ns));
	json_object_set_new(o, "trace_chunks_read", mt_json_u64(s->chunks));
	return o;
}

static json_t *tree_json(const struct mt_analysis *a)
{
	json_t *o = json_object();
	bool any = a->tree.sampled > 0;

	json_object_set_new(o, "processes", json_integer(a->tree.processes));
	json_object_set_new(o, "processes_sampled", json_integer(a->tree.sampled));
	json_object_set_new(o, "combined_rss_peak",
	                    any ? mt_json_u64(a->tree.combined_rss_peak) : json_null());
	json_object_set_new(o, "combined_pss_peak",
	                    a->tree.pss_known ? mt_json_u64(a->tree.combined_pss_peak)
	                                      : json_null());
	json_object_set_new(o, "time_ns", any ? mt_json_u64(a->tree.time_ns) : json_null());
	return o;
}

json_t *mt_report_json(struct mt_analysis *a, const char *file, unsigned top)
{
	struct mt_sym *syms = calloc(MAX_FRAMES, sizeof(*syms));
	json_t *root = json_object(), *procs = json_array();

	json_object_set_new(root, "memtrace_report", json_integer(1));
	json_object_set_new(root, "file", mt_json_text(file));
	json_object_set_new(root, "events", mt_json_u64(a->events));
	for (uint32_t i = 0; syms && i < a->nprocs; i++) {
		const struct mt_process_result *p = &a->procs[i];
		const struct mt_instance *in = p->in;
		json_t *o = json_object(), *mem = json_object();

		json_object_set_new(o, "pid", json_integer(in->pid));
		json_object_set_new(o, "ppid", json_integer(in->ppid));
		json_object_set_new(o, "instance", json_integer(in->id));
		json_object_set_new(o, "origin",
		                    json_string(in->origin == MT_ORIGIN_FORK   ? "fork"
		                                : in->origin == MT_ORIGIN_EXEC ? "exec"
		                                                               : "root"));
		json_object_set_new(o, "parent_instance", json_integer(in->parent_instance));
		json_object_set_new(o, "command", mt_json_text(in->cmdline ? in->cmdline : ""));
		json_object_set_new(o, "exe", mt_json_text(in->exe ? in->exe : ""));
		json_object_set_new(o, "end", json_string(mt_end_name(in->end)));
		if (in->end == MT_END_EXIT) {
			json_object_set_new(o, "exit_status", json_integer(in->exit_status));
			json_object_set_new(o, "exit_how",
			                    json_string(mt_cmd_exit_how(in->exit_how)));
		} else {
			/* every key is in every process (docs/json-report.md), null where it does
			 * not apply */
			json_object_set_new(o, "exit_status", json_null());
			json_object_set_new(o, "exit_how", json_null());
		}
		json_object_set_new(o, "exec_path",
		                    mt_json_text(mt_end_replaced(in->end) ? in->exec_path : NULL));
		json_object_set_new(o, "stop_errno",
		                    in->end == MT_END_STOPPED ? json_integer(in->stopped_errno)
		                                              : json_null());
		json_object_set_new(o, "threads", json_integer(in->threads));
		json_object_set_new(o, "events", mt_json_u64(in->events));
		json_object_set_new(o, "lost_stack_events", mt_json_u64(in->lost_stack_events));
		json_object_set_new(o, "sampling", sampling_json(in));
		for (int k = 0; k < MT_KIND_COUNT; k++)
			if (mt_kind_shown(in, (unsigned)k))
				json_object_set_new(mem, mt_kind_name((unsigned)k),
				                    kind_json(a, syms, p, (enum mt_kind)k, top));
		json_object_set_new(o, "memories", mem);
		json_object_set_new(o, "reachability_scan", scan_json(&p->reach));
		json_object_set_new(o, "diagnosis", diagnosis_json(a, syms, p, top));
		json_array_append_new(procs, o);
	}
	json_object_set_new(root, "processes", procs);
	json_object_set_new(root, "tree", tree_json(a));
	free(syms);
	return root;
}
