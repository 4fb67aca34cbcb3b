// SPDX-License-Identifier: MIT
// Built -O2 -g: two always_inline functions inlined into outer_fn, so the
// malloc's return address has an inlined chain leaf <- mid <- outer_fn. The
// stores after each call keep them from being tail calls.
#include <stdlib.h>

char *volatile sink;

static inline __attribute__((always_inline)) char *leaf(size_t n)
{
	char *p = malloc(n); /* line:i_leaf */
	if (p)
		p[0] = 1;
	return p;
}

static inline __attribute__((always_inline)) char *mid(size_t n)
{
	char *p = leaf(n + 1); /* line:i_mid */
	if (p)
		p[1] = 2;
	return p;
}

char *outer_fn(size_t n);

__attribute__((noinline, noclone)) char *outer_fn(size_t n)
{
	char *p = mid(n); /* line:i_outer */
	sink = p;
	return p;
}

int main(int argc, char **argv)
{
	char *p = outer_fn(5000 + (size_t)argc); /* line:i_main */
	(void)argv;
	return p == NULL;
}
