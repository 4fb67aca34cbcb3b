/* SPDX-License-Identifier: MIT */
/*
 * A small stand-in for a service with a leak, for the README's first
 * command: it handles "requests" that each build a response and free it,
 * except that every tenth request's session is cached forever. Live at
 * exit: 10 sessions of 4096 bytes = 40 KiB, all from remember_session.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUESTS 100

static void *sessions[REQUESTS];

static char *build_response(int i)
{
	char *r = malloc(256 + (size_t)i);
	snprintf(r, 256, "response %d", i);
	return r;
}

static void remember_session(int i)
{
	sessions[i] = calloc(1, 4096);
}

static size_t handle(int i)
{
	char *r = build_response(i);
	size_t n = strlen(r);

	if (i % 10 == 0)
		remember_session(i);
	free(r);
	return n;
}

int main(void)
{
	size_t total = 0;

	for (int i = 0; i < REQUESTS; i++)
		total += handle(i);
	printf("served %d requests, %zu bytes\n", REQUESTS, total);
	return 0;
}
