/* SPDX-License-Identifier: MIT */
/*
 * Blocks of known reachability at exit (docs/reachability.md), each from a
 * function of its own so that each is a stack of its own:
 *
 *   keep_cache     100 B held by a global: reachable
 *   lose_block     200 B whose only pointer is dropped: definite
 *   lose_list      a list of 3 nodes of 48 B (one call site) whose head is
 *                  dropped: the head definite, the 2 nodes it points to indirect
 *   keep_interior  64 B held only through a pointer 16 bytes into it: possible
 *
 * `reach-classes [exit|kill]`: returns from main, or ends by SIGKILL (no
 * scan). It prints nothing, so that no stdio buffer is live at exit.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

struct node {
	struct node *next;
	char payload[40];
};

void *volatile cache;
char *volatile interior;

__attribute__((noinline)) static void keep_cache(void)
{
	cache = malloc(100);
	memset(cache, 1, 100);
}

__attribute__((noinline)) static void lose_block(void)
{
	void *volatile p = malloc(200);

	memset(p, 2, 200);
	p = NULL;
}

__attribute__((noinline)) static struct node *new_node(struct node *next)
{
	struct node *n = malloc(sizeof(*n));

	memset(n->payload, 3, sizeof(n->payload));
	n->next = next;
	return n;
}

__attribute__((noinline)) static void lose_list(void)
{
	struct node *volatile head = NULL;

	for (int i = 0; i < 3; i++)
		head = new_node(head);
	head = NULL;
}

__attribute__((noinline)) static void keep_interior(void)
{
	char *p = malloc(64);

	memset(p, 4, 64);
	interior = p + 16;
}

/* Overwrites the stack the calls above used, so that no dead slot holds their pointers. */
__attribute__((noinline)) static void scrub_stack(void)
{
	volatile char junk[4096];

	memset((char *)junk, 0, sizeof(junk));
}

int main(int argc, char **argv)
{
	keep_cache();
	lose_block();
	lose_list();
	keep_interior();
	scrub_stack();
	if (argc > 1 && !strcmp(argv[1], "kill"))
		raise(SIGKILL);
	return 0;
}
