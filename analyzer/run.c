/* SPDX-License-Identifier: MIT */
/*
 * memtrace run: runs a program under libmemtrace.so and says where the
 * trace went. The configuration travels in the environment (MEMTRACE_*),
 * which is all the preload reads.
 *
 * Signals: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1 and SIGUSR2 sent to
 * the wrapper are passed on to the program, which decides what they do (a
 * wrapper that died alone would leave it running, writing its trace). A
 * signal the terminal sends to its whole foreground process group (Ctrl-C,
 * Ctrl-\) has reached the program already and is not sent twice. The
 * wrapper ends the way the program did: with its exit status, or killed by
 * the signal that killed it (so a shell loop of traced commands stops at a
 * Ctrl-C), without a core dump of its own. 127 or 126 when the program
 * could not be started.
 *
 * May not: touch the trace (the preload creates it, moves an earlier one to
 * FILE.old, or writes FILE.1 when another live run is writing FILE); it
 * reads trace headers to say which file it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <memtrace/bytes.h>
#include <memtrace/output-name.h>
#include <memtrace/output-place.h>
#include <memtrace/trace-format.h>

#include "commands.h"
#include "ring.h"

#define PRELOAD_NAME "libmemtrace.so"
#define CUPTI_NAME   "libmemtrace-cupti.so" /* built only with the CUDA toolkit */

static void usage(FILE *f)
{
	fputs("usage: memtrace run [-o FILE] [--depth N] [--interval MS] [--no-mmap] [--no-cuda]\n"
	      "                    [--sampling BYTES] [--ring SIZE] -- PROGRAM [ARGS...]\n"
	      "  --sampling record one allocation per BYTES allocated on average (K, M, G\n"
	      "             allowed; blocks over 5 x BYTES always): figures become estimates\n"
	      "  --ring     keep the trace within SIZE bytes (K, M, G; 1M at least), its oldest\n"
	      "             chunks written again once keyframes hold them (MEMTRACE_RING too)\n"
	      "  --no-cuda  do not load libmemtrace-cupti.so into CUDA programs (by default it "
	      "is,\n"
	      "             through CUDA_INJECTION64_PATH, when it was built)\n",
	      f);
}

/* The directory of the running memtrace executable, into dir. */
static int self_dir(char *dir, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", dir, size - 1);
	char *slash;

	if (n <= 0)
		return -errno;
	dir[n] = 0;
	slash = strrchr(dir, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	return 0;
}

/*
 * One of memtrace's libraries: the build tree first (analyzer/memtrace next
 * to preload/ and cupti/), then the installed places.
 */
static int find_library(const char *build_dir, const char *name, char *out, size_t size)
{
	char dir[PATH_MAX];
	const char *candidates[3][3] = {
	        {dir, build_dir, name},
	        {dir, "/" MT_PRELOAD_FROM_BINDIR "/", name},
	        {"", MT_PRELOAD_INSTALL_DIR "/", name},
	};

	if (self_dir(dir, sizeof(dir)) < 0)
		dir[0] = 0;
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		if (candidates[i][0] == dir && !dir[0])
			continue;
		if ((size_t)snprintf(out, size, "%s%s%s", candidates[i][0], candidates[i][1],
		                     candidates[i][2]) >= size)
			continue;
		if (access(out, R_OK) == 0) {
			char *real = realpath(out, NULL);
			if (real && strlen(real) < size)
				strcpy(out, real);
			free(real);
			return 0;
		}
	}
	return -ENOENT;
}

static bool number(const char *s, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max)
		return false;
	*out = v;
	return true;
}

/* --sampling: bytes from 1 to 1 GiB, as MEMTRACE_SAMPLING reads them. */
static bool sampling_bytes(const char *s)
{
	uint64_t v;

	return !mt_parse_bytes(s, &v) && v >= 1 && v <= MT_SAMPLING_MAX;
}

/* --ring and MEMTRACE_RING: bytes from 1 MiB to 1 TiB, as the preload reads them. */
static bool ring_bytes(const char *s)
{
	uint64_t v;

	return !mt_parse_bytes(s, &v) && v >= MT_RING_MIN && v <= MT_RING_MAX;
}

/* MEMTRACE_OUTPUT expanded for pid as the preload does (empty when too long). */
static void expand(const char *pattern, pid_t pid, char *out, size_t size)
{
	if (mt_output_expand(pattern, pid, out, size) < 0)
		out[0] = 0;
}

/* The signals passed on to the program. */
static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM};
#define N_FORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))

/* The program's pid from its fork until it is reaped, else 0. */
static volatile sig_atomic_t target;
/* The wrapper leads its session: a terminal's hangup SIGHUP reaches it alone. */
static bool session_leader;

/* What the wrapper had before it took over the forwarded signals. */
struct dispositions {
	struct sigaction action[N_FORWARDED];
	sigset_t mask;
};

/*
 * Whether the program got sig itself. The terminal sends Ctrl-C's SIGINT,
 * Ctrl-\'s SIGQUIT and the SIGHUP when its session leader exits to the whole
 * foreground process group, which the program shares, with si_code
 * SI_KERNEL; kill() and sigqueue() give SI_USER and SI_QUEUE. A hangup's
 * SIGHUP goes to the session leader alone.
 */
static bool reached_program(int sig, const siginfo_t *info)
{
	return info->si_code == SI_KERNEL && !(sig == SIGHUP && session_leader);
}

/* Signal handler: async-signal-safe. */
static void forward(int sig, siginfo_t *info, void *context)
{
	int saved = errno;

	(void)context;
	if (target > 0 && !reached_program(sig, info))
		kill((pid_t)target, sig);
	errno = saved;
}

/* The forwarded signals as a set. */
static void forwarded_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t k = 0; k < N_FORWARDED; k++)
		sigaddset(set, forwarded[k]);
}

/*
 * Installs the forwarding, with the signals blocked: one that comes before
 * the program's pid is known waits until forwarding_on(). Signals ignored
 * when memtrace started (nohup, a shell's background job) are forwarded
 * too: the program starts with them ignored all the same, and one that
 * handles them anyway gets them as if sent to it.
 */
static void take_signals(struct dispositions *old)
{
	struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
	sigset_t set;

	forwarded_set(&set);
	sa.sa_mask = set; /* one at a time: passed on in the order they came */
	sigprocmask(SIG_BLOCK, &set, &old->mask);
	session_leader = getsid(0) == getpid();
	for (size_t k = 0; k < N_FORWARDED; k++)
		sigaction(forwarded[k], &sa, &old->action[k]);
}

/* The dispositions and mask memtrace started with: the program's, before exec. */
static void give_back_signals(const struct dispositions *old)
{
	for (size_t k = 0; k < N_FORWARDED; k++)
		sigaction(forwarded[k], &old->action[k], NULL);
	sigprocmask(SIG_SETMASK, &old->mask, NULL);
}

static void forwarding_on(pid_t pid, const struct dispositions *old)
{
	target = pid;
	sigprocmask(SIG_SETMASK, &old->mask, NULL);
}

/*
 * Waits for the program's end, forwarding signals meanwhile. It waits
 * without reaping first: until the wait that reaps it, the program's pid
 * stays taken (a zombie), so no signal forwarded in between can reach a
 * process that reused it. Then forwarding stops and the program is reaped.
 */
static int wait_program(pid_t pid, int *status)
{
	siginfo_t info;
	sigset_t set;
	int r = 0;

	while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0) {
		if (errno != EINTR) {
			r = -errno;
			break;
		}
	}
	forwarded_set(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
	target = 0;
	while (r == 0 && waitpid(pid, status, 0) < 0) {
		if (errno != EINTR)
			r = -errno;
	}
	return r;
}

/*
 * Ends the wrapper by sig, the signal that killed the program, as a shell
 * expects of the command it ran. Not dumpable, so that no core dump of the
 * wrapper replaces the program's (with core_pattern "core" both would be
 * ./core). Returns 128 + sig should sig not end it.
 */
static int die_by(int sig)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t set;

	prctl(PR_SET_DUMPABLE, 0);
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	return 128 + sig;
}

/* The header of the trace at path, if path is a regular file that starts with one. */
static bool read_header(const char *path, struct mt_file_header *h)
{
	/* O_NONBLOCK: a FIFO at the name would block the open */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	bool ok;

	if (fd < 0)
		return false;
	ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	     pread(fd, h, sizeof(*h), 0) == (ssize_t)sizeof(*h) &&
	     !memcmp(h->magic, MT_FILE_MAGIC, sizeof(h->magic));
	close(fd);
	return ok;
}

#define MAX_SUFFIX 99 /* the preload's NAME.1 .. NAME.99 (preload/writer.c) */

/* NAME, or NAME.k for k > 0; false when that is too long for out. */
static bool suffixed(const char *name, int k, char *out, size_t size)
{
	int n = k ? snprintf(out, size, "%s.%d", name, k) : snprintf(out, size, "%s", name);

	return n >= 0 && (size_t)n < size;
}

/*
 * Into out, the file the program's trace went to: the first of NAME,
 * NAME.1 .. NAME.99 whose header names the program as its root process (the
 * preload takes the next name when another live run is writing NAME). A
 * program the preload cannot enter (static, setuid) can have traced
 * children: failing the first, a trace created since the run started.
 */
static bool find_trace(const char *name, pid_t root, uint64_t since_ns, char *out, size_t size)
{
	struct mt_file_header h;
	int made_since = -1;

	for (int k = 0; k <= MAX_SUFFIX; k++) {
		if (!suffixed(name, k, out, size) || !read_header(out, &h))
			continue;
		if (h.root_pid == (uint32_t)root)
			return true;
		if (made_since < 0 && h.created_realtime >= since_ns)
			made_since = k;
	}
	return made_since >= 0 && suffixed(name, made_since, out, size);
}

/* This process's anonymous resident memory (RssAnon, /proc/self/status) in KiB; 0 unknown. */

/*
 * The ring's consumer while the program runs (ring.h): it polls every 10 ms
 * until the program ends, opening the trace once the program made it. It
 * never waits for the program nor touches it; when it cannot go on it
 * says so once, and the writers grow the file from then on.
 */
static void consume(pid_t pid, const char *name, bool pattern, uint64_t since_ns)
{
	struct timespec tick = {0, 10 * 1000000};
	char path[PATH_MAX + 8];
	struct mt_ring *ring = NULL;
	struct mt_ring_stats st;
	struct rusage use;
	bool stopped = false;
	siginfo_t info;
	int r;

	for (;;) {
		memset(&info, 0, sizeof(info));
		if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0 &&
		    errno != EINTR)
			break;
		if (info.si_pid == pid)
			break;
		if (!ring && !stopped) {
			if (pattern)
				expand(name, pid, path, sizeof(path));
			if ((pattern || find_trace(name, pid, since_ns, path, sizeof(path))) &&
			    (r = mt_ring_open(&ring, path)) < 0 && r != -ENOENT) {
				fprintf(stderr,
				        "memtrace: cannot consume the ring %s: %s; it grows\n",
				        path, strerror(-r));
				stopped = true;
			}
		}
		if (ring && !stopped && (r = mt_ring_poll(ring, false)) < 0) {
			fprintf(stderr,
			        "memtrace: the ring's consumer stopped: %s; the trace grows\n",
			        strerror(-r));
			stopped = true;
		}
		nanosleep(&tick, NULL);
	}
	if (!ring)
		return;
	mt_ring_stats(ring, &st);
	if (st.overflow && st.needed)
		fprintf(stderr,
		        "memtrace: the ring grew %llu bytes past its size, nothing lost: the "
		        "stack definitions it keeps (%.1f MiB) and its rounds of keyframes "
		        "(%.1f MiB each, three at a time) left too little room for the records "
		        "between two rounds; --ring %lluM would have held them\n",
		        (unsigned long long)st.overflow, (double)st.keep_bytes / (1 << 20),
		        (double)st.round_bytes / (1 << 20),
		        (unsigned long long)((st.needed + (1 << 20) - 1) >> 20));
	else if (st.overflow)
		fprintf(stderr,
		        "memtrace: the ring grew %llu bytes past its size (the consumer fell "
		        "behind "
		        "or stopped); nothing was lost\n",
		        (unsigned long long)st.overflow);
	else
		fprintf(stderr,
		        "memtrace: the ring kept the trace within its size: %llu rounds of "
		        "keyframes, %llu chunks written again\n",
		        (unsigned long long)st.rounds, (unsigned long long)st.released);
	/* the consumer is this process (the program is a child): its cost, for
	 * docs/performance.md; its own memory, not the trace's pages it maps */
	if (getrusage(RUSAGE_SELF, &use) == 0)
		fprintf(stderr,
		        "memtrace: the ring's consumer used %.2f s of CPU and holds %llu KiB of "
		        "memory of its own\n",
		        (double)use.ru_utime.tv_sec + (double)use.ru_stime.tv_sec +
		                (double)(use.ru_utime.tv_usec + use.ru_stime.tv_usec) / 1e6,
		        (unsigned long long)st.rss_anon_kib);
	mt_ring_close(ring);
}

static uint64_t realtime_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * The preload would refuse a name that is not a file of its own
 * (output-place.h) and the program would run untraced: say so before it
 * starts instead.
 */
static bool may_hold_trace(const char *file)
{
	int std = 0;
	enum mt_place p = mt_output_place(file, &std);

	if (p <= MT_PLACE_FILE)
		return true;
	fprintf(stderr, "memtrace run: %s %s; a trace needs a file of its own\n", file,
	        mt_output_place_why(p, std));
	return false;
}

int mt_cmd_run(int argc, char **argv)
{
	const char *output = "trace.bin", *depth = NULL, *interval = NULL, *sampling = NULL,
	           *ring = getenv("MEMTRACE_RING");
	char preload[PATH_MAX], cupti[PATH_MAX], file[PATH_MAX], trace[PATH_MAX + 8], *ld = NULL;
	bool no_mmap = false, no_cuda = false, existed = false, found;
	int i, status, pipefd[2], child_errno = 0;
	struct dispositions old_signals;
	uint64_t started_ns;
	struct stat st;
	pid_t pid;
	long v;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (a[0] != '-') {
			break;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return MT_EXIT_OK;
		} else if (!strcmp(a, "--no-mmap")) {
			no_mmap = true;
		} else if (!strcmp(a, "--no-cuda")) {
			no_cuda = true;
		} else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc) {
			output = argv[++i];
		} else if (!strncmp(a, "--output=", 9)) {
			output = a + 9;
		} else if (!strcmp(a, "--depth") && i + 1 < argc) {
			depth = argv[++i];
			if (!number(depth, 256, &v) || v < 1) {
				fprintf(stderr,
				        "memtrace run: --depth takes a number from 1 to 256\n");
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(a, "--sampling") && i + 1 < argc) {
			sampling = argv[++i];
			if (!sampling_bytes(sampling)) {
				fprintf(stderr,
				        "memtrace run: --sampling takes bytes from 1 to 1G (K, "
				        "M or G allowed)\n");
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(a, "--ring") && i + 1 < argc) {
			ring = argv[++i];
			if (!ring_bytes(ring)) {
				fprintf(stderr,
				        "memtrace run: --ring takes bytes from 1M to 1024G (K, "
				        "M or G allowed)\n");
				return MT_EXIT_USAGE;
			}
		} else if (!strcmp(a, "--interval") && i + 1 < argc) {
			interval = argv[++i];
			if (!number(interval, 3600 * 1000, &v)) {
				fprintf(stderr, "memtrace run: --interval takes milliseconds (0 "
				                "turns sampling off)\n");
				return MT_EXIT_USAGE;
			}
		} else {
			fprintf(stderr, "memtrace run: unknown option or missing value: %s\n", a);
			usage(stderr);
			return MT_EXIT_USAGE;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	if (!output[0]) {
		fprintf(stderr, "memtrace run: the output file name is empty\n");
		return MT_EXIT_USAGE;
	}
	if (no_cuda || find_library("/../cupti/", CUPTI_NAME, cupti, sizeof(cupti)) < 0)
		cupti[0] = 0;
	if (find_library("/../preload/", PRELOAD_NAME, preload, sizeof(preload)) < 0) {
		fprintf(stderr, "memtrace: cannot find %s next to this memtrace or in %s\n",
		        PRELOAD_NAME, MT_PRELOAD_INSTALL_DIR);
		return MT_EXIT_USAGE;
	}
	if (!strstr(output, "%p")) {
		expand(output, 0, file, sizeof(file));
		existed = lstat(file, &st) == 0;
		if (!may_hold_trace(file))
			return MT_EXIT_USAGE;
	}
	/* the child tells an exec failure through this pipe; a successful exec closes it */
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		fprintf(stderr, "memtrace: cannot make a pipe: %s\n", strerror(errno));
		return 127;
	}
	started_ns = realtime_ns();
	take_signals(&old_signals);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "memtrace: cannot fork: %s\n", strerror(errno));
		give_back_signals(&old_signals);
		return 127;
	}
	if (pid == 0) {
		const char *prev = getenv("LD_PRELOAD");
		int e;

		give_back_signals(&old_signals);
		close(pipefd[0]);
		if (prev && prev[0]) {
			ld = malloc(strlen(preload) + strlen(prev) + 2);
			if (ld)
				sprintf(ld, "%s:%s", preload, prev);
		}
		setenv("LD_PRELOAD", ld ? ld : preload, 1);
		setenv("MEMTRACE_OUTPUT", output, 1);
		if (depth)
			setenv("MEMTRACE_DEPTH", depth, 1);
		if (interval)
			setenv("MEMTRACE_INTERVAL_MS", interval, 1);
		if (no_mmap)
			setenv("MEMTRACE_MMAP", "0", 1);
		if (sampling)
			setenv("MEMTRACE_SAMPLING", sampling, 1);
		if (ring)
			setenv("MEMTRACE_RING", ring, 1);
		/* the CUDA driver loads it: it sees allocations LD_PRELOAD cannot (static cudart)
		 */
		if (cupti[0])
			setenv("CUDA_INJECTION64_PATH", cupti, 0);
		/* a trace of a trace would be joined to the outer one: start afresh */
		unsetenv("MEMTRACE_TREE");
		execvp(argv[i], argv + i);
		e = errno;
		if (write(pipefd[1], &e, sizeof(e)) < 0) {
			/* nothing left to tell it with */
		}
		_exit(e == ENOENT ? 127 : 126);
	}
	forwarding_on(pid, &old_signals);
	close(pipefd[1]);
	while (read(pipefd[0], &child_errno, sizeof(child_errno)) < 0 && errno == EINTR)
		;
	close(pipefd[0]);
	/* a bad MEMTRACE_RING is the preload's to say (it makes no ring) */
	if (!child_errno && ring && ring_bytes(ring))
		consume(pid, strstr(output, "%p") ? output : file, strstr(output, "%p") != NULL,
		        started_ns);
	if (wait_program(pid, &status) < 0)
		status = 127 << 8;
	if (child_errno) {
		fprintf(stderr, "memtrace: cannot run %s: %s\n", argv[i], strerror(child_errno));
		return child_errno == ENOENT ? 127 : 126;
	}
	if (strstr(output, "%p")) {
		expand(output, pid, file, sizeof(file));
		found = lstat(file, &st) == 0;
		snprintf(trace, sizeof(trace), "%s", file);
	} else {
		found = find_trace(file, pid, started_ns, trace, sizeof(trace));
	}
	if (!found)
		fprintf(stderr,
		        "memtrace: %s wrote no trace to %s (a static or setuid program cannot be "
		        "traced)\n",
		        argv[i], file);
	else if (existed && !strcmp(trace, file))
		fprintf(stderr,
		        "memtrace: trace of %s written to %s (the earlier trace is now %s.old)\n",
		        argv[i], file, file);
	else
		fprintf(stderr, "memtrace: trace of %s written to %s\n", argv[i], trace);
	if (WIFSIGNALED(status))
		return die_by(WTERMSIG(status));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 127;
}
