/* SPDX-License-Identifier: MIT */
/*
 * Translation of one CUDA driver API callback into memtrace capture calls.
 *
 * This is the half of libmemtrace-cupti.so that knows what the driver's
 * memory functions mean (which parameter is the address, which the size,
 * which memory kind a call touches) and nothing of CUPTI itself: cupti.c
 * fills a struct mt_cupti_call from CUPTI's callback data, and the test fills
 * it by hand. The result goes out through a struct mt_cupti_sink, which in
 * production is libmemtrace.so's capture API plus a few driver queries, and
 * in tests a recorder.
 *
 * It may not talk to CUPTI or the driver except through the sink, allocate,
 * print, or change errno: it runs inside the traced program's driver calls.
 */
#ifndef MEMTRACE_CUPTI_TRANSLATE_H
#define MEMTRACE_CUPTI_TRANSLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where in the driver call a callback is, as CUPTI's callbackSite says. */
enum mt_cupti_site {
	MT_CUPTI_ENTER = 0,
	MT_CUPTI_EXIT = 1,
};

/* One driver API callback, as cupti.c (or a test) sees it. */
struct mt_cupti_call {
	uint32_t cbid; /* CUPTI_DRIVER_TRACE_CBID_* */
	enum mt_cupti_site site;
	uint64_t correlation; /* CUPTI's correlationId: the same at enter and exit */
	const void *params;   /* the function's *_params struct (generated_cuda_meta.h) */
	int result;           /* the CUresult; meaningful at exit only */
	int device;           /* ordinal of the context's device; -1 when unknown */
};

/*
 * Where the records go. stack, alloc, free, fail and runtime_active are
 * libmemtrace.so's memtrace_capture_* functions (include/memtrace/capture.h)
 * and are required. The queries may be NULL; each answers false when it
 * cannot tell.
 */
struct mt_cupti_sink {
	uint32_t (*stack)(void);
	void (*alloc)(uint32_t stack, unsigned fn, unsigned kind, uint64_t addr, uint64_t size);
	void (*free)(unsigned fn, unsigned kind, uint64_t addr);
	void (*fail)(uint32_t stack, unsigned fn, unsigned kind, uint64_t size, int err,
	             uint64_t device_free, uint64_t device_total);
	bool (*runtime_active)(void);
	/* free and total bytes of device (cuMemGetInfo), taken right after a failure */
	bool (*mem_get_info)(int device, uint64_t *free_bytes, uint64_t *total_bytes);
	/* the memory kind (enum mt_kind) of a live device or managed pointer */
	bool (*pointer_kind)(uint64_t addr, unsigned *kind);
	/* the memory kind of a live cuMemCreate allocation handle */
	bool (*handle_kind)(uint64_t handle, unsigned *kind);
};

/*
 * Translates one callback. Context: inside a driver API call of the traced
 * program, on its thread, at API entry or exit. Callbacks of ids not in
 * mt_cupti_callback_ids are ignored.
 */
void mt_cupti_translate(const struct mt_cupti_sink *sink, const struct mt_cupti_call *call);

/* A memory the trace format cannot name (a device beyond MT_MAX_CUDA_DEVICES). */
#define MT_CUPTI_NO_KIND (~0u)

/* The kind (enum mt_kind) of device memory; MT_CUPTI_NO_KIND when there is none. */
unsigned mt_cupti_device_kind(int device);

/* The kind of memory at a CUmemLocation (its type and id). */
unsigned mt_cupti_location_kind(int type, int id);

/* The driver callback ids mt_cupti_translate handles: the ones to enable. */
extern const uint32_t mt_cupti_callback_ids[];
extern const size_t mt_cupti_callback_id_count;

/* Most driver calls in flight on one thread whose entry stacks are kept. */
#define MT_CUPTI_MAX_NESTING 8

#endif
