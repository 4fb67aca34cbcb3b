/* SPDX-License-Identifier: MIT */
/*
 * A parent and its forked workers, as a PyTorch DataLoader runs: the parent
 * loads a 64 MiB dataset (written, so resident), then forks 4 workers. Each
 * worker first only reads (its pages are still the parent's, shared
 * copy-on-write), then writes its own 16 MiB quarter, as CPython's
 * reference counts do to every object a worker touches: the kernel copies
 * each written page, and the worker's Private_Dirty grows by 16 MiB.
 *
 * worker-pool [WORKERS]: the timing leaves memtrace's sampler (every 10 ms)
 * time to see each worker before and after: 200 ms reading (a busy machine
 * can start a forked worker's sampler late: at 60 ms its first sample came
 * after 1-5 MiB were written), then the write,
 * then 400 ms holding the copies (the sampler reads Pss less often when
 * reading it costs more, so a short hold could end before it looks). The
 * hold begins once every worker has written, so that all the copies are
 * held at once whatever the scheduler does (a worker stopped for 800 ms made
 * the tree's Pss peak 111 MiB where 128 are held together); the parent
 * waits for all of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DATASET (64 << 20)

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&t, NULL);
}

static char *load_dataset(void)
{
	char *d = malloc(DATASET);

	memset(d, 1, DATASET);
	return d;
}

/* written: a worker's byte when its copy is made; go: read to its end once all are */
static int written[2], go[2];

static int worker(volatile char *dataset, size_t from, size_t len)
{
	unsigned long sum = 0;
	char c = 0;

	close(written[0]);
	close(go[1]);
	sleep_ms(200); /* reading only: nothing copied yet */
	for (size_t i = from; i < from + len; i += 4096)
		sum += dataset[i];
	for (size_t i = from; i < from + len; i += 4096)
		dataset[i] = (char)(sum + i); /* one write per page copies the page */
	if (write(written[1], &c, 1) != 1 || read(go[0], &c, 1) != 0)
		return 1;
	sleep_ms(400);
	return 0;
}

int main(int argc, char **argv)
{
	int workers = argc > 1 ? atoi(argv[1]) : 4;
	char *dataset = load_dataset();
	size_t share;
	int failed = 0, started = 0, done = 0;

	if (workers < 1 || workers > 64)
		workers = 4;
	share = DATASET / (size_t)workers;
	if (pipe(written) || pipe(go))
		return 1;
	for (int w = 0; w < workers; w++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(worker(dataset, (size_t)w * share, share));
		if (pid < 0)
			failed = 1;
		else
			started++;
	}
	close(written[1]);
	close(go[0]);
	/* every worker's byte, or the end when one died: then all hold together */
	for (char c; read(written[0], &c, 1) == 1;)
		if (++done == started)
			break;
	close(go[1]);
	while (wait(NULL) > 0)
		;
	printf("%d workers, %zu bytes touched each\n", workers, share);
	free(dataset);
	return failed;
}
