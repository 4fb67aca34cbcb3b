/* SPDX-License-Identifier: MIT */
/*
 * bench-spawn: what fork/exec-heavy shell scripts do, N times (default 2,000).
 * Usage: bench-spawn [N] [MODE]
 *
 *   self   fork a child that execs this program as a short child (four
 *          mallocs and four frees of known sizes), and wait for it; the
 *          child's exit status feeds the checksum
 *   true   fork a child that execs /bin/true, and wait for it
 *   shell  one bash running `for i in $(seq N); do /bin/true; done`
 *   pipe   one dash running `for i in $(seq N); do echo $i | cat; done`,
 *          its output read through a pipe: the checksum is of that output,
 *          so a capture that loses pipeline data fails the run
 *
 * The per-process cost of a tracer is what this measures: start-up in every
 * exec'd program, the fork handler in every fork child, exit in both. Prints
 * one line: the spawn count, the allocator calls the self children make (0
 * in the other modes: /bin/true's and the shell's own calls are not ours to
 * count) and the checksum.
 *
 * The parent makes no allocator call of its own (argv on the stack, the
 * path in a static buffer), but stdio's buffer for the final line. Its
 * rusage report adds its waited-for children's: they are the workload.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-common.h"

#define CHILD_ALLOCS 4

static char self_path[4096];

/* FNV-1a over bytes: the pipe mode's output, and the statuses in order. */
static uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211u;
	return h;
}

/* The exec'd child: CHILD_ALLOCS blocks of sizes known from i, an exit
 * status the parent can check. */
static int child(const char *arg)
{
	unsigned long i = strtoul(arg, NULL, 10);
	unsigned char *blocks[CHILD_ALLOCS];
	unsigned sum = 0;

	for (unsigned k = 0; k < CHILD_ALLOCS; k++) {
		size_t size = ((size_t)16 << k) + i % 7;
		blocks[k] = malloc(size);
		if (!blocks[k])
			return 255;
		blocks[k][0] = (unsigned char)(i + k);
		blocks[k][size - 1] = (unsigned char)k;
		bench_escape(blocks[k]);
	}
	for (unsigned k = 0; k < CHILD_ALLOCS; k++) {
		sum += blocks[k][0];
		free(blocks[k]);
	}
	return (int)(sum & 0x7f);
}

/*
 * fork, exec argv in the child and wait: the exit status, or -1 when the
 * child did not exit normally. With out (a close-on-exec pipe), the child's
 * stdout is its write end and what comes through is mixed into *sum.
 */
static int run(char *const argv[], const int *out, uint64_t *sum)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		perror("bench-spawn: fork");
		exit(1);
	}
	if (pid == 0) {
		if (out && dup2(out[1], STDOUT_FILENO) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	if (out) {
		char buf[4096];
		ssize_t n;
		close(out[1]);
		while ((n = read(out[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
			if (n > 0)
				*sum = mix(*sum, buf, (size_t)n);
		close(out[0]);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("bench-spawn: waitpid");
			exit(1);
		}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void report_rusage(void)
{
	struct rusage self, kids;

	if (!getenv("BENCH_RUSAGE") || getrusage(RUSAGE_SELF, &self) ||
	    getrusage(RUSAGE_CHILDREN, &kids))
		return;
	fprintf(stderr, "bench-rusage: utime_us=%lld stime_us=%lld maxrss_kb=%ld\n",
	        ((long long)self.ru_utime.tv_sec + kids.ru_utime.tv_sec) * 1000000 +
	                self.ru_utime.tv_usec + kids.ru_utime.tv_usec,
	        ((long long)self.ru_stime.tv_sec + kids.ru_stime.tv_sec) * 1000000 +
	                self.ru_stime.tv_usec + kids.ru_stime.tv_usec,
	        self.ru_maxrss > kids.ru_maxrss ? self.ru_maxrss : kids.ru_maxrss);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[2] : "self";
	uint64_t n, calls = 0, sum = 1469598103934665603u;
	char arg[32], script[128];
	int status;

	if (argc == 3 && !strcmp(argv[1], "--child"))
		return child(argv[2]);
	n = bench_count(argc, argv, 2000);
	if (!strcmp(mode, "self") || !strcmp(mode, "true")) {
		bool self = mode[0] == 's';
		ssize_t len = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
		if (len <= 0) {
			perror("bench-spawn: /proc/self/exe");
			return 1;
		}
		for (uint64_t i = 0; i < n; i++) {
			char *self_argv[] = {self_path, "--child", arg, NULL};
			char *true_argv[] = {"/bin/true", NULL};
			snprintf(arg, sizeof(arg), "%" PRIu64, i);
			status = run(self ? self_argv : true_argv, NULL, NULL);
			if (status < 0 || status == 127 || (!self && status != 0)) {
				fprintf(stderr, "bench-spawn: child %" PRIu64 " ended with %d\n", i,
				        status);
				return 1;
			}
			sum = mix(sum, &status, sizeof(status));
		}
		calls = self ? n * 2 * CHILD_ALLOCS : 0;
	} else if (!strcmp(mode, "shell") || !strcmp(mode, "pipe")) {
		bool pipeline = mode[0] == 'p';
		int fds[2];
		snprintf(script, sizeof(script),
		         pipeline ? "for i in $(seq %" PRIu64 "); do echo $i | cat; done"
		                  : "for i in $(seq %" PRIu64 "); do /bin/true; done",
		         n);
		char *argv_sh[] = {pipeline ? "/bin/sh" : "/bin/bash", "-c", script, NULL};
		if (pipeline && pipe2(fds, O_CLOEXEC) < 0) {
			perror("bench-spawn: pipe");
			return 1;
		}
		status = run(argv_sh, pipeline ? fds : NULL, &sum);
		if (status != 0) {
			fprintf(stderr, "bench-spawn: the shell ended with %d\n", status);
			return 1;
		}
		sum = mix(sum, &n, sizeof(n));
	} else {
		fprintf(stderr, "bench-spawn: unknown mode '%s' (self, true, shell, pipe)\n", mode);
		return 2;
	}
	printf("bench-spawn: mode=%s spawns=%" PRIu64 " calls=%" PRIu64 " checksum=%016" PRIx64
	       "\n",
	       mode, n, calls, sum);
	report_rusage();
	return 0;
}
