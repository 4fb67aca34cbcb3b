/* SPDX-License-Identifier: MIT */
/*
 * Known CUDA allocations, against the stand-in libcudart (run with
 * MEMTRACE_STANDIN_DEVICES=2 MEMTRACE_STANDIN_MEMORY=67108864: two devices of
 * 64 MiB). Live at exit:
 *   cuda:0        1 MiB + 3 MiB = 4 MiB in 2 blocks (2 MiB freed; peak 6 MiB)
 *   cuda:1        4 MiB + 512 KiB (cudaMallocPitch, 1024 x 512) in 2 blocks
 *   cuda-managed  1 MiB in 1 block (the stand-in charges it to device 0)
 *   cuda-host     64 KiB from cudaMallocHost + 8 KiB of a static buffer
 *                 registered = 72 KiB in 2 blocks (cudaHostAlloc's 32 KiB freed)
 * Then a 100 MiB cudaMalloc on device 0 fails: 59 MiB free of 64 MiB.
 * Prints the failure's error code, nothing else.
 */
#include <stddef.h>
#include <stdio.h>

typedef int cuda_error;
cuda_error cudaSetDevice(int device);
cuda_error cudaMalloc(void **p, size_t size);
cuda_error cudaFree(void *p);
cuda_error cudaMallocManaged(void **p, size_t size, unsigned flags);
cuda_error cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height);
cuda_error cudaMallocHost(void **p, size_t size);
cuda_error cudaHostAlloc(void **p, size_t size, unsigned flags);
cuda_error cudaFreeHost(void *p);
cuda_error cudaHostRegister(void *p, size_t size, unsigned flags);

#define MIB (1024 * 1024)

static char registered[8192];
void *keep[8];

static void make_tensors(void)
{
	void *scratch;

	cudaMalloc(&keep[0], 1 * MIB);
	cudaMalloc(&scratch, 2 * MIB);
	cudaMalloc(&keep[1], 3 * MIB);
	cudaFree(scratch);
}

static int grow_too_far(void)
{
	void *big;

	return cudaMalloc(&big, 100 * MIB);
}

int main(void)
{
	void *staging;
	size_t pitch;

	cudaSetDevice(0);
	make_tensors();
	cudaMallocManaged(&keep[2], 1 * MIB, 1);
	cudaMallocHost(&keep[3], 64 * 1024);
	cudaHostAlloc(&staging, 32 * 1024, 0);
	cudaFreeHost(staging);
	cudaHostRegister(registered, sizeof(registered), 0);
	cudaSetDevice(1);
	cudaMalloc(&keep[4], 4 * MIB);
	cudaMallocPitch(&keep[5], &pitch, 1024, 512);
	cudaSetDevice(0);
	printf("%d\n", grow_too_far());
	return 0;
}
