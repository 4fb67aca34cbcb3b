/* SPDX-License-Identifier: MIT */
/*
 * Prints, from an interpreter's own internal headers, the offsets that
 * preload/python-layout.h holds for its version, one "name value" a line in
 * the order python-layout-table prints the table: test-layout.py compiles
 * this against each installed CPython's headers and compares.
 *
 * Build: cc -I<prefix>/include/python3.X layout.c (Py_BUILD_CORE is set here).
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#endif
#include "internal/pycore_pystate.h"
#if PY_VERSION_HEX < 0x030b0000
#include <frameobject.h>
#endif
#if PY_VERSION_HEX >= 0x030d0000
#include "internal/pycore_runtime.h"
#endif

#define P(name, value) printf("%s %ld\n", name, (long)(value))

int main(void)
{
	P("version", PY_MAJOR_VERSION << 8 | PY_MINOR_VERSION);
#if PY_VERSION_HEX < 0x030b0000
	P("ts_frame", offsetof(PyThreadState, frame));
	P("cframe_current", -1);
	P("fr_previous", offsetof(PyFrameObject, f_back));
	P("fr_code", offsetof(PyFrameObject, f_code));
	P("fr_instr", offsetof(PyFrameObject, f_lasti));
	P("fr_entry", -1);
	P("co_name", offsetof(PyCodeObject, co_name));
	P("co_code_adaptive", 0);
#else
#if PY_VERSION_HEX < 0x030d0000
	P("ts_frame", offsetof(PyThreadState, cframe));
	P("cframe_current", offsetof(_PyCFrame, current_frame));
	P("fr_previous", offsetof(_PyInterpreterFrame, previous));
	P("fr_code", offsetof(_PyInterpreterFrame, f_code));
	P("fr_instr", offsetof(_PyInterpreterFrame, prev_instr));
#else
	P("ts_frame", offsetof(PyThreadState, current_frame));
	P("cframe_current", -1);
	P("fr_previous", offsetof(_PyInterpreterFrame, previous));
	P("fr_code", offsetof(_PyInterpreterFrame, f_executable));
	P("fr_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#endif
#if PY_VERSION_HEX < 0x030c0000
	P("fr_entry", offsetof(_PyInterpreterFrame, is_entry));
#else
	P("fr_entry", offsetof(_PyInterpreterFrame, owner));
	P("owned_by_cstack", FRAME_OWNED_BY_CSTACK);
#endif
	P("co_name", offsetof(PyCodeObject, co_qualname));
	P("co_code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#endif
	P("co_filename", offsetof(PyCodeObject, co_filename));
	P("co_firstlineno", offsetof(PyCodeObject, co_firstlineno));
	P("co_linetable", offsetof(PyCodeObject, co_linetable));
	P("ascii_size", sizeof(PyASCIIObject));
	P("compact_size", sizeof(PyCompactUnicodeObject));
	P("ob_type", offsetof(PyObject, ob_type));
	P("str_length", offsetof(PyASCIIObject, length));
	P("str_state", offsetof(PyASCIIObject, state));
	P("bytes_size", offsetof(PyVarObject, ob_size));
	P("bytes_data", offsetof(PyBytesObject, ob_sval));
#if PY_VERSION_HEX >= 0x030d0000
	P("debug_version", offsetof(_Py_DebugOffsets, version));
	P("debug_free_threaded", offsetof(_Py_DebugOffsets, free_threaded));
	P("debug_ts_frame", offsetof(_Py_DebugOffsets, thread_state.current_frame));
	P("debug_fr_previous", offsetof(_Py_DebugOffsets, interpreter_frame.previous));
	P("debug_fr_code", offsetof(_Py_DebugOffsets, interpreter_frame.executable));
	P("debug_fr_instr", offsetof(_Py_DebugOffsets, interpreter_frame.instr_ptr));
	P("debug_fr_owner", offsetof(_Py_DebugOffsets, interpreter_frame.owner));
	P("debug_co_filename", offsetof(_Py_DebugOffsets, code_object.filename));
	P("debug_co_qualname", offsetof(_Py_DebugOffsets, code_object.qualname));
	P("debug_co_linetable", offsetof(_Py_DebugOffsets, code_object.linetable));
	P("debug_co_firstline", offsetof(_Py_DebugOffsets, code_object.firstlineno));
	P("debug_co_code", offsetof(_Py_DebugOffsets, code_object.co_code_adaptive));
#endif
	return 0;
}
