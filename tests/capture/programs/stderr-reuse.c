/* SPDX-License-Identifier: MIT */
/*
 * stderr-reuse FILE N: closes its standard error and opens FILE, which
 * takes descriptor 2 (as a daemon's log does), writes a line of its own
 * there, then makes and frees N blocks of 24 bytes and writes a last line.
 * FILE must hold the program's two lines and nothing else, whatever
 * memtrace has to say meanwhile (a full disk, say): descriptor 2 is no
 * longer the standard error memtrace was given.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int say(const char *s)
{
	return write(STDERR_FILENO, s, strlen(s)) == (ssize_t)strlen(s) ? 0 : 1;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 0;

	if (argc < 3)
		return 2;
	close(STDERR_FILENO);
	if (open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) != STDERR_FILENO)
		return 3;
	if (say("the program's own first line\n"))
		return 4;
	for (long i = 0; i < n; i++) {
		char *volatile p = malloc(24);

		memset(p, 1, 24);
		free(p);
	}
	return say("the program's own last line\n") ? 4 : 0;
}
