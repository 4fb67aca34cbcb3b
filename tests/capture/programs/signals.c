/* SPDX-License-Identifier: MIT */
/*
 * Maps and unmaps memory in a SIGALRM handler (every 100 us) while the main
 * loop allocates and frees: a signal may land anywhere inside memtrace's own
 * recording of the main loop's events, and the handler's mmap goes through
 * memtrace's hook too. The handler uses mmap because it is async-signal-safe:
 * malloc in a handler can deadlock glibc itself, with or without memtrace.
 * Must neither crash nor deadlock; prints whether handler calls ran.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>

static volatile sig_atomic_t handled;

static void on_alarm(int sig)
{
	void *p;

	(void)sig;
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED)
		munmap(p, 4096);
	handled++;
}

int main(void)
{
	struct itimerval every = { { 0, 100 }, { 0, 100 } };
	void *volatile p;

	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &every, NULL);
	for (long i = 0; i < 3000000 && handled < 2000; i++) {
		p = malloc(16 + (size_t)(i & 127));
		free(p);
	}
	every.it_value.tv_usec = every.it_interval.tv_usec = 0;
	setitimer(ITIMER_REAL, &every, NULL);
	printf("handled %s\n", handled > 0 ? "some" : "none");
	return 0;
}
