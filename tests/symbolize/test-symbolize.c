/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the symbolizer without a trace: the module map of this very
 * process (dl_iterate_phdr), copied into a struct mt_instance the way the
 * preload records it, then changed to make each case: the right build-id,
 * another build-id, no build-id (segments decide), a file that is gone but
 * whose build-id has a debug file (libc with libc6-dbg), the vdso, an
 * address in no module, and a result cut to max frames.
 *
 * Built -O0 -g; the line:NAME markers give the expected lines.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prefetch.h"
#include "symbolize.h"

static int failures;
static char self_path[4096];

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static struct mt_instance inst;

static size_t note_build_id(const struct dl_phdr_info *info, uint8_t *out)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint8_t *p, *end;

		if (ph->p_type != PT_NOTE)
			continue;
		p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const void *)p;
			const uint8_t *desc = p + sizeof(*nh) + ((nh->n_namesz + 3) & ~3u);

			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    memcmp(p + sizeof(*nh), "GNU", 4) == 0 && nh->n_descsz <= MT_MAX_BUILD_ID) {
				memcpy(out, desc, nh->n_descsz);
				return nh->n_descsz;
			}
			p = desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
	return 0;
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct mt_module *m;

	(void)size;
	(void)arg;
	inst.modules = realloc(inst.modules, (inst.nmodules + 1) * sizeof(*inst.modules));
	if (!inst.modules)
		abort();
	m = &inst.modules[inst.nmodules++];
	memset(m, 0, sizeof(*m));
	m->base = info->dlpi_addr;
	m->path = strdup(info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : self_path);
	m->build_id_len = (uint32_t)note_build_id(info, m->build_id);
	m->seg = calloc(info->dlpi_phnum, sizeof(*m->seg));
	if (!m->path || !m->seg)
		abort();
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD)
			m->seg[m->nseg++] =
				(struct mt_segment){ph->p_vaddr, ph->p_memsz, ph->p_flags};
	}
	return 0;
}

static struct mt_module *module_named(const char *prefix)
{
	for (uint32_t i = 0; i < inst.nmodules; i++) {
		const char *b = strrchr(inst.modules[i].path, '/');

		b = b ? b + 1 : inst.modules[i].path;
		if (strncmp(b, prefix, strlen(prefix)) == 0)
			return &inst.modules[i];
	}
	return NULL;
}

static uint32_t marker(const char *name)
{
	char want[128], buf[4096];
	uint32_t line = 0, found = 0;
	FILE *f = fopen(__FILE__, "r");

	if (!f)
		return 0;
	snprintf(want, sizeof(want), "line:%s ", name);
	while (fgets(buf, sizeof(buf), f)) {
		line++;
		if (strstr(buf, want))
			found = line;
	}
	fclose(f);
	return found;
}

__attribute__((noinline)) static uint64_t return_address(void)
{
	return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

__attribute__((noinline)) static uint64_t known_caller(void)
{
	uint64_t ra = return_address(); /* line:t_call */
	return ra;
}

static const char *base_name(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;

	return s ? s + 1 : p;
}

static bool is_strdup(const char *f)
{
	return f && (strcmp(f, "strdup") == 0 || strcmp(f, "__strdup") == 0);
}

static void fresh(struct mt_symbolizer **s)
{
	mt_symbolizer_free(*s);
	if (mt_symbolizer_new(s) < 0)
		abort();
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/*
 * The prefetch (analyzer/prefetch.c): the symbolizer it read libc's debug
 * file into on its thread answers as a fresh one does, for libc and for a
 * module it left alone (this program: no debug file of its build-id); one
 * taken before it is done leaves the thread to free its own (ASan).
 */
static void test_prefetch(uint64_t ra, uint64_t in_strdup)
{
	const struct mt_module *libc = module_named("libc.so");
	const uint64_t addrs[] = {in_strdup, ra};
	struct mt_symbolizer *s = NULL, *t;
	struct mt_prefetch *p = mt_prefetch_start(&libc, 1);
	struct mt_sym want[16], got[16];

	CHECK(p, "no prefetch thread");
	if (!p)
		return;
	/* its thread is of the lowest priority: on a busy machine it waits for an idle core */
	for (int i = 0; i < 6000 && !mt_prefetch_done(p); i++)
		usleep(10000);
	CHECK(mt_prefetch_done(p), "the prefetch not done in 60 s");
	t = mt_prefetch_take(p);
	CHECK(t, "a prefetch done gave no symbolizer");
	fresh(&s);
	for (size_t a = 0; t && a < sizeof(addrs) / sizeof(addrs[0]); a++) {
		int nw = mt_symbolize(s, &inst, addrs[a], want, 16);
		int ng = mt_symbolize(t, &inst, addrs[a], got, 16);
		CHECK(nw >= 1 && ng == nw, "address %zu: %d frames, %d from the prefetch", a, nw, ng);
		for (int i = 0; i < nw && i < ng; i++)
			CHECK(same_str(want[i].function, got[i].function) &&
			              same_str(want[i].file, got[i].file) && want[i].line == got[i].line &&
			              same_str(want[i].module, got[i].module) &&
			              want[i].inlined == got[i].inlined,
			      "address %zu frame %d: %s, from the prefetch %s", a, i,
			      want[i].function ? want[i].function : "NULL",
			      got[i].function ? got[i].function : "NULL");
	}
	if (t)
		mt_symbolizer_free(t);
	mt_symbolizer_free(s);
	/* taken at once: most likely before the thread is done, which then frees its own */
	p = mt_prefetch_start(&libc, 1);
	CHECK(p, "no second prefetch thread");
	t = mt_prefetch_take(p);
	if (t)
		mt_symbolizer_free(t);
}

int main(void)
{
	struct mt_symbolizer *s = NULL;
	struct mt_sym out[16];
	struct mt_module *self, *libc, saved;
	uint64_t ra = known_caller();
	uint64_t in_strdup;
	char libc_debug[256];
	int n;

	ssize_t len = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
	if (len <= 0)
		return 1;
	self_path[len] = 0;
	dl_iterate_phdr(add_module, NULL);
	/*
	 * libc's strdup, not a sanitizer's interceptor; + 1 looks up its first
	 * byte, as a return address would.
	 */
	void *libc_handle = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *strdup_fn = libc_handle ? dlsym(libc_handle, "strdup") : NULL;
	if (!strdup_fn)
		return 77;
	in_strdup = (uint64_t)(uintptr_t)strdup_fn + 1;
	self = &inst.modules[0];
	libc = module_named("libc.so");
	if (!libc || !self->build_id_len) {
		fprintf(stderr, "no libc or no build-id: cannot test\n");
		return 77;
	}
	fresh(&s);

	/* The right file: name, file, line. */
	n = mt_symbolize(s, &inst, ra, out, 16);
	CHECK(n == 1, "frames: %d", n);
	CHECK(out[0].function && strcmp(out[0].function, "known_caller") == 0, "function %s",
	      out[0].function ? out[0].function : "NULL");
	CHECK(out[0].file && strcmp(base_name(out[0].file), "test-symbolize.c") == 0, "file");
	CHECK(out[0].line == marker("t_call"), "line %u, want %u", out[0].line, marker("t_call"));
	CHECK(out[0].module && strcmp(out[0].module, self_path) == 0, "module");
	CHECK(out[0].offset == ra - self->base && out[0].address == ra, "offset");

	n = mt_symbolize(s, &inst, in_strdup, out, 16);
	CHECK(n >= 1 && is_strdup(out[n - 1].function), "libc: %s",
	      n >= 1 && out[n - 1].function ? out[n - 1].function : "NULL");

	/* Max: the innermost frames only. */
	CHECK(mt_symbolize(s, &inst, ra, out, 0) == -EINVAL, "max 0");
	CHECK(mt_symbolize(s, &inst, ra, out, 1) == 1, "max 1");

	/* No module: the address alone. */
	n = mt_symbolize(s, &inst, 8, out, 16);
	CHECK(n == 1 && !out[0].module && !out[0].function && out[0].offset == 8, "no module");
	n = mt_symbolize(s, &inst, 0, out, 16);
	CHECK(n == 1 && !out[0].module, "address 0");

	/* Another build-id recorded than the file has: module+offset. */
	fresh(&s);
	saved = *self;
	self->build_id[0] ^= 1;
	n = mt_symbolize(s, &inst, ra, out, 16);
	CHECK(n == 1 && !out[0].function && !out[0].file && out[0].line == 0 &&
		      out[0].module && strcmp(out[0].module, self_path) == 0 &&
		      out[0].offset == ra - self->base,
	      "changed build-id gave %s", out[0].function ? out[0].function : "a file");
	*self = saved;

	/* The build-id is what counts, not the path alone: the same path, both answers cached apart. */
	n = mt_symbolize(s, &inst, ra, out, 16);
	CHECK(n == 1 && out[0].function && strcmp(out[0].function, "known_caller") == 0,
	      "right build-id after a wrong one");

	/* No build-id recorded: the segments decide. */
	fresh(&s);
	self->build_id_len = 0;
	n = mt_symbolize(s, &inst, ra, out, 16);
	CHECK(n == 1 && !out[0].function, "no build-id recorded but the file has one");
	*self = saved;

	/* A file that is gone, but its build-id has a debug file (libc6-dbg). */
	fresh(&s);
	saved = *libc;
	libc->path = "/nonexistent/libc.so.6";
	n = mt_symbolize(s, &inst, in_strdup, out, 16);
	snprintf(libc_debug, sizeof(libc_debug), "/usr/lib/debug/.build-id/%02x/", libc->build_id[0]);
	for (uint32_t i = 1; i < libc->build_id_len; i++)
		snprintf(libc_debug + strlen(libc_debug), 3, "%02x", libc->build_id[i]);
	strcat(libc_debug, ".debug");
	if (access(libc_debug, R_OK) == 0)
		CHECK(n >= 1 && is_strdup(out[n - 1].function) &&
			      strcmp(out[0].module, "/nonexistent/libc.so.6") == 0,
		      "gone libc with a debug file: %s",
		      n >= 1 && out[n - 1].function ? out[n - 1].function : "NULL");
	else
		CHECK(n == 1 && !out[0].function, "gone libc without a debug file: a name");
	*libc = saved;

	/* The vdso (a name, not a file) and a gone module with no build-id. */
	fresh(&s);
	saved = *libc;
	libc->path = "linux-vdso.so.1";
	libc->build_id_len = 0;
	n = mt_symbolize(s, &inst, in_strdup, out, 16);
	CHECK(n == 1 && !out[0].function && out[0].module &&
		      strcmp(out[0].module, "linux-vdso.so.1") == 0 &&
		      out[0].offset == in_strdup - libc->base,
	      "vdso");
	*libc = saved;

	mt_symbolizer_free(s);
	test_prefetch(ra, in_strdup);
	for (uint32_t i = 0; i < inst.nmodules; i++) {
		free(inst.modules[i].path);
		free(inst.modules[i].seg);
	}
	free(inst.modules);
	return failures ? 1 : 0;
}
