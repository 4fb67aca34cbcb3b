/* SPDX-License-Identifier: MIT */
/*
 * A block the parent allocates just before a fork and frees just after it,
 * once the child has begun: two records in a row in the parent's chunk (a
 * temporary, to the exit's copy, docs/reachability.md) whose free is later
 * than the child's start. The child still holds the block (a global points
 * to it) and returns from main after the parent's free: its scan finds the
 * block live and reachable, 777 B. It prints nothing, so that no stdio
 * buffer is live at exit.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile kept;

int main(void)
{
	int begun[2], freed[2];
	char c = 0;
	pid_t pid;

	if (pipe(begun) || pipe(freed))
		return 1;
	kept = malloc(777);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		/* the child's start was stamped in memtrace's fork handler, before fork returned */
		if (write(begun[1], &c, 1) != 1 || read(freed[0], &c, 1) != 1)
			_exit(1);
		return 0;
	}
	if (read(begun[0], &c, 1) != 1)
		return 1;
	free(kept);
	kept = NULL;
	if (write(freed[1], &c, 1) != 1)
		return 1;
	return waitpid(pid, NULL, 0) == pid ? 0 : 1;
}
