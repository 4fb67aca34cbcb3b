/* SPDX-License-Identifier: MIT */
/*
 * The pprof profile (pprof.h). profile.proto's tables refer to each other
 * by number: strings by their index in string_table (0 is ""), functions
 * and locations by an id from 1. Each is interned (intern.h) as it is first
 * met, keyed by its content, and written at the end; samples are written
 * as they are made. A location is one return address with the calls
 * inlined at it, innermost first, as pprof wants its lines; a Python frame
 * is a location of its own, with no address.
 *
 * A function has a name and no system name: the symbolizer demangled it,
 * and pprof takes a name equal to its system name for one still to
 * demangle, which for a name with `<` or `::` cuts the parameters and
 * template arguments out (a Python frame named `<module>` would be left
 * with no name at all).
 *
 * Every frame is named here already (an address without symbols is named
 * module+0xoffset, as the report names it): each module is a mapping that
 * says it has functions, file names, lines and inlined frames, so pprof
 * tries to symbolize nothing. Its addresses are left 0: one module is
 * loaded at other addresses in other processes, and nothing is looked up.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "commands.h"
#include "intern.h"
#include "pprof.h"

#define MAX_FRAMES 512

/* profile.proto's field numbers */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
	PROFILE_COMMENT = 13,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUE_TYPE_TYPE = 1,
	VALUE_TYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1,
	SAMPLE_VALUE = 2,
	SAMPLE_LABEL = 3,
	LABEL_KEY = 1,
	LABEL_STR = 2,
	LABEL_NUM = 3,
	MAPPING_ID = 1,
	MAPPING_FILENAME = 5,
	MAPPING_HAS_FUNCTIONS = 7,
	MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9,
	MAPPING_HAS_INLINE_FRAMES = 10,
	LOCATION_ID = 1,
	LOCATION_MAPPING_ID = 2,
	LOCATION_ADDRESS = 3,
	LOCATION_LINE = 4,
	LINE_FUNCTION_ID = 1,
	LINE_LINE = 2,
	FUNCTION_ID = 1,
	FUNCTION_NAME = 2,
	FUNCTION_FILENAME = 4,
};

#define NVALUES 4 /* alloc_objects, alloc_space, inuse_objects, inuse_space */

struct pprof {
	struct mt_analysis *a;
	struct mt_pb *out;
	struct mt_pb msg, sub; /* scratch: a sample or location, a label or line in it */
	struct mt_intern strings;
	struct mt_intern mappings;  /* a module's path's string id */
	struct mt_intern functions; /* (name, file) string ids */
	struct mt_intern locations; /* mapping id, address, then (function id, line) pairs */
	struct mt_sym *syms;
	uint64_t *ids; /* a sample's location ids, leaf first */
	uint64_t *key; /* a location's key */
	int err;
};

static uint64_t string_id(struct pprof *p, const char *s)
{
	size_t len = strlen(s);
	/* the trace's names hold any bytes; pprof's strings are UTF-8 */
	bool plain = mt_escape(NULL, 0, s, len, 0) == len;
	char *e = plain ? NULL : mt_escape_dup(s, len, 0);
	int64_t id = plain || e ? mt_intern(&p->strings, plain ? s : e, plain ? len : strlen(e))
	                        : -ENOMEM;

	free(e);
	if (id < 0) {
		p->err = (int)id;
		return 0;
	}
	return (uint64_t)id;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* The function a frame is in, named as the report names it (commands.h). */
static uint64_t function_id(struct pprof *p, const struct mt_sym *s)
{
	const char *name = s->function;
	char *joined = NULL, num[320];
	uint64_t key[2];
	int64_t id;

	if (s->function && s->tail) {
		/* a group's innermost Python frame with the native label folded into it */
		joined = malloc(strlen(s->function) + strlen(s->tail) + sizeof(" ()"));
		if (!joined) {
			p->err = -ENOMEM;
			return 0;
		}
		sprintf(joined, "%s (%s)", s->function, s->tail);
		name = joined;
	} else if (!s->function && s->module) {
		snprintf(num, sizeof(num), "%.255s+0x%" PRIx64, base_name(s->module), s->offset);
		name = num;
	} else if (!s->function) {
		snprintf(num, sizeof(num), "0x%" PRIx64, s->address);
		name = num;
	}
	key[0] = string_id(p, name);
	key[1] = string_id(p, s->file ? s->file : "");
	free(joined);
	id = mt_intern(&p->functions, key, sizeof(key));
	if (id < 0) {
		p->err = (int)id;
		return 0;
	}
	return (uint64_t)id + 1;
}

/* The mapping of a module (a path; Python frames' is "python"), 0 for none. */
static uint64_t mapping_id(struct pprof *p, const char *module)
{
	uint64_t path;
	int64_t id;

	if (!module)
		return 0;
	path = string_id(p, module);
	id = mt_intern(&p->mappings, &path, sizeof(path));
	if (id < 0) {
		p->err = (int)id;
		return 0;
	}
	return (uint64_t)id + 1;
}

/* The location of frames [0, n): calls inlined into the last one, innermost first. */
static uint64_t location_id(struct pprof *p, const struct mt_sym *s, int n)
{
	int64_t id;

	p->key[0] = mapping_id(p, s[n - 1].module);
	p->key[1] = s[n - 1].address;
	for (int i = 0; i < n; i++) {
		p->key[2 + 2 * i] = function_id(p, &s[i]);
		p->key[3 + 2 * i] = s[i].line;
	}
	id = mt_intern(&p->locations, p->key, (2 + 2 * (size_t)n) * sizeof(*p->key));
	if (id < 0) {
		p->err = (int)id;
		return 0;
	}
	return (uint64_t)id + 1;
}

static void label(struct pprof *p, const char *key, const char *str, uint64_t num)
{
	mt_pb_clear(&p->sub);
	mt_pb_varint(&p->sub, LABEL_KEY, string_id(p, key));
	if (str)
		mt_pb_varint(&p->sub, LABEL_STR, string_id(p, str));
	else
		mt_pb_varint(&p->sub, LABEL_NUM, num);
	mt_pb_bytes(&p->msg, SAMPLE_LABEL, p->sub.data, p->sub.n);
}

/* One sample: a stack (n frames, or `[no stack]` for n <= 0) with its values. */
static void sample(struct pprof *p, const struct mt_instance *in, int n,
                   const uint64_t values[NVALUES])
{
	static const struct mt_sym no_stack = {.function = "[no stack]"};
	const struct mt_sym *s = n > 0 ? p->syms : &no_stack;
	size_t nids = 0;

	if (n <= 0)
		n = 1;
	for (int i = 0; i < n;) {
		int j = i;
		while (j + 1 < n && s[j].inlined)
			j++;
		p->ids[nids++] = location_id(p, s + i, j - i + 1);
		i = j + 1;
	}
	mt_pb_clear(&p->msg);
	mt_pb_packed(&p->msg, SAMPLE_LOCATION_ID, p->ids, nids);
	mt_pb_packed(&p->msg, SAMPLE_VALUE, values, NVALUES);
	label(p, "pid", NULL, in->pid);
	label(p, "command", mt_cmd_command(in), 0);
	mt_pb_bytes(p->out, PROFILE_SAMPLE, p->msg.data, p->msg.n);
}

static void process(struct pprof *p, const struct mt_process_result *r, enum mt_kind kind,
                    enum mt_pprof_inuse at)
{
	const struct mt_kind_result *k = &r->kind[kind];
	uint64_t total[NVALUES] = {k->stats.allocations, k->stats.bytes_allocated,
	                           at == MT_PPROF_AT_PEAK ? k->stats.peak_blocks : k->leaked_blocks,
	                           at == MT_PPROF_AT_PEAK ? k->stats.peak_bytes : k->leaked_bytes};
	uint64_t sum[NVALUES] = {0}, rest[NVALUES];
	bool any = false;

	for (size_t i = 0; i < k->nrows && !p->err; i++) {
		const struct mt_stack_row *row = &k->rows[i];
		uint64_t v[NVALUES] = {
		        row->allocations, row->bytes_allocated,
		        at == MT_PPROF_AT_PEAK ? row->peak_blocks : row->leaked_blocks,
		        at == MT_PPROF_AT_PEAK ? row->peak_bytes : row->leaked_bytes};
		int n;
		if (!(v[0] | v[1] | v[2] | v[3]))
			continue;
		for (int j = 0; j < NVALUES; j++)
			sum[j] += v[j];
		n = mt_analysis_frames(p->a, row->stack_instance, row->stack, p->syms, MAX_FRAMES);
		if (n < 0) {
			p->err = n;
			return;
		}
		sample(p, r->in, n, v);
	}
	for (int j = 0; j < NVALUES; j++) {
		rest[j] = total[j] > sum[j] ? total[j] - sum[j] : 0;
		any |= rest[j] != 0;
	}
	if (any)
		sample(p, r->in, 0, rest);
}

static void value_type(struct pprof *p, uint32_t field, const char *type, const char *unit)
{
	mt_pb_clear(&p->msg);
	mt_pb_varint(&p->msg, VALUE_TYPE_TYPE, string_id(p, type));
	mt_pb_varint(&p->msg, VALUE_TYPE_UNIT, string_id(p, unit));
	mt_pb_bytes(p->out, field, p->msg.data, p->msg.n);
}

/* The tables, once every sample has named what it refers to. */
static void tables(struct pprof *p)
{
	size_t len;

	for (uint32_t id = 0; id < p->mappings.n; id++) {
		const uint64_t *path = mt_intern_get(&p->mappings, id, &len);
		mt_pb_clear(&p->msg);
		mt_pb_varint(&p->msg, MAPPING_ID, id + 1);
		mt_pb_varint(&p->msg, MAPPING_FILENAME, *path);
		mt_pb_varint(&p->msg, MAPPING_HAS_FUNCTIONS, 1);
		mt_pb_varint(&p->msg, MAPPING_HAS_FILENAMES, 1);
		mt_pb_varint(&p->msg, MAPPING_HAS_LINE_NUMBERS, 1);
		mt_pb_varint(&p->msg, MAPPING_HAS_INLINE_FRAMES, 1);
		mt_pb_bytes(p->out, PROFILE_MAPPING, p->msg.data, p->msg.n);
	}
	for (uint32_t id = 0; id < p->functions.n; id++) {
		const uint64_t *f = mt_intern_get(&p->functions, id, &len);
		mt_pb_clear(&p->msg);
		mt_pb_varint(&p->msg, FUNCTION_ID, id + 1);
		mt_pb_varint(&p->msg, FUNCTION_NAME, f[0]);
		mt_pb_varint(&p->msg, FUNCTION_FILENAME, f[1]);
		mt_pb_bytes(p->out, PROFILE_FUNCTION, p->msg.data, p->msg.n);
	}
	for (uint32_t id = 0; id < p->locations.n; id++) {
		const uint64_t *l = mt_intern_get(&p->locations, id, &len);
		mt_pb_clear(&p->msg);
		mt_pb_varint(&p->msg, LOCATION_ID, id + 1);
		if (l[0])
			mt_pb_varint(&p->msg, LOCATION_MAPPING_ID, l[0]);
		if (l[1])
			mt_pb_varint(&p->msg, LOCATION_ADDRESS, l[1]);
		for (size_t i = 2; i + 1 < len / sizeof(*l); i += 2) {
			mt_pb_clear(&p->sub);
			mt_pb_varint(&p->sub, LINE_FUNCTION_ID, l[i]);
			mt_pb_varint(&p->sub, LINE_LINE, l[i + 1]);
			mt_pb_bytes(&p->msg, LOCATION_LINE, p->sub.data, p->sub.n);
		}
		mt_pb_bytes(p->out, PROFILE_LOCATION, p->msg.data, p->msg.n);
	}
	for (uint32_t id = 0; id < p->strings.n; id++) {
		const void *s = mt_intern_get(&p->strings, id, &len);
		mt_pb_bytes(p->out, PROFILE_STRING_TABLE, s, len);
	}
}

/* When the profile was taken and how long it covers: the first start to the last end. */
static void times(struct pprof *p)
{
	const struct mt_clock_fit *fit = mt_replay_clock(p->a->replay);
	uint64_t first = UINT64_MAX, last = 0, realtime = 0;

	for (uint32_t i = 0; i < p->a->nprocs; i++) {
		const struct mt_instance *in = p->a->procs[i].in;
		uint64_t s = mt_clock_ns(fit, in->start_time), e = mt_clock_ns(fit, in->end_time);
		if (s < first) {
			first = s;
			realtime = in->realtime;
		}
		if (e > last)
			last = e;
	}
	if (realtime)
		mt_pb_varint(p->out, PROFILE_TIME_NANOS, realtime);
	if (last > first && first != UINT64_MAX)
		mt_pb_varint(p->out, PROFILE_DURATION_NANOS, last - first);
}

int mt_pprof_build(struct mt_analysis *a, enum mt_kind kind, enum mt_pprof_inuse at,
                   struct mt_pb *out)
{
	struct pprof p = {.a = a, .out = out};
	uint64_t sampling = 0;
	char note[256];

	mt_intern_init(&p.strings);
	mt_intern_init(&p.mappings);
	mt_intern_init(&p.functions);
	mt_intern_init(&p.locations);
	p.syms = calloc(MAX_FRAMES, sizeof(*p.syms));
	p.ids = calloc(MAX_FRAMES, sizeof(*p.ids));
	p.key = calloc(2 + 2 * MAX_FRAMES, sizeof(*p.key));
	if (!p.syms || !p.ids || !p.key) {
		p.err = -ENOMEM;
		goto out;
	}
	string_id(&p, ""); /* string 0, as profile.proto requires */
	value_type(&p, PROFILE_SAMPLE_TYPE, "alloc_objects", "count");
	value_type(&p, PROFILE_SAMPLE_TYPE, "alloc_space", "bytes");
	value_type(&p, PROFILE_SAMPLE_TYPE, "inuse_objects", "count");
	value_type(&p, PROFILE_SAMPLE_TYPE, "inuse_space", "bytes");
	mt_pb_varint(out, PROFILE_DEFAULT_SAMPLE_TYPE, string_id(&p, "inuse_space"));
	/* the first mapping is pprof's main binary: the first process's */
	if (a->nprocs && a->procs[0].in->exe)
		mapping_id(&p, a->procs[0].in->exe);
	for (uint32_t i = 0; i < a->nprocs && !p.err; i++) {
		if (!sampling)
			sampling = a->procs[i].in->sampling;
		process(&p, &a->procs[i], kind, at);
	}
	/* a sampled capture's figures are estimates, each sample standing for about `period`
	 * bytes allocated (docs/sampling.md); a full capture's are exact */
	value_type(&p, PROFILE_PERIOD_TYPE, "space", "bytes");
	mt_pb_varint(out, PROFILE_PERIOD, sampling && kind == MT_KIND_HOST ? sampling : 1);
	snprintf(note, sizeof(note), "memtrace: %s memory; in use %s", mt_kind_name(kind),
	         at == MT_PPROF_AT_PEAK ? "at each process's peak" : "at each process's end");
	mt_pb_varint(out, PROFILE_COMMENT, string_id(&p, note));
	if (sampling && kind == MT_KIND_HOST)
		mt_pb_varint(out, PROFILE_COMMENT,
		             string_id(&p, "memtrace: sampled capture: the figures are estimates"));
	times(&p);
	tables(&p);
	if (!p.err && (mt_pb_failed(out) || mt_pb_failed(&p.msg) || mt_pb_failed(&p.sub)))
		p.err = -ENOMEM;
out:
	mt_pb_free(&p.msg);
	mt_pb_free(&p.sub);
	mt_intern_free(&p.strings);
	mt_intern_free(&p.mappings);
	mt_intern_free(&p.functions);
	mt_intern_free(&p.locations);
	free(p.syms);
	free(p.ids);
	free(p.key);
	return p.err;
}

int mt_pprof_gzip(FILE *f, const void *data, size_t n)
{
	const unsigned char *in = data;
	unsigned char buf[65536];
	z_stream z = {0};
	int flush, r = 0;

	/* 16 + 15: a gzip header and trailer around the deflate stream, the largest window */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return -ENOMEM;
	do {
		/* avail_in is 32 bits wide */
		size_t take = n < (1u << 30) ? n : (1u << 30);
		z.next_in = (unsigned char *)(uintptr_t)in;
		z.avail_in = (uInt)take;
		in += take;
		n -= take;
		flush = n ? Z_NO_FLUSH : Z_FINISH;
		do {
			size_t have;
			z.next_out = buf;
			z.avail_out = sizeof(buf);
			if (deflate(&z, flush) == Z_STREAM_ERROR) {
				r = -EIO;
				goto out;
			}
			have = sizeof(buf) - z.avail_out;
			if (fwrite(buf, 1, have, f) != have) {
				r = -EIO;
				goto out;
			}
		} while (z.avail_out == 0);
	} while (flush != Z_FINISH);
out:
	deflateEnd(&z);
	return r;
}
