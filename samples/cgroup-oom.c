/* SPDX-License-Identifier: MIT */
/*
 * A service with an unbounded cache, run under a cgroup memory limit until
 * the kernel's OOM killer ends it with SIGKILL: every "request" builds a
 * 1 MiB response and cache_response keeps it forever. Nothing in the
 * program notices; the trace, which survives the kill, shows the last RSS
 * against the limit, the live set at death and the stack that grew.
 *
 * cgroup-oom: says "ready" on stdout, then serves a request every 10 ms (so
 * that memtrace's sampler, every 10 ms, sees RSS climb to the limit). Run it
 * in a group with a limit, e.g. 64 MiB (cgroup v2 memory.max, v1
 * memory.limit_in_bytes); without a limit it stops itself after 4 GiB.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RESPONSE_SIZE (1 << 20)
#define MAX_RESPONSES 4096

struct entry {
	struct entry *next;
	int request;
	char *response;
};

static struct entry *cache;

static char *build_response(int request)
{
	char *r = malloc(RESPONSE_SIZE);

	memset(r, request, RESPONSE_SIZE); /* resident: counts against the limit */
	return r;
}

static void cache_response(int request, char *response)
{
	struct entry *e = malloc(sizeof(*e));

	e->next = cache;
	e->request = request;
	e->response = response;
	cache = e; /* never evicted: the bug */
}

int main(void)
{
	struct timespec pace = {0, 10 * 1000 * 1000};

	if (write(STDOUT_FILENO, "ready\n", 6) != 6)
		return 1;
	for (int request = 0; request < MAX_RESPONSES; request++) {
		cache_response(request, build_response(request));
		nanosleep(&pace, NULL);
	}
	return 0;
}
