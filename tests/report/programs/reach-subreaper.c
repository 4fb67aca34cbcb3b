/* SPDX-License-Identifier: MIT */
/*
 * A program that takes in orphans, as a container's first process or a
 * process manager does: with "subreaper" it is a child subreaper
 * (PR_SET_CHILD_SUBREAPER), and says on stdout each SIGCHLD it gets; it
 * makes no child of its own. Its PAIRS malloc/free pairs write more than
 * 4 MiB of records, which the exit's copy reads back on two cores (a
 * second process of its own) when it may. 100 bytes held by a global, 200
 * dropped.
 *
 * reach-subreaper subreaper|plain PAIRS
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void *kept;

static void on_child(int sig)
{
	(void)sig;
	(void)!write(1, "SIGCHLD\n", 8);
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	long pairs;

	if (argc != 3)
		return 2;
	if (!strcmp(argv[1], "subreaper") && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_child;
	if (sigaction(SIGCHLD, &sa, NULL) != 0)
		return 1;
	pairs = atol(argv[2]);
	for (long i = 0; i < pairs; i++)
		free(malloc(16 + (size_t)(i % 64) * 8));
	kept = malloc(100);
	if (!kept || !malloc(200)) /* the second is dropped */
		return 1;
	(void)!write(1, "done\n", 5);
	return 0;
}
