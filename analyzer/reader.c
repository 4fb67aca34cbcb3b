/* SPDX-License-Identifier: MIT */
/*
 * The trace reader (see reader.h): header checks, chunk walking, record
 * decoding. The file is only ever read through bounds-checked helpers; the
 * varint decoder is the one in trace-format.h.
 *
 * May not: print, abort, or loop on anything but the bytes it has (every
 * loop advances through the mapped file or stops at a checked count).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "memtrace/crc32c.h"
#include "reader.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the trace format is little-endian and this reader copies it as is"
#endif

/* Bounds the header and chunk sizes a reader accepts, so a corrupt header cannot ask for silly
 * work. */
#define MAX_HEADER_SIZE (1u << 20)
#define MAX_CHUNK_SIZE  (1u << 30)

__attribute__((format(printf, 4, 5))) static int fail(struct mt_error *err, int code,
                                                      uint64_t offset, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->offset = offset;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return code;
}

static const char *const record_names[MT_REC_TYPE_COUNT] = {
        [MT_REC_PROCESS] = "PROCESS",
        [MT_REC_MODULE] = "MODULE",
        [MT_REC_MODULE_GONE] = "MODULE_GONE",
        [MT_REC_STACK] = "STACK",
        [MT_REC_ALLOC] = "ALLOC",
        [MT_REC_FREE] = "FREE",
        [MT_REC_REALLOC] = "REALLOC",
        [MT_REC_FAIL] = "FAIL",
        [MT_REC_MMAP] = "MMAP",
        [MT_REC_MUNMAP] = "MUNMAP",
        [MT_REC_MREMAP] = "MREMAP",
        [MT_REC_SAMPLE] = "SAMPLE",
        [MT_REC_EXIT] = "EXIT",
        [MT_REC_LOST] = "LOST",
        [MT_REC_MARK] = "MARK",
        [MT_REC_EXEC] = "EXEC",
        [MT_REC_PYCODE] = "PYCODE",
        [MT_REC_PYSTACK] = "PYSTACK",
        [MT_REC_REACH] = "REACH",
        [MT_REC_REACH_BLOCKS] = "REACH_BLOCKS",
        [MT_REC_SHORT_MALLOC] = "SHORT_MALLOC",
        [MT_REC_SHORT_MALLOC_SAME] = "SHORT_MALLOC_SAME",
        [MT_REC_SHORT_FREE] = "SHORT_FREE",
        [MT_REC_KEYFRAME] = "KEYFRAME",
        [MT_REC_KEY_THREADS] = "KEY_THREADS",
        [MT_REC_KEY_BLOCKS] = "KEY_BLOCKS",
        [MT_REC_KEY_RANGES] = "KEY_RANGES",
        [MT_REC_KEY_STACKS] = "KEY_STACKS",
        [MT_REC_KEY_END] = "KEY_END",
        [MT_REC_ROUND] = "ROUND",
        [MT_REC_COPY] = "COPY",
};

static const char *const fn_names[MT_FN_COUNT] = {
        [MT_FN_MALLOC] = "malloc",
        [MT_FN_CALLOC] = "calloc",
        [MT_FN_REALLOC] = "realloc",
        [MT_FN_REALLOCARRAY] = "reallocarray",
        [MT_FN_POSIX_MEMALIGN] = "posix_memalign",
        [MT_FN_ALIGNED_ALLOC] = "aligned_alloc",
        [MT_FN_MEMALIGN] = "memalign",
        [MT_FN_VALLOC] = "valloc",
        [MT_FN_PVALLOC] = "pvalloc",
        [MT_FN_FREE] = "free",
        [MT_FN_MMAP] = "mmap",
        [MT_FN_MUNMAP] = "munmap",
        [MT_FN_MREMAP] = "mremap",
        [MT_FN_CUDA_MALLOC] = "cudaMalloc",
        [MT_FN_CUDA_FREE] = "cudaFree",
        [MT_FN_CUDA_MALLOC_ASYNC] = "cudaMallocAsync",
        [MT_FN_CUDA_FREE_ASYNC] = "cudaFreeAsync",
        [MT_FN_CUDA_MALLOC_FROM_POOL_ASYNC] = "cudaMallocFromPoolAsync",
        [MT_FN_CUDA_MALLOC_MANAGED] = "cudaMallocManaged",
        [MT_FN_CUDA_MALLOC_PITCH] = "cudaMallocPitch",
        [MT_FN_CUDA_MALLOC_3D] = "cudaMalloc3D",
        [MT_FN_CUDA_MALLOC_HOST] = "cudaMallocHost",
        [MT_FN_CUDA_HOST_ALLOC] = "cudaHostAlloc",
        [MT_FN_CUDA_FREE_HOST] = "cudaFreeHost",
        [MT_FN_CUDA_HOST_REGISTER] = "cudaHostRegister",
        [MT_FN_CUDA_HOST_UNREGISTER] = "cudaHostUnregister",
        [MT_FN_CU_MEM_ALLOC] = "cuMemAlloc",
        [MT_FN_CU_MEM_FREE] = "cuMemFree",
        [MT_FN_CU_MEM_ALLOC_PITCH] = "cuMemAllocPitch",
        [MT_FN_CU_MEM_ALLOC_MANAGED] = "cuMemAllocManaged",
        [MT_FN_CU_MEM_HOST_ALLOC] = "cuMemHostAlloc",
        [MT_FN_CU_MEM_FREE_HOST] = "cuMemFreeHost",
        [MT_FN_CU_MEM_ALLOC_ASYNC] = "cuMemAllocAsync",
        [MT_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC] = "cuMemAllocFromPoolAsync",
        [MT_FN_CU_MEM_FREE_ASYNC] = "cuMemFreeAsync",
        [MT_FN_CU_MEM_CREATE] = "cuMemCreate",
        [MT_FN_CU_MEM_RELEASE] = "cuMemRelease",
};

char *mt_bytes_dup(struct mt_bytes b)
{
	char *s = malloc((size_t)b.len + 1);

	if (!s)
		return NULL;
	if (b.len)
		memcpy(s, b.data, b.len);
	s[b.len] = 0;
	return s;
}

const char *mt_record_name(unsigned type)
{
	return type < MT_REC_TYPE_COUNT ? record_names[type] : NULL;
}

const char *mt_fn_name(uint64_t fn)
{
	return fn < MT_FN_COUNT ? fn_names[fn] : NULL;
}

/* "host", "mmap", "cuda-host", "cuda-managed", "cuda:0" .. "cuda:15"; NULL for no kind. */
const char *mt_kind_name(unsigned kind)
{
	static const char *const names[MT_KIND_COUNT] = {
	        [MT_KIND_HOST] = "host",
	        [MT_KIND_MMAP] = "mmap",
	        [MT_KIND_CUDA_HOST] = "cuda-host",
	        [MT_KIND_CUDA_MANAGED] = "cuda-managed",
	        [MT_KIND_CUDA_DEVICE + 0] = "cuda:0",
	        [MT_KIND_CUDA_DEVICE + 1] = "cuda:1",
	        [MT_KIND_CUDA_DEVICE + 2] = "cuda:2",
	        [MT_KIND_CUDA_DEVICE + 3] = "cuda:3",
	        [MT_KIND_CUDA_DEVICE + 4] = "cuda:4",
	        [MT_KIND_CUDA_DEVICE + 5] = "cuda:5",
	        [MT_KIND_CUDA_DEVICE + 6] = "cuda:6",
	        [MT_KIND_CUDA_DEVICE + 7] = "cuda:7",
	        [MT_KIND_CUDA_DEVICE + 8] = "cuda:8",
	        [MT_KIND_CUDA_DEVICE + 9] = "cuda:9",
	        [MT_KIND_CUDA_DEVICE + 10] = "cuda:10",
	        [MT_KIND_CUDA_DEVICE + 11] = "cuda:11",
	        [MT_KIND_CUDA_DEVICE + 12] = "cuda:12",
	        [MT_KIND_CUDA_DEVICE + 13] = "cuda:13",
	        [MT_KIND_CUDA_DEVICE + 14] = "cuda:14",
	        [MT_KIND_CUDA_DEVICE + 15] = "cuda:15",
	};

	return kind < MT_KIND_COUNT ? names[kind] : NULL;
}

const char *mt_reach_status_name(uint64_t status)
{
	static const char *const names[] = {
	        [MT_REACH_DONE] = "done",           [MT_REACH_OFF] = "off",
	        [MT_REACH_NO_MEMORY] = "no-memory", [MT_REACH_FAILED] = "failed",
	        [MT_REACH_NO_TRACE] = "no-trace",   [MT_REACH_TOO_MANY] = "too-many",
	        [MT_REACH_TIMEOUT] = "timeout",
	};

	return status < sizeof(names) / sizeof(names[0]) ? names[status] : NULL;
}

const char *mt_reach_class_name(uint64_t cls)
{
	static const char *const names[] = {
	        [MT_REACH_DEFINITE] = "definite",
	        [MT_REACH_INDIRECT] = "indirect",
	        [MT_REACH_POSSIBLE] = "possible",
	        [MT_REACH_REACHABLE] = "reachable",
	};

	return cls < sizeof(names) / sizeof(names[0]) ? names[cls] : NULL;
}

int mt_kind_parse(const char *name)
{
	for (unsigned k = 0; k < MT_KIND_COUNT; k++)
		if (mt_kind_name(k) && !strcmp(name, mt_kind_name(k)))
			return (int)k;
	return -EINVAL;
}

static int check_header(struct mt_trace *t, struct mt_error *err)
{
	const struct mt_file_header *h = &t->header;

	if (t->size == 0)
		return fail(err, -EBADMSG, 0, "the file is empty, not a memtrace trace");
	if (t->size < sizeof(h->magic) || memcmp(t->data, MT_FILE_MAGIC, sizeof(h->magic)))
		return fail(err, -EBADMSG, 0, "not a memtrace trace (no MEMTRACE magic)");
	if (t->size < sizeof(*h))
		return fail(err, -EBADMSG, t->size, "the file ends inside its header");
	memcpy(&t->header, t->data, sizeof(*h));
	if (h->byte_order != MT_BYTE_ORDER_MARK) {
		if (h->byte_order == __builtin_bswap32(MT_BYTE_ORDER_MARK))
			return fail(err, -EPROTONOSUPPORT, 20,
			            "the trace is big-endian; memtrace reads little-endian traces");
		return fail(err, -EBADMSG, 20, "bad byte order mark 0x%08x", h->byte_order);
	}
	if (h->version > MT_FORMAT_VERSION)
		return fail(err, -EPROTONOSUPPORT, 8,
		            "trace format version %u is newer than this memtrace reads (%u)",
		            h->version, MT_FORMAT_VERSION);
	if (h->version == 0)
		return fail(err, -EBADMSG, 8, "bad format version 0");
	if (h->version < MT_FORMAT_OLDEST)
		return fail(err, -EPROTONOSUPPORT, 8,
		            "trace format version %u is older than this memtrace reads (%u); read "
		            "it with the memtrace that wrote it",
		            h->version, MT_FORMAT_OLDEST);
	t->chunk_header = h->version >= 4 ? sizeof(struct mt_chunk_header) : MT_CHUNK_HEADER_V3;
	if (h->version < 4) /* its header ends at `extended`: the rest of the page is zero */
		memset((char *)&t->header + offsetof(struct mt_file_header, next_seq), 0,
		       sizeof(*h) - offsetof(struct mt_file_header, next_seq));
	if (h->header_size < sizeof(*h) || h->header_size > MAX_HEADER_SIZE)
		return fail(err, -EBADMSG, 12, "bad header size %u", h->header_size);
	if (h->chunk_unit < 4096 || h->chunk_unit % 4096 || h->chunk_unit > MAX_CHUNK_SIZE)
		return fail(err, -EBADMSG, 16, "bad chunk unit %u (not a multiple of 4096)",
		            h->chunk_unit);
	if (t->size < h->header_size)
		return fail(err, -EBADMSG, t->size, "the file ends inside its %u-byte header",
		            h->header_size);
	return 0;
}

static int add_slot(struct mt_trace *t, uint64_t offset, uint32_t size, enum mt_slot_state state,
                    size_t *cap, struct mt_error *err)
{
	if (t->slot_count == *cap) {
		size_t n = *cap ? *cap * 2 : 64;
		struct mt_chunk_slot *s = realloc(t->slots, n * sizeof(*s));
		if (!s)
			return fail(err, -ENOMEM, offset, "out of memory for the chunk index");
		t->slots = s;
		*cap = n;
	}
	t->slots[t->slot_count++] = (struct mt_chunk_slot){
	        .offset = offset, .size = size, .state = state, .seq = t->slot_count};
	return 0;
}

/*
 * Whether a given-up chunk's records are what its writer wrote: the
 * checksum of the bytes from its header's end to the end of its data (the
 * walk by record lengths, and a short record's fields, to the first zero
 * type byte; a damaged length takes the walk elsewhere, and the sum differs).
 */
/*
 * Steps over a varint of [*p, end) as mt_get_varint reads it, valid or not
 * alike, without putting its value together: false where it would fail.
 */
static inline bool skip_varint(const uint8_t **p, const uint8_t *end)
{
	const uint8_t *q = *p;

	for (unsigned i = 0; i < 10 && q + i < end; i++) {
		if (i == 9 && q[i] > 1)
			return false; /* past 64 bits */
		if (!(q[i] & 0x80)) {
			*p = q + i + 1;
			return true;
		}
	}
	return false;
}

/*
 * Steps over n varints of [*p, end) as skip_varint does one after the
 * other: when they end within eight bytes that are there (nearly always), by
 * finding the nth byte whose top bit is clear in one load.
 */
static inline bool skip_varints(const uint8_t **p, const uint8_t *end, unsigned n)
{
	if (end - *p >= 8) {
		uint64_t w, ends;
		memcpy(&w, *p, sizeof(w)); /* little-endian: the first byte is the lowest */
		ends = ~w & 0x8080808080808080ull;
		for (unsigned i = 1; i < n && ends; i++)
			ends &= ends - 1;
		if (ends) {
			*p += (unsigned)__builtin_ctzll(ends) / 8 + 1;
			return true;
		}
	}
	for (; n > 0; n--)
		if (!skip_varint(p, end))
			return false;
	return true;
}

/*
 * A varint of the payload [*p, end): false when it runs past end or past
 * 64 bits. The bytes up to lim (the chunk's end) may be read: one of up to
 * four bytes, nearly every field, is then taken without a loop. `roomy`
 * says lim is far enough for every field of the record: then a field of up
 * to four bytes is not checked against end, and the caller checks once
 * that the last one ended inside the payload.
 */
static inline __attribute__((always_inline)) bool field(const uint8_t **p, const uint8_t *end,
                                                        const uint8_t *lim, bool roomy, uint64_t *v)
{
	const uint8_t *q = *p;
	uint64_t x;
	unsigned n;

	if (roomy || lim - q >= 4) {
		x = q[0];
		if (x < 0x80) {
			n = 1;
			goto done;
		}
		x = (x & 0x7f) | (uint64_t)(q[1] & 0x7f) << 7;
		if (q[1] < 0x80) {
			n = 2;
			goto done;
		}
		x |= (uint64_t)(q[2] & 0x7f) << 14;
		if (q[2] < 0x80) {
			n = 3;
			goto done;
		}
		x |= (uint64_t)(q[3] & 0x7f) << 21;
		if (q[3] < 0x80) {
			n = 4;
			goto done;
		}
	}
	return q <= end && mt_get_varint(p, end, v) == 0;
done:
	if (!roomy && n > (size_t)(end - q))
		return false; /* it runs past the payload */
	*v = x;
	*p = q + n;
	return true;
}

/*
 * x86-64's BMI2 (Haswell, Zen and later) takes a varint's bits from a word
 * in one instruction (pext, with the byte mask that BMI1 makes of its end):
 * the event runs are read by a copy of their loop built for it where the
 * CPU has it (mt_cursor_next_events, and mt_cursor_next_events_due for the
 * runs of a trace of several threads), whose short records are read with no
 * branch per byte, and so is the open's checksum walk (sealed_ok). pext is
 * written out: its intrinsic needs BMI2 in every function it is inlined
 * through.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define WORD_BMI2 1
static inline __attribute__((always_inline)) uint64_t pext(uint64_t w, uint64_t mask)
{
	uint64_t r;

	__asm__("pext %2, %1, %0" : "=r"(r) : "r"(w), "r"(mask));
	return r;
}
#endif

/* One more event for *s: the records of a skim come in file order, so a later one of equal time
 * is later by offset too. */
static inline void skimmed(struct mt_skim *s, uint64_t time, uint64_t offset)
{
	s->first_time = time < s->first_time ? time : s->first_time;
	s->last_time = time > s->last_time ? time : s->last_time;
	if (time >= s->latest_time) {
		s->latest_time = time;
		s->latest_offset = offset;
	}
	s->events++;
}

/*
 * The times of a record that mt_cursor_skim reads without the general
 * decoder, at p in [p, end), as it reads them: true with its time step in
 * *dt and its end in *next; false for any other.
 */
static inline __attribute__((always_inline)) bool skim_fast(const uint8_t *p, const uint8_t *end,
                                                            uint64_t *dt, const uint8_t **next)
{
	const uint8_t *q = p + 1;

	/* a short record: its time, the rest stepped over */
	if (p < end && mt_record_is_short(*p)) {
		if (field(&q, end, end, false, dt) &&
		    skip_varints(&q, end, mt_short_fields(*p) - 1)) {
			*next = q;
			return true;
		}
	}
	/* an event whose length is one byte, its time a whole varint inside it */
	if (end - p > 2 && *p >= MT_REC_ALLOC && *p <= MT_REC_MREMAP && p[1] < 0x80 &&
	    p[1] <= end - p - 2) {
		q = p + 2;
		if (field(&q, p + 2 + p[1], end, false, dt)) {
			*next = p + 2 + p[1];
			return true;
		}
	}
	return false;
}

#ifdef WORD_BMI2
static inline __attribute__((always_inline)) uint64_t pdep(uint64_t w, uint64_t mask)
{
	uint64_t r;

	__asm__("pdep %2, %1, %0" : "=r"(r) : "r"(w), "r"(mask));
	return r;
}

/*
 * skim_fast of a short record whose time ends in the eight bytes after its
 * type byte (which the caller knows are before `end`) and whose last field
 * ends in the sixteen, if they are: its time step from one load (pext up to the first
 * varint's end), its end the end of its last varint (pdep picks the n-th
 * end, in the second word if the first has too few); false for any other
 * record, which skim_fast reads. Every varint of up to eight bytes is one
 * that field and skip_varints take.
 */
static inline __attribute__((always_inline)) bool skim_word(const uint8_t *p, const uint8_t *end,
                                                            uint64_t *dt, const uint8_t **next)
{
	unsigned k = (unsigned)*p - MT_REC_SHORT_MALLOC; /* 4, 3 or 2 fields: mt_short_fields */
	uint64_t w, ends, last;

	if (k > MT_REC_SHORT_FREE - MT_REC_SHORT_MALLOC)
		return false;
	memcpy(&w, p + 1, sizeof(w)); /* little-endian: the first byte is the lowest */
	ends = ~w & 0x8080808080808080ull;
	*dt = pext(w, (ends ^ (ends - 1)) & 0x7f7f7f7f7f7f7f7full);
	last = pdep(8u >> k, ends);
	if (last) {
		*next = p + 2 + (unsigned)__builtin_ctzll(last) / 8;
		return true;
	}
	if (!ends || end - p <= 16)
		return false; /* its time does not end in the word, or the second is not there */
	/* the fields the first word does not end, at least one */
	k = 4 - k - (unsigned)__builtin_popcountll(ends);
	memcpy(&w, p + 9, sizeof(w));
	last = pdep(1ull << (k - 1), ~w & 0x8080808080808080ull);
	if (!last)
		return false;
	*next = p + 10 + (unsigned)__builtin_ctzll(last) / 8;
	return true;
}
#endif

/*
 * The checksum walk over a sealed chunk (at file offset `off`, its time
 * register starting at `ticks`), which skims its events too: while every
 * record is one that skim_fast reads, *sk is what mt_cursor_skim would make
 * of them, and *all says whether that held to the end. With `word`, runs of
 * short records far from the chunk's end are read a word at a time
 * (skim_word), their figures kept in registers: a store through *sk could
 * change the bytes read as far as the compiler knows.
 */
static inline __attribute__((always_inline)) bool
sealed_walk(const uint8_t *chunk, uint32_t hdr, uint32_t size, uint32_t crc, uint64_t off,
            uint64_t ticks, struct mt_skim *sk, bool *all, bool word)
{
	const uint8_t *start = chunk + hdr, *end = chunk + size;
	const uint8_t *p = start;
	uint64_t time = ticks, dt;
	bool events = true;

	(void)word;
	memset(sk, 0, sizeof(*sk));
	sk->first_time = UINT64_MAX;
	while (p < end && *p != MT_REC_END_OF_DATA) {
		const uint8_t *q = p + 1;
		uint64_t len;
#ifdef WORD_BMI2
		if (word && events && end - p > 8 && skim_word(p, end, &dt, &q)) {
			struct mt_skim s = *sk;
			do {
				time += (uint64_t)mt_unzigzag(dt);
				skimmed(&s, time, off + (uint64_t)(p - chunk));
				p = q;
			} while (end - p > 8 && skim_word(p, end, &dt, &q));
			*sk = s;
			continue;
		}
#endif
		if (events && skim_fast(p, end, &dt, &q)) {
			time += (uint64_t)mt_unzigzag(dt);
			skimmed(sk, time, off + (uint64_t)(p - chunk));
			p = q;
			continue;
		}
		events = false;
		if (mt_record_is_short(*p)) {
			if (!skip_varints(&q, end, mt_short_fields(*p)))
				return false;
			p = q;
			continue;
		}
		if (mt_get_varint(&q, end, &len) < 0 || len > (uint64_t)(end - q))
			return false;
		p = q + len;
	}
	*all = events;
	return mt_crc32c(start, (size_t)(p - start)) == crc;
}

#ifdef WORD_BMI2
__attribute__((target("bmi,bmi2,popcnt"))) static bool
sealed_ok_bmi2(const uint8_t *chunk, uint32_t hdr, uint32_t size, uint32_t crc, uint64_t off,
               uint64_t ticks, struct mt_skim *sk, bool *all)
{
	return sealed_walk(chunk, hdr, size, crc, off, ticks, sk, all, true);
}
#endif

static bool sealed_ok(const uint8_t *chunk, uint32_t hdr, uint32_t size, uint32_t crc, uint64_t off,
                      uint64_t ticks, struct mt_skim *sk, bool *all)
{
#ifdef WORD_BMI2
	if (__builtin_cpu_supports("bmi2"))
		return sealed_ok_bmi2(chunk, hdr, size, crc, off, ticks, sk, all);
#endif
	return sealed_walk(chunk, hdr, size, crc, off, ticks, sk, all, false);
}

/*
 * The open's checksum walks, shared by the cores: the chunks are
 * independent, so the index is made a batch at a time (their headers read
 * in file order, which is cheap) and their records walked by this thread
 * and helpers, each taking the next chunk left; what a walk found is then
 * applied to the slots in file order, as a walk one chunk at a time would.
 * The pages a header's read brings in (the kernel maps up to 64 KiB around
 * a fault) are let go of at once, not when the chunk is walked: 18-20 MiB
 * of RSS on a trace of 111 MB, whose 434 chunks are one batch.
 * A helper that meets a fault (the mapped file shrank) leaves its chunk to
 * this thread, which meets the fault itself, where the command's handler
 * can leave the command.
 */
#define WALK_BATCH   1024u      /* chunks: 72 KiB of jobs */
#define WALK_SHARED  (4u << 20) /* bytes of a batch from which helpers pay for their start */
#define WALK_HELPERS 3u

/* A whole chunk (its slot) and what its walk found. */
struct walk_job {
	uint64_t slot, ticks, ns;
	uint32_t crc; /* 0: sealed without one, nothing to walk */
	bool walked, ok, all;
	struct mt_skim sk;
};

struct walkers {
	const struct mt_trace *t;
	struct walk_job *jobs;
	size_t n;
	uint64_t bytes; /* of the chunks with a checksum */
	_Atomic size_t next;
};

static _Thread_local sigjmp_buf *walk_fault;

void mt_reader_fault(void *addr)
{
	(void)addr;
	if (walk_fault)
		siglongjmp(*walk_fault, 1);
}

static void walk_one(const struct mt_trace *t, struct walk_job *j)
{
	const struct mt_chunk_slot *s = &t->slots[j->slot];

	j->ok = !j->crc || sealed_ok(t->data + s->offset, t->chunk_header, s->size, j->crc,
	                             s->offset, j->ticks, &j->sk, &j->all);
	if (j->crc)
		mt_reader_release(t, s->offset, s->size); /* read whole; next needed later */
	j->walked = true;
}

static void walk_jobs(struct walkers *w)
{
	size_t i;

	while ((i = atomic_fetch_add_explicit(&w->next, 1, memory_order_relaxed)) < w->n)
		walk_one(w->t, &w->jobs[i]);
}

static void *walker(void *arg)
{
	sigjmp_buf jump;

	if (!sigsetjmp(jump, 1)) {
		walk_fault = &jump;
		walk_jobs(arg);
	}
	walk_fault = NULL;
	return NULL;
}

/* Walks the batch's chunks, applies what the walks found, and empties the batch. */
static void walk_batch(struct mt_trace *t, struct walkers *w)
{
	pthread_t helper[WALK_HELPERS];
	unsigned nhelpers = 0, want = 0;

	w->t = t;
	atomic_store(&w->next, 0);
	if (w->bytes >= WALK_SHARED) {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		want = cores > 1 ? (unsigned)(cores - 1) : 0;
		want = want < WALK_HELPERS ? want : WALK_HELPERS;
	}
	if (want) {
		/* the command's signals stay this thread's; a fault is the helper's own */
		sigset_t all, was;
		sigfillset(&all);
		sigdelset(&all, SIGBUS);
		sigdelset(&all, SIGSEGV);
		(void)mt_crc32c_have_hw(); /* its cached answer, before the helpers read it */
		pthread_sigmask(SIG_BLOCK, &all, &was);
		while (nhelpers < want && pthread_create(&helper[nhelpers], NULL, walker, w) == 0)
			nhelpers++;
		pthread_sigmask(SIG_SETMASK, &was, NULL);
	}
	walk_jobs(w);
	while (nhelpers)
		pthread_join(helper[--nhelpers], NULL);
	for (size_t i = 0; i < w->n; i++) {
		struct walk_job *j = &w->jobs[i];
		struct mt_chunk_slot *s = &t->slots[j->slot];
		if (!j->walked)
			walk_one(t, j); /* a helper met a fault there: this thread meets it too */
		if (!j->ok) {
			s->state = MT_SLOT_DAMAGED;
			if (!t->damaged++)
				t->damaged_at = s->offset;
		} else {
			mt_clock_fit_add(&t->fit, j->ticks, j->ns);
		}
		if (j->crc && j->ok && j->all) {
			s->skimmed = true;
			s->skim = j->sk;
		}
	}
	w->n = 0;
	w->bytes = 0;
}

/*
 * The chunk index: each chunk says its size, so the chunks are found by
 * walking the file. A unit whose magic is 0 belongs to a chunk claimed but
 * never written (its writer was killed, or the disk was full) and is
 * stepped over. A bad magic is kept as a slot of its own, to be reported
 * when it is read, and the walk looks for the next chunk at the next unit.
 */
static int index_chunks(struct mt_trace *t, struct mt_error *err)
{
	uint64_t unit = t->header.chunk_unit, off = t->header.header_size;
	size_t cap = 0;
	bool in_hole = false;
	struct walkers w = {.jobs = malloc(WALK_BATCH * sizeof(*w.jobs))};
	int r = 0;

	if (!w.jobs)
		return fail(err, -ENOMEM, 0, "out of memory for the chunk index");
	while (off < t->size && r == 0) {
		struct mt_chunk_header ch;
		if (t->size - off < t->chunk_header) {
			r = add_slot(t, off, 0, MT_SLOT_CUT, &cap, err);
			break;
		}
		memset(&ch, 0, sizeof(ch));
		memcpy(&ch, t->data + off, t->chunk_header);
		if (ch.magic == 0 && ch.size == 0) {
			t->unused_chunks += !in_hole;
			in_hole = true;
			off += unit;
			continue;
		}
		in_hole = false;
		if (ch.magic == 0) {
			/* a header written but for its magic: the writer died there */
			t->unused_chunks++;
			off += unit;
		} else if (ch.magic != MT_CHUNK_MAGIC || ch.size < unit || ch.size % unit ||
		           ch.size > MAX_CHUNK_SIZE) {
			r = add_slot(t, off, ch.magic == MT_CHUNK_MAGIC ? ch.size : 0, MT_SLOT_BAD,
			             &cap, err);
			off += unit;
		} else if (ch.size > t->size - off) {
			r = add_slot(t, off, ch.size, MT_SLOT_CUT, &cap, err);
			break;
		} else {
			/* its walk (a batch's, on the cores) decides whether it is damaged */
			r = add_slot(t, off, ch.size, MT_SLOT_CHUNK, &cap, err);
			if (r < 0)
				break;
			t->slots[t->slot_count - 1].seq =
			        t->chunk_header > MT_CHUNK_HEADER_V3 ? ch.seq : t->slot_count - 1;
			/* the clock's pairs now: the chunk's pages are let go of by its walk */
			w.jobs[w.n++] = (struct walk_job){.slot = t->slot_count - 1,
			                                  .ticks = ch.base_ticks,
			                                  .ns = ch.base_ns,
			                                  .crc = ch.crc32c};
			if (ch.crc32c) {
				mt_reader_release(t, off, ch.size);
				w.bytes += ch.size;
			}
			if (w.n == WALK_BATCH)
				walk_batch(t, &w);
			t->chunk_count++;
			off += ch.size;
		}
	}
	if (r == 0)
		walk_batch(t, &w);
	free(w.jobs);
	t->truncated = t->slot_count && t->slots[t->slot_count - 1].state == MT_SLOT_CUT;
	if (t->truncated) {
		const struct mt_chunk_slot *last = &t->slots[t->slot_count - 1];
		uint64_t end = last->offset + (last->size ? last->size : unit);
		t->missing = end - t->size;
	}
	if (t->header.extended > t->size && t->header.extended - t->size > t->missing)
		t->missing = t->header.extended - t->size;
	t->cut = t->missing > 0;
	return r;
}

static const struct mt_chunk_slot *sort_slots;

static int cmp_seq(const void *a, const void *b)
{
	const struct mt_chunk_slot *x = &sort_slots[*(const uint64_t *)a],
	                           *y = &sort_slots[*(const uint64_t *)b];

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Claim order: a ring reuses extents, so the file's order is not the writers'. */
static int order_slots(struct mt_trace *t, struct mt_error *err)
{
	if (!t->slot_count)
		return 0;
	t->by_seq = malloc(t->slot_count * sizeof(*t->by_seq));
	if (!t->by_seq)
		return fail(err, -ENOMEM, 0, "out of memory for the chunk index");
	for (uint64_t i = 0; i < t->slot_count; i++)
		t->by_seq[i] = i;
	sort_slots = t->slots;
	if (t->header.ring_size && t->slot_count > 1)
		qsort(t->by_seq, t->slot_count, sizeof(*t->by_seq), cmp_seq);
	return 0;
}

uint64_t mt_reader_slot_by_seq(const struct mt_trace *t, uint64_t i)
{
	return t->by_seq[i];
}

void mt_clock_fit_add(struct mt_clock_fit *fit, uint64_t ticks, uint64_t ns)
{
	if (!fit->pairs || ticks < fit->lo_ticks) {
		fit->lo_ticks = ticks;
		fit->lo_ns = ns;
	}
	if (!fit->pairs || ticks > fit->hi_ticks) {
		fit->hi_ticks = ticks;
		fit->hi_ns = ns;
	}
	fit->pairs++;
}

uint64_t mt_clock_ns(const struct mt_clock_fit *fit, uint64_t ticks)
{
	long double rate = 1.0L, ns;

	if (fit->clock == MT_CLOCK_MONOTONIC_NS || !fit->pairs)
		return ticks;
	if (fit->hi_ticks > fit->lo_ticks)
		rate = ((long double)fit->hi_ns - (long double)fit->lo_ns) /
		       (long double)(fit->hi_ticks - fit->lo_ticks);
	ns = (long double)fit->lo_ns + ((long double)ticks - (long double)fit->lo_ticks) * rate;
	/*
	 * A tick before the earliest pair (or a corrupt pair) can fall outside
	 * u64 ns, and converting such a value is undefined: clamp it.
	 */
	if (!(ns > 0.0L))
		return 0;
	if (ns >= 18446744073709551616.0L)
		return UINT64_MAX;
	return (uint64_t)ns;
}

static int open_bytes(struct mt_trace *t, const void *data, size_t size, bool mapped,
                      struct mt_error *err)
{
	int r;

	memset(t, 0, sizeof(*t));
	t->data = data;
	t->size = size;
	t->mapped = mapped;
	r = check_header(t, err);
	t->fit.clock = t->header.clock;
	if (r == 0)
		r = index_chunks(t, err);
	if (r == 0)
		r = order_slots(t, err);
	if (r < 0) {
		free(t->slots);
		t->slots = NULL;
	}
	return r;
}

int mt_reader_open_memory(struct mt_trace *t, const void *data, size_t size, struct mt_error *err)
{
	return open_bytes(t, data, size, false, err);
}

/*
 * The kernel maps the pages around a fault that the page cache holds (its
 * fault_around_bytes, 64 KiB), so reading a chunk maps some of its
 * neighbours' pages too, which their own release, done or to come, does not
 * reach: 33 MB of a 222 MB trace stayed mapped without the margin, 2.4 GB of
 * 11 GB. A neighbour still being read maps its pages again.
 */
#define RELEASE_NEAR (64u << 10)
void mt_reader_release(const struct mt_trace *t, uint64_t offset, uint64_t len)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start, end;
	uint64_t near = page > RELEASE_NEAR ? page : RELEASE_NEAR;

	if (!t->mapped || offset >= t->size)
		return;
	if (len > t->size - offset)
		len = t->size - offset;
	start = offset > near ? (offset - near) & ~(near - 1) : 0;
	end = (offset + len + 2 * near - 1) & ~(near - 1);
	madvise((void *)(uintptr_t)(t->data + start), (end < t->size ? end : t->size) - start,
	        MADV_DONTNEED);
}

/*
 * Whether a running program's writers hold the file: each holds a shared
 * flock on it (preload/writer.c). Read from /proc/locks rather than by
 * trying a lock, which could make a program that joins the trace meanwhile
 * fail to take its own.
 */
static bool held_by_writers(const struct stat *st)
{
	char line[256], want[64];
	FILE *f = fopen("/proc/locks", "re");
	bool held = false;

	if (!f)
		return false;
	snprintf(want, sizeof(want), " %02x:%02x:%llu ", major(st->st_dev), minor(st->st_dev),
	         (unsigned long long)st->st_ino);
	while (!held && fgets(line, sizeof(line), f))
		held = strstr(line, " FLOCK ") && strstr(line, want);
	fclose(f);
	return held;
}

int mt_reader_open(struct mt_trace *t, const char *path, struct mt_error *err)
{
	struct stat st;
	void *p = NULL;
	int fd, r;

	memset(t, 0, sizeof(*t));
	/* never blocking: a FIFO named as the trace is refused below, not waited on */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return fail(err, -errno, 0, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		r = fail(err, -errno, 0, "cannot stat: %s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = fail(err, -EINVAL, 0, "not a regular file");
		goto out;
	}
	if (st.st_size > 0) {
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			r = fail(err, -errno, 0, "cannot map: %s", strerror(errno));
			goto out;
		}
	}
	r = open_bytes(t, p, (size_t)st.st_size, p != NULL, err);
	t->live = r == 0 && held_by_writers(&st);
	if (r < 0)
		mt_reader_close(t);
out:
	close(fd);
	return r;
}

void mt_reader_close(struct mt_trace *t)
{
	if (t->mapped)
		munmap((void *)t->data, t->size);
	free(t->slots);
	free(t->by_seq);
	memset(t, 0, sizeof(*t));
}

uint64_t mt_reader_chunk_slots(const struct mt_trace *t)
{
	return t->slot_count;
}

int mt_reader_chunk(const struct mt_trace *t, uint64_t index, struct mt_chunk *out,
                    struct mt_error *err)
{
	const struct mt_chunk_slot *slot;
	struct mt_chunk_header ch;

	if (index >= t->slot_count)
		return fail(err, -ERANGE, t->size, "no chunk %llu in the file",
		            (unsigned long long)index);
	slot = &t->slots[index];
	if (slot->state == MT_SLOT_CUT && !slot->size)
		return 0; /* the file ends inside the chunk's header: nothing to read */
	memset(&ch, 0, sizeof(ch));
	memcpy(&ch, t->data + slot->offset, t->chunk_header);
	if (slot->state == MT_SLOT_BAD) {
		if (ch.magic != MT_CHUNK_MAGIC)
			return fail(err, -EBADMSG, slot->offset, "bad chunk magic 0x%08x",
			            ch.magic);
		return fail(err, -EBADMSG, slot->offset + 32,
		            "bad chunk size %u (not a multiple of %u)", ch.size,
		            t->header.chunk_unit);
	}
	memset(out, 0, sizeof(*out));
	out->damaged = slot->state == MT_SLOT_DAMAGED;
	out->index = index;
	out->offset = slot->offset;
	out->size = slot->size;
	out->avail = slot->state == MT_SLOT_CUT ? (uint32_t)(t->size - slot->offset) : slot->size;
	out->instance = ch.instance;
	out->pid = ch.pid;
	out->tid = ch.tid;
	out->base_ticks = ch.base_ticks;
	out->base_ns = ch.base_ns;
	out->seq = slot->seq;
	return 1;
}

int mt_cursor_init(struct mt_cursor *c, const struct mt_trace *t, uint64_t index,
                   struct mt_error *err)
{
	int r;

	memset(c, 0, sizeof(*c));
	c->trace = t;
	r = mt_reader_chunk(t, index, &c->chunk, err);
	if (r <= 0) {
		c->done = true;
		return r;
	}
	c->pos = t->data + c->chunk.offset + t->chunk_header;
	c->end = t->data + c->chunk.offset + c->chunk.avail;
	c->time = c->chunk.base_ticks;
	c->addr = 0;
	c->stack = 0;
	return 1;
}

/* Payload decoder: a failed read marks it bad and returns 0; the caller checks once. */
struct dec {
	const uint8_t *p, *end;
	unsigned field; /* fields read so far, to name the one that failed */
	bool bad;
};

static uint64_t u_slow(struct dec *d)
{
	uint64_t v = 0;

	if (d->bad || mt_get_varint(&d->p, d->end, &v) < 0) {
		d->bad = true;
		return 0;
	}
	d->field++;
	return v;
}

/*
 * Most fields are one to three bytes: those are decoded here without a
 * loop; the rest, and anything near the end of the payload, by u_slow.
 */
static inline uint64_t u(struct dec *d)
{
	const uint8_t *p = d->p;

	if (__builtin_expect(d->end - p >= 3, 1)) {
		uint64_t v = p[0];
		if (v < 0x80) {
			d->p = p + 1;
			d->field++;
			return v;
		}
		v = (v & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7;
		if (p[1] < 0x80) {
			d->p = p + 2;
			d->field++;
			return v;
		}
		if (p[2] < 0x80) {
			d->p = p + 3;
			d->field++;
			return v | (uint64_t)p[2] << 14;
		}
	}
	return u_slow(d);
}

static int64_t z(struct dec *d)
{
	return mt_unzigzag(u(d));
}

/*
 * A varint of up to nine bytes at p, nine of which the caller knows are in
 * the payload, read a word at a time: a STACK's steps between return
 * addresses are one to eight bytes long in no order (a torch trace's 45
 * million of them), and a loop over their bytes branches on each. Its
 * length, or 0 for a longer one (u_slow's).
 */
static inline unsigned varint_word(const uint8_t *p, uint64_t *v)
{
	uint64_t w, ends;
	unsigned len;

	memcpy(&w, p, sizeof(w)); /* the format is little-endian, and so is this reader */
	ends = ~w & 0x8080808080808080ull;
	if (ends) {
		unsigned bits = (unsigned)__builtin_ctzll(ends) + 1; /* through its last byte */
		w &= ~0ull >> (64 - bits);
		len = bits / 8;
	} else if (p[8] < 0x80) {
		len = 9;
	} else {
		return 0;
	}
	/* the 7-bit groups side by side: pairs into 14 bits, those into 28, into 56 */
	w &= 0x7f7f7f7f7f7f7f7full;
	w = (w & 0x007f007f007f007full) | (w & 0x7f007f007f007f00ull) >> 1;
	w = (w & 0x00003fff00003fffull) | (w & 0x3fff00003fff0000ull) >> 2;
	w = (w & 0x000000000fffffffull) | (w & 0x0fffffff00000000ull) >> 4;
	*v = len == 9 ? w | (uint64_t)p[8] << 56 : w;
	return len;
}

/* A STACK's frames: the first as it is, each other a zigzag step from the one before. */
static void stack_frames(struct dec *d, uint64_t *frames, uint32_t n)
{
	const uint8_t *p = d->p, *end = d->end;
	uint32_t i = 0;

	/* in registers while nine bytes are left: u() keeps its place in *d, a store a field */
	for (uint64_t v; !d->bad && i < n && end - p >= 9; i++) {
		unsigned len = varint_word(p, &v);
		if (!len)
			break;
		p += len;
		frames[i] = i == 0 ? v : frames[i - 1] + (uint64_t)mt_unzigzag(v);
	}
	d->p = p;
	d->field += i;
	for (; i < n && !d->bad; i++)
		frames[i] = i == 0 ? u(d) : frames[i - 1] + (uint64_t)z(d);
}

static struct mt_bytes bytes(struct dec *d, uint32_t max)
{
	struct mt_bytes b = {NULL, 0};
	uint64_t n = u(d);

	if (d->bad)
		return b;
	if (n > max || n > (uint64_t)(d->end - d->p)) {
		d->bad = true;
		return b;
	}
	b.data = d->p;
	b.len = (uint32_t)n;
	d->p += n;
	return b;
}

static inline void time_field(struct dec *d, struct mt_cursor *c)
{
	int64_t dt = z(d);

	if (!d->bad)
		c->time += (uint64_t)dt;
}

static inline uint64_t addr_field(struct dec *d, struct mt_cursor *c)
{
	int64_t da = z(d);

	if (d->bad)
		return 0;
	c->addr += (uint64_t)da;
	return c->addr;
}

static int bad_kind(struct mt_error *err, const struct mt_record *rec, uint64_t kind)
{
	return fail(err, -EBADMSG, rec->offset,
	            "%s record of memory kind %llu, which does not exist",
	            mt_record_name(rec->type), (unsigned long long)kind);
}

static int bad_fields(struct mt_error *err, const struct mt_record *rec, const struct dec *d)
{
	return fail(err, -EBADMSG, rec->offset,
	            "%s record: field %u is cut off by the record's length or is not a valid "
	            "varint",
	            record_names[rec->type], d->field + 1);
}

/*
 * A PYSTACK record: one Python stack that STACK records name by id, so that
 * the many native stacks under one Python stack do not each repeat it.
 */
static int pystack(struct mt_record *rec, struct dec *d, struct mt_error *err)
{
	uint64_t n;

	rec->u.pystack.id = u(d);
	n = u(d);
	if (!d->bad && (n == 0 || n > MT_MAX_PYFRAMES))
		return fail(err, -EBADMSG, rec->offset,
		            "PYSTACK record with %llu Python frames (1 to %d)",
		            (unsigned long long)n, MT_MAX_PYFRAMES);
	rec->u.pystack.n = d->bad ? 0 : (uint32_t)n;
	for (uint32_t i = 0; i < rec->u.pystack.n && !d->bad; i++) {
		uint64_t code = u(d);
		rec->u.pystack.frames[i].code = code >> 1;
		rec->u.pystack.frames[i].entry = code & MT_PYFRAME_ENTRY;
		rec->u.pystack.frames[i].lasti = u(d);
	}
	if (d->bad)
		return bad_fields(err, rec, d);
	if (rec->u.pystack.id == 0)
		return fail(err, -EBADMSG, rec->offset, "PYSTACK record with id 0");
	return 0;
}

static int pycode(struct mt_record *rec, struct dec *d, struct mt_error *err)
{
	rec->u.pycode.id = u(d);
	rec->u.pycode.version = u(d);
	rec->u.pycode.first_line = u(d);
	rec->u.pycode.file = bytes(d, MT_PYCODE_MAX_NAME);
	rec->u.pycode.name = bytes(d, MT_PYCODE_MAX_NAME);
	rec->u.pycode.linetable = bytes(d, MT_PYCODE_MAX_LINETABLE);
	rec->u.pycode.linetable_size = u(d);
	if (d->bad)
		return bad_fields(err, rec, d);
	if (rec->u.pycode.id == 0)
		return fail(err, -EBADMSG, rec->offset, "PYCODE record with id 0");
	if (rec->u.pycode.linetable_size < rec->u.pycode.linetable.len)
		return fail(err, -EBADMSG, rec->offset,
		            "PYCODE record whose line table of %llu bytes holds %u",
		            (unsigned long long)rec->u.pycode.linetable_size,
		            rec->u.pycode.linetable.len);
	return 0;
}

/*
 * A REACH_BLOCKS record: its addresses stay in the trace, checked here once
 * so that mt_reach_blocks_next cannot fail. Each takes a byte at least, so
 * the payload bounds the loop.
 */
static int reach_blocks(struct mt_record *rec, struct dec *d, struct mt_error *err)
{
	rec->u.reach_blocks.cls = u(d);
	rec->u.reach_blocks.n = u(d);
	rec->u.reach_blocks.addrs = d->p;
	for (uint64_t i = 0; i < rec->u.reach_blocks.n && !d->bad; i++)
		u(d);
	rec->u.reach_blocks.end = d->p;
	if (d->bad)
		return bad_fields(err, rec, d);
	if (rec->u.reach_blocks.cls < MT_REACH_DEFINITE ||
	    rec->u.reach_blocks.cls > MT_REACH_REACHABLE)
		return fail(err, -EBADMSG, rec->offset,
		            "REACH_BLOCKS record of class %llu, which does not exist",
		            (unsigned long long)rec->u.reach_blocks.cls);
	return 0;
}

bool mt_reach_blocks_next(const struct mt_record *rec, const uint8_t **pos, uint64_t *addr)
{
	uint64_t v;

	if (*pos >= rec->u.reach_blocks.end || mt_get_varint(pos, rec->u.reach_blocks.end, &v) < 0)
		return false;
	*addr += (uint64_t)mt_unzigzag(v);
	return true;
}

static int keyframe(struct mt_record *rec, struct dec *d, struct mt_error *err)
{
	uint64_t n;

	rec->u.keyframe.round = u(d);
	rec->u.keyframe.instance = u(d);
	rec->u.keyframe.time = u(d);
	rec->u.keyframe.events = u(d);
	rec->u.keyframe.nthreads = u(d);
	rec->u.keyframe.nblocks = u(d);
	rec->u.keyframe.nranges = u(d);
	rec->u.keyframe.nstacks = u(d);
	n = u(d);
	if (!d->bad && n > MT_KIND_COUNT)
		return fail(err, -EBADMSG, rec->offset,
		            "KEYFRAME record with %llu kinds (at most %d)", (unsigned long long)n,
		            MT_KIND_COUNT);
	rec->u.keyframe.nkinds = d->bad ? 0 : (uint32_t)n;
	for (uint32_t i = 0; i < rec->u.keyframe.nkinds && !d->bad; i++) {
		struct mt_key_kind *k = &rec->u.keyframe.kinds[i];
		k->kind = u(d);
		k->allocations = u(d);
		k->frees = u(d);
		k->bytes_allocated = u(d);
		k->peak_bytes = u(d);
		k->peak_blocks = u(d);
		k->peak_time = u(d);
		k->failed = u(d);
		k->unknown_frees = u(d);
		k->inherited_bytes = u(d);
		k->inherited_blocks = u(d);
		if (!d->bad && k->kind >= MT_KIND_COUNT)
			return bad_kind(err, rec, k->kind);
	}
	return d->bad ? bad_fields(err, rec, d) : 0;
}

/* Each parts record's items, the field that names a memory kind (or none), checked. */
static const struct {
	uint8_t fields, kind_field;
} key_shape[] = {
        [MT_REC_KEY_THREADS - MT_REC_KEY_THREADS] = {MT_KT_FIELDS, MT_KEY_FIELDS_MAX},
        [MT_REC_KEY_BLOCKS - MT_REC_KEY_THREADS] = {MT_KB_FIELDS, MT_KB_KIND},
        [MT_REC_KEY_RANGES - MT_REC_KEY_THREADS] = {MT_KR_FIELDS, MT_KEY_FIELDS_MAX},
        [MT_REC_KEY_STACKS - MT_REC_KEY_THREADS] = {MT_KS_FIELDS, MT_KS_KIND},
};

/* A KEY_* parts record: its items stay in the trace, checked here once (each takes
 * a byte a field at least, so the payload bounds the loop). */
static int key_items(struct mt_record *rec, struct dec *d, struct mt_error *err)
{
	unsigned fields = key_shape[rec->type - MT_REC_KEY_THREADS].fields,
	         kind = key_shape[rec->type - MT_REC_KEY_THREADS].kind_field;

	rec->u.key_items.n = u(d);
	rec->u.key_items.fields = fields;
	rec->u.key_items.items = d->p;
	for (uint64_t i = 0; i < rec->u.key_items.n && !d->bad; i++) {
		for (unsigned f = 0; f < fields && !d->bad; f++) {
			uint64_t v = u(d);
			if (f == kind && !d->bad && v >= MT_KIND_COUNT)
				return bad_kind(err, rec, v);
		}
	}
	rec->u.key_items.end = d->p;
	return d->bad ? bad_fields(err, rec, d) : 0;
}

bool mt_key_next(const struct mt_record *rec, const uint8_t **pos, uint64_t v[MT_KEY_FIELDS_MAX])
{
	bool delta = rec->type == MT_REC_KEY_BLOCKS || rec->type == MT_REC_KEY_RANGES;

	if (*pos >= rec->u.key_items.end)
		return false;
	for (uint32_t f = 0; f < rec->u.key_items.fields; f++) {
		uint64_t x;
		if (mt_get_varint(pos, rec->u.key_items.end, &x) < 0)
			return false; /* cannot happen: key_items checked every item */
		v[f] = f == 0 && delta ? v[0] + (uint64_t)mt_unzigzag(x) : x;
	}
	return true;
}

static int decode(struct mt_cursor *c, struct mt_record *rec, struct dec *d, struct mt_error *err)
{
	uint64_t n;

	if (c->skim_events && mt_record_is_event(rec->type)) {
		time_field(d, c);
		return d->bad ? fail(err, -EBADMSG, rec->offset, "%s record without its time",
		                     mt_record_name(rec->type))
		              : 0;
	}
	switch (rec->type) {
	case MT_REC_PROCESS:
		time_field(d, c);
		rec->u.process.pid = u(d);
		rec->u.process.ppid = u(d);
		rec->u.process.origin = u(d);
		rec->u.process.parent_instance = u(d);
		rec->u.process.realtime = u(d);
		rec->u.process.exe = bytes(d, MT_MAX_STRING);
		rec->u.process.cmdline = bytes(d, MT_MAX_STRING);
		rec->u.process.depth = u(d);
		rec->u.process.sampling = d->p < d->end ? u(d) : 0;
		if (!d->bad && rec->u.process.sampling > MT_SAMPLING_MAX)
			return fail(err, -EBADMSG, rec->offset,
			            "PROCESS record with a sampling interval of %llu bytes (at "
			            "most %u)",
			            (unsigned long long)rec->u.process.sampling, MT_SAMPLING_MAX);
		break;
	case MT_REC_MODULE:
		time_field(d, c);
		rec->u.module.base = u(d);
		rec->u.module.path = bytes(d, MT_MAX_STRING);
		rec->u.module.build_id = bytes(d, MT_MAX_BUILD_ID);
		n = u(d);
		if (!d->bad && n > MT_MAX_SEGMENTS)
			return fail(err, -EBADMSG, rec->offset,
			            "MODULE record with %llu segments (at most %d)",
			            (unsigned long long)n, MT_MAX_SEGMENTS);
		rec->u.module.nseg = (uint32_t)n;
		for (uint32_t i = 0; i < rec->u.module.nseg && !d->bad; i++) {
			rec->u.module.seg[i].vaddr = u(d);
			rec->u.module.seg[i].memsz = u(d);
			rec->u.module.seg[i].flags = u(d);
		}
		break;
	case MT_REC_MODULE_GONE:
		time_field(d, c);
		rec->u.module_gone.base = u(d);
		rec->u.module_gone.gen = u(d);
		break;
	case MT_REC_STACK:
		rec->u.stack.id = u(d);
		rec->u.stack.gen = u(d);
		n = u(d);
		if (!d->bad && n > MT_MAX_DEPTH)
			return fail(err, -EBADMSG, rec->offset,
			            "STACK record with %llu frames (at most %d)",
			            (unsigned long long)n, MT_MAX_DEPTH);
		rec->u.stack.n = (uint32_t)n;
		stack_frames(d, rec->u.stack.frames, rec->u.stack.n);
		/* appended: its Python frames' PYSTACK id; a record that ends here has none */
		rec->u.stack.pystack = d->p < d->end ? u(d) : 0;
		break;
	case MT_REC_ALLOC:
		time_field(d, c);
		rec->u.alloc.fn = u(d);
		rec->u.alloc.addr = addr_field(d, c);
		rec->u.alloc.size = u(d);
		rec->u.alloc.stack = u(d);
		/* appended: a CUDA event's kind; else the function's */
		rec->u.alloc.kind = d->p < d->end ? u(d) : mt_fn_kind((unsigned)rec->u.alloc.fn);
		if (rec->u.alloc.kind >= MT_KIND_COUNT)
			return bad_kind(err, rec, rec->u.alloc.kind);
		break;
	case MT_REC_FREE:
		time_field(d, c);
		rec->u.free.fn = u(d);
		rec->u.free.addr = addr_field(d, c);
		rec->u.free.kind = d->p < d->end ? u(d) : mt_fn_kind((unsigned)rec->u.free.fn);
		if (rec->u.free.kind >= MT_KIND_COUNT)
			return bad_kind(err, rec, rec->u.free.kind);
		break;
	case MT_REC_REALLOC:
		time_field(d, c);
		rec->u.realloc.t0 = c->time - u(d);
		rec->u.realloc.fn = u(d);
		rec->u.realloc.old = addr_field(d, c);
		rec->u.realloc.addr = addr_field(d, c);
		rec->u.realloc.size = u(d);
		rec->u.realloc.stack = u(d);
		break;
	case MT_REC_FAIL:
		time_field(d, c);
		rec->u.fail.fn = u(d);
		rec->u.fail.size = u(d);
		rec->u.fail.stack = u(d);
		rec->u.fail.err = u(d);
		rec->u.fail.kind = d->p < d->end ? u(d) : mt_fn_kind((unsigned)rec->u.fail.fn);
		if (rec->u.fail.kind >= MT_KIND_COUNT)
			return bad_kind(err, rec, rec->u.fail.kind);
		/* a CUDA failure: the device's free and total bytes right after it */
		rec->u.fail.device_free = d->p < d->end ? u(d) : 0;
		rec->u.fail.device_total = d->p < d->end ? u(d) : 0;
		break;
	case MT_REC_MMAP:
		time_field(d, c);
		rec->u.mmap.fn = u(d);
		rec->u.mmap.addr = addr_field(d, c);
		rec->u.mmap.len = u(d);
		rec->u.mmap.prot = u(d);
		rec->u.mmap.flags = u(d);
		rec->u.mmap.stack = u(d);
		break;
	case MT_REC_MUNMAP:
		time_field(d, c);
		rec->u.munmap.addr = addr_field(d, c);
		rec->u.munmap.len = u(d);
		break;
	case MT_REC_MREMAP:
		time_field(d, c);
		rec->u.mremap.t0 = c->time - u(d);
		rec->u.mremap.old = addr_field(d, c);
		rec->u.mremap.old_len = u(d);
		rec->u.mremap.addr = addr_field(d, c);
		rec->u.mremap.len = u(d);
		rec->u.mremap.stack = u(d);
		break;
	case MT_REC_SAMPLE:
		time_field(d, c);
		rec->u.sample.ns = u(d);
		n = u(d);
		rec->u.sample.n = n;
		/* a value the record does not have reads 0, unknown: never an earlier record's */
		memset(rec->u.sample.values, 0, sizeof(rec->u.sample.values));
		/* each value takes a byte at least, so the payload bounds this loop */
		for (uint64_t i = 0; i < n && !d->bad; i++) {
			uint64_t v = u(d);
			if (i < MT_SAMPLE_FIELD_COUNT)
				rec->u.sample.values[i] = v;
		}
		break;
	case MT_REC_EXIT:
		time_field(d, c);
		rec->u.exit.how = u(d);
		rec->u.exit.status = u(d);
		/* appended field: a tick/ns pair at the very end of the process */
		rec->u.exit.ns = d->p < d->end ? u(d) : 0;
		break;
	case MT_REC_LOST:
		rec->u.lost.reason = u(d);
		rec->u.lost.count = u(d);
		break;
	case MT_REC_MARK:
		time_field(d, c);
		rec->u.mark.label = bytes(d, 256);
		break;
	case MT_REC_EXEC:
		time_field(d, c);
		rec->u.exec.path = bytes(d, MT_MAX_STRING);
		break;
	case MT_REC_PYCODE:
		return pycode(rec, d, err);
	case MT_REC_PYSTACK:
		return pystack(rec, d, err);
	case MT_REC_REACH:
		rec->u.reach.time = u(d);
		rec->u.reach.status = u(d);
		rec->u.reach.detail = u(d);
		rec->u.reach.blocks = u(d);
		rec->u.reach.bytes = u(d);
		rec->u.reach.scanned = u(d);
		rec->u.reach.ns = u(d);
		rec->u.reach.chunks = d->p < d->end ? u(d) : 0;
		break;
	case MT_REC_REACH_BLOCKS:
		return reach_blocks(rec, d, err);
	case MT_REC_KEYFRAME:
		return keyframe(rec, d, err);
	case MT_REC_KEY_THREADS:
	case MT_REC_KEY_BLOCKS:
	case MT_REC_KEY_RANGES:
	case MT_REC_KEY_STACKS:
		return key_items(rec, d, err);
	case MT_REC_KEY_END:
		rec->u.key_end.instance = u(d);
		rec->u.key_end.round = u(d);
		break;
	case MT_REC_ROUND:
		rec->u.round.round = u(d);
		rec->u.round.time = u(d);
		rec->u.round.usable = u(d);
		rec->u.round.instances = u(d);
		break;
	case MT_REC_COPY:
		rec->u.copy.instance = u(d);
		rec->u.copy.seq = u(d);
		break;
	default:
		return 0; /* unknown: skipped by its length */
	}
	return d->bad ? bad_fields(err, rec, d) : 0;
}

/* Bytes past a record's payload start that every field of an event may read, up to four each. */
#define ROOMY 64

/* The optional kind field of an ALLOC or FREE, else its function's kind (event_fields checks
 * it). */
static inline __attribute__((always_inline)) bool kind_field(const uint8_t **p, const uint8_t *end,
                                                             const uint8_t *lim, bool roomy,
                                                             uint64_t fn, uint64_t *kind)
{
	*kind = mt_fn_kind((unsigned)fn);
	return *p >= end || field(p, end, lim, roomy, kind);
}

/*
 * An ALLOC, FREE or REALLOC decoded straight into *ev: the same fields as
 * decode() in the same order, without its bookkeeping for error messages.
 * false, with nothing of c changed, for anything it does not read whole
 * and valid, or that does not fit an event (a function or a kind past 255,
 * a stack id past 2^32): decode() then reads the record, and says what is
 * wrong. In a skim only the time is read.
 */
static inline __attribute__((always_inline)) bool event_fields(struct mt_cursor *c,
                                                               struct mt_event *ev,
                                                               const uint8_t *p, const uint8_t *end,
                                                               bool roomy)
{
	const uint8_t *lim = c->end;
	uint64_t dt, fn, da, db, v, kind, stack = 0;

	if (!field(&p, end, lim, roomy, &dt) || (roomy && p > end))
		return false;
	if (c->skim_events) {
		c->time += (uint64_t)mt_unzigzag(dt);
		return true;
	}
	switch (ev->type) {
	case MT_REC_ALLOC:
		if (!field(&p, end, lim, roomy, &fn) || !field(&p, end, lim, roomy, &da) ||
		    !field(&p, end, lim, roomy, &ev->size) || !field(&p, end, lim, roomy, &stack))
			return false;
		if (!kind_field(&p, end, lim, roomy, fn, &kind))
			return false;
		ev->addr = c->addr + (uint64_t)mt_unzigzag(da);
		break;
	case MT_REC_FREE:
		if (!field(&p, end, lim, roomy, &fn) || !field(&p, end, lim, roomy, &da))
			return false;
		if (!kind_field(&p, end, lim, roomy, fn, &kind))
			return false;
		ev->addr = c->addr + (uint64_t)mt_unzigzag(da);
		ev->size = 0;
		break;
	default: /* MT_REC_REALLOC */
		if (!field(&p, end, lim, roomy, &v) || !field(&p, end, lim, roomy, &fn) ||
		    !field(&p, end, lim, roomy, &da) || !field(&p, end, lim, roomy, &db) ||
		    !field(&p, end, lim, roomy, &ev->size) || !field(&p, end, lim, roomy, &stack))
			return false;
		kind = MT_KIND_HOST;
		ev->old = c->addr + (uint64_t)mt_unzigzag(da);
		ev->addr = ev->old + (uint64_t)mt_unzigzag(db);
		ev->t0 = c->time + (uint64_t)mt_unzigzag(dt) - v;
		break;
	}
	if (kind >= MT_KIND_COUNT || fn > UINT8_MAX || stack > UINT32_MAX || p > end)
		return false;
	ev->fn = (uint8_t)fn;
	ev->kind = (uint8_t)kind;
	ev->stack = (uint32_t)stack;
	c->addr = ev->addr;
	c->time += (uint64_t)mt_unzigzag(dt);
	ev->time = c->time;
	if (ev->type != MT_REC_REALLOC) {
		ev->t0 = ev->time;
		ev->old = 0;
	}
	return true;
}

static bool fast_event(struct mt_cursor *c, struct mt_event *ev, const uint8_t *p,
                       const uint8_t *end)
{
	return c->end - p >= ROOMY ? event_fields(c, ev, p, end, true)
	                           : event_fields(c, ev, p, end, false);
}

void mt_event_record(const struct mt_event *ev, struct mt_record *rec)
{
	rec->type = ev->type;
	rec->offset = ev->offset;
	rec->length = ev->length;
	rec->time = ev->time;
	switch (ev->type) {
	case MT_REC_ALLOC:
		rec->u.alloc.fn = ev->fn;
		rec->u.alloc.addr = ev->addr;
		rec->u.alloc.size = ev->size;
		rec->u.alloc.stack = ev->stack;
		rec->u.alloc.kind = ev->kind;
		break;
	case MT_REC_FREE:
		rec->u.free.fn = ev->fn;
		rec->u.free.addr = ev->addr;
		rec->u.free.kind = ev->kind;
		break;
	default: /* MT_REC_REALLOC */
		rec->u.realloc.t0 = ev->t0;
		rec->u.realloc.fn = ev->fn;
		rec->u.realloc.old = ev->old;
		rec->u.realloc.addr = ev->addr;
		rec->u.realloc.size = ev->size;
		rec->u.realloc.stack = ev->stack;
		break;
	}
}

#ifdef WORD_BMI2

/*
 * The next varint of w, whose ends are the high bits clear in *ends (the
 * varints before it taken out), *upto the bytes before it as a mask.
 */
static inline __attribute__((always_inline)) uint64_t word_field(uint64_t w, uint64_t *ends,
                                                                 uint64_t *upto)
{
	uint64_t through = *ends ^ (*ends - 1); /* every bit up to its end's */
	uint64_t v = pext(w, (through ^ *upto) & 0x7f7f7f7f7f7f7f7full);

	*upto = through;
	*ends &= *ends - 1;
	return v;
}

/*
 * The bytes of the two varints at the start of w, or 0 when the second does
 * not end in it; *ends are w's ends (high bits clear).
 */
static inline __attribute__((always_inline)) unsigned word_pair(uint64_t w, uint64_t *a,
                                                                uint64_t *b, bool two)
{
	uint64_t ends = ~w & 0x8080808080808080ull, upto = 0, last = ends;

	*a = word_field(w, &ends, &upto);
	if (two) {
		last = ends;
		*b = word_field(w, &ends, &upto);
	}
	/* no end left for the last field: upto is every bit, and the record runs on */
	return last ? (unsigned)__builtin_popcountll(upto) / 8 : 0;
}

/*
 * The fields of a short record read a word at a time, dt and addr from the
 * eight bytes after its type byte, size and the stack's step from the eight
 * after those: a varint byte's branch is mispredicted about as often as a
 * field is one byte long or two. The caller knows the sixteen bytes are in
 * the chunk. Its length, or 0 for a record whose fields are longer (a
 * varint of 5 bytes or more), which the loop of bytes reads.
 */
static inline __attribute__((always_inline)) unsigned short_word(const uint8_t *p, unsigned type,
                                                                 uint64_t *dt, uint64_t *da,
                                                                 uint64_t *size, uint64_t *step)
{
	uint64_t w;
	unsigned n, m;

	memcpy(&w, p, sizeof(w)); /* the format is little-endian, and so is this reader */
	n = word_pair(w, dt, da, true);
	if (type == MT_REC_SHORT_FREE || !n)
		return n;
	memcpy(&w, p + n, sizeof(w));
	m = word_pair(w, size, step, type == MT_REC_SHORT_MALLOC);
	return m ? n + m : 0;
}
#endif

/*
 * A short record (format 3) at c->pos read straight into *ev, as
 * short_record() reads it: false, with nothing of c changed, for one it does
 * not read whole or whose stack does not fit an event; short_record() then
 * reads it, or says what is wrong. In a skim only the time is kept.
 */
static inline __attribute__((always_inline)) bool
short_fast(struct mt_cursor *c, struct mt_event *ev, bool roomy, bool bmi2)
{
	const uint8_t *p = c->pos + 1, *end = c->end;
	unsigned type = *c->pos;
	uint64_t dt, da, size = 0, step = 0, stack;

	(void)bmi2;
#ifdef WORD_BMI2
	unsigned bytes;
	if (bmi2 && roomy && (bytes = short_word(p, type, &dt, &da, &size, &step)) != 0)
		p += bytes;
	else
#endif
	        if (!field(&p, end, end, roomy, &dt) || !field(&p, end, end, roomy, &da) ||
	            (type != MT_REC_SHORT_FREE && !field(&p, end, end, roomy, &size)) ||
	            (type == MT_REC_SHORT_MALLOC && !field(&p, end, end, roomy, &step)) || p > end)
		return false;
	stack = c->stack + (uint64_t)mt_unzigzag(step);
	if (type != MT_REC_SHORT_FREE && stack > UINT32_MAX)
		return false;
	c->time += (uint64_t)mt_unzigzag(dt);
	c->addr += (uint64_t)mt_unzigzag(da);
	if (type != MT_REC_SHORT_FREE)
		c->stack = stack;
	ev->type = type == MT_REC_SHORT_FREE ? MT_REC_FREE : MT_REC_ALLOC;
	ev->fn = type == MT_REC_SHORT_FREE ? MT_FN_FREE : MT_FN_MALLOC;
	ev->kind = MT_KIND_HOST;
	ev->offset = (uint64_t)(c->pos - c->trace->data);
	ev->length = (uint8_t)(p - c->pos - 1);
	ev->time = ev->t0 = c->time;
	ev->addr = c->addr;
	ev->old = 0;
	ev->size = size;
	ev->stack = type == MT_REC_SHORT_FREE ? 0 : (uint32_t)stack;
	c->pos = p;
	return true;
}

/* An event whose length is one byte and whose payload is there whole, at c->pos: true and
 * read into *ev, or false with nothing of c changed. */
static inline __attribute__((always_inline)) bool next_fast_inline(struct mt_cursor *c,
                                                                   struct mt_event *ev, bool bmi2)
{
	const uint8_t *p = c->pos;

	if (!c->done && p < c->end && mt_record_is_short(*p))
		return c->end - p > ROOMY ? short_fast(c, ev, true, bmi2)
		                          : short_fast(c, ev, false, bmi2);
	if (c->done || c->end - p <= 2 || *p < MT_REC_ALLOC ||
	    *p > (c->skim_events ? MT_REC_MREMAP : MT_REC_REALLOC) || p[1] >= 0x80 ||
	    p[1] > c->end - p - 2)
		return false;
	ev->type = *p;
	if (!fast_event(c, ev, p + 2, p + 2 + p[1]))
		return false;
	ev->offset = (uint64_t)(p - c->trace->data);
	ev->length = p[1];
	c->pos = p + 2 + p[1];
	return true;
}

static bool next_fast(struct mt_cursor *c, struct mt_event *ev)
{
	return next_fast_inline(c, ev, false);
}

int mt_cursor_next_event(struct mt_cursor *c, struct mt_event *ev, struct mt_record *rec,
                         struct mt_error *err)
{
	return next_fast(c, ev) ? 2 : mt_cursor_next(c, rec, err);
}

bool mt_cursor_next_fast(struct mt_cursor *c, struct mt_event *ev)
{
	return next_fast(c, ev);
}

static inline __attribute__((always_inline)) size_t
next_events(struct mt_cursor *c, struct mt_event *ev, size_t n, bool bmi2)
{
	/* a copy whose registers stay in registers: ev's stores cannot change it */
	struct mt_cursor at = *c;
	size_t i = 0;

	while (i < n && next_fast_inline(&at, &ev[i], bmi2))
		i++;
	*c = at;
	return i;
}

static inline __attribute__((always_inline)) size_t
events_due(struct mt_cursor *c, struct mt_event *ev, size_t stride, size_t n, uint64_t key,
           uint64_t offset, bool *stopped, bool bmi2)
{
	/*
	 * A copy whose registers stay in registers, as mt_cursor_next_events',
	 * of only what the fast path reads: a run may be a few events long.
	 */
	struct mt_cursor at;
	unsigned char *base = (unsigned char *)ev;
	size_t i = 0;

	at.trace = c->trace;
	at.pos = c->pos;
	at.end = c->end;
	at.time = c->time;
	at.addr = c->addr;
	at.stack = c->stack;
	at.done = c->done;
	at.skim_events = c->skim_events;
	*stopped = false;
	while (i < n) {
		struct mt_event *e = (struct mt_event *)(void *)(base + i * stride);
		if (!next_fast_inline(&at, e, bmi2))
			break;
		i++;
		if ((e->type == MT_REC_REALLOC && e->old != 0) || e->time > key ||
		    (e->time == key && e->offset >= offset)) {
			*stopped = true;
			break;
		}
	}
	c->pos = at.pos;
	c->time = at.time;
	c->addr = at.addr;
	c->stack = at.stack;
	return i;
}

#ifdef WORD_BMI2
__attribute__((target("bmi,bmi2,popcnt"))) static size_t
events_due_bmi2(struct mt_cursor *c, struct mt_event *ev, size_t stride, size_t n, uint64_t key,
                uint64_t offset, bool *stopped)
{
	return events_due(c, ev, stride, n, key, offset, stopped, true);
}
#endif

/* The runs of a trace of several threads come this way: BMI2's reading where the CPU has it. */
size_t mt_cursor_next_events_due(struct mt_cursor *c, struct mt_event *ev, size_t stride, size_t n,
                                 uint64_t key, uint64_t offset, bool *stopped)
{
#ifdef WORD_BMI2
	if (__builtin_cpu_supports("bmi2"))
		return events_due_bmi2(c, ev, stride, n, key, offset, stopped);
#endif
	return events_due(c, ev, stride, n, key, offset, stopped, false);
}

#ifdef WORD_BMI2
__attribute__((target("bmi,bmi2,popcnt"))) static size_t
next_events_bmi2(struct mt_cursor *c, struct mt_event *ev, size_t n)
{
	return next_events(c, ev, n, true);
}
#endif

size_t mt_cursor_next_events(struct mt_cursor *c, struct mt_event *ev, size_t n)
{
#ifdef WORD_BMI2
	/* every CPU with BMI2 has BMI1 and popcnt */
	if (__builtin_cpu_supports("bmi2"))
		return next_events_bmi2(c, ev, n);
#endif
	return next_events(c, ev, n, false);
}

static int cursor_next(struct mt_cursor *c, struct mt_record *rec, struct mt_error *err);

/*
 * A short record (format 3): a type byte and its fields, no length, bounded
 * by the chunk's data; read as the ALLOC of a malloc or the FREE of a free.
 * A record that runs past the end of a cut file's data is the one the file
 * was cut in: the end of what is there.
 */
static int short_record(struct mt_cursor *c, struct mt_record *rec, uint64_t off,
                        struct mt_error *err)
{
	unsigned type = *c->pos;
	struct dec d = {.p = c->pos + 1, .end = c->end};
	uint64_t time = c->time + (uint64_t)z(&d), addr = c->addr + (uint64_t)z(&d);
	uint64_t size = 0, stack = c->stack;

	if (type != MT_REC_SHORT_FREE)
		size = u(&d);
	if (type == MT_REC_SHORT_MALLOC)
		stack += (uint64_t)z(&d);
	if (d.bad) {
		c->done = true;
		if (c->chunk.avail < c->chunk.size)
			return 0;
		return fail(err, -EBADMSG, off,
		            "%s record: field %u runs past the end of its chunk or is not a valid "
		            "varint",
		            record_names[type], d.field + 1);
	}
	c->time = time;
	c->addr = addr;
	c->stack = stack;
	rec->offset = off;
	rec->length = (uint32_t)(d.p - c->pos - 1);
	rec->chunk = &c->chunk;
	rec->thread = 0;
	rec->time = time;
	if (type == MT_REC_SHORT_FREE) {
		rec->type = MT_REC_FREE;
		rec->u.free.fn = MT_FN_FREE;
		rec->u.free.addr = addr;
		rec->u.free.kind = MT_KIND_HOST;
	} else {
		rec->type = MT_REC_ALLOC;
		rec->u.alloc.fn = MT_FN_MALLOC;
		rec->u.alloc.addr = addr;
		rec->u.alloc.size = size;
		rec->u.alloc.stack = stack;
		rec->u.alloc.kind = MT_KIND_HOST;
	}
	c->pos = d.p;
	return 1;
}

/* A chunk that failed its checksum is read up to its first record that does not decode. */
int mt_cursor_next(struct mt_cursor *c, struct mt_record *rec, struct mt_error *err)
{
	int r = cursor_next(c, rec, err);

	if (r < 0 && c->chunk.damaged) {
		c->done = true;
		return 0;
	}
	return r;
}

int mt_cursor_skim(struct mt_cursor *c, struct mt_skim *s, struct mt_record *rec,
                   struct mt_error *err)
{
	const uint8_t *base = c->trace->data;

	memset(s, 0, sizeof(*s));
	s->first_time = UINT64_MAX;
	for (;;) {
		const uint8_t *p = c->pos, *q;
		uint64_t dt;
		int r;

		/* a skim keeps no register but the time */
		if (!c->done && skim_fast(p, c->end, &dt, &q)) {
			c->time += (uint64_t)mt_unzigzag(dt);
			skimmed(s, c->time, (uint64_t)(p - base));
			c->pos = q;
			continue;
		}
		r = mt_cursor_next(c, rec, err);
		if (r <= 0 || !mt_record_is_event(rec->type))
			return r;
		skimmed(s, rec->time, rec->offset);
	}
}

static int cursor_next(struct mt_cursor *c, struct mt_record *rec, struct mt_error *err)
{
	const uint8_t *p = c->pos, *payload;
	struct mt_event ev;
	uint64_t len, off;
	struct dec d;
	int r;

	if (c->done || p >= c->end || *p == MT_REC_END_OF_DATA) {
		c->done = true;
		return 0;
	}
	off = (uint64_t)(p - c->trace->data);
	if (mt_record_is_short(*p))
		return short_record(c, rec, off, err);
	if (next_fast(c, &ev)) {
		if (c->skim_events) {
			rec->type = ev.type;
			rec->offset = ev.offset;
			rec->length = ev.length;
			rec->time = c->time;
		} else {
			mt_event_record(&ev, rec);
		}
		rec->chunk = &c->chunk;
		rec->thread = 0;
		return 1;
	}
	payload = p + 1;
	if (c->chunk.avail < c->chunk.size &&
	    (mt_get_varint(&payload, c->end, &len) < 0 || len > (uint64_t)(c->end - payload))) {
		/* the record the file was cut in: the end of what is there */
		c->done = true;
		return 0;
	}
	payload = p + 1;
	if (mt_get_varint(&payload, c->end, &len) < 0) {
		c->done = true;
		return fail(err, -EBADMSG, off,
		            "record length is not a valid varint or runs past its chunk");
	}
	if (len > (uint64_t)(c->end - payload)) {
		c->done = true;
		return fail(err, -EBADMSG, off,
		            "record of %llu bytes runs past the end of its chunk (%zu bytes left)",
		            (unsigned long long)len, (size_t)(c->end - payload));
	}
	rec->type = *p;
	rec->offset = off;
	rec->length = (uint32_t)len;
	rec->chunk = &c->chunk;
	rec->thread = 0;
	d = (struct dec){.p = payload, .end = payload + len};
	r = decode(c, rec, &d, err);
	if (r < 0) {
		c->done = true;
		return r;
	}
	rec->time = c->time;
	c->pos = payload + len; /* payload bytes past the known fields are ignored */
	return 1;
}
