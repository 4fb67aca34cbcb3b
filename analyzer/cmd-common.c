/* SPDX-License-Identifier: MIT */
/*
 * What the analysis commands share (commands.h): opening a trace with
 * progress and the one-line error, names written escaped (escape.c) to a
 * terminal and to JSON, frames as text, stacks ranked by a metric.
 *
 * May not: compute figures (analysis.c does).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "analysis.h"
#include "commands.h"
#include "feed.h"
#include "label.h"
#include <memtrace/output-place.h>

struct progress {
	const char *file;
	double start, last;
	bool shown;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Only for long analyses: nothing during the first second, then 4 times a second. */
static void show_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress *p = ctx;
	double t = now_s();

	if (t - p->start < 1.0 || t - p->last < 0.25)
		return;
	p->last = t;
	p->shown = true;
	fprintf(stderr, "\rmemtrace: %s: %3.0f%% (%.1fM of %.1fM events)", p->file,
	        total ? 100.0 * (double)done / (double)total : 0.0, (double)done / 1e6,
	        (double)total / 1e6);
	fflush(stderr);
}

void mt_cmd_trace_error(const char *file, const struct mt_error *err, int r)
{
	if (err->message[0] && (r == -EBADMSG || r == -EPROTONOSUPPORT))
		fprintf(stderr, "memtrace: %s: byte %" PRIu64 " (0x%" PRIx64 "): %s\n", file,
		        err->offset, err->offset, err->message);
	else if (err->message[0])
		fprintf(stderr, "memtrace: %s: %s\n", file, err->message);
	else
		fprintf(stderr, "memtrace: %s: %s\n", file, strerror(-r));
}

void mt_cmd_trace_warning(const char *file, const struct mt_trace *t)
{
	if (t->cut)
		fprintf(stderr,
		        "memtrace: %s: the file ends at byte %zu, %" PRIu64 " bytes short of what "
		        "was written (a copy or a write cut short): its complete records are read, "
		        "and a process whose end may be in what is missing ends 'cut'\n",
		        file, t->size, t->missing);
	if (t->damaged)
		fprintf(stderr,
		        "memtrace: %s: %" PRIu64
		        " chunk%s of records fail%s its checksum (the first at "
		        "byte %" PRIu64
		        "): the file was damaged there, and its figures may be wrong\n",
		        file, t->damaged, t->damaged == 1 ? "" : "s", t->damaged == 1 ? "s" : "",
		        t->damaged_at);
	if (t->live)
		fprintf(stderr,
		        "memtrace: %s: a running program is still writing this trace: its "
		        "processes that have not ended are 'running'\n",
		        file);
}

const struct mt_analysis_hooks mt_cmd_frames = {.prefetch = true};

int mt_cmd_analyze(const char *file, const struct mt_analysis_hooks *extra, bool native,
                   struct mt_analysis **out)
{
	struct progress p = {.file = file, .start = now_s()};
	struct mt_analysis_hooks hooks = {0};
	struct mt_error err = {0};
	int r;

	if (extra)
		hooks = *extra;
	mt_cmd_reading(file);
	if (isatty(STDERR_FILENO)) {
		hooks.progress = show_progress;
		hooks.progress_ctx = &p;
	}
	r = mt_analysis_open(out, file, &hooks, &err);
	if (p.shown)
		fputs("\r\033[K", stderr);
	if (r < 0) {
		mt_cmd_trace_error(file, &err, r);
		return MT_EXIT_BAD_TRACE;
	}
	mt_cmd_trace_warning(file, &(*out)->trace);
	if (!native && (r = mt_analysis_group(*out, getenv("MEMTRACE_PLUMBING"))) < 0) {
		fprintf(stderr, "memtrace: %s: grouping the stacks: %s\n", file, strerror(-r));
		mt_analysis_free(*out);
		*out = NULL;
		return MT_EXIT_BAD_TRACE;
	}
	return MT_EXIT_OK;
}

void mt_put_text(FILE *f, const char *s)
{
	mt_put_escaped(f, s, strlen(s), MT_ESCAPE_CONTROL);
}

json_t *mt_json_text(const char *s)
{
	char *e;
	json_t *j;

	if (!s)
		return json_null();
	e = mt_escape_dup(s, strlen(s), 0);
	/* jansson takes only valid UTF-8, which the escaped text is */
	j = e ? json_string(e) : NULL;
	free(e);
	return j;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* Appends text to buf (n bytes) at *at, cut at the end of the buffer. */
static void put_raw(char *buf, size_t n, size_t *at, const char *text)
{
	int r = snprintf(buf + *at, n - *at, "%s", text);

	*at = r < 0 ? *at : *at + (size_t)r < n ? *at + (size_t)r : n - 1;
}

/* Appends a name from the trace, escaped: it may hold anything. */
static void put_name(char *buf, size_t n, size_t *at, const char *name)
{
	*at += mt_escape(buf + *at, n - *at, name, strlen(name), MT_ESCAPE_CONTROL);
}

void mt_cmd_frame_text(char *buf, size_t n, const struct mt_sym *s)
{
	char num[48];
	size_t at = 0;

	if (!n)
		return;
	buf[0] = 0;
	if (s->tail) {
		/* a group's innermost Python frame: the line first, the folded native label last */
		if (s->file) {
			put_name(buf, n, &at, base_name(s->file));
			snprintf(num, sizeof(num), ":%" PRIu32 " in ", s->line);
			put_raw(buf, n, &at, num);
		}
		put_name(buf, n, &at, s->function ? s->function : "?");
		put_raw(buf, n, &at, " (");
		put_name(buf, n, &at, s->tail);
		put_raw(buf, n, &at, ")");
	} else if (s->function) {
		put_name(buf, n, &at, s->function);
		if (s->file || s->module) {
			put_raw(buf, n, &at, " (");
			put_name(buf, n, &at, base_name(s->file ? s->file : s->module));
			if (s->file) {
				snprintf(num, sizeof(num), ":%" PRIu32, s->line);
				put_raw(buf, n, &at, num);
			}
			put_raw(buf, n, &at, ")");
		}
	} else if (s->module) {
		put_name(buf, n, &at, base_name(s->module));
		snprintf(num, sizeof(num), "+0x%" PRIx64, s->offset);
		put_raw(buf, n, &at, num);
	} else {
		snprintf(buf, n, "0x%" PRIx64, s->address);
	}
}

int mt_cmd_label_frame(const struct mt_sym *syms, int count)
{
	return mt_label_frame(syms, count, getenv("MEMTRACE_PLUMBING"));
}

void mt_cmd_label_text(char *buf, size_t n, const struct mt_sym *syms, int count)
{
	int at = mt_cmd_label_frame(syms, count);
	const struct mt_sym *s = &syms[at];
	const char *fn = syms[0].function;
	char num[48], where[64];
	size_t len = 0, mark;

	if (!n)
		return;
	if (s->tail) {
		mt_cmd_frame_text(buf, n, s);
		return;
	}
	if (!s->function) {
		mt_cmd_frame_text(buf, n, s);
		len = strlen(buf);
	} else {
		/* the name without its parameters: a label is read, the frames say the rest */
		buf[0] = 0;
		len = mt_escape(buf, n, s->function, mt_label_name_length(s->function),
		                MT_ESCAPE_CONTROL);
	}
	/* an allocating frame without a name: its module and offset */
	if (!fn && at) {
		mt_cmd_frame_text(where, sizeof(where), &syms[0]);
		fn = where;
	}
	mark = len;
	put_raw(buf, n, &len, " (");
	if (s->function && (s->file || s->module)) {
		put_name(buf, n, &len, base_name(s->file ? s->file : s->module));
		if (s->file) {
			snprintf(num, sizeof(num), ":%" PRIu32, s->line);
			put_raw(buf, n, &len, num);
		}
		if (at && fn)
			put_raw(buf, n, &len, ", ");
	}
	/* the function that allocated, whole or not at all: a part of a name misleads */
	if (at && fn &&
	    len + mt_escape(NULL, 0, fn, mt_label_name_length(fn), MT_ESCAPE_CONTROL) +
	                    sizeof("via )") <
	            n) {
		put_raw(buf, n, &len, "via ");
		len += mt_escape(buf + len, n - len, fn, mt_label_name_length(fn),
		                 MT_ESCAPE_CONTROL);
	} else if (len >= 2 && buf[len - 2] == ',') {
		len -= 2;
	}
	if (len == mark + 2 || len + 2 > n)
		len = mark; /* nothing in the parentheses, or no room to close them */
	else
		put_raw(buf, n, &len, ")");
	buf[len] = 0;
}

const char *mt_cmd_command(const struct mt_instance *in)
{
	if (in->cmdline && in->cmdline[0])
		return in->cmdline;
	if (in->exe && in->exe[0])
		return in->exe;
	return "?";
}

void mt_cmd_sampling_note(FILE *f, const char *prefix, const struct mt_analysis *a)
{
	uint64_t t = 0;
	bool differ = false;
	char b1[32], b2[32];

	for (uint32_t i = 0; i < a->nprocs; i++) {
		uint64_t s = a->procs[i].in->sampling;
		if (s && t && s != t)
			differ = true;
		if (s && !t)
			t = s;
	}
	if (!t)
		return;
	mt_size_text(b1, sizeof(b1), t);
	mt_size_text(b2, sizeof(b2), mt_sampling_exact_above(t));
	fprintf(f,
	        "%ssampled capture: host figures are estimates (one allocation sampled per %s "
	        "allocated on average%s; blocks over %s recorded exactly)\n",
	        prefix, b1, differ ? " in the first sampled process" : "", b2);
}

const char *mt_cmd_no_verdict(const struct mt_analysis *a, bool live_ok, char *buf, size_t size)
{
	if (!a->nprocs)
		return "the trace holds no process";
	if (a->trace.cut)
		return "the trace was cut: its end is missing";
	if (a->trace.live && !live_ok)
		return "a running program is still writing the trace";
	if (a->trace.damaged)
		return "the trace is damaged: records fail their checksum";
	for (uint32_t i = 0; i < a->nprocs; i++) {
		const struct mt_instance *in = a->procs[i].in;
		if (in->end == MT_END_STOPPED) {
			snprintf(buf, size, "tracing stopped early in process %u (%s)", in->pid,
			         in->stopped_errno > 0 && in->stopped_errno < 4096
			                 ? strerror((int)in->stopped_errno)
			                 : "unknown error");
			return buf;
		}
	}
	return NULL;
}

const char *mt_cmd_exit_how(uint32_t how)
{
	switch (how) {
	case MT_EXIT_MAIN_RETURN:
		return "main returned";
	case MT_EXIT_EXIT:
		return "exit()";
	case MT_EXIT_UNDERSCORE:
		return "_exit()";
	default:
		return "status unknown";
	}
}

struct mt_stack_row *mt_cmd_ranked(const struct mt_kind_result *k, enum mt_metric m, size_t *n)
{
	struct mt_stack_row *rows = malloc((k->nrows ? k->nrows : 1) * sizeof(*rows));
	size_t kept = 0;

	*n = 0;
	if (!rows)
		return NULL;
	/* a block of 0 bytes is a leak all the same */
	for (size_t i = 0; i < k->nrows; i++)
		if (mt_stack_row_value(&k->rows[i], m) ||
		    (m == MT_METRIC_LEAKED && k->rows[i].leaked_blocks) ||
		    (m == MT_METRIC_PEAK && k->rows[i].peak_blocks))
			rows[kept++] = k->rows[i];
	mt_stack_rows_sort(rows, kept, m);
	*n = kept;
	return rows;
}

int mt_cmd_parse_top(const char *command, const char *arg, unsigned *top)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);

	if (*end || !arg[0] || v == 0 || v > UINT32_MAX) {
		fprintf(stderr, "memtrace %s: --top wants a positive number, not %s\n", command,
		        arg);
		return -EINVAL;
	}
	*top = (unsigned)v;
	return 0;
}

/*
 * An output file is written under a new name in its directory and renamed
 * over the name when complete: the name may be a symlink someone planted
 * (a shared /tmp), which fopen("w") follows into any file the user can
 * write; rename replaces the link itself. A reader of the name sees the
 * old file or the whole new one, never half a page, and a failure leaves
 * the old file as it was. There is no fsync: the page can be made again
 * from the trace, and it would cost seconds on a slow disk.
 *
 * Only a file is replaced (output-place.h): /dev/null, a FIFO or a terminal
 * is written in place, as a shell's `>` would; /dev/stdout, or any name of
 * the file standard output or error already writes, is written through that
 * descriptor, so the shell's redirection gets the page and its name stays.
 */
static int open_in_place(struct mt_output *o, const char *path)
{
	int std = -1, fd;

	switch (mt_output_place(path, &std)) {
	case MT_PLACE_NONE:
	case MT_PLACE_FILE:
		return 1;
	case MT_PLACE_DIR:
		return -EISDIR;
	case MT_PLACE_STDIO:
		if (std == 0)
			return 1; /* the input's reader keeps the old file */
		fd = fcntl(std, F_DUPFD_CLOEXEC, 3);
		break;
	case MT_PLACE_OTHER:
	default:
		fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		break;
	}
	if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
		int r = -errno;

		if (fd >= 0)
			close(fd);
		return r;
	}
	o->path = path;
	return 0;
}

int mt_cmd_output_open(struct mt_output *o, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
	int fd = -1, r;

	memset(o, 0, sizeof(*o));
	if (!strcmp(path, "-")) {
		o->f = stdout;
		return 0;
	}
	r = open_in_place(o, path);
	if (r <= 0)
		return r;
	/* ".NAME.XXXXXX" beside NAME: hidden, and on the file system rename needs */
	o->tmp = malloc(strlen(path) + sizeof(".") + 7);
	if (!o->tmp)
		return -ENOMEM;
	for (int tries = 0; fd < 0 && tries < 100; tries++) {
		uint32_t rnd;

		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			rnd = (uint32_t)getpid() * 2654435761u + (uint32_t)tries;
		sprintf(o->tmp, "%.*s.%s.%06" PRIx32, (int)dir, path, path + dir, rnd & 0xffffff);
		/* 0666 less the umask, as fopen would make it; O_EXCL refuses a planted name */
		fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
		          0666);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
		r = -errno;
		if (fd >= 0) {
			unlink(o->tmp);
			close(fd);
		}
		free(o->tmp);
		o->tmp = NULL;
		return r;
	}
	o->path = path;
	return 0;
}

int mt_cmd_output_commit(struct mt_output *o)
{
	int r = 0;

	if (o->f == stdout)
		return fflush(stdout) == 0 ? 0 : -errno;
	if (ferror(o->f))
		r = -EIO;
	if (fclose(o->f) != 0 && !r)
		r = -errno;
	o->f = NULL;
	if (!o->tmp)
		return r;
	if (!r && rename(o->tmp, o->path) != 0)
		r = -errno;
	if (r)
		unlink(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
	return r;
}

void mt_cmd_output_abort(struct mt_output *o)
{
	if (!o->f || o->f == stdout)
		return;
	fclose(o->f);
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	memset(o, 0, sizeof(*o));
}

/*
 * The trace is mapped, not read: when another program truncates it while
 * a command reads it, a load past the new end raises SIGBUS, which would
 * kill memtrace without a word (status 135). The command is left by a
 * jump from the handler instead: nothing it was doing can go on without
 * the data, and the process exits right after saying why.
 */
static const char *reading;
static sigjmp_buf shrank;

void mt_cmd_reading(const char *file)
{
	reading = file;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	/* a mapped file's missing page; anything else is a bug and dies as one */
	if (si->si_code != BUS_ADRERR || !reading) {
		signal(sig, SIG_DFL);
		return;
	}
	/* the open's helpers and the feed's producer leave, and the command's thread meets the
	 * fault itself */
	mt_reader_fault(si->si_addr);
	mt_feed_fault(si->si_addr);
	siglongjmp(shrank, 1);
}

int mt_cmd_guarded(int (*cmd)(int argc, char **argv), int argc, char **argv)
{
	struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};

	if (sigsetjmp(shrank, 1)) {
		fprintf(stderr,
		        "memtrace: %s: the file shrank while it was read (another program "
		        "truncated it)\n",
		        reading);
		return MT_EXIT_BAD_TRACE;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	return cmd(argc, argv);
}
