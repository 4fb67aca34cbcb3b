/* SPDX-License-Identifier: MIT */
/*
 * A root whose pages fault: a writable shared mapping of a file that is
 * then cut to nothing, so that every read of it raises SIGBUS (the exit's
 * copy scans writable mappings as roots, and steps over a page that
 * faults). 100 bytes held by a global, 200 dropped.
 *
 * reach-cut-map FILE
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAPPED (1 << 20)

static void *kept;

int main(int argc, char **argv)
{
	int fd;
	char *m;

	if (argc != 2 || (fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0 ||
	    ftruncate(fd, MAPPED) < 0)
		return 1;
	m = mmap(NULL, MAPPED, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 1;
	memset(m, 1, 4096);
	kept = malloc(100);
	if (!kept || !malloc(200)) /* the second is dropped */
		return 1;
	if (ftruncate(fd, 0) < 0)
		return 1;
	close(fd);
	return 0;
}
