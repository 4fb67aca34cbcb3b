/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for libFuzzer's main: runs LLVMFuzzerTestOneInput() once on
 * each file named, or on each regular file of each directory named, so the
 * fuzz target builds with any compiler and the committed corpus and crashes
 * run as ordinary tests (suite 'fuzz') under ASan and UBSan. No mutation:
 * finding new inputs is libFuzzer's job (tests/fuzz/build-fuzzer).
 *
 * Each file's name is printed before it runs, so a sanitizer report in the
 * test log says which input it came from. Files are run in name order so a
 * failure repeats the same way.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	uint8_t *buf = NULL;
	size_t size = 0, cap = 0, n;
	FILE *f;

	f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	/* read into an exactly sized heap buffer, so ASan catches a read one past its end */
	for (;;) {
		if (size == cap) {
			uint8_t *q;
			cap = cap ? cap * 2 : 65536;
			q = realloc(buf, cap);
			if (!q) {
				fprintf(stderr, "%s: out of memory\n", path);
				goto fail;
			}
			buf = q;
		}
		n = fread(buf + size, 1, cap - size, f);
		size += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, "%s: read error\n", path);
		goto fail;
	}
	fclose(f);
	if (size) {
		uint8_t *exact = malloc(size);
		if (!exact) {
			free(buf);
			return -1;
		}
		memcpy(exact, buf, size);
		free(buf);
		buf = exact;
	}
	printf("%s (%zu bytes)\n", path, size);
	fflush(stdout);
	LLVMFuzzerTestOneInput(buf, size);
	free(buf);
	return 0;
fail:
	fclose(f);
	free(buf);
	return -1;
}

static int skip_entry(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

static int run_dir(const char *dir, unsigned *count)
{
	struct dirent **list;
	int n, ret = 0;

	n = scandir(dir, &list, skip_entry, alphasort);
	if (n < 0) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_file(path) < 0)
				ret = -1;
			else
				(*count)++;
		}
		free(list[i]);
	}
	free(list);
	return ret;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int ret = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			ret = 1;
		} else if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count) < 0)
				ret = 1;
		} else if (run_file(argv[i]) < 0) {
			ret = 1;
		} else {
			count++;
		}
	}
	printf("%u inputs run\n", count);
	return ret;
}
