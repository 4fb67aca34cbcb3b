/* SPDX-License-Identifier: MIT */
/*
 * alloc-then-die N SIZE [oom]: makes N blocks of SIZE bytes (written, so
 * they are resident), frees none, says "ready" and waits to be killed with
 * SIGKILL. With "oom" it goes on allocating 1 MiB blocks until the kernel's
 * OOM killer (a cgroup's memory limit) ends it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 1000;

	for (long i = 0; i < n; i++)
		memset(malloc(size), 1, size);
	if (write(STDOUT_FILENO, "ready\n", 6) != 6)
		return 1;
	if (argc > 3 && !strcmp(argv[3], "oom")) {
		for (;;)
			memset(malloc(1 << 20), 1, 1 << 20);
	}
	for (;;)
		pause();
}
