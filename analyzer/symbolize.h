/* SPDX-License-Identifier: MIT */
/*
 * Symbolization of a trace's return addresses, offline, with elfutils'
 * libdw, from the module map the trace recorded (path, build-id, load bias,
 * segments). A module whose file is gone, changed (another build-id) or has
 * no debug info gives module+offset, never a wrong name. Returns negative
 * errno; never prints.
 */
#ifndef MEMTRACE_ANALYZER_SYMBOLIZE_H
#define MEMTRACE_ANALYZER_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "replay.h"

struct mt_symbolizer;

/* One source-level frame. Strings live until mt_symbolizer_free. */
struct mt_sym {
	const char *function; /* demangled; NULL when unknown */
	const char *file;     /* source file; NULL when unknown */
	uint32_t line;        /* 0 when unknown */
	const char *module;   /* the module's path; NULL when the address is in none */
	uint64_t address;     /* the return address as recorded */
	uint64_t offset;      /* address - the module's load bias */
	bool inlined;         /* inlined into the frame that follows it */
	/* a group's innermost Python frame (analysis.h): the label of the native frames folded
	 * into it; NULL otherwise */
	const char *tail;
};

int mt_symbolizer_new(struct mt_symbolizer **out);
void mt_symbolizer_free(struct mt_symbolizer *s);

/*
 * Whether m has a debug file of its build-id under /usr/lib/debug
 * (Debian's -dbg and dbgsym packages: compressed sections, which reading
 * inflates).
 */
bool mt_symbolizer_debug_file(const struct mt_module *m);
/*
 * Opens m's object and reads its DWARF, as the first lookup in it would
 * (prefetch.c, on another core): 0, or -ENOMEM. Not thread-safe.
 */
int mt_symbolizer_prepare(struct mt_symbolizer *s, const struct mt_module *m);

/*
 * The frames of one return address of an instance: the inlined calls at
 * that point, innermost first, then the function that contains them (the
 * address looked up is address - 1, the call instruction). Writes at most
 * max frames to out and returns how many (at least 1), or a negative errno
 * (-EINVAL for max 0, -ENOMEM). A chain longer than max is cut to its
 * innermost frames: the last one written then still says inlined. An
 * address in no module, or in one without usable symbols, is one frame
 * with function and file NULL (module NULL too for no module). Where
 * several modules of the instance held the address over time (dlclose),
 * the one still loaded at the end wins, else the one recorded last.
 * Results are cached per (object, offset), shared by every instance and
 * load address of the same file and build-id. Not thread-safe.
 */
int mt_symbolize(struct mt_symbolizer *s, const struct mt_instance *in, uint64_t address,
                 struct mt_sym *out, unsigned max);

#endif
