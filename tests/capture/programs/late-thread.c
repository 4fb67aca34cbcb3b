/* SPDX-License-Identifier: MIT */
/*
 * A thread whose first allocation comes after the address space is used up:
 * main allocates, starts the thread, lowers RLIMIT_AS to nothing and only
 * then lets the thread run. glibc serves the thread's malloc from the main
 * arena (no new mapping), so the program itself goes on, but nothing new can
 * be mapped: not the thread's arena, and under memtrace not the thread's first
 * chunk of the trace. Prints what the thread's malloc gave.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

static int go[2];

static void *late(void *arg)
{
	char c, line[64];
	void *p;
	int n;

	(void)arg;
	if (read(go[0], &c, 1) != 1)
		return NULL;
	p = malloc(1000);
	n = snprintf(line, sizeof(line), "late thread: malloc %s\n", p ? "gave a block" : "failed");
	if (write(STDOUT_FILENO, line, (size_t)n) != n)
		exit(2);
	free(p);
	return NULL;
}

int main(void)
{
	struct rlimit none = {0, RLIM_INFINITY};
	void *volatile keep = malloc(64);
	pthread_t t;

	if (pipe(go) < 0 || pthread_create(&t, NULL, late, NULL) != 0)
		return 1;
	if (setrlimit(RLIMIT_AS, &none) < 0)
		return 1;
	if (write(go[1], "x", 1) != 1)
		return 1;
	pthread_join(t, NULL);
	free(keep);
	return 0;
}
