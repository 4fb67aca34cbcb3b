/* SPDX-License-Identifier: MIT */
/*
 * The memtrace commands. Each takes the arguments after its name and
 * returns the process exit status: 0 ok, 1 usage, 2 unreadable trace
 * (run returns the traced program's status). Only this layer prints.
 */
#ifndef MEMTRACE_ANALYZER_COMMANDS_H
#define MEMTRACE_ANALYZER_COMMANDS_H

#define MT_EXIT_OK 0
#define MT_EXIT_USAGE 1
#define MT_EXIT_BAD_TRACE 2

int mt_cmd_dump(int argc, char **argv);
int mt_cmd_run(int argc, char **argv);

#endif
