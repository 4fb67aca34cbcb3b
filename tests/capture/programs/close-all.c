/* SPDX-License-Identifier: MIT */
/*
 * close-all: what daemons do at start-up, then a file of its own. Closes
 * every descriptor from 3 by the named method, opens out (it gets 3), writes
 * a known text into it in pieces while allocating enough to need many new
 * trace chunks, and closes it.
 *
 * close-all loop|range|from OUT: prints "fd F blocks B bytes N" and exits 0
 * (B blocks of N bytes in all are live at exit: the program's only
 * allocations, none freed).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUNDS 200
#define BLOCKS_PER_ROUND 500

int main(int argc, char **argv)
{
	unsigned long long bytes = 0, blocks = 0;
	int fd;

	if (argc != 3)
		return 2;
	if (!strcmp(argv[1], "loop")) {
		for (int i = 3; i < 1024; i++)
			close(i);
	} else if (!strcmp(argv[1], "range")) {
		if (close_range(3, ~0U, 0) < 0)
			return 1;
	} else if (!strcmp(argv[1], "from")) {
		closefrom(3);
	} else {
		return 2;
	}
	fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return 1;
	for (int r = 0; r < ROUNDS; r++) {
		char line[80];
		int n = snprintf(line, sizeof(line), "line %d of the program's own file\n", r);
		if (write(fd, line, (size_t)n) != n)
			return 1;
		for (int b = 0; b < BLOCKS_PER_ROUND; b++) {
			size_t size = 16 + (size_t)(b % 7) * 8;
			if (!malloc(size))
				return 1;
			blocks++;
			bytes += size;
		}
	}
	if (close(fd) < 0)
		return 1;
	/* from a stack buffer: stdio's own buffer would be one more block */
	char line[80];
	int n = snprintf(line, sizeof(line), "fd %d blocks %llu bytes %llu\n", fd, blocks, bytes);
	return write(STDOUT_FILENO, line, (size_t)n) == n ? 0 : 1;
}
