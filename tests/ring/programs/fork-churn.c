/* SPDX-License-Identifier: MIT */
/*
 * The ring with several processes: a parent churns (64 blocks live, one in
 * 1000 kept), then forks three children one after the other, each of which
 * frees and allocates among the blocks it inherited and keeps its own, and
 * churns again. argv: N, the parent's allocations (a child makes N / 4).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile sink;
static void *live[64];

__attribute__((noinline)) static void keep(size_t n)
{
	sink = malloc(n);
}

__attribute__((noinline)) static void churn(long n, size_t base, long every)
{
	for (long i = 0; i < n; i++) {
		if (i % every == 0) {
			keep(base + (size_t)(i % 500));
			continue;
		}
		free(live[i % 64]);
		live[i % 64] = malloc(16 + (size_t)(i % 200));
		/* used as a program uses a block: the pace of the run (what churn-leak's
		 * CHURN_WORK=8 does), so that the consumer keeps up on a loaded machine */
		for (int w = 0; w < 8; w++)
			memset(live[i % 64], w, 16 + (size_t)(i % 200));
		sink = live[(i + 1) % 64];
	}
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;

	churn(n / 2, 1000, 1000);
	for (int k = 0; k < 3; k++) {
		pid_t c = fork();
		if (c == 0) {
			churn(n / 4, 2000 + (size_t)k, 500);
			_exit(0);
		}
		waitpid(c, NULL, 0);
	}
	churn(n / 2, 1000, 1000);
	return 0;
}
