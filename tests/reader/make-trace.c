/* SPDX-License-Identifier: MIT */
/*
 * Writes a small known trace for the command-line tests (test-cli.py):
 * `make-trace SCENARIO FILE`. Scenarios: good (a root that exits 3 and
 * leaves 300 bytes, 200 of them definite and 100 reachable by its exit's
 * scan, a child forked before its last free and killed), cut (good, cut inside
 * its last chunk), newer (a header of the next version).
 *
 * May not: be installed; it is a test fixture.
 */
#include <stdio.h>
#include <string.h>

#include "trace-builder.h"

int main(int argc, char **argv)
{
	struct tb b;
	size_t size;
	FILE *f;

	if (argc != 3)
		return 1;
	tb_init(&b, 4096);
	tb_chunk(&b, 1, 4242, 4242, 2000000);
	tb_process(&b, 2000000, 4242, 1, MT_ORIGIN_ROOT, 0, "/bin/prog", "prog\0--flag", 12);
	tb_alloc(&b, 2000100, MT_FN_MALLOC, 0x10000, 100, 0);
	tb_alloc(&b, 2000200, MT_FN_CALLOC, 0x20000, 200, 0);
	tb_alloc(&b, 2000300, MT_FN_MALLOC, 0x30000, 1000, 0);
	tb_free(&b, 2000400, 0x30000);
	tb_mmap(&b, 2000500, 0x7f0000000000, 16384, 0);
	tb_munmap(&b, 2000600, 0x7f0000001000, 4096);
	tb_reach(&b, 2000650, MT_REACH_DONE, 0, 2, 300, 8192, 40000);
	tb_reach_blocks(&b, MT_REACH_DEFINITE, 1, (const uint64_t[]){0x20000});
	tb_reach_blocks(&b, MT_REACH_REACHABLE, 1, (const uint64_t[]){0x10000});
	tb_exit(&b, 2000700, MT_EXIT_EXIT, 3);
	tb_chunk(&b, 2, 4243, 4243, 2000350);
	tb_process(&b, 2000350, 4243, 4242, MT_ORIGIN_FORK, 1, "/bin/prog", "prog", 4);
	tb_free(&b, 2000360, 0x10000);
	size = b.size;
	if (!strcmp(argv[1], "cut"))
		size -= 1000;
	else if (!strcmp(argv[1], "newer"))
		((struct mt_file_header *)b.buf)->version = MT_FORMAT_VERSION + 1;
	else if (strcmp(argv[1], "good"))
		return 1;
	f = fopen(argv[2], "wb");
	if (!f || fwrite(b.buf, 1, size, f) != size || fclose(f))
		return 1;
	tb_free_buf(&b);
	return 0;
}
