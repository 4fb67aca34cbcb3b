/* SPDX-License-Identifier: MIT */
/*
 * libmemtrace-cupti.so: the CUDA driver's allocations, seen through CUPTI's
 * driver API callbacks and written into libmemtrace.so's trace.
 *
 * The driver loads this library and calls InitializeInjection when
 * CUDA_INJECTION64_PATH names it (memtrace run --cuda sets that). It is what
 * sees programs that link cudart statically and the virtual-memory API
 * (cuMemCreate, PyTorch's expandable segments), which the runtime
 * interposition in libmemtrace.so cannot. This file only talks to CUPTI and
 * the driver; what a callback means is translate.c's business.
 *
 * It may not stop or change the program: when CUPTI cannot start it says so
 * in one line on stderr and returns, and the runtime interposition goes on
 * alone. It exports InitializeInjection only (memtrace-cupti.map). It does
 * not link libcuda: the driver is already loaded when it calls us, and its
 * few functions used here are looked up in it.
 */
#include <cuda.h>
#include <cupti.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <memtrace/trace-format.h>

#include "translate.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int InitializeInjection(void);

/*
 * Every CUPTI call goes through here, once: a failure is described as
 * "<function>: <CUPTI's result string>" into why, for the caller's one line.
 */
static bool cupti_ok(CUptiResult r, const char *fn, char *why, size_t n)
{
	const char *str = NULL;

	if (r == CUPTI_SUCCESS)
		return true;
	if (why) {
		if (cuptiGetResultString(r, &str) != CUPTI_SUCCESS || !str)
			str = "unknown CUPTI error";
		snprintf(why, n, "%s: %s (%d)", fn, str, (int)r);
	}
	return false;
}

#define MT_CUPTI(why, fn, ...)  cupti_ok(fn(__VA_ARGS__), #fn, why, sizeof(why))
#define MT_CUPTI_QUIET(fn, ...) cupti_ok(fn(__VA_ARGS__), #fn, NULL, 0)

/* The driver functions the sink's queries use; resolved once at start. */
static struct {
	CUresult (*ctx_get_current)(CUcontext *ctx);
	CUresult (*mem_get_info)(size_t *free_bytes, size_t *total_bytes);
	CUresult (*pointer_get_attribute)(void *data, CUpointer_attribute attr, CUdeviceptr ptr);
	CUresult (*get_allocation_properties)(CUmemAllocationProp *prop,
	                                      CUmemGenericAllocationHandle handle);
} drv;

static struct mt_cupti_sink sink;
static CUpti_SubscriberHandle subscriber;

/* The ordinal of a context's device; -1 when CUPTI cannot say. */
static int context_device(CUcontext ctx)
{
	uint32_t id;

	if (!ctx || !MT_CUPTI_QUIET(cuptiGetDeviceId, ctx, &id))
		return -1;
	return (int)id;
}

/*
 * cuMemGetInfo answers for the current context's device only, which is the
 * failing call's device in every case but a cuMemCreate for another device:
 * that one gets no figures rather than wrong ones.
 */
static bool query_mem_get_info(int device, uint64_t *free_bytes, uint64_t *total_bytes)
{
	CUcontext ctx;
	size_t f, t;

	if (!drv.ctx_get_current || !drv.mem_get_info)
		return false;
	if (drv.ctx_get_current(&ctx) != CUDA_SUCCESS || context_device(ctx) != device)
		return false;
	if (drv.mem_get_info(&f, &t) != CUDA_SUCCESS)
		return false;
	*free_bytes = f;
	*total_bytes = t;
	return true;
}

/* Where a live pointer's memory is: managed, host (a host-located pool) or a device. */
static bool query_pointer_kind(uint64_t addr, unsigned *kind)
{
	unsigned int managed = 0, type = 0;
	int ordinal = -1;

	if (!drv.pointer_get_attribute)
		return false;
	if (drv.pointer_get_attribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, addr) ==
	            CUDA_SUCCESS &&
	    managed) {
		*kind = MT_KIND_CUDA_MANAGED;
		return true;
	}
	if (drv.pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, addr) ==
	            CUDA_SUCCESS &&
	    type == CU_MEMORYTYPE_HOST) {
		*kind = MT_KIND_CUDA_HOST;
		return true;
	}
	if (drv.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, addr) !=
	    CUDA_SUCCESS)
		return false;
	*kind = mt_cupti_device_kind(ordinal);
	return *kind != MT_CUPTI_NO_KIND;
}

static bool query_handle_kind(uint64_t handle, unsigned *kind)
{
	CUmemAllocationProp prop;

	if (!drv.get_allocation_properties)
		return false;
	memset(&prop, 0, sizeof(prop));
	if (drv.get_allocation_properties(&prop, (CUmemGenericAllocationHandle)handle) !=
	    CUDA_SUCCESS)
		return false;
	*kind = mt_cupti_location_kind((int)prop.location.type, prop.location.id);
	return *kind != MT_CUPTI_NO_KIND;
}

/*
 * Context: a CUPTI callback, inside one of the program's driver calls, on
 * its thread. The driver functions the queries call are not among the
 * enabled callbacks, so nothing here re-enters. errno is the program's.
 */
static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
	const CUpti_CallbackData *d = data;
	struct mt_cupti_call call;
	int saved_errno = errno;

	(void)userdata;
	if (domain != CUPTI_CB_DOMAIN_DRIVER_API || !d)
		return;
	call.cbid = cbid;
	call.site = d->callbackSite == CUPTI_API_ENTER ? MT_CUPTI_ENTER : MT_CUPTI_EXIT;
	call.correlation = d->correlationId;
	call.params = d->functionParams;
	call.result = CUDA_SUCCESS;
	if (call.site == MT_CUPTI_EXIT && d->functionReturnValue)
		call.result = (int)*(const CUresult *)d->functionReturnValue;
	call.device = context_device(d->context);
	mt_cupti_translate(&sink, &call);
	errno = saved_errno;
}

/* ISO C has no cast from dlsym's void * to a function pointer; a copy is exact. */
#define LOOKUP(handle, field, name)                                                                \
	do {                                                                                       \
		void *sym_ = dlsym(handle, name);                                                  \
		_Static_assert(sizeof(sym_) == sizeof(field), name);                               \
		memcpy(&(field), &sym_, sizeof(sym_));                                             \
	} while (0)

/*
 * The one line memtrace says when the driver's allocations go unseen. With
 * libmemtrace.so loaded, the runtime interposition still records cudaMalloc
 * and its family, and the line says so; without it nothing is traced at all.
 */
static void say_not_traced(const char *reason, bool runtime_traced)
{
	void (*say)(const char *text) = NULL;
	char line[512];

	LOOKUP(RTLD_DEFAULT, say, "memtrace_capture_say");
	snprintf(line, sizeof(line), "CUDA allocations through the driver are not traced: %s%s",
	         reason, runtime_traced ? "; the CUDA runtime's are" : "");
	if (say)
		say(line); /* never into a file the program put at descriptor 2 */
	else
		fprintf(stderr, "memtrace: %s\n", line);
}

/* libmemtrace.so's capture API (include/memtrace/capture.h), found in the process. */
static bool find_capture_api(void)
{
	LOOKUP(RTLD_DEFAULT, sink.stack, "memtrace_capture_stack");
	LOOKUP(RTLD_DEFAULT, sink.alloc, "memtrace_capture_alloc");
	LOOKUP(RTLD_DEFAULT, sink.free, "memtrace_capture_free");
	LOOKUP(RTLD_DEFAULT, sink.fail, "memtrace_capture_fail");
	LOOKUP(RTLD_DEFAULT, sink.runtime_active, "memtrace_capture_runtime_active");
	return sink.stack && sink.alloc && sink.free && sink.fail && sink.runtime_active;
}

/* Whether libmemtrace.so is in the process at all (its soname), API or not. */
static bool memtrace_loaded(void)
{
	void *lib = dlopen("libmemtrace.so", RTLD_LAZY | RTLD_NOLOAD);

	if (!lib)
		return false;
	dlclose(lib);
	return true;
}

/*
 * The driver is loaded by the time it calls InitializeInjection; RTLD_NOLOAD
 * never loads it where it is not. The queries are optional: without one, a
 * kind falls back to the context's device and failures lack free/total.
 */
static bool find_driver(void)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);

	if (!cuda)
		return false;
	LOOKUP(cuda, drv.ctx_get_current, "cuCtxGetCurrent");
	LOOKUP(cuda, drv.mem_get_info, "cuMemGetInfo_v2");
	LOOKUP(cuda, drv.pointer_get_attribute, "cuPointerGetAttribute");
	LOOKUP(cuda, drv.get_allocation_properties, "cuMemGetAllocationPropertiesFromHandle");
	sink.mem_get_info = query_mem_get_info;
	sink.pointer_kind = query_pointer_kind;
	sink.handle_kind = query_handle_kind;
	return true;
}

/*
 * Enables every callback translate.c handles, or none: allocations seen
 * without their frees (or the reverse) would be worse than nothing. A CUPTI
 * that does not know one of the ids is too old for memtrace.
 */
static bool enable_callbacks(char *why, size_t n)
{
	char what[200];
	uint32_t version = 0;

	for (size_t i = 0; i < mt_cupti_callback_id_count; i++) {
		uint32_t id = mt_cupti_callback_ids[i];

		if (MT_CUPTI(what, cuptiEnableCallback, 1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
		             id))
			continue;
		MT_CUPTI_QUIET(cuptiGetVersion, &version);
		snprintf(why, n, "CUPTI (API version %u) cannot trace driver callback %u: %s",
		         version, id, what);
		MT_CUPTI_QUIET(cuptiUnsubscribe, subscriber);
		return false;
	}
	return true;
}

/*
 * Context: called by the driver, once, inside the program's first cuInit,
 * on the program's thread. Returns 1 whatever happens, as NVIDIA's samples
 * do: memtrace's failure must never become the program's.
 */
EXPORT int InitializeInjection(void)
{
	static atomic_flag started = ATOMIC_FLAG_INIT;
	char why[256];
	CUptiResult r;

	if (atomic_flag_test_and_set(&started))
		return 1;
	if (!find_capture_api()) {
		say_not_traced(
		        memtrace_loaded()
		                ? "this libmemtrace.so has no capture API (memtrace_capture_*)"
		                : "libmemtrace.so is not loaded (run the program under memtrace "
		                  "run)",
		        false);
		return 1;
	}
	if (!find_driver()) {
		say_not_traced("no CUDA driver (libcuda.so.1 is not loaded)", true);
		return 1;
	}

	r = cuptiSubscribe(&subscriber, on_callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		say_not_traced(
		        "another tool (a profiler such as Nsight Systems) already holds CUPTI",
		        true);
		return 1;
	}
	if (!cupti_ok(r, "cuptiSubscribe", why, sizeof(why))) {
		say_not_traced(why, true);
		return 1;
	}
	if (!enable_callbacks(why, sizeof(why))) {
		say_not_traced(why, true);
		return 1;
	}
	return 1;
}
