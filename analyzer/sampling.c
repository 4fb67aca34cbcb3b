/* SPDX-License-Identifier: MIT */
/*
 * The weight of a sampled block. A block of s bytes was recorded with
 * probability p = 1 - exp(-s/T) (each byte a sampling point with probability
 * 1/T); counting it 1/p times makes every sum of blocks or of bytes an
 * unbiased estimate of the true one (Horvitz-Thompson, as heapprofd and
 * tcmalloc do). Bytes are rounded to the nearest (an error of half a byte
 * against a weight of thousands); blocks, whose weight may be 1.3, round up
 * with probability the fraction, by a hash of the key, so that their sum is
 * unbiased too.
 */
#include <math.h>

#include "memtrace/trace-format.h"
#include "sampling.h"

static uint64_t mix(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

struct mt_weight mt_sampling_weight(uint64_t interval, uint64_t size, uint64_t key)
{
	double w, whole, u;

	if (!interval || !size || size > mt_sampling_exact_above(interval))
		return (struct mt_weight){size, 1};
	w = 1.0 / -expm1(-(double)size / (double)interval);
	whole = floor(w);
	u = (double)(mix(key) >> 11) * 0x1p-53;
	return (struct mt_weight){(uint64_t)llround((double)size * w),
	                          (uint32_t)whole + (u < w - whole)};
}
