/* SPDX-License-Identifier: MIT */
/* Linked before next-b: its dlsym(RTLD_NEXT) must find next-b's next_probe (dlsym-probe.c). */
#include <dlfcn.h>

char next_probe(void);

char next_probe(void)
{
	return 'a';
}

char probe_after_a(void);

char probe_after_a(void)
{
	char (*f)(void);

	*(void **)&f = dlsym(RTLD_NEXT, "next_probe");
	return f ? f() : '-';
}
