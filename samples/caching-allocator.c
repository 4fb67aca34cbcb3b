/* SPDX-License-Identifier: MIT */
/*
 * A program shaped like PyTorch's CUDA caching allocator: it reserves large
 * segments from cudaMalloc up front and hands out blocks from them, keeps
 * freed segments cached instead of giving them back, and when a cudaMalloc
 * fails it flushes its cache (cudaFree of every cached segment) and tries
 * once more before giving up with "out of memory", as PyTorch does before
 * raising OutOfMemoryError.
 *
 * Run it against a device of 1 GiB (the stand-in libcudart of tests/cuda:
 * MEMTRACE_STANDIN_MEMORY=1073741824): step 1 reserves 6 segments of 128 MiB
 * (768 MiB), frees 4 of them into the cache; step 2 asks for a 512 MiB
 * segment: the device has 256 MiB free, cudaMalloc fails, the cache (512 MiB)
 * is flushed, the retry succeeds. Step 3 asks for another 512 MiB: it fails,
 * the cache is empty, and the program reports out of memory.
 *
 * memtrace's report shows the reserve (the segments' stacks), the flush (the
 * frees right after the failure) and the retry (a second cudaMalloc of the
 * same size from the same stack), with the device's free and total bytes at
 * each failure.
 */
#include <stddef.h>
#include <stdio.h>

typedef int cuda_error;
cuda_error cudaMalloc(void **p, size_t size);
cuda_error cudaFree(void *p);

#define MIB ((size_t)1 << 20)
#define SEGMENTS 16

struct segment {
	void *ptr;
	size_t size;
	int cached; /* freed by the program, kept by the allocator */
};

static struct segment pool[SEGMENTS];

static void *reserve_segment(size_t size)
{
	for (int i = 0; i < SEGMENTS; i++) {
		if (!pool[i].ptr) {
			if (cudaMalloc(&pool[i].ptr, size) != 0) {
				pool[i].ptr = NULL;
				return NULL;
			}
			pool[i].size = size;
			pool[i].cached = 0;
			return pool[i].ptr;
		}
	}
	return NULL;
}

/* What torch.cuda.empty_cache() does: give the cached segments back to the device. */
static size_t flush_cache(void)
{
	size_t freed = 0;

	for (int i = 0; i < SEGMENTS; i++) {
		if (pool[i].ptr && pool[i].cached) {
			cudaFree(pool[i].ptr);
			freed += pool[i].size;
			pool[i].ptr = NULL;
		}
	}
	return freed;
}

static void *allocate(size_t size)
{
	void *p = reserve_segment(size);

	if (!p) {
		size_t freed = flush_cache();
		printf("cudaMalloc of %zu MiB failed: flushed %zu MiB of cached segments, retrying\n",
		       size / MIB, freed / MIB);
		p = reserve_segment(size);
	}
	if (!p)
		printf("out of memory: %zu MiB could not be allocated\n", size / MIB);
	return p;
}

static void release(void *p)
{
	for (int i = 0; i < SEGMENTS; i++)
		if (pool[i].ptr == p)
			pool[i].cached = 1; /* kept for reuse, as a caching allocator does */
}

int main(void)
{
	void *activations[6];

	for (int i = 0; i < 6; i++)
		activations[i] = allocate(128 * MIB);
	for (int i = 0; i < 4; i++)
		release(activations[i]);
	void *weights = allocate(512 * MIB);
	void *more = allocate(512 * MIB);
	return weights && !more ? 0 : 1;
}
