/* SPDX-License-Identifier: MIT */
/*
 * Trace Event JSON (chrome-trace.h). Times are microseconds from the
 * earliest process's start, written with three decimals so that no
 * nanosecond is lost; every event names the process by its pid (a program
 * exec'd by a process continues its pid's tracks, and an instant event says
 * where it began).
 *
 * The `before` hook is called before each record is applied: the live
 * bytes it sees are those the previous record left, so a change is dated
 * at the previous record's time. The replay applies one process at a time,
 * so a hook call for another process ends the one before.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chrome-trace.h"
#include "commands.h"

struct point {
	uint64_t time, value;
};

struct counter {
	uint64_t now;   /* the live bytes as last seen */
	uint64_t shown; /* the value the file holds for this kind now */
	bool pending;   /* first, high and last hold an interval's points */
	uint64_t interval;
	struct point first, high, last;
};

struct proc {
	bool begun, ended;
	uint64_t start, width; /* ticks: the first interval's start, each interval's width */
	uint64_t prev;         /* ticks: the time of the record applied last */
	struct counter kind[MT_KIND_COUNT];
};

struct mt_chrome_trace {
	FILE *f;
	const char *source;
	bool any;        /* an event was written: the next one needs a comma */
	uint64_t origin; /* ns: the earliest process's start */
	struct proc *procs;
	uint32_t nprocs;
	const struct mt_instance *current;
};

int mt_chrome_trace_new(struct mt_chrome_trace **out, FILE *f, const char *source)
{
	struct mt_chrome_trace *t = calloc(1, sizeof(*t));

	*out = t;
	if (!t)
		return -ENOMEM;
	t->f = f;
	t->source = source;
	fputs("{\"traceEvents\":[\n", f);
	return 0;
}

void mt_chrome_trace_free(struct mt_chrome_trace *t)
{
	if (!t)
		return;
	free(t->procs);
	free(t);
}

/* s as a JSON string, its bytes escaped as in every JSON output (commands.h) */
static void put_string(FILE *f, const char *s)
{
	json_t *j = mt_json_text(s);

	if (!j || json_dumpf(j, f, JSON_ENCODE_ANY) < 0)
		fputs("\"\"", f);
	json_decref(j);
}

static void open_event(struct mt_chrome_trace *t)
{
	fputs(t->any ? ",\n{" : "{", t->f);
	t->any = true;
}

/* The start of an event of phase ph, with its name and time, up to its args. */
static void event(struct mt_chrome_trace *t, struct mt_analysis *a, const struct mt_instance *in,
                  const char *ph, const char *name, uint64_t ticks)
{
	uint64_t ns = mt_clock_ns(mt_replay_clock(a->replay), ticks);

	ns = ns > t->origin ? ns - t->origin : 0;
	open_event(t);
	fputs("\"name\":", t->f);
	put_string(t->f, name);
	fprintf(t->f, ",\"ph\":\"%s\",\"ts\":%" PRIu64 ".%03" PRIu64 ",\"pid\":%" PRIu32, ph,
	        ns / 1000, ns % 1000, in->pid);
}

static void counter_point(struct mt_chrome_trace *t, struct mt_analysis *a,
                          const struct mt_instance *in, const char *name, struct point p)
{
	event(t, a, in, "C", name, p.time);
	fprintf(t->f, ",\"args\":{\"bytes\":%" PRIu64 "}}", p.value);
}

/* An interval's points, in time order: a point another takes the place of (same time) or
 * that changes nothing is left out. */
static void flush(struct mt_chrome_trace *t, struct mt_analysis *a, const struct mt_instance *in,
                  unsigned k, struct counter *c)
{
	struct point pts[3] = {c->first, c->high, c->last};

	if (!c->pending)
		return;
	c->pending = false;
	for (int i = 0; i < 3; i++) {
		if ((i < 2 && pts[i + 1].time == pts[i].time) || pts[i].value == c->shown)
			continue;
		counter_point(t, a, in, mt_kind_name(k), pts[i]);
		c->shown = pts[i].value;
	}
}

static void change(struct mt_chrome_trace *t, struct mt_analysis *a, const struct mt_instance *in,
                   struct proc *p, unsigned k, uint64_t time, uint64_t value)
{
	struct counter *c = &p->kind[k];
	uint64_t i = time > p->start ? (time - p->start) / p->width : 0;
	struct point pt = {time, value};

	if (c->pending && i != c->interval)
		flush(t, a, in, k, c);
	if (!c->pending) {
		c->pending = true;
		c->interval = i;
		c->first = c->high = c->last = pt;
		return;
	}
	if (value > c->high.value)
		c->high = pt;
	c->last = pt;
}

/* Every kind whose live bytes changed since the last look, dated `time`. */
static void look(struct mt_chrome_trace *t, struct mt_analysis *a, const struct mt_instance *in,
                 struct proc *p, uint64_t time)
{
	for (unsigned k = 0; k < MT_KIND_COUNT; k++) {
		uint64_t v = in->kind[k].live_bytes;
		if (v == p->kind[k].now)
			continue;
		p->kind[k].now = v;
		change(t, a, in, p, k, time, v);
	}
}

static int begin_trace(struct mt_chrome_trace *t, struct mt_analysis *a)
{
	const struct mt_clock_fit *fit = mt_replay_clock(a->replay);
	uint32_t n = mt_replay_instance_count(a->replay);

	t->procs = calloc(n ? n : 1, sizeof(*t->procs));
	if (!t->procs)
		return -ENOMEM;
	t->nprocs = n;
	t->origin = UINT64_MAX;
	for (uint32_t i = 0; i < n; i++) {
		const struct mt_instance *in = mt_replay_instance(a->replay, i);
		uint64_t ns = mt_clock_ns(fit, in->start_time);
		if (in->have_process && ns < t->origin)
			t->origin = ns;
	}
	if (t->origin == UINT64_MAX)
		t->origin = 0;
	return 0;
}

static struct proc *proc_of(struct mt_chrome_trace *t, struct mt_analysis *a,
                            const struct mt_instance *in)
{
	return &t->procs[in - mt_replay_instance(a->replay, 0)];
}

/* A process's start: its name, where an exec'd program began, each kind's first value. */
static void begin_proc(struct mt_chrome_trace *t, struct mt_analysis *a,
                       const struct mt_instance *in, uint64_t first_time)
{
	struct proc *p = proc_of(t, a, in);
	uint64_t end;

	p->begun = true;
	p->start = p->prev = in->have_process ? in->start_time : first_time;
	end = in->end_time > p->start ? in->end_time : p->start;
	/* few enough events to write them all: an interval per tick */
	p->width = in->events <= 3 * MT_CHROME_INTERVALS
	                   ? 1
	                   : (end - p->start) / MT_CHROME_INTERVALS + 1;
	if (in->origin == MT_ORIGIN_EXEC) {
		event(t, a, in, "i", "exec", p->start);
		fputs(",\"s\":\"p\",\"tid\":", t->f);
		fprintf(t->f, "%" PRIu32 ",\"args\":{\"command\":", in->pid);
		put_string(t->f, mt_cmd_command(in));
		fputs("}}", t->f);
	} else {
		open_event(t);
		fprintf(t->f,
		        "\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRIu32
		        ",\"args\":{\"name\":",
		        in->pid);
		put_string(t->f, mt_cmd_command(in));
		fputs("}}", t->f);
	}
	/* a forked child starts with its parent's blocks; host and mmap are always shown */
	for (unsigned k = 0; k < MT_KIND_COUNT; k++) {
		struct counter *c = &p->kind[k];
		c->now = c->shown = in->kind[k].inherited_bytes;
		if (k <= MT_KIND_MMAP || c->now)
			counter_point(t, a, in, mt_kind_name(k), (struct point){p->start, c->now});
	}
}

static void end_proc(struct mt_chrome_trace *t, struct mt_analysis *a, const struct mt_instance *in)
{
	struct proc *p = proc_of(t, a, in);

	p->ended = true;
	look(t, a, in, p, p->prev);
	for (unsigned k = 0; k < MT_KIND_COUNT; k++)
		flush(t, a, in, k, &p->kind[k]);
}

int mt_chrome_trace_before(void *ctx, struct mt_analysis *a, const struct mt_instance *in,
                           const struct mt_record *rec, uint64_t time)
{
	struct mt_chrome_trace *t = ctx;
	struct proc *p;
	int r;

	(void)rec;
	if (!t->procs && (r = begin_trace(t, a)) < 0)
		return r;
	if (in != t->current) {
		if (t->current)
			end_proc(t, a, t->current);
		t->current = in;
		begin_proc(t, a, in, time);
	}
	p = proc_of(t, a, in);
	look(t, a, in, p, p->prev);
	p->prev = time;
	return 0;
}

/* Instant events: the process's marks with the bytes live then, failed allocations, its end. */
static void instants(struct mt_chrome_trace *t, struct mt_analysis *a, const struct mt_instance *in)
{
	char end[32];

	for (uint32_t i = 0; i < in->nmarks; i++) {
		const struct mt_mark_point *m = &in->marks[i];
		const char *sep = "";
		event(t, a, in, "i", m->label, m->time);
		fprintf(t->f, ",\"s\":\"p\",\"tid\":%" PRIu32 ",\"args\":{", in->pid);
		for (unsigned k = 0; k < MT_KIND_COUNT; k++) {
			if (!mt_kind_shown(in, k))
				continue;
			fprintf(t->f, "%s\"%s\":%" PRIu64, sep, mt_kind_name(k), m->live[k]);
			sep = ",";
		}
		fputs("}}", t->f);
	}
	for (uint32_t i = 0; i < in->nfails; i++) {
		const struct mt_fail_event *f = &in->fails[i];
		const char *fn = mt_fn_name(f->fn);
		char name[64];
		snprintf(name, sizeof(name), "failed %s", fn ? fn : "allocation");
		event(t, a, in, "i", name, f->time);
		fprintf(t->f,
		        ",\"s\":\"p\",\"tid\":%" PRIu32
		        ",\"args\":{\"kind\":\"%s\",\"size\":%" PRIu64 ",\"%s\":%" PRIu32 "}}",
		        in->pid, mt_kind_name(f->kind), f->size,
		        f->kind >= MT_KIND_CUDA_HOST ? "cuda_error" : "errno", f->err);
	}
	snprintf(end, sizeof(end), "end: %s", mt_end_name(in->end));
	event(t, a, in, "i", end, in->end_time);
	fprintf(t->f, ",\"s\":\"p\",\"tid\":%" PRIu32 ",\"args\":{", in->pid);
	if (in->end == MT_END_EXIT)
		fprintf(t->f, "\"status\":%" PRIu32, in->exit_status);
	fputs("}}", t->f);
}

static void rss(struct mt_chrome_trace *t, struct mt_analysis *a, const struct mt_instance *in)
{
	uint64_t shown = 0;

	for (uint64_t i = 0; i < in->nsamples; i++) {
		const struct mt_sample_point *s = &in->samples[i];
		uint64_t v = s->values[MT_SAMPLE_RSS];
		/* 0: the sampler could not read it */
		if (!v || v == shown)
			continue;
		counter_point(t, a, in, "RSS", (struct point){s->time, v});
		shown = v;
	}
}

int mt_chrome_trace_finish(struct mt_chrome_trace *t, struct mt_analysis *a)
{
	int r;

	if (!t->procs && (r = begin_trace(t, a)) < 0)
		return r;
	if (t->current)
		end_proc(t, a, t->current);
	for (uint32_t i = 0; i < a->nprocs; i++) {
		const struct mt_instance *in = a->procs[i].in;
		struct proc *p = proc_of(t, a, in);
		/* an instance with no record the replay applied */
		if (!p->begun)
			begin_proc(t, a, in, in->start_time);
		if (!p->ended)
			end_proc(t, a, in);
		rss(t, a, in);
		instants(t, a, in);
	}
	fputs("\n],\n\"displayTimeUnit\":\"ms\",\"otherData\":{\"source\":", t->f);
	put_string(t->f, t->source);
	for (uint32_t i = 0; i < a->nprocs; i++) {
		if (a->procs[i].in->sampling) {
			fputs(",\"note\":\"sampled capture: host figures are estimates\"", t->f);
			break;
		}
	}
	fputs("}}\n", t->f);
	return ferror(t->f) ? -EIO : 0;
}
