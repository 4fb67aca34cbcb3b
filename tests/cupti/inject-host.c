/* SPDX-License-Identifier: MIT */
/*
 * A program that does what the CUDA driver does with CUDA_INJECTION64_PATH:
 * it loads the library named in argv[1] and calls its InitializeInjection.
 * No driver exists on the machines this runs on, so this stands in for the
 * driver's part only; the rest is an ordinary program whose output and exit
 * status test-cupti-inject.py compares with a run that loads nothing.
 *
 *   inject-host LIBRARY   load and initialize LIBRARY, then do the work
 *   inject-host LIBRARY LOG   the same, with LOG, a file of its own, at
 *                         descriptor 2 in place of its standard error (as a
 *                         daemon's log) before the library is loaded
 *   inject-host           do the work only
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int work(void)
{
	unsigned sum = 0;

	for (int i = 0; i < 100; i++) {
		unsigned char *p = malloc(1000 + (size_t)i);

		if (!p)
			return 1;
		memset(p, i, 1000);
		sum += p[999];
		free(p);
	}
	printf("work done: %u\n", sum);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2) {
		close(STDERR_FILENO);
		if (open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) != STDERR_FILENO)
			return 96;
	}
	if (argc > 1) {
		void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		int (*init)(void);

		if (!lib) {
			fprintf(stderr, "inject-host: %s\n", dlerror());
			return 99;
		}
		*(void **)&init = dlsym(lib, "InitializeInjection");
		if (!init) {
			fprintf(stderr, "inject-host: no InitializeInjection in %s\n", argv[1]);
			return 98;
		}
		/* the driver calls it once; a second call must say nothing more */
		printf("InitializeInjection: %d", init());
		printf(" %d\n", init());
	} else {
		printf("InitializeInjection: 1 1\n");
	}
	if (work())
		return 97;
	fflush(stdout);
	return 3; /* an exit status of its own, to see it come through */
}
