/* SPDX-License-Identifier: MIT */
/*
 * The memtrace trace format: the one contract between the capture side
 * (preload/, cupti/) and the analyzer. docs/trace-format.md describes the
 * same bytes in prose; the two change together, and any change that an old
 * reader could misread bumps MT_FORMAT_VERSION.
 *
 * This header may be included by the preload library, so it holds only
 * constants, plain structs and static inline helpers: no allocation, no I/O.
 *
 * Layout: a 4096-byte file header, then chunks, each a multiple of 4096
 * bytes that says its own size. Every thread of every process of one traced
 * run claims chunks with one atomic add on the header's next_chunk (a
 * thread's first chunk is small, each next one twice the last, up to
 * MT_CHUNK_SIZE_MAX) and fills them with records. A record is
 *
 *     u8 type | uleb128 payload length | payload
 *
 * except the short records of the hot path (malloc and free: a type byte
 * and their fields, no length), and its type byte is stored last, so a zero
 * type means "nothing more in this chunk": what a killed process leaves
 * behind stays readable.
 */
#ifndef MEMTRACE_TRACE_FORMAT_H
#define MEMTRACE_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* 3 added the short records; 4 the chunk seq, the header's ring fields and the ring's records */
#define MT_FILE_MAGIC       "MEMTRACE" /* 8 bytes, no terminator in the file */
#define MT_FORMAT_VERSION   4
#define MT_FORMAT_OLDEST    2 /* the oldest version a reader of this one reads */
#define MT_HEADER_SIZE      4096u
#define MT_CHUNK_UNIT       4096u          /* chunks start and end on multiples of it */
#define MT_CHUNK_SIZE_FIRST MT_CHUNK_UNIT  /* a thread's first chunk */
#define MT_CHUNK_SIZE_MAX   (256u * 1024u) /* a thread's chunks double up to this */
#define MT_CHUNK_MAGIC      0x4b43544du    /* "MTCK" little-endian */
#define MT_BYTE_ORDER_MARK  0x01020304u

/* The file header. All fields little-endian (x86_64 and aarch64 only). */
struct mt_file_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;       /* offset of the first chunk */
	uint32_t chunk_unit;        /* MT_CHUNK_UNIT: chunk offsets and sizes are multiples */
	uint32_t byte_order;        /* MT_BYTE_ORDER_MARK as written */
	uint64_t next_chunk;        /* atomic: offset of the next unclaimed chunk */
	uint64_t next_instance;     /* atomic: last process instance id handed out */
	uint64_t created_realtime;  /* ns since the epoch, when the file was made */
	uint64_t created_monotonic; /* CLOCK_MONOTONIC ns at the same moment */
	uint32_t root_pid;
	uint32_t clock; /* enum mt_clock: the unit of record times */
	uint32_t flags; /* atomic: enum mt_header_flag */
	uint32_t reserved;
	/* atomic: the end of the file as writers extended it (each raises it after
	 * its posix_fallocate); a file shorter than this was cut */
	uint64_t extended;
	/* version 4 (before it the rest of the page is zero): */
	uint64_t next_seq; /* atomic: the sequence number of the next chunk claimed */
	/* the ring (docs/architecture.md): 0 none; else the bytes of chunks the file
	 * keeps to, reusing extents the consumer gave back through free_head */
	uint64_t ring_size;
	uint64_t ring_overflow; /* atomic: bytes writers claimed past ring_size */
	/* atomic: per size class (4 KiB << i) the free extents, a Treiber stack:
	 * (tag << 32) | (unit + 1), unit the extent's offset from header_size in
	 * chunk units, 0 empty; each free extent holds the next one's unit + 1 at
	 * its byte 8 (mt_free_link), the rest of it zero */
	uint64_t free_head[7];
};

/* The sizes MEMTRACE_RING and memtrace run --ring take (rounded down to MT_CHUNK_SIZE_MAX). */
#define MT_RING_MIN (1ull << 20)
#define MT_RING_MAX (1ull << 40)
/* Size classes of the ring's free extents: MT_CHUNK_SIZE_FIRST << i up to MT_CHUNK_SIZE_MAX. */
#define MT_RING_CLASSES 7
/* Where a free extent keeps its link: zero magic and size, so a reader steps over it. */
#define MT_FREE_LINK_OFFSET 8

/* Run-wide facts the processes of a run share through the header. */
enum mt_header_flag {
	/* a process of the run found its own malloc before memtrace's and said so on
	 * stderr: the run's later ones stay quiet */
	MT_HEADER_FOREIGN_MALLOC_SAID = 1,
};

/*
 * Record times are ticks of one clock for the whole file. With the TSC they
 * order events of all threads and processes exactly and cost a third of a
 * clock_gettime; each chunk header pairs its first tick with CLOCK_MONOTONIC
 * ns, from which a reader converts ticks to time.
 */
enum mt_clock {
	MT_CLOCK_MONOTONIC_NS = 0, /* ticks are CLOCK_MONOTONIC ns */
	MT_CLOCK_TSC = 1,          /* x86 time-stamp counter, invariant and synchronized */
};

/*
 * Each chunk starts with this; records follow it immediately. A chunk whose
 * magic is 0 was claimed by a writer that never wrote it (killed, or its
 * disk full): its size is unknown, and a reader steps over it one
 * MT_CHUNK_UNIT at a time to the next chunk.
 */
struct mt_chunk_header {
	uint32_t magic;    /* MT_CHUNK_MAGIC once the chunk is in use, else 0 */
	uint32_t instance; /* process instance (see MT_REC_PROCESS) */
	uint32_t pid;
	uint32_t tid;
	uint64_t base_ticks; /* the time register's start */
	uint64_t base_ns;    /* CLOCK_MONOTONIC ns at base_ticks */
	uint32_t size;       /* bytes of the chunk, this header included */
	/* CRC32C (crc32c.h) of the record bytes: from the end of this header to the
	 * end of the data (the first zero type byte, or the chunk's end). Written
	 * when the writer gives the chunk up (full, or its thread ended); 0 while
	 * it is in use, so a killed or running writer's last chunk is not checked */
	uint32_t crc32c;
	/* version 4: the claim's place in the run (header next_seq): a thread's
	 * chunks in the order it wrote them, wherever the ring put them */
	uint64_t seq;
};
#define MT_CHUNK_HEADER_V3 40u /* a chunk header of versions 2 and 3: no seq */

/*
 * Python frames of a PYSTACK record: at most this many, each written as
 * (code id << 1 | MT_PYFRAME_ENTRY) and lasti + 1.
 */
#define MT_MAX_PYFRAMES  128
#define MT_PYFRAME_ENTRY 1u
/* A PYCODE record keeps at most this much of a code object's line table and names. */
#define MT_PYCODE_MAX_LINETABLE 8192
#define MT_PYCODE_MAX_NAME      512

/* Record types. 0 is never a record: it ends a chunk's data. */
enum mt_record_type {
	MT_REC_END_OF_DATA = 0,
	MT_REC_PROCESS = 1,     /* a process instance starts */
	MT_REC_MODULE = 2,      /* a loaded ELF object */
	MT_REC_MODULE_GONE = 3, /* a module was unloaded */
	MT_REC_STACK = 4,       /* an interned call stack */
	MT_REC_ALLOC = 5,
	MT_REC_FREE = 6,
	MT_REC_REALLOC = 7,
	MT_REC_FAIL = 8, /* an allocation that returned no memory */
	MT_REC_MMAP = 9,
	MT_REC_MUNMAP = 10,
	MT_REC_MREMAP = 11,
	MT_REC_SAMPLE = 12,       /* the sampler thread's periodic figures */
	MT_REC_EXIT = 13,         /* the process ended cleanly */
	MT_REC_LOST = 14,         /* capture problems the analyzer must know of */
	MT_REC_MARK = 15,         /* memtrace_mark(): a point the program named */
	MT_REC_EXEC = 16,         /* the process calls an exec function: it may become untraced */
	MT_REC_PYCODE = 17,       /* a Python code object that PYSTACK records' frames name */
	MT_REC_PYSTACK = 18,      /* an interned Python stack that STACK records name */
	MT_REC_REACH = 19,        /* the exit's reachability scan: its moment and figures */
	MT_REC_REACH_BLOCKS = 20, /* the addresses of the blocks of one reachability class */
	/*
	 * Short records (format 3): the type byte and the fields, no length, so
	 * a malloc and a free cost a few bytes. A reader reads them as ALLOC of
	 * malloc and FREE of free. Their stack is on the chunk's stack register.
	 */
	MT_REC_SHORT_MALLOC = 21,      /* dt, addr, size, zigzag stack - register */
	MT_REC_SHORT_MALLOC_SAME = 22, /* dt, addr, size: the register's stack */
	MT_REC_SHORT_FREE = 23,        /* dt, addr */
	/* format 4: written by the ring's consumer (memtrace run --ring) in chunks of instance 0 */
	MT_REC_KEYFRAME = 24,    /* a process instance's figures at a moment; parts follow */
	MT_REC_KEY_THREADS = 25, /* where each thread's records resume after it */
	MT_REC_KEY_BLOCKS = 26,  /* live blocks of the keyframe */
	MT_REC_KEY_RANGES = 27,  /* live anonymous mappings of the keyframe */
	MT_REC_KEY_STACKS = 28,  /* per-stack totals and peak figures of the keyframe */
	MT_REC_KEY_END = 29,     /* the keyframe is whole */
	MT_REC_ROUND = 30,       /* the keyframes of one round are whole */
	MT_REC_COPY = 31,        /* the records that follow are an instance's, copied */
	MT_REC_TYPE_COUNT
};

static inline int mt_record_is_short(unsigned type)
{
	return type >= MT_REC_SHORT_MALLOC && type <= MT_REC_SHORT_FREE;
}

/* The varints a short record's type byte is followed by. */
static inline unsigned mt_short_fields(unsigned type)
{
	return type == MT_REC_SHORT_MALLOC ? 4 : type == MT_REC_SHORT_MALLOC_SAME ? 3 : 2;
}

/*
 * The bytes of the whole record at p: a short record's type byte and
 * varints, another's type, length and payload. For a writer stepping over
 * a record of its own that it published (preload/process.c: an _exit from
 * a signal handler); a reader of untrusted bytes bounds every read itself
 * (analyzer/reader.c).
 */
static inline size_t mt_record_span(const uint8_t *p)
{
	if (mt_record_is_short(*p)) {
		const uint8_t *q = p + 1;

		for (unsigned f = mt_short_fields(*p); f; f--)
			while (*q++ & 0x80)
				;
		return (size_t)(q - p);
	}
	if (!(p[1] & 0x80))
		return (size_t)p[1] + 2;
	return ((size_t)(p[1] & 0x7f) | (size_t)(p[2] & 0x7f) << 7 | (size_t)p[3] << 14) + 4;
}

/*
 * Which function made an event. For the malloc family and mmap the memory
 * kind follows from it; records of the CUDA functions carry their kind.
 */
enum mt_fn {
	MT_FN_MALLOC = 1,
	MT_FN_CALLOC = 2,
	MT_FN_REALLOC = 3,
	MT_FN_REALLOCARRAY = 4,
	MT_FN_POSIX_MEMALIGN = 5,
	MT_FN_ALIGNED_ALLOC = 6,
	MT_FN_MEMALIGN = 7,
	MT_FN_VALLOC = 8,
	MT_FN_PVALLOC = 9,
	MT_FN_FREE = 10,
	MT_FN_MMAP = 11,
	MT_FN_MUNMAP = 12,
	MT_FN_MREMAP = 13,
	/* the CUDA runtime, interposed in libcudart */
	MT_FN_CUDA_MALLOC = 32,
	MT_FN_CUDA_FREE = 33,
	MT_FN_CUDA_MALLOC_ASYNC = 34,
	MT_FN_CUDA_FREE_ASYNC = 35,
	MT_FN_CUDA_MALLOC_FROM_POOL_ASYNC = 36,
	MT_FN_CUDA_MALLOC_MANAGED = 37,
	MT_FN_CUDA_MALLOC_PITCH = 38,
	MT_FN_CUDA_MALLOC_3D = 39,
	MT_FN_CUDA_MALLOC_HOST = 40,
	MT_FN_CUDA_HOST_ALLOC = 41,
	MT_FN_CUDA_FREE_HOST = 42,
	MT_FN_CUDA_HOST_REGISTER = 43,
	MT_FN_CUDA_HOST_UNREGISTER = 44,
	/* the CUDA driver, seen through CUPTI callbacks (cupti/) */
	MT_FN_CU_MEM_ALLOC = 64,
	MT_FN_CU_MEM_FREE = 65,
	MT_FN_CU_MEM_ALLOC_PITCH = 66,
	MT_FN_CU_MEM_ALLOC_MANAGED = 67,
	MT_FN_CU_MEM_HOST_ALLOC = 68,
	MT_FN_CU_MEM_FREE_HOST = 69,
	MT_FN_CU_MEM_ALLOC_ASYNC = 70,
	MT_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC = 71,
	MT_FN_CU_MEM_FREE_ASYNC = 72,
	/* the virtual-memory API: physical memory is made by cuMemCreate and given
	 * back by cuMemRelease (its "address" is the allocation handle); cuMemMap
	 * and cuMemUnmap only place it in address space and are not counted */
	MT_FN_CU_MEM_CREATE = 73,
	MT_FN_CU_MEM_RELEASE = 74,
	MT_FN_COUNT
};

/* Memory kinds are accounted apart; bytes of two kinds are never added. */
#define MT_MAX_CUDA_DEVICES 16
enum mt_kind {
	MT_KIND_HOST = 0,         /* the malloc heap */
	MT_KIND_MMAP = 1,         /* anonymous mappings made by the program */
	MT_KIND_CUDA_HOST = 2,    /* pinned host memory (also RAM) */
	MT_KIND_CUDA_MANAGED = 3, /* unified (managed) memory */
	MT_KIND_CUDA_DEVICE = 16, /* cuda:N is MT_KIND_CUDA_DEVICE + N */
	MT_KIND_COUNT = MT_KIND_CUDA_DEVICE + MT_MAX_CUDA_DEVICES
};

/* The kind of a malloc-family or mmap event, which records leave implicit. */
static inline enum mt_kind mt_fn_kind(unsigned fn)
{
	return fn >= MT_FN_MMAP && fn <= MT_FN_MREMAP ? MT_KIND_MMAP : MT_KIND_HOST;
}

/* How a process instance came to be (MT_REC_PROCESS origin). */
enum mt_origin {
	MT_ORIGIN_ROOT = 0, /* first traced process of the file */
	MT_ORIGIN_FORK = 1, /* forked from a traced process, same image */
	MT_ORIGIN_EXEC = 2, /* a program that joined the file after exec */
};

/* How a process ended (MT_REC_EXIT how). */
enum mt_exit_how {
	MT_EXIT_MAIN_RETURN = 1, /* main returned */
	MT_EXIT_EXIT = 2,        /* exit() */
	MT_EXIT_UNDERSCORE = 3,  /* _exit() or _Exit(): no exit handlers ran */
	MT_EXIT_UNKNOWN = 4,     /* destructors ran, status unknown */
};

/*
 * Sampled mode (PROCESS sampling, docs/sampling.md): a process with interval
 * T > 0 recorded blocks of the malloc family of more than this many bytes
 * always, and a smaller one with probability 1 - exp(-size / T).
 */
#define MT_SAMPLING_EXACT_FACTOR 5
#define MT_SAMPLING_MAX          (1u << 30) /* the largest interval: a weight fits 32 bits */
static inline uint64_t mt_sampling_exact_above(uint64_t interval)
{
	return interval * MT_SAMPLING_EXACT_FACTOR;
}

/* MT_REC_REACH status. */
enum mt_reach_status {
	MT_REACH_DONE = 0,
	MT_REACH_OFF = 1,       /* MEMTRACE_REACHABILITY=0 */
	MT_REACH_NO_MEMORY = 2, /* detail: bytes the scan needed */
	MT_REACH_FAILED = 3,    /* detail: signal, or 256 + exit code, of the scanning process */
	MT_REACH_NO_TRACE = 4,  /* detail: errno reading the trace back */
	MT_REACH_TOO_MANY = 5,  /* detail: live blocks */
	MT_REACH_TIMEOUT = 6,   /* detail: the ms it was given (MEMTRACE_REACHABILITY_MS) */
};

/* MT_REC_REACH_BLOCKS class, valgrind memcheck's four. */
enum mt_reach_class {
	MT_REACH_DEFINITE = 1,
	MT_REACH_INDIRECT = 2,
	MT_REACH_POSSIBLE = 3,
	MT_REACH_REACHABLE = 4,
};

/* Reasons in MT_REC_LOST. */
enum mt_lost_reason {
	MT_LOST_STACK_TABLE_FULL = 1, /* count: events whose stack is id 0 */
	MT_LOST_DISABLED = 2,         /* tracing stopped here: no more events */
};

/* Order of the values in MT_REC_SAMPLE; new ones are only ever appended. */
enum mt_sample_field {
	MT_SAMPLE_RSS = 0,        /* bytes, /proc/self/statm */
	MT_SAMPLE_PSS,            /* bytes, smaps_rollup */
	MT_SAMPLE_PRIVATE_DIRTY,  /* bytes, smaps_rollup */
	MT_SAMPLE_HEAP_ARENA,     /* mallinfo2 arena: heap obtained by sbrk/arenas */
	MT_SAMPLE_HEAP_IN_USE,    /* mallinfo2 uordblks */
	MT_SAMPLE_HEAP_FREE,      /* mallinfo2 fordblks */
	MT_SAMPLE_HEAP_TRIMMABLE, /* mallinfo2 keepcost */
	MT_SAMPLE_HEAP_MMAPPED,   /* mallinfo2 hblkhd */
	MT_SAMPLE_CGROUP_CURRENT, /* bytes; 0 when unknown */
	MT_SAMPLE_CGROUP_MAX,     /* bytes; 0 when unknown or unlimited */
	MT_SAMPLE_MEM_TOTAL,      /* bytes of physical memory (MemTotal); 0 when unknown */
	MT_SAMPLE_RSS_FILE,       /* bytes of RSS that are file-backed or shared, statm */
	MT_SAMPLE_HEAP_AGE,       /* ticks from the heap figures' moment to the sample's */
	MT_SAMPLE_PSS_AGE,        /* ticks from the Pss and Private_Dirty read to the sample */
	MT_SAMPLE_FIELD_COUNT
};

/* Size bounds the reader checks; the writer never exceeds them. */
#define MT_MAX_DEPTH    256
#define MT_MAX_STRING   4096
#define MT_MAX_BUILD_ID 64
#define MT_MAX_SEGMENTS 64
#define MT_MAX_VARINT   10 /* bytes in a uleb128 of a u64 */

/* ---- Encoding helpers shared by writer and reader ---- */

static inline uint64_t mt_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t mt_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Writes v as uleb128 at p (room for MT_MAX_VARINT bytes); returns the end. */
static inline uint8_t *mt_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/*
 * Reads a uleb128 from [*p, end). Returns 0 and advances *p, or -1 when the
 * bytes end first or the value does not fit in 64 bits.
 */
static inline int mt_get_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	const uint8_t *q = *p;

	while (q < end) {
		uint8_t b = *q++;
		if (shift == 63 && b > 1)
			return -1;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*p = q;
			*out = v;
			return 0;
		}
		shift += 7;
		if (shift > 63)
			return -1;
	}
	return -1;
}

#endif
