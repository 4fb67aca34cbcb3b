/* SPDX-License-Identifier: MIT */
/*
 * Blocks held from the stacks of live threads at exit: reachable. A second
 * thread keeps 111, 222 and 3333 bytes in its locals and blocks in pause();
 * main keeps 77 bytes in a local and calls exit() with that thread still
 * blocked: 3743 bytes in 4 blocks. The thread first drops 500 bytes from a
 * returned call's frame and scrubs it: definite (500 bytes, 1 block),
 * although memtrace scans the thread's whole stack. pthread_create's own
 * dtv (the thread's TLS vector, calloc'd by glibc, pointed to 16 bytes in)
 * is possible; its size depends on how many loaded objects have TLS.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scrub.h"

static int ready[2];

/* No memset here: valgrind's own memset leaves the address in a register
 * of this thread, which valgrind scans at exit (memtrace does not scan
 * another thread's registers), and the block would be reachable there. */
static void drop_one(void)
{
	volatile char *p = malloc(500);

	p[0] = 'x';
	p = NULL;
}

static void *holder(void *arg)
{
	char *volatile held[3];

	(void)arg;
	drop_one();
	scrub_stack();
	held[0] = malloc(111);
	held[1] = malloc(222);
	held[2] = malloc(3333);
	if (write(ready[1], "r", 1) != 1)
		abort();
	for (;;)
		pause();
	return held[0];
}

int main(void)
{
	pthread_t t;
	char *volatile mine;
	char c;

	if (pipe(ready) || pthread_create(&t, NULL, holder, NULL))
		return 1;
	if (read(ready[0], &c, 1) != 1)
		return 1;
	mine = malloc(77);
	memset(mine, 'm', 77);
	exit(0);
}
