/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the scope index (analyzer/scopes.c) against libdw itself:
 * for each file named, at every address of every unit's code within 2
 * bytes of a scope's edge and at a stride between, the chain of
 * subprograms and inlined subroutines the index gives is the one
 * dwarf_getscopes and dwarf_getscopes_die give (the DIEs by offset,
 * innermost first, up to the first subprogram). The files: the test
 * programs with inlining (C at -O2, C++ with namespaces and classes) and a
 * library of the analyzer's units with the most inlining, at -O2 -g.
 *
 *   test-scopes FILE...
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "scopes.h"

#define STRIDE    61
#define MAX_CHAIN 256

static unsigned long checked, failures, inlined;

/* libdw's chain at pc, as symbolize.c's frames read it; its length. */
static int libdw_chain(Dwarf_Die *cudie, Dwarf_Addr pc, Dwarf_Off *out)
{
	Dwarf_Die *scopes = NULL, *chain = NULL;
	int n = 0, nscopes = dwarf_getscopes(cudie, pc, &scopes), nchain = 0;

	if (nscopes > 0)
		nchain = dwarf_getscopes_die(&scopes[0], &chain);
	for (int i = 0; i < nchain && n < MAX_CHAIN; i++) {
		int tag = dwarf_tag(&chain[i]);

		if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
			continue;
		out[n++] = dwarf_dieoffset(&chain[i]);
		if (tag == DW_TAG_subprogram)
			break;
	}
	free(chain);
	free(scopes);
	return n;
}

static int index_chain(const struct mt_scopes *s, Dwarf_Addr pc, Dwarf_Off *out)
{
	int n = 0;

	for (int i = mt_scopes_at(s, pc); i >= 0 && n < MAX_CHAIN; i = mt_scopes_up(s, i)) {
		out[n++] = dwarf_dieoffset(mt_scopes_die(s, i));
		if (mt_scopes_tag(s, i) == DW_TAG_subprogram)
			break;
	}
	return n;
}

static void check_at(const char *file, Dwarf_Die *cudie, const struct mt_scopes *s, Dwarf_Addr pc)
{
	Dwarf_Off want[MAX_CHAIN], got[MAX_CHAIN];
	int nw = libdw_chain(cudie, pc, want), ng = index_chain(s, pc, got);
	bool same = nw == ng;

	for (int i = 0; same && i < nw; i++)
		same = want[i] == got[i];
	checked++;
	inlined += nw > 1;
	if (!same && failures++ < 20)
		fprintf(stderr,
		        "%s: pc %#" PRIx64 ": libdw gives %d scopes (innermost %#" PRIx64
		        "), the index %d (innermost %#" PRIx64 ")\n",
		        file, (uint64_t)pc, nw, nw ? (uint64_t)want[0] : 0, ng,
		        ng ? (uint64_t)got[0] : 0);
}

/* Around every range edge of die's subtree, and at a stride over the ranges of the unit. */
static void check_edges(const char *file, Dwarf_Die *cudie, const struct mt_scopes *s,
                        Dwarf_Die *die)
{
	Dwarf_Die child;
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;

	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0)
		for (Dwarf_Addr d = 0; d < 3; d++) {
			check_at(file, cudie, s, lo + d);
			if (hi >= 1 + d)
				check_at(file, cudie, s, hi - 1 - d);
			check_at(file, cudie, s, hi + d);
		}
	if (dwarf_child(die, &child) != 0)
		return;
	do
		check_edges(file, cudie, s, &child);
	while (dwarf_siblingof(&child, &child) == 0);
}

static void check_unit(const char *file, Dwarf_Die *cudie)
{
	struct mt_scopes *s = mt_scopes_new(cudie);
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;

	if (!s) {
		fprintf(stderr, "%s: no memory for a unit's index\n", file);
		failures++;
		return;
	}
	check_edges(file, cudie, s, cudie);
	while ((off = dwarf_ranges(cudie, off, &base, &lo, &hi)) > 0)
		for (Dwarf_Addr pc = lo; pc < hi; pc += STRIDE)
			check_at(file, cudie, s, pc);
	mt_scopes_free(s);
}

static int check_module(Dwfl_Module *mod, void **user, const char *name, Dwarf_Addr start,
                        void *arg)
{
	Dwarf_Die *cu = NULL;
	Dwarf_Addr bias;

	(void)user;
	(void)start;
	while ((cu = dwfl_module_nextcu(mod, cu, &bias))) {
		check_unit(name, cu);
		++*(unsigned *)arg;
	}
	return DWARF_CB_OK;
}

static int check_file(const char *file)
{
	static const Dwfl_Callbacks cb = {
	        .find_elf = dwfl_build_id_find_elf,
	        .find_debuginfo = dwfl_standard_find_debuginfo,
	        .section_address = dwfl_offline_section_address,
	};
	Dwfl *dwfl = dwfl_begin(&cb);
	unsigned units = 0;
	unsigned long before = checked, inlined_before = inlined;

	if (!dwfl || !dwfl_report_offline(dwfl, file, file, -1) ||
	    dwfl_report_end(dwfl, NULL, NULL) != 0) {
		fprintf(stderr, "%s: cannot open: %s\n", file, dwfl_errmsg(-1));
		return -1;
	}
	dwfl_getmodules(dwfl, check_module, &units, 0);
	dwfl_end(dwfl);
	printf("%s: %u units, %lu addresses, %lu inside inlined subroutines\n", file, units,
	       checked - before, inlined - inlined_before);
	/* a file without units or code tests nothing */
	return units && checked > before ? 0 : -1;
}

int main(int argc, char **argv)
{
	int bad = 0;

	for (int i = 1; i < argc; i++)
		bad |= check_file(argv[i]) < 0;
	if (failures)
		fprintf(stderr, "%lu of %lu addresses differ\n", failures, checked);
	return bad || failures || argc < 2;
}
