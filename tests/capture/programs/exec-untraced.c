/* SPDX-License-Identifier: MIT */
/*
 * exec-untraced MODE [STATIC]: a traced process that execs what memtrace
 * cannot follow, and one whose exec fails.
 *
 *   fork STATIC  a forked child leaves 3 blocks of 1000 bytes live and execs
 *                STATIC (a static program: memtrace cannot enter it); the
 *                parent returns the child's exit status.
 *   each STATIC  one forked child per exec function, in the order of FNS
 *                below; child i keeps i + 1 blocks of 100 bytes and runs
 *                STATIC with the arguments "one two" and MT_EXEC_FN set to
 *                the function's name (the p functions find it by PATH,
 *                execveat relative to a descriptor of its folder).
 *   missing      (PATH set to a folder that does not exist: no setenv here,
 *                which would allocate) every exec function on a program that
 *                does not exist (fexecve:
 *                on /dev/null, which cannot be run): each must return -1 with
 *                errno ENOENT (EACCES); then 5 blocks of 500 bytes, 2 of them
 *                freed, and main returns 0.
 *   vfork        a vfork child execs a program that does not exist and
 *                _exits 127; the parent then keeps 3 of 4 blocks of 300
 *                bytes and main returns 0.
 * Exits 0 when every call behaved as it does untraced, else a status > 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *const FNS[] = {"execve", "execv",  "execvp",  "execvpe", "execl",
                                  "execlp", "execle", "fexecve", "execveat"};
#define NFNS (sizeof(FNS) / sizeof(FNS[0]))

void *keep[16];

/* Calls exec function fn on path (name: the same for the PATH-searching ones). */
static int exec_with(unsigned fn, const char *path, const char *name, char *const env[])
{
	char *const argv[] = {(char *)name, "one", "two", NULL};
	char dir[4096];
	int fd;

	switch (fn) {
	case 0:
		return execve(path, argv, env);
	case 1:
		return execv(path, argv);
	case 2:
		return execvp(name, argv);
	case 3:
		return execvpe(name, argv, env);
	case 4:
		return execl(path, name, "one", "two", (char *)NULL);
	case 5:
		return execlp(name, name, "one", "two", (char *)NULL);
	case 6:
		return execle(path, name, "one", "two", (char *)NULL, env);
	case 7:
		fd = open(path, O_RDONLY | O_CLOEXEC);
		return fd < 0 ? fd : fexecve(fd, argv, env);
	default:
		strncpy(dir, path, sizeof(dir) - 1);
		dir[sizeof(dir) - 1] = 0;
		fd = open(dirname(dir), O_PATH | O_DIRECTORY | O_CLOEXEC);
		return fd < 0 ? fd : execveat(fd, name, argv, env, 0);
	}
}

static int wait_status(pid_t child)
{
	int status;

	if (child < 0 || waitpid(child, &status, 0) != child)
		return 100;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 101;
}

static int fork_one(const char *path)
{
	pid_t child = fork();

	if (child == 0) {
		for (int i = 0; i < 3; i++)
			keep[i] = malloc(1000);
		execl(path, path, "one", "two", (char *)NULL);
		_exit(127);
	}
	return wait_status(child);
}

static int each(const char *path)
{
	char dir[4096];

	strncpy(dir, path, sizeof(dir) - 1);
	dir[sizeof(dir) - 1] = 0;
	for (unsigned fn = 0; fn < NFNS; fn++) {
		pid_t child = fork();
		if (child == 0) {
			char var[64] = "MT_EXEC_FN=";
			char *const env[] = {strcat(var, FNS[fn]), NULL};
			for (unsigned i = 0; i <= fn; i++)
				keep[i] = malloc(100);
			setenv("PATH", dirname(dir), 1);
			setenv("MT_EXEC_FN", FNS[fn], 1);
			exec_with(fn, path, basename(strdup(path)), env);
			_exit(127);
		}
		if (wait_status(child) != 0)
			return 10 + (int)fn;
	}
	return 0;
}

static int missing(void)
{
	char *const env[] = {NULL};
	int fd;

	for (unsigned fn = 0; fn < NFNS; fn++) {
		if (!strcmp(FNS[fn], "fexecve"))
			continue;
		errno = 0;
		if (exec_with(fn, "/tmp/nonexistent-memtrace-test", "nonexistent-memtrace-test",
		              env) != -1 ||
		    errno != ENOENT)
			return 10 + (int)fn;
	}
	/* fexecve needs a file that exists: one that cannot be run */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	errno = 0;
	if (fd < 0 || fexecve(fd, (char *const[]){"null", NULL}, env) != -1 || errno != EACCES)
		return 9;
	close(fd);
	for (int i = 0; i < 5; i++)
		keep[i] = malloc(500);
	free(keep[1]);
	free(keep[3]);
	return 0;
}

static int vfork_missing(void)
{
	pid_t child = vfork();

	if (child == 0) {
		char *const argv[] = {"prog", NULL};
		execv("/nonexistent-memtrace-test/prog", argv);
		_exit(127);
	}
	if (wait_status(child) != 127)
		return 3;
	for (int i = 0; i < 4; i++)
		keep[i] = malloc(300);
	free(keep[2]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "fork"))
		return fork_one(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "each"))
		return each(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "missing"))
		return missing();
	if (argc == 2 && !strcmp(argv[1], "vfork"))
		return vfork_missing();
	return 2;
}
