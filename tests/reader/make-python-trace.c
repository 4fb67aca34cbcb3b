/* SPDX-License-Identifier: MIT */
/*
 * Writes the traces of the Python stack tests (test-python.py):
 * `make-python-trace SCENARIO FILE`. This program plays the interpreter:
 * its own functions, among them one named _PyEval_EvalFrameDefault, are
 * the native frames, and its own executable is the trace's module, so the
 * analyzer symbolizes them as it would a real python3's. Scenarios:
 *
 *   hybrid     native alloc_site, EVAL, call_native, EVAL.cold (a clone),
 *              main; Python (PYSTACK 7) inner (code 1), middle (2, entry),
 *              0 (unknown, entry)
 *   truncated  native alloc_site, EVAL; Python inner, middle (entry),
 *              outer (3, entry): outer is left over
 *   spare      the hybrid's native frames; Python inner (entry): the outer
 *              EVAL.cold has none left
 *   native     the hybrid's native frames, no Python frames, no PYCODE
 *   native-0   the same, written with a PYSTACK id of 0 and PYCODE
 *              records: its reports must be byte for byte native's
 *   native-unknown  the same, naming PYSTACK 8 where the trace has only 7:
 *              byte for byte native's too
 *
 * May not: be installed; it is a test fixture.
 */
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace-builder.h"

/* The fake interpreter's functions: only their addresses matter. */
int _PyEval_EvalFrameDefault(int x);
int call_native(int x);
int alloc_site(int x);
/* a compiler's clone of the eval function (eval-clone.c) */
int eval_clone(int x) __asm__("_PyEval_EvalFrameDefault.cold");

__attribute__((noinline, used)) int _PyEval_EvalFrameDefault(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline, used)) int call_native(int x)
{
	return x * 5 + 2;
}

__attribute__((noinline, used)) int alloc_site(int x)
{
	return x * 7 + 3;
}

struct self {
	uint64_t base;
	uint8_t build_id[MT_MAX_BUILD_ID];
	uint32_t build_id_len;
	uint32_t nseg;
	struct {
		uint64_t vaddr, memsz, flags;
	} seg[MT_MAX_SEGMENTS];
};

static void read_build_id(struct self *s, const uint8_t *p, size_t size)
{
	while (size >= sizeof(ElfW(Nhdr))) {
		const ElfW(Nhdr) *nh = (const void *)p;
		size_t name = (nh->n_namesz + 3) & ~3u, desc = (nh->n_descsz + 3) & ~3u;
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    !memcmp(p + sizeof(*nh), "GNU", 4) && nh->n_descsz <= MT_MAX_BUILD_ID) {
			memcpy(s->build_id, p + sizeof(*nh) + name, nh->n_descsz);
			s->build_id_len = nh->n_descsz;
			return;
		}
		if (sizeof(*nh) + name + desc > size)
			return;
		p += sizeof(*nh) + name + desc;
		size -= sizeof(*nh) + name + desc;
	}
}

/* The main program's load bias, build-id and segments, as the preload records them. */
static int find_self(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct self *s = ctx;

	(void)size;
	s->base = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE && !s->build_id_len)
			read_build_id(s, (const uint8_t *)(info->dlpi_addr + ph->p_vaddr),
			              ph->p_memsz);
		if (ph->p_type == PT_LOAD && s->nseg < MT_MAX_SEGMENTS) {
			s->seg[s->nseg].vaddr = ph->p_vaddr;
			s->seg[s->nseg].memsz = ph->p_memsz;
			s->seg[s->nseg++].flags = ph->p_flags;
		}
	}
	return 1; /* the first object is the program */
}

/*
 * A PIE is recorded at this load bias whatever ASLR chose, so that two runs
 * write the same addresses (test-python.py compares their reports).
 */
#define FIXED_BASE 0x560000000000ull

static struct self self;

/* A return address inside fn, past its first instruction, at the recorded load bias. */
static uint64_t in(uint64_t fn)
{
	return fn + 4 - self.base + (self.base ? FIXED_BASE : 0);
}

/*
 * Line tables (3.10: byte-offset delta, line delta pairs). inner: first
 * line 10, bytes 0-5 line 11, 6-13 line 13; middle: first line 20, bytes
 * 0-9 line 20, 10-11 line 25.
 */
static const uint8_t inner_table[] = {6, 1, 8, 2};
static const uint8_t middle_table[] = {10, 0, 2, 5};
static const uint8_t outer_table[] = {4, 2};

static void pycodes(struct tb *b)
{
	tb_pycode(b, 1, 0x30a, 10, "/app/inner.py", "inner", inner_table, sizeof(inner_table));
	tb_pycode(b, 2, 0x30a, 20, "/app/mid\x1b[8m.py", "Cls.middle", middle_table,
	          sizeof(middle_table));
	tb_pycode(b, 3, 0x30a, 30, "/app/outer.py", "<module>", outer_table, sizeof(outer_table));
}

int main(int argc, char **argv)
{
	/* lasti as written: the code unit + 1. inner: unit 4 = byte 8, line 13; middle: unit 5 =
	 * byte 10, line 25; outer: unit 0, line 32 */
	static const uint64_t py_hybrid[] = {1 << 1, 2 << 1 | MT_PYFRAME_ENTRY,
	                                     0 << 1 | MT_PYFRAME_ENTRY};
	static const uint64_t py_truncated[] = {1 << 1, 2 << 1 | MT_PYFRAME_ENTRY,
	                                        3 << 1 | MT_PYFRAME_ENTRY};
	static const uint64_t py_spare[] = {1 << 1 | MT_PYFRAME_ENTRY};
	static const uint64_t lasti[] = {5, 6, 1};
	const char *scenario = argc == 3 ? argv[1] : "";
	uint64_t native[5];
	char exe[4096];
	struct self *s = &self;
	struct tb b;
	ssize_t len;
	FILE *f;

	if (argc != 3)
		return 2;
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		return 1;
	exe[len] = 0;
	dl_iterate_phdr(find_self, s);
	native[0] = in((uint64_t)(uintptr_t)alloc_site);
	native[1] = in((uint64_t)(uintptr_t)_PyEval_EvalFrameDefault);
	native[2] = in((uint64_t)(uintptr_t)call_native);
	native[3] = in((uint64_t)(uintptr_t)eval_clone);
	native[4] = in((uint64_t)(uintptr_t)main);

	tb_init(&b, 4096);
	tb_chunk(&b, 1, 4242, 4242, 2000000);
	tb_process(&b, 2000000, 4242, 1, MT_ORIGIN_ROOT, 0, exe, "python3\0app.py", 15);
	tb_dt(&b, 2000001);
	tb_u(&b, s->base ? FIXED_BASE : 0);
	tb_str(&b, exe, strlen(exe));
	tb_str(&b, s->build_id, s->build_id_len);
	tb_u(&b, s->nseg);
	for (uint32_t i = 0; i < s->nseg; i++) {
		tb_u(&b, s->seg[i].vaddr);
		tb_u(&b, s->seg[i].memsz);
		tb_u(&b, s->seg[i].flags);
	}
	tb_end(&b, MT_REC_MODULE);
	if (!strcmp(scenario, "hybrid")) {
		pycodes(&b);
		tb_pystack(&b, 7, 3, py_hybrid, lasti);
		tb_stack_py(&b, 1, 5, native, 7);
	} else if (!strcmp(scenario, "truncated")) {
		/* before the PYSTACK and PYCODEs it names: a reader collects them all first */
		tb_stack_py(&b, 1, 2, native, 7);
		tb_pystack(&b, 7, 3, py_truncated, lasti);
		pycodes(&b);
	} else if (!strcmp(scenario, "spare")) {
		pycodes(&b);
		tb_pystack(&b, 7, 1, py_spare, lasti);
		tb_stack_py(&b, 1, 5, native, 7);
	} else if (!strcmp(scenario, "native")) {
		tb_stack(&b, 1, 5, native);
	} else if (!strcmp(scenario, "native-0")) {
		pycodes(&b);
		tb_stack_py(&b, 1, 5, native, 0);
	} else if (!strcmp(scenario, "native-unknown")) {
		pycodes(&b);
		tb_pystack(&b, 7, 1, py_spare, lasti);
		tb_stack_py(&b, 1, 5, native, 8);
	} else {
		return 2;
	}
	tb_alloc(&b, 2000100, MT_FN_MALLOC, 0x10000, 100, 1);
	tb_exit(&b, 2000700, MT_EXIT_EXIT, 0);
	f = fopen(argv[2], "wb");
	if (!f || fwrite(b.buf, 1, b.size, f) != b.size || fclose(f))
		return 1;
	tb_free_buf(&b);
	return alloc_site(0) + call_native(0) + _PyEval_EvalFrameDefault(0) + eval_clone(0) == 10
	               ? 0
	               : 1;
}
