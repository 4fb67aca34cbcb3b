/* SPDX-License-Identifier: MIT */
/*
 * Configuration from the environment (documented in docs/configuration.md).
 * A bad value gets one line on stderr and the default; the program runs on.
 *
 * Context: init. Uses getenv and no allocation.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memtrace/bytes.h"
#include "mt.h"

struct mt_config mt_config;

static unsigned number(const char *name, unsigned def, unsigned lo, unsigned hi)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi || s[0] == '-') {
		mt_say("%s=%s is not a number from %u to %u; using %u", name, s, lo, hi, def);
		return def;
	}
	return (unsigned)v;
}

static bool flag(const char *name, bool def)
{
	const char *s = getenv(name);

	if (!s || !*s)
		return def;
	if (!strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "on"))
		return true;
	if (!strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "off"))
		return false;
	mt_say("%s=%s is not 0 or 1; using %d", name, s, def);
	return def;
}

/*
 * MEMTRACE_SAMPLING: bytes, with an optional K, M or G (powers of 1024).
 * 0 or unset: every block (docs/sampling.md).
 */
static uint64_t sampling(void)
{
	const char *s = getenv("MEMTRACE_SAMPLING");
	uint64_t v;

	if (!s || !*s)
		return 0;
	if (mt_parse_bytes(s, &v) || v > MT_SAMPLING_MAX) {
		mt_say("MEMTRACE_SAMPLING=%s is not a number of bytes (K, M or G allowed) up to "
		       "1G; recording every block",
		       s);
		return 0;
	}
	return v;
}

/*
 * MEMTRACE_RING: bytes, with an optional K, M or G; read by the process
 * that creates the trace (the ring is the file's). At least 1 MiB: the
 * consumer's keyframes and the threads' chunks in use need room.
 */
static uint64_t ring(void)
{
	const char *s = getenv("MEMTRACE_RING");
	uint64_t v;

	if (!s || !*s)
		return 0;
	if (mt_parse_bytes(s, &v) || (v && v < MT_RING_MIN) || v > MT_RING_MAX) {
		mt_say("MEMTRACE_RING=%s is not a number of bytes (K, M or G allowed) from 1M to "
		       "1024G; the trace grows",
		       s);
		return 0;
	}
	return v & ~(uint64_t)(MT_CHUNK_SIZE_MAX - 1);
}

/* MEMTRACE_SEED: any unsigned number; unset, each thread seeds from the clock. */
static void seed(void)
{
	const char *s = getenv("MEMTRACE_SEED");
	char *end;

	if (!s || !*s)
		return;
	errno = 0;
	mt_config.seed = strtoull(s, &end, 10);
	mt_config.seed_set = !errno && !*end && s[0] != '-';
	if (!mt_config.seed_set)
		mt_say("MEMTRACE_SEED=%s is not an unsigned number; seeding from the clock", s);
}

/* A setting of one of two words: true for the first (or unset), false for the second. */
static bool one_of(const char *name, const char *first, const char *second, const char *otherwise)
{
	const char *s = getenv(name);

	if (!s || !*s || !strcmp(s, first))
		return true;
	if (!strcmp(s, second))
		return false;
	mt_say("%s=%s is not %s or %s; %s", name, s, first, second, otherwise);
	return true;
}

void mt_config_load(void)
{
	const char *out = getenv("MEMTRACE_OUTPUT");

	if (!out || !*out)
		out = "trace.bin";
	if (strlen(out) >= sizeof(mt_config.output) - 64) {
		mt_say("MEMTRACE_OUTPUT is longer than %zu bytes; using trace.bin",
		       sizeof(mt_config.output) - 64);
		out = "trace.bin";
	}
	strcpy(mt_config.output, out);
	mt_config.enable = flag("MEMTRACE_ENABLE", true);
	mt_config.depth = number("MEMTRACE_DEPTH", 64, 1, MT_MAX_DEPTH);
	mt_config.interval_ms = number("MEMTRACE_INTERVAL_MS", 10, 0, 3600 * 1000);
	mt_config.stack_table_bits = number("MEMTRACE_STACK_TABLE_BITS", 20, 10, 28);
	mt_config.trace_mmap = flag("MEMTRACE_MMAP", true);
	mt_config.python = flag("MEMTRACE_PYTHON", true);
	mt_config.sampling = sampling();
	mt_config.ring = ring();
	seed();
	/* the scan needs every live block from the process's own records: a sampled trace
	 * holds few of them, a ring may have given the early ones back */
	mt_config.reachability =
	        !mt_config.sampling && !mt_config.ring && flag("MEMTRACE_REACHABILITY", true);
	mt_config.reach_ms = number("MEMTRACE_REACHABILITY_MS", 10000, 0, 3600 * 1000);
	mt_config.fast_unwind = one_of("MEMTRACE_UNWIND", "fast", "libunwind", "using fast");
	mt_config.tsc =
	        one_of("MEMTRACE_CLOCK", "tsc", "monotonic", "using tsc where the kernel does");
}
