/* SPDX-License-Identifier: MIT */
/*
 * A job whose memory climbs by exactly 1 MiB per step, for the growth
 * diagnosis: each step parses a batch, keeps its 16 records of 64 KiB in a
 * history that is never trimmed (the bug), and frees its scratch buffer.
 * Each step is named in the trace through memtrace_mark, looked up at run
 * time so that the program also runs untraced.
 *
 * grows-per-step [STEPS]: STEPS steps (30 by default) of 20 ms each. The
 * truth the test checks against: 1 MiB per mark, all from keep_records.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RECORDS_PER_STEP 16
#define RECORD_SIZE (64 << 10)
#define MAX_STEPS 1000

static char *history[MAX_STEPS * RECORDS_PER_STEP];

static void keep_records(int step)
{
	for (int i = 0; i < RECORDS_PER_STEP; i++) {
		char *r = malloc(RECORD_SIZE);
		memset(r, step, RECORD_SIZE); /* resident, as real records are */
		history[step * RECORDS_PER_STEP + i] = r;
	}
}

static void parse_batch(int step)
{
	char *scratch = malloc(256 << 10); /* freed: not growth */

	memset(scratch, step, 256 << 10);
	free(scratch);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 30;
	int (*mark)(const char *);
	struct timespec pause = {0, 20 * 1000 * 1000};
	char label[32];

	if (steps < 1 || steps > MAX_STEPS)
		steps = 30;
	*(void **)&mark = dlsym(RTLD_DEFAULT, "memtrace_mark"); /* POSIX's way to a function pointer */
	for (int step = 0; step < steps; step++) {
		parse_batch(step);
		keep_records(step);
		if (mark) {
			snprintf(label, sizeof(label), "step %d", step);
			mark(label);
		}
		nanosleep(&pause, NULL);
	}
	printf("%d steps, %d MiB kept\n", steps, steps * RECORDS_PER_STEP * RECORD_SIZE >> 20);
	return 0;
}
