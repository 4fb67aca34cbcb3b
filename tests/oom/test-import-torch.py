# SPDX-License-Identifier: MIT
"""`import torch` alone under Debian's /usr/bin/python3 is a correct
program: it must get neither rss-above-live nor heap-fragmented. Most of
its RSS is torch's code (file-backed), and the heap it frees at interpreter
exit is teardown, not a moment to judge. The report's split of RSS must
match the kernel's: the script prints RssAnon and RssFile + RssShmem from
/proc/self/status after the import, and the moment judged comes after it
(the RSS peak or the end of the steady phase). Python frames are not
recorded (MEMTRACE_PYTHON=0): the findings do not depend on them. Skipped
(77) where /usr/bin/python3 has no torch."""
import os
import re
import shutil

from oomtest import check, diagnosis, main, near, run, run_traced, report, workdir

PYTHON = "/usr/bin/python3"
SCRIPT = """
import torch
f = {l.split(':')[0]: int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('Rss')}
print('anon', f['RssAnon'], 'file', f['RssFile'] + f['RssShmem'])
"""


def test_no_heap_finding():
    if run([PYTHON, "-c", "import torch"]).returncode != 0:
        print("skip: /usr/bin/python3 has no torch")
        raise SystemExit(77)
    d = workdir()
    trace = os.path.join(d, "trace.bin")
    out = run_traced([PYTHON, "-c", SCRIPT], trace, {"MEMTRACE_PYTHON": "0"})
    check(out.returncode == 0, f"import torch failed: {out.stderr.decode()[-2000:]}")
    m = re.search(rb"anon (\d+) file (\d+)", out.stdout)
    check(m, f"the script did not print its RSS: {out.stdout!r}")
    anon, file = int(m.group(1)), int(m.group(2))
    (proc,) = report(trace)["processes"]
    shutil.rmtree(d)
    fr = diagnosis(proc, "fragmentation")
    found = {f["finding"]: f for f in fr["findings"]}
    for name in ("rss-above-live", "heap-fragmented"):
        check(name not in found, f"{name} on import torch: {found.get(name)}")
    check(fr["moment"] in ("rss-peak", "steady-end"), f"moment {fr['moment']}")
    check(fr["rss_anon"] + fr["rss_file"] == fr["rss"], f"anon + file is not RSS: {fr}")
    # code pages mapped after the moment judged are few: file-backed RSS within 10%
    near("rss_file", fr["rss_file"], file, 0.10)
    check(fr["rss_anon"] <= anon * 1.1, f"rss_anon {fr['rss_anon']} above the {anon} after the import")


main({"no_heap_finding": test_no_heap_finding})
