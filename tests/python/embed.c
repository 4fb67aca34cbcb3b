/* SPDX-License-Identifier: MIT */
/*
 * A C program that embeds CPython by dlopen (as plugins and game engines
 * do): the interpreter arrives after memtrace started, so its frames are
 * found only if memtrace looks again after a dlopen. `embed LIBPYTHON`
 * runs one line that keeps a bytearray(7000000) (malloc of 7,000,001
 * bytes) and ends with _exit(0), the block still live.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	void (*initialize)(void);
	int (*run)(const char *);
	void *lib;

	if (argc != 2) {
		fprintf(stderr, "usage: %s LIBPYTHON\n", argv[0]);
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	*(void **)&initialize = dlsym(lib, "Py_Initialize");
	*(void **)&run = dlsym(lib, "PyRun_SimpleString");
	if (!initialize || !run)
		return 1;
	initialize();
	if (run("keep = bytearray(7000000)\n") != 0)
		return 1;
	fflush(stdout);
	_exit(0);
}
