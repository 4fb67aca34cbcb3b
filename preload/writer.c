/* SPDX-License-Identifier: MIT */
/*
 * The trace file and the per-thread chunks (format: docs/trace-format.md).
 *
 * Every thread writes its own chunk of the file, mapped MAP_SHARED, so the
 * hot path is a bounds check and plain stores. A new chunk costs one atomic
 * add on the shared file header (all processes of the run map that same
 * page), a posix_fallocate, so that a full disk is an error here and never a
 * SIGBUS later, and an mmap. A thread's first chunk is one page and each
 * next one twice the last, up to MT_CHUNK_SIZE_MAX: a short process costs a
 * few KiB, a busy thread few system calls. A full chunk is unmapped at once:
 * its pages stay in the page cache, not in the program's RSS.
 *
 * The file's descriptor is the program's business as little as can be: it
 * is held at a number far above the program's (fds.c), which the program's
 * close, close_range, closefrom, dup2 and dup3 cannot take, checked by
 * device and inode before every use and reopened by its path when the
 * program took it anyway (a raw system call). Every writer holds a shared
 * flock on it, so that a second run with the same output name knows the
 * file is live and writes NAME.1 instead of moving it aside.
 *
 * Every chunk keeps MT_STOP_RESERVE bytes at its end that the hot path never
 * uses: when the trace cannot grow (a full disk, the file size limit, no
 * address space) the thread that finds out writes the stop record there,
 * so a reader knows where and why the trace ends.
 *
 * May not: take a lock in the steady state, allocate with malloc, or change
 * errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "memtrace/crc32c.h"
#include "memtrace/output-name.h"
#include "memtrace/output-place.h"
#include "memtrace/ring-claim.h"
#include "mt.h"

uint32_t mt_instance;
pid_t mt_pid;

static struct mt_file_header *header;
static char path[PATH_MAX];
static dev_t trace_dev;
static ino_t trace_ino;
static pthread_key_t thread_key;
static bool thread_key_ok;

/*
 * Chunks mapped by this process's threads, so that a forked child can unmap
 * the ones it inherited (its threads are gone, and writing there would tear
 * the parent's records). A slot holds a mapping's address (page-aligned)
 * with its size in units in the low bits, or 0.
 */
#define MAPPED_SLOTS 1024
static _Atomic uintptr_t mapped[MAPPED_SLOTS];
_Static_assert(MT_CHUNK_SIZE_MAX / MT_CHUNK_UNIT < MT_CHUNK_UNIT, "a size fits below a page");

static void mapped_add(uintptr_t p, uint32_t size, uint32_t hint)
{
	uintptr_t v = p | size / MT_CHUNK_UNIT;

	for (unsigned i = 0; i < MAPPED_SLOTS; i++) {
		uintptr_t zero = 0;
		unsigned s = (hint + i) % MAPPED_SLOTS;
		if (atomic_compare_exchange_strong(&mapped[s], &zero, v))
			return;
	}
	/* more than MAPPED_SLOTS live threads: a forked child keeps that mapping, harmlessly */
}

static void mapped_remove(uintptr_t p, uint32_t size, uint32_t hint)
{
	for (unsigned i = 0; i < MAPPED_SLOTS; i++) {
		uintptr_t want = p | size / MT_CHUNK_UNIT;
		unsigned s = (hint + i) % MAPPED_SLOTS;
		if (atomic_compare_exchange_strong(&mapped[s], &want, 0))
			return;
	}
}

static bool past_size_limit(uint64_t end)
{
	struct rlimit lim;

	return getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
	       end > lim.rlim_cur;
}

/* out = MEMTRACE_OUTPUT with its escapes expanded (output-name.h), made absolute. */
static int resolve_path(pid_t pid, char out[PATH_MAX])
{
	char expanded[PATH_MAX];
	int n = mt_output_expand(mt_config.output, pid, expanded, sizeof(expanded) - 24);

	if (n < 0)
		return n;
	if (expanded[0] == '/') {
		memcpy(out, expanded, (size_t)n + 1);
		return 0;
	}
	if (!getcwd(out, PATH_MAX - 1))
		return -errno;
	if (strlen(out) + 1 + (size_t)n + 32 >= PATH_MAX)
		return -ENAMETOOLONG;
	strcat(out, "/");
	strcat(out, expanded);
	return 0;
}

/*
 * Whether the trace at `joined` (the tree's file: NAME, or NAME.k when
 * another run held NAME) is the one this process's own MEMTRACE_OUTPUT
 * names. With %p, %r or %h in it, an exec'd program of another pid, rank or
 * host writes a file of its own: torchrun's workers, exec'd by a launcher
 * that has no rank, each write their rank's trace.
 */
static bool names_same_file(const char *joined)
{
	char own[PATH_MAX];
	size_t n;

	if (!mt_output_has_escape(mt_config.output))
		return true;
	if (resolve_path(getpid(), own) < 0)
		return false;
	n = strlen(own);
	if (strncmp(joined, own, n))
		return false;
	return !joined[n] || (joined[n] == '.' && joined[n + 1] &&
	                      strspn(joined + n + 1, "0123456789") == strlen(joined + n + 1));
}

static int map_header(int fd)
{
	void *p = mt_real.mmap(NULL, MT_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	header = p;
	return 0;
}

static void init_header(pid_t pid)
{
	struct timespec rt;

	clock_gettime(CLOCK_REALTIME, &rt);
	header->version = MT_FORMAT_VERSION;
	header->header_size = MT_HEADER_SIZE;
	header->chunk_unit = MT_CHUNK_UNIT;
	header->byte_order = MT_BYTE_ORDER_MARK;
	header->next_chunk = MT_HEADER_SIZE;
	header->next_instance = 0;
	header->created_monotonic = mt_monotonic_ns();
	header->clock = mt_use_tsc ? MT_CLOCK_TSC : MT_CLOCK_MONOTONIC_NS;
	header->created_realtime = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	header->root_pid = (uint32_t)pid;
	header->extended = MT_HEADER_SIZE;
	header->ring_size = mt_config.ring;
	atomic_signal_fence(memory_order_release);
	memcpy(header->magic, MT_FILE_MAGIC, 8);
}

/*
 * What is at name now: 1 a trace some live run holds (its writers' shared
 * lock) or something that is not ours to move (output-place.h), 0 anything
 * else, which may be moved aside to NAME.old (taken with an exclusive lock
 * held, so no run can join it meanwhile).
 */
static int move_aside_unless_live(const char *name)
{
	char old[PATH_MAX + 16];
	int f, r, std;
	struct stat st;

	snprintf(old, sizeof(old), "%s.old", name);
	if (mt_output_place(name, &std) > MT_PLACE_FILE ||
	    mt_output_place(old, &std) > MT_PLACE_FILE)
		return 1;
	f = open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (f >= 0 && fstat(f, &st) == 0 && S_ISREG(st.st_mode) &&
	    flock(f, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
		close(f);
		return 1;
	}
	r = rename(name, old) < 0 && errno != ENOENT ? -errno : 0;
	if (f >= 0)
		close(f);
	return r;
}

/*
 * Gives the new file at tmp the name `name` unless something is there: 0,
 * -EEXIST, or another -errno. renameat2's RENAME_NOREPLACE is atomic; a file
 * system without it gets link and unlink, which are too.
 */
static int place(const char *tmp, const char *name)
{
	if (syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (link(tmp, name) < 0)
		return -errno;
	unlink(tmp);
	return 0;
}

/*
 * A trace is a file of its own: a name that stands for something else
 * (output-place.h) is left alone, and tracing is off. So is NAME.old, where
 * an earlier trace at the name would go.
 */
static int refuse_place(const char *name)
{
	char old[PATH_MAX + 16];
	int std = 0;
	enum mt_place p = mt_output_place(name, &std);

	if (p > MT_PLACE_FILE) {
		mt_say("the trace %s %s; tracing is off", name, mt_output_place_why(p, std));
		return p == MT_PLACE_DIR ? -EISDIR : -EEXIST;
	}
	snprintf(old, sizeof(old), "%s.old", name);
	p = p == MT_PLACE_FILE ? mt_output_place(old, &std) : MT_PLACE_NONE;
	if (p <= MT_PLACE_FILE)
		return 0;
	mt_say("the earlier trace would go to %s, which %s; tracing is off", old,
	       mt_output_place_why(p, std));
	return -EEXIST;
}

/*
 * Root process: a new file, made under a temporary name, locked and given
 * its header before it takes the trace's name, so that no other run ever
 * sees it unlocked or half made. A finished trace at the name is kept as
 * NAME.old; a live one is left alone and this run writes NAME.1 (or .2 ...).
 * O_EXCL|O_NOFOLLOW: nothing planted at a name is ever written through.
 */
int mt_writer_create(pid_t pid)
{
	char tmp[PATH_MAX + 32], name[PATH_MAX + 8];
	struct stat st;
	int fd, r = 0, n, tries = 0;

	r = resolve_path(pid, path);
	if (r < 0) {
		mt_say("cannot resolve the trace path %s: %s; tracing is off", mt_config.output,
		       strerror(-r));
		return r;
	}
	r = refuse_place(path);
	if (r < 0)
		return r;
	snprintf(tmp, sizeof(tmp), "%s.%d.new", path, (int)pid);
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		mt_say("cannot create the trace %s: %s; tracing is off", path, strerror(-r));
		return r;
	}
	r = past_size_limit(MT_HEADER_SIZE) ? EFBIG : posix_fallocate(fd, 0, MT_HEADER_SIZE);
	if (r == 0)
		r = -map_header(fd);
	if (r == 0 && (flock(fd, LOCK_SH | LOCK_NB) < 0 || fstat(fd, &st) < 0))
		r = errno;
	if (r != 0) {
		mt_say("cannot write the trace %s: %s; tracing is off", path, strerror(r));
		goto fail;
	}
	init_header(pid);
	for (n = 0; n < 100 && tries < 200; tries++) {
		if (n)
			snprintf(name, sizeof(name), "%s.%d", path, n);
		else
			snprintf(name, sizeof(name), "%s", path);
		r = place(tmp, name);
		if (r != -EEXIST)
			break;
		r = move_aside_unless_live(name);
		if (r == 1)
			n++;
		else if (r < 0)
			break;
	}
	if (r != 0) {
		r = r > 0 ? EEXIST : -r;
		mt_say("cannot create the trace %s: %s; tracing is off", path, strerror(r));
		goto fail;
	}
	if (n)
		mt_say("%s is being written by another run; this run writes %s", path, name);
	strcpy(path, name);
	trace_dev = st.st_dev;
	trace_ino = st.st_ino;
	r = mt_fd_keep(MT_FD_TRACE, fd, &st);
	if (r < 0) {
		mt_say("cannot keep the trace %s open: %s; tracing is off", path, strerror(-r));
		return r;
	}
	return 0;
fail:
	if (header)
		mt_real.munmap(header, MT_HEADER_SIZE);
	header = NULL;
	unlink(tmp);
	close(fd);
	return -r;
}

/*
 * Tells exec'd descendants which file to join, "MEMTRACE_TREE=dev:ino:path",
 * without setenv: setenv would allocate glibc's environment array behind
 * the trace's back, and the program's own setenv later reallocs it (a free
 * of a block the trace never saw). The program's environment pointers are
 * copied to a mapping of our own with the token added; glibc copies that
 * array into its own (traced) one the first time the program changes the
 * environment, and never frees it.
 */
static void put_environment(const char *entry)
{
	static char token[PATH_MAX + 96];
	size_t n = 0, k = 0, len = strlen("MEMTRACE_TREE=");
	char **env;

	if (strlen(entry) >= sizeof(token))
		return;
	strcpy(token, entry);
	for (char **e = environ; e && *e; e++)
		n++;
	env = mt_real.mmap(NULL, (n + 2) * sizeof(char *), PROT_READ | PROT_WRITE,
	                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (env == MAP_FAILED)
		return;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "MEMTRACE_TREE=", len))
			env[k++] = environ[i];
	env[k++] = token;
	env[k] = NULL;
	environ = env;
}

void mt_writer_export_token(void)
{
	char entry[PATH_MAX + 96];

	snprintf(entry, sizeof(entry), "MEMTRACE_TREE=%llu:%llu:%s", (unsigned long long)trace_dev,
	         (unsigned long long)trace_ino, path);
	put_environment(entry);
}

/* The token's file, opened and checked; its descriptor or -1. */
static int open_token(const char *token, bool write)
{
	unsigned long long dev, ino;
	struct stat st;
	int used = 0, fd;

	if (sscanf(token, "%llu:%llu:%n", &dev, &ino, &used) != 2 || !used ||
	    strlen(token + used) >= sizeof(path))
		return -1;
	fd = open(token + used, (write ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_dev != dev || st.st_ino != ino) {
		close(fd);
		return -1;
	}
	strcpy(path, token + used);
	trace_dev = st.st_dev;
	trace_ino = st.st_ino;
	return fd;
}

/*
 * An exec'd program below a traced process joins the trace named in the
 * token, if that name still is the same file with a header we can write and
 * its own MEMTRACE_OUTPUT names it too, and takes its share of the run's lock. Otherwise the caller
 * starts a trace of its own (never at the expense of this one: see mt_writer_create).
 */
int mt_writer_join(const char *token)
{
	int fd = open_token(token, true);

	if (fd < 0)
		return -EINVAL;
	if (!names_same_file(path))
		goto fail;
	if (map_header(fd) < 0)
		goto fail;
	if (memcmp(header->magic, MT_FILE_MAGIC, 8) || header->version != MT_FORMAT_VERSION ||
	    header->clock != (mt_use_tsc ? MT_CLOCK_TSC : MT_CLOCK_MONOTONIC_NS) ||
	    header->chunk_unit != MT_CHUNK_UNIT || flock(fd, LOCK_SH | LOCK_NB) < 0) {
		mt_real.munmap(header, MT_HEADER_SIZE);
		header = NULL;
		goto fail;
	}
	if (mt_fd_keep(MT_FD_TRACE, fd, &(struct stat){.st_dev = trace_dev, .st_ino = trace_ino}) <
	    0) {
		mt_real.munmap(header, MT_HEADER_SIZE);
		header = NULL;
		return -EINVAL;
	}
	return 0;
fail:
	close(fd);
	return -EINVAL;
}

/*
 * A process whose malloc is not ours: true if the run already said so. The
 * run's trace header keeps the fact for processes that join a traced run;
 * a run with no trace passes it on in the environment ("foreign" token).
 */
bool mt_writer_foreign_said(void)
{
	const char *token = getenv("MEMTRACE_TREE");
	bool said = false;
	void *p;
	int fd;

	if (token && !strcmp(token, "foreign"))
		return true;
	fd = token ? open_token(token, true) : -1;
	if (fd < 0) {
		put_environment("MEMTRACE_TREE=foreign");
		return false;
	}
	p = mt_real.mmap(NULL, MT_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p != MAP_FAILED) {
		struct mt_file_header *h = p;
		if (!memcmp(h->magic, MT_FILE_MAGIC, 8) && h->version == MT_FORMAT_VERSION)
			said = atomic_fetch_or((_Atomic uint32_t *)&h->flags,
			                       MT_HEADER_FOREIGN_MALLOC_SAID) &
			       MT_HEADER_FOREIGN_MALLOC_SAID;
		mt_real.munmap(p, MT_HEADER_SIZE);
	}
	close(fd);
	return said;
}

uint32_t mt_writer_new_instance(void)
{
	return (uint32_t)atomic_fetch_add((_Atomic uint64_t *)&header->next_instance, 1) + 1;
}

/*
 * The trace's descriptor, held the whole time, with fds.c's lock on it (so
 * that no dup2 of the program moves it while we use it): release it with
 * mt_fd_release(MT_FD_TRACE). If the program took the number anyway (a raw
 * close_range, say), the file is opened again by its path, checked to be
 * the same file, and locked again. -errno when it is gone. Slow path.
 */
static int trace_fd_hold(void)
{
	struct stat st;
	int fd = mt_fd_hold(MT_FD_TRACE), r;

	if (fd >= 0)
		return fd;
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_dev != trace_dev || st.st_ino != trace_ino) {
		close(fd);
		return -ESTALE;
	}
	flock(fd, LOCK_SH | LOCK_NB);
	r = mt_fd_keep(MT_FD_TRACE, fd, &st);
	if (r < 0)
		return r;
	fd = mt_fd_hold(MT_FD_TRACE);
	return fd >= 0 ? fd : -EBADF;
}

int mt_writer_trace_hold(ino_t *ino)
{
	int fd = trace_fd_hold();

	*ino = trace_ino;
	return fd;
}

/* Gives back the unused whole pages at the end of a chunk the thread is done with. */
static void punch_tail(struct mt_thread *t)
{
	uint64_t used =
	        ((uint64_t)(t->pos - t->base) + MT_CHUNK_UNIT - 1) & ~(uint64_t)(MT_CHUNK_UNIT - 1);
	int fd;

	if (used >= t->chunk_bytes)
		return;
	fd = trace_fd_hold();
	if (fd < 0)
		return;
	fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(t->chunk_off + used),
	          (off_t)(t->chunk_bytes - used));
	mt_fd_release(MT_FD_TRACE);
}

/* The chunk is given up: its checksum, for a reader to find damage by. */
static void seal(uint8_t *base, const uint8_t *pos)
{
	struct mt_chunk_header *ch = (struct mt_chunk_header *)base;
	size_t hdr = sizeof(*ch);

	/* release: a consumer that reads the sum reads the records before it (ring.c) */
	atomic_store_explicit((_Atomic uint32_t *)&ch->crc32c,
	                      mt_crc32c(base + hdr, (size_t)(pos - base) - hdr),
	                      memory_order_release);
}

/*
 * base is NULL whenever pos and end are not a mapped chunk's: it is cleared
 * first here and set last when a chunk is installed, so that a signal
 * handler's _exit that interrupted either (process.c) never writes into an
 * unmapped chunk.
 */
static void release_chunk(struct mt_thread *t)
{
	uint8_t *base = t->base;

	if (!base)
		return;
	seal(base, t->pos);
	t->base = NULL;
	atomic_signal_fence(memory_order_seq_cst);
	t->pos = t->end = NULL;
	mapped_remove((uintptr_t)base, t->chunk_bytes, t->tid);
	mt_real.munmap(base, t->chunk_bytes);
}

/* The errno of a stop no record says yet (its thread had no chunk), with UNSAID set. */
#define UNSAID (1ull << 32)
static _Atomic uint64_t unsaid_stop;

static void stop_record(struct mt_thread *t, int err)
{
	uint8_t *rec = t->pos, *q;

	q = mt_put_varint(rec + 2, MT_LOST_DISABLED);
	q = mt_put_varint(q, (uint64_t)err);
	mt_commit_small(rec, MT_REC_LOST, q);
	t->stop_said = true;
}

/*
 * Says a stop that its thread could not (stop below), in this thread's chunk
 * before it goes: called where no record of this thread's is under way (not
 * from a handler that interrupted memtrace). Not in a child that shares its
 * parent's chunks, whose parent says it.
 */
void mt_writer_stop_unsaid(void)
{
	uint64_t s;

	if (!mt_self.base || mt_self.stop_said || mt_process_in_parent_memory() ||
	    !((s = atomic_exchange(&unsaid_stop, 0)) & UNSAID))
		return;
	/* this thread wrote no stop record, so its chunk's room for one is there */
	stop_record(&mt_self, (int)(uint32_t)s);
}

/* Thread exit (pthread key destructor): give the chunk and its unused pages back. */
static void thread_gone(void *arg)
{
	struct mt_thread *t = &mt_self;
	bool guard = t->guard;
	int saved = errno;

	(void)arg;
	t->guard = true;
	if (t->base && atomic_load(&mt_state) == MT_ON)
		punch_tail(t);
	else if (!guard)
		mt_writer_stop_unsaid();
	release_chunk(t);
	mt_area_release(t);
	t->key_set = false;
	t->guard = guard;
	errno = saved;
}

void mt_writer_thread_key(void)
{
	thread_key_ok = pthread_key_create(&thread_key, thread_gone) == 0;
}

/* A thread that finds tracing stopped gives its chunk and scratch back. */
void mt_writer_drop_thread(void)
{
	struct mt_thread *t = &mt_self;
	int saved = errno;

	t->guard = true;
	mt_writer_stop_unsaid();
	release_chunk(t);
	mt_area_release(t);
	t->guard = false;
	errno = saved;
}

/*
 * Tracing stops for good (err is an errno, said after why unless why says
 * it). The thread that stops it writes the stop record into the room its
 * chunk kept for it; one that has no chunk (its first could not be mapped)
 * leaves it to the next thread that gives its chunk back or exits
 * (mt_writer_stop_unsaid), or the trace would read as a process killed.
 * That note is left before the state says stopped: a thread that finds
 * tracing stopped and gives its chunk back finds the note too (left after,
 * while this thread's line waited on a full stderr, a program's last chunk
 * went without it). It is left only while tracing is on, and kept even if
 * another thread's stop comes first: a stop did happen, and a second stop
 * record (from another thread: a chunk has room for one, stop_said) costs
 * nothing where a missing one says killed.
 */
static void stop(struct mt_thread *t, const char *why, int err, bool say_err)
{
	uint64_t none = 0;
	int state = atomic_load(&mt_state);

	if (!t->base && (state == MT_ON || state == MT_STARTING))
		atomic_compare_exchange_strong(&unsaid_stop, &none, UNSAID | (uint32_t)err);
	if (mt_disable(why, say_err ? err : 0) && t->base)
		stop_record(t, err);
}

void mt_writer_stop(const char *why, int err)
{
	stop(&mt_self, why, err, false);
}

#ifdef MADV_POPULATE_WRITE
#define MT_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define MT_MADV_POPULATE_WRITE 23 /* the value in Linux's uapi headers */
#endif

/* A free extent's link, read with pread (the chunk is not mapped). Slow path. */
static bool read_link(void *ctx, uint64_t off, uint64_t *link)
{
	return pread(*(int *)ctx, link, sizeof(*link), (off_t)(off + MT_FREE_LINK_OFFSET)) ==
	       (ssize_t)sizeof(*link);
}

/*
 * Claims and maps a chunk of *size bytes (a ring may give one of another
 * size, at least min). On failure the file is left ending where it ended:
 * ext4 can extend a file in part before it says ENOSPC, and a part chunk
 * would read as a cut trace.
 */
static uint8_t *map_chunk(struct mt_thread *t, uint32_t *size_io, uint32_t min, uint64_t *off_out)
{
	struct stat st;
	uint64_t off;
	uint32_t size;
	uint8_t *p;
	int fd, r;

	fd = trace_fd_hold();
	if (fd < 0) {
		stop(t, "the trace file was closed, moved or replaced", -fd, true);
		return NULL;
	}
	off = mt_ring_claim(header, size_io, min, read_link, &fd);
	size = *size_io;
	if (past_size_limit(off + size)) {
		/* extending would raise SIGXFSZ, which kills by default */
		mt_fd_release(MT_FD_TRACE);
		stop(t, "the trace would pass the file size limit (ulimit -f)", EFBIG, false);
		return NULL;
	}
	r = posix_fallocate(fd, (off_t)off, size);
	if (r != 0) {
		if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > off &&
		    (uint64_t)st.st_size < off + size && ftruncate(fd, (off_t)off) < 0) {
			/* the reader copes with a part chunk too */
		}
		mt_fd_release(MT_FD_TRACE);
		stop(t, "cannot extend the trace file", r, true);
		return NULL;
	}
	/* the file reached off + size: a reader that finds it shorter knows it was cut
	 * (next_chunk cannot say: a writer killed between its claim and its
	 * fallocate leaves next_chunk past the end of a whole file) */
	for (uint64_t e = atomic_load((_Atomic uint64_t *)&header->extended);
	     e < off + size &&
	     !atomic_compare_exchange_weak((_Atomic uint64_t *)&header->extended, &e, off + size);)
		;
	p = mt_real.mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	r = errno;
	mt_fd_release(MT_FD_TRACE);
	if (p == MAP_FAILED) {
		stop(t, "cannot map the trace file", r, true);
		return NULL;
	}
	*off_out = off;
	mt_reach_note_chunk(off);
	return p;
}

/* Slow path: the current chunk is full (or there is none); claim the next. */
uint8_t *mt_writer_room_slow(size_t need)
{
	struct mt_thread *t = &mt_self;
	size_t hdr = sizeof(struct mt_chunk_header);
	struct mt_chunk_header *ch;
	uint32_t size = t->chunk_next ? t->chunk_next : MT_CHUNK_SIZE_FIRST, old_size;
	int saved = errno;
	uint64_t off;
	uint8_t *p, *old;

	if (atomic_load_explicit(&mt_state, memory_order_relaxed) != MT_ON ||
	    need > MT_CHUNK_SIZE_MAX - hdr - MT_STOP_RESERVE)
		return NULL;
	if (!t->tid)
		t->tid = (uint32_t)syscall(SYS_gettid);
	while (size < need + hdr + MT_STOP_RESERVE)
		size *= 2;
	/* the new chunk first: if there is none, the old one holds the stop record */
	p = map_chunk(t, &size, (uint32_t)(need + hdr + MT_STOP_RESERVE), &off);
	if (!p) {
		errno = saved;
		return NULL;
	}
	/* the pages writable at once: one call, not a write fault per page (Linux 5.14+;
	 * an older kernel says EINVAL and the pages fault in as they are written) */
	madvise(p, size, MT_MADV_POPULATE_WRITE);
	mapped_add((uintptr_t)p, size, t->tid);
	ch = (struct mt_chunk_header *)p;
	ch->instance = mt_instance;
	ch->pid = (uint32_t)mt_pid;
	ch->tid = t->tid;
	ch->seq = atomic_fetch_add((_Atomic uint64_t *)&header->next_seq, 1);
	ch->base_ticks = mt_now();
	ch->base_ns = mt_monotonic_ns();
	ch->size = size;
	atomic_store_explicit((_Atomic uint32_t *)&ch->magic, MT_CHUNK_MAGIC, memory_order_release);
	/* the switch: the old chunk stays whole until base is the new one's, and
	 * base is NULL only across these few stores (see release_chunk) */
	old = t->base;
	old_size = t->chunk_bytes;
	if (old)
		seal(old, t->pos);
	t->base = NULL;
	atomic_signal_fence(memory_order_seq_cst);
	t->pos = p + hdr;
	t->end = p + size - MT_STOP_RESERVE;
	t->chunk_bytes = size;
	t->chunk_off = off;
	t->chunk_next = size < MT_CHUNK_SIZE_MAX ? size * 2 : MT_CHUNK_SIZE_MAX;
	t->time = ch->base_ticks;
	t->addr = 0; /* 0, negated */
	t->stack = 0;
	atomic_signal_fence(memory_order_seq_cst);
	t->base = p;
	if (old) {
		mapped_remove((uintptr_t)old, old_size, t->tid);
		mt_real.munmap(old, old_size);
	}
	if (thread_key_ok && !t->key_set) {
		t->key_set = pthread_setspecific(thread_key, t) == 0;
	}
	errno = saved;
	return t->pos;
}

/*
 * A new process (fork, or a clone that ran no fork handler): the inherited
 * chunks are the parent's; unmap them all. The child's chunks start small.
 */
void mt_writer_after_fork(void)
{
	for (unsigned i = 0; i < MAPPED_SLOTS; i++) {
		uintptr_t v = atomic_exchange(&mapped[i], 0);
		if (v)
			mt_real.munmap((void *)(v & ~(uintptr_t)(MT_CHUNK_UNIT - 1)),
			               (v & (MT_CHUNK_UNIT - 1)) * MT_CHUNK_UNIT);
	}
	mt_self.base = mt_self.pos = mt_self.end = NULL;
	mt_self.chunk_next = 0;
	/* the parent's stop, said or not, is the parent's trace's */
	mt_self.stop_said = false;
	atomic_store(&unsaid_stop, 0);
	mt_self.tid = (uint32_t)syscall(SYS_gettid);
	mt_instance = mt_writer_new_instance();
}
