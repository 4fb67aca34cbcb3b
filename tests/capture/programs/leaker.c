/* SPDX-License-Identifier: MIT */
/*
 * leaker N SIZE: makes N blocks of SIZE bytes, frees every other one, and
 * exits with the rest live: ceil(N/2) blocks of SIZE bytes. The exec'd
 * grandchild of fork-exec, and the victim of the SIGKILL test when run as
 * `leaker N SIZE wait`: then it says "ready" on stdout and sleeps until it
 * is killed.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 100;
	void **blocks;

	blocks = malloc((size_t)n * sizeof(*blocks));
	for (long i = 0; i < n; i++) {
		blocks[i] = malloc(size);
		memset(blocks[i], 1, size);
	}
	for (long i = 1; i < n; i += 2)
		free(blocks[i]);
	free(blocks);
	if (argc > 3 && !strcmp(argv[3], "wait")) {
		if (write(STDOUT_FILENO, "ready\n", 6) != 6)
			return 1;
		for (;;)
			pause();
	}
	return 0;
}
