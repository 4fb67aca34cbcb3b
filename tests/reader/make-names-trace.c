/* SPDX-License-Identifier: MIT */
/*
 * Writes the traces of the name-escaping tests (test-names.py):
 * `make-names-trace inject FILE`: names (argv, executable, mark, module
 * path, exec path) holding newlines that forge a `memtrace check: ok` line
 * and terminal escape sequences (C0 and C1);
 * `make-names-trace latin1 FILE`: the same names with Latin-1 bytes, which
 * are not UTF-8, and a child that execs a traced program.
 * Both: a root process that leaks 100 bytes from a stack in the module, fails
 * a malloc there and exits 0, and a forked child.
 *
 * May not: be installed; it is a test fixture.
 */
#include <stdio.h>
#include <string.h>

#include "trace-builder.h"

struct names {
	const char *exe, *module, *mark, *exec_path;
	const char *cmdline;
	size_t cmdline_len;
};

static const char inject_cmdline[] = "prog\0\nmemtrace check: ok: 1 process\0"
                                     "\x1b]52;c;aGk=\x07\0\xc2\x9b"
                                     "2J\x7f";
static const struct names inject = {
        .exe = "/bin/prog\x1b[8m",
        .module = "/lib/lib\nmemtrace check: ok: 1 process\x1b[8m.so",
        .mark = "\nmemtrace check: ok: 1 process\x1b]52;c;aGk=\x07",
        .exec_path = "/bin/x\nmemtrace check: ok: 1 process\x1b[8m",
        .cmdline = inject_cmdline,
        .cmdline_len = sizeof(inject_cmdline),
};

static const char latin1_cmdline[] = "caf\xe9\0na\xefve\\x41";
static const struct names latin1 = {
        .exe = "/bin/caf\xe9",
        .module = "/lib/libcaf\xe9.so",
        .mark = "\xe9t\xe9",
        .exec_path = "/bin/tr\xe9s",
        .cmdline = latin1_cmdline,
        .cmdline_len = sizeof(latin1_cmdline),
};

int main(int argc, char **argv)
{
	const uint64_t frames[] = {0x7f0000000100};
	const struct names *n;
	struct tb b;
	FILE *f;

	if (argc != 3)
		return 1;
	if (!strcmp(argv[1], "inject"))
		n = &inject;
	else if (!strcmp(argv[1], "latin1"))
		n = &latin1;
	else
		return 1;
	tb_init(&b, 4096);
	tb_chunk(&b, 1, 4242, 4242, 2000000);
	tb_process(&b, 2000000, 4242, 1, MT_ORIGIN_ROOT, 0, n->exe, n->cmdline, n->cmdline_len);
	tb_module(&b, 2000010, 0x7f0000000000, n->module);
	tb_stack(&b, 1, 1, frames);
	tb_alloc(&b, 2000100, MT_FN_MALLOC, 0x10000, 100, 1);
	tb_mark(&b, 2000200, n->mark);
	tb_fail(&b, 2000250, MT_FN_MALLOC, 1u << 30, 1, 12);
	tb_exit(&b, 2000700, MT_EXIT_EXIT, 0);
	/* a child that execs: a traced program (instance 3) */
	tb_chunk(&b, 2, 4243, 4243, 2000300);
	tb_process(&b, 2000300, 4243, 4242, MT_ORIGIN_FORK, 1, n->exe, n->cmdline, n->cmdline_len);
	tb_exec(&b, 2000400, n->exec_path);
	tb_chunk(&b, 3, 4243, 4243, 2000500);
	tb_process(&b, 2000500, 4243, 4242, MT_ORIGIN_EXEC, 2, n->exec_path, n->exec_path,
	           strlen(n->exec_path));
	tb_exit(&b, 2000600, MT_EXIT_MAIN_RETURN, 0);
	f = fopen(argv[2], "wb");
	if (!f || fwrite(b.buf, 1, b.size, f) != b.size || fclose(f))
		return 1;
	tb_free_buf(&b);
	return 0;
}
