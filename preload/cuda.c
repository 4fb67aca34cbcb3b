/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime's allocation functions, interposed like malloc: each
 * calls the real one (found with dlsym(RTLD_NEXT), so programs that load
 * libcudart at run time, as PyTorch does, are seen) and records the event
 * with its memory kind: cuda:N for the device current at the call,
 * cuda-managed, or cuda-host for pinned host memory. A failed allocation is
 * recorded with the device's free and total bytes taken right after it:
 * the diagnosis of a CUDA out-of-memory error.
 *
 * While a runtime function runs, the thread is marked (runtime_active), so
 * that the CUPTI module does not count the driver call it makes a second
 * time. The library needs no CUDA header: the few types are declared here.
 *
 * Context: hot path of the CUDA functions. May not: change what they return
 * or errno, call them when the program has no libcudart.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>

#include "memtrace/capture.h"
#include "mt.h"

typedef int cuda_error;
#define CUDA_SUCCESS         0
#define CUDA_ERROR_NOT_FOUND 500 /* cudaErrorSymbolNotFound: no libcudart to call */

struct cuda_pitched_ptr {
	void *ptr;
	size_t pitch, xsize, ysize;
};

struct cuda_extent {
	size_t width, height, depth;
};

/* The runtime's declarations, as cuda_runtime_api.h has them (which we do not need). */
cuda_error cudaMalloc(void **p, size_t size);
cuda_error cudaFree(void *p);
cuda_error cudaMallocAsync(void **p, size_t size, void *stream);
cuda_error cudaFreeAsync(void *p, void *stream);
cuda_error cudaMallocFromPoolAsync(void **p, size_t size, void *pool, void *stream);
cuda_error cudaMallocManaged(void **p, size_t size, unsigned flags);
cuda_error cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height);
cuda_error cudaMalloc3D(struct cuda_pitched_ptr *p, struct cuda_extent e);
cuda_error cudaMallocHost(void **p, size_t size);
cuda_error cudaHostAlloc(void **p, size_t size, unsigned flags);
cuda_error cudaFreeHost(void *p);
cuda_error cudaHostRegister(void *p, size_t size, unsigned flags);
cuda_error cudaHostUnregister(void *p);

/* The real functions, looked up on first use. */
static struct {
	cuda_error (*get_device)(int *);
	cuda_error (*mem_get_info)(size_t *, size_t *);
	cuda_error (*malloc)(void **, size_t);
	cuda_error (*free)(void *);
	cuda_error (*malloc_async)(void **, size_t, void *);
	cuda_error (*free_async)(void *, void *);
	cuda_error (*malloc_from_pool_async)(void **, size_t, void *, void *);
	cuda_error (*malloc_managed)(void **, size_t, unsigned);
	cuda_error (*malloc_pitch)(void **, size_t *, size_t, size_t);
	cuda_error (*malloc_3d)(struct cuda_pitched_ptr *, struct cuda_extent);
	cuda_error (*malloc_host)(void **, size_t);
	cuda_error (*host_alloc)(void **, size_t, unsigned);
	cuda_error (*free_host)(void *);
	cuda_error (*host_register)(void *, size_t, unsigned);
	cuda_error (*host_unregister)(void *);
} real;

static MT_TLS bool runtime_active;

/* A libcudart loaded in a local scope (dlopen RTLD_LOCAL) is not RTLD_NEXT's. */
static int find_cudart(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *slash = strrchr(info->dlpi_name, '/');
	const char *base = slash ? slash + 1 : info->dlpi_name;

	(void)size;
	if (strncmp(base, "libcudart.so", 12))
		return 0;
	*(void **)arg = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
	return *(void **)arg != NULL;
}

static void *lookup(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name), *handle = NULL;

	if (!f && dl_iterate_phdr(find_cudart, &handle) && handle)
		f = dlsym(handle, name);
	return f;
}

#define REAL(field, name)                                                                          \
	do {                                                                                       \
		if (MT_UNLIKELY(!real.field)) {                                                    \
			void *f_ = lookup(name);                                                   \
			__builtin_memcpy(&real.field, &f_, sizeof(f_));                            \
		}                                                                                  \
	} while (0)

static unsigned device_kind(void)
{
	int device = 0;

	REAL(get_device, "cudaGetDevice");
	if (!real.get_device || real.get_device(&device) != CUDA_SUCCESS || device < 0 ||
	    device >= MT_MAX_CUDA_DEVICES)
		device = 0;
	return MT_KIND_CUDA_DEVICE + (unsigned)device;
}

/* The device's figures right after a failure, for the diagnosis. */
static void failed(unsigned fn, unsigned kind, size_t size, cuda_error err)
{
	size_t free_bytes = 0, total = 0;

	REAL(mem_get_info, "cudaMemGetInfo");
	if (kind >= MT_KIND_CUDA_DEVICE && real.mem_get_info &&
	    real.mem_get_info(&free_bytes, &total) != CUDA_SUCCESS)
		free_bytes = total = 0;
	mt_rec_fail_kind(fn, kind, size, err, free_bytes, total);
}

/*
 * One allocation: enter, call, record. Expanded in each interposed function
 * so that MT_MARK_CALLER sees the program's frame.
 */
#define ALLOCATE(fn, kind_expr, out_ptr, size_expr, call)                                          \
	do {                                                                                       \
		cuda_error r_;                                                                     \
		if (!mt_enter())                                                                   \
			return call;                                                               \
		MT_MARK_CALLER();                                                                  \
		unsigned kind_ = (kind_expr);                                                      \
		int err_ = errno;                                                                  \
		runtime_active = true;                                                             \
		r_ = call;                                                                         \
		runtime_active = false;                                                            \
		if (r_ == CUDA_SUCCESS)                                                            \
			mt_rec_alloc_kind(fn, kind_, (out_ptr), (size_expr));                      \
		else                                                                               \
			failed(fn, kind_, (size_expr), r_);                                        \
		mt_leave(err_);                                                                    \
		return r_;                                                                         \
	} while (0)

#define RELEASE(fn, kind_expr, ptr, call)                                                          \
	do {                                                                                       \
		cuda_error r_;                                                                     \
		if (!(ptr) || !mt_enter())                                                         \
			return call;                                                               \
		int err_ = errno;                                                                  \
		mt_rec_free_kind(fn, (kind_expr), (ptr));                                          \
		runtime_active = true;                                                             \
		r_ = call;                                                                         \
		runtime_active = false;                                                            \
		mt_leave(err_);                                                                    \
		return r_;                                                                         \
	} while (0)

#define NEED(field, name)                                                                          \
	do {                                                                                       \
		REAL(field, name);                                                                 \
		if (MT_UNLIKELY(!real.field))                                                      \
			return CUDA_ERROR_NOT_FOUND;                                               \
	} while (0)

MT_EXPORT cuda_error cudaMalloc(void **p, size_t size)
{
	NEED(malloc, "cudaMalloc");
	ALLOCATE(MT_FN_CUDA_MALLOC, device_kind(), *p, size, real.malloc(p, size));
}

MT_EXPORT cuda_error cudaFree(void *p)
{
	NEED(free, "cudaFree");
	RELEASE(MT_FN_CUDA_FREE, device_kind(), p, real.free(p));
}

MT_EXPORT cuda_error cudaMallocAsync(void **p, size_t size, void *stream)
{
	NEED(malloc_async, "cudaMallocAsync");
	ALLOCATE(MT_FN_CUDA_MALLOC_ASYNC, device_kind(), *p, size,
	         real.malloc_async(p, size, stream));
}

MT_EXPORT cuda_error cudaFreeAsync(void *p, void *stream)
{
	NEED(free_async, "cudaFreeAsync");
	RELEASE(MT_FN_CUDA_FREE_ASYNC, device_kind(), p, real.free_async(p, stream));
}

MT_EXPORT cuda_error cudaMallocFromPoolAsync(void **p, size_t size, void *pool, void *stream)
{
	NEED(malloc_from_pool_async, "cudaMallocFromPoolAsync");
	ALLOCATE(MT_FN_CUDA_MALLOC_FROM_POOL_ASYNC, device_kind(), *p, size,
	         real.malloc_from_pool_async(p, size, pool, stream));
}

MT_EXPORT cuda_error cudaMallocManaged(void **p, size_t size, unsigned flags)
{
	NEED(malloc_managed, "cudaMallocManaged");
	ALLOCATE(MT_FN_CUDA_MALLOC_MANAGED, MT_KIND_CUDA_MANAGED, *p, size,
	         real.malloc_managed(p, size, flags));
}

MT_EXPORT cuda_error cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
	NEED(malloc_pitch, "cudaMallocPitch");
	ALLOCATE(MT_FN_CUDA_MALLOC_PITCH, device_kind(), *p, *pitch * height,
	         real.malloc_pitch(p, pitch, width, height));
}

MT_EXPORT cuda_error cudaMalloc3D(struct cuda_pitched_ptr *p, struct cuda_extent e)
{
	NEED(malloc_3d, "cudaMalloc3D");
	ALLOCATE(MT_FN_CUDA_MALLOC_3D, device_kind(), p->ptr, p->pitch * e.height * e.depth,
	         real.malloc_3d(p, e));
}

MT_EXPORT cuda_error cudaMallocHost(void **p, size_t size)
{
	NEED(malloc_host, "cudaMallocHost");
	ALLOCATE(MT_FN_CUDA_MALLOC_HOST, MT_KIND_CUDA_HOST, *p, size, real.malloc_host(p, size));
}

MT_EXPORT cuda_error cudaHostAlloc(void **p, size_t size, unsigned flags)
{
	NEED(host_alloc, "cudaHostAlloc");
	ALLOCATE(MT_FN_CUDA_HOST_ALLOC, MT_KIND_CUDA_HOST, *p, size,
	         real.host_alloc(p, size, flags));
}

MT_EXPORT cuda_error cudaFreeHost(void *p)
{
	NEED(free_host, "cudaFreeHost");
	RELEASE(MT_FN_CUDA_FREE_HOST, MT_KIND_CUDA_HOST, p, real.free_host(p));
}

/* Registering pins memory the program already has: it counts as pinned host memory too. */
MT_EXPORT cuda_error cudaHostRegister(void *p, size_t size, unsigned flags)
{
	NEED(host_register, "cudaHostRegister");
	ALLOCATE(MT_FN_CUDA_HOST_REGISTER, MT_KIND_CUDA_HOST, p, size,
	         real.host_register(p, size, flags));
}

MT_EXPORT cuda_error cudaHostUnregister(void *p)
{
	NEED(host_unregister, "cudaHostUnregister");
	RELEASE(MT_FN_CUDA_HOST_UNREGISTER, MT_KIND_CUDA_HOST, p, real.host_unregister(p));
}

/* ---- the capture API for the CUPTI module (include/memtrace/capture.h) ---- */

MT_EXPORT bool memtrace_capture_runtime_active(void)
{
	return runtime_active;
}

MT_EXPORT void memtrace_capture_say(const char *text)
{
	mt_say("%s", text);
}

MT_EXPORT uint32_t memtrace_capture_stack(void)
{
	uint32_t id;

	if (!mt_enter())
		return 0;
	int err = errno;
	MT_MARK_CALLER();
	id = mt_stack_current();
	mt_leave(err);
	return id;
}

MT_EXPORT void memtrace_capture_alloc(uint32_t stack, unsigned fn, unsigned kind, uint64_t addr,
                                      uint64_t size)
{
	if (kind >= MT_KIND_COUNT || !mt_enter())
		return;
	int err = errno;
	mt_rec_alloc_stack(fn, kind, (void *)(uintptr_t)addr, size, stack);
	mt_leave(err);
}

MT_EXPORT void memtrace_capture_free(unsigned fn, unsigned kind, uint64_t addr)
{
	if (kind >= MT_KIND_COUNT || !mt_enter())
		return;
	int err = errno;
	mt_rec_free_kind(fn, kind, (void *)(uintptr_t)addr);
	mt_leave(err);
}

MT_EXPORT void memtrace_capture_fail(uint32_t stack, unsigned fn, unsigned kind, uint64_t size,
                                     int code, uint64_t device_free, uint64_t device_total)
{
	if (kind >= MT_KIND_COUNT || !mt_enter())
		return;
	int err = errno;
	mt_rec_fail_stack(fn, kind, size, code, device_free, device_total, stack);
	mt_leave(err);
}
