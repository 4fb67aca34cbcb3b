/* SPDX-License-Identifier: MIT */
/*
 * A compilation unit's code scopes by address (symbolize.c's inlined
 * chains): the subprograms and inlined subroutines holding a pc, innermost
 * first, as dwarf_getscopes and dwarf_getscopes_die would find them, from
 * one walk of the unit's DIEs made on its first look-up.
 *
 * May not: print. Not thread-safe. The DIEs handed out are valid while the
 * unit's Dwarf is.
 */
#ifndef MEMTRACE_ANALYZER_SCOPES_H
#define MEMTRACE_ANALYZER_SCOPES_H

#include <elfutils/libdw.h>
#include <stddef.h>

struct mt_scopes;

/* The index of the unit at cudie; NULL without memory. */
struct mt_scopes *mt_scopes_new(Dwarf_Die *cudie);
void mt_scopes_free(struct mt_scopes *s);

/*
 * The subprogram or inlined subroutine innermost at pc (an address of the
 * unit's DWARF), or -1 when none holds it; then each scope's DIE, tag and
 * the scope holding it (-1 at the outermost).
 */
int mt_scopes_at(const struct mt_scopes *s, Dwarf_Addr pc);
Dwarf_Die *mt_scopes_die(const struct mt_scopes *s, int scope);
int mt_scopes_tag(const struct mt_scopes *s, int scope);
int mt_scopes_up(const struct mt_scopes *s, int scope);

#endif
