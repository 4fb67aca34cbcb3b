/* SPDX-License-Identifier: MIT */
/*
 * Prints one line and returns: the only block live at exit is stdout's
 * buffer, which glibc allocates on the first write and never frees (4 KiB
 * with stdout on /dev/null). A global of libc still points to it: reachable,
 * not a leak, and the page must say so.
 */
#include <stdio.h>

int main(void)
{
	puts("hello");
	return 0;
}
