/* SPDX-License-Identifier: MIT */
/*
 * Writes the traces of the file-handling tests (test-io.py):
 * `make-io-trace module PATH FILE`: one process that leaks 100 bytes from
 * a stack inside a module recorded as PATH (the symbolizer opens it);
 * `make-io-trace big N FILE`: one process that makes N allocations and
 * frees them, in chunks of 256 KiB (a file big enough to cut while it is read).
 *
 * May not: be installed; it is a test fixture.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace-builder.h"

#define CHUNK (256u * 1024)

static void module(struct tb *b, uint64_t t, uint64_t base, const char *path)
{
	tb_dt(b, t);
	tb_u(b, base);
	tb_str(b, path, strlen(path));
	tb_str(b, "\x12\x34\x56\x78", 4);
	tb_u(b, 1);
	tb_u(b, 0);
	tb_u(b, 0x10000);
	tb_u(b, 5);
	tb_end(b, MT_REC_MODULE);
}

/* Room for one more small record in the current chunk, else a new chunk of the thread. */
static void room(struct tb *b, uint64_t t)
{
	if (b->pos + 64 > b->chunk + b->chunk_size)
		tb_chunk(b, 1, 4242, 4242, t);
}

int main(int argc, char **argv)
{
	struct tb b;
	FILE *f;

	if (argc != 4)
		return 1;
	tb_init(&b, CHUNK);
	tb_chunk(&b, 1, 4242, 4242, 2000000);
	tb_process(&b, 2000000, 4242, 1, MT_ORIGIN_ROOT, 0, "/bin/prog", "prog", 4);
	if (!strcmp(argv[1], "module")) {
		const uint64_t frames[] = {0x7f0000000100};

		module(&b, 2000010, 0x7f0000000000, argv[2]);
		tb_stack(&b, 1, 1, frames);
		tb_alloc(&b, 2000100, MT_FN_MALLOC, 0x10000, 100, 1);
		tb_exit(&b, 2000700, MT_EXIT_EXIT, 0);
	} else if (!strcmp(argv[1], "big")) {
		unsigned long n = strtoul(argv[2], NULL, 10);
		uint64_t t = 2000100;

		for (unsigned long i = 0; i < n; i++, t += 2) {
			room(&b, t);
			tb_alloc(&b, t, MT_FN_MALLOC, 0x10000 + 64 * (i % 1024), 32, 0);
			room(&b, t + 1);
			tb_free(&b, t + 1, 0x10000 + 64 * (i % 1024));
		}
		room(&b, t);
		tb_exit(&b, t, MT_EXIT_EXIT, 0);
	} else {
		return 1;
	}
	f = fopen(argv[3], "wb");
	if (!f || fwrite(b.buf, 1, b.size, f) != b.size || fclose(f))
		return 1;
	tb_free_buf(&b);
	return 0;
}
