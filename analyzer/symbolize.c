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
 * Debug files are found by Dwfl's standard search: /usr/lib/debug/.build-id,
 * then .gnu_debuglink; and debuginfod when the user set DEBUGINFOD_URLS.
 * A path from the trace is opened only if it is a regular file, and never
 * waits (a FIFO's open would wait for a writer for ever).
 *
 * May not: print, or give a name it cannot vouch for. Not thread-safe: one
 * symbolizer per thread. Memory grows with the distinct (object, offset)
 * pairs looked up and the distinct strings they name.
 */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "map.h"
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

/* One ELF object, by (path, build-id). */
struct object {
	char *path;
	uint8_t build_id[MT_MAX_BUILD_ID];
	uint32_t build_id_len;
	Dwfl *dwfl; /* NULL: module+offset only */
	Dwfl_Module *mod;
	struct mt_map cache; /* offset -> struct cached */
	uint32_t next;       /* index + 1 of the next object with the same hash */
};

struct mt_symbolizer {
	struct object **objects;
	size_t nobjects, objects_cap;
	struct mt_map object_index; /* hash of (path, build-id) -> index + 1, chained by next */

	struct frame *frames;
	size_t nframes, frames_cap;

	struct mt_map strings; /* hash -> index + 1 into strs */
	char **strs;
	size_t nstrs, strs_cap;
};

static const Dwfl_Callbacks dwfl_callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
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

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n;
	void *q;

	if (need <= *cap)
		return 0;
	n = *cap ? *cap * 2 : 64;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

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
	if (grow((void **)&s->strs, &s->strs_cap, s->nstrs + 1, sizeof(*s->strs)))
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
	mt_map_init(&s->object_index, sizeof(uint32_t));
	mt_map_init(&s->strings, sizeof(uint32_t));
	*out = s;
	return 0;
}

void mt_symbolizer_free(struct mt_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nobjects; i++) {
		struct object *o = s->objects[i];

		if (o->dwfl)
			dwfl_end(o->dwfl);
		mt_map_free(&o->cache);
		free(o->path);
		free(o);
	}
	free(s->objects);
	mt_map_free(&s->object_index);
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
	int n;

	/* Relative names are not files: the vdso ("linux-vdso.so.1"), an empty name. */
	if (o->path[0] == '/' && try_open(o, m, o->path))
		return;
	/*
	 * The file is gone or is another build now (an upgraded package): the
	 * debug file of the recorded build-id still describes the old one.
	 */
	if (m->build_id_len < 2)
		return;
	n = snprintf(debug, sizeof(debug), "/usr/lib/debug/.build-id/%02x/", m->build_id[0]);
	for (uint32_t i = 1; i < m->build_id_len; i++)
		n += snprintf(debug + n, sizeof(debug) - (size_t)n, "%02x", m->build_id[i]);
	snprintf(debug + n, sizeof(debug) - (size_t)n, ".debug");
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
	if (grow((void **)&s->objects, &s->objects_cap, s->nobjects + 1, sizeof(*s->objects)))
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
	o->next = created ? 0 : *head;
	s->objects[s->nobjects++] = o;
	*head = (uint32_t)s->nobjects;
	open_object(o, m);
	*out = o;
	return 0;
}

/*
 * The module whose segments hold pc. Several can, when objects were unloaded
 * and others mapped at the same addresses later; the API carries no time,
 * so we take one still loaded at the end of the instance if there is one,
 * else the one recorded last. Both are usually the same object, dlopened
 * again.
 */
static const struct mt_module *find_module(const struct mt_instance *in, uint64_t pc)
{
	const struct mt_module *found = NULL;

	for (uint32_t i = 0; i < in->nmodules; i++) {
		const struct mt_module *m = &in->modules[i];

		for (uint32_t k = 0; k < m->nseg; k++) {
			if (pc - (m->base + m->seg[k].vaddr) < m->seg[k].memsz) {
				if (!found || !m->gone_time || found->gone_time)
					found = m;
				break;
			}
		}
	}
	return found;
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

	if (grow((void **)&s->frames, &s->frames_cap, s->nframes + 1, sizeof(*s->frames)))
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

/*
 * The DWARF frames at pc: the concrete scope chain (dwarf_getscopes_die of
 * the innermost scope, as eu-addr2line -i does), innermost first. The
 * innermost frame's position is pc's line; each outer frame's is the call
 * site (DW_AT_call_file/line) of the inlined subroutine just inside it.
 * Returns the number of frames pushed (0: no subprogram holds pc).
 */
static int dwarf_frames(struct mt_symbolizer *s, struct object *o, Dwarf_Addr pc)
{
	Dwarf_Die *scopes = NULL, *chain = NULL, cu;
	Dwarf_Addr bias;
	Dwarf_Die *cudie = dwfl_module_addrdie(o->mod, pc, &bias);
	Dwarf_Files *files = NULL;
	Dwfl_Line *dl;
	const char *file = NULL;
	int line = 0, nscopes, nchain, pushed = 0, r = 0;
	size_t mark = s->nframes;

	if (!cudie)
		return 0;
	nscopes = dwarf_getscopes(cudie, pc - bias, &scopes);
	if (nscopes <= 0)
		goto out;
	nchain = dwarf_getscopes_die(&scopes[0], &chain);
	if (nchain <= 0)
		goto out;
	dl = dwfl_module_getsrc(o->mod, pc);
	if (dl)
		file = dwfl_lineinfo(dl, &(Dwarf_Addr){0}, &line, NULL, NULL, NULL);
	if (line < 0)
		line = 0;
	for (int i = 0; i < nchain; i++) {
		int tag = dwarf_tag(&chain[i]);
		Dwarf_Attribute attr;
		Dwarf_Word val;

		if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
			continue;
		r = push_frame(s, die_name(&chain[i]), file, (uint32_t)line,
		               tag == DW_TAG_inlined_subroutine);
		if (r < 0)
			goto out;
		pushed++;
		if (tag == DW_TAG_subprogram)
			break;
		/* Where the frame just pushed was inlined: the next frame's position. */
		file = NULL;
		line = 0;
		if (!files && dwarf_diecu(&chain[i], &cu, NULL, NULL))
			dwarf_getsrcfiles(&cu, &files, NULL);
		if (files &&
		    dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_file, &attr), &val) == 0)
			file = dwarf_filesrc(files, val, NULL, NULL);
		if (file &&
		    dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_line, &attr), &val) == 0)
			line = (int)val;
		else
			file = NULL;
	}
	/* A chain that never reaches a named subprogram is not trusted. */
	if (pushed && !s->frames[s->nframes - 1].function) {
		s->nframes = mark;
		pushed = 0;
	}
out:
	free(chain);
	free(scopes);
	return r < 0 ? r : pushed;
}

/* A function symbol whose extent covers pc; its line from the line table, if any. */
static int symtab_frame(struct mt_symbolizer *s, struct object *o, Dwarf_Addr pc)
{
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *name = dwfl_module_addrinfo(o->mod, pc, &off, &sym, NULL, NULL, NULL);
	Dwfl_Line *dl;
	const char *file = NULL;
	int line = 0;

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
	struct object *o;
	struct cached *c;
	bool created;
	uint64_t offset;
	unsigned n;
	int r;

	if (!s || !in || !out || max == 0)
		return -EINVAL;
	m = address ? find_module(in, address - 1) : NULL;
	if (!m) {
		fill(out, NULL, address, 0);
		return 1;
	}
	r = find_object(s, m, &o);
	if (r < 0)
		return r;
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
