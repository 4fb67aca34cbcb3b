/* SPDX-License-Identifier: MIT */
/*
 * Names from a trace escaped reversibly (escape.h): every byte outside
 * valid UTF-8 as \xNN, a backslash as \\, on request control characters
 * and quotes too.
 *
 * May not: allocate except in mt_escape_dup, or depend on any library:
 * the fuzz target compiles it with the reader (tests/fuzz).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"

/*
 * The length of the valid UTF-8 sequence at s (at most n bytes), 0 if
 * the byte at s starts none: no overlong form, no surrogate, nothing
 * above U+10FFFF.
 */
static size_t utf8_length(const uint8_t *s, size_t n)
{
	uint8_t c = s[0];
	size_t len;
	uint32_t min, cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, min = 0x80, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, min = 0x800, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/*
 * The next piece of s as it is written out: the escape of one byte (\xNN,
 * or \\ and \" before a backslash and a quote) or a run of bytes kept.
 * Returns how many bytes of s it covers; *out and *outn say what to write.
 */
static size_t escape_next(const uint8_t *s, size_t n, unsigned flags, char tmp[5], const char **out,
                          size_t *outn)
{
	size_t len = utf8_length(s, n);
	bool control = len == 1 ? s[0] < 0x20 || s[0] == 0x7f
	                        : len == 2 && s[0] == 0xc2 && s[1] < 0xa0; /* C1: U+0080..U+009F */

	if (len == 1 && (s[0] == '\\' || (s[0] == '"' && (flags & MT_ESCAPE_QUOTE)))) {
		tmp[0] = '\\';
		tmp[1] = (char)s[0];
		*out = tmp;
		*outn = 2;
		return 1;
	}
	if (!len || (control && (flags & MT_ESCAPE_CONTROL))) {
		snprintf(tmp, 5, "\\x%02x", s[0]);
		*out = tmp;
		*outn = 4;
		return 1;
	}
	*out = (const char *)s;
	*outn = len;
	return len;
}

size_t mt_escape(char *buf, size_t size, const void *s, size_t n, unsigned flags)
{
	const uint8_t *p = s;
	size_t at = 0;
	char tmp[5];

	for (size_t i = 0; i < n;) {
		const char *out;
		size_t outn, used = escape_next(p + i, n - i, flags, tmp, &out, &outn);
		if (buf) {
			/* cut before a piece that does not fit whole */
			if (at + outn >= size)
				break;
			memcpy(buf + at, out, outn);
		}
		at += outn;
		i += used;
	}
	if (buf && size)
		buf[at] = 0;
	return at;
}

char *mt_escape_dup(const void *s, size_t n, unsigned flags)
{
	size_t len = mt_escape(NULL, 0, s, n, flags);
	char *buf = malloc(len + 1);

	if (buf)
		mt_escape(buf, len + 1, s, n, flags);
	return buf;
}

void mt_put_escaped(FILE *f, const void *s, size_t n, unsigned flags)
{
	const uint8_t *p = s;
	char tmp[5];

	for (size_t i = 0; i < n;) {
		const char *out;
		size_t outn;
		i += escape_next(p + i, n - i, flags, tmp, &out, &outn);
		fwrite(out, 1, outn, f);
	}
}
