/* SPDX-License-Identifier: MIT */
/*
 * Protocol buffers' wire format, the little of it an exporter writes:
 * varint fields, length-delimited fields (bytes, strings, messages) and
 * packed repeated varints, appended to a growing buffer. A message inside
 * another is encoded into a buffer of its own and appended whole, its
 * length known.
 *
 * Errors stick: after a failed allocation every call does nothing and
 * mt_pb_failed() is true, so a writer checks once at the end.
 *
 * May not: print.
 */
#ifndef MEMTRACE_ANALYZER_PROTOBUF_H
#define MEMTRACE_ANALYZER_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mt_pb {
	uint8_t *data;
	size_t n, cap;
	bool failed;
};

/* A varint field (int64 values as their two's complement, as protobuf does). */
void mt_pb_varint(struct mt_pb *b, uint32_t field, uint64_t v);
/* A length-delimited field: a string, bytes, or a message encoded apart. */
void mt_pb_bytes(struct mt_pb *b, uint32_t field, const void *data, size_t n);
/* A packed repeated varint field (nothing for n 0). */
void mt_pb_packed(struct mt_pb *b, uint32_t field, const uint64_t *v, size_t n);
/* Empties b, keeping its memory (and its failure). */
void mt_pb_clear(struct mt_pb *b);
void mt_pb_free(struct mt_pb *b);
static inline bool mt_pb_failed(const struct mt_pb *b)
{
	return b->failed;
}

#endif
