/* SPDX-License-Identifier: MIT */
/*
 * A stand-in libcudart for tests: a test double, never installed. No GPU is
 * lent to this project, so the cudaMalloc path of memtrace is tested against
 * this library instead. It has the real library's soname (libcudart.so.13)
 * and symbol version, exports the allocation functions memtrace interposes,
 * and simulates devices of a fixed capacity:
 *
 *   MEMTRACE_STANDIN_DEVICES  number of devices (default 1, at most 8)
 *   MEMTRACE_STANDIN_MEMORY   bytes per device (default 1 GiB)
 *
 * Device pointers are addresses in a range nothing maps; they are never
 * dereferenced. An allocation that does not fit fails with
 * cudaErrorMemoryAllocation, and cudaMemGetInfo answers truthfully. Pinned
 * host memory is real memory, mapped with the raw mmap system call as the
 * real driver does (not through libc, so memtrace's own mmap hook does not
 * see it). It uses no malloc: the program's heap figures stay its own.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SUCCESS 0
#define ERROR_INVALID_VALUE 1
#define ERROR_MEMORY_ALLOCATION 2
#define ERROR_INVALID_DEVICE 101

#define MAX_DEVICES 8
#define MAX_BLOCKS 65536
#define ALIGN 512

typedef int cuda_error;

struct pitched_ptr {
	void *ptr;
	size_t pitch, xsize, ysize;
};

struct extent {
	size_t width, height, depth;
};

struct block {
	uintptr_t addr;
	size_t size;
	int device; /* -1: pinned host memory */
};

/* What the library exports, declared here for the compiler's prototype check. */
cuda_error cudaGetDeviceCount(int *count);
cuda_error cudaSetDevice(int device);
cuda_error cudaGetDevice(int *device);
cuda_error cudaMemGetInfo(size_t *free_bytes, size_t *total);
cuda_error cudaMalloc(void **p, size_t size);
cuda_error cudaFree(void *p);
cuda_error cudaMallocAsync(void **p, size_t size, void *stream);
cuda_error cudaFreeAsync(void *p, void *stream);
cuda_error cudaMallocFromPoolAsync(void **p, size_t size, void *pool, void *stream);
cuda_error cudaMallocManaged(void **p, size_t size, unsigned flags);
cuda_error cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height);
cuda_error cudaMalloc3D(struct pitched_ptr *out, struct extent e);
cuda_error cudaHostAlloc(void **p, size_t size, unsigned flags);
cuda_error cudaMallocHost(void **p, size_t size);
cuda_error cudaFreeHost(void *p);
cuda_error cudaHostRegister(void *p, size_t size, unsigned flags);
cuda_error cudaHostUnregister(void *p);
const char *cudaGetErrorString(cuda_error e);

static struct block blocks[MAX_BLOCKS];
static int devices = -1;
static size_t capacity;
static size_t used[MAX_DEVICES];
static uintptr_t next_addr[MAX_DEVICES];
static __thread int current;

static void setup(void)
{
	const char *n = getenv("MEMTRACE_STANDIN_DEVICES");
	const char *m = getenv("MEMTRACE_STANDIN_MEMORY");

	if (devices >= 0)
		return;
	devices = n ? atoi(n) : 1;
	if (devices < 1 || devices > MAX_DEVICES)
		devices = 1;
	capacity = m ? strtoull(m, NULL, 10) : (size_t)1 << 30;
	for (int d = 0; d < MAX_DEVICES; d++)
		next_addr[d] = ((uintptr_t)0x500 + (uintptr_t)d) << 36;
}

static struct block *find(uintptr_t addr)
{
	for (int i = 0; i < MAX_BLOCKS; i++)
		if (blocks[i].addr == addr)
			return &blocks[i];
	return NULL;
}

static cuda_error device_alloc(void **out, size_t size)
{
	struct block *b;

	setup();
	if (!out)
		return ERROR_INVALID_VALUE;
	if (size > capacity - used[current] || !(b = find(0)))
		return ERROR_MEMORY_ALLOCATION;
	size = size ? (size + ALIGN - 1) / ALIGN * ALIGN : ALIGN;
	*b = (struct block){next_addr[current], size, current};
	next_addr[current] += size;
	used[current] += size;
	*out = (void *)b->addr;
	return SUCCESS;
}

static cuda_error device_free(void *p)
{
	struct block *b;

	if (!p)
		return SUCCESS;
	b = find((uintptr_t)p);
	if (!b || b->device < 0)
		return ERROR_INVALID_VALUE;
	used[b->device] -= b->size;
	*b = (struct block){0, 0, 0};
	return SUCCESS;
}

cuda_error cudaGetDeviceCount(int *count)
{
	setup();
	*count = devices;
	return SUCCESS;
}

cuda_error cudaSetDevice(int device)
{
	setup();
	if (device < 0 || device >= devices)
		return ERROR_INVALID_DEVICE;
	current = device;
	return SUCCESS;
}

cuda_error cudaGetDevice(int *device)
{
	*device = current;
	return SUCCESS;
}

cuda_error cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
	setup();
	*free_bytes = capacity - used[current];
	*total = capacity;
	return SUCCESS;
}

cuda_error cudaMalloc(void **p, size_t size)
{
	return device_alloc(p, size);
}

cuda_error cudaFree(void *p)
{
	return device_free(p);
}

cuda_error cudaMallocAsync(void **p, size_t size, void *stream)
{
	(void)stream;
	return device_alloc(p, size);
}

cuda_error cudaFreeAsync(void *p, void *stream)
{
	(void)stream;
	return device_free(p);
}

cuda_error cudaMallocFromPoolAsync(void **p, size_t size, void *pool, void *stream)
{
	(void)pool;
	(void)stream;
	return device_alloc(p, size);
}

/* Managed memory is charged to the current device, where it starts. */
cuda_error cudaMallocManaged(void **p, size_t size, unsigned flags)
{
	(void)flags;
	return device_alloc(p, size);
}

cuda_error cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height)
{
	*pitch = (width + ALIGN - 1) / ALIGN * ALIGN;
	return device_alloc(p, *pitch * height);
}

cuda_error cudaMalloc3D(struct pitched_ptr *out, struct extent e)
{
	out->pitch = (e.width + ALIGN - 1) / ALIGN * ALIGN;
	out->xsize = e.width;
	out->ysize = e.height;
	return device_alloc(&out->ptr, out->pitch * e.height * e.depth);
}

cuda_error cudaHostAlloc(void **p, size_t size, unsigned flags)
{
	struct block *b = find(0);
	void *m;

	(void)flags;
	if (!p || !b)
		return ERROR_MEMORY_ALLOCATION;
	m = (void *)syscall(SYS_mmap, NULL, size ? size : 1, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return ERROR_MEMORY_ALLOCATION;
	*b = (struct block){(uintptr_t)m, size ? size : 1, -1};
	*p = m;
	return SUCCESS;
}

cuda_error cudaMallocHost(void **p, size_t size)
{
	return cudaHostAlloc(p, size, 0);
}

cuda_error cudaFreeHost(void *p)
{
	struct block *b = p ? find((uintptr_t)p) : NULL;

	if (!p)
		return SUCCESS;
	if (!b || b->device != -1)
		return ERROR_INVALID_VALUE;
	syscall(SYS_munmap, p, b->size);
	*b = (struct block){0, 0, 0};
	return SUCCESS;
}

/* Registering pins memory the program already has: nothing to allocate. */
cuda_error cudaHostRegister(void *p, size_t size, unsigned flags)
{
	(void)flags;
	return p && size ? SUCCESS : ERROR_INVALID_VALUE;
}

cuda_error cudaHostUnregister(void *p)
{
	return p ? SUCCESS : ERROR_INVALID_VALUE;
}

const char *cudaGetErrorString(cuda_error e)
{
	switch (e) {
	case SUCCESS:
		return "no error";
	case ERROR_INVALID_VALUE:
		return "invalid argument";
	case ERROR_MEMORY_ALLOCATION:
		return "out of memory";
	default:
		return "unknown error";
	}
}
