/* SPDX-License-Identifier: MIT */
/*
 * Stack labels (tests/report): every block comes through a wrapper named
 * like allocation plumbing, so the innermost frame of every stack is the
 * wrapper and the label must be its caller. Prints nothing, so that stdio
 * allocates nothing.
 *
 *   leaked: 1000 bytes by load_table (xmalloc), 200 by parse_name
 *   (xstrdup, which calls xmalloc), 64 by pool_refill (mylib_alloc, which
 *   is plumbing only when the user says so with MEMTRACE_PLUMBING)
 */
#include <stdlib.h>
#include <string.h>

void *keep[3];

static __attribute__((noinline)) void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		abort();
	return p;
}

static __attribute__((noinline)) char *xstrdup(const char *s, size_t n)
{
	char *d = xmalloc(n);

	memcpy(d, s, strlen(s) + 1);
	return d;
}

static __attribute__((noinline)) void *mylib_alloc(size_t n)
{
	return xmalloc(n);
}

static __attribute__((noinline)) void load_table(void)
{
	keep[0] = xmalloc(1000);
}

static __attribute__((noinline)) void parse_name(void)
{
	keep[1] = xstrdup("name", 200);
}

static __attribute__((noinline)) void pool_refill(void)
{
	keep[2] = mylib_alloc(64);
}

int main(void)
{
	load_table();
	parse_name();
	pool_refill();
	return 0;
}
