/* SPDX-License-Identifier: MIT */
/*
 * Prints preload/python-layout.h's entry for the version given (e.g. 3.11)
 * as layout.c prints the interpreter's headers: test-layout.py compares them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "python-layout.h"

#define P(name, value) printf("%s %ld\n", name, (long)(value))

int main(int argc, char **argv)
{
	unsigned major, minor;

	if (argc != 2 || sscanf(argv[1], "%u.%u", &major, &minor) != 2) {
		fprintf(stderr, "usage: %s MAJOR.MINOR\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof(mt_py_layouts) / sizeof(mt_py_layouts[0]); i++) {
		const struct mt_py_layout *l = &mt_py_layouts[i];

		if (l->version != (major << 8 | minor))
			continue;
		P("version", l->version);
		P("ts_frame", l->ts_frame);
		P("cframe_current", l->cframe_current);
		P("fr_previous", l->fr_previous);
		P("fr_code", l->fr_code);
		P("fr_instr", l->fr_instr);
		P("fr_entry", l->fr_entry);
		if (l->entry == MT_PY_ENTRY_CSTACK)
			P("owned_by_cstack", MT_PY_FRAME_OWNED_BY_CSTACK);
		P("co_name", l->co_name);
		P("co_code_adaptive", l->co_code_adaptive);
		P("co_filename", l->co_filename);
		P("co_firstlineno", l->co_firstlineno);
		P("co_linetable", l->co_linetable);
		P("ascii_size", l->ascii_size);
		P("compact_size", l->compact_size);
		P("ob_type", MT_PY_OB_TYPE);
		P("str_length", MT_PY_STR_LENGTH);
		P("str_state", MT_PY_STR_STATE);
		P("bytes_size", MT_PY_BYTES_SIZE);
		P("bytes_data", MT_PY_BYTES_DATA);
		if (l->version >= 0x30d) {
			P("debug_version", MT_PY_DEBUG_VERSION);
			P("debug_free_threaded", MT_PY_DEBUG_FREE_THREADED);
			P("debug_ts_frame", MT_PY_DEBUG_TS_FRAME);
			P("debug_fr_previous", MT_PY_DEBUG_FR_PREVIOUS);
			P("debug_fr_code", MT_PY_DEBUG_FR_CODE);
			P("debug_fr_instr", MT_PY_DEBUG_FR_INSTR);
			P("debug_fr_owner", MT_PY_DEBUG_FR_OWNER);
			P("debug_co_filename", MT_PY_DEBUG_CO_FILENAME);
			P("debug_co_qualname", MT_PY_DEBUG_CO_QUALNAME);
			P("debug_co_linetable", MT_PY_DEBUG_CO_LINETABLE);
			P("debug_co_firstline", MT_PY_DEBUG_CO_FIRSTLINE);
			P("debug_co_code", MT_PY_DEBUG_CO_CODE);
		}
		return 0;
	}
	fprintf(stderr, "%s: no entry for %s\n", argv[0], argv[1]);
	return 1;
}
