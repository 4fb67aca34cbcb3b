/* SPDX-License-Identifier: MIT */
/*
 * Allocations under a frame whose return address is not code: target is
 * entered by a jump from with_ra, which pushed a made-up return address
 * (0, 1, 4095, 4096, 2^48, 2^63, ~0) where a call would push its own. The
 * walk out of target reads that word as the next frame's address; the
 * program leaves target by longjmp, never through it. Prints "ok".
 */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;
static jmp_buf env;

void target(void); /* with_ra's jump leaves it no caller */

__attribute__((noinline, used)) void target(void)
{
	sink = malloc(24);
	free(sink);
	longjmp(env, 1);
}

void with_ra(uintptr_t ra);
__asm__(".text\n.globl with_ra\nwith_ra:\n\tand $-16, %rsp\n\tpush %rdi\n\tjmp target\n");

int main(void)
{
	static const uintptr_t ras[] = {
	        0, 1, 4095, 4096, 0x1000000000000ull, 0x8000000000000000ull, 0xffffffffffffffffull};

	for (int round = 0; round < 3; round++)
		for (unsigned i = 0; i < sizeof(ras) / sizeof(ras[0]); i++)
			if (!setjmp(env))
				with_ra(ras[i]);
	puts("ok");
	return 0;
}
