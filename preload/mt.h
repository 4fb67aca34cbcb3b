/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces of libmemtrace.so, shared by its files. Nothing here
 * is exported: the version script (memtrace.map) exports only the
 * interposed functions and memtrace_*.
 *
 * Contexts named in the comments of the capture side:
 *   hot path      inside an interposed function, tracing on, guard set
 *   slow path     the same, but allowed a system call (new chunk, new stack)
 *   init          the first interposed call or the constructor, one thread
 *   fork child    the pthread_atfork child handler, one thread
 *   sampler       the sampler thread
 */
#ifndef MT_PRELOAD_H
#define MT_PRELOAD_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "memtrace/trace-format.h"

#define MT_LIKELY(x)   __builtin_expect(!!(x), 1)
#define MT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MT_TLS         __thread __attribute__((tls_model("initial-exec")))
#define MT_HIDDEN      __attribute__((visibility("hidden")))
#define MT_EXPORT      __attribute__((visibility("default")))

/* The largest record a hot-path event can produce, with its type and length. */
#define MT_HOT_RECORD_MAX 96

/* Per-thread state. Lives in static TLS: usable from a thread's first instruction. */
struct mt_thread {
	uint8_t *pos;                 /* next free byte of the current chunk */
	uint8_t *end;                 /* end of the current chunk */
	uint8_t *base;                /* the chunk's mapping, NULL when none */
	uint64_t time;                /* time register: last record's time */
	uint64_t addr;                /* address register: last address written, negated */
	uint32_t stack;               /* stack register: the last short malloc's stack */
	uintptr_t stack_lo, stack_hi; /* the thread's stack; hi 1 when unknown */
	uintptr_t caller_ip, caller_sp, caller_bp; /* MT_MARK_CALLER: where the walk starts */
	uintptr_t again_ip, again_sp; /* the last walk's start, when again_id is its stack's id */
	struct mt_area *area;         /* per-thread scratch, mapped on first use */
	uint64_t chunk_off;           /* the chunk's offset in the file */
	uint32_t chunk_bytes;         /* the chunk's size */
	uint32_t chunk_next;          /* size of the next chunk; 0: the first */
	uint32_t tid;
	uint32_t again_id;   /* stacks.c: for mt_unwind_again; 0: none */
	int64_t sample_left; /* sampling.c: bytes to the next sampled one */
	uint64_t sample_rng; /* sampling.c: xorshift state; 0 until the first draw */
	bool guard;          /* inside memtrace: interposed calls pass through */
	bool key_set;        /* the thread-exit destructor is armed */
	bool stop_said; /* writer.c: this thread wrote the stop record (its chunk had room for one)
	                 */
};

extern MT_TLS struct mt_thread mt_self;

/*
 * Tracing state of the process. Once tracing is on, it lives in a page
 * mapped MADV_WIPEONFORK: a child made by any clone without CLONE_VM reads
 * MT_OFF_YET there, fork handlers or not, and its first interposed call
 * makes it a process instance of its own (init.c) before it writes a byte.
 */
enum mt_state { MT_OFF_YET = 0, MT_STARTING, MT_ON, MT_DISABLED };
struct mt_live {
	_Atomic int state;
};
MT_HIDDEN extern struct mt_live *mt_live;
#define mt_state (mt_live->state)

struct mt_config {
	char output[4096];         /* the path as configured, %p, %r, %h not yet expanded */
	unsigned depth;            /* frames per stack */
	unsigned interval_ms;      /* sampler period; 0 = no sampler */
	unsigned stack_table_bits; /* log2 of the stack table's slots */
	bool enable;               /* MEMTRACE_ENABLE=0: loaded, but every call passes through */
	bool trace_mmap;
	bool fast_unwind;  /* memtrace's own walker (unwind.c), else libunwind throughout */
	bool tsc;          /* MEMTRACE_CLOCK=monotonic: clock_gettime even where the TSC would do */
	bool python;       /* MEMTRACE_PYTHON=0: no Python frames (python.c) */
	bool reachability; /* MEMTRACE_REACHABILITY=0: no scan at exit (reach.c) */
	unsigned reach_ms; /* MEMTRACE_REACHABILITY_MS: the scan's most ms at exit; 0 = any */
	uint64_t sampling; /* MEMTRACE_SAMPLING: mean bytes between sampled blocks; 0 = all */
	uint64_t ring;     /* MEMTRACE_RING: bytes the trace's chunks keep to; 0 = it grows */
	uint64_t seed;     /* MEMTRACE_SEED: the sampling's random streams, when seed_set */
	bool seed_set;
};
extern struct mt_config mt_config;

/* Functions of the real allocator and libc, found with dlsym(RTLD_NEXT). */
struct mt_real {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*malloc_usable_size)(void *);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	void *(*mmap64)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	void *(*mremap)(void *, size_t, size_t, int, ...);
	void (*exit)(int) __attribute__((noreturn));
	void (*_exit)(int) __attribute__((noreturn));
	void (*_Exit)(int) __attribute__((noreturn));
	int (*libc_start_main)(int (*)(int, char **, char **), int, char **, void (*)(void),
	                       void (*)(void), void (*)(void), void *);
	/* exec.c: the execl functions build an argv and call these */
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execv)(const char *, char *const[]);
	int (*execvp)(const char *, char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*execveat)(int, const char *, char *const[], char *const[], int);
	/* fds.c: the descriptor functions it interposes */
	int (*close)(int);
	int (*close_range)(unsigned, unsigned, int);
	void (*closefrom)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
};
MT_HIDDEN extern struct mt_real mt_real;

/* real.c: resolve mt_real once; safe to call from any interposed function. */
MT_HIDDEN void mt_real_resolve(void);
/* bootstrap.c: the static arena that serves dlsym's calloc before calloc is known. */
MT_HIDDEN void *mt_bootstrap_alloc(size_t size);
#define MT_BOOTSTRAP_SIZE (16 * 1024)
MT_HIDDEN extern uint8_t mt_bootstrap_arena[MT_BOOTSTRAP_SIZE];
/* Inline: every free asks. */
static inline bool mt_bootstrap_owns(const void *p)
{
	return (uintptr_t)p - (uintptr_t)mt_bootstrap_arena < MT_BOOTSTRAP_SIZE;
}

/* precedence.c: false when the program's own malloc (in the executable or a
 * library before this one) takes precedence: then nothing reaches the hooks. */
MT_HIDDEN bool mt_malloc_is_ours(void);

/* init.c */
MT_HIDDEN void mt_init(void); /* init context; leaves mt_state ON or DISABLED */
/* Says why once and stops tracing; true for the one call that stopped it. */
MT_HIDDEN bool mt_disable(const char *why, int err);
MT_HIDDEN void mt_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
MT_HIDDEN uint64_t mt_monotonic_ns(void);
MT_HIDDEN extern bool mt_use_tsc;

#if defined(__x86_64__)
/* The time-stamp counter once every earlier instruction is done (mt_now says why). */
static inline uint64_t mt_rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
	return (uint64_t)hi << 32 | lo;
}
#endif

/*
 * Full capture with the TSC as the clock, the real malloc and free known:
 * set by mt_init before tracing is first on, never cleared (neither sampled
 * mode nor the clock changes within a process; a fork child keeps both).
 * The traced malloc and free test this one byte where they tested the three.
 */
MT_HIDDEN extern bool mt_plain;

/*
 * Now, in the trace's ticks (trace-format.h, enum mt_clock). lfence makes
 * the counter read wait until every earlier instruction is done: an
 * allocation's time is never before the loads that found its block free
 * (another thread's free of the same address has an earlier time), and a
 * free's never before the load that gave it its pointer (the block may have
 * come from another thread, whose allocation has an earlier time). Read
 * early, as a free once read it with no fence, the counter can be ahead of
 * the pointer's load: in capture-order's ping-pong, about one free in
 * 2.5 million was timed before the allocation another thread had handed
 * over, so the replay met a free of a block not yet made and then a block
 * live for ever. A later store (a free's giving the block back) cannot
 * become visible before the read retires. Hot path.
 */
static inline uint64_t mt_now(void)
{
#if defined(__x86_64__)
	if (MT_LIKELY(mt_use_tsc))
		return mt_rdtsc();
#endif
	return mt_monotonic_ns();
}

/* mt_now where mt_plain says the TSC is the clock: no test of it. */
static inline uint64_t mt_now_plain(void)
{
#if defined(__x86_64__)
	return mt_rdtsc();
#else
	return mt_monotonic_ns(); /* not reached: mt_plain is never set */
#endif
}

/*
 * fds.c: the descriptors memtrace keeps, at numbers far above the program's,
 * checked by device and inode before each use; the interposed close,
 * close_range, closefrom, dup2 and dup3 keep the program from taking them.
 * Any context; each keeps errno. A fork child keeps the parent's (its table
 * holds copies of the same files): nothing to do there.
 */
enum mt_fd_slot {
	MT_FD_TRACE,
	MT_FD_STATM,
	MT_FD_SMAPS,
	MT_FD_CGROUP,
	MT_FD_CG_CURRENT,
	MT_FD_CG_MAX,
	MT_FD_UNWIND_READ, /* libunwind's memory-check pipe (unwind-pipe.c) */
	MT_FD_UNWIND_WRITE,
	MT_FD_SLOTS
};
/* Moves fd, which memtrace just opened as the file `expect` describes (its
 * dev/ino, known beforehand: stat by path, or the trace's), to a high
 * close-on-exec number and remembers it in the slot (a slot already held is
 * dropped first); closes the original number if it still is that file. The
 * new number, or -errno; -ESTALE when fd is no longer that file (the
 * program's double close took it and opened another there): then fd is the
 * program's and left alone. */
struct stat;
MT_HIDDEN int mt_fd_keep(enum mt_fd_slot slot, int fd, const struct stat *expect);
/* The slot's number if it still is its file, else -1 (forgotten, not closed),
 * with the slot's lock held until mt_fd_release when it returns a
 * number: no dup2 of the program's can move the file away in between. Hold it
 * only around the calls that use the number (pread, fallocate, mmap). */
MT_HIDDEN int mt_fd_hold(enum mt_fd_slot slot);
MT_HIDDEN void mt_fd_release(enum mt_fd_slot slot);
/* Closes the slot's number if it still is its file, and forgets it. */
MT_HIDDEN void mt_fd_drop(enum mt_fd_slot slot);

/* unwind-pipe.c: memtrace's libunwind walks, counted so that libunwind's
 * pipe can move (a program's dup2 onto it) while none is under way. */
MT_HIDDEN void mt_unwind_pipe_enter(void);
MT_HIDDEN void mt_unwind_pipe_leave(void);
MT_HIDDEN bool mt_unwind_pipe_pause(void); /* false: cannot now (this thread walks) */
MT_HIDDEN void mt_unwind_pipe_renumber(int from, int to);
MT_HIDDEN void mt_unwind_pipe_resume(void);

/* config.c */
MT_HIDDEN void mt_config_load(void);

/* writer.c: the trace file and the per-thread chunks. */
MT_HIDDEN int mt_writer_create(pid_t pid);       /* root: a new file; 0 or -errno */
MT_HIDDEN int mt_writer_join(const char *token); /* exec'd: the parent's file */
MT_HIDDEN void mt_writer_export_token(void);     /* for exec'd descendants to join */
MT_HIDDEN uint32_t mt_writer_new_instance(void);
MT_HIDDEN void mt_writer_after_fork(void);           /* fork child: drop the parent's chunks */
MT_HIDDEN uint8_t *mt_writer_room_slow(size_t need); /* slow path: a new chunk */
MT_HIDDEN void mt_writer_thread_key(void);
MT_HIDDEN void mt_writer_drop_thread(void); /* tracing is off: give this thread's chunk back */
/* Tracing stops for good, said as mt_disable says it, with the stop record (a LOST record
 * whose count is err: the report's "tracing stopped", not "killed"). Between records. */
MT_HIDDEN void mt_writer_stop(const char *why, int err);
/* Tracing stopped: the stop record a thread without a chunk could not write, said here. */
MT_HIDDEN void mt_writer_stop_unsaid(void);
MT_HIDDEN bool mt_writer_foreign_said(void); /* our malloc is not used: said before in this run? */
/* The trace's descriptor, held (mt_fd_release(MT_FD_TRACE) after), and its inode; -errno. */
MT_HIDDEN int mt_writer_trace_hold(ino_t *ino);
MT_HIDDEN extern uint32_t mt_instance;
MT_HIDDEN extern pid_t mt_pid;

/*
 * Bytes at the end of every chunk that events never use: room for the stop
 * record (LOST, 13 bytes; writer.c) and for an EXIT written by a signal
 * handler that interrupted memtrace (at most 44; process.c).
 */
#define MT_STOP_RESERVE 64

/*
 * Returns room for a record of at most need bytes, or NULL (tracing off).
 * base is not tested: with no chunk, pos and end are NULL too, and a chunk's
 * pos and end are in its mapping before base is set (writer.c); base is NULL
 * alone only inside the writer's switch or release of a chunk, which no
 * record of this thread interrupts but a signal handler's, and that one
 * tests base itself (process.c).
 */
static inline uint8_t *mt_room(size_t need)
{
	struct mt_thread *t = &mt_self;
	if (MT_LIKELY((size_t)(t->end - t->pos) >= need)) {
		/* pos is NULL only with end (no chunk): the caller's test of NULL folds away */
		if (!t->pos)
			__builtin_unreachable();
		return t->pos;
	}
	return mt_writer_room_slow(need);
}

/*
 * Publishes a record whose payload was written at rec + 2 and ends at end
 * (payload under 128 bytes: one length byte). The type byte goes last, a
 * release store (a plain store on x86-64): a reader of a killed process's
 * chunk, or the ring's consumer reading it as it is written, sees either
 * the whole record or a zero type.
 */
static inline void mt_commit_small(uint8_t *rec, uint8_t type, uint8_t *end)
{
	rec[1] = (uint8_t)(end - rec - 2);
	atomic_store_explicit((_Atomic uint8_t *)rec, type, memory_order_release);
	mt_self.pos = end;
}

/*
 * A short record (trace-format.h): its fields at rec + 1 and ending at end,
 * no length. The type byte is a release store, as in mt_commit_small.
 */
static inline void mt_commit_short(uint8_t *rec, uint8_t type, uint8_t *end)
{
	atomic_store_explicit((_Atomic uint8_t *)rec, type, memory_order_release);
	mt_self.pos = end;
}

/* For records of any size: payload at rec + 4, length as 3 padded uleb128 bytes. */
static inline void mt_commit_large(uint8_t *rec, uint8_t type, uint8_t *end)
{
	size_t len = (size_t)(end - rec - 4);
	rec[1] = (uint8_t)(0x80 | (len & 0x7f));
	rec[2] = (uint8_t)(0x80 | ((len >> 7) & 0x7f));
	rec[3] = (uint8_t)((len >> 14) & 0x7f);
	atomic_store_explicit((_Atomic uint8_t *)rec, type, memory_order_release);
	mt_self.pos = end;
}

static inline uint8_t *mt_put_time(uint8_t *p, uint64_t now)
{
	p = mt_put_varint(p, mt_zigzag((int64_t)(now - mt_self.time)));
	mt_self.time = now;
	return p;
}

/*
 * The address register is kept negated: a thread's last block address in
 * its TLS would otherwise read as a pointer to that block to the
 * reachability scan (reach-scan.c), which cannot tell memtrace's TLS from
 * the program's; negated, it is in the kernel's half, and the step from it
 * is one add (a mask took a constant and an xor each way).
 */
static inline uint8_t *mt_put_addr(uint8_t *p, uint64_t addr)
{
	p = mt_put_varint(p, mt_zigzag((int64_t)(addr + mt_self.addr)));
	mt_self.addr = -addr;
	return p;
}

static inline uint8_t *mt_put_bytes(uint8_t *p, const void *s, size_t n)
{
	p = mt_put_varint(p, n);
	__builtin_memcpy(p, s, n);
	return p + n;
}

MT_HIDDEN extern uint32_t mt_module_gen; /* modules.c: bumped when one is unloaded */

/* python.c: Python frames of the allocating thread (docs/python.md). */
struct mt_area;
MT_HIDDEN extern bool mt_python_on;
/* A libpython is loaded whose symbols were not found yet (its dlopen not done). */
MT_HIDDEN extern bool mt_python_pending;
MT_HIDDEN void mt_python_detect(void);     /* init, and after a dlopen */
MT_HIDDEN void mt_python_after_fork(void); /* fork child: code ids start afresh */
/* Hot path: the frames into area->py and area->npy, their PYSTACK id into
 * area->pystack (written if new), mixed into *h; their number. */
MT_HIDDEN int mt_python_walk(struct mt_area *area, uint64_t *h);
/* munmap or mremap gives [addr, addr + len) back: its pages are no longer known readable. */
MT_HIDDEN void mt_python_forget(uintptr_t addr, size_t len);

/*
 * Per-thread scratch: the stack walker's last walk and a cache of stack ids,
 * so a hot stack costs no look-up in the shared table (whose slots are
 * spread over megabytes: a cache and TLB miss each, and two atomic counts).
 * The id cache starts with MT_ID_CACHE slots in the area; a thread whose
 * cache keeps missing (more hot stacks than slots, as bench churn's 20,000)
 * moves to a mapping 4 times larger, up to MT_ID_CACHE_MAX slots (256 KiB):
 * stacks.c, ids_grow. Its slots are in sets of MT_ID_WAYS, within one
 * cache line each (stacks.c, ids_find).
 */
#define MT_ID_CACHE      1024
#define MT_ID_CACHE_MAX  16384
#define MT_ID_WAYS       2
#define MT_PY_PAGE_CACHE 64
#define MT_PY_CODE_CACHE 256
struct mt_id_slot {
	uint64_t hash;
	uint64_t id;
};
struct mt_area {
	struct mt_walk *walk; /* unwind.c */
	bool in_fallback;     /* the last stack came from libunwind, into fallback */
	void *fallback[MT_MAX_DEPTH];
	struct mt_id_slot *ids; /* ids_first, or a mapping of ids_mask + 1 slots */
	uint32_t ids_mask;      /* slots - 1 */
	uint32_t ids_miss;      /* misses since the cache was last made larger */
	_Alignas(64) struct mt_id_slot ids_first[MT_ID_CACHE]; /* no set across two lines */
	/* python.c: the last walk's Python frames, each code id << 1 | entry, lasti + 1 */
	int npy;
	uint32_t py[2 * MT_MAX_PYFRAMES];
	uint32_t pystack, py_last_id; /* its PYSTACK id; the last new one's, for py_last_key */
	uint64_t py_last_key;
	/* python.c: pages this thread knows readable (number + 2), as of py_pages_gen */
	uint64_t py_pages_gen;
	uint64_t py_pages[MT_PY_PAGE_CACHE];
	/* python.c: code objects this thread met lately */
	struct mt_py_code_cache {
		uintptr_t code, file, name, table;
		int first_line;
		uint32_t id;
	} py_codes[MT_PY_CODE_CACHE];
};
MT_HIDDEN struct mt_area *mt_area_get(struct mt_thread *t); /* NULL if it cannot be mapped */
/* stacks.c: a new area's id cache (its own slots), and the larger one's mapping given back. */
MT_HIDDEN void mt_ids_init(struct mt_area *area);
MT_HIDDEN void mt_ids_release(struct mt_area *area);

/* unwind.c: the stack walker. */
/*
 * The registers of the code that called an interposed function, taken at
 * its entry: the stack walk starts there, so memtrace's own frames are never
 * walked. The library is built with frame pointers for this: the caller's
 * return address is at fp + 8, its stack pointer fp + 16, its rbp at fp.
 * Must be expanded in the interposed function itself (or in a helper
 * inlined into it); MT_CALLER_REGS takes them into variables, for a helper
 * out of line to mark.
 */
#define MT_CALLER_REGS(ip, sp, bp)                                                                 \
	do {                                                                                       \
		const uintptr_t *fp_ = __builtin_frame_address(0);                                 \
		(ip) = (uintptr_t)__builtin_return_address(0);                                     \
		(sp) = (uintptr_t)(fp_ + 2);                                                       \
		(bp) = fp_[0];                                                                     \
	} while (0)
#define MT_MARK_CALLER() MT_CALLER_REGS(mt_self.caller_ip, mt_self.caller_sp, mt_self.caller_bp)

/*
 * Hot path: the id of the stack of the last MT_MARK_CALLER, at most
 * mt_config.depth frames (mt_stack_current's long way): walked, its hash
 * (the stack table's key) and depth handed to mt_stack_found, a tail call,
 * so that the walk's frame is gone before the id's look-up. The frames
 * themselves are wanted only for a new stack: mt_unwind_frames copies
 * them, innermost first.
 */
MT_HIDDEN uint32_t mt_stack_walked(void);
MT_HIDDEN void mt_unwind_frames(void **frames, int n);
/* Hot path: the last stack's id (mt_self.again_id) if the caller's is that one again; else 0.
 * Only where the caller's ip and sp are again_ip and again_sp (mt_stack_current tests them). */
MT_HIDDEN uint32_t mt_unwind_again(void);
MT_HIDDEN void mt_area_release(struct mt_thread *t);
MT_HIDDEN void mt_unwind_init(void);
MT_HIDDEN void mt_unwind_forget(void); /* a module went away: its rules may be stale */

/*
 * The stack hash, folded from the outermost frame inwards so that a walk
 * that reuses the outer part of the previous one reuses its hash too.
 */
#define MT_HASH_SEED 0x9e3779b97f4a7c15u
static inline uint64_t mt_hash_fold(uint64_t h, uintptr_t ip)
{
	h = (h ^ ip) * 0xbf58476d1ce4e5b9u;
	return h ^ (h >> 31);
}

static inline uint64_t mt_hash_finish(uint64_t h, unsigned n)
{
	h = (h ^ n ^ ((uint64_t)mt_module_gen << 40)) * 0x94d049bb133111ebu;
	h ^= h >> 29;
	return h ? h : 1;
}

static inline uint64_t mt_hash_frames(void *const *f, int n)
{
	uint64_t h = MT_HASH_SEED;

	for (int i = n - 1; i >= 0; i--)
		h = mt_hash_fold(h, (uintptr_t)f[i]);
	return mt_hash_finish(h, (unsigned)n);
}

/* stacks.c: the process's stack table. */
/* The id of the stack mt_stack_walked just walked, of hash h and n frames. */
MT_HIDDEN uint32_t mt_stack_found(uint64_t h, int n);
/* Hot path: the id of the stack that called the interposed function. Inline:
 * the short way (mt_unwind_again) is most calls on a loop allocating from
 * one place, and its first tests are here, so that a call from elsewhere
 * (bench churn's every allocation) does not make that call. */
static inline uint32_t mt_stack_current(void)
{
	struct mt_thread *t = &mt_self;
	uint32_t id;

	if (MT_LIKELY(!mt_python_on) && t->caller_ip == t->again_ip &&
	    t->caller_sp == t->again_sp && (id = mt_unwind_again()))
		return id;
	return mt_stack_walked();
}
MT_HIDDEN int mt_stacks_init(void);
MT_HIDDEN int mt_stacks_after_fork(void);
/* Tracing stopped: the table is unmapped once no lookup is under way. Any context. */
MT_HIDDEN void mt_stacks_stop(void);

/* modules.c: the module map, written at start and whenever it changes. */
MT_HIDDEN void mt_modules_init(void);
MT_HIDDEN void mt_modules_check(void); /* slow path: anything loaded or unloaded? */
MT_HIDDEN void mt_modules_after_fork(void);
MT_HIDDEN extern uintptr_t mt_self_lo, mt_self_hi; /* libmemtrace.so's code */
static inline bool mt_in_self(uintptr_t ip)
{
	return ip >= mt_self_lo && ip < mt_self_hi;
}
/* The executable segment's range of the object holding addr. */
MT_HIDDEN bool mt_module_range(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);

/* process.c: the process record, fork and exit. */
MT_HIDDEN void mt_process_record(unsigned origin, uint32_t parent_instance, pid_t parent_pid);
/* interrupted: called from a signal handler that interrupted memtrace (guard was set) */
MT_HIDDEN void mt_process_exit_record(unsigned how, int status, bool interrupted);
/*
 * True in a child that runs on its parent's memory (vfork, CLONE_VM: the
 * children of posix_spawn, system, popen): this library's globals and the
 * calling thread's TLS are the parent's, so it must record nothing. A system
 * call (glibc caches no pid): for exit and exec paths only.
 */
MT_HIDDEN bool mt_process_in_parent_memory(void);
/* The exiting thread's stack pointer where the program's frames end: at
 * exit(), or after main returned; 0 until then. */
MT_HIDDEN extern uintptr_t mt_exit_sp;

/* sampler.c */
MT_HIDDEN void mt_sampler_start(void);  /* a process begins: its files, its thread */
MT_HIDDEN void mt_sampler_sample(void); /* one sample, from any context with the guard set */
MT_HIDDEN void mt_sampler_last(void);   /* the same, smaps_rollup read whatever the throttle */
MT_HIDDEN void
mt_sampler_forked(void); /* the parent's side of a fork: Pss read at the next sample */
/* The cgroup's memory now and its limit (0 when unknown or unlimited). */
MT_HIDDEN void mt_sampler_cgroup(uint64_t *current, uint64_t *max);

/*
 * sampling.c: sampled mode (docs/sampling.md). With MEMTRACE_SAMPLING unset
 * both inline tests answer true at once: every block is recorded.
 */
MT_HIDDEN int mt_sampling_init(void); /* init: the set of sampled addresses; 0 or -ENOMEM */
MT_HIDDEN extern uint64_t mt_sample_exact;
/*
 * The largest size the pass lets through, plus one: mt_sample_exact + 1 once
 * sampled mode is set up and the real functions are known, else 0 (full
 * capture, or not yet): one compare closes every pass.
 */
MT_HIDDEN extern uint64_t mt_pass_limit;
/* The set's homes: 2^MT_SAMPLE_SET_BITS, each with the count of its addresses.
 * Static, so that the bootstrap arena can mark its blocks' homes before init. */
#define MT_SAMPLE_SET_BITS 14
MT_HIDDEN extern _Atomic uint16_t mt_sample_homes[1 << MT_SAMPLE_SET_BITS];
/* Of a 16-byte aligned block, bits 46-59 of (p >> 4) * K: as well mixed, and one shift less. */
static inline size_t mt_sample_home(const void *p)
{
	return (size_t)((uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15u >> (64 - MT_SAMPLE_SET_BITS));
}
MT_HIDDEN bool mt_sample_draw(struct mt_thread *t, size_t size);
MT_HIDDEN bool mt_sample_keep(void *p);
MT_HIDDEN bool mt_sample_forget_slow(void *p);

/* Hot path: the block p of size bytes was allocated; true when it is to be recorded. */
static inline bool mt_sample_take(void *p, size_t size)
{
	struct mt_thread *t = &mt_self;

	if (MT_LIKELY(!mt_config.sampling))
		return true;
	if (size <= mt_sample_exact) {
		t->sample_left -= (int64_t)size;
		if (MT_LIKELY(t->sample_left > 0) || !mt_sample_draw(t, size))
			return false;
	}
	return mt_sample_keep(p);
}

/* Hot path, before the real free: true when p's allocation was recorded (so is its free). */
static inline bool mt_sample_forget(void *p)
{
	if (MT_LIKELY(!mt_config.sampling))
		return true;
	/* no recorded block has p's home: p's was not recorded (most frees) */
	if (MT_LIKELY(!atomic_load_explicit(&mt_sample_homes[mt_sample_home(p)],
	                                    memory_order_relaxed)))
		return false;
	return mt_sample_forget_slow(p);
}

/* reach.c: at a normal exit, the live blocks classified (REACH records). */
MT_HIDDEN void mt_reach_at_exit(void);
/* Slow path (writer.c): a chunk was claimed at off, for the copy to read back. */
MT_HIDDEN void mt_reach_note_chunk(uint64_t off);

/*
 * own.c: memtrace's own anonymous mappings (read-write, MAP_FAILED when
 * refused), which the exit's scan does not take for the program's roots
 * (mt_own_ranges, reach.h).
 */
MT_HIDDEN void *mt_own_map(size_t bytes);
MT_HIDDEN void mt_own_unmap(void *p, size_t bytes);
/* The heap figures' states (sampler.c): a program thread takes them at the
 * end of an interposed call, where it holds no malloc lock, when WANTED,
 * marks FRESH ones stale, and answers a PROBE (is the program idle?) by
 * clearing it; so the hot path tests one byte. */
enum {
	MT_HEAP_QUIET = 0,
	MT_HEAP_WANTED = 1,
	MT_HEAP_FRESH = 2,
	MT_HEAP_TAKING = 4,
	MT_HEAP_PROBE = 8
};
MT_HIDDEN extern _Atomic unsigned char mt_heap_ask;
MT_HIDDEN void mt_sampler_heap(void); /* slow side of mt_leave_hot */

/* Enters memtrace for one event, or says the call is to pass through. */
static inline __attribute__((always_inline)) bool mt_enter(void)
{
	if (MT_UNLIKELY(atomic_load_explicit(&mt_state, memory_order_relaxed) != MT_ON)) {
		if (mt_self.guard)
			return false;
		if (atomic_load(&mt_state) != MT_OFF_YET) {
			if (MT_UNLIKELY(mt_self.base) && atomic_load(&mt_state) == MT_DISABLED)
				mt_writer_drop_thread();
			return false;
		}
		mt_init();
		if (atomic_load(&mt_state) != MT_ON)
			return false;
	}
	if (mt_self.guard)
		return false;
	mt_self.guard = true;
	return true;
}

/*
 * Leaves memtrace after an event whose recording cannot have touched errno:
 * the hot path makes no system call, and every slow path it can take (a new
 * chunk, a new stack, a new unwind rule, libunwind) keeps errno itself. Saves
 * two calls to __errno_location on every malloc and free.
 */
static inline void mt_leave_hot(void)
{
	if (MT_UNLIKELY(atomic_load_explicit(&mt_heap_ask, memory_order_relaxed) &
	                (MT_HEAP_WANTED | MT_HEAP_FRESH | MT_HEAP_PROBE)))
		mt_sampler_heap();
	mt_self.guard = false;
}

/* The same, for realloc and the aligned allocators, which answer no heap-figure request. */
static inline void mt_leave_kept(void)
{
	mt_self.guard = false;
}

static inline void mt_leave(int err)
{
	mt_self.guard = false;
	errno = err;
}

/*
 * Sampled mode's common case (pass.c): a block under the exact size that
 * does not end the thread's countdown is counted down and passes through,
 * with no caller's registers, no record, the guard held around the real call
 * only (pass.c's pass_enter). mt_pass_open first: one
 * compare and a jump when the pass is closed. Not while this thread is
 * inside memtrace: memtrace's own blocks are not the program's bytes, and
 * counting them would leave the countdown short of its exponential law
 * after one that did not fit.
 */
static inline bool mt_pass_open(size_t size)
{
	return size < mt_pass_limit;
}

/* size below mt_pass_limit: the compare may be signed. */
static inline bool mt_pass_fits(size_t size)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	/* compared in memory: GCC otherwise loads it, and stores it back after mt_pass_count */
	bool fits;
	__asm__("cmpq %2, %1" : "=@ccg"(fits) : "m"(mt_self.sample_left), "r"(size));
	return fits && !mt_self.guard;
#else
	return mt_self.sample_left > (int64_t)size && !mt_self.guard;
#endif
}

static inline void mt_pass_count(size_t size)
{
	mt_self.sample_left -= (int64_t)size;
}

/*
 * A heap-figure request is pending (mt_leave_hot): malloc and calloc, whose
 * traced path answers it, take that path meanwhile. One load, test, jump.
 */
static inline bool mt_heap_asked(void)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	/* a relaxed load folded into its test, as GCC does not fold an atomic one */
	bool asked;
	__asm__("testb %2, %1"
	        : "=@ccnz"(asked)
	        : "m"(mt_heap_ask), "i"(MT_HEAP_WANTED | MT_HEAP_FRESH | MT_HEAP_PROBE));
	return asked;
#else
	return atomic_load_explicit(&mt_heap_ask, memory_order_relaxed) &
	       (MT_HEAP_WANTED | MT_HEAP_FRESH | MT_HEAP_PROBE);
#endif
}

/*
 * No recorded block has p's home: its free need not be recorded (most frees).
 * NULL and the bootstrap arena's blocks, whose homes are marked, never are.
 */
static inline bool mt_home_empty(const void *p)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	bool empty; /* as in mt_heap_asked */
	__asm__("cmpw $0, %1" : "=@ccz"(empty) : "m"(mt_sample_homes[mt_sample_home(p)]));
	return empty;
#else
	return !atomic_load_explicit(&mt_sample_homes[mt_sample_home(p)], memory_order_relaxed);
#endif
}

/*
 * malloc's record, a short one (trace-format.h): its stack as a step from
 * the chunk's stack register, or none at all when it is the register's (a
 * loop allocating from one place). mt_put_short_malloc writes it at rec,
 * from mt_room: the register is read after mt_room, which may have begun a
 * new chunk (and so a register at 0). Inline, as the interposed malloc's
 * whole recording (the call to a record writer and its saved registers cost
 * 13 instructions a malloc). Hot path, after the block is allocated; now is
 * mt_now's (or mt_now_plain's).
 */
static inline __attribute__((always_inline)) void
mt_put_short_malloc(uint8_t *rec, void *p, uint64_t size, uint64_t now, uint32_t stack)
{
	uint32_t last = mt_self.stack;
	uint8_t *q;

	mt_self.stack = stack;
	q = mt_put_time(rec + 1, now);
	q = mt_put_addr(q, (uintptr_t)p);
	q = mt_put_varint(q, size);
	if (stack == last) {
		mt_commit_short(rec, MT_REC_SHORT_MALLOC_SAME, q);
		return;
	}
	q = mt_put_varint(q, mt_zigzag((int64_t)stack - (int64_t)last));
	mt_commit_short(rec, MT_REC_SHORT_MALLOC, q);
}

static inline __attribute__((always_inline)) void mt_rec_short_malloc(void *p, uint64_t size,
                                                                      uint64_t now)
{
	uint32_t stack = mt_stack_current();
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);

	if (MT_LIKELY(rec))
		mt_put_short_malloc(rec, p, size, now, stack);
}

/*
 * free's record, a short one (trace-format.h): inline, as the interposed
 * free's whole recording (a call and its saved registers were a fifth of
 * it). Hot path, before the block is given back; now is mt_now's (or
 * mt_now_plain's).
 */
static inline __attribute__((always_inline)) void mt_put_short_free(uint8_t *rec, void *p,
                                                                    uint64_t now)
{
	uint8_t *q = mt_put_time(rec + 1, now);

	q = mt_put_addr(q, (uintptr_t)p);
	mt_commit_short(rec, MT_REC_SHORT_FREE, q);
}

static inline __attribute__((always_inline)) void mt_rec_short_free(void *p, uint64_t now)
{
	uint8_t *rec = mt_room(MT_HOT_RECORD_MAX);

	if (MT_LIKELY(rec))
		mt_put_short_free(rec, p, now);
}

/*
 * hooks.c (free's: traced-free.c): the traced halves of the malloc family,
 * which pass.c's exported functions jump to (a tail call: the program's
 * return address and frame pointer stay where MT_MARK_CALLER finds them).
 */
MT_HIDDEN void *mt_traced_malloc(size_t size);
MT_HIDDEN void mt_traced_free(void *p);
MT_HIDDEN void *mt_traced_calloc(size_t n, size_t size);
MT_HIDDEN void *mt_traced_realloc(void *old, size_t size);
MT_HIDDEN void *mt_traced_reallocarray(void *old, size_t n, size_t size);
MT_HIDDEN int mt_traced_posix_memalign(void **out, size_t align, size_t size);
MT_HIDDEN void *mt_traced_aligned_alloc(size_t align, size_t size);
MT_HIDDEN void *mt_traced_memalign(size_t align, size_t size);
/* A call the pass let through failed: recorded as in full mode; NULL, error. Jumped to. */
MT_HIDDEN void *mt_pass_failed(unsigned fn, size_t size, int error);
MT_HIDDEN int mt_pass_failed_r(unsigned fn, size_t size, int error);

/* events.c: record writers used by the interposed functions (hot path). */
MT_HIDDEN void mt_rec_alloc(unsigned fn, void *p, size_t size);
MT_HIDDEN void mt_rec_realloc(unsigned fn, uint64_t t0, void *old, void *p, size_t size);
MT_HIDDEN void mt_rec_fail(unsigned fn, size_t size, int err);
/* The same for events of an explicit memory kind (CUDA); _stack: a stack taken earlier. */
MT_HIDDEN void mt_rec_alloc_kind(unsigned fn, unsigned kind, void *p, uint64_t size);
MT_HIDDEN void mt_rec_alloc_stack(unsigned fn, unsigned kind, void *p, uint64_t size,
                                  uint32_t stack);
MT_HIDDEN void mt_rec_free_kind(unsigned fn, unsigned kind, void *p);
MT_HIDDEN void mt_rec_fail_kind(unsigned fn, unsigned kind, uint64_t size, int err,
                                uint64_t device_free, uint64_t device_total);
MT_HIDDEN void mt_rec_fail_stack(unsigned fn, unsigned kind, uint64_t size, int err,
                                 uint64_t device_free, uint64_t device_total, uint32_t stack);
MT_HIDDEN void mt_rec_mmap(unsigned fn, void *p, size_t len, int prot, int flags);
MT_HIDDEN void mt_rec_munmap(void *p, size_t len);
MT_HIDDEN void mt_rec_mremap(uint64_t t0, void *old, size_t old_len, void *p, size_t len);
MT_HIDDEN void mt_rec_lost(unsigned reason, uint64_t count);

#endif
