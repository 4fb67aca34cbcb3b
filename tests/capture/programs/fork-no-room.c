/* SPDX-License-Identifier: MIT */
/*
 * A fork with no address space left: the parent lowers RLIMIT_AS below what
 * it maps, then forks. The child can map nothing new (under memtrace, not its
 * stack table nor a chunk of the trace); it allocates, says what malloc gave,
 * and exits 0. The parent prints the child's status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *line, int n)
{
	if (write(STDOUT_FILENO, line, (size_t)n) != n)
		_exit(2);
}

int main(void)
{
	struct rlimit none = {0, RLIM_INFINITY};
	void *volatile keep = malloc(1000);
	char line[64];
	pid_t child;
	int status;

	if (setrlimit(RLIMIT_AS, &none) < 0)
		return 1;
	child = fork();
	if (child == 0) {
		void *p = malloc(100);
		say(line, snprintf(line, sizeof(line), "child: malloc %s\n",
		                   p ? "gave a block" : "failed"));
		free(p);
		_exit(0);
	}
	if (child < 0 || waitpid(child, &status, 0) != child)
		return 1;
	say(line, snprintf(line, sizeof(line), "parent: child status %d\n", status));
	free(keep);
	return 0;
}
