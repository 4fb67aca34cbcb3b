/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of analyzer/label.c: which names are plumbing (the glob, the
 * parameter list and return type left out, the user's patterns and their
 * "::"), and which frame of a stack is its label.
 */
#include <stdbool.h>

#include "label.h"
#include "test-common.h"

static void test_plumbing(void)
{
	CHECK(mt_label_is_plumbing("c10::alloc_cpu(unsigned long)", NULL));
	CHECK(mt_label_is_plumbing("operator new[](unsigned long)", NULL));
	CHECK(mt_label_is_plumbing("operator new(unsigned long, std::align_val_t)", NULL));
	CHECK(mt_label_is_plumbing("xmalloc", NULL));
	CHECK(mt_label_is_plumbing(
	        "std::__new_allocator<int>::allocate(unsigned long, void const*)", NULL));
	/* a template instance's return type goes before its name */
	CHECK(mt_label_is_plumbing(
	        "at::Tensor at::detail::empty_generic<long>(c10::ArrayRef<long>)", NULL));
	CHECK(mt_label_is_plumbing("c10::DefaultCPUAllocator::allocate(unsigned long) const",
	                           NULL));
	CHECK(!mt_label_is_plumbing("at::native::zeros_symint(c10::ArrayRef<c10::SymInt>)", NULL));
	CHECK(!mt_label_is_plumbing("xmalloc_user", NULL));
	CHECK(!mt_label_is_plumbing("main", NULL));
	CHECK(!mt_label_is_plumbing(NULL, NULL));
	/* brackets are no character class: `new[]` is literal */
	CHECK(!mt_label_is_plumbing("operator delete[](void*)", NULL));

	/* the user's patterns: ':' separates, "::" belongs to a name */
	CHECK(mt_label_is_plumbing("pool_get(int)", "mylib_*:pool_get"));
	CHECK(mt_label_is_plumbing("mylib_alloc", "mylib_*:pool_get"));
	CHECK(mt_label_is_plumbing("my::Arena::get(unsigned long)", "x:my::Arena::*:y"));
	CHECK(!mt_label_is_plumbing("my", "x:my::Arena::*:y"));
	CHECK(!mt_label_is_plumbing("pool", "mylib_*:pool_get"));
	CHECK(!mt_label_is_plumbing("anything", ":::"));
	CHECK(mt_label_is_plumbing("pool_gets", "pool_get?"));
	CHECK(!mt_label_is_plumbing("pool_get", "pool_get?"));

	CHECK_EQ(mt_label_name_length("f(int) const"), 1);
	CHECK_EQ(mt_label_name_length("(anonymous namespace)::g(void (*)(int))"), 24);
	CHECK_EQ(mt_label_name_length("operator()(int)"), 10);
	CHECK_EQ(mt_label_name_length("main"), 4);
}

static void test_label_frame(void)
{
	struct mt_sym torch[] = {
	        {.function = "c10::alloc_cpu(unsigned long)"},
	        {.function = NULL}, /* DefaultCPUAllocator::allocate, stripped */
	        {.function = "at::detail::empty_generic(c10::ArrayRef<long>)"},
	        {.function = NULL}, /* a dispatcher wrapper */
	        {.function = "at::native::zeros_symint(c10::ArrayRef<c10::SymInt>)"},
	        {.function = "main"},
	};
	struct mt_sym unnamed_first[] = {{.function = NULL}, {.function = "PyList_New"}};
	struct mt_sym unnamed_only[] = {
	        {.function = "xmalloc"}, {.function = NULL}, {.function = NULL}};
	struct mt_sym all_plumbing[] = {{.function = "xmalloc"}, {.function = "g_malloc"}};

	CHECK_EQ(mt_label_frame(torch, 6, NULL), 4);
	CHECK_EQ(mt_label_frame(torch, 6, "at::native::zeros*"), 5);
	CHECK_EQ(mt_label_frame(unnamed_first, 2, NULL), 1);
	CHECK_EQ(mt_label_frame(unnamed_only, 3, NULL), 1);
	CHECK_EQ(mt_label_frame(all_plumbing, 2, NULL), 1);
	CHECK_EQ(mt_label_frame(torch + 5, 1, NULL), 0);
}

int main(void)
{
	test_plumbing();
	test_label_frame();
	if (test_failures)
		fprintf(stderr, "%d check(s) failed\n", test_failures);
	return test_failures ? 1 : 0;
}
