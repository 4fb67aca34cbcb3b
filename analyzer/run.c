/* SPDX-License-Identifier: MIT */
/*
 * memtrace run: runs a program under libmemtrace.so and says where the
 * trace went. The configuration travels in the environment (MEMTRACE_*),
 * which is all the preload reads.
 *
 * Like time(1), the wrapper ignores SIGINT and SIGQUIT while the program
 * runs, so a Ctrl-C reaches the program (and its trace gets written) rather
 * than killing the wrapper. The exit status is the program's, or 128 plus
 * the signal that killed it, or 127 when it could not be started.
 *
 * May not: touch the trace (the preload creates it, and moves an earlier
 * one to FILE.old).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"

#define PRELOAD_NAME "libmemtrace.so"
#define CUPTI_NAME   "libmemtrace-cupti.so" /* built only with the CUDA toolkit */

static void usage(FILE *f)
{
	fputs("usage: memtrace run [-o FILE] [--depth N] [--interval MS] [--no-mmap] [--no-cuda]\n"
	      "                    -- PROGRAM [ARGS...]\n"
	      "  --no-cuda  do not load libmemtrace-cupti.so into CUDA programs (by default it "
	      "is,\n"
	      "             through CUDA_INJECTION64_PATH, when it was built)\n",
	      f);
}

/* The directory of the running memtrace executable, into dir. */
static int self_dir(char *dir, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", dir, size - 1);
	char *slash;

	if (n <= 0)
		return -errno;
	dir[n] = 0;
	slash = strrchr(dir, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	return 0;
}

/*
 * One of memtrace's libraries: the build tree first (analyzer/memtrace next
 * to preload/ and cupti/), then the installed places.
 */
static int find_library(const char *build_dir, const char *name, char *out, size_t size)
{
	char dir[PATH_MAX];
	const char *candidates[3][3] = {
	        {dir, build_dir, name},
	        {dir, "/" MT_PRELOAD_FROM_BINDIR "/", name},
	        {"", MT_PRELOAD_INSTALL_DIR "/", name},
	};

	if (self_dir(dir, sizeof(dir)) < 0)
		dir[0] = 0;
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		if (candidates[i][0] == dir && !dir[0])
			continue;
		if ((size_t)snprintf(out, size, "%s%s%s", candidates[i][0], candidates[i][1],
		                     candidates[i][2]) >= size)
			continue;
		if (access(out, R_OK) == 0) {
			char *real = realpath(out, NULL);
			if (real && strlen(real) < size)
				strcpy(out, real);
			free(real);
			return 0;
		}
	}
	return -ENOENT;
}

static bool number(const char *s, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max)
		return false;
	*out = v;
	return true;
}

/* MEMTRACE_OUTPUT with %p replaced by pid, as the preload does. */
static void expand(const char *pattern, pid_t pid, char *out, size_t size)
{
	size_t n = 0;

	for (const char *s = pattern; *s && n + 24 < size; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			n += (size_t)snprintf(out + n, size - n, "%d", (int)pid);
			s++;
		} else {
			out[n++] = *s;
		}
	}
	out[n] = 0;
}

int mt_cmd_run(int argc, char **argv)
{
	const char *output = "trace.bin", *depth = NULL, *interval = NULL;
	char preload[PATH_MAX], cupti[PATH_MAX], file[PATH_MAX], *ld = NULL;
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
	bool no_mmap = false, no_cuda = false, existed = false;
	int i, status, pipefd[2], child_errno = 0;
	struct stat st;
	pid_t pid;
	long v;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (a[0] != '-') {
			break;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return MT_EXIT_OK;
		} else if (!strcmp(a, "--no-mmap")) {
			no_mmap = true;
		} else if (!strcmp(a, "--no-cuda")) {
			no_cuda = true;
		} else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc) {
			output = argv[++i];
		} else if (!strncmp(a, "--output=", 9)) {
			output = a + 9;
		} else if (!strcmp(a, "--depth") && i + 1 < argc) {
			depth = argv[++i];
			if (!number(depth, 256, &v) || v < 1) {
				fprintf(stderr,
				        "memtrace run: --depth takes a number from 1 to 256\n");
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(a, "--interval") && i + 1 < argc) {
			interval = argv[++i];
			if (!number(interval, 3600 * 1000, &v)) {
				fprintf(stderr, "memtrace run: --interval takes milliseconds (0 "
				                "turns sampling off)\n");
				return MT_EXIT_USAGE;
			}
		} else {
			fprintf(stderr, "memtrace run: unknown option or missing value: %s\n", a);
			usage(stderr);
			return MT_EXIT_USAGE;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	if (!output[0]) {
		fprintf(stderr, "memtrace run: the output file name is empty\n");
		return MT_EXIT_USAGE;
	}
	if (no_cuda || find_library("/../cupti/", CUPTI_NAME, cupti, sizeof(cupti)) < 0)
		cupti[0] = 0;
	if (find_library("/../preload/", PRELOAD_NAME, preload, sizeof(preload)) < 0) {
		fprintf(stderr, "memtrace: cannot find %s next to this memtrace or in %s\n",
		        PRELOAD_NAME, MT_PRELOAD_INSTALL_DIR);
		return MT_EXIT_USAGE;
	}
	if (!strstr(output, "%p")) {
		expand(output, 0, file, sizeof(file));
		existed = lstat(file, &st) == 0;
	}
	/* the child tells an exec failure through this pipe; a successful exec closes it */
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		fprintf(stderr, "memtrace: cannot make a pipe: %s\n", strerror(errno));
		return 127;
	}
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "memtrace: cannot fork: %s\n", strerror(errno));
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		return 127;
	}
	if (pid == 0) {
		const char *prev = getenv("LD_PRELOAD");
		int e;

		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		close(pipefd[0]);
		if (prev && prev[0]) {
			ld = malloc(strlen(preload) + strlen(prev) + 2);
			if (ld)
				sprintf(ld, "%s:%s", preload, prev);
		}
		setenv("LD_PRELOAD", ld ? ld : preload, 1);
		setenv("MEMTRACE_OUTPUT", output, 1);
		if (depth)
			setenv("MEMTRACE_DEPTH", depth, 1);
		if (interval)
			setenv("MEMTRACE_INTERVAL_MS", interval, 1);
		if (no_mmap)
			setenv("MEMTRACE_MMAP", "0", 1);
		/* the CUDA driver loads it: it sees allocations LD_PRELOAD cannot (static cudart)
		 */
		if (cupti[0])
			setenv("CUDA_INJECTION64_PATH", cupti, 0);
		/* a trace of a trace would be joined to the outer one: start afresh */
		unsetenv("MEMTRACE_TREE");
		execvp(argv[i], argv + i);
		e = errno;
		if (write(pipefd[1], &e, sizeof(e)) < 0) {
			/* nothing left to tell it with */
		}
		_exit(e == ENOENT ? 127 : 126);
	}
	close(pipefd[1]);
	while (read(pipefd[0], &child_errno, sizeof(child_errno)) < 0 && errno == EINTR)
		;
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			status = 127 << 8;
			break;
		}
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	if (child_errno) {
		fprintf(stderr, "memtrace: cannot run %s: %s\n", argv[i], strerror(child_errno));
		return child_errno == ENOENT ? 127 : 126;
	}
	if (strstr(output, "%p"))
		expand(output, pid, file, sizeof(file));
	if (lstat(file, &st) < 0)
		fprintf(stderr,
		        "memtrace: %s wrote no trace to %s (a static or setuid program cannot be "
		        "traced)\n",
		        argv[i], file);
	else if (existed)
		fprintf(stderr,
		        "memtrace: trace of %s written to %s (the earlier trace is now %s.old)\n",
		        argv[i], file, file);
	else
		fprintf(stderr, "memtrace: trace of %s written to %s\n", argv[i], file);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 127;
}
