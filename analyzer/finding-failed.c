/* SPDX-License-Identifier: MIT */
/*
 * The allocation-failed finding (diagnosis.h): a request that returned no
 * memory is the headline of a process's diagnosis, whatever else was seen.
 * Its figure is the size asked, set beside what could have served it: the
 * machine's physical memory, the cgroup's limit and the heap's free bytes
 * just before (a CUDA device's free and total memory for a device request).
 * A request above physical memory is a size or shape error far more often
 * than a shortage: the advice says so.
 *
 * May not: print, keep anything per event.
 */
#include <inttypes.h>
#include <stdio.h>

#include "diagnosis.h"
#include "reader.h"

/* Of the failures the replay kept, the largest request: the one to explain. */
static const struct mt_fail_event *largest(const struct mt_instance *in)
{
	const struct mt_fail_event *e = NULL;

	for (uint32_t i = 0; i < in->nfails; i++)
		if (!e || in->fails[i].size > e->size)
			e = &in->fails[i];
	return e;
}

void mt_finding_allocation_failed(struct mt_fragmentation *f, const struct mt_instance *in,
                                  const struct mt_clock_fit *fit)
{
	const struct mt_fail_event *e = largest(in);
	const struct mt_sample_point *s;
	char asked[32], a[32], b[32], more[64] = "";
	uint64_t failed = 0, mem_total = 0, cg_max = 0, limit;
	struct mt_finding *x;
	bool device;
	double at;
	int n;

	if (!e || !(x = mt_diagnosis_add_finding(f, "allocation-failed", e->size)))
		return;
	for (int k = 0; k < MT_KIND_COUNT; k++)
		failed += in->kind[k].failed;
	if (failed > 1)
		snprintf(more, sizeof(more), " (the largest of %" PRIu64 " failed requests)",
		         failed);
	/* physical memory is the same in every sample: the first that knows it */
	for (uint64_t i = 0; i < in->nsamples && !mem_total; i++)
		mem_total = in->samples[i].values[MT_SAMPLE_MEM_TOTAL];
	s = mt_diagnosis_sample_before(in, e->time);
	if (!s && in->nsamples)
		s = &in->samples[0]; /* failed before the first sample: the nearest one */
	if (s)
		cg_max = s->values[MT_SAMPLE_CGROUP_MAX];
	device = e->kind >= MT_KIND_CUDA_DEVICE;
	at = (double)(mt_clock_ns(fit, e->time) - mt_clock_ns(fit, in->start_time)) / 1e9;
	mt_size_text(asked, sizeof(asked), e->size);
	n = snprintf(x->text, sizeof(x->text), "%s asked by %s failed at %.3f s%s", asked,
	             mt_fn_name(e->fn), at, more);
	if (device) {
		limit = e->device_total;
		if (limit) {
			mt_size_text(a, sizeof(a), e->device_total);
			mt_size_text(b, sizeof(b), e->device_free);
			snprintf(x->text + n, sizeof(x->text) - (size_t)n,
			         "; the device has %s, %s of it free then", a, b);
		}
	} else {
		if (mem_total) {
			mt_size_text(a, sizeof(a), mem_total);
			n += snprintf(x->text + n, sizeof(x->text) - (size_t)n,
			              "; this machine has %s", a);
		}
		if (cg_max) {
			mt_size_text(a, sizeof(a), cg_max);
			n += snprintf(x->text + n, sizeof(x->text) - (size_t)n,
			              ", its cgroup allows %s", a);
		}
		if (s && e->kind == MT_KIND_HOST) {
			mt_size_text(a, sizeof(a), s->values[MT_SAMPLE_HEAP_FREE]);
			snprintf(x->text + n, sizeof(x->text) - (size_t)n,
			         ", the heap held %s free just before", a);
		}
		limit = cg_max && (!mem_total || cg_max < mem_total) ? cg_max : mem_total;
	}
	if (limit && e->size > limit)
		snprintf(x->advice, sizeof(x->advice),
		         "more than the %s could ever give: a size or shape error? Check how the "
		         "size was computed (a dimension too many or multiplied twice, a wider "
		         "dtype than meant, a negative count turned unsigned)",
		         device            ? "device"
		         : limit == cg_max ? "cgroup"
		                           : "machine");
	else if (s && e->kind == MT_KIND_HOST && s->values[MT_SAMPLE_HEAP_FREE] >= e->size)
		snprintf(x->advice, sizeof(x->advice),
		         "the heap had that much free, but not in one piece, or the address space "
		         "was limited (ulimit -v): the failure's top stacks say what held the "
		         "memory; free it before, or allocate the large block first");
	else
		snprintf(x->advice, sizeof(x->advice),
		         "the memory was in use: the failure's top stacks (failures[].top_stacks) "
		         "say what held it then; hold less at once, or give the process more "
		         "memory");
}
