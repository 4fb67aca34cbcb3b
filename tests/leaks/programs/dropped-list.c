/* SPDX-License-Identifier: MIT */
/*
 * Lost structures: what one dropped pointer loses. A list of 10 nodes (24
 * bytes, each with a 64-byte payload) whose head pointer is dropped: the head
 * is definite (24 bytes, 1 block) and the rest indirect (9 nodes and 10
 * payloads, 856 bytes in 19 blocks). The head is allocated last, at the
 * highest address, so a scan that takes the unreached blocks in address
 * order meets the tail first and must let the head's clique take it over.
 * A ring of 4 nodes (no payloads) dropped as well: 1 definite (24 bytes) and
 * 3 indirect (72 bytes). A list of 5 nodes kept in a global is reachable,
 * nodes and payloads: 440 bytes in 10 blocks.
 */
#include <stdlib.h>
#include <string.h>

#include "scrub.h"

struct node {
	struct node *next;
	char *payload;
	long n;
};

static struct node *kept;

static struct node *list(int n, int with_payload)
{
	struct node *head = NULL;

	for (int i = 0; i < n; i++) {
		struct node *node = malloc(sizeof(*node));

		node->payload = with_payload ? malloc(64) : NULL;
		if (node->payload)
			memset(node->payload, 'p', 64);
		node->n = i;
		node->next = head;
		head = node;
	}
	return head;
}

static void drop_list(void)
{
	(void)list(10, 1);
}

static void drop_ring(void)
{
	struct node *head = list(4, 0);
	struct node *tail = head;

	while (tail->next)
		tail = tail->next;
	tail->next = head;
	head = tail = NULL;
}

int main(void)
{
	kept = list(5, 1);
	drop_list();
	drop_ring();
	scrub_stack();
	return 0;
}
