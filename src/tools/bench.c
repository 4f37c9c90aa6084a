// SPDX-License-Identifier: MIT
/*
 * sv-bench, the program behind `softverbs bench`: the command line, the two
 * processes, the progress bar and the report (a table, or --json).
 *
 * The process started is the client: it measures and reports. It starts
 * the server by running itself again (with --server-fd) on one end of a
 * socketpair; the two exchange what connects their QPs over it, and the
 * client leads the runs (bench_run.c). A server that ends before it is
 * asked to ends the client too; a client that ends takes the server with
 * it (PR_SET_PDEATHSIG).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: softverbs bench [-t write|read|send|atomic] [-m bw|lat]\n"
"                       [-s SIZE | -a | --sizes A,B,...] [-n ITERS]\n"
"                       [-q QPS] [-o OUTSTANDING] [-e] [--json]\n"
"                       [--no-progress] [--res-domain THREAD[,MSG]]\n"
"                       [--domains none|one|per-qp]\n"
"Measures softverbs between a server and a client process on this host.\n"
"  -t, --test T        write (RDMA WRITE, default), read (RDMA READ), send\n"
"                      (SEND/RECV) or atomic (8-byte fetch-and-add)\n"
"  -m, --mode M        bw: bandwidth and message rate (default);\n"
"                      lat: latency, p50/p99/min/max. write and send are\n"
"                      ping-pongs reported one way (half the round trip);\n"
"                      read and atomic report the round trip\n"
"  -s, --size SIZE     message bytes (default 65536; K, M, G suffixes are\n"
"                      KiB, MiB, GiB); atomic: 8 only\n"
"  -a, --all           sweep 2, 4, ..., 8 MiB (atomic: 8)\n"
"      --sizes A,B,... these sizes\n"
"  -n, --iters N       messages per QP and size (default 1000; without -n,\n"
"                      sizes above 64 KiB get fewer, about 64 MiB, >= 32);\n"
"                      bw is timed from the first post to the last\n"
"                      completion after a short warm-up, lat after n/10\n"
"                      (at most 100) uncounted iterations\n"
"  -q, --qps N         QPs (bw only; default 1, at most %u)\n"
"  -o, --outstanding N WRs in flight per QP (bw only; default 64, at most %u;\n"
"                      -q x -o at most %u); a completion every N/4\n"
"  -e, --events        wait for completions on a completion channel instead\n"
"                      of busy polling (write lat then uses WRITE_WITH_IMM\n"
"                      and waits for the receive completion)\n"
"      --json          one JSON object on stdout instead of the table\n"
"      --no-progress   no progress bar (there is none unless stderr is a\n"
"                      terminal)\n""      --res-domain THREAD[,MSG]\n"
"                      make the CQs and QPs of both processes in resource\n"
"                      domains (ibv_exp_create_res_domain) of thread model\n"
"                      THREAD (safe, unsafe or single) and message model MSG\n"
"                      (default, low_latency, high_bw or force_low_latency;\n"
"                      default if left out); implies --domains one\n"
"      --domains D     none: plain ibv_create_cq/ibv_create_qp (default\n"
"                      without --res-domain); one: every QP of a process and\n"
"                      its two CQs in one domain; per-qp: a domain per QP,\n"
"                      each QP with a send and a receive CQ of its own. A\n"
"                      domain without --res-domain is safe,default\n"
"      --memfd         both processes' buffers in a memfd sealed against\n"
"                      shrinking, mapped shared (memory the direct path\n"
"                      copies with plain loads and stores), not anonymous\n"
"                      memory\n"
"      --dm            both processes' buffers in device memory\n"
"                      (ibv_alloc_dm, ibv_reg_dm_mr); -m bw only\n"
"Exit status: 0 measured, 1 failed, 2 bad arguments.\n",
		BT_MAX_QPS, BT_MAX_OUTST, BT_MAX_QP_WRS);
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bad(const char *fmt, ...)
{
	va_list ap;

	fputs(BT_NAME ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see 'softverbs bench --help')\n", stderr);
	return 2;
}

/* A decimal number, optionally with K, M or G (binary) for sizes. */
static int parse_u64(const char *s, bool suffix, uint64_t *v)
{
	unsigned long long n;
	char *end;
	int shift = 0;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	if (suffix && *end) {
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
		else if (*end == 'B')
			end++;
	}
	if (*end)
		return -1;
	if (shift && n > (UINT64_MAX >> shift))
		return -1;
	*v = (uint64_t)n << shift;
	return 0;
}

static int parse_size(const char *opt, const char *s, uint64_t *v)
{
	if (parse_u64(s, true, v))
		return bad("%s: '%s' is not a size in bytes", opt, s);
	if (*v == 0 || *v > BT_MAX_SIZE)
		return bad("%s: %s is out of range (1 to 1 GiB)", opt, s);
	return 0;
}

static int parse_uint(const char *opt, const char *s, uint64_t max,
		      uint64_t *v)
{
	if (parse_u64(s, false, v))
		return bad("%s: '%s' is not a number", opt, s);
	if (*v == 0 || *v > max)
		return bad("%s: %s is out of range (1 to %" PRIu64 ")", opt, s,
			   max);
	return 0;
}

enum {
	OPT_JSON = 0x100, OPT_NO_PROGRESS, OPT_SIZES, OPT_SERVER_FD,
	OPT_RES_DOMAIN, OPT_DOMAINS, OPT_MEMFD, OPT_DM,
};

/* --res-domain THREAD[,MSG] */
static int parse_res_domain(const char *s, struct bt_opts *o)
{
	const char *comma = strchr(s, ',');
	size_t tlen = comma ? (size_t)(comma - s) : strlen(s);
	const char *msg = comma ? comma + 1 : "default";
	unsigned int i;

	for (i = 0; i < 3; i++)
		if (strlen(bt_thread_model_name(i)) == tlen &&
		    !strncmp(s, bt_thread_model_name(i), tlen))
			break;
	if (i == 3)
		return bad("--res-domain: unknown thread model '%.*s' (safe, "
			   "unsafe or single)", (int)(tlen > 64 ? 64 : tlen), s);
	o->thread_model = i;
	for (i = 0; i < 4; i++)
		if (!strcmp(msg, bt_msg_model_name(i)))
			break;
	if (i == 4)
		return bad("--res-domain: unknown message model '%.64s' "
			   "(default, low_latency, high_bw or "
			   "force_low_latency)", msg);
	o->msg_model = i;
	return 0;
}

/* 0: run; 1: --help printed; 2: bad arguments (said on stderr). */
static int parse(int argc, char **argv, struct bt_opts *o)
{
	static const struct option longopts[] = {
		{ "test", required_argument, NULL, 't' },
		{ "mode", required_argument, NULL, 'm' },
		{ "size", required_argument, NULL, 's' },
		{ "all", no_argument, NULL, 'a' },
		{ "sizes", required_argument, NULL, OPT_SIZES },
		{ "iters", required_argument, NULL, 'n' },
		{ "qps", required_argument, NULL, 'q' },
		{ "outstanding", required_argument, NULL, 'o' },
		{ "events", no_argument, NULL, 'e' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
		{ "help", no_argument, NULL, 'h' },
		{ "server-fd", required_argument, NULL, OPT_SERVER_FD },
		{ "res-domain", required_argument, NULL, OPT_RES_DOMAIN },
		{ "domains", required_argument, NULL, OPT_DOMAINS },
		{ "memfd", no_argument, NULL, OPT_MEMFD },
		{ "dm", no_argument, NULL, OPT_DM },
		{ NULL, 0, NULL, 0 },
	};
	bool have_s = false, have_a = false, have_list = false;
	bool have_q = false, have_o = false, no_progress = false;
	bool have_rd = false, have_dom = false;
	uint64_t v, s_size = 65536;
	char *list = NULL;
	int c, ret;

	memset(o, 0, sizeof(*o));
	o->test = BT_WRITE;
	o->mode = BT_BW;
	o->qps = 1;
	o->outstanding = 64;
	o->server_fd = -1;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":t:m:s:an:q:o:eh", longopts,
				NULL)) != -1) {
		switch (c) {
		case 't':
			if (!strcmp(optarg, "write"))
				o->test = BT_WRITE;
			else if (!strcmp(optarg, "read"))
				o->test = BT_READ;
			else if (!strcmp(optarg, "send"))
				o->test = BT_SEND;
			else if (!strcmp(optarg, "atomic"))
				o->test = BT_ATOMIC;
			else
				return bad("-t: unknown test '%s' (write, read, "
					   "send or atomic)", optarg);
			break;
		case 'm':
			if (!strcmp(optarg, "bw"))
				o->mode = BT_BW;
			else if (!strcmp(optarg, "lat"))
				o->mode = BT_LAT;
			else
				return bad("-m: unknown mode '%s' (bw or lat)",
					   optarg);
			break;
		case 's':
			if ((ret = parse_size("-s", optarg, &s_size)))
				return ret;
			have_s = true;
			break;
		case 'a':
			have_a = true;
			break;
		case OPT_SIZES:
			list = optarg;
			have_list = true;
			break;
		case 'n':
			if ((ret = parse_uint("-n", optarg, BT_MAX_ITERS, &v)))
				return ret;
			o->iters = v;
			break;
		case 'q':
			if ((ret = parse_uint("-q", optarg, BT_MAX_QPS, &v)))
				return ret;
			o->qps = (unsigned int)v;
			have_q = true;
			break;
		case 'o':
			if ((ret = parse_uint("-o", optarg, BT_MAX_OUTST, &v)))
				return ret;
			o->outstanding = (unsigned int)v;
			have_o = true;
			break;
		case 'e':
			o->events = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_NO_PROGRESS:
			no_progress = true;
			break;
		case OPT_RES_DOMAIN:
			if ((ret = parse_res_domain(optarg, o)))
				return ret;
			have_rd = true;
			break;
		case OPT_MEMFD:
			o->memfd = true;
			break;
		case OPT_DM:
			o->dm = true;
			break;
		case OPT_DOMAINS:
			if (!strcmp(optarg, "none"))
				o->domains = BT_DOM_NONE;
			else if (!strcmp(optarg, "one"))
				o->domains = BT_DOM_ONE;
			else if (!strcmp(optarg, "per-qp"))
				o->domains = BT_DOM_PER_QP;
			else
				return bad("--domains: unknown value '%s' (none, "
					   "one or per-qp)", optarg);
			have_dom = true;
			break;
		case OPT_SERVER_FD:
			if (parse_u64(optarg, false, &v) || v > INT_MAX)
				return bad("--server-fd: '%s'", optarg);
			o->server_fd = (int)v;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case ':':
			if (optopt > 0 && optopt < 0x80 &&
			    argv[optind - 1][1] != '-')
				return bad("-%c needs a value", optopt);
			return bad("%s needs a value", argv[optind - 1]);
		default:
			if (optopt > 0 && optopt < 0x80)
				return bad("unknown option '-%c'", optopt);
			return bad("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	if (have_s + have_a + have_list > 1)
		return bad("-s, -a and --sizes exclude each other");
	if (have_rd && have_dom && o->domains == BT_DOM_NONE)
		return bad("--res-domain and --domains none exclude each other");
	if (have_rd && !have_dom)
		o->domains = BT_DOM_ONE;
	if (o->dm && o->memfd)
		return bad("--dm and --memfd exclude each other");
	if (o->dm && o->mode != BT_BW)
		return bad("--dm: -m bw only (the latency test watches its "
			   "buffer, which DM does not show)");

	if (have_a) {
		if (o->test == BT_ATOMIC)
			o->sizes[o->nsizes++] = 8;
		else
			for (uint64_t s = 2; s <= (8u << 20); s *= 2)
				o->sizes[o->nsizes++] = s;
	} else if (have_list) {
		char *copy = strdup(list), *tok, *save = NULL;

		if (!copy)
			return bad("out of memory");
		for (tok = strtok_r(copy, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			if (o->nsizes == BT_MAX_SIZES) {
				free(copy);
				return bad("--sizes: more than %d sizes",
					   BT_MAX_SIZES);
			}
			if ((ret = parse_size("--sizes", tok,
					      &o->sizes[o->nsizes]))) {
				free(copy);
				return ret;
			}
			o->nsizes++;
		}
		free(copy);
		if (!o->nsizes)
			return bad("--sizes: no size given");
	} else {
		o->sizes[o->nsizes++] = o->test == BT_ATOMIC && !have_s ?
					8 : s_size;
	}
	if (o->test == BT_ATOMIC)
		for (unsigned int i = 0; i < o->nsizes; i++)
			if (o->sizes[i] != 8)
				return bad("atomic operands are 8 bytes: size "
					   "%" PRIu64 " is not possible",
					   o->sizes[i]);
	if (o->mode == BT_LAT) {
		if (have_q && o->qps != 1)
			return bad("-q: latency is measured on one QP (-q "
				   "applies to -m bw)");
		if (have_o && o->outstanding != 1)
			return bad("-o: latency has one WR in flight (-o "
				   "applies to -m bw)");
		o->qps = 1;
		o->outstanding = 1;
		if (o->iters > BT_MAX_LAT_ITERS)
			return bad("-n: at most %llu iterations in lat mode "
				   "(one timestamp each)",
				   (unsigned long long)BT_MAX_LAT_ITERS);
	}
	if ((uint64_t)o->qps * o->outstanding > BT_MAX_QP_WRS)
		return bad("-q %u x -o %u is more than %u WRs in flight",
			   o->qps, o->outstanding, BT_MAX_QP_WRS);
	o->progress = !no_progress && !o->json && o->server_fd < 0 &&
		      isatty(STDERR_FILENO);
	return 0;
}

/* ---- the progress bar (its own thread: the timed loops only store a
 * counter) ---- */

static volatile int progress_stop;

/* Messages at size i, and what one costs, roughly: its bytes plus a fixed
 * part (a few microseconds at a few GB/s). */
static double progress_msgs(const struct bt_opts *o, unsigned int i)
{
	uint64_t n = bt_iters_for(o, o->sizes[i]);

	return (double)((n + bt_warmup_for(o, n)) *
			(o->mode == BT_BW ? o->qps : 1));
}

static double progress_weight(const struct bt_opts *o, unsigned int i)
{
	return (double)o->sizes[i] + 8192.0;
}

static void *progress_main(void *arg)
{
	const struct bt_opts *o = arg;
	const int width = 30;
	double total = 0;

	for (unsigned int i = 0; i < o->nsizes; i++)
		total += progress_msgs(o, i) * progress_weight(o, i);
	while (!progress_stop) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		unsigned int idx = __atomic_load_n(&bt_progress_index,
						   __ATOMIC_RELAXED);
		uint64_t done = __atomic_load_n(&bt_progress_done,
						__ATOMIC_RELAXED);
		double part = 0, frac;
		int fill;
		char bar[64];

		if (idx >= o->nsizes)
			idx = o->nsizes - 1;
		for (unsigned int i = 0; i < idx; i++)
			part += progress_msgs(o, i) * progress_weight(o, i);
		part += (double)done * progress_weight(o, idx);
		frac = total > 0 ? part / total : 0;
		if (frac > 1)
			frac = 1;
		fill = (int)(frac * width);
		memset(bar, '#', (size_t)fill);
		memset(bar + fill, '.', (size_t)(width - fill));
		bar[width] = 0;
		fprintf(stderr, "\r%s %s %s [%s] %3d%%  %" PRIu64
			" bytes\033[K", BT_NAME, bt_test_name(o->test),
			o->mode == BT_BW ? "bw" : "lat", bar,
			(int)(frac * 100), o->sizes[idx]);
		fflush(stderr);
		nanosleep(&ts, NULL);
	}
	fputs("\r\033[K", stderr);
	fflush(stderr);
	return NULL;
}

/* ---- the report ---- */

static const char *op_title(enum bt_test t)
{
	switch (t) {
	case BT_WRITE: return "RDMA_Write";
	case BT_READ: return "RDMA_Read";
	case BT_SEND: return "Send";
	case BT_ATOMIC: return "Atomic FETCH_AND_ADD";
	}
	return "?";
}

static void print_table(const struct bt_opts *o, const struct bt_result *r,
			const struct bt_placement *w)
{
	const char *line = "-----------------------------------------------"
			   "----------------------------------------";

	char dom[96];

	if (o->domains == BT_DOM_NONE)
		snprintf(dom, sizeof(dom), "domains none");
	else
		snprintf(dom, sizeof(dom), "domains %s %s,%s",
			 bt_domains_name(o->domains),
			 bt_thread_model_name(o->thread_model),
			 bt_msg_model_name(o->msg_model));
	printf("%s\n", line);
	printf(" %s %s   (softverbs, %u QP%s, %s, %s%s)\n", op_title(o->test),
	       o->mode == BT_BW ? "BW" : "Latency", o->qps,
	       o->qps == 1 ? "" : "s", o->events ? "completion events" :
	       "busy polling", dom, o->mode == BT_LAT ?
	       (o->test == BT_WRITE || o->test == BT_SEND ?
		", one way = RTT/2" : ", round trip") : "");
	printf(" doorbell page%s of the QP%s:", w->nqp == 1 ? "" : "s",
	       w->nqp == 1 ? "" : "s");
	for (unsigned int j = 0; j < w->nqp; j++)
		printf(" %u", w->qp_db[j]);
	printf(" (0: the shared default; 1 .. %u: domain pages)\n",
	       w->max_resource_domains);
	if (o->mode == BT_BW)
		printf(" %u outstanding WRs per QP, a completion every %u\n",
		       o->outstanding,
		       o->outstanding / 4 ? o->outstanding / 4 : 1);
	printf("%s\n", line);
	if (o->mode == BT_BW) {
		printf(" %-10s %-12s %-6s %-12s %-20s %-14s\n", "#bytes",
		       "#iterations", "#qps", "seconds", "BW average[MB/sec]",
		       "MsgRate[Mpps]");
		for (unsigned int i = 0; i < o->nsizes; i++)
			printf(" %-10" PRIu64 " %-12" PRIu64 " %-6u %-12.6f "
			       "%-20.2f %-14.6f\n", r[i].size, r[i].iters,
			       o->qps, r[i].seconds, r[i].bw_MBps,
			       r[i].msg_rate_Mpps);
	} else {
		printf(" %-10s %-12s %-13s %-13s %-13s %-13s\n", "#bytes",
		       "#iterations", "t_min[usec]", "t_p50[usec]",
		       "t_p99[usec]", "t_max[usec]");
		for (unsigned int i = 0; i < o->nsizes; i++)
			printf(" %-10" PRIu64 " %-12" PRIu64 " %-13.2f %-13.2f "
			       "%-13.2f %-13.2f\n", r[i].size, r[i].iters,
			       r[i].lat_min_us, r[i].lat_p50_us,
			       r[i].lat_p99_us, r[i].lat_max_us);
	}
	printf("%s\n", line);
}

/* A JSON number: finite, 6 significant digits. */
static void jnum(const char *key, double v, bool comma)
{
	if (!(v == v) || v > 1e300 || v < -1e300)
		v = 0;
	printf("\"%s\": %.6g%s", key, v, comma ? ", " : "");
}

static void print_json(const struct bt_opts *o, const struct bt_result *r,
		       const struct bt_placement *w)
{
	printf("{\"tool\": \"softverbs bench\", \"test\": \"%s\", "
	       "\"mode\": \"%s\", \"qps\": %u, \"outstanding\": %u, "
	       "\"events\": %s, \"memfd\": %s, \"dm\": %s,\n \"domains\": \"%s\", ",
	       bt_test_name(o->test), o->mode == BT_BW ? "bw" : "lat",
	       o->qps, o->outstanding, o->events ? "true" : "false",
	       o->memfd ? "true" : "false", o->dm ? "true" : "false",
	       bt_domains_name(o->domains));
	if (o->domains == BT_DOM_NONE)
		printf("\"res_domain\": null, ");
	else
		printf("\"res_domain\": \"%s,%s\", ",
		       bt_thread_model_name(o->thread_model),
		       bt_msg_model_name(o->msg_model));
	printf("\"qp_db\": [");
	for (unsigned int j = 0; j < w->nqp; j++)
		printf("%s%u", j ? ", " : "", w->qp_db[j]);
	printf("], \"max_resource_domains\": %u,\n \"results\": [",
	       w->max_resource_domains);
	for (unsigned int i = 0; i < o->nsizes; i++) {
		printf("%s\n  {\"size\": %" PRIu64 ", \"iters\": %" PRIu64 ", ",
		       i ? "," : "", r[i].size, r[i].iters);
		jnum("seconds", r[i].seconds, true);
		if (o->mode == BT_BW) {
			jnum("bw_MBps", r[i].bw_MBps, true);
			jnum("msg_rate_Mpps", r[i].msg_rate_Mpps, false);
		} else {
			jnum("lat_p50_us", r[i].lat_p50_us, true);
			jnum("lat_p99_us", r[i].lat_p99_us, true);
			jnum("lat_max_us", r[i].lat_max_us, true);
			jnum("lat_min_us", r[i].lat_min_us, false);
		}
		printf("}");
	}
	printf("\n ]\n}\n");
}

/* ---- the two processes ---- */

volatile sig_atomic_t bt_server_may_exit;
static volatile pid_t server_pid;

/* Only the server's end matters (the library has children of its own
 * when it starts the device). */
static void on_sigchld(int sig, siginfo_t *si, void *uc)
{
	static const char msg[] = BT_NAME ": the server process ended "
				  "before the measurement did\n";
	(void)sig;
	(void)uc;
	if (!bt_server_may_exit && si->si_pid == server_pid) {
		ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);

		(void)n;
		_exit(1);
	}
}

static pid_t start_server(int argc, char **argv, int fd)
{
	pid_t parent = getpid(), pid;
	char fdarg[32], exe[PATH_MAX];
	sigset_t chld, old;
	ssize_t len;
	char **av;

	/* this very program, by its name (ps shows it as sv-bench) */
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		return -1;
	exe[len] = 0;

	av = calloc((size_t)argc + 2, sizeof(*av));
	if (!av)
		return -1;
	snprintf(fdarg, sizeof(fdarg), "--server-fd=%d", fd);
	av[0] = argv[0];
	av[1] = fdarg;
	for (int i = 1; i < argc; i++)
		av[i + 1] = argv[i];
	/* the SIGCHLD handler knows the server's pid before it can end */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	pid = fork();
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		/* the server ends with its client */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		execv(exe, av);
		fprintf(stderr, BT_NAME ": cannot run the server: %s\n",
			strerror(errno));
		_exit(127);
	}
	server_pid = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(av);
	return pid;
}

int main(int argc, char **argv)
{
	struct bt_opts o;
	struct bt_result *res;
	struct bt_placement where;
	struct sigaction sa;
	pthread_t progress;
	bool progress_on = false;
	int sv[2], ret, status;
	pid_t pid;

	ret = parse(argc, argv, &o);
	if (ret)
		return ret == 1 ? 0 : 2;
	if (o.server_fd >= 0)
		return bt_server(&o, o.server_fd);

	res = calloc(o.nsizes, sizeof(*res));
	if (!res || socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		fprintf(stderr, BT_NAME ": %s\n", strerror(errno));
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigchld;
	sa.sa_flags = SA_NOCLDSTOP | SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
	/* the client's end stays out of the server */
	fcntl(sv[0], F_SETFD, FD_CLOEXEC);
	pid = start_server(argc, argv, sv[1]);
	if (pid < 0) {
		fprintf(stderr, BT_NAME ": cannot start the server: %s\n",
			strerror(errno));
		return 1;
	}
	close(sv[1]);

	if (o.progress &&
	    pthread_create(&progress, NULL, progress_main, &o) == 0)
		progress_on = true;

	memset(&where, 0, sizeof(where));
	ret = bt_client(&o, sv[0], res, &where);

	if (progress_on) {
		progress_stop = 1;
		pthread_join(progress, NULL);
	}
	/* the server leaves after QUIT, or now that its socket is closed */
	bt_server_may_exit = 1;
	if (ret)
		kill(pid, SIGKILL);   /* it may be spinning on memory */
	close(sv[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (ret == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		fprintf(stderr, BT_NAME ": the server process failed\n");
		ret = 1;
	}
	if (ret == 0) {
		if (o.json)
			print_json(&o, res, &where);
		else
			print_table(&o, res, &where);
	}
	free(res);
	return ret;
}
