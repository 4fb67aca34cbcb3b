/* SPDX-License-Identifier: MIT */
/*
 * raw-clone glibc|syscall: a child made without fork(), so no fork handler
 * runs in it. The parent leaves 3 blocks of 111 bytes, makes the child, waits
 * for it, then leaves 5 blocks of 222 bytes. The child (glibc's
 * clone(fn, stack, SIGCHLD, arg), or the raw clone system call, which
 * returns twice like fork) leaves 20,000 blocks of 48 bytes and exits.
 *   parent  3 x 111 + 5 x 222 = 1443 bytes in 8 blocks
 *   child   3 x 111 inherited, 20,000 x 48 = 960,000 bytes of its own
 */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

void *keep[8];

static int child(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20000; i++)
		if (!malloc(48))
			exit(1);
	exit(0);
}

int main(int argc, char **argv)
{
	int status;
	pid_t pid;

	if (argc < 2)
		return 2;
	for (int i = 0; i < 3; i++)
		keep[i] = malloc(111);
	if (!strcmp(argv[1], "glibc")) {
		size_t size = 256 * 1024;
		char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
		                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (stack == MAP_FAILED)
			return 3;
		pid = clone(child, stack + size, SIGCHLD, NULL);
	} else {
		pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (pid == 0)
			child(NULL);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return 4;
	for (int i = 3; i < 8; i++)
		keep[i] = malloc(222);
	return 0;
}
