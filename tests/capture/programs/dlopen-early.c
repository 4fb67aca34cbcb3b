/* SPDX-License-Identifier: MIT */
/*
 * An allocation before main (a constructor), a library loaded with dlopen
 * after start whose code allocates (zlib's deflateInit allocates its
 * state), and an ordinary one. Live at exit: the constructor's 777 bytes and
 * the 555-byte block of main; zlib's state is freed by deflateEnd.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *early, *late;

__attribute__((constructor)) static void before_main(void)
{
	early = malloc(777);
}

struct z_stream_s {
	const unsigned char *next_in;
	unsigned avail_in;
	unsigned long total_in;
	unsigned char *next_out;
	unsigned avail_out;
	unsigned long total_out;
	const char *msg;
	void *state;
	void *zalloc, *zfree, *opaque;
	int data_type;
	unsigned long adler, reserved;
};

int main(void)
{
	void *z = dlopen("libz.so.1", RTLD_NOW);
	struct z_stream_s s;

	if (!z)
		return 2;
	int (*init)(struct z_stream_s *, int, const char *, int);
	int (*end)(struct z_stream_s *);
	const char *(*version)(void);
	/* POSIX's way from dlsym's void * to a function pointer */
	*(void **)&init = dlsym(z, "deflateInit_");
	*(void **)&end = dlsym(z, "deflateEnd");
	*(void **)&version = dlsym(z, "zlibVersion");
	if (!init || !end || !version)
		return 3;
	memset(&s, 0, sizeof(s));
	if (init(&s, 6, version(), (int)sizeof(s)) != 0)
		return 4;
	end(&s);
	late = malloc(555);
	return 0;
}
