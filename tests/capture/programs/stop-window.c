/* SPDX-License-Identifier: MIT */
/*
 * late-thread's stop, with main giving its chunk back while the stop is
 * being said. Main fills its standard error, a pipe its runner reads only
 * once told to (the line "drain" on standard output), so a line written
 * there waits. Then the late thread makes its first allocation after the
 * address space is used up. While the thread waits in write(2) (seen in
 * /proc/self/task/TID/syscall), or once its malloc returned (untraced),
 * main allocates once more and says "drain". Prints what the thread's
 * malloc gave, once the thread is gone.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int go[2];
static volatile pid_t late_tid;
static volatile int late_done;
static void *volatile late_block;

static void *late(void *arg)
{
	char c;

	(void)arg;
	late_tid = (pid_t)syscall(SYS_gettid);
	if (read(go[0], &c, 1) != 1)
		return NULL;
	late_block = malloc(1000);
	late_done = 1;
	return NULL;
}

/* Whether thread tid waits in write(2); errors read as not yet. */
static int in_write(pid_t tid)
{
	char path[64], buf[32] = "";
	int fd, n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 2 && buf[0] == '1' && buf[1] == ' ';
}

int main(void)
{
	struct rlimit none = {0, RLIM_INFINITY};
	void *volatile keep = malloc(64);
	char line[64];
	pthread_t t;
	int n;

	if (pipe(go) < 0 || pthread_create(&t, NULL, late, NULL) != 0)
		return 1;
	while (!late_tid)
		sched_yield();
	/* fill standard error: the next write to it waits */
	fcntl(STDERR_FILENO, F_SETFL, O_NONBLOCK);
	while (write(STDERR_FILENO, "x", 1) == 1)
		;
	fcntl(STDERR_FILENO, F_SETFL, 0);
	if (setrlimit(RLIMIT_AS, &none) < 0 || write(go[1], "x", 1) != 1)
		return 1;
	while (!late_done && !in_write(late_tid))
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	free(malloc(100)); /* the tracing, stopped or not, sees main once more */
	if (write(STDOUT_FILENO, "drain\n", 6) != 6)
		return 1;
	pthread_join(t, NULL);
	n = snprintf(line, sizeof(line), "late thread: malloc %s\n",
	             late_block ? "gave a block" : "failed");
	if (write(STDOUT_FILENO, line, (size_t)n) != n) /* no stdio buffer: nothing can be mapped */
		return 1;
	free(late_block);
	free(keep);
	return 0;
}
