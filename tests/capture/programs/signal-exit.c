/* SPDX-License-Identifier: MIT */
/*
 * signal-exit: the main thread mallocs and frees without end; a timer's
 * signal handler calls _exit(3), usually while the main thread is inside
 * malloc or free (holding glibc's arena lock). Untraced it exits 3 at once.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>
#include <unistd.h>

static void handler(int sig)
{
	(void)sig;
	_exit(3);
}

int main(void)
{
	struct itimerval t = {.it_value = {.tv_usec = 20000}};
	void *keep[64] = {0};

	signal(SIGALRM, handler);
	setitimer(ITIMER_REAL, &t, NULL);
	for (unsigned long i = 0;; i++) {
		free(keep[i % 64]);
		keep[i % 64] = malloc(16 + i % 4000);
	}
}
