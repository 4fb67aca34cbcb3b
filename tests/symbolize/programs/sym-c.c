// SPDX-License-Identifier: MIT
// Allocations at known lines, built -O0 -g, for the symbolizer's tests: a
// malloc two calls below main and a strdup (a libc frame). Built a second
// time with -DOTHER_BUILD, which moves every function, to stand in for a
// file replaced by another build after it was traced. The markers are what
// check-symbols looks for; keep each on the line it names.
#include <stdlib.h>
#include <string.h>

void *volatile sink;

#ifdef OTHER_BUILD
__attribute__((noinline)) static int other_build_padding(int x)
{
	return x * 3 + 1;
}
#endif

__attribute__((noinline)) static void *inner(size_t n)
{
	return malloc(n); /* line:c_malloc */
}

__attribute__((noinline)) static void *outer(size_t n)
{
	void *p = inner(n + 1); /* line:c_inner */
	return p;
}

int main(void)
{
	/* 99 characters: a strdup of 100 bytes. */
	static const char text[] = "0123456789012345678901234567890123456789"
				   "0123456789012345678901234567890123456789"
				   "0123456789012345678";

#ifdef OTHER_BUILD
	sink = (void *)(long)other_build_padding(1);
#endif
	sink = outer(4320); /* line:c_outer */
	sink = strdup(text); /* line:c_strdup */
	return 0;
}
