/* SPDX-License-Identifier: MIT */
/* The next_probe after next-a's (dlsym-probe.c); b_loaded keeps it linked (--as-needed). */
char next_probe(void);
int b_loaded(void);

char next_probe(void)
{
	return 'b';
}

int b_loaded(void)
{
	return 1;
}
