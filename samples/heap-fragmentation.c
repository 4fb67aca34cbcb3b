/* SPDX-License-Identifier: MIT */
/*
 * Fragments the glibc heap the way a long-running service does: it loads
 * 100,000 small records (512 bytes each, about 52 MiB of heap), then drops
 * every other one. Live bytes halve, RSS does not move: each freed block is
 * a hole between two live ones, so no page becomes free and neither the
 * heap's top nor malloc_trim(0) can give much back.
 *
 * It holds still for as long as it ran before, plus 200 ms, so that
 * memtrace's sampler (every 10 ms) sees the fragmented heap and the held
 * heap is most of the program's life: a drop in its last fifth reads as
 * teardown (a load slowed to 1 s by a busy machine made it so). Then it prints glibc's own figures
 * (mallinfo2: arena, fordblks, keepcost) on stdout for the test to compare with the report's. The
 * line is written with write(2) from a stack buffer so that printing allocates nothing and the
 * figures stay what the sampler saw.
 *
 * heap-fragmentation trim: then also calls malloc_trim(0) and prints how
 * much RSS it gave back, the truth of what trimming would return here.
 *
 * heap-fragmentation trim|hold SIZE: records of SIZE bytes instead, as many
 * as make the same 50 MiB. With records of 100 KiB each hole holds 24 whole
 * free pages, and malloc_trim(0) gives nearly all the freed half back.
 *
 * heap-fragmentation trim|hold SIZE MS: computes for MS milliseconds between
 * loading and dropping, calling nothing memtrace interposes, as a program
 * between two phases does (the sampler then takes the heap figures itself).
 */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RECORDS     100000
#define RECORD_SIZE 512
#define TOTAL       (RECORDS * RECORD_SIZE)

static char *records[RECORDS];
static int nrecords = RECORDS;
static size_t record_size = RECORD_SIZE;

static void load_records(void)
{
	for (int i = 0; i < nrecords; i++) {
		records[i] = malloc(record_size);
		memset(records[i], i, record_size);
	}
}

static void drop_every_other(void)
{
	for (int i = 0; i < nrecords; i += 2) {
		free(records[i]);
		records[i] = NULL;
	}
}

/* Resident bytes now, from /proc/self/statm, read without malloc so that
 * the measurement does not move the heap. */
static long long resident(void)
{
	char buf[128];
	long long size = 0, rss = -1;
	int f = open("/proc/self/statm", O_RDONLY);
	ssize_t n = f < 0 ? -1 : read(f, buf, sizeof(buf) - 1);

	if (f >= 0)
		close(f);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (sscanf(buf, "%lld %lld", &size, &rss) != 2)
		return -1;
	return rss * sysconf(_SC_PAGESIZE);
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ll + t.tv_nsec;
}

/* Spends ms milliseconds of CPU, with no call into the allocator. */
static void think(long ms)
{
	struct timespec now, end;
	volatile unsigned long spin = 0;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	do {
		for (int i = 0; i < 10000; i++)
			spin++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec ||
	         (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
}

int main(int argc, char **argv)
{
	long long start = now_ns(), held;
	struct timespec hold;
	struct mallinfo2 mi;
	char line[160];
	int n;

	if (argc > 2 && atol(argv[2]) >= RECORD_SIZE) {
		record_size = (size_t)atol(argv[2]);
		nrecords = (int)(TOTAL / record_size);
	}
	load_records();
	if (argc > 3)
		think(atol(argv[3]));
	drop_every_other();
	held = now_ns() - start + 200 * 1000000ll;
	hold = (struct timespec){held / 1000000000, held % 1000000000};
	nanosleep(&hold, NULL);
	mi = mallinfo2();
	n = snprintf(line, sizeof(line), "arena %zu fordblks %zu keepcost %zu uordblks %zu\n",
	             mi.arena, mi.fordblks, mi.keepcost, mi.uordblks);
	if (write(STDOUT_FILENO, line, (size_t)n) != n)
		return 1;
	if (argc > 1 && !strcmp(argv[1], "trim")) {
		long long before = resident();
		malloc_trim(0);
		n = snprintf(line, sizeof(line), "malloc_trim returned %lld\n",
		             before - resident());
		if (write(STDOUT_FILENO, line, (size_t)n) != n)
			return 1;
	}
	return 0;
}
