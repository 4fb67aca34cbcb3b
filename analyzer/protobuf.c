/* SPDX-License-Identifier: MIT */
/*
 * The protocol buffers encoder (protobuf.h). A key is the field number
 * shifted left by 3 with the wire type in the low bits: 0 varint, 2
 * length-delimited.
 */
#include <stdlib.h>
#include <string.h>

#include "protobuf.h"

#define WIRE_VARINT 0
#define WIRE_LEN    2

static bool reserve(struct mt_pb *b, size_t more)
{
	size_t cap;
	void *p;

	if (b->failed)
		return false;
	if (b->n + more <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < b->n + more)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p) {
		b->failed = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

static void put_varint(struct mt_pb *b, uint64_t v)
{
	if (!reserve(b, 10))
		return;
	while (v >= 0x80) {
		b->data[b->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->data[b->n++] = (uint8_t)v;
}

static size_t varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

void mt_pb_varint(struct mt_pb *b, uint32_t field, uint64_t v)
{
	put_varint(b, (uint64_t)field << 3 | WIRE_VARINT);
	put_varint(b, v);
}

void mt_pb_bytes(struct mt_pb *b, uint32_t field, const void *data, size_t n)
{
	put_varint(b, (uint64_t)field << 3 | WIRE_LEN);
	put_varint(b, n);
	if (!n || !reserve(b, n))
		return;
	memcpy(b->data + b->n, data, n);
	b->n += n;
}

void mt_pb_packed(struct mt_pb *b, uint32_t field, const uint64_t *v, size_t n)
{
	size_t len = 0;

	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		len += varint_size(v[i]);
	put_varint(b, (uint64_t)field << 3 | WIRE_LEN);
	put_varint(b, len);
	for (size_t i = 0; i < n; i++)
		put_varint(b, v[i]);
}

void mt_pb_clear(struct mt_pb *b)
{
	b->n = 0;
}

void mt_pb_free(struct mt_pb *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}
