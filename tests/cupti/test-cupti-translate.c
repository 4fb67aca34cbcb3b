/* SPDX-License-Identifier: MIT */
/*
 * Unit test of cupti/translate.c without CUPTI, a driver or a GPU: the
 * callback data CUPTI would hand over is built here, with the driver's real
 * *_params structs, for every callback id libmemtrace-cupti.so enables, at
 * entry and exit, succeeding and failing; a recording sink checks the exact
 * capture calls that come out. What it cannot show: that a real driver fills
 * those structs as its headers say (that needs a GPU; see docs/gpu.md).
 */
#include <cuda.h>
#include <cupti.h>

#include <stdbool.h>
#include <stdint.h>

#include <memtrace/trace-format.h>

#include "../reader/test-common.h"
#include "translate.h"

/* ---- the recording sink ---- */

enum ev_type { EV_ALLOC = 1, EV_FREE, EV_FAIL };

struct ev {
	enum ev_type type;
	uint32_t stack;
	unsigned fn, kind;
	uint64_t addr, size;
	int err;
	uint64_t device_free, device_total;
};

static struct ev evs[64];
static unsigned n_evs;
static unsigned n_stacks;     /* stack() calls */
static uint32_t next_stack;   /* the id the next stack() call returns */
static bool runtime_on;       /* what runtime_active() answers */
static int mem_info_device;   /* the device mem_get_info was last asked about; -1: never */
static bool mem_info_answers; /* whether it knows */

/* what pointer_kind() and handle_kind() know: one address or handle each */
static uint64_t known_pointer, known_handle;
static unsigned known_pointer_kind, known_handle_kind;

#define DEVICE_FREE  ((uint64_t)123 << 20)
#define DEVICE_TOTAL ((uint64_t)16 << 30)

static uint32_t rec_stack(void)
{
	n_stacks++;
	return next_stack++;
}

static struct ev *add(enum ev_type type)
{
	static struct ev overflow;

	if (n_evs == sizeof(evs) / sizeof(evs[0]))
		return &overflow;
	evs[n_evs] = (struct ev){.type = type};
	return &evs[n_evs++];
}

static void rec_alloc(uint32_t stack, unsigned fn, unsigned kind, uint64_t addr, uint64_t size)
{
	struct ev *e = add(EV_ALLOC);

	e->stack = stack;
	e->fn = fn;
	e->kind = kind;
	e->addr = addr;
	e->size = size;
}

static void rec_free(unsigned fn, unsigned kind, uint64_t addr)
{
	struct ev *e = add(EV_FREE);

	e->fn = fn;
	e->kind = kind;
	e->addr = addr;
}

static void rec_fail(uint32_t stack, unsigned fn, unsigned kind, uint64_t size, int err,
                     uint64_t device_free, uint64_t device_total)
{
	struct ev *e = add(EV_FAIL);

	e->stack = stack;
	e->fn = fn;
	e->kind = kind;
	e->size = size;
	e->err = err;
	e->device_free = device_free;
	e->device_total = device_total;
}

static bool rec_runtime_active(void)
{
	return runtime_on;
}

static bool rec_mem_get_info(int device, uint64_t *free_bytes, uint64_t *total_bytes)
{
	mem_info_device = device;
	if (!mem_info_answers)
		return false;
	*free_bytes = DEVICE_FREE;
	*total_bytes = DEVICE_TOTAL;
	return true;
}

static bool rec_pointer_kind(uint64_t addr, unsigned *kind)
{
	if (!known_pointer || addr != known_pointer)
		return false;
	*kind = known_pointer_kind;
	return true;
}

static bool rec_handle_kind(uint64_t handle, unsigned *kind)
{
	if (!known_handle || handle != known_handle)
		return false;
	*kind = known_handle_kind;
	return true;
}

static const struct mt_cupti_sink sink = {
        .stack = rec_stack,
        .alloc = rec_alloc,
        .free = rec_free,
        .fail = rec_fail,
        .runtime_active = rec_runtime_active,
        .mem_get_info = rec_mem_get_info,
        .pointer_kind = rec_pointer_kind,
        .handle_kind = rec_handle_kind,
};

static void reset(void)
{
	n_evs = 0;
	n_stacks = 0;
	next_stack = 100;
	runtime_on = false;
	mem_info_device = -1;
	mem_info_answers = true;
	known_pointer = known_handle = 0;
}

/* ---- driving translate.c as cupti.c would ---- */

static uint32_t covered[64];
static unsigned n_covered;
static uint64_t correlation = 1;

static void cover(uint32_t cbid)
{
	for (unsigned i = 0; i < n_covered; i++)
		if (covered[i] == cbid)
			return;
	covered[n_covered++] = cbid;
}

static void enter(uint32_t cbid, uint64_t corr, const void *params, int device)
{
	struct mt_cupti_call c = {.cbid = cbid,
	                          .site = MT_CUPTI_ENTER,
	                          .correlation = corr,
	                          .params = params,
	                          .result = 0,
	                          .device = device};

	cover(cbid);
	mt_cupti_translate(&sink, &c);
}

static void leave(uint32_t cbid, uint64_t corr, const void *params, int device, CUresult result)
{
	struct mt_cupti_call c = {.cbid = cbid,
	                          .site = MT_CUPTI_EXIT,
	                          .correlation = corr,
	                          .params = params,
	                          .result = (int)result,
	                          .device = device};

	mt_cupti_translate(&sink, &c);
}

/*
 * One whole driver call: entry, the driver's work (done by the caller), exit.
 * A stack taken after the entry would be 900 or more: the records must carry
 * the entry's (100), taken before the driver ran.
 */
#define CALL(cbid, params, device, result, driver_work)                                            \
	do {                                                                                       \
		uint64_t corr_ = correlation++;                                                    \
		enter(CUPTI_DRIVER_TRACE_CBID_##cbid, corr_, (params), (device));                  \
		next_stack = 900;                                                                  \
		driver_work;                                                                       \
		leave(CUPTI_DRIVER_TRACE_CBID_##cbid, corr_, (params), (device), (result));        \
	} while (0)

#define DEVICE(n) (MT_KIND_CUDA_DEVICE + (n))

static void check_alloc(const struct ev *e, uint32_t stack, unsigned fn, unsigned kind,
                        uint64_t addr, uint64_t size, int line)
{
	if (e->type != EV_ALLOC || e->stack != stack || e->fn != fn || e->kind != kind ||
	    e->addr != addr || e->size != size) {
		fprintf(stderr,
		        "%s:%d: got type %d stack %u fn %u kind %u addr %#" PRIx64 " size %" PRIu64
		        ", expected alloc stack %u fn %u kind %u addr %#" PRIx64 " size %" PRIu64
		        "\n",
		        __FILE__, line, (int)e->type, e->stack, e->fn, e->kind, e->addr, e->size,
		        stack, fn, kind, addr, size);
		test_failures++;
	}
}

static void check_free(const struct ev *e, unsigned fn, unsigned kind, uint64_t addr, int line)
{
	if (e->type != EV_FREE || e->fn != fn || e->kind != kind || e->addr != addr) {
		fprintf(stderr,
		        "%s:%d: got type %d fn %u kind %u addr %#" PRIx64
		        ", expected free fn %u kind %u addr %#" PRIx64 "\n",
		        __FILE__, line, (int)e->type, e->fn, e->kind, e->addr, fn, kind, addr);
		test_failures++;
	}
}

static void check_fail(const struct ev *e, uint32_t stack, unsigned fn, unsigned kind,
                       uint64_t size, int err, uint64_t dfree, uint64_t dtotal, int line)
{
	if (e->type != EV_FAIL || e->stack != stack || e->fn != fn || e->kind != kind ||
	    e->size != size || e->err != err || e->device_free != dfree ||
	    e->device_total != dtotal) {
		fprintf(stderr,
		        "%s:%d: got type %d stack %u fn %u kind %u size %" PRIu64
		        " err %d free %" PRIu64 " total %" PRIu64 ", expected fail stack %u fn %u"
		        " kind %u size %" PRIu64 " err %d free %" PRIu64 " total %" PRIu64 "\n",
		        __FILE__, line, (int)e->type, e->stack, e->fn, e->kind, e->size, e->err,
		        e->device_free, e->device_total, stack, fn, kind, size, err, dfree, dtotal);
		test_failures++;
	}
}

#define ALLOC(i, ...) check_alloc(&evs[i], __VA_ARGS__, __LINE__)
#define FREE(i, ...)  check_free(&evs[i], __VA_ARGS__, __LINE__)
#define FAIL(i, ...)  check_fail(&evs[i], __VA_ARGS__, __LINE__)

/* ---- the device allocations ---- */

static void test_mem_alloc(void)
{
	CUdeviceptr ptr = 0;
	cuMemAlloc_v2_params p = {.dptr = &ptr, .bytesize = 4096};

	reset();
	CALL(cuMemAlloc_v2, &p, 1, CUDA_SUCCESS, ptr = 0x7f1000000000);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_ALLOC, DEVICE(1), 0x7f1000000000, 4096);
	CHECK_EQ(n_stacks, 1); /* taken at entry, used at exit */

	/* out of memory: the size asked, the error, the device's figures after */
	reset();
	ptr = 0;
	p.bytesize = (uint64_t)20 << 30;
	CALL(cuMemAlloc_v2, &p, 0, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	CHECK_EQ(n_evs, 1);
	FAIL(0, 100, MT_FN_CU_MEM_ALLOC, DEVICE(0), (uint64_t)20 << 30, CUDA_ERROR_OUT_OF_MEMORY,
	     DEVICE_FREE, DEVICE_TOTAL);
	CHECK_EQ(mem_info_device, 0);

	/* the figures unknown: 0 and 0, the failure still recorded */
	reset();
	mem_info_answers = false;
	CALL(cuMemAlloc_v2, &p, 2, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	CHECK_EQ(n_evs, 1);
	FAIL(0, 100, MT_FN_CU_MEM_ALLOC, DEVICE(2), (uint64_t)20 << 30, CUDA_ERROR_OUT_OF_MEMORY, 0,
	     0);

	/* a device beyond what the format names: nothing, rather than a wrong account */
	reset();
	p.bytesize = 4096;
	CALL(cuMemAlloc_v2, &p, MT_MAX_CUDA_DEVICES, CUDA_SUCCESS, ptr = 0x7f1000002000);
	CHECK_EQ(n_evs, 0);
}

static void test_mem_alloc_pitch(void)
{
	CUdeviceptr ptr = 0;
	size_t pitch = 0;
	cuMemAllocPitch_v2_params p = {.dptr = &ptr,
	                               .pPitch = &pitch,
	                               .WidthInBytes = 1000,
	                               .Height = 10,
	                               .ElementSizeBytes = 4};

	/* what the device gave: the pitch the driver chose, times the rows */
	reset();
	CALL(cuMemAllocPitch_v2, &p, 0, CUDA_SUCCESS, (ptr = 0x7f1000100000, pitch = 1024));
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_ALLOC_PITCH, DEVICE(0), 0x7f1000100000, 10240);

	/* failed: no pitch was chosen; the size asked */
	reset();
	pitch = 0;
	CALL(cuMemAllocPitch_v2, &p, 0, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	CHECK_EQ(n_evs, 1);
	FAIL(0, 100, MT_FN_CU_MEM_ALLOC_PITCH, DEVICE(0), 10000, CUDA_ERROR_OUT_OF_MEMORY,
	     DEVICE_FREE, DEVICE_TOTAL);
}

static void test_mem_alloc_managed(void)
{
	CUdeviceptr ptr = 0;
	cuMemAllocManaged_params p = {
	        .dptr = &ptr, .bytesize = 1 << 20, .flags = CU_MEM_ATTACH_GLOBAL};

	reset();
	CALL(cuMemAllocManaged, &p, 3, CUDA_SUCCESS, ptr = 0x7f2000000000);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_ALLOC_MANAGED, MT_KIND_CUDA_MANAGED, 0x7f2000000000, 1 << 20);

	/* a managed failure carries the context device's figures */
	reset();
	CALL(cuMemAllocManaged, &p, 3, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	CHECK_EQ(n_evs, 1);
	FAIL(0, 100, MT_FN_CU_MEM_ALLOC_MANAGED, MT_KIND_CUDA_MANAGED, 1 << 20,
	     CUDA_ERROR_OUT_OF_MEMORY, DEVICE_FREE, DEVICE_TOTAL);
	CHECK_EQ(mem_info_device, 3);
}

static void test_mem_free(void)
{
	cuMemFree_v2_params p = {.dptr = 0x7f1000000000};

	/* written at entry, before the driver can give the address out again */
	reset();
	enter(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, 7, &p, 1);
	CHECK_EQ(n_evs, 1);
	FREE(0, MT_FN_CU_MEM_FREE, DEVICE(1), 0x7f1000000000);
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, 7, &p, 1, CUDA_SUCCESS);
	CHECK_EQ(n_evs, 1);
	CHECK_EQ(n_stacks, 0);

	/* cuMemFree also frees managed memory: the driver says which it is */
	reset();
	known_pointer = 0x7f1000000000;
	known_pointer_kind = MT_KIND_CUDA_MANAGED;
	CALL(cuMemFree_v2, &p, 1, CUDA_SUCCESS, (void)0);
	CHECK_EQ(n_evs, 1);
	FREE(0, MT_FN_CU_MEM_FREE, MT_KIND_CUDA_MANAGED, 0x7f1000000000);

	/* and another device's pointer is put back on that device's account */
	reset();
	known_pointer = 0x7f1000000000;
	known_pointer_kind = DEVICE(2);
	CALL(cuMemFree_v2, &p, 0, CUDA_SUCCESS, (void)0);
	FREE(0, MT_FN_CU_MEM_FREE, DEVICE(2), 0x7f1000000000);

	/* a failed free is not an event; freeing 0 is none either */
	reset();
	CALL(cuMemFree_v2, &p, 0, CUDA_ERROR_INVALID_VALUE, (void)0);
	CHECK_EQ(n_evs, 1); /* the entry's record only */
	reset();
	p.dptr = 0;
	CALL(cuMemFree_v2, &p, 0, CUDA_SUCCESS, (void)0);
	CHECK_EQ(n_evs, 0);
}

/* ---- pinned host memory ---- */

static void test_host_alloc(void)
{
	static char block[64];
	void *ptr = NULL;
	cuMemHostAlloc_params p = {.pp = &ptr, .bytesize = 8192, .Flags = CU_MEMHOSTALLOC_PORTABLE};
	cuMemAllocHost_v2_params q = {.pp = &ptr, .bytesize = 4096};
	cuMemFreeHost_params f = {.p = block};

	reset();
	CALL(cuMemHostAlloc, &p, 0, CUDA_SUCCESS, ptr = block);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_HOST_ALLOC, MT_KIND_CUDA_HOST, (uintptr_t)block, 8192);

	/* host memory failing says nothing of the device: no figures, none asked */
	reset();
	CALL(cuMemHostAlloc, &p, 0, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	CHECK_EQ(n_evs, 1);
	FAIL(0, 100, MT_FN_CU_MEM_HOST_ALLOC, MT_KIND_CUDA_HOST, 8192, CUDA_ERROR_OUT_OF_MEMORY, 0,
	     0);
	CHECK_EQ(mem_info_device, -1);

	/* cuMemAllocHost is cuMemHostAlloc without flags, and recorded as one */
	reset();
	CALL(cuMemAllocHost_v2, &q, 1, CUDA_SUCCESS, ptr = block);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_HOST_ALLOC, MT_KIND_CUDA_HOST, (uintptr_t)block, 4096);
	reset();
	CALL(cuMemAllocHost_v2, &q, 1, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	FAIL(0, 100, MT_FN_CU_MEM_HOST_ALLOC, MT_KIND_CUDA_HOST, 4096, CUDA_ERROR_OUT_OF_MEMORY, 0,
	     0);

	/* the free: at entry, host kind whatever the driver would say */
	reset();
	known_pointer = (uintptr_t)block;
	known_pointer_kind = DEVICE(0);
	enter(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, 9, &f, 0);
	CHECK_EQ(n_evs, 1);
	FREE(0, MT_FN_CU_MEM_FREE_HOST, MT_KIND_CUDA_HOST, (uintptr_t)block);
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, 9, &f, 0, CUDA_SUCCESS);
	CHECK_EQ(n_evs, 1);
}

/* ---- stream-ordered allocations ---- */

static void test_async(void)
{
	CUdeviceptr ptr = 0;
	cuMemAllocAsync_params a = {.dptr = &ptr, .bytesize = 512, .hStream = NULL};
	cuMemAllocAsync_ptsz_params a_ptsz = {.dptr = &ptr, .bytesize = 768, .hStream = NULL};
	cuMemAllocFromPoolAsync_params pool = {.dptr = &ptr, .bytesize = 1024};
	cuMemAllocFromPoolAsync_ptsz_params pool_ptsz = {.dptr = &ptr, .bytesize = 2048};
	cuMemFreeAsync_params f = {.dptr = 0x7f3000000000};
	cuMemFreeAsync_ptsz_params f_ptsz = {.dptr = 0x7f3000001000};

	/* the context's device when the driver cannot say */
	reset();
	CALL(cuMemAllocAsync, &a, 0, CUDA_SUCCESS, ptr = 0x7f3000000000);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_ALLOC_ASYNC, DEVICE(0), 0x7f3000000000, 512);

	/* the stream's device, which the driver knows from the pointer */
	reset();
	known_pointer = 0x7f3000001000;
	known_pointer_kind = DEVICE(1);
	CALL(cuMemAllocAsync_ptsz, &a_ptsz, 0, CUDA_SUCCESS, ptr = 0x7f3000001000);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_ALLOC_ASYNC, DEVICE(1), 0x7f3000001000, 768);

	reset();
	CALL(cuMemAllocAsync, &a, 1, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	FAIL(0, 100, MT_FN_CU_MEM_ALLOC_ASYNC, DEVICE(1), 512, CUDA_ERROR_OUT_OF_MEMORY,
	     DEVICE_FREE, DEVICE_TOTAL);
	reset();
	CALL(cuMemAllocAsync_ptsz, &a_ptsz, 1, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	FAIL(0, 100, MT_FN_CU_MEM_ALLOC_ASYNC, DEVICE(1), 768, CUDA_ERROR_OUT_OF_MEMORY,
	     DEVICE_FREE, DEVICE_TOTAL);

	/* a pool located on the host */
	reset();
	known_pointer = 0x7f3000002000;
	known_pointer_kind = MT_KIND_CUDA_HOST;
	CALL(cuMemAllocFromPoolAsync, &pool, 0, CUDA_SUCCESS, ptr = 0x7f3000002000);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC, MT_KIND_CUDA_HOST, 0x7f3000002000, 1024);
	reset();
	CALL(cuMemAllocFromPoolAsync_ptsz, &pool_ptsz, 2, CUDA_SUCCESS, ptr = 0x7f3000003000);
	ALLOC(0, 100, MT_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC, DEVICE(2), 0x7f3000003000, 2048);
	reset();
	CALL(cuMemAllocFromPoolAsync, &pool, 2, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	FAIL(0, 100, MT_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC, DEVICE(2), 1024, CUDA_ERROR_OUT_OF_MEMORY,
	     DEVICE_FREE, DEVICE_TOTAL);
	reset();
	CALL(cuMemAllocFromPoolAsync_ptsz, &pool_ptsz, 2, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	FAIL(0, 100, MT_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC, DEVICE(2), 2048, CUDA_ERROR_OUT_OF_MEMORY,
	     DEVICE_FREE, DEVICE_TOTAL);

	/* frees, at entry */
	reset();
	enter(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, 11, &f, 0);
	CHECK_EQ(n_evs, 1);
	FREE(0, MT_FN_CU_MEM_FREE_ASYNC, DEVICE(0), 0x7f3000000000);
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, 11, &f, 0, CUDA_SUCCESS);
	CHECK_EQ(n_evs, 1);
	reset();
	known_pointer = 0x7f3000001000;
	known_pointer_kind = DEVICE(1);
	CALL(cuMemFreeAsync_ptsz, &f_ptsz, 0, CUDA_SUCCESS, (void)0);
	CHECK_EQ(n_evs, 1);
	FREE(0, MT_FN_CU_MEM_FREE_ASYNC, DEVICE(1), 0x7f3000001000);
}

/* ---- the virtual-memory API ---- */

static void test_vmm(void)
{
	CUmemGenericAllocationHandle handle = 0;
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
	                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 3}};
	cuMemCreate_params create = {.handle = &handle, .size = (size_t)2 << 20, .prop = &prop};
	cuMemMap_params map = {.ptr = 0x7f4000000000,
	                       .size = (size_t)2 << 20,
	                       .offset = 0,
	                       .handle = 0x5555000010,
	                       .flags = 0};
	cuMemUnmap_params unmap = {.ptr = 0x7f4000000000, .size = (size_t)2 << 20};
	cuMemRelease_params release = {.handle = 0x5555000010};

	/* the handle stands for the physical memory, on the device prop names
	 * (not the context's) */
	reset();
	CALL(cuMemCreate, &create, 0, CUDA_SUCCESS, handle = 0x5555000010);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_CREATE, DEVICE(3), 0x5555000010, (uint64_t)2 << 20);

	/* mapping and unmapping place it in address space: not counted again */
	reset();
	CALL(cuMemMap, &map, 0, CUDA_SUCCESS, (void)0);
	CALL(cuMemUnmap, &unmap, 0, CUDA_SUCCESS, (void)0);
	CALL(cuMemMap, &map, 0, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	CALL(cuMemUnmap, &unmap, 0, CUDA_ERROR_INVALID_VALUE, (void)0);
	CHECK_EQ(n_evs, 0);
	CHECK_EQ(n_stacks, 0);

	/* the release, at entry, of the kind the driver gives the handle */
	reset();
	known_handle = 0x5555000010;
	known_handle_kind = DEVICE(3);
	enter(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, 21, &release, 0);
	CHECK_EQ(n_evs, 1);
	FREE(0, MT_FN_CU_MEM_RELEASE, DEVICE(3), 0x5555000010);
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, 21, &release, 0, CUDA_SUCCESS);
	CHECK_EQ(n_evs, 1);
	/* the driver cannot say: the context's device */
	reset();
	CALL(cuMemRelease, &release, 1, CUDA_SUCCESS, (void)0);
	FREE(0, MT_FN_CU_MEM_RELEASE, DEVICE(1), 0x5555000010);

	/* failure on the prop's device, with that device's figures */
	reset();
	handle = 0;
	CALL(cuMemCreate, &create, 0, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	CHECK_EQ(n_evs, 1);
	FAIL(0, 100, MT_FN_CU_MEM_CREATE, DEVICE(3), (uint64_t)2 << 20, CUDA_ERROR_OUT_OF_MEMORY,
	     DEVICE_FREE, DEVICE_TOTAL);
	CHECK_EQ(mem_info_device, 3);

	/* host-located physical memory (CUDA 12.2+) is pinned host memory */
	reset();
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = 1;
	CALL(cuMemCreate, &create, 0, CUDA_SUCCESS, handle = 0x5555000020);
	ALLOC(0, 100, MT_FN_CU_MEM_CREATE, MT_KIND_CUDA_HOST, 0x5555000020, (uint64_t)2 << 20);
	reset();
	CALL(cuMemCreate, &create, 0, CUDA_ERROR_OUT_OF_MEMORY, (void)0);
	FAIL(0, 100, MT_FN_CU_MEM_CREATE, MT_KIND_CUDA_HOST, (uint64_t)2 << 20,
	     CUDA_ERROR_OUT_OF_MEMORY, 0, 0);
}

/* ---- across calls ---- */

/* Inside an interposed runtime function nothing is recorded, and no stack taken. */
static void test_runtime_active(void)
{
	CUdeviceptr ptr = 0;
	void *host = NULL;
	CUmemGenericAllocationHandle handle = 0;
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
	                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
	cuMemAlloc_v2_params alloc = {.dptr = &ptr, .bytesize = 64};
	cuMemFree_v2_params free_ = {.dptr = 0x7f1000000000};
	cuMemAllocPitch_v2_params pitch = {
	        .dptr = &ptr, .pPitch = &(size_t){0}, .WidthInBytes = 8, .Height = 8};
	cuMemAllocManaged_params managed = {.dptr = &ptr, .bytesize = 64};
	cuMemHostAlloc_params hostalloc = {.pp = &host, .bytesize = 64};
	cuMemAllocHost_v2_params allochost = {.pp = &host, .bytesize = 64};
	cuMemFreeHost_params freehost = {.p = (void *)0x1000};
	cuMemAllocAsync_params async = {.dptr = &ptr, .bytesize = 64};
	cuMemFreeAsync_params freeasync = {.dptr = 0x7f1000000000};
	cuMemAllocFromPoolAsync_params pool = {.dptr = &ptr, .bytesize = 64};
	cuMemCreate_params create = {.handle = &handle, .size = 64, .prop = &prop};
	cuMemRelease_params release = {.handle = 0x5555000010};

	reset();
	runtime_on = true;
	for (int ok = 0; ok < 2; ok++) {
		CUresult r = ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;

		CALL(cuMemAlloc_v2, &alloc, 0, r, ptr = 0x7f1000000000);
		CALL(cuMemFree_v2, &free_, 0, r, (void)0);
		CALL(cuMemAllocPitch_v2, &pitch, 0, r, ptr = 0x7f1000000000);
		CALL(cuMemAllocManaged, &managed, 0, r, ptr = 0x7f1000000000);
		CALL(cuMemHostAlloc, &hostalloc, 0, r, host = (void *)0x1000);
		CALL(cuMemAllocHost_v2, &allochost, 0, r, host = (void *)0x1000);
		CALL(cuMemFreeHost, &freehost, 0, r, (void)0);
		CALL(cuMemAllocAsync, &async, 0, r, ptr = 0x7f1000000000);
		CALL(cuMemAllocAsync_ptsz, &async, 0, r, ptr = 0x7f1000000000);
		CALL(cuMemFreeAsync, &freeasync, 0, r, (void)0);
		CALL(cuMemFreeAsync_ptsz, &freeasync, 0, r, (void)0);
		CALL(cuMemAllocFromPoolAsync, &pool, 0, r, ptr = 0x7f1000000000);
		CALL(cuMemAllocFromPoolAsync_ptsz, &pool, 0, r, ptr = 0x7f1000000000);
		CALL(cuMemCreate, &create, 0, r, handle = 0x5555000010);
		CALL(cuMemRelease, &release, 0, r, (void)0);
	}
	CHECK_EQ(n_evs, 0);
	CHECK_EQ(n_stacks, 0);
	CHECK_EQ(mem_info_device, -1);
}

/* Calls inside calls keep their own stacks; an exit without its entry takes one. */
static void test_nesting(void)
{
	CUdeviceptr outer_ptr = 0, inner_ptr = 0;
	cuMemAlloc_v2_params outer = {.dptr = &outer_ptr, .bytesize = 100};
	cuMemAlloc_v2_params inner = {.dptr = &inner_ptr, .bytesize = 200};

	reset();
	enter(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 1000, &outer, 0); /* stack 100 */
	enter(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 1001, &inner, 0); /* stack 101 */
	inner_ptr = 0x7f5000000000;
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 1001, &inner, 0, CUDA_SUCCESS);
	outer_ptr = 0x7f5000001000;
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 1000, &outer, 0, CUDA_SUCCESS);
	CHECK_EQ(n_evs, 2);
	ALLOC(0, 101, MT_FN_CU_MEM_ALLOC, DEVICE(0), 0x7f5000000000, 200);
	ALLOC(1, 100, MT_FN_CU_MEM_ALLOC, DEVICE(0), 0x7f5000001000, 100);

	/* an exit whose entry was not seen (enabled in between): stack taken at exit */
	reset();
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 2000, &outer, 0, CUDA_SUCCESS);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100, MT_FN_CU_MEM_ALLOC, DEVICE(0), 0x7f5000001000, 100);
	CHECK_EQ(n_stacks, 1);

	/* entries that never see their exits do not stop later calls from matching */
	reset();
	for (uint64_t i = 0; i < 3 * MT_CUPTI_MAX_NESTING; i++)
		enter(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 3000 + i, &outer, 0);
	enter(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 4000, &inner, 0);
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 4000, &inner, 0, CUDA_SUCCESS);
	CHECK_EQ(n_evs, 1);
	ALLOC(0, 100 + 3 * MT_CUPTI_MAX_NESTING, MT_FN_CU_MEM_ALLOC, DEVICE(0), 0x7f5000000000,
	      200);

	/* a runtime call around the exit only (entry taken before the hook): the
	 * pending entry is dropped, nothing recorded */
	reset();
	enter(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 5000, &inner, 0);
	runtime_on = true;
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 5000, &inner, 0, CUDA_SUCCESS);
	runtime_on = false;
	CHECK_EQ(n_evs, 0);

	/* ids not translated, and missing params, are ignored */
	reset();
	enter(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, 6000, &inner, 0);
	leave(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, 6000, &inner, 0, CUDA_SUCCESS);
	{
		struct mt_cupti_call c = {.cbid = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
		                          .site = MT_CUPTI_EXIT,
		                          .params = NULL};
		mt_cupti_translate(&sink, &c);
	}
	CHECK_EQ(n_evs, 0);
	CHECK_EQ(n_stacks, 0);
}

/* Every id libmemtrace-cupti.so enables was driven above, and nothing else. */
static void test_coverage(void)
{
	for (size_t i = 0; i < mt_cupti_callback_id_count; i++) {
		bool seen = false;

		for (unsigned j = 0; j < n_covered; j++)
			seen |= covered[j] == mt_cupti_callback_ids[i];
		if (!seen) {
			fprintf(stderr, "callback id %u is enabled but not tested\n",
			        mt_cupti_callback_ids[i]);
			test_failures++;
		}
	}
	/* the ids the issue names (cuMemAllocHost_v2 and the _ptsz twins besides) */
	static const uint32_t named[] = {
	        CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
	        CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
	        CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
	        CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
	        CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
	        CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
	        CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
	        CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
	        CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
	        CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
	        CUPTI_DRIVER_TRACE_CBID_cuMemMap,
	        CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
	        CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
	        CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
	};
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		bool enabled = false;

		for (size_t j = 0; j < mt_cupti_callback_id_count; j++)
			enabled |= mt_cupti_callback_ids[j] == named[i];
		if (!enabled) {
			fprintf(stderr, "callback id %u is not enabled\n", named[i]);
			test_failures++;
		}
	}
}

int main(void)
{
	test_mem_alloc();
	test_mem_alloc_pitch();
	test_mem_alloc_managed();
	test_mem_free();
	test_host_alloc();
	test_async();
	test_vmm();
	test_runtime_active();
	test_nesting();
	test_coverage();
	if (test_failures)
		fprintf(stderr, "%d check(s) failed\n", test_failures);
	return test_failures ? 1 : 0;
}
