/* SPDX-License-Identifier: MIT */
/*
 * signal-target PIDFILE MODE: the program of memtrace run's signal tests.
 * Sets up its signals, writes its pid to PIDFILE (whole, by a rename: the
 * test waits for the file, so a signal never comes before the handlers are
 * in place) and allocates in a loop, one small block per millisecond (a few
 * KiB of trace a second, should a test leave it running), until a signal
 * ends it. MODE:
 *   die    every signal has its default action: SIGTERM and SIGINT kill it;
 *   catch  SIGINT is handled: the program exits with status 3;
 *   count  each SIGINT, SIGQUIT, SIGHUP and SIGUSR1 writes a line to stdout
 *          naming it and its sender: "INT terminal" (si_code SI_KERNEL),
 *          "HUP pid 1234" (kill() by process 1234); SIGUSR2 writes "end"
 *          and exits 0. Two SIGINTs that come while one is pending are
 *          one; the sender of the one delivered tells a second.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t ended;

static void say(const char *line)
{
	if (write(STDOUT_FILENO, line, strlen(line)) < 0) {
		/* the test sees the missing line */
	}
}

/* async-signal-safe: no stdio */
static void on_signal(int sig, siginfo_t *info, void *context)
{
	const char *name = sig == SIGINT    ? "INT"
	                   : sig == SIGQUIT ? "QUIT"
	                   : sig == SIGHUP  ? "HUP"
	                                    : "USR1";
	char line[64] = "", pid[16], *digit = pid + sizeof(pid) - 1;
	unsigned v = (unsigned)info->si_pid;

	(void)context;
	*digit = 0;
	do
		*--digit = (char)('0' + v % 10);
	while (v /= 10);
	strcat(line, name);
	strcat(line, info->si_code == SI_KERNEL ? " terminal" : " pid ");
	if (info->si_code != SI_KERNEL)
		strcat(line, digit);
	strcat(line, "\n");
	say(line);
}

static void stop(int sig)
{
	(void)sig;
	ended = 1;
}

static void handle(int sig, void (*handler)(int))
{
	struct sigaction sa = {.sa_handler = handler};

	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static void count(int sig)
{
	struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};

	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static int write_pid(const char *path)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", (int)getpid());
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	if (!strcmp(argv[2], "catch")) {
		handle(SIGINT, stop);
	} else if (!strcmp(argv[2], "count")) {
		const int sigs[] = {SIGINT, SIGQUIT, SIGHUP, SIGUSR1};
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			count(sigs[i]);
		handle(SIGUSR2, stop);
	} else if (strcmp(argv[2], "die")) {
		return 2;
	}
	if (write_pid(argv[1]) < 0)
		return 2;
	while (!ended) {
		free(malloc(64));
		usleep(1000);
	}
	if (!strcmp(argv[2], "catch"))
		return 3;
	say("end\n");
	return 0;
}
