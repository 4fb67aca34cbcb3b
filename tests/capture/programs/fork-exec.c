/* SPDX-License-Identifier: MIT */
/*
 * fork-exec LEAKER: the parent leaves 3 blocks of 111 bytes, forks a child
 * that frees one of them and adds 2 blocks of 222 bytes, and that child
 * forks a grandchild that execs `LEAKER 7 333` (4 blocks of 333 bytes live).
 * Each process ends with figures of its own:
 *   parent      333 bytes in 3 blocks
 *   child       222 + 444 = 666 bytes in 4 blocks (2 inherited, 2 its own)
 *   grandchild  1332 bytes in 4 blocks (a new program after exec)
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void *keep[8];

int main(int argc, char **argv)
{
	int status;
	pid_t child;

	if (argc < 2)
		return 2;
	for (int i = 0; i < 3; i++)
		keep[i] = malloc(111);
	child = fork();
	if (child == 0) {
		free(keep[0]);
		keep[3] = malloc(222);
		keep[4] = malloc(222);
		pid_t grandchild = fork();
		if (grandchild == 0) {
			execl(argv[1], argv[1], "7", "333", (char *)NULL);
			_exit(127);
		}
		waitpid(grandchild, &status, 0);
		exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
	}
	waitpid(child, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
