/* SPDX-License-Identifier: MIT */
/*
 * A byte count as people write it: digits with an optional K, M, G or T
 * (powers of 1024), then an optional "i" and "B" ("64K", "512KiB", "1G").
 * Header only, so that the preload (MEMTRACE_SAMPLING) and the analyzer
 * (memtrace run --sampling, check --max-leaked) read the same text the
 * same way; no allocation, no locale.
 */
#ifndef MEMTRACE_BYTES_H
#define MEMTRACE_BYTES_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* 0 and *out set, or -EINVAL for text that is not such a count or does not fit. */
static inline int mt_parse_bytes(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	for (int i = 0; i < 4; i++)
		if (*end == units[i] || *end == units[i] + ('a' - 'A')) {
			shift = 10u * (unsigned)(i + 1);
			end++;
			break;
		}
	if (shift && *end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

#endif
