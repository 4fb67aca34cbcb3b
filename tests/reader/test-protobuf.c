/* SPDX-License-Identifier: MIT */
/*
 * The exporters' encoders (analyzer/protobuf.c, analyzer/intern.c) on known
 * bytes: protobuf's varints, keys, length-delimited and packed fields as the
 * encoding document's own examples write them, and interned strings that
 * keep their first id, their bytes (NULs too) and the empty string.
 */
#include "intern.h"
#include "protobuf.h"
#include "test-common.h"

static void check_bytes(const struct mt_pb *b, const uint8_t *want, size_t n)
{
	CHECK_EQ(b->n, n);
	CHECK(b->n == n && !memcmp(b->data, want, n));
}

static void test_varints(void)
{
	struct mt_pb b = {0};
	/* field 1 = 150: the encoding document's first example; 300 and 2^64 - 1 */
	static const uint8_t want[] = {0x08, 0x96, 0x01, 0x10, 0xac, 0x02, 0x18, 0xff, 0xff,
	                               0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};

	mt_pb_varint(&b, 1, 150);
	mt_pb_varint(&b, 2, 300);
	mt_pb_varint(&b, 3, UINT64_MAX); /* an int64 of -1, as protobuf writes it: 10 bytes */
	check_bytes(&b, want, sizeof(want));
	mt_pb_free(&b);
}

static void test_length_delimited(void)
{
	struct mt_pb b = {0}, inner = {0};
	static const uint64_t packed[] = {3, 270, 86942};
	/* field 2 = "testing"; field 3 = a message holding field 1 = 150; field 4 packed
	 * [3, 270, 86942] (the document's example); an empty packed field writes nothing */
	static const uint8_t want[] = {0x12, 0x07, 't',  'e',  's',  't',  'i',  'n',
	                               'g',  0x1a, 0x03, 0x08, 0x96, 0x01, 0x22, 0x06,
	                               0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05, 0x2a, 0x00};

	mt_pb_bytes(&b, 2, "testing", 7);
	mt_pb_varint(&inner, 1, 150);
	mt_pb_bytes(&b, 3, inner.data, inner.n);
	mt_pb_packed(&b, 4, packed, 3);
	mt_pb_packed(&b, 6, packed, 0);
	mt_pb_bytes(&b, 5, NULL, 0);
	check_bytes(&b, want, sizeof(want));
	CHECK(!mt_pb_failed(&b));
	mt_pb_clear(&inner);
	CHECK_EQ(inner.n, 0);
	mt_pb_free(&inner);
	mt_pb_free(&b);
}

static void test_intern(void)
{
	struct mt_intern t;
	char name[32];
	size_t len;
	const char *s;

	mt_intern_init(&t);
	CHECK_EQ(mt_intern(&t, "", 0), 0);
	CHECK_EQ(mt_intern(&t, "main", 4), 1);
	CHECK_EQ(mt_intern(&t, "a\0b", 3), 2);
	CHECK_EQ(mt_intern(&t, "a", 1), 3);
	CHECK_EQ(mt_intern(&t, "main", 4), 1);
	CHECK_EQ(mt_intern(&t, "", 0), 0);
	s = mt_intern_get(&t, 2, &len);
	CHECK(len == 3 && !memcmp(s, "a\0b", 3));
	mt_intern_get(&t, 0, &len);
	CHECK_EQ(len, 0);
	/* many, through the map's growth: each keeps its id */
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		CHECK_EQ(mt_intern(&t, name, strlen(name)), 4 + i);
	}
	for (int i = 0; i < 5000; i += 499) {
		snprintf(name, sizeof(name), "f%d", i);
		CHECK_EQ(mt_intern(&t, name, strlen(name)), 4 + i);
		s = mt_intern_get(&t, 4 + (uint32_t)i, &len);
		CHECK(len == strlen(name) && !memcmp(s, name, len));
	}
	CHECK_EQ(t.n, 5004);
	mt_intern_free(&t);
}

int main(void)
{
	test_varints();
	test_length_delimited();
	test_intern();
	if (test_failures)
		fprintf(stderr, "%d check(s) failed\n", test_failures);
	return test_failures ? 1 : 0;
}
