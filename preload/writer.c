/* SPDX-License-Identifier: MIT */
/*
 * The trace file and the per-thread chunks (format: docs/trace-format.md).
 *
 * Every thread writes its own chunk of the file, mapped MAP_SHARED, so the
 * hot path is a bounds check and plain stores. A new chunk costs one atomic
 * add on the shared file header (all processes of the run map that same
 * page), a posix_fallocate, so that a full disk is an error here and never a
 * SIGBUS later, and an mmap. A full chunk is unmapped at once: its pages stay
 * in the page cache, not in the program's RSS.
 *
 * May not: take a lock, allocate with malloc, or change errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mt.h"

uint32_t mt_instance;
pid_t mt_pid;

static int fd = -1;
static struct mt_file_header *header;
static uint32_t chunk_size;
static char path[PATH_MAX];
static pthread_key_t thread_key;
static bool thread_key_ok;

/*
 * Chunks mapped by this process's threads, so that a forked child can unmap
 * the ones it inherited (its threads are gone, and writing there would tear
 * the parent's records). A slot holds a mapping's address or 0.
 */
#define MAPPED_SLOTS 1024
static _Atomic uintptr_t mapped[MAPPED_SLOTS];

static void mapped_add(uintptr_t p, uint32_t hint)
{
	for (unsigned i = 0; i < MAPPED_SLOTS; i++) {
		uintptr_t zero = 0;
		unsigned s = (hint + i) % MAPPED_SLOTS;
		if (atomic_compare_exchange_strong(&mapped[s], &zero, p))
			return;
	}
	/* more than MAPPED_SLOTS live threads: a forked child keeps that mapping, harmlessly */
}

static void mapped_remove(uintptr_t p, uint32_t hint)
{
	for (unsigned i = 0; i < MAPPED_SLOTS; i++) {
		uintptr_t want = p;
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

/* path = MEMTRACE_OUTPUT with %p replaced by the pid, made absolute. */
static int resolve_path(pid_t pid)
{
	char expanded[PATH_MAX];
	size_t n = 0;

	for (const char *s = mt_config.output; *s && n < sizeof(expanded) - 24; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			n += (size_t)snprintf(expanded + n, sizeof(expanded) - n, "%d", (int)pid);
			s++;
		} else {
			expanded[n++] = *s;
		}
	}
	expanded[n] = 0;
	if (expanded[0] == '/') {
		memcpy(path, expanded, n + 1);
		return 0;
	}
	if (!getcwd(path, sizeof(path) - 1))
		return -errno;
	if (strlen(path) + 1 + n + 8 >= sizeof(path))
		return -ENAMETOOLONG;
	strcat(path, "/");
	strcat(path, expanded);
	return 0;
}

static int map_header(void)
{
	void *p = mt_real.mmap(NULL, MT_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	header = p;
	return 0;
}

/*
 * Root process: a new file. An earlier trace of that name is kept as
 * NAME.old; O_EXCL|O_NOFOLLOW means nothing planted at the name (a symlink
 * included) is ever written through.
 */
int mt_writer_create(pid_t pid)
{
	char old[PATH_MAX + 8];
	struct timespec rt;
	int r, tries;

	r = resolve_path(pid);
	if (r < 0) {
		mt_say("cannot resolve the trace path %s: %s; tracing is off", mt_config.output,
		       strerror(-r));
		return r;
	}
	snprintf(old, sizeof(old), "%s.old", path);
	for (tries = 0; tries < 2; tries++) {
		struct stat st;
		if (lstat(path, &st) == 0 && rename(path, old) < 0)
			break;
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		r = -errno;
		mt_say("cannot create the trace %s: %s; tracing is off", path, strerror(-r));
		return r;
	}
	chunk_size = MT_CHUNK_SIZE_DEFAULT;
	r = past_size_limit(MT_HEADER_SIZE) ? EFBIG : posix_fallocate(fd, 0, MT_HEADER_SIZE);
	if (r == 0)
		r = -map_header();
	if (r != 0) {
		mt_say("cannot write the trace %s: %s; tracing is off", path, strerror(r));
		close(fd);
		fd = -1;
		return -r;
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	header->version = MT_FORMAT_VERSION;
	header->header_size = MT_HEADER_SIZE;
	header->chunk_size = chunk_size;
	header->byte_order = MT_BYTE_ORDER_MARK;
	header->next_chunk = MT_HEADER_SIZE;
	header->next_instance = 0;
	header->created_monotonic = mt_monotonic_ns();
	header->clock = mt_use_tsc ? MT_CLOCK_TSC : MT_CLOCK_MONOTONIC_NS;
	header->created_realtime = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	header->root_pid = (uint32_t)pid;
	atomic_signal_fence(memory_order_release);
	memcpy(header->magic, MT_FILE_MAGIC, 8);
	return 0;
}

/* Tells exec'd descendants which file to join: "dev:ino:path". */
void mt_writer_export_token(void)
{
	char token[PATH_MAX + 64];
	struct stat st;

	if (fstat(fd, &st) < 0)
		return;
	snprintf(token, sizeof(token), "%llu:%llu:%s", (unsigned long long)st.st_dev,
	         (unsigned long long)st.st_ino, path);
	setenv("MEMTRACE_TREE", token, 1);
}

/*
 * An exec'd program below a traced process joins the trace named in the
 * token, if that name still is the same file with a header we can write.
 * Otherwise the caller starts a trace of its own.
 */
int mt_writer_join(const char *token)
{
	unsigned long long dev, ino;
	struct stat st;
	int used = 0;

	if (sscanf(token, "%llu:%llu:%n", &dev, &ino, &used) != 2 || !used)
		return -EINVAL;
	if (strlen(token + used) >= sizeof(path))
		return -ENAMETOOLONG;
	strcpy(path, token + used);
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino || map_header() < 0)
		goto fail;
	if (memcmp(header->magic, MT_FILE_MAGIC, 8) || header->version != MT_FORMAT_VERSION ||
	    header->clock != (mt_use_tsc ? MT_CLOCK_TSC : MT_CLOCK_MONOTONIC_NS) ||
	    header->chunk_size < 4096 || header->chunk_size % 4096) {
		mt_real.munmap(header, MT_HEADER_SIZE);
		header = NULL;
		goto fail;
	}
	chunk_size = header->chunk_size;
	return 0;
fail:
	close(fd);
	fd = -1;
	return -EINVAL;
}

uint32_t mt_writer_new_instance(void)
{
	return (uint32_t)atomic_fetch_add((_Atomic uint64_t *)&header->next_instance, 1) + 1;
}

static void release_chunk(struct mt_thread *t)
{
	if (!t->base)
		return;
	mapped_remove((uintptr_t)t->base, t->tid);
	mt_real.munmap(t->base, chunk_size);
	t->base = t->pos = t->end = NULL;
}

/* Thread exit (pthread key destructor): give the chunk's mapping back. */
static void thread_gone(void *arg)
{
	struct mt_thread *t = &mt_self;
	bool guard = t->guard;

	(void)arg;
	t->guard = true;
	release_chunk(t);
	mt_area_release(t);
	t->key_set = false;
	t->guard = guard;
}

void mt_writer_thread_key(void)
{
	thread_key_ok = pthread_key_create(&thread_key, thread_gone) == 0;
}

#ifdef MADV_POPULATE_WRITE
#define MT_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define MT_MADV_POPULATE_WRITE 23 /* the value in Linux's uapi headers */
#endif

/* Slow path: the current chunk is full (or there is none); claim the next. */
uint8_t *mt_writer_room_slow(size_t need)
{
	struct mt_thread *t = &mt_self;
	struct mt_chunk_header *ch;
	int saved = errno;
	uint64_t off;
	uint8_t *p;
	int r;

	if (atomic_load_explicit(&mt_state, memory_order_relaxed) != MT_ON ||
	    need > chunk_size - sizeof(*ch))
		return NULL;
	if (!t->tid)
		t->tid = (uint32_t)syscall(SYS_gettid);
	release_chunk(t);
	off = atomic_fetch_add((_Atomic uint64_t *)&header->next_chunk, chunk_size);
	if (past_size_limit(off + chunk_size)) {
		/* extending would raise SIGXFSZ, which kills by default */
		mt_disable("the trace would pass the file size limit (ulimit -f)", 0);
		errno = saved;
		return NULL;
	}
	r = posix_fallocate(fd, (off_t)off, chunk_size);
	if (r != 0) {
		mt_disable("cannot extend the trace file", r);
		errno = saved;
		return NULL;
	}
	p = mt_real.mmap(NULL, chunk_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	                 (off_t)off);
	if (p == MAP_FAILED) {
		mt_disable("cannot map the trace file", errno);
		errno = saved;
		return NULL;
	}
	/* the pages writable at once: one call, not a write fault per page (Linux 5.14+;
	 * an older kernel says EINVAL and the pages fault in as they are written) */
	madvise(p, chunk_size, MT_MADV_POPULATE_WRITE);
	mapped_add((uintptr_t)p, t->tid);
	ch = (struct mt_chunk_header *)p;
	ch->instance = mt_instance;
	ch->pid = (uint32_t)mt_pid;
	ch->tid = t->tid;
	ch->base_ticks = mt_now();
	ch->base_ns = mt_monotonic_ns();
	atomic_signal_fence(memory_order_release);
	ch->magic = MT_CHUNK_MAGIC;
	t->base = p;
	t->pos = p + sizeof(*ch);
	t->end = p + chunk_size;
	t->time = ch->base_ticks;
	t->addr = 0;
	if (thread_key_ok && !t->key_set) {
		t->key_set = pthread_setspecific(thread_key, t) == 0;
	}
	errno = saved;
	return t->pos;
}

/* Fork child: the inherited chunks are the parent's; unmap them all. */
void mt_writer_after_fork(void)
{
	for (unsigned i = 0; i < MAPPED_SLOTS; i++) {
		uintptr_t p = atomic_exchange(&mapped[i], 0);
		if (p)
			mt_real.munmap((void *)p, chunk_size);
	}
	mt_self.base = mt_self.pos = mt_self.end = NULL;
	mt_self.tid = (uint32_t)syscall(SYS_gettid);
	mt_instance = mt_writer_new_instance();
}
