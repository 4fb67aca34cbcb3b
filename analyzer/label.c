/* SPDX-License-Identifier: MIT */
/*
 * Stack labels (label.h): the built-in list of allocation plumbing, a glob
 * matcher of our own (fnmatch would take the brackets of `operator new[]`
 * and of templates for character classes) and the pick of the label frame.
 *
 * May not: print, read the environment, allocate.
 */
#include <string.h>

#include "label.h"

/*
 * The functions that only pass an allocation on, as they read in real
 * stacks (docs/labels.md lists them; keep the two in step). Patterns are
 * matched against the name without parameters, so most need no `*`.
 */
static const char *const builtin[] = {
        /* C++ */
        "operator new*",
        "std::allocator*",
        "std::__new_allocator*",
        "__gnu_cxx::new_allocator*",
        "std::*::_M_*", /* libstdc++'s members of its own: _M_allocate, _M_create... */
        "std::vector<*>::resize",
        "std::vector<*>::reserve",
        "std::vector<*>::push_back",
        "std::vector<*>::emplace_back*",
        "std::vector<*>::insert",
        "std::vector<*>::vector",
        /* C wrappers, the allocator's own names (ld.so's inline calloc, a
         * program's own malloc calling ours) and libc's callers of malloc */
        "malloc",
        "calloc",
        "realloc",
        "reallocarray",
        "aligned_alloc",
        "posix_memalign",
        "memalign",
        "xmalloc",
        "xcalloc",
        "xrealloc",
        "xstrdup",
        "xstrndup",
        "strdup",
        "strndup",
        "__strdup",
        "__strndup",
        "__libc_*",
        "g_malloc*",
        "g_malloc0*",
        "g_try_malloc*",
        "g_realloc*",
        "g_try_realloc*",
        "g_strdup*",
        "g_memdup*",
        /* PyTorch: the CPU allocator and the factories and dispatch above it */
        "c10::alloc_cpu",
        "c10::DefaultCPUAllocator::*",
        "c10::*Allocator*::allocate",
        "c10::*Allocator*::allocate_*",
        "c10::StorageImpl::StorageImpl",
        "c10::make_intrusive<c10::StorageImpl*",
        "at::empty*",
        "at::detail::empty*",
        "at::native::empty*",
        "at::_ops::empty*",
        /* CPython's allocators */
        "PyMem_*",
        "_PyMem_*",
        "PyObject_Malloc",
        "PyObject_Calloc",
        "PyObject_Realloc",
        "_PyObject_*alloc*",
        "_PyObject_*Alloc*",
        "_PyObject_GC_New*",
        "_PyObject_New*",
        "PyType_GenericAlloc",
};

/* Whether s[0..n) matches the whole of p[0..pn): `*` any run, `?` one character. */
static bool glob(const char *p, size_t pn, const char *s, size_t n)
{
	size_t pi = 0, si = 0, star_p = (size_t)-1, star_s = 0;

	/* the classic linear matcher: on a mismatch, let the last star take one more character */
	while (si < n) {
		if (pi < pn && p[pi] == '*') {
			star_p = pi++;
			star_s = si;
		} else if (pi < pn && (p[pi] == '?' || p[pi] == s[si])) {
			pi++;
			si++;
		} else if (star_p != (size_t)-1) {
			pi = star_p + 1;
			si = ++star_s;
		} else {
			return false;
		}
	}
	while (pi < pn && p[pi] == '*')
		pi++;
	return pi == pn;
}

size_t mt_label_name_length(const char *f)
{
	size_t n = strlen(f), end = n;
	int depth = 0;

	if (n >= 6 && !strcmp(f + n - 6, " const"))
		end = n - 6;
	if (!end || f[end - 1] != ')')
		return n;
	/* back to the '(' that opens the trailing group: nested groups are parameters' types */
	for (size_t i = end; i-- > 0;) {
		if (f[i] == ')')
			depth++;
		else if (f[i] == '(' && --depth == 0)
			return i;
	}
	return n;
}

/*
 * Whether pattern p (pn bytes) matches the name: whole, or without its
 * parameters, or without its parameters from after any space outside
 * brackets (a template instance's return type: `at::Tensor at::empty<...>`).
 */
static bool matches(const char *p, size_t pn, const char *f, size_t n, size_t bare)
{
	int depth = 0;

	if (glob(p, pn, f, n))
		return true;
	for (size_t start = 0; start < bare; start++) {
		char c = f[start];
		if (c == '<' || c == '(')
			depth++;
		else if ((c == '>' || c == ')') && depth > 0)
			depth--;
		if ((start == 0 || (depth == 0 && f[start - 1] == ' ')) &&
		    glob(p, pn, f + start, bare - start))
			return true;
	}
	return false;
}

/* The length of the first of a list of patterns: up to a ':' that is not half of a C++ "::". */
static size_t pattern_length(const char *list)
{
	size_t i = 0;

	for (; list[i]; i++) {
		if (list[i] != ':')
			continue;
		if (list[i + 1] == ':') {
			i++;
			continue;
		}
		break;
	}
	return i;
}

bool mt_label_is_plumbing(const char *function, const char *user)
{
	size_t n, bare;

	if (!function)
		return false; /* an address we cannot name may be anyone's */
	n = strlen(function);
	bare = mt_label_name_length(function);
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (matches(builtin[i], strlen(builtin[i]), function, n, bare))
			return true;
	while (user && *user) {
		size_t pn = pattern_length(user);
		if (pn && matches(user, pn, function, n, bare))
			return true;
		user += pn + (user[pn] == ':');
	}
	return false;
}

struct patterns {
	const struct mt_sym *syms;
	const char *user;
};

static enum mt_label_class class_by_patterns(void *ctx, int i)
{
	const struct patterns *p = ctx;
	const char *f = p->syms[i].function;

	return !f                                 ? MT_LABEL_UNNAMED
	       : mt_label_is_plumbing(f, p->user) ? MT_LABEL_PLUMBING
	                                          : MT_LABEL_NAMED;
}

int mt_label_frame(const struct mt_sym *syms, int n, const char *user)
{
	struct patterns p = {syms, user};

	return mt_label_frame_by(n, class_by_patterns, &p);
}

int mt_label_frame_by(int n, enum mt_label_class (*class_of)(void *ctx, int i), void *ctx)
{
	for (int i = 0; i < n; i++) {
		int named = i;
		enum mt_label_class c = MT_LABEL_UNNAMED;
		/*
		 * Frames without a name (a library's local functions, their
		 * symbols stripped: libc10's DefaultCPUAllocator::allocate, the
		 * dispatcher's wrappers) are read as part of the next named frame
		 * outward, which a person can read: skipped with it when it is
		 * plumbing, else it is the label. With no named frame after them,
		 * the first of them is the best there is.
		 */
		while (named < n && (c = class_of(ctx, named)) == MT_LABEL_UNNAMED)
			named++;
		if (named == n)
			return i;
		if (c != MT_LABEL_PLUMBING)
			return named;
		i = named;
	}
	return n > 0 ? n - 1 : 0;
}
