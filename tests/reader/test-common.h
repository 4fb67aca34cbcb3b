/* SPDX-License-Identifier: MIT */
/*
 * The few checks the reader's unit tests share: a failed CHECK prints where
 * and goes on, so one run shows every failure; main returns non-zero if any.
 */
#ifndef MEMTRACE_TESTS_TEST_COMMON_H
#define MEMTRACE_TESTS_TEST_COMMON_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int test_failures;

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			test_failures++;                                               \
		}                                                                      \
	} while (0)

#define CHECK_EQ(a, b)                                                                  \
	do {                                                                            \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                        \
		if (a_ != b_) {                                                         \
			fprintf(stderr, "%s:%d: %s == %" PRIu64 ", expected %s == %" PRIu64 "\n", \
				__FILE__, __LINE__, #a, a_, #b, b_);                    \
			test_failures++;                                                \
		}                                                                       \
	} while (0)

#define CHECK_STR(a, b)                                                                 \
	do {                                                                            \
		const char *a_ = (a), *b_ = (b);                                        \
		if (!a_ || strcmp(a_, b_)) {                                            \
			fprintf(stderr, "%s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__, \
				__LINE__, #a, a_ ? a_ : "(null)", b_);                  \
			test_failures++;                                                \
		}                                                                       \
	} while (0)

#endif
