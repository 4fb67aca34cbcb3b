/* SPDX-License-Identifier: MIT */
/*
 * fd-games: takes every number up to 1023 the ways a program can take a
 * number it believes free, and prints what each call returned (and errno),
 * so that a traced run can be compared with an untraced one line by line:
 * close of every number from 3, dup2 and dup3 of a file onto every number
 * from 3 (each written to and closed), close_range with CLOSE_RANGE_UNSHARE
 * and CLOSE_RANGE_CLOEXEC, and dup2 of a number onto itself. Allocates
 * between the steps, so the tracer is busy throughout.
 *
 * fd-games OUT: prints one summary line per step, exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOP 1024

static void busy(void)
{
	struct timespec ms = {0, 3 * 1000 * 1000};

	for (int i = 0; i < 100; i++)
		free(malloc(64 + (size_t)i));
	nanosleep(&ms, NULL); /* a sampler tick or two */
}

/* Closes every number from 3; prints how many closes failed with which errno. */
static void close_all(const char *step)
{
	int ok = 0, ebadf = 0, other = 0;

	for (int i = 3; i < TOP; i++) {
		errno = 12345;
		if (close(i) == 0)
			ok += errno == 12345;
		else if (errno == EBADF)
			ebadf++;
		else
			other++;
	}
	printf("%s: closed %d ebadf %d other %d\n", step, ok, ebadf, other);
	busy();
}

int main(int argc, char **argv)
{
	int fd, ok = 0, bad = 0, r;

	if (argc != 2)
		return 2;
	close_all("close");
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd != 3)
		return 1;
	for (int i = 4; i < TOP; i++) {
		char line[32];
		int n = snprintf(line, sizeof(line), "%d\n", i);
		errno = 12345;
		r = i % 2 ? dup2(fd, i) : dup3(fd, i, O_CLOEXEC);
		if (r == i && errno == 12345 && write(i, line, (size_t)n) == n)
			ok++;
		else
			bad++;
		if (i % 64 == 0)
			busy();
	}
	printf("dup2/dup3 onto 4..%d: %d fine, %d not\n", TOP - 1, ok, bad);
	close_all("close after dup2");
	fd = open(argv[1], O_WRONLY | O_APPEND);
	for (int i = fd + 1; i < TOP; i++)
		if (dup2(fd, i) != i)
			return 1;
	errno = 12345;
	r = close_range(4, TOP - 1, CLOSE_RANGE_CLOEXEC);
	printf("close_range cloexec: %d errno %d\n", r, errno);
	errno = 12345;
	r = close_range(4, ~0U, CLOSE_RANGE_UNSHARE);
	printf("close_range unshare: %d errno %d\n", r, errno);
	busy();
	errno = 12345;
	r = close_range(5, 4, 0);
	printf("close_range 5..4: %d errno %d\n", r, errno);
	close_all("close after close_range");
	for (int i = 0; i < TOP; i += 97) {
		errno = 12345;
		r = dup2(i, i);
		printf("dup2(%d, %d): %d errno %d\n", i, i, r, errno);
		errno = 12345;
		r = dup3(i, i, 0);
		printf("dup3(%d, %d): %d errno %d\n", i, i, r, errno);
	}
	busy();
	return 0;
}
