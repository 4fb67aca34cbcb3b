/* SPDX-License-Identifier: MIT */
/*
 * Where CPython keeps what python.c reads, per version: offsets in its
 * thread state, frames, code objects and strings, for the default (GIL,
 * release) x86-64 builds. The figures come from the interpreters' own
 * internal headers (offsetof under Py_BUILD_CORE); tests/python/layout.c
 * prints them from the headers of each installed interpreter and the test
 * python-layout compares that with this table, so a wrong figure fails the
 * build's tests rather than a user's run. 3.13's are checked at run time
 * too, against the _Py_DebugOffsets the interpreter starts _PyRuntime with.
 *
 * May not: hold anything but offsets; python.c decides what they mean.
 */
#ifndef MT_PYTHON_LAYOUT_H
#define MT_PYTHON_LAYOUT_H

#include <stdint.h>

/* How a frame says it is the outermost of one _PyEval_EvalFrameDefault activation. */
enum mt_py_entry {
	MT_PY_ENTRY_EVERY,    /* 3.10: every frame object is one activation */
	MT_PY_ENTRY_IS_ENTRY, /* 3.11: _PyInterpreterFrame.is_entry */
	MT_PY_ENTRY_CSTACK,   /* 3.12, 3.13: a shim frame owned by the C stack follows it */
};

/* How a frame says which instruction it runs. */
enum mt_py_lasti {
	MT_PY_LASTI_INDEX,   /* 3.10: f_lasti, an int, in code units */
	MT_PY_LASTI_POINTER, /* 3.11+: prev_instr / instr_ptr, into co_code_adaptive */
};

struct mt_py_layout {
	unsigned version; /* major << 8 | minor */
	enum mt_py_entry entry;
	enum mt_py_lasti lasti;
	/* thread state: the innermost frame, or (cframe >= 0) the _PyCFrame that has it */
	uint16_t ts_frame;
	int16_t cframe_current; /* offset of current_frame in _PyCFrame; -1: none */
	/* frame */
	uint16_t fr_previous, fr_code, fr_instr;
	int16_t fr_entry; /* is_entry (3.11) or owner (3.12+); -1: none */
	/* code object */
	uint16_t co_filename, co_name, co_firstlineno, co_linetable, co_code_adaptive;
	/* strings: sizeof PyASCIIObject and PyCompactUnicodeObject */
	uint16_t ascii_size, compact_size;
};

/* _PyInterpreterFrame.owner of the shim frame each activation starts with (3.12, 3.13). */
#define MT_PY_FRAME_OWNED_BY_CSTACK 3

/* Common to these versions: PyObject.ob_type, PyUnicode's length and state, PyBytes. */
#define MT_PY_OB_TYPE    8
#define MT_PY_STR_LENGTH 16
#define MT_PY_STR_STATE  32
#define MT_PY_BYTES_SIZE 16
#define MT_PY_BYTES_DATA 32

static const struct mt_py_layout mt_py_layouts[] = {
        {
                .version = 0x30a,
                .entry = MT_PY_ENTRY_EVERY,
                .lasti = MT_PY_LASTI_INDEX,
                .ts_frame = 24, /* PyThreadState.frame */
                .cframe_current = -1,
                .fr_previous = 24, /* PyFrameObject.f_back */
                .fr_code = 32,
                .fr_instr = 96, /* f_lasti */
                .fr_entry = -1,
                .co_filename = 104,
                .co_name = 112, /* co_name: 3.10 code has no qualname */
                .co_firstlineno = 40,
                .co_linetable = 120,
                .co_code_adaptive = 0,
                .ascii_size = 48,
                .compact_size = 72,
        },
        {
                .version = 0x30b,
                .entry = MT_PY_ENTRY_IS_ENTRY,
                .lasti = MT_PY_LASTI_POINTER,
                .ts_frame = 56, /* PyThreadState.cframe */
                .cframe_current = 8,
                .fr_previous = 48,
                .fr_code = 32,
                .fr_instr = 56, /* prev_instr */
                .fr_entry = 68, /* is_entry */
                .co_filename = 112,
                .co_name = 128, /* co_qualname */
                .co_firstlineno = 72,
                .co_linetable = 136,
                .co_code_adaptive = 184,
                .ascii_size = 48,
                .compact_size = 72,
        },
        {
                .version = 0x30c,
                .entry = MT_PY_ENTRY_CSTACK,
                .lasti = MT_PY_LASTI_POINTER,
                .ts_frame = 56, /* PyThreadState.cframe */
                .cframe_current = 0,
                .fr_previous = 8,
                .fr_code = 0,
                .fr_instr = 56, /* prev_instr */
                .fr_entry = 70, /* owner */
                .co_filename = 112,
                .co_name = 128,
                .co_firstlineno = 68,
                .co_linetable = 136,
                .co_code_adaptive = 192,
                .ascii_size = 40,
                .compact_size = 56,
        },
        {
                .version = 0x30d,
                .entry = MT_PY_ENTRY_CSTACK,
                .lasti = MT_PY_LASTI_POINTER,
                .ts_frame = 72, /* PyThreadState.current_frame */
                .cframe_current = -1,
                .fr_previous = 8,
                .fr_code = 0,   /* f_executable */
                .fr_instr = 56, /* instr_ptr */
                .fr_entry = 70, /* owner */
                .co_filename = 112,
                .co_name = 128,
                .co_firstlineno = 68,
                .co_linetable = 136,
                .co_code_adaptive = 200,
                .ascii_size = 40,
                .compact_size = 56,
        },
};

/* 3.13's _Py_DebugOffsets (at the start of _PyRuntime): where it says the fields are. */
#define MT_PY_DEBUG_COOKIE        "xdebugpy"
#define MT_PY_DEBUG_VERSION       8
#define MT_PY_DEBUG_FREE_THREADED 16
#define MT_PY_DEBUG_TS_FRAME      184
#define MT_PY_DEBUG_FR_PREVIOUS   232
#define MT_PY_DEBUG_FR_CODE       240
#define MT_PY_DEBUG_FR_INSTR      248
#define MT_PY_DEBUG_FR_OWNER      264
#define MT_PY_DEBUG_CO_FILENAME   280
#define MT_PY_DEBUG_CO_QUALNAME   296
#define MT_PY_DEBUG_CO_LINETABLE  304
#define MT_PY_DEBUG_CO_FIRSTLINE  312
#define MT_PY_DEBUG_CO_CODE       344

#endif
