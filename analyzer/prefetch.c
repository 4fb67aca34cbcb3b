/* SPDX-License-Identifier: MIT */
/*
 * A report's first lookup in a module opens the module's file and debug
 * file and reads its DWARF: Debian's libc has a debug file with compressed
 * sections, which libdw inflates then, 77 ms of zlib in a 0.5 s report of
 * bench-small, after the replay and before the first line is printed. The
 * modules and the stacks' frames are all known once the replay's first
 * pass is done (replay.h), so a thread opens the modules with such a debug
 * file that the stacks have frames in (mt_prefetch_wanted) while the
 * replay runs.
 *
 * The thread runs under SCHED_IDLE: at the same priority it took a core
 * from the replay and its feed (feed.h), whose hand-offs slowed more than
 * its work saved (a threads report 0.64 -> 0.78 s). And it is never waited
 * for: at a thread of the lowest priority, on a machine whose cores are
 * all busy, one libc would take seconds. The first lookup takes its
 * symbolizer if it is done; otherwise the lookups open the modules
 * themselves, as without it, and the thread stops after its module and
 * frees its own. The answers are the same either way.
 *
 * May not: print; touch the modules once started (it works from copies).
 */
#include <elf.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "prefetch.h"

enum { RUNNING, DONE, LEFT };

struct mt_prefetch {
	pthread_t thread;
	struct mt_symbolizer *sym;
	struct mt_module *modules; /* copies: path and segments of their own */
	uint32_t nmodules;
	atomic_int state; /* RUNNING, then DONE by the thread or LEFT by mt_prefetch_take */
};

static void prefetch_free(struct mt_prefetch *p)
{
	for (uint32_t i = 0; i < p->nmodules; i++) {
		free(p->modules[i].path);
		free(p->modules[i].seg);
	}
	free(p->modules);
	if (p->sym)
		mt_symbolizer_free(p->sym);
	free(p);
}

static void *prefetch_all(void *arg)
{
	struct mt_prefetch *p = arg;

	pthread_setschedparam(pthread_self(), SCHED_IDLE, &(struct sched_param){0});
	/* out of memory: the lookup that needs the module says so */
	for (uint32_t i = 0; i < p->nmodules && atomic_load(&p->state) == RUNNING; i++)
		mt_symbolizer_prepare(p->sym, &p->modules[i]);
	if (atomic_exchange(&p->state, DONE) == LEFT)
		prefetch_free(p);
	return NULL;
}

bool mt_prefetch_wanted(const struct mt_instance *in, const struct mt_module *m)
{
	uint32_t n;
	const uint64_t *f = mt_replay_frames(in, &n);

	if (!mt_symbolizer_debug_file(m))
		return false;
	for (uint32_t s = 0; s < m->nseg; s++) {
		uint64_t lo = m->base + m->seg[s].vaddr, size = m->seg[s].memsz;
		if (!(m->seg[s].flags & PF_X))
			continue; /* a return address is in code */
		for (uint32_t i = 0; i < n; i++)
			if (f[i] - lo < size)
				return true;
	}
	return false;
}

static int copy_modules(struct mt_prefetch *p, const struct mt_module *const *m, uint32_t n)
{
	if (!(p->modules = calloc(n ? n : 1, sizeof(*p->modules))))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		struct mt_module *c = &p->modules[p->nmodules++];
		*c = *m[i];
		c->path = strdup(m[i]->path);
		c->seg = malloc((m[i]->nseg ? m[i]->nseg : 1) * sizeof(*c->seg));
		if (!c->path || !c->seg)
			return -1;
		memcpy(c->seg, m[i]->seg, m[i]->nseg * sizeof(*c->seg));
	}
	return 0;
}

struct mt_prefetch *mt_prefetch_start(const struct mt_module *const *m, uint32_t n)
{
	struct mt_prefetch *p = calloc(1, sizeof(*p));
	sigset_t all, was;
	bool made;

	if (!p)
		return NULL;
	atomic_init(&p->state, RUNNING);
	if (copy_modules(p, m, n) < 0 || mt_symbolizer_new(&p->sym) < 0) {
		prefetch_free(p);
		return NULL;
	}
	/* the command's signals stay its thread's (Ctrl-C, a closed pipe), as the feed's do */
	sigfillset(&all);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGSEGV);
	pthread_sigmask(SIG_BLOCK, &all, &was);
	made = pthread_create(&p->thread, NULL, prefetch_all, p) == 0;
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	if (!made) {
		prefetch_free(p);
		return NULL;
	}
	return p;
}

bool mt_prefetch_done(struct mt_prefetch *p)
{
	return atomic_load(&p->state) == DONE;
}

struct mt_symbolizer *mt_prefetch_take(struct mt_prefetch *p)
{
	struct mt_symbolizer *s;
	pthread_t thread;

	if (!p)
		return NULL;
	thread = p->thread; /* p is the thread's to free once LEFT */
	if (atomic_exchange(&p->state, LEFT) == RUNNING) {
		pthread_detach(thread);
		return NULL;
	}
	pthread_join(thread, NULL);
	s = p->sym;
	p->sym = NULL;
	prefetch_free(p);
	return s;
}
