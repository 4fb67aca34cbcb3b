/* SPDX-License-Identifier: MIT */
/*
 * A stack's label: the frame a person knows it by. The innermost frame is
 * nearly always allocation plumbing (a malloc wrapper, operator new,
 * c10::alloc_cpu, PyMem_Malloc...), the same for thousands of stacks, so
 * the label is the first frame, innermost first, whose function is not
 * plumbing; when every frame is, the outermost one. What is plumbing is a
 * built-in list of glob patterns (docs/labels.md) and those the user adds
 * (MEMTRACE_PLUMBING, read by the command layer).
 *
 * May not: print, read the environment, allocate.
 */
#ifndef MEMTRACE_ANALYZER_LABEL_H
#define MEMTRACE_ANALYZER_LABEL_H

#include <stdbool.h>
#include <stddef.h>

#include "symbolize.h"

/*
 * Whether a demangled function name is plumbing: it matches a built-in
 * pattern or one of `user` (patterns separated by a ':' that is not half
 * of a C++ "::"; may be NULL). A
 * pattern matches the whole name, or the name without its parameter list
 * and without a template's return type: `c10::alloc_cpu` matches
 * `c10::alloc_cpu(unsigned long)`. In a pattern `*` is any run of
 * characters and `?` one character; nothing else is special (C++ names are
 * full of brackets).
 */
bool mt_label_is_plumbing(const char *function, const char *user);

/*
 * The index of a stack's label among its n > 0 frames (innermost first).
 * Frames without a name go with the next named frame outward: passed over
 * with it when it is plumbing, passed over for it when it is not; the
 * label is the first of them only when no named frame follows.
 */
int mt_label_frame(const struct mt_sym *syms, int n, const char *user);
/* What mt_label_frame asks of a frame. */
enum mt_label_class { MT_LABEL_UNNAMED, MT_LABEL_PLUMBING, MT_LABEL_NAMED };
/*
 * The same with each frame i's class said by class_of (a caller's memo of
 * mt_label_is_plumbing), asked only of the frames up to the label.
 */
int mt_label_frame_by(int n, enum mt_label_class (*class_of)(void *ctx, int i), void *ctx);

/*
 * The length of a demangled name without its trailing parameter list (and
 * a `const` after it): `f(int) const` -> 1. The whole length when it has none.
 */
size_t mt_label_name_length(const char *function);

#endif
