/* SPDX-License-Identifier: MIT */
/*
 * Checks analyzer/pyframes.c against CPython: `check-pyframes FIXTURE`
 * reads what dump-linetables.py printed (one code object a line: version,
 * first line, line table in hex, then the line of every code unit, "-" for
 * none) and computes each of those lines from the table, as a STACK
 * record's lasti (unit + 1) would ask. Any difference fails; so does a
 * fixture without a code object. Also: lasti 0, a frame not started, is at
 * the first line; the unit past the code has none; a table cut in half (as
 * the capture cuts a long one) gives each unit CPython's line or none.
 *
 * May not: be installed; it is a test.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyframes.h"

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int main(int argc, char **argv)
{
	uint64_t codes = 0, units = 0, wrong = 0, cut_lines = 0;
	size_t cap = 0, tcap = 0;
	uint8_t *table = NULL;
	char *line = NULL;
	FILE *f;

	if (argc != 2 || !(f = fopen(argv[1], "r"))) {
		fprintf(stderr, "usage: check-pyframes FIXTURE\n");
		return 2;
	}
	while (getline(&line, &cap, f) > 0) {
		char *save, *version = strtok_r(line, " \n", &save);
		char *first = strtok_r(NULL, " \n", &save), *hex = strtok_r(NULL, " \n", &save);
		size_t len = 0, n = hex ? strlen(hex) : 0;
		uint64_t unit = 0;
		uint32_t v;
		int64_t fl;

		if (!version || !first || !hex || n % 2) {
			fprintf(stderr, "bad fixture line %" PRIu64 "\n", codes + 1);
			return 1;
		}
		v = (uint32_t)strtoul(version, NULL, 10);
		fl = strtoll(first, NULL, 10);
		if (tcap < n / 2 + 1 && !(table = realloc(table, tcap = n / 2 + 1)))
			return 1;
		for (size_t i = 0; strcmp(hex, "-") && i < n; i += 2)
			table[len++] = (uint8_t)(hex_digit(hex[i]) << 4 | hex_digit(hex[i + 1]));
		if (mt_pyframe_line(v, fl, table, len, 0) != fl) {
			fprintf(stderr,
			        "version %x first line %" PRId64
			        ": lasti 0 is not the first line\n",
			        v, fl);
			wrong++;
		}
		for (char *want; (want = strtok_r(NULL, " \n", &save)); unit++) {
			int64_t expect = strcmp(want, "-") ? strtoll(want, NULL, 10) : -1;
			int64_t got = mt_pyframe_line(v, fl, table, len, unit + 1);
			/* a table the capture cut: what is left is read alike, the rest has no line
			 */
			int64_t cut = mt_pyframe_line(v, fl, table, len / 2, unit + 1);
			if (got != expect && wrong++ < 20)
				fprintf(stderr,
				        "version %x first line %" PRId64 " table %s: unit %" PRIu64
				        " is line %" PRId64 ", CPython says %" PRId64 "\n",
				        v, fl, hex, unit, got, expect);
			if (cut != expect && cut != -1 && wrong++ < 20)
				fprintf(stderr,
				        "version %x first line %" PRId64
				        " table %s cut to %zu bytes: unit %" PRIu64
				        " is line %" PRId64 ", CPython says %" PRId64 "\n",
				        v, fl, hex, len / 2, unit, cut, expect);
			cut_lines += cut != -1;
		}
		if (mt_pyframe_line(v, fl, table, len, unit + 1) != -1 && wrong++ < 20)
			fprintf(stderr,
			        "version %x table %s: unit %" PRIu64
			        ", past the code, has a line\n",
			        v, hex, unit);
		codes++;
		units += unit;
	}
	fclose(f);
	free(line);
	free(table);
	printf("%" PRIu64 " code objects, %" PRIu64 " code units (%" PRIu64
	       " with a line in tables cut in half), %" PRIu64 " wrong\n",
	       codes, units, cut_lines, wrong);
	/* a cut table keeps the lines of its first half: some must be found */
	return codes && cut_lines && !wrong ? 0 : 1;
}
