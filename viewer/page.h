/* SPDX-License-Identifier: MIT */
/*
 * The page `memtrace view` writes, built from viewer/src by build.mjs: the
 * HTML before the trace's data and the HTML after it. The data goes in
 * between as JSON inside <script type="application/json">.
 */
#ifndef MEMTRACE_VIEWER_PAGE_H
#define MEMTRACE_VIEWER_PAGE_H

extern const char mt_viewer_page_head[];
extern const char mt_viewer_page_tail[];

#endif
