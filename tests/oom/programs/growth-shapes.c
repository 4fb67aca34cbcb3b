/* SPDX-License-Identifier: MIT */
/*
 * Live memory of known shapes, for the growth diagnosis: what a stack keeps
 * over STEPS steps, each step also allocating and freeing a scratch block
 * (not growth). Each step is named in the trace through memtrace_mark when
 * the last argument is "marks", looked up at run time so that the program
 * also runs untraced.
 *
 * growth-shapes SHAPE STEPS marks|nomarks, SHAPE one of
 *   leak     keeps 100 MiB / STEPS every step: 100 MiB in all, the truth
 *   startup  190 MiB at start-up, then steady steps: no growth
 *   plateau  keeps 1 MiB a step in the first half, then steady: no growth
 *   fall     keeps 1 MiB a step in the first half, frees it in the second
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB       (1024 * 1024)
#define MAX_STEPS 1000

static char *kept[MAX_STEPS];

/* resident, as real data is */
static char *fill(size_t size)
{
	char *p = malloc(size);

	if (!p) {
		perror("malloc");
		exit(1);
	}
	memset(p, 1, size);
	return p;
}

static void keep(int step, size_t size)
{
	kept[step] = fill(size);
}

static void load_model(void)
{
	kept[MAX_STEPS - 1] = fill(190 * MiB);
}

static void scratch(void)
{
	free(fill(MiB));
}

int main(int argc, char **argv)
{
	int (*mark)(const char *) = NULL;
	struct timespec pause = {0, 2 * 1000 * 1000};
	const char *shape;
	char label[32];
	int steps;

	if (argc != 4) {
		fprintf(stderr,
		        "usage: growth-shapes leak|startup|plateau|fall STEPS marks|nomarks\n");
		return 2;
	}
	shape = argv[1];
	steps = atoi(argv[2]);
	if (steps < 2 || steps >= MAX_STEPS)
		return 2;
	if (!strcmp(argv[3], "marks"))
		*(void **)&mark = dlsym(RTLD_DEFAULT, "memtrace_mark"); /* POSIX's way */
	if (!strcmp(shape, "startup"))
		load_model();
	for (int step = 0; step < steps; step++) {
		if (mark) {
			snprintf(label, sizeof(label), "step %d", step);
			mark(label);
		}
		scratch();
		if (!strcmp(shape, "leak"))
			keep(step, (size_t)100 * MiB / (size_t)steps);
		else if (strcmp(shape, "startup") && step < steps / 2)
			keep(step, MiB);
		else if (!strcmp(shape, "fall") && step >= steps / 2)
			free(kept[step - steps / 2]);
		nanosleep(&pause, NULL);
	}
	return 0;
}
