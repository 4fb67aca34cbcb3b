/* SPDX-License-Identifier: MIT */
/*
 * static-exit: linked statically, so LD_PRELOAD cannot load memtrace into
 * it: what a traced process becomes when it execs a program memtrace cannot
 * enter. Prints the name in MT_EXEC_FN (the exec function that started it)
 * and its arguments, so that a test sees they arrived intact, and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	const char *fn = getenv("MT_EXEC_FN");
	void *p = malloc(100);

	printf("%s", fn ? fn : "-");
	for (int i = 0; i < argc; i++)
		printf(" %s", argv[i]);
	printf("\n");
	free(p);
	return 0;
}
