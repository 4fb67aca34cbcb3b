// SPDX-License-Identifier: MIT
// Fills device 0 with 256 MiB allocations until cudaMalloc fails, as a
// training job that outgrows the GPU does, then prints what it got and the
// error. Built by nvcc, which links cudart statically by default: the
// allocations are then seen only through libmemtrace-cupti.so (memtrace run
// loads it), not through the interposed runtime. Needs a GPU to run.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void touch(char *p, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = 1;
}

int main()
{
	const size_t chunk = 256u << 20;
	char *blocks[1024];
	int n = 0;
	cudaError_t err = cudaSuccess;

	while (n < 1024 && (err = cudaMalloc(&blocks[n], chunk)) == cudaSuccess) {
		touch<<<(chunk + 255) / 256, 256>>>(blocks[n], chunk);
		n++;
	}
	cudaDeviceSynchronize();
	std::printf("allocated %d x 256 MiB, then: %s\n", n, cudaGetErrorString(err));
	return err == cudaErrorMemoryAllocation ? 0 : 1;
}
