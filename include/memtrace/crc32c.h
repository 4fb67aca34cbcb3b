/* SPDX-License-Identifier: MIT */
/*
 * CRC32C (Castagnoli), the checksum of a chunk's records (trace-format.h,
 * struct mt_chunk_header). The x86-64 crc32 instruction (SSE4.2) does 8
 * bytes a cycle; without it a bitwise loop gives the same value slowly.
 * Header only, so the preload and the analyzer share one definition; no
 * allocation, no I/O, no global state but one cached CPU check.
 */
#ifndef MEMTRACE_CRC32C_H
#define MEMTRACE_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

__attribute__((target("sse4.2"))) static inline uint32_t mt_crc32c_hw(uint32_t crc,
                                                                      const uint8_t *p, size_t n)
{
	uint64_t c = crc;

	/* four words a turn: a word a turn, the loop's own three instructions were 3 in 4 of
	 * the preload's checksum of each chunk it ends */
	for (; n >= 32; n -= 32, p += 32) {
		for (int i = 0; i < 4;
		     i++) { /* unrolled; a word at a time, not copied as a block */
			uint64_t v;
			memcpy(&v, p + 8 * i, 8);
			c = __builtin_ia32_crc32di(c, v);
		}
	}
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	for (; n; n--, p++)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p);
	return (uint32_t)c;
}

static inline int mt_crc32c_have_hw(void)
{
	static int have = -1;
	unsigned a, b, c, d;

	if (have < 0)
		have = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
	return have;
}
#endif

/* The CRC32C of n bytes at p (initial value ~0, final xor ~0, as iSCSI and ext4 use it). */
static inline uint32_t mt_crc32c(const void *data, size_t n)
{
	const uint8_t *p = data;
	uint32_t crc = ~0u;

#if defined(__x86_64__)
	if (mt_crc32c_have_hw())
		return ~mt_crc32c_hw(crc, p, n);
#endif
	for (; n; n--, p++) {
		crc ^= *p;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
	}
	return ~crc;
}

#endif
