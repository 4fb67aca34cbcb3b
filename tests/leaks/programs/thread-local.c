/* SPDX-License-Identifier: MIT */
/*
 * Blocks held only from thread-local storage (__thread pointers): reachable.
 * Main's TLS holds 123 bytes, and a struct in it points to 45; a second
 * thread's TLS holds 456 bytes, and the thread blocks in pause() until main
 * exits: 624 bytes in 3 blocks. pthread_create's dtv is possible (see
 * thread-stack.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scrub.h"

static __thread char *tls_block;
static __thread struct {
	long id;
	char *name;
} tls_struct;

static int ready[2];

static char *filled(size_t n)
{
	char *p = malloc(n);

	memset(p, 't', n);
	return p;
}

static void *holder(void *arg)
{
	(void)arg;
	tls_block = filled(456);
	scrub_stack();
	if (write(ready[1], "r", 1) != 1)
		abort();
	for (;;)
		pause();
	return NULL;
}

int main(void)
{
	pthread_t t;
	char c;

	tls_block = filled(123);
	tls_struct.id = 1;
	tls_struct.name = filled(45);
	if (pipe(ready) || pthread_create(&t, NULL, holder, NULL))
		return 1;
	if (read(ready[0], &c, 1) != 1)
		return 1;
	scrub_stack();
	return 0;
}
