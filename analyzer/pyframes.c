/* SPDX-License-Identifier: MIT */
/*
 * Python line tables (see pyframes.h). Both walks start at the table's
 * first entry and stop at the entry holding the instruction: a table is
 * at most MT_PYCODE_MAX_LINETABLE bytes, and a frame's line is asked once
 * per stack, so no index is kept. Lines are summed unsigned: a damaged
 * table's deltas may overflow, which must not be undefined.
 */
#include <stdbool.h>

#include "pyframes.h"

/*
 * 3.10: (byte-offset delta: unsigned, line delta: signed) byte pairs; a
 * line delta of -128 means the range has no line. As codeobject.c's
 * advance(): each entry's range starts where the one before ended, its line
 * is the running sum of the deltas (a -128 adds nothing). Empty ranges only
 * carry their delta on.
 */
static int64_t line_310(int64_t first_line, const uint8_t *table, size_t len, uint64_t addr)
{
	uint64_t end = 0, line = (uint64_t)first_line;

	for (size_t i = 0; i + 1 < len; i += 2) {
		uint64_t start = end;
		int8_t ldelta = (int8_t)table[i + 1];
		bool none = ldelta == -128;

		end += table[i];
		if (!none)
			line += (uint64_t)(int64_t)ldelta;
		if (addr >= start && addr < end)
			return none ? -1 : (int64_t)line;
	}
	return -1;
}

/* Objects/locations.md: varints of 6-bit chunks, bit 6 says another follows. */
static bool varint(const uint8_t *table, size_t len, size_t *at, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;

	for (;;) {
		if (*at >= len || shift > 60)
			return false;
		uint8_t b = table[(*at)++];
		v |= (uint64_t)(b & 0x3f) << shift;
		shift += 6;
		if (!(b & 0x40))
			break;
	}
	*out = v;
	return true;
}

static bool svarint(const uint8_t *table, size_t len, size_t *at, int64_t *out)
{
	uint64_t v;

	if (!varint(table, len, at, &v))
		return false;
	*out = v & 1 ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
	return true;
}

/*
 * 3.11 and later: entries of a first byte 1ccccnnn (code c, n + 1 code
 * units) and what code c says follows: 0-9 short form (line unchanged, one
 * byte of columns), 10-12 one-line form (line + c - 10, two bytes), 13 no
 * columns (a line delta), 14 long form (a line delta, then end line and
 * columns), 15 no location (no line; the running line unchanged).
 */
static int64_t line_311(int64_t first_line, const uint8_t *table, size_t len, uint64_t unit)
{
	uint64_t start = 0, skip, line = (uint64_t)first_line;
	int64_t delta;
	size_t at = 0;

	while (at < len) {
		uint8_t head = table[at++];
		unsigned code = (head >> 3) & 15;
		uint64_t end = start + (head & 7) + 1;
		bool none = false;

		if (!(head & 0x80))
			return -1; /* not an entry's first byte: the table is not what we read */
		if (code <= 9) {
			at++;
		} else if (code <= 12) {
			line += code - 10;
			at += 2;
		} else if (code == 13) {
			if (!svarint(table, len, &at, &delta))
				return -1;
			line += (uint64_t)delta;
		} else if (code == 14) {
			if (!svarint(table, len, &at, &delta) || !varint(table, len, &at, &skip) ||
			    !varint(table, len, &at, &skip) || !varint(table, len, &at, &skip))
				return -1;
			line += (uint64_t)delta;
		} else {
			none = true;
		}
		/* a cut entry's columns are not needed: its line is known */
		if (unit < end)
			return none ? -1 : (int64_t)line;
		start = end;
	}
	return -1;
}

int64_t mt_pyframe_line(uint32_t version, int64_t first_line, const uint8_t *table, size_t len,
                        uint64_t lasti)
{
	if (version < 0x30a || version > 0x3ff)
		return -1;
	if (lasti == 0)
		return first_line;
	if (version == 0x30a)
		return lasti - 1 > UINT64_MAX / 2
		               ? -1
		               : line_310(first_line, table, len, (lasti - 1) * 2);
	return line_311(first_line, table, len, lasti - 1);
}
