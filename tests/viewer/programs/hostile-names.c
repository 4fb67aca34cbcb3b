/* SPDX-License-Identifier: MIT */
/*
 * Names that would run script in a page that put them in as HTML: a
 * function whose symbol is markup with quotes (built without debug
 * information, so that the symbol table names it), a mark, and the command
 * line (its arguments). The viewer's test checks they show as text.
 */
#include <dlfcn.h>
#include <stdlib.h>

/* An assembler name may hold any byte but NUL when it is quoted. */
void *hostile(size_t n) __asm__("\"<script>window.__pwned=1</script>'<img src=x "
                                "onerror=window.__pwned=2>\"");

__attribute__((noinline)) void *hostile(size_t n)
{
	return malloc(n);
}

int main(void)
{
	void (*mark)(const char *);

	*(void **)&mark =
	        dlsym(RTLD_DEFAULT, "memtrace_mark"); /* POSIX's way to a function pointer */
	if (mark)
		mark("\"><img src=x onerror=window.__pwned=3>");
	/* left live: a leak, so the name is in every table */
	return hostile(1234) == NULL;
}
