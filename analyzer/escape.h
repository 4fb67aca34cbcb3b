/* SPDX-License-Identifier: MIT */
#ifndef MEMTRACE_ANALYZER_ESCAPE_H
#define MEMTRACE_ANALYZER_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/*
 * Names from a trace (argv, marks, paths, symbols) hold any bytes. Escaped,
 * each byte that is not part of valid UTF-8 becomes the four characters
 * \xNN and a backslash becomes \\, so the bytes can be told back
 * (docs/json-report.md). MT_ESCAPE_CONTROL, for text: also each byte of a
 * control character (C0, DEL, C1 U+0080..U+009F) as \xNN, so nothing
 * reaches a terminal that moves the cursor, starts an escape sequence or
 * begins a line. MT_ESCAPE_QUOTE: also " as \".
 */
#define MT_ESCAPE_CONTROL 1u
#define MT_ESCAPE_QUOTE   2u
/*
 * The n bytes at s escaped into buf (size bytes, NUL-terminated, cut before
 * an escape that does not fit); returns the length written, or with buf
 * NULL the whole length.
 */
size_t mt_escape(char *buf, size_t size, const void *s, size_t n, unsigned flags);
/* The same, allocated; NULL without memory. */
char *mt_escape_dup(const void *s, size_t n, unsigned flags);
/* The n bytes at s written to f escaped. */
void mt_put_escaped(FILE *f, const void *s, size_t n, unsigned flags);

#endif
