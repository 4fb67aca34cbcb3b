/* SPDX-License-Identifier: MIT */
/*
 * fake-trace FILE WHOSE [FILE WHOSE...]: writes trace file headers (the
 * fields memtrace run reads; no chunks), as a traced run's preload would,
 * for the tests of how memtrace run finds the file its program's trace went
 * to. Built static, so the preload never enters it and the headers are all
 * there is. WHOSE:
 *   self  this process is the root (root_pid its pid), created now;
 *   old   another run's trace (root_pid 1), created long ago;
 *   new   another root's (root_pid 1), created now: what a traced child of
 *         an untraced program leaves.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memtrace/trace-format.h>

static int write_header(const char *path, const char *whose)
{
	char page[MT_HEADER_SIZE] = {0};
	struct mt_file_header *h = (struct mt_file_header *)page;
	struct timespec now;
	int fd, ok;

	clock_gettime(CLOCK_REALTIME, &now);
	memcpy(h->magic, MT_FILE_MAGIC, 8);
	h->version = MT_FORMAT_VERSION;
	h->header_size = MT_HEADER_SIZE;
	h->byte_order = MT_BYTE_ORDER_MARK;
	h->root_pid = !strcmp(whose, "self") ? (uint32_t)getpid() : 1;
	if (strcmp(whose, "old"))
		h->created_realtime = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return -1;
	ok = write(fd, page, sizeof(page)) == (ssize_t)sizeof(page);
	return close(fd) == 0 && ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (write_header(argv[i], argv[i + 1]) < 0) {
			perror(argv[i]);
			return 2;
		}
	}
	return 0;
}
