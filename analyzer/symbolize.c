/* SPDX-License-Identifier: MIT */
/*
 * Symbolization (see symbolize.h): return addresses to function, file, line
 * and inlined chain, with elfutils' libdwfl, one Dwfl per ELF object.
 *
 * An object is identified by (path, build-id) and opened at most once, at
 * load bias 0, so every process instance and every load address of it share
 * one Dwfl and one cache keyed by the offset (address - load bias). Its file
 * is used only if its GNU build-id note equals the recorded one (or, with no
 * build-id recorded, its PT_LOAD segments equal the recorded ones); else the
 * separate debug file of the recorded build-id is tried, and else the
 * object gives module+offset only. A name comes from DWARF when the address
 * is inside a DWARF subprogram, else from a function symbol (.symtab or
 * .dynsym) whose size covers the address; a sizeless or non-function symbol
 * is never used, since the nearest label before an address is often not
 * the function containing it.
 *
 * Debug files are found as Dwfl's standard search finds them, but opened
 * by find_debuginfo below: /usr/lib/debug/.build-id, then .gnu_debuglink;
 * and debuginfod when the user set DEBUGINFOD_URLS. Every path, from the
 * trace or derived from it, is opened only if it is a regular file, and
 * never waits (a FIFO's open would wait for a writer for ever).
 *
 * May not: print, or give a name it cannot vouch for. Not thread-safe: one
 * symbolizer per thread. Memory grows with the distinct (object, offset)
 * pairs looked up and the distinct strings they name.
 */
#include <dwarf.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grow.h"
#include "map.h"
#include "scopes.h"
#include "symbolize.h"

/* The C++ runtime's demangler; the analyzer links libstdc++ for it. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* A lookup's result, cached: frames[first .. first + n) of the symbolizer. */
struct cached {
	uint32_t first;
	uint32_t n;
};

struct frame {
	const char *function;
	const char *file;
	uint32_t line;
	bool inlined;
};

/* A sized symbol dwfl_module_addrinfo could choose: [value, end), its table index. */
struct sym_range {
	uint64_t value;
	uint64_t end;
	uint64_t max_end; /* the largest end of this entry and all before it */
	uint32_t index;
	uint8_t rank; /* binding_rank() */
	bool global;  /* in the part of the table searched first */
};

/* One ELF object, by (path, build-id). */
struct object {
	char *path;
	uint8_t build_id[MT_MAX_BUILD_ID];
	uint32_t build_id_len;
	Dwfl *dwfl; /* NULL: module+offset only */
	Dwfl_Module *mod;
	struct mt_map cache; /* offset -> struct cached */
	struct mt_map units; /* unit DIE address -> struct mt_scopes *, made when first met */
	uint32_t next;       /* index + 1 of the next object with the same hash */
	/* the symbol table by address, made on the first symbol lookup */
	bool ranges_made;
	int nsyms; /* dwfl_module_getsymtab's count, < 0: no table */
	struct sym_range *ranges;
	size_t nranges;
	uint64_t *exact; /* sorted values of sizeless symbols searched first */
	size_t nexact;
};

/* A module segment of an instance, [start, end): see find_module. */
struct seg_range {
	uint64_t start;
	uint64_t end;
	uint64_t max_end; /* the largest end of this entry and all before it */
	uint32_t module;  /* index into the instance's modules */
};

/* An instance's segments by address, made again when its module list changed. */
struct instance_segs {
	const struct mt_module *modules;
	uint32_t nmodules;
	struct seg_range *segs;
	size_t nsegs;
	struct object **objects; /* by module index: the last found, if it still matches */
};

struct mt_symbolizer {
	struct mt_map instances; /* instance pointer -> struct instance_segs */
	const struct mt_instance *last_in;
	struct instance_segs *last_segs;

	struct object **objects;
	size_t nobjects, objects_cap;
	struct mt_map object_index; /* hash of (path, build-id) -> index + 1, chained by next */

	struct frame *frames;
	size_t nframes, frames_cap;

	struct mt_map strings; /* hash -> index + 1 into strs */
	char **strs;
	size_t nstrs, strs_cap;
};

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define HASH_SEED 0xcbf29ce484222325ull

/*
 * One copy of each distinct string: function and file names repeat across
 * thousands of addresses. A 64-bit hash collision between different strings
 * only costs a second copy (the later one is not interned).
 */
static const char *intern(struct mt_symbolizer *s, const char *str)
{
	uint64_t h = hash_bytes(HASH_SEED, str, strlen(str));
	bool created;
	uint32_t *slot;
	char *copy;

	slot = mt_map_put(&s->strings, h, &created);
	if (!slot)
		return NULL;
	if (!created && strcmp(s->strs[*slot - 1], str) == 0)
		return s->strs[*slot - 1];
	if (mt_grow((void **)&s->strs, &s->strs_cap, s->nstrs + 1, sizeof(*s->strs)))
		return NULL;
	copy = strdup(str);
	if (!copy)
		return NULL;
	s->strs[s->nstrs++] = copy;
	if (created)
		*slot = (uint32_t)s->nstrs;
	return copy;
}

int mt_symbolizer_new(struct mt_symbolizer **out)
{
	struct mt_symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	mt_map_init(&s->instances, sizeof(struct instance_segs));
	mt_map_init(&s->object_index, sizeof(uint32_t));
	mt_map_init(&s->strings, sizeof(uint32_t));
	*out = s;
	return 0;
}

void mt_symbolizer_free(struct mt_symbolizer *s)
{
	void *is, *sc;

	if (!s)
		return;
	for (size_t i = 0; i < s->nobjects; i++) {
		struct object *o = s->objects[i];

		if (o->dwfl)
			dwfl_end(o->dwfl);
		mt_map_free(&o->cache);
		for (size_t j = 0; mt_map_next(&o->units, &j, &(uint64_t){0}, &sc);)
			mt_scopes_free(*(struct mt_scopes **)sc);
		mt_map_free(&o->units);
		free(o->ranges);
		free(o->exact);
		free(o->path);
		free(o);
	}
	free(s->objects);
	mt_map_free(&s->object_index);
	for (size_t i = 0; mt_map_next(&s->instances, &i, &(uint64_t){0}, &is);) {
		free(((struct instance_segs *)is)->segs);
		free(((struct instance_segs *)is)->objects);
	}
	mt_map_free(&s->instances);
	free(s->frames);
	for (size_t i = 0; i < s->nstrs; i++)
		free(s->strs[i]);
	free(s->strs);
	mt_map_free(&s->strings);
	free(s);
}

static bool same_build_id(Dwfl_Module *mod, const struct mt_module *m)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n = dwfl_module_build_id(mod, &bits, &vaddr);

	return n > 0 && (uint32_t)n == m->build_id_len && memcmp(bits, m->build_id, (size_t)n) == 0;
}

/* Without a build-id, the PT_LOAD segments are the best identity we have. */
static bool same_segments(Dwfl_Module *mod, const struct mt_module *m)
{
	GElf_Addr bias;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	size_t phnum;
	uint32_t k = 0;

	if (!elf || elf_getphdrnum(elf, &phnum) != 0)
		return false;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr mem, *ph = gelf_getphdr(elf, (int)i, &mem);

		if (!ph)
			return false;
		if (ph->p_type != PT_LOAD)
			continue;
		if (k == m->nseg || ph->p_vaddr != m->seg[k].vaddr ||
		    ph->p_memsz != m->seg[k].memsz || ph->p_flags != m->seg[k].flags)
			return false;
		k++;
	}
	return k == m->nseg && k > 0;
}

/*
 * file, if it is a regular file. A trace can name anything: open() of a
 * FIFO waits for a writer for ever, and a device's open can have effects,
 * so it never blocks and anything else is refused before it is read.
 */
static int open_regular(const char *file)
{
	struct stat st;
	int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/*
 * The debug file candidate at path, if it is a regular file with the
 * object's build-id: its descriptor; -EINVAL if something not a regular
 * file is there (a FIFO, a device, a directory), -ESTALE if another build
 * is, -ENOENT if nothing can be opened.
 */
static int open_debug_candidate(const char *path, const unsigned char *id, int idlen)
{
	int fd = open_regular(path);
	const void *cand;
	Elf *elf;
	bool same;

	if (fd < 0)
		return fd == -EINVAL ? -EINVAL : -ENOENT;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	same = elf && dwelf_elf_gnu_build_id(elf, &cand) == idlen &&
	       memcmp(cand, id, (size_t)idlen) == 0;
	elf_end(elf);
	if (!same) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* The debug file of a build-id under /usr/lib/debug/.build-id: false when it has none (too
 * short) or the name does not fit. */
static bool build_id_path(char *out, size_t size, const unsigned char *id, int len)
{
	int at;

	if (len < 2)
		return false;
	at = snprintf(out, size, "/usr/lib/debug/.build-id/%02x/", id[0]);
	for (int i = 1; i < len && at >= 0 && (size_t)at < size; i++)
		at += snprintf(out + at, size - (size_t)at, "%02x", id[i]);
	return at >= 0 && (size_t)at < size &&
	       (size_t)snprintf(out + at, size - (size_t)at, ".debug") < size - (size_t)at;
}

/*
 * Dwfl's find_debuginfo, searching where dwfl_standard_find_debuginfo
 * does (the build-id path under /usr/lib/debug; the .gnu_debuglink name
 * next to the file, in its .debug/, under /usr/lib/debug) but opening
 * through open_regular: the standard search opens every candidate with a
 * plain open(), which waits for ever on a FIFO planted at a debug file's
 * name. A candidate must carry the object's build-id, so an object without
 * one gets no separate debug file. debuginfod (DEBUGINFOD_URLS set) is
 * asked through the standard search only when no candidate is something
 * other than a regular file: that search opens the same paths again.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, GElf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const unsigned char *id;
	GElf_Addr vaddr;
	int idlen = dwfl_module_build_id(mod, &id, &vaddr);
	char paths[4][PATH_MAX];
	int n = 0, fd;
	bool something_else = false;

	if (idlen < 2)
		return -1;
	if (build_id_path(paths[n], PATH_MAX, id, idlen))
		n++;
	if (debuglink_file && !strchr(debuglink_file, '/') && file_name && file_name[0] == '/') {
		const char *slash = strrchr(file_name, '/');
		int dirlen = (int)(slash - file_name);

		if (snprintf(paths[n], PATH_MAX, "%.*s/%s", dirlen, file_name, debuglink_file) <
		            PATH_MAX &&
		    strcmp(paths[n], file_name) != 0)
			n++;
		if (snprintf(paths[n], PATH_MAX, "%.*s/.debug/%s", dirlen, file_name,
		             debuglink_file) < PATH_MAX)
			n++;
		if (snprintf(paths[n], PATH_MAX, "/usr/lib/debug%.*s/%s", dirlen, file_name,
		             debuglink_file) < PATH_MAX)
			n++;
	}
	for (int i = 0; i < n; i++) {
		fd = open_debug_candidate(paths[i], id, idlen);
		if (fd >= 0) {
			*debuginfo_file_name = strdup(paths[i]);
			return fd;
		}
		something_else |= fd == -EINVAL;
	}
	if (something_else || !getenv("DEBUGINFOD_URLS"))
		return -1;
	return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
	                                    debuglink_crc, debuginfo_file_name);
}

static const Dwfl_Callbacks dwfl_callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = find_debuginfo,
        .section_address = dwfl_offline_section_address,
};

/* A Dwfl over one file at load bias 0, if it is the object the trace saw. */
static bool try_open(struct object *o, const struct mt_module *m, const char *file)
{
	int fd = open_regular(file);
	Dwfl *dwfl;
	Dwfl_Module *mod;
	bool ok;

	if (fd < 0)
		return false;
	dwfl = dwfl_begin(&dwfl_callbacks);
	if (!dwfl) {
		close(fd);
		return false;
	}
	/*
	 * ET_DYN with add_p_vaddr: placed at its p_vaddr, bias 0; ET_EXEC as
	 * linked. The module owns fd once reported; a refusal leaves it ours.
	 */
	mod = dwfl_report_elf(dwfl, file, file, fd, 0, true);
	if (!mod)
		close(fd);
	if (dwfl_report_end(dwfl, NULL, NULL) != 0)
		mod = NULL;
	if (m->build_id_len)
		ok = mod && same_build_id(mod, m);
	else
		ok = mod &&
		     dwfl_module_build_id(mod, &(const unsigned char *){NULL}, &(GElf_Addr){0}) <=
		             0 &&
		     same_segments(mod, m);
	if (!ok) {
		dwfl_end(dwfl);
		return false;
	}
	o->dwfl = dwfl;
	o->mod = mod;
	return true;
}

static void open_object(struct object *o, const struct mt_module *m)
{
	char debug[64 + 2 * MT_MAX_BUILD_ID];

	/* Relative names are not files: the vdso ("linux-vdso.so.1"), an empty name. */
	if (o->path[0] == '/' && try_open(o, m, o->path))
		return;
	/*
	 * The file is gone or is another build now (an upgraded package): the
	 * debug file of the recorded build-id still describes the old one.
	 */
	if (build_id_path(debug, sizeof(debug), m->build_id, (int)m->build_id_len))
		try_open(o, m, debug);
}

static int find_object(struct mt_symbolizer *s, const struct mt_module *m, struct object **out)
{
	uint64_t h = hash_bytes(HASH_SEED, m->path, strlen(m->path));
	struct object *o;
	uint32_t *head;
	bool created;

	h = hash_bytes(h, m->build_id, m->build_id_len);
	head = mt_map_put(&s->object_index, h, &created);
	if (!head)
		return -ENOMEM;
	for (uint32_t i = created ? 0 : *head; i; i = s->objects[i - 1]->next) {
		o = s->objects[i - 1];
		if (o->build_id_len == m->build_id_len && strcmp(o->path, m->path) == 0 &&
		    memcmp(o->build_id, m->build_id, m->build_id_len) == 0) {
			*out = o;
			return 0;
		}
	}
	if (mt_grow((void **)&s->objects, &s->objects_cap, s->nobjects + 1, sizeof(*s->objects)))
		return -ENOMEM;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->path = strdup(m->path);
	if (!o->path) {
		free(o);
		return -ENOMEM;
	}
	memcpy(o->build_id, m->build_id, m->build_id_len);
	o->build_id_len = m->build_id_len;
	mt_map_init(&o->cache, sizeof(struct cached));
	mt_map_init(&o->units, sizeof(struct mt_scopes *));
	o->next = created ? 0 : *head;
	s->objects[s->nobjects++] = o;
	*head = (uint32_t)s->nobjects;
	open_object(o, m);
	*out = o;
	return 0;
}

bool mt_symbolizer_debug_file(const struct mt_module *m)
{
	char debug[64 + 2 * MT_MAX_BUILD_ID];

	return build_id_path(debug, sizeof(debug), m->build_id, (int)m->build_id_len) &&
	       access(debug, F_OK) == 0;
}

int mt_symbolizer_prepare(struct mt_symbolizer *s, const struct mt_module *m)
{
	struct object *o;
	Dwarf_Addr bias;
	int r = find_object(s, m, &o);

	if (r == 0 && o->mod)
		dwfl_module_getdwarf(o->mod, &bias);
	return r;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct seg_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int make_segs(struct instance_segs *is, const struct mt_instance *in)
{
	size_t n = 0;

	free(is->segs);
	free(is->objects);
	*is = (struct instance_segs){0};
	for (uint32_t i = 0; i < in->nmodules; i++)
		n += in->modules[i].nseg;
	is->segs = malloc((n ? n : 1) * sizeof(*is->segs));
	is->objects = calloc(in->nmodules ? in->nmodules : 1, sizeof(*is->objects));
	if (!is->segs || !is->objects)
		return -ENOMEM;
	for (uint32_t i = 0; i < in->nmodules; i++) {
		const struct mt_module *m = &in->modules[i];

		for (uint32_t k = 0; k < m->nseg; k++) {
			uint64_t start = m->base + m->seg[k].vaddr;

			if (m->seg[k].memsz)
				is->segs[is->nsegs++] =
				        (struct seg_range){.start = start,
				                           .end = start + m->seg[k].memsz,
				                           .module = i};
		}
	}
	if (is->nsegs > 1)
		qsort(is->segs, is->nsegs, sizeof(*is->segs), cmp_seg);
	for (size_t i = 0; i < is->nsegs; i++) {
		uint64_t prev = i ? is->segs[i - 1].max_end : 0;
		is->segs[i].max_end = is->segs[i].end > prev ? is->segs[i].end : prev;
	}
	is->modules = in->modules;
	is->nmodules = in->nmodules;
	return 0;
}

/*
 * The module whose segments hold pc. Several can, when objects were unloaded
 * and others mapped at the same addresses later; the API carries no time,
 * so we take the last recorded of those still loaded at the end of the
 * instance if there is one, else the last recorded. Both are usually the
 * same object, dlopened again. The segments are searched by address: a
 * flame graph asks for every frame of every stack, and a torch process has
 * hundreds of modules.
 */
static int find_module(struct mt_symbolizer *s, const struct mt_instance *in, uint64_t pc,
                       const struct mt_module **out, struct object ***object)
{
	struct instance_segs *is;
	size_t lo = 0, hi;
	uint32_t live = UINT32_MAX, last = UINT32_MAX;
	bool created;
	int r;

	*out = NULL;
	/* a stack's frames are all of one instance: the last one's segments, without a lookup */
	if (in == s->last_in) {
		is = s->last_segs;
		created = false;
	} else {
		is = mt_map_put(&s->instances, (uint64_t)(uintptr_t)in, &created);
		if (!is)
			return -ENOMEM;
		/* an insertion may move the map's values */
		s->last_in = in;
		s->last_segs = is;
	}
	if ((created || is->modules != in->modules || is->nmodules != in->nmodules) &&
	    (r = make_segs(is, in)) < 0)
		return r;
	/* the first segment starting above pc; those holding it are before it */
	hi = is->nsegs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (is->segs[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i > 0 && is->segs[i - 1].max_end > pc; i--) {
		const struct seg_range *g = &is->segs[i - 1];

		if (g->end <= pc)
			continue;
		if (last == UINT32_MAX || g->module > last)
			last = g->module;
		if (!in->modules[g->module].gone_time && (live == UINT32_MAX || g->module > live))
			live = g->module;
	}
	if (live != UINT32_MAX)
		last = live;
	if (last != UINT32_MAX) {
		*out = &in->modules[last];
		*object = &is->objects[last];
	}
	return 0;
}

static const char *demangled(struct mt_symbolizer *s, const char *name)
{
	const char *r;
	char *d;
	int status = -1;

	if (name[0] != '_' || name[1] != 'Z')
		return intern(s, name);
	d = __cxa_demangle(name, NULL, NULL, &status);
	if (!d || status != 0) {
		free(d);
		return intern(s, name);
	}
	r = intern(s, d);
	free(d);
	return r;
}

/*
 * A subprogram's or inlined subroutine's name, following abstract_origin and
 * specification. A mangled linkage name says more than DW_AT_name (scope,
 * template arguments, parameters); any other linkage name is an asm label,
 * such as glibc's __GI___strdup for __strdup, and says less.
 */
static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *linkage =
	        dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	const char *name;

	if (!linkage)
		linkage =
		        dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
	if (linkage && linkage[0] == '_' && linkage[1] == 'Z')
		return linkage;
	name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
	if (name && name[0])
		return name;
	return linkage && linkage[0] ? linkage : NULL;
}

static int push_frame(struct mt_symbolizer *s, const char *function, const char *file,
                      uint32_t line, bool inlined)
{
	struct frame *f;

	if (mt_grow((void **)&s->frames, &s->frames_cap, s->nframes + 1, sizeof(*s->frames)))
		return -ENOMEM;
	f = &s->frames[s->nframes++];
	f->function = function ? demangled(s, function) : NULL;
	f->file = file ? intern(s, file) : NULL;
	f->line = file ? line : 0;
	f->inlined = inlined;
	if ((function && !f->function) || (file && !f->file))
		return -ENOMEM;
	return 0;
}

/* The scopes of the unit at cudie, indexed on its first look-up; NULL without memory. */
static struct mt_scopes *unit_scopes(struct object *o, Dwarf_Die *cudie)
{
	bool created;
	struct mt_scopes **sc = mt_map_put(&o->units, (uint64_t)(uintptr_t)cudie->addr, &created);

	if (sc && created && !(*sc = mt_scopes_new(cudie))) {
		mt_map_del(&o->units, (uint64_t)(uintptr_t)cudie->addr);
		return NULL;
	}
	return sc ? *sc : NULL;
}

/*
 * The DWARF frames at pc: the concrete scope chain (what dwarf_getscopes_die
 * of dwarf_getscopes' innermost scope gives, as eu-addr2line -i does; from
 * the unit's index, scopes.c), innermost first. The innermost frame's
 * position is pc's line; each outer frame's is the call site
 * (DW_AT_call_file/line) of the inlined subroutine just inside it. Returns
 * the number of frames pushed (0: no subprogram holds pc).
 */
static int dwarf_frames(struct mt_symbolizer *s, struct object *o, Dwarf_Addr pc)
{
	Dwarf_Die cu;
	Dwarf_Addr bias;
	Dwarf_Die *cudie = dwfl_module_addrdie(o->mod, pc, &bias);
	Dwarf_Files *files = NULL;
	Dwfl_Line *dl;
	struct mt_scopes *sc;
	const char *file = NULL;
	int line = 0, pushed = 0, r = 0, i;
	size_t mark = s->nframes;

	if (!cudie)
		return 0;
	if (!(sc = unit_scopes(o, cudie)))
		return -ENOMEM;
	if ((i = mt_scopes_at(sc, pc - bias)) < 0)
		return 0;
	dl = dwfl_module_getsrc(o->mod, pc);
	if (dl)
		file = dwfl_lineinfo(dl, &(Dwarf_Addr){0}, &line, NULL, NULL, NULL);
	if (line < 0)
		line = 0;
	for (; i >= 0; i = mt_scopes_up(sc, i)) {
		Dwarf_Die *die = mt_scopes_die(sc, i);
		int tag = mt_scopes_tag(sc, i);
		Dwarf_Attribute attr;
		Dwarf_Word val;

		r = push_frame(s, die_name(die), file, (uint32_t)line,
		               tag == DW_TAG_inlined_subroutine);
		if (r < 0)
			return r;
		pushed++;
		if (tag == DW_TAG_subprogram)
			break;
		/* Where the frame just pushed was inlined: the next frame's position. */
		file = NULL;
		line = 0;
		if (!files && dwarf_diecu(die, &cu, NULL, NULL))
			dwarf_getsrcfiles(&cu, &files, NULL);
		if (files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &val) == 0)
			file = dwarf_filesrc(files, val, NULL, NULL);
		if (file && dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &val) == 0)
			line = (int)val;
		else
			file = NULL;
	}
	/* A chain that never reaches a named subprogram is not trusted. */
	if (pushed && !s->frames[s->nframes - 1].function) {
		s->nframes = mark;
		pushed = 0;
	}
	return pushed;
}

/*
 * The symbol dwfl_module_addrinfo names, found by binary search rather than
 * by its walk of the whole table at every address (a flame graph of a torch
 * program looks up hundreds of thousands of addresses in libtorch's
 * 100,000-odd symbols: minutes). Only a sized symbol is ever used, so only
 * sized symbols are indexed, and among those covering pc the choice follows
 * libdwfl's (elfutils 0.158 on): the global part of the table first, the
 * local part only if no global symbol was chosen; in each, table order,
 * where a symbol replaces the one chosen if it starts later or binds more
 * strongly, or starts at the same address, is smaller and binds no weaker.
 * A sizeless global symbol exactly at pc makes libdwfl skip the locals;
 * that case, which a return address almost never meets, is asked of libdwfl
 * itself.
 */
static int binding_rank(const GElf_Sym *sym)
{
	switch (GELF_ST_BIND(sym->st_info)) {
	case STB_GLOBAL:
		return 3;
	case STB_WEAK:
		return 2;
	case STB_LOCAL:
		return 1;
	default:
		return 0;
	}
}

static bool eligible(const char *name, const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info);

	return name && name[0] && sym->st_shndx != SHN_UNDEF && type != STT_SECTION &&
	       type != STT_FILE && type != STT_TLS;
}

static int cmp_range(const void *a, const void *b)
{
	const struct sym_range *x = a, *y = b;

	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Out of memory: nothing kept, the next lookup tries again. */
static int drop_ranges(struct object *o)
{
	free(o->ranges);
	free(o->exact);
	o->ranges = NULL;
	o->exact = NULL;
	o->nranges = o->nexact = 0;
	o->ranges_made = false;
	return -ENOMEM;
}

static int make_ranges(struct object *o)
{
	size_t ranges_cap = 0, exact_cap = 0;
	int first_global;

	o->ranges_made = true;
	o->nsyms = dwfl_module_getsymtab(o->mod);
	first_global = o->nsyms < 0 ? -1 : dwfl_module_getsymtab_first_global(o->mod);
	if (first_global < 0) {
		o->nsyms = -1;
		return 0;
	}
	/* with no local part (a table from the program headers) all count as global */
	for (int i = 1; i < o->nsyms; i++) {
		bool global = i >= first_global;
		GElf_Sym sym;
		GElf_Addr value;
		const char *name =
		        dwfl_module_getsym_info(o->mod, i, &sym, &value, NULL, NULL, NULL);

		if (!eligible(name, &sym))
			continue;
		if (sym.st_size == 0) {
			if (!global)
				continue;
			if (mt_grow((void **)&o->exact, &exact_cap, o->nexact + 1,
			            sizeof(*o->exact)))
				return drop_ranges(o);
			o->exact[o->nexact++] = value;
			continue;
		}
		if (mt_grow((void **)&o->ranges, &ranges_cap, o->nranges + 1, sizeof(*o->ranges)))
			return drop_ranges(o);
		o->ranges[o->nranges++] = (struct sym_range){
		        .value = value,
		        .end = value + sym.st_size,
		        .index = (uint32_t)i,
		        .rank = (uint8_t)binding_rank(&sym),
		        .global = global,
		};
	}
	if (o->nranges > 1)
		qsort(o->ranges, o->nranges, sizeof(*o->ranges), cmp_range);
	for (size_t i = 0; i < o->nranges; i++) {
		uint64_t prev = i ? o->ranges[i - 1].max_end : 0;
		o->ranges[i].max_end = o->ranges[i].end > prev ? o->ranges[i].end : prev;
	}
	if (o->nexact > 1)
		qsort(o->exact, o->nexact, sizeof(*o->exact), cmp_u64);
	return 0;
}

static bool has_value(const uint64_t *v, size_t n, uint64_t value)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < value)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo] == value;
}

/* At most this many sized symbols covering one address; more are left to libdwfl. */
#define MAX_COVER 64

/* One part of the table (global or local), in table order, by libdwfl's rule. */
static const struct sym_range *choose(const struct sym_range *const *cover, size_t n, bool global)
{
	const struct sym_range *best = NULL;

	for (size_t i = 0; i < n; i++) {
		const struct sym_range *c = cover[i];

		if (c->global != global)
			continue;
		if (!best || best->value < c->value || best->rank < c->rank ||
		    (best->value == c->value && best->end > c->end && best->rank <= c->rank))
			best = c;
	}
	return best;
}

static int find_symbol(struct object *o, Dwarf_Addr pc, const char **name, GElf_Off *off,
                       GElf_Sym *sym)
{
	const struct sym_range *cover[MAX_COVER], *best;
	size_t lo = 0, hi, n = 0;
	GElf_Addr value;
	int r;

	*name = NULL;
	if (!o->ranges_made && (r = make_ranges(o)) < 0)
		return r;
	if (o->nsyms < 0)
		return 0;
	if (has_value(o->exact, o->nexact, pc))
		goto ask_libdwfl;
	/* the first range starting above pc; those covering it are before it */
	hi = o->nranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (o->ranges[mid].value <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i > 0 && o->ranges[i - 1].max_end > pc; i--) {
		if (o->ranges[i - 1].end <= pc)
			continue;
		if (n == MAX_COVER)
			goto ask_libdwfl;
		cover[n++] = &o->ranges[i - 1];
	}
	/* table order: libdwfl keeps the first of equals */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && cover[j - 1]->index > cover[j]->index; j--) {
			const struct sym_range *t = cover[j];
			cover[j] = cover[j - 1];
			cover[j - 1] = t;
		}
	best = choose(cover, n, true);
	if (!best)
		best = choose(cover, n, false);
	if (!best)
		return 0;
	*name = dwfl_module_getsym_info(o->mod, (int)best->index, sym, &value, NULL, NULL, NULL);
	*off = pc - value;
	return 0;
ask_libdwfl:
	*name = dwfl_module_addrinfo(o->mod, pc, off, sym, NULL, NULL, NULL);
	return 0;
}

/* A function symbol whose extent covers pc; its line from the line table, if any. */
static int symtab_frame(struct mt_symbolizer *s, struct object *o, Dwarf_Addr pc)
{
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *name;
	Dwfl_Line *dl;
	const char *file = NULL;
	int line = 0, r = find_symbol(o, pc, &name, &off, &sym);

	if (r < 0)
		return r;

	if (name &&
	    (GELF_ST_TYPE(sym.st_info) != STT_FUNC && GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC))
		name = NULL;
	if (name && (sym.st_size == 0 || off >= sym.st_size))
		name = NULL;
	if (name && !name[0])
		name = NULL;
	dl = name ? dwfl_module_getsrc(o->mod, pc) : NULL;
	if (dl)
		file = dwfl_lineinfo(dl, &(Dwarf_Addr){0}, &line, NULL, NULL, NULL);
	if (line <= 0)
		file = NULL;
	return push_frame(s, name, file, (uint32_t)line, false);
}

static int lookup(struct mt_symbolizer *s, struct object *o, uint64_t offset, struct cached *c)
{
	/* The call instruction ends at the return address: look inside it. */
	Dwarf_Addr pc = offset - 1;
	int r;

	c->first = (uint32_t)s->nframes;
	r = dwarf_frames(s, o, pc);
	if (r == 0)
		r = symtab_frame(s, o, pc);
	if (r < 0) {
		s->nframes = c->first;
		return r;
	}
	c->n = (uint32_t)(s->nframes - c->first);
	return 0;
}

static void fill(struct mt_sym *out, const char *module, uint64_t address, uint64_t base)
{
	memset(out, 0, sizeof(*out));
	out->module = module;
	out->address = address;
	out->offset = address - base;
}

int mt_symbolize(struct mt_symbolizer *s, const struct mt_instance *in, uint64_t address,
                 struct mt_sym *out, unsigned max)
{
	const struct mt_module *m;
	struct object *o, **cached_object = NULL;
	struct cached *c;
	bool created;
	uint64_t offset;
	unsigned n;
	int r;

	if (!s || !in || !out || max == 0)
		return -EINVAL;
	m = NULL;
	if (address && (r = find_module(s, in, address - 1, &m, &cached_object)) < 0)
		return r;
	if (!m) {
		fill(out, NULL, address, 0);
		return 1;
	}
	/* the module's object as last time, unless its name changed since (a test does it) */
	o = *cached_object;
	if ((!o || o->build_id_len != m->build_id_len || strcmp(o->path, m->path) != 0 ||
	     memcmp(o->build_id, m->build_id, m->build_id_len) != 0) &&
	    (r = find_object(s, m, &o)) < 0)
		return r;
	*cached_object = o;
	offset = address - m->base;
	if (!o->dwfl) {
		fill(out, o->path, address, m->base);
		return 1;
	}
	c = mt_map_get(&o->cache, offset);
	if (!c) {
		struct cached v;

		r = lookup(s, o, offset, &v);
		if (r < 0)
			return r;
		c = mt_map_put(&o->cache, offset, &created);
		if (!c)
			return -ENOMEM;
		*c = v;
	}
	n = c->n < max ? c->n : max;
	for (unsigned i = 0; i < n; i++) {
		const struct frame *f = &s->frames[c->first + i];

		fill(&out[i], o->path, address, m->base);
		out[i].function = f->function;
		out[i].file = f->file;
		out[i].line = f->line;
		out[i].inlined = f->inlined;
	}
	return (int)n;
}
