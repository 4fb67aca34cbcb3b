/* SPDX-License-Identifier: MIT */
/*
 * Allocates in a SIGALRM handler (every 100 us) while the main loop
 * allocates and frees: a signal may land inside memtrace's own recording.
 * Must neither crash nor deadlock; prints how many handler calls ran.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static volatile sig_atomic_t handled;
static void *volatile in_handler;

static void on_alarm(int sig)
{
	(void)sig;
	free(in_handler);
	in_handler = malloc(48); /* not async-signal-safe; programs do it anyway */
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
