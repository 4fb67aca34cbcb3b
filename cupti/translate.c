/* SPDX-License-Identifier: MIT */
/*
 * Translation of CUDA driver API callbacks into memtrace records: which
 * driver call is an allocation or a free, of which memory kind, at which
 * address and of what size. See translate.h for the contract; cupti.c is the
 * half that talks to CUPTI.
 *
 * It may not call CUPTI or the driver except through the sink, allocate,
 * print or change errno. All state is the calling thread's: the stacks taken
 * at API entry, kept for the matching exit.
 */
#include "translate.h"

/* cupti.h is the one way to include generated_cuda_meta.h (the *_params
 * structs): it declares the legacy types those refer to. Only its types and
 * constants are used; nothing here links libcupti. */
#include <cuda.h>
#include <cupti.h>

#include <memtrace/trace-format.h>

/*
 * cuMemMap and cuMemUnmap are enabled but produce nothing: they only place
 * physical memory made by cuMemCreate in a virtual address range (the same
 * handle may be mapped at several ranges, and a range may be unmapped while
 * the handle lives on). Physical memory is what a device runs out of, so it
 * is counted where it is made and given back: cuMemCreate and cuMemRelease.
 * Their callbacks are still enabled so that the tests pin this decision down
 * and a later version can record mappings without changing cupti.c.
 *
 * The _ptsz ids are the same functions called with the per-thread default
 * stream (nvcc --default-stream per-thread); their params are identical.
 */
const uint32_t mt_cupti_callback_ids[] = {
        CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
        CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
        CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
        CUPTI_DRIVER_TRACE_CBID_cuMemMap,
        CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
};
const size_t mt_cupti_callback_id_count =
        sizeof(mt_cupti_callback_ids) / sizeof(mt_cupti_callback_ids[0]);

/* One allocating call, as far as its params and the device tell. */
struct alloc_call {
	unsigned fn;
	unsigned kind;    /* MT_CUPTI_NO_KIND: a device memtrace cannot name */
	bool ask_pointer; /* the pool or stream may be another device's: ask the driver */
	uint64_t size;
	uint64_t addr; /* read from the out-parameter after success only */
};

/* One freeing call. */
struct free_call {
	unsigned fn;
	unsigned kind;
	uint64_t addr; /* or the allocation handle, for cuMemRelease */
	bool is_handle;
};

/*
 * Devices beyond MT_MAX_CUDA_DEVICES (and an unknown device) have no kind in
 * the trace format; their memory is not recorded rather than put on a wrong
 * device's account.
 */
unsigned mt_cupti_device_kind(int device)
{
	if (device < 0 || device >= MT_MAX_CUDA_DEVICES)
		return MT_CUPTI_NO_KIND;
	return MT_KIND_CUDA_DEVICE + (unsigned)device;
}

unsigned mt_cupti_location_kind(int type, int id)
{
	switch (type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		return mt_cupti_device_kind(id);
	case CU_MEM_LOCATION_TYPE_HOST:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
		return MT_KIND_CUDA_HOST;
	default:
		return MT_CUPTI_NO_KIND;
	}
}

static uint64_t read_devptr(const CUdeviceptr *out, bool ok)
{
	return ok && out ? (uint64_t)*out : 0;
}

static uint64_t read_hostptr(void *const *out, bool ok)
{
	return ok && out ? (uint64_t)(uintptr_t)*out : 0;
}

/*
 * Fills *a for an allocating call; false for any other id. ok: the call has
 * returned CUDA_SUCCESS, so its out-parameters may be read.
 */
static bool describe_alloc(const struct mt_cupti_call *c, bool ok, struct alloc_call *a)
{
	a->ask_pointer = false;
	a->kind = mt_cupti_device_kind(c->device);

	switch (c->cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
		const cuMemAlloc_v2_params *p = c->params;
		a->fn = MT_FN_CU_MEM_ALLOC;
		a->size = p->bytesize;
		a->addr = read_devptr(p->dptr, ok);
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
		const cuMemAllocPitch_v2_params *p = c->params;
		a->fn = MT_FN_CU_MEM_ALLOC_PITCH;
		/* the driver pads each row to the pitch it chose: that is what the
		 * device gave; before it has chosen, the size asked is all there is */
		if (ok && p->pPitch)
			a->size = (uint64_t)*p->pPitch * p->Height;
		else
			a->size = (uint64_t)p->WidthInBytes * p->Height;
		a->addr = read_devptr(p->dptr, ok);
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
		const cuMemAllocManaged_params *p = c->params;
		a->fn = MT_FN_CU_MEM_ALLOC_MANAGED;
		a->kind = MT_KIND_CUDA_MANAGED;
		a->size = p->bytesize;
		a->addr = read_devptr(p->dptr, ok);
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
		const cuMemHostAlloc_params *p = c->params;
		a->fn = MT_FN_CU_MEM_HOST_ALLOC;
		a->kind = MT_KIND_CUDA_HOST;
		a->size = p->bytesize;
		a->addr = read_hostptr(p->pp, ok);
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
		/* cuMemHostAlloc with flags 0; the format has no code of its own */
		const cuMemAllocHost_v2_params *p = c->params;
		a->fn = MT_FN_CU_MEM_HOST_ALLOC;
		a->kind = MT_KIND_CUDA_HOST;
		a->size = p->bytesize;
		a->addr = read_hostptr(p->pp, ok);
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
		/* the _ptsz params have the same layout */
		const cuMemAllocAsync_params *p = c->params;
		a->fn = MT_FN_CU_MEM_ALLOC_ASYNC;
		a->size = p->bytesize;
		a->addr = read_devptr(p->dptr, ok);
		a->ask_pointer = true; /* the stream's device, not necessarily the context's */
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
		const cuMemAllocFromPoolAsync_params *p = c->params;
		a->fn = MT_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC;
		a->size = p->bytesize;
		a->addr = read_devptr(p->dptr, ok);
		a->ask_pointer = true; /* the pool's location, which may be the host */
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
		/* physical memory without an address: the handle stands for it
		 * until cuMemRelease (see trace-format.h, MT_FN_CU_MEM_CREATE) */
		const cuMemCreate_params *p = c->params;
		a->fn = MT_FN_CU_MEM_CREATE;
		a->kind = p->prop ? mt_cupti_location_kind((int)p->prop->location.type,
		                                           p->prop->location.id)
		                  : MT_CUPTI_NO_KIND;
		a->size = p->size;
		a->addr = ok && p->handle ? (uint64_t)*p->handle : 0;
		return true;
	}
	default:
		return false;
	}
}

/* Fills *f for a freeing call; false for any other id. */
static bool describe_free(const struct mt_cupti_call *c, struct free_call *f)
{
	f->kind = mt_cupti_device_kind(c->device);
	f->is_handle = false;

	switch (c->cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
		/* also frees cuMemAllocManaged memory: the kind is asked for */
		const cuMemFree_v2_params *p = c->params;
		f->fn = MT_FN_CU_MEM_FREE;
		f->addr = p->dptr;
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost: {
		const cuMemFreeHost_params *p = c->params;
		f->fn = MT_FN_CU_MEM_FREE_HOST;
		f->kind = MT_KIND_CUDA_HOST;
		f->addr = (uint64_t)(uintptr_t)p->p;
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
		const cuMemFreeAsync_params *p = c->params;
		f->fn = MT_FN_CU_MEM_FREE_ASYNC;
		f->addr = p->dptr;
		return true;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
		const cuMemRelease_params *p = c->params;
		f->fn = MT_FN_CU_MEM_RELEASE;
		f->addr = (uint64_t)p->handle;
		f->is_handle = true;
		return true;
	}
	default:
		return false;
	}
}

/*
 * The stacks taken at API entry, by correlation id, until the exit. Driver
 * calls do not nest on one thread, but a callback of another CUPTI client
 * or a signal handler could make one inside another; a small stack of
 * pending entries covers that. An entry that never sees its exit is pushed
 * out by later ones; an exit that finds no entry takes the stack then,
 * which differs from the entry's only in frames inside the driver.
 */
struct pending {
	uint64_t correlation;
	uint32_t stack;
};

static _Thread_local struct pending pending[MT_CUPTI_MAX_NESTING];
static _Thread_local unsigned pending_count;

static void push_stack(uint64_t correlation, uint32_t stack)
{
	if (pending_count == MT_CUPTI_MAX_NESTING) {
		/* the oldest is the likeliest to have lost its exit */
		for (unsigned i = 1; i < MT_CUPTI_MAX_NESTING; i++)
			pending[i - 1] = pending[i];
		pending_count--;
	}
	pending[pending_count].correlation = correlation;
	pending[pending_count].stack = stack;
	pending_count++;
}

static bool pop_stack(uint64_t correlation, uint32_t *stack)
{
	for (unsigned i = pending_count; i-- > 0;) {
		if (pending[i].correlation != correlation)
			continue;
		*stack = pending[i].stack;
		for (unsigned j = i + 1; j < pending_count; j++)
			pending[j - 1] = pending[j];
		pending_count--;
		return true;
	}
	return false;
}

/*
 * API entry: a free is written now, before the driver can hand the address
 * to another thread's allocation; an allocation only takes its stack, while
 * the driver has not yet run a single instruction of it.
 */
static void at_entry(const struct mt_cupti_sink *sink, const struct mt_cupti_call *c)
{
	struct free_call f;
	struct alloc_call a;

	if (describe_free(c, &f)) {
		unsigned kind;

		/* freeing NULL is a no-op the driver allows */
		if (!f.addr)
			return;
		if (f.is_handle) {
			if (sink->handle_kind && sink->handle_kind(f.addr, &kind))
				f.kind = kind;
		} else if (f.kind != MT_KIND_CUDA_HOST) {
			if (sink->pointer_kind && sink->pointer_kind(f.addr, &kind))
				f.kind = kind;
		}
		if (f.kind != MT_CUPTI_NO_KIND)
			sink->free(f.fn, f.kind, f.addr);
		return;
	}
	if (describe_alloc(c, false, &a))
		push_stack(c->correlation, sink->stack());
}

/* API exit: the allocation, or its failure, with the entry's stack. */
static void at_exit(const struct mt_cupti_sink *sink, const struct mt_cupti_call *c)
{
	struct alloc_call a;
	uint32_t stack;
	bool ok = c->result == CUDA_SUCCESS;

	if (!describe_alloc(c, ok, &a))
		return;
	if (!pop_stack(c->correlation, &stack))
		stack = sink->stack();

	if (ok) {
		unsigned kind;

		if (a.ask_pointer && sink->pointer_kind && sink->pointer_kind(a.addr, &kind))
			a.kind = kind;
		if (a.kind != MT_CUPTI_NO_KIND)
			sink->alloc(stack, a.fn, a.kind, a.addr, a.size);
		return;
	}

	/*
	 * The free and total bytes say how close to full the device was. Pinned
	 * host memory is not device memory: for it they would mislead, so they
	 * stay 0 (unknown). Managed memory fails when the device's share cannot
	 * be placed, so the device's figures are the ones that explain it.
	 */
	uint64_t free_bytes = 0, total_bytes = 0;
	int device = c->device;

	if (a.kind >= MT_KIND_CUDA_DEVICE && a.kind != MT_CUPTI_NO_KIND)
		device = (int)(a.kind - MT_KIND_CUDA_DEVICE);
	if (a.kind != MT_KIND_CUDA_HOST && device >= 0 && sink->mem_get_info &&
	    !sink->mem_get_info(device, &free_bytes, &total_bytes))
		free_bytes = total_bytes = 0;
	if (a.kind != MT_CUPTI_NO_KIND)
		sink->fail(stack, a.fn, a.kind, a.size, c->result, free_bytes, total_bytes);
}

void mt_cupti_translate(const struct mt_cupti_sink *sink, const struct mt_cupti_call *c)
{
	if (!c->params)
		return;
	/*
	 * Inside an interposed cudaMalloc & co. the runtime hook records the
	 * allocation itself, with the runtime's function code; the driver call
	 * it makes is the same memory and would count it twice. A pending entry
	 * (taken before the runtime hook was entered) is dropped at the exit.
	 */
	if (sink->runtime_active()) {
		uint32_t unused;

		if (c->site == MT_CUPTI_EXIT)
			pop_stack(c->correlation, &unused);
		return;
	}
	if (c->site == MT_CUPTI_ENTER)
		at_entry(sink, c);
	else
		at_exit(sink, c);
}
