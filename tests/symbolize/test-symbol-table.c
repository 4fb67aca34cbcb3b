/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the symbolizer's symbol-table lookups, for objects without
 * DWARF: every function of libelf (this process loads it; its debug info is
 * not installed, or the test skips) is named as libdwfl's
 * dwfl_module_addrinfo names it, and that function, which walks the whole
 * symbol table at each call, is called for none of them. It was called for
 * every new address: a flame graph of a torch program, whose libtorch has
 * 100,000-odd symbols, took minutes.
 */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize.h"

static unsigned long walks;

/* Interposed: the symbolizer's calls count, then go to libdw's. */
const char *dwfl_module_addrinfo(Dwfl_Module *mod, GElf_Addr address, GElf_Off *offset,
                                 GElf_Sym *sym, GElf_Word *shndxp, Elf **elfp, Dwarf_Addr *bias)
{
	static __typeof__(dwfl_module_addrinfo) *real;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "dwfl_module_addrinfo");
	walks++;
	return real(mod, address, offset, sym, shndxp, elfp, bias);
}

static struct mt_instance inst;
static struct mt_module *libelf;

static int add_libelf(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *b = strrchr(info->dlpi_name, '/');

	(void)size;
	(void)arg;
	if (!b || strncmp(b + 1, "libelf", 6) != 0)
		return 0;
	libelf = calloc(1, sizeof(*libelf));
	libelf->seg = calloc(info->dlpi_phnum, sizeof(*libelf->seg));
	libelf->base = info->dlpi_addr;
	libelf->path = strdup(info->dlpi_name);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD)
			libelf->seg[libelf->nseg++] =
			        (struct mt_segment){ph->p_vaddr, ph->p_memsz, ph->p_flags};
	}
	inst.modules = libelf;
	inst.nmodules = 1;
	return 1;
}

int main(void)
{
	static const Dwfl_Callbacks cb = {
	        .find_elf = dwfl_build_id_find_elf,
	        .find_debuginfo = dwfl_standard_find_debuginfo,
	        .section_address = dwfl_offline_section_address,
	};
	struct mt_symbolizer *s;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	unsigned long checked = 0, failures = 0, expected_walks;
	int nsyms;

	dl_iterate_phdr(add_libelf, NULL);
	if (!libelf || !libelf->path) {
		fprintf(stderr, "libelf is not loaded: cannot test\n");
		return 77;
	}
	/* what libdwfl names, from a Dwfl of our own over the same file */
	dwfl = dwfl_begin(&cb);
	mod = dwfl ? dwfl_report_elf(dwfl, "libelf", libelf->path, -1, 0, true) : NULL;
	if (!mod || dwfl_report_end(dwfl, NULL, NULL) != 0 ||
	    (nsyms = dwfl_module_getsymtab(mod)) <= 0)
		return 77;
	{
		const unsigned char *id;
		GElf_Addr at;
		int len = dwfl_module_build_id(mod, &id, &at);
		Dwarf_Addr bias;

		if (len <= 0 || len > MT_MAX_BUILD_ID)
			return 77;
		memcpy(libelf->build_id, id, (size_t)len);
		libelf->build_id_len = (uint32_t)len;
		if (dwfl_module_getdwarf(mod, &bias)) {
			fprintf(stderr,
			        "libelf has debug info: names come from DWARF, cannot test\n");
			return 77;
		}
	}
	if (mt_symbolizer_new(&s) < 0)
		return 1;
	for (int i = 1; i < nsyms; i++) {
		GElf_Sym sym, want_sym;
		GElf_Addr value;
		GElf_Off off;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &value, NULL, NULL, NULL);
		const char *want;
		struct mt_sym out[4];
		int n;

		if (!name || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size < 2)
			continue;
		/* a return address inside the function: the symbolizer looks at the byte before */
		want = dwfl_module_addrinfo(mod, value + sym.st_size / 2, &off, &want_sym, NULL,
		                            NULL, NULL);
		n = mt_symbolize(s, &inst, libelf->base + value + sym.st_size / 2 + 1, out, 4);
		checked++;
		if (n != 1 || !want || (out[0].function ? strcmp(out[0].function, want) != 0 : 1)) {
			if (failures++ < 5)
				fprintf(stderr, "%s+%#lx: got %s, libdwfl says %s\n", name,
				        (unsigned long)(sym.st_size / 2),
				        n == 1 && out[0].function ? out[0].function : "(none)",
				        want ? want : "(none)");
		}
	}
	expected_walks = checked; /* the test's own calls above */
	if (checked < 20) {
		fprintf(stderr, "only %lu functions in libelf: cannot test\n", checked);
		return 77;
	}
	if (walks != expected_walks) {
		fprintf(stderr,
		        "dwfl_module_addrinfo walked the symbol table %lu times for %lu "
		        "addresses\n",
		        walks - expected_walks, checked);
		failures++;
	}
	mt_symbolizer_free(s);
	dwfl_end(dwfl);
	free(libelf->seg);
	free(libelf->path);
	free(libelf);
	printf("%lu functions of libelf named as libdwfl names them\n", checked);
	return failures ? 1 : 0;
}
