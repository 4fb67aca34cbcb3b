/* SPDX-License-Identifier: MIT */
/*
 * MEMTRACE_OUTPUT's escapes: %p the pid, %r the rank of a multi-process job
 * (RANK as torchrun sets it, OMPI_COMM_WORLD_RANK as Open MPI's mpirun,
 * SLURM_PROCID as srun, the first one set to a number; "norank" when none
 * is), %h the host name, %% a percent sign. Header only, so that the
 * preload (which names the file) and memtrace run (which says where it
 * went) expand a name the same way. Uses getenv and uname: no allocation.
 */
#ifndef MEMTRACE_OUTPUT_NAME_H
#define MEMTRACE_OUTPUT_NAME_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/utsname.h>

/* Whether pattern names a file per process, rank or host (an escape other than %%). */
static inline bool mt_output_has_escape(const char *pattern)
{
	for (const char *s = pattern; *s; s++)
		if (s[0] == '%' && (s[1] == 'p' || s[1] == 'r' || s[1] == 'h'))
			return true;
		else if (s[0] == '%' && s[1] == '%')
			s++;
	return false;
}

/*
 * The job's rank: the first of the variables set to digits (at most 9 of
 * them, so that no value can put a '/' or a long string into a path).
 */
static inline const char *mt_output_rank(void)
{
	static const char *const vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		size_t n = v ? strspn(v, "0123456789") : 0;
		if (n && !v[n] && n <= 9)
			return v;
	}
	return "norank";
}

/*
 * pattern with its escapes expanded for process pid into out: its length,
 * or -ENAMETOOLONG when it does not fit in size bytes. An unknown escape
 * stays as it is.
 */
static inline int mt_output_expand(const char *pattern, pid_t pid, char *out, size_t size)
{
	struct utsname u;
	size_t n = 0;

	for (const char *s = pattern; *s; s++) {
		char num[16];
		const char *put = num;
		size_t len;
		if (s[0] == '%' && s[1] == 'p')
			snprintf(num, sizeof(num), "%d", (int)pid);
		else if (s[0] == '%' && s[1] == 'r')
			put = mt_output_rank();
		else if (s[0] == '%' && s[1] == 'h')
			put = uname(&u) == 0 ? u.nodename : "nohost";
		else if (s[0] == '%' && s[1] == '%')
			put = "%";
		else
			put = NULL;
		if (put) {
			len = strlen(put);
			s++;
		} else {
			put = s;
			len = 1;
		}
		if (n + len >= size)
			return -ENAMETOOLONG;
		memcpy(out + n, put, len);
		n += len;
	}
	if (n >= size)
		return -ENAMETOOLONG;
	out[n] = 0;
	return (int)n;
}

#endif
