/* SPDX-License-Identifier: MIT */
/*
 * setenv-twice: sets two variables, so that glibc grows the environment
 * array it made for the first setenv with realloc, then prints them. Every
 * block it leaves is glibc's: no free of a block the trace does not know.
 */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	if (setenv("SETENV_TWICE_A", "1", 1) || setenv("SETENV_TWICE_B", "2", 1))
		return 1;
	printf("%s %s\n", getenv("SETENV_TWICE_A"), getenv("SETENV_TWICE_B"));
	return 0;
}
