/* SPDX-License-Identifier: MIT */
/*
 * ring-replay: the ring's consumer (analyzer/ring.c) run offline over a
 * finished trace, so that what it costs per event can be measured without a
 * program beside it, deterministically: its instructions under callgrind
 * (--toggle-collect=mt_ring_poll), its own memory at the end. A ring's
 * consumer runs beside the program (memtrace run --ring), where only wall
 * and CPU times, noisy on a shared machine, can be had.
 *
 * Usage: ring-replay TRACE. TRACE is changed: give it a copy. A trace
 * written without a ring is made one of 1 MiB first (its header's
 * ring_size), so that the one poll, which applies every record (they are
 * all older than its margin), ends in a round of keyframes, as a ring run
 * does every quarter of its size; then the poll of a run's end. Its
 * `memtrace report` then starts each process from that round's keyframe,
 * so two builds' consumers compare through their reports (cmp).
 *
 * Prints one line: rounds, the consumer's anonymous memory (RssAnon) and
 * the bytes its heap holds (mallinfo2), after the records are applied.
 *
 * May not: be used on a trace a program still writes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "memtrace/trace-format.h"
#include "ring.h"

/* A trace written without a ring gets a ring of 1 MiB in its header. */
static int make_ring(const char *path)
{
	uint64_t size = 0, ring = MT_RING_MIN;
	off_t at = (off_t)offsetof(struct mt_file_header, ring_size);
	int fd = open(path, O_RDWR | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (pread(fd, &size, sizeof(size), at) != (ssize_t)sizeof(size))
		r = -EIO;
	else if (!size && pwrite(fd, &ring, sizeof(ring), at) != (ssize_t)sizeof(ring))
		r = -EIO;
	close(fd);
	return r;
}

int main(int argc, char **argv)
{
	struct mt_ring *ring;
	struct mt_ring_stats st;
	struct mallinfo2 mi;
	uint64_t kib;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: ring-replay TRACE (changed: give it a copy)\n");
		return 2;
	}
	if ((r = make_ring(argv[1])) < 0 || (r = mt_ring_open(&ring, argv[1])) < 0) {
		fprintf(stderr, "ring-replay: %s: %s\n", argv[1], strerror(-r));
		return 1;
	}
	r = mt_ring_poll(ring, false);
	mt_ring_stats(ring, &st);
	kib = st.rss_anon_kib; /* every record applied */
	mi = mallinfo2();
	if (r == 0)
		r = mt_ring_poll(ring, true);
	mt_ring_stats(ring, &st);
	mt_ring_close(ring);
	if (r < 0) {
		fprintf(stderr, "ring-replay: %s: the consumer stopped: %s\n", argv[1],
		        strerror(-r));
		return 1;
	}
	printf("ring-replay: rounds=%" PRIu64 " rss_anon_kib=%" PRIu64 " heap_bytes=%zu\n",
	       st.rounds, kib, mi.uordblks + mi.hblkhd);
	return 0;
}
