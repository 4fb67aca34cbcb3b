/* SPDX-License-Identifier: MIT */
/*
 * The line of a Python frame, from its code object's line table and the
 * instruction it was at, as CPython itself computes it: 3.10 reads the
 * PEP 626 table (Objects/lnotab_notes.txt of 3.10) in byte offsets, 3.11
 * and later the location table (Objects/locations.md) in code units.
 *
 * May not: print, or read a byte past the table it is given (tables come
 * from the trace, and the trace may be damaged or cut).
 */
#ifndef MEMTRACE_ANALYZER_PYFRAMES_H
#define MEMTRACE_ANALYZER_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

/*
 * The line of the instruction at code unit lasti - 1 (lasti as the STACK
 * record writes it; 0, a frame not started, is at first_line, as CPython
 * says of it), for an interpreter of `version` (major << 8 | minor).
 * -1 when there is none: an instruction without a line, one past the
 * table (or past the part of it the trace kept), a version whose tables
 * this does not read, a table that does not parse.
 */
int64_t mt_pyframe_line(uint32_t version, int64_t first_line, const uint8_t *table, size_t len,
                        uint64_t lasti);

#endif
