/* SPDX-License-Identifier: MIT */
/*
 * memtrace dump: every record of a trace, one line each in file order, then
 * a per process instance summary from the replay. `--summary` prints only
 * the summary; `--json` prints it as one JSON object.
 *
 * The summary lines are "key value" pairs so tests and scripts can split
 * them on spaces; the command, which may hold spaces, comes last.
 *
 * May not: decode anything itself (reader.c and replay.c do).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "reader.h"
#include "replay.h"

static const char *const sample_names[MT_SAMPLE_FIELD_COUNT] = {
        "rss",
        "pss",
        "private_dirty",
        "heap_arena",
        "heap_in_use",
        "heap_free",
        "heap_trimmable",
        "heap_mmapped",
        "cgroup_current",
        "cgroup_max",
        "mem_total",
        "rss_file",
        "heap_age",
};

static const char *origin_name(uint32_t origin)
{
	switch (origin) {
	case MT_ORIGIN_ROOT:
		return "root";
	case MT_ORIGIN_FORK:
		return "fork";
	case MT_ORIGIN_EXEC:
		return "exec";
	default:
		return "unknown";
	}
}

static const char *how_name(uint64_t how)
{
	switch (how) {
	case MT_EXIT_MAIN_RETURN:
		return "main-returned";
	case MT_EXIT_EXIT:
		return "exit";
	case MT_EXIT_UNDERSCORE:
		return "_exit";
	case MT_EXIT_UNKNOWN:
		return "status-unknown";
	default:
		return "unknown";
	}
}

/* How ticks become ns: the replay's fit once it has one, else the chunk headers'. */
static const struct mt_clock_fit *clock_fit;

/* Time relative to the file's creation, in ms. */
static double rel_ms(const struct mt_trace *t, uint64_t ticks)
{
	uint64_t ns = mt_clock_ns(clock_fit ? clock_fit : &t->fit, ticks);

	return (double)(int64_t)(ns - t->header.created_monotonic) / 1e6;
}

/* Quoted and escaped; a command line's NUL separators as spaces. */
static void put_string(FILE *f, struct mt_bytes b, bool nul_as_space)
{
	uint32_t n = b.len, start = 0;

	if (nul_as_space)
		while (n > 0 && b.data[n - 1] == 0)
			n--;
	fputc('"', f);
	for (uint32_t i = 0; i <= n; i++) {
		if (i < n && (b.data[i] != 0 || !nul_as_space))
			continue;
		mt_put_escaped(f, b.data + start, i - start, MT_ESCAPE_CONTROL | MT_ESCAPE_QUOTE);
		if (i < n)
			fputc(' ', f);
		start = i + 1;
	}
	fputc('"', f);
}

static void put_fn(FILE *f, uint64_t fn)
{
	const char *name = mt_fn_name(fn);

	if (name)
		fputs(name, f);
	else
		fprintf(f, "fn%" PRIu64, fn);
}

static void print_reach(FILE *f, const struct mt_record *rec)
{
	const char *status = mt_reach_status_name(rec->u.reach.status);

	if (status)
		fprintf(f, " status %s", status);
	else
		fprintf(f, " status %" PRIu64, rec->u.reach.status);
	fprintf(f,
	        " detail %" PRIu64 " blocks %" PRIu64 " bytes %" PRIu64 " scanned %" PRIu64
	        " ns %" PRIu64 " chunks %" PRIu64,
	        rec->u.reach.detail, rec->u.reach.blocks, rec->u.reach.bytes, rec->u.reach.scanned,
	        rec->u.reach.ns, rec->u.reach.chunks);
}

static void print_reach_blocks(FILE *f, const struct mt_record *rec)
{
	const uint8_t *pos = rec->u.reach_blocks.addrs;
	uint64_t addr = 0;

	fprintf(f, " class %s blocks %" PRIu64, mt_reach_class_name(rec->u.reach_blocks.cls),
	        rec->u.reach_blocks.n);
	while (mt_reach_blocks_next(rec, &pos, &addr))
		fprintf(f, " 0x%" PRIx64, addr);
}

static void print_record(FILE *f, const struct mt_trace *t, const struct mt_record *rec)
{
	const char *name = mt_record_name(rec->type);

	fprintf(f, "0x%" PRIx64 " pid %u tid %u", rec->offset, rec->chunk->pid, rec->chunk->tid);
	/* records without a time field: a time would be only the register's */
	if (rec->type == MT_REC_REACH)
		fprintf(f, " t=%+.6fms", rel_ms(t, rec->u.reach.time));
	else if (rec->type != MT_REC_STACK && rec->type != MT_REC_PYSTACK &&
	         rec->type != MT_REC_LOST && rec->type != MT_REC_REACH_BLOCKS && name)
		fprintf(f, " t=%+.6fms", rel_ms(t, rec->time));
	if (!name) {
		fprintf(f, " type %u (unknown, %u bytes, skipped)\n", rec->type, rec->length);
		return;
	}
	fprintf(f, " %s", name);
	switch (rec->type) {
	case MT_REC_PROCESS:
		fprintf(f,
		        " pid %" PRIu64 " ppid %" PRIu64 " origin %s parent %" PRIu64
		        " realtime %" PRIu64 " depth %" PRIu64 " exe ",
		        rec->u.process.pid, rec->u.process.ppid,
		        origin_name((uint32_t)rec->u.process.origin),
		        rec->u.process.parent_instance, rec->u.process.realtime,
		        rec->u.process.depth);
		put_string(f, rec->u.process.exe, false);
		fputs(" cmdline ", f);
		put_string(f, rec->u.process.cmdline, true);
		if (rec->u.process.sampling)
			fprintf(f, " sampling %" PRIu64, rec->u.process.sampling);
		break;
	case MT_REC_MODULE:
		fprintf(f, " base 0x%" PRIx64 " path ", rec->u.module.base);
		put_string(f, rec->u.module.path, false);
		fputs(" build_id ", f);
		for (uint32_t i = 0; i < rec->u.module.build_id.len; i++)
			fprintf(f, "%02x", rec->u.module.build_id.data[i]);
		if (!rec->u.module.build_id.len)
			fputs("none", f);
		fprintf(f, " segments %u", rec->u.module.nseg);
		for (uint32_t i = 0; i < rec->u.module.nseg; i++) {
			const struct mt_segment *s = &rec->u.module.seg[i];
			fprintf(f, " [vaddr 0x%" PRIx64 " memsz 0x%" PRIx64 " %c%c%c]", s->vaddr,
			        s->memsz, s->flags & 4 ? 'r' : '-', s->flags & 2 ? 'w' : '-',
			        s->flags & 1 ? 'x' : '-');
		}
		break;
	case MT_REC_MODULE_GONE:
		fprintf(f, " base 0x%" PRIx64 " gen %" PRIu64, rec->u.module_gone.base,
		        rec->u.module_gone.gen);
		break;
	case MT_REC_STACK:
		fprintf(f, " id %" PRIu64 " gen %" PRIu64 " frames %u", rec->u.stack.id,
		        rec->u.stack.gen, rec->u.stack.n);
		for (uint32_t i = 0; i < rec->u.stack.n; i++)
			fprintf(f, " 0x%" PRIx64, rec->u.stack.frames[i]);
		if (rec->u.stack.pystack)
			fprintf(f, " python %" PRIu64, rec->u.stack.pystack);
		break;
	case MT_REC_PYSTACK:
		fprintf(f, " id %" PRIu64 " frames %u", rec->u.pystack.id, rec->u.pystack.n);
		for (uint32_t i = 0; i < rec->u.pystack.n; i++)
			fprintf(f, " [code %" PRIu64 " lasti %" PRIu64 "%s]",
			        rec->u.pystack.frames[i].code, rec->u.pystack.frames[i].lasti,
			        rec->u.pystack.frames[i].entry ? " entry" : "");
		break;
	case MT_REC_ALLOC:
		fputc(' ', f);
		put_fn(f, rec->u.alloc.fn);
		fprintf(f, " 0x%" PRIx64 " size %" PRIu64 " stack %" PRIu64, rec->u.alloc.addr,
		        rec->u.alloc.size, rec->u.alloc.stack);
		break;
	case MT_REC_FREE:
		fputc(' ', f);
		put_fn(f, rec->u.free.fn);
		fprintf(f, " 0x%" PRIx64, rec->u.free.addr);
		break;
	case MT_REC_REALLOC:
		fputc(' ', f);
		put_fn(f, rec->u.realloc.fn);
		fprintf(f,
		        " 0x%" PRIx64 " -> 0x%" PRIx64 " size %" PRIu64 " stack %" PRIu64
		        " t0=%+.6fms",
		        rec->u.realloc.old, rec->u.realloc.addr, rec->u.realloc.size,
		        rec->u.realloc.stack, rel_ms(t, rec->u.realloc.t0));
		break;
	case MT_REC_FAIL:
		fputc(' ', f);
		put_fn(f, rec->u.fail.fn);
		fprintf(f, " size %" PRIu64 " stack %" PRIu64 " errno %" PRIu64, rec->u.fail.size,
		        rec->u.fail.stack, rec->u.fail.err);
		break;
	case MT_REC_MMAP:
		fputc(' ', f);
		put_fn(f, rec->u.mmap.fn);
		fprintf(f,
		        " 0x%" PRIx64 " len %" PRIu64 " prot 0x%" PRIx64 " flags 0x%" PRIx64
		        " stack %" PRIu64,
		        rec->u.mmap.addr, rec->u.mmap.len, rec->u.mmap.prot, rec->u.mmap.flags,
		        rec->u.mmap.stack);
		break;
	case MT_REC_MUNMAP:
		fprintf(f, " 0x%" PRIx64 " len %" PRIu64, rec->u.munmap.addr, rec->u.munmap.len);
		break;
	case MT_REC_MREMAP:
		fprintf(f,
		        " 0x%" PRIx64 " len %" PRIu64 " -> 0x%" PRIx64 " len %" PRIu64
		        " stack %" PRIu64 " t0=%+.6fms",
		        rec->u.mremap.old, rec->u.mremap.old_len, rec->u.mremap.addr,
		        rec->u.mremap.len, rec->u.mremap.stack, rel_ms(t, rec->u.mremap.t0));
		break;
	case MT_REC_SAMPLE:
		fprintf(f, " ns %" PRIu64 " values %" PRIu64, rec->u.sample.ns, rec->u.sample.n);
		for (uint64_t i = 0; i < rec->u.sample.n && i < MT_SAMPLE_FIELD_COUNT; i++)
			fprintf(f, " %s %" PRIu64, sample_names[i], rec->u.sample.values[i]);
		break;
	case MT_REC_EXIT:
		fprintf(f, " how %s status %" PRIu64, how_name(rec->u.exit.how),
		        rec->u.exit.status);
		break;
	case MT_REC_LOST:
		fprintf(f, " reason %s count %" PRIu64,
		        rec->u.lost.reason == MT_LOST_STACK_TABLE_FULL ? "stack-table-full"
		        : rec->u.lost.reason == MT_LOST_DISABLED       ? "tracing-stopped"
		                                                       : "unknown",
		        rec->u.lost.count);
		break;
	case MT_REC_MARK:
		fputs(" label ", f);
		put_string(f, rec->u.mark.label, false);
		break;
	case MT_REC_EXEC:
		fputs(" path ", f);
		put_string(f, rec->u.exec.path, false);
		break;
	case MT_REC_PYCODE:
		fprintf(f,
		        " id %" PRIu64 " version %" PRIu64 ".%" PRIu64 " first_line %" PRIu64
		        " file ",
		        rec->u.pycode.id, rec->u.pycode.version >> 8, rec->u.pycode.version & 0xff,
		        rec->u.pycode.first_line);
		put_string(f, rec->u.pycode.file, false);
		fputs(" name ", f);
		put_string(f, rec->u.pycode.name, false);
		fprintf(f, " linetable %" PRIu64 " bytes ", rec->u.pycode.linetable_size);
		for (uint32_t i = 0; i < rec->u.pycode.linetable.len; i++)
			fprintf(f, "%02x", rec->u.pycode.linetable.data[i]);
		if (!rec->u.pycode.linetable.len)
			fputs("none", f);
		break;
	case MT_REC_REACH:
		print_reach(f, rec);
		break;
	case MT_REC_REACH_BLOCKS:
		print_reach_blocks(f, rec);
		break;
	}
	fputc('\n', f);
}

/* All records in file order; stops at the first corrupt byte. */
static int dump_records(const struct mt_trace *t, struct mt_error *err)
{
	struct mt_record *rec = malloc(sizeof(*rec));
	uint64_t slots = mt_reader_chunk_slots(t);
	int r = 0;

	if (!rec)
		return -ENOMEM;
	printf("0x0 header version %u header_size %u chunk_unit %u next_chunk 0x%" PRIx64
	       " next_instance %" PRIu64 " created_realtime %" PRIu64 " created_monotonic %" PRIu64
	       " root_pid %u clock %s\n",
	       t->header.version, t->header.header_size, t->header.chunk_unit, t->header.next_chunk,
	       t->header.next_instance, t->header.created_realtime, t->header.created_monotonic,
	       t->header.root_pid,
	       t->header.clock == MT_CLOCK_MONOTONIC_NS ? "monotonic-ns"
	       : t->header.clock == MT_CLOCK_TSC        ? "tsc"
	                                                : "unknown");
	for (uint64_t i = 0; i < slots; i++) {
		struct mt_cursor c;
		r = mt_cursor_init(&c, t, i, err);
		if (r < 0)
			break;
		if (r == 0) {
			printf("0x%" PRIx64 " chunk %" PRIu64 " unused\n", c.chunk.offset, i);
			continue;
		}
		printf("0x%" PRIx64 " chunk %" PRIu64
		       " size %u instance %u pid %u tid %u base t=%+.6fms\n",
		       c.chunk.offset, i, c.chunk.size, c.chunk.instance, c.chunk.pid, c.chunk.tid,
		       rel_ms(t, c.chunk.base_ticks));
		while ((r = mt_cursor_next(&c, rec, err)) > 0)
			print_record(stdout, t, rec);
		if (r < 0)
			break;
	}
	free(rec);
	return r < 0 ? r : 0;
}

static void end_text(FILE *f, const struct mt_instance *in)
{
	fprintf(f, "end %s", mt_end_name(in->end));
	if (in->end == MT_END_EXIT)
		fprintf(f, " status %u how %s", in->exit_status, how_name(in->exit_how));
	else if (in->end == MT_END_STOPPED)
		fprintf(f, " errno %" PRId64, in->stopped_errno);
	if (mt_end_replaced(in->end) && in->exec_path) {
		struct mt_bytes b = {(const uint8_t *)in->exec_path,
		                     (uint32_t)strlen(in->exec_path)};
		fputs(" program ", f);
		put_string(f, b, false);
	}
}

static void print_summary(const char *file, const struct mt_trace *t, const struct mt_replay *r)
{
	const struct mt_trace_stats *ts = mt_replay_trace_stats(r);

	printf("trace %s version %u size %zu chunk_unit %u chunks %" PRIu64
	       " unused_chunks %" PRIu64 " records %" PRIu64 " events %" PRIu64
	       " bytes_per_event %.2f processes %u\n",
	       file, t->header.version, t->size, t->header.chunk_unit, ts->chunks,
	       ts->unused_chunks, ts->records, ts->events,
	       ts->events ? (double)t->size / (double)ts->events : 0.0,
	       mt_replay_instance_count(r));
	for (uint32_t i = 0; i < mt_replay_instance_count(r); i++) {
		const struct mt_instance *in = mt_replay_instance(r, i);

		printf("process %u pid %u ppid %u origin %s parent %u threads %u records %" PRIu64
		       " events %" PRIu64 " ",
		       in->id, in->pid, in->ppid, origin_name(in->origin), in->parent_instance,
		       in->threads, in->records, in->events);
		end_text(stdout, in);
		if (in->lost_stack_events)
			printf(" lost_stacks %" PRIu64, in->lost_stack_events);
		if (!in->have_process)
			printf(" no-process-record");
		fputs(" command ", stdout);
		mt_put_text(stdout,
		            in->cmdline && in->cmdline[0] ? in->cmdline : (in->exe ? in->exe : ""));
		putchar('\n');
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			const struct mt_kind_stats *s = &in->kind[k];
			if (!mt_kind_shown(in, (unsigned)k))
				continue;
			printf("process %u pid %u %s allocations %" PRIu64 " frees %" PRIu64
			       " bytes_allocated %" PRIu64 " live %" PRIu64 " bytes %" PRIu64
			       " blocks peak %" PRIu64 " bytes %" PRIu64
			       " blocks at %+.6fms failed %" PRIu64 " unknown_frees %" PRIu64
			       " inherited %" PRIu64 " bytes\n",
			       in->id, in->pid, mt_kind_name((unsigned)k), s->allocations, s->frees,
			       s->bytes_allocated, s->live_bytes, s->live_blocks, s->peak_bytes,
			       s->peak_blocks, s->peak_time ? rel_ms(t, s->peak_time) : 0.0,
			       s->failed, s->unknown_frees, s->inherited_bytes);
		}
		if (in->sample_count) {
			printf("process %u pid %u samples %" PRIu64 " last at %+.6fms", in->id,
			       in->pid, in->sample_count, rel_ms(t, in->sample_time));
			for (int f = 0; f < MT_SAMPLE_FIELD_COUNT; f++)
				printf(" %s %" PRIu64, sample_names[f], in->sample[f]);
			putchar('\n');
		}
	}
}

static json_t *summary_json(const char *file, const struct mt_trace *t, const struct mt_replay *r)
{
	const struct mt_trace_stats *ts = mt_replay_trace_stats(r);
	json_t *root = json_object(), *procs = json_array();

	json_object_set_new(root, "file", mt_json_text(file));
	json_object_set_new(root, "version", json_integer(t->header.version));
	json_object_set_new(root, "size", json_integer((json_int_t)t->size));
	json_object_set_new(root, "chunk_unit", json_integer(t->header.chunk_unit));
	json_object_set_new(root, "chunks", json_integer((json_int_t)ts->chunks));
	json_object_set_new(root, "unused_chunks", json_integer((json_int_t)ts->unused_chunks));
	json_object_set_new(root, "records", json_integer((json_int_t)ts->records));
	json_object_set_new(root, "events", json_integer((json_int_t)ts->events));
	json_object_set_new(root, "bytes_per_event",
	                    json_real(ts->events ? (double)t->size / (double)ts->events : 0.0));
	for (uint32_t i = 0; i < mt_replay_instance_count(r); i++) {
		const struct mt_instance *in = mt_replay_instance(r, i);
		json_t *p = json_object(), *kinds = json_object(), *fails = json_array();

		json_object_set_new(p, "instance", json_integer(in->id));
		json_object_set_new(p, "pid", json_integer(in->pid));
		json_object_set_new(p, "ppid", json_integer(in->ppid));
		json_object_set_new(p, "origin", json_string(origin_name(in->origin)));
		json_object_set_new(p, "parent_instance", json_integer(in->parent_instance));
		json_object_set_new(p, "exe", mt_json_text(in->exe ? in->exe : ""));
		json_object_set_new(p, "command", mt_json_text(in->cmdline ? in->cmdline : ""));
		json_object_set_new(p, "end", json_string(mt_end_name(in->end)));
		if (in->end == MT_END_EXIT) {
			json_object_set_new(p, "exit_status", json_integer(in->exit_status));
			json_object_set_new(p, "exit_how", json_string(how_name(in->exit_how)));
		} else if (in->end == MT_END_STOPPED) {
			json_object_set_new(p, "stop_errno", json_integer(in->stopped_errno));
		}
		json_object_set_new(p, "exec_path",
		                    mt_json_text(mt_end_replaced(in->end) ? in->exec_path : NULL));
		json_object_set_new(p, "threads", json_integer(in->threads));
		json_object_set_new(p, "records", json_integer((json_int_t)in->records));
		json_object_set_new(p, "events", json_integer((json_int_t)in->events));
		json_object_set_new(p, "stacks", json_integer((json_int_t)in->stack_count));
		json_object_set_new(p, "modules", json_integer(in->nmodules));
		json_object_set_new(p, "lost_stack_events",
		                    json_integer((json_int_t)in->lost_stack_events));
		for (int k = 0; k < MT_KIND_COUNT; k++) {
			const struct mt_kind_stats *s = &in->kind[k];
			if (!mt_kind_shown(in, (unsigned)k))
				continue;
			json_t *o = json_object();
			json_object_set_new(o, "allocations",
			                    json_integer((json_int_t)s->allocations));
			json_object_set_new(o, "frees", json_integer((json_int_t)s->frees));
			json_object_set_new(o, "bytes_allocated",
			                    json_integer((json_int_t)s->bytes_allocated));
			json_object_set_new(o, "live_bytes",
			                    json_integer((json_int_t)s->live_bytes));
			json_object_set_new(o, "live_blocks",
			                    json_integer((json_int_t)s->live_blocks));
			json_object_set_new(o, "peak_bytes",
			                    json_integer((json_int_t)s->peak_bytes));
			json_object_set_new(o, "peak_blocks",
			                    json_integer((json_int_t)s->peak_blocks));
			json_object_set_new(
			        o, "peak_ms",
			        json_real(s->peak_time ? rel_ms(t, s->peak_time) : 0.0));
			json_object_set_new(o, "failed", json_integer((json_int_t)s->failed));
			json_object_set_new(o, "unknown_frees",
			                    json_integer((json_int_t)s->unknown_frees));
			json_object_set_new(o, "inherited_bytes",
			                    json_integer((json_int_t)s->inherited_bytes));
			json_object_set_new(kinds, mt_kind_name((unsigned)k), o);
		}
		json_object_set_new(p, "memories", kinds);
		for (uint32_t f = 0; f < in->nfails; f++) {
			const struct mt_fail_event *e = &in->fails[f];
			json_t *o = json_object();
			const char *fn = mt_fn_name(e->fn);
			json_object_set_new(o, "ms", json_real(rel_ms(t, e->time)));
			json_object_set_new(o, "fn", json_string(fn ? fn : "unknown"));
			/* a calloc whose product overflowed asked for more than 2^63 bytes */
			json_object_set_new(o, "size",
			                    e->size > INT64_MAX
			                            ? json_real((double)e->size)
			                            : json_integer((json_int_t)e->size));
			json_object_set_new(o, "stack", json_integer(e->stack));
			json_object_set_new(o, "errno", json_integer(e->err));
			json_array_append_new(fails, o);
		}
		json_object_set_new(p, "failed", fails);
		if (in->sample_count) {
			json_t *o = json_object();
			json_object_set_new(o, "count", json_integer((json_int_t)in->sample_count));
			json_object_set_new(o, "ms", json_real(rel_ms(t, in->sample_time)));
			for (int f = 0; f < MT_SAMPLE_FIELD_COUNT; f++)
				json_object_set_new(o, sample_names[f],
				                    json_integer((json_int_t)in->sample[f]));
			json_object_set_new(p, "last_sample", o);
		}
		json_array_append_new(procs, p);
	}
	json_object_set_new(root, "processes", procs);
	return root;
}

static void usage(FILE *f)
{
	fputs("usage: memtrace dump [--summary] [--json] FILE\n", f);
}

int mt_cmd_dump(int argc, char **argv)
{
	bool summary_only = false, json = false;
	const char *file = NULL;
	struct mt_error err = {0};
	struct mt_replay *replay = NULL;
	struct mt_trace t;
	int r, status = MT_EXIT_OK;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--summary")) {
			summary_only = true;
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return MT_EXIT_OK;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "memtrace dump: unknown option %s\n", argv[i]);
			usage(stderr);
			return MT_EXIT_USAGE;
		} else if (file) {
			fprintf(stderr, "memtrace dump: one trace at a time\n");
			usage(stderr);
			return MT_EXIT_USAGE;
		} else {
			file = argv[i];
		}
	}
	if (!file) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	mt_cmd_reading(file);
	r = mt_reader_open(&t, file, &err);
	if (r < 0) {
		mt_cmd_trace_error(file, &err, r);
		return MT_EXIT_BAD_TRACE;
	}
	mt_cmd_trace_warning(file, &t);
	/* the first pass comes first so that record times use every clock pair of the file */
	r = mt_replay_open(&replay, &t, &err);
	if (r == 0)
		clock_fit = mt_replay_clock(replay);
	if (!summary_only && !json) {
		struct mt_error derr = {0};
		int dr = dump_records(&t, &derr);
		if (dr < 0) {
			r = dr;
			err = derr;
		}
	}
	if (r == 0)
		r = mt_replay_run(replay, NULL, NULL, &err);
	if (r < 0)
		goto fail;
	if (json) {
		json_t *root = summary_json(file, &t, replay);
		if (json_dumpf(root, stdout, JSON_INDENT(2)) < 0)
			status = MT_EXIT_BAD_TRACE;
		putchar('\n');
		json_decref(root);
	} else {
		print_summary(file, &t, replay);
	}
	goto out;
fail:
	fflush(stdout);
	mt_cmd_trace_error(file, &err, r);
	status = MT_EXIT_BAD_TRACE;
out:
	mt_replay_free(replay);
	mt_reader_close(&t);
	return status;
}
