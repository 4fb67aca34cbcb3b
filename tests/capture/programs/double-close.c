/* SPDX-License-Identifier: MIT */
/*
 * double-close: a pipe per iteration, a known payload through it, and the
 * write end closed twice, the second time after a pause. Untraced the second
 * close fails with EBADF (the number is free). A tracer that opens and closes
 * files in the program's descriptor table gets that free number in the pause,
 * the second close takes its file, and the tracer later closes or reads the
 * number that the next pipe() got: the read end vanishes or its data is
 * eaten. Each iteration also mallocs, so that there is something to trace.
 *
 * double-close [ITERATIONS]: prints "bytes N sum S ebadf E" (E: second
 * closes that failed with EBADF, all of them untraced), exits 0; 1 with a
 * line naming what went wrong.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void pause_us(long us)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

int main(int argc, char **argv)
{
	int iterations = argc > 1 ? atoi(argv[1]) : 10000;
	unsigned long long bytes = 0, sum = 0, ebadf = 0;

	for (int i = 0; i < iterations; i++) {
		char payload[64], got[64];
		int p[2], n, len;
		char *block = malloc(100 + (size_t)i % 50);

		if (pipe(p) < 0) {
			printf("pipe failed at %d: %s\n", i, strerror(errno));
			return 1;
		}
		len = snprintf(payload, sizeof(payload), "payload %d of the pipe %d/%d\n", i, p[0], p[1]);
		if (write(p[1], payload, (size_t)len) != len) {
			printf("write failed at %d: %s\n", i, strerror(errno));
			return 1;
		}
		close(p[1]);
		pause_us(20);
		if (close(p[1]) < 0 && errno == EBADF)
			ebadf++;
		n = 0;
		for (int r; (r = (int)read(p[0], got + n, sizeof(got) - (size_t)n)) != 0; n += r)
			if (r < 0) {
				printf("read failed at %d: %s\n", i, strerror(errno));
				return 1;
			}
		if (n != len || memcmp(got, payload, (size_t)len)) {
			printf("iteration %d read %d bytes, not the %d written\n", i, n, len);
			return 1;
		}
		for (int k = 0; k < n; k++)
			sum = sum * 31 + (unsigned char)got[k];
		bytes += (unsigned long long)n;
		if (close(p[0]) < 0) {
			printf("close of the read end failed at %d: %s\n", i, strerror(errno));
			return 1;
		}
		free(block);
	}
	printf("bytes %llu sum %llu ebadf %llu\n", bytes, sum, ebadf);
	return 0;
}
