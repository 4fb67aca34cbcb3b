/* SPDX-License-Identifier: MIT */
/*
 * More stacks than a flame graph of the page keeps one by one: 50 call
 * sites in outer() times 50 in inner() make 2,500 distinct stacks, each
 * allocating once, all left live. Stack (o, i) allocates 64 + 50 * o + i
 * bytes, so every size is different and their sum is known:
 * 2,500 * 64 + (0 + 1 + ... + 2,499) = 3,283,750 bytes.
 */
#include <stdlib.h>

#define TENS(X, t) X(t##0) X(t##1) X(t##2) X(t##3) X(t##4) X(t##5) X(t##6) X(t##7) X(t##8) X(t##9)
#define FIFTY(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) \
	TENS(X, 1) TENS(X, 2) TENS(X, 3) TENS(X, 4)

__attribute__((noinline)) static void *leaf(size_t size)
{
	return malloc(size);
}

/* each case is a call site of its own, so a stack of its own */
#define INNER_CASE(n) \
	case n: \
		return leaf(base + n);
__attribute__((noinline)) static void *inner(int i, size_t base)
{
	switch (i) {
		FIFTY(INNER_CASE)
	}
	return NULL;
}

#define OUTER_CASE(n) \
	case n: \
		return inner(i, 64 + 50 * n);
__attribute__((noinline)) static void *outer(int o, int i)
{
	switch (o) {
		FIFTY(OUTER_CASE)
	}
	return NULL;
}

int main(void)
{
	for (int o = 0; o < 50; o++)
		for (int i = 0; i < 50; i++)
			if (!outer(o, i))
				return 1;
	return 0;
}
