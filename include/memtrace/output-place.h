/* SPDX-License-Identifier: MIT */
/*
 * What stands at an output name, for the two writers that give a file its
 * name by rename: the preload (the trace) and the analyzer (pages, exports).
 * A rename replaces whatever the name held, so only what is plainly a file
 * may be replaced: nothing, a regular file, or a symbolic link leading to a
 * regular file or to nothing (a link someone planted is replaced, never
 * written through). Anything else belongs to someone: /dev/null, a FIFO,
 * /dev/stdout, a terminal, a directory. Renaming over /dev/null as root put
 * a regular file there, and every later `>/dev/null` on the machine wrote
 * into it. A regular file that is this process's standard input, output or
 * error (`prog >trace.bin`, or /dev/stdout while it is redirected) is the
 * program's own too. Header only: no allocation, a few stat calls (stat and
 * fstat: strict C11 declares them, and a link is judged by where it leads).
 */
#ifndef MEMTRACE_OUTPUT_PLACE_H
#define MEMTRACE_OUTPUT_PLACE_H

#include <sys/stat.h>

enum mt_place {
	MT_PLACE_NONE,  /* nothing at the name, or a link leading nowhere: may be replaced */
	MT_PLACE_FILE,  /* a regular file, or a link to one: may be replaced */
	MT_PLACE_STDIO, /* the file of descriptor 0, 1 or 2, reached by any name */
	MT_PLACE_DIR,   /* a directory, or a link to one */
	MT_PLACE_OTHER, /* a device, FIFO or socket, or a link to one: written in place or not at
	                   all */
};

/* The place at path; *std is the standard descriptor for MT_PLACE_STDIO. */
static inline enum mt_place mt_output_place(const char *path, int *std)
{
	struct stat t, s;

	if (stat(path, &t) < 0)
		return MT_PLACE_NONE; /* nothing, or a link to nothing */
	if (S_ISDIR(t.st_mode))
		return MT_PLACE_DIR;
	if (!S_ISREG(t.st_mode))
		return MT_PLACE_OTHER;
	for (int fd = 0; fd <= 2; fd++)
		if (fstat(fd, &s) == 0 && s.st_dev == t.st_dev && s.st_ino == t.st_ino) {
			*std = fd;
			return MT_PLACE_STDIO;
		}
	return MT_PLACE_FILE;
}

/* Why a name of place p (more than MT_PLACE_FILE) takes no trace, for a message. */
static inline const char *mt_output_place_why(enum mt_place p, int std)
{
	static const char *const stdio[] = {"is the program's standard input",
	                                    "is the program's standard output",
	                                    "is the program's standard error"};

	if (p == MT_PLACE_STDIO && std >= 0 && std <= 2)
		return stdio[std];
	return p == MT_PLACE_DIR ? "is a directory" : "is not a regular file";
}

#endif
