/* SPDX-License-Identifier: MIT */
/*
 * The fake interpreter's clone of its eval function (make-python-trace.c),
 * named as GCC names the cold part of a hot/cold split, and built without
 * debug info: as in a python3 without its debug file, only the ELF symbol
 * names it.
 *
 * May not: be installed; it is a test fixture.
 */
int eval_clone(int x) __asm__("_PyEval_EvalFrameDefault.cold");

__attribute__((noinline, used)) int eval_clone(int x)
{
	return x * 11 + 4;
}
