// SPDX-License-Identifier: MIT
/*
 * softverbs: the command-line tool.
 *   softverbs daemon [ARGS]   run softverbsd in the foreground
 *   softverbs devinfo         what the device says about itself
 *   softverbs stat            objects per client, QPs, totals (--json,
 *                             --prometheus, --serve)
 *   softverbs top             the QPs, live
 *   softverbs inject FAULT    a fault on demand
 *   softverbs why             the last refusals and error completions, why
 *   softverbs capture -w F    the RoCEv2 packets into a pcapng file
 *   softverbs run -- CMD      run an unmodified verbs program on softverbs
 *   softverbs bench [ARGS]    measure softverbs (sv-bench, run as by 'run')
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/tool.h"

/* The folder holding this executable. */
static int self_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n < 0)
		return -errno;
	buf[n] = 0;
	slash = strrchr(buf, '/');
	if (!slash)
		return -EINVAL;
	*slash = 0;
	return 0;
}

int sv_tool_sibling(const char *rel, char *buf, size_t len)
{
	char dir[PATH_MAX];
	int ret = self_dir(dir, sizeof(dir));

	if (ret)
		return ret;
	if (snprintf(buf, len, "%s/%s", dir, rel) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: softverbs COMMAND [ARGS]\n"
"  daemon [ARGS]     run the device (softverbsd) in the foreground;\n"
"                    'softverbs daemon --help' lists its options\n"
"  devinfo           show the device, its port and its GIDs\n"
"  stat              objects held per client, every QP, and totals;\n"
"                    --json, --prometheus, --serve [ADDR:]PORT\n"
"  top               the device's QPs, live (like top)\n"
"  inject FAULT      make a fault happen: a command's errno, an RNR NAK,\n"
"                    a remote access error, a fatal QP, the port down\n"
"                    or up, RoCEv2 packet loss\n"
"  why [--qp N]      the last refused commands and error completions,\n"
"                    with the device's reason (key, bound, right)\n"
"  capture -w FILE   the device's RoCEv2 packets into a pcapng file\n"
"  run [--ns] -- CMD [ARGS]\n"
"                    run an unmodified verbs program on softverbs\n"
"  bench [ARGS]      bandwidth, latency and message rate between two\n"
"                    processes; 'softverbs bench --help' lists its options\n"
"  help              this text\n"
"Each command takes --help.\n");
}

#ifndef SV_BIN_TO_LIB
#define SV_BIN_TO_LIB "../lib/softverbs"
#endif
#ifndef SV_BIN_TO_LIBEXEC
#define SV_BIN_TO_LIBEXEC "../libexec/softverbs"
#endif

/* A helper program (softverbsd, sv-bench): beside this one (a build tree),
 * else where an installed tree keeps it. 0 or -ENOENT. */
static int helper(const char *name, char *buf, size_t len)
{
	char rel[PATH_MAX];

	if (!sv_tool_sibling(name, buf, len) && !access(buf, X_OK))
		return 0;
	snprintf(rel, sizeof(rel), "%s/%s", SV_BIN_TO_LIBEXEC, name);
	if (!sv_tool_sibling(rel, buf, len) && !access(buf, X_OK))
		return 0;
	return -ENOENT;
}

/* The folder of our libibverbs.so.1 and the preload library: the build
 * tree's lib, else the installed tree's. */
static int lib_dir(char *buf, size_t len)
{
	char probe[PATH_MAX + 32];

	if (!sv_tool_sibling("../lib", buf, len)) {
		snprintf(probe, sizeof(probe), "%s/libibverbs.so.1", buf);
		if (!access(probe, R_OK))
			return 0;
	}
	return sv_tool_sibling(SV_BIN_TO_LIB, buf, len);
}

static int cmd_daemon(int argc, char **argv)
{
	char exe[PATH_MAX];

	if (helper("softverbsd", exe, sizeof(exe)))
		snprintf(exe, sizeof(exe), "softverbsd");
	argv[0] = exe;
	(void)argc;
	execvp(exe, argv);
	fprintf(stderr, "softverbs: cannot run %s: %s\n", exe, strerror(errno));
	return 127;
}

/*
 * LD_PRELOAD for 'run': what the caller had, then the preload library that
 * shows the device view (src/preload/). In a sanitized build the ASan
 * runtime comes first: our libraries are instrumented, the program may not
 * be.
 */
static int set_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	const char *asan = "";
	char pre[PATH_MAX], val[PATH_MAX * 4];
	int n;

#ifdef SV_ASAN_RUNTIME
	if (!old || !strstr(old, SV_ASAN_RUNTIME))
		asan = SV_ASAN_RUNTIME;
#endif
	if (snprintf(pre, sizeof(pre), "%s/libsoftverbs_preload.so", lib) >=
	    (int)sizeof(pre)) {
		fprintf(stderr, "softverbs run: path too long\n");
		return -1;
	}
	if (access(pre, R_OK))
		pre[0] = 0; /* no view, as before it existed */
	if (old && pre[0] && strstr(old, pre))
		pre[0] = 0; /* run inside run */
	n = snprintf(val, sizeof(val), "%s%s%s%s%s", asan,
		     *asan && old && *old ? ":" : "", old ? old : "",
		     (*asan || (old && *old)) && pre[0] ? ":" : "", pre);
	if (n >= (int)sizeof(val)) {
		fprintf(stderr, "softverbs run: LD_PRELOAD too long\n");
		return -1;
	}
	if (val[0])
		setenv("LD_PRELOAD", val, 1);
	return 0;
}

static int cmd_run(int argc, char **argv)
{
	char lib[PATH_MAX], daemon[PATH_MAX], path[PATH_MAX * 2];
	const char *old = getenv("LD_LIBRARY_PATH");
	int first = 1;

	bool ns = false;

	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: softverbs run [--ns] [--] CMD [ARGS]\n"
		       "  runs CMD with softverbs' libibverbs.so.1 first on the\n"
		       "  library path and the device view at /dev/infiniband and\n"
		       "  /sys/class/infiniband*; the device starts by itself if\n"
		       "  needed\n"
		       "  --ns  also mount the view there, in a user and mount\n"
		       "        namespace of CMD's own (unprivileged): every file\n"
		       "        access sees it, a static program's too\n");
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "--ns")) {
		ns = true;
		argv++;
		argc--;
	}
	if (argc >= 2 && !strcmp(argv[1], "--"))
		first = 2;
	if (first >= argc) {
		fprintf(stderr, "softverbs run: no command given\n");
		return 2;
	}
	if (lib_dir(lib, sizeof(lib))) {
		fprintf(stderr, "softverbs run: cannot find my own folder\n");
		return 1;
	}
	if (helper("softverbsd", daemon, sizeof(daemon)))
		daemon[0] = 0;
	snprintf(path, sizeof(path), "%s%s%s", lib, old && *old ? ":" : "",
		 old && *old ? old : "");
	setenv("LD_LIBRARY_PATH", path, 1);
	if (!getenv("SOFTVERBSD") && daemon[0])
		setenv("SOFTVERBSD", daemon, 1);
	if (set_preload(lib))
		return 1;
#ifdef SV_ASAN_RUNTIME
	/* leaks of the program itself (python, say) are not ours to report */
	if (!getenv("ASAN_OPTIONS"))
		setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
	/* Open MPI's binary patcher and libfabric's memory hooks rewrite the
	 * first bytes of mprotect, munmap and the like, which under GCC 14's
	 * libasan (Debian 13) are its interceptors' trampolines, a few bytes
	 * each: the rewrite runs into the next one, and the program (UCX 1.18's
	 * ucx_perftest, say, which starts MPI whenever its stdin is not a
	 * terminal) dies of an illegal instruction. Neither is ours to test. */
	if (!getenv("OMPI_MCA_patcher"))
		setenv("OMPI_MCA_patcher", "^overwrite", 1);
	if (!getenv("FI_MR_CACHE_MONITOR"))
		setenv("FI_MR_CACHE_MONITOR", "disabled", 1);
#endif
	if (ns && sv_tool_ns_enter())
		return 1;
	execvp(argv[first], &argv[first]);
	fprintf(stderr, "softverbs run: %s: %s\n", argv[first], strerror(errno));
	return 127;
}

/* bench: sv-bench (beside this program), run the way 'run' runs a program. */
static int cmd_bench(int argc, char **argv)
{
	char exe[PATH_MAX];
	char **av = calloc((size_t)argc + 3, sizeof(*av));

	if (!av || helper("sv-bench", exe, sizeof(exe))) {
		fprintf(stderr, "softverbs bench: cannot find sv-bench beside "
				"softverbs\n");
		return 1;
	}
	av[0] = "run";
	av[1] = "--";
	av[2] = exe;
	for (int i = 1; i < argc; i++)
		av[i + 2] = argv[i];
	return cmd_run(argc + 2, av);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "daemon"))
		return cmd_daemon(argc - 1, argv + 1);
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bench"))
		return cmd_bench(argc - 1, argv + 1);
	if (!strcmp(argv[1], "devinfo"))
		return sv_tool_devinfo(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stat"))
		return sv_tool_stat(argc - 1, argv + 1);
	if (!strcmp(argv[1], "top"))
		return sv_tool_top(argc - 1, argv + 1);
	if (!strcmp(argv[1], "inject"))
		return sv_tool_inject(argc - 1, argv + 1);
	if (!strcmp(argv[1], "why"))
		return sv_tool_why(argc - 1, argv + 1);
	if (!strcmp(argv[1], "capture"))
		return sv_tool_capture(argc - 1, argv + 1);
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "softverbs: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
