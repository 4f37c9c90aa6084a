// SPDX-License-Identifier: MIT
/*
 * QP creation at scale: one process creates RC QPs on the first verbs
 * device (sv0 under 'softverbs run') until it holds the largest count
 * asked for, and reports at each count (default 1000, 16000, 64000 live
 * QPs) how fast the last window of creations went (QPs per second, and the
 * median microseconds of one ibv_create_qp) and the daemon's memory per QP
 * (its VmRSS grown since before the first QP, over the QPs held). The QPs
 * share one PD and one CQ and have the smallest queues (one WR each), as a
 * large idle job's connections have. The daemon is the one serving
 * $SOFTVERBS_SOCKET (its pid is in control.lock beside it): give the bench
 * a fresh one, so that its memory is this process's QPs.
 * Prints one JSON object on stdout, a line per count on stderr.
 *   sv_qpscale [--counts N,N,...] [--window N]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "bench_util.h"

#define MAX_COUNTS 8

/* The daemon's pid, from control.lock beside $SOFTVERBS_SOCKET: 0 if
 * unknown. */
static int daemon_pid(void)
{
	const char *sock = getenv("SOFTVERBS_SOCKET");
	char dir[4096], path[4200];
	FILE *f;
	int pid = 0;

	if (!sock || strlen(sock) >= sizeof(dir))
		return 0;
	strcpy(dir, sock);
	snprintf(path, sizeof(path), "%s/control.lock", dirname(dir));
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	return pid;
}

/* VmRSS of pid in KiB, or -1. */
static long rss_kib(int pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int parse_counts(const char *s, long *counts)
{
	int n = 0;

	while (*s && n < MAX_COUNTS) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 1 || v > 1000000 ||
		    (n && v <= counts[n - 1]))
			return -1;
		counts[n++] = v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return *s ? -1 : n;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "counts", required_argument, NULL, 'c' },
		{ "window", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	long counts[MAX_COUNTS] = { 1000, 16000, 64000 };
	int ncounts = 3, window = 1000, c, n, pid, k = 0;
	struct ibv_qp_init_attr ia;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_qp **qps;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	double *t;
	long rss0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'c') {
			ncounts = parse_counts(optarg, counts);
			if (ncounts < 1) {
				fprintf(stderr, "sv_qpscale: --counts: "
					"increasing numbers, 1..1000000\n");
				return 2;
			}
		} else if (c == 'w') {
			window = atoi(optarg);
			if (window < 1 || window > 100000) {
				fprintf(stderr, "sv_qpscale: --window "
					"1..100000\n");
				return 2;
			}
		} else {
			fprintf(stderr, "usage: sv_qpscale [--counts N,N,...] "
				"[--window N]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (window > counts[0])
		window = (int)counts[0];
	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		fprintf(stderr, "sv_qpscale: no verbs device\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = ctx ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	qps = calloc((size_t)counts[ncounts - 1], sizeof(*qps));
	t = calloc((size_t)window, sizeof(*t));
	if (!ctx || !pd || !cq || !qps || !t) {
		perror("sv_qpscale: setup");
		return 1;
	}
	pid = daemon_pid();
	rss0 = rss_kib(pid);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 1;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	printf("{\"window\": %d, \"points\": [", window);
	for (long i = 0; i < counts[ncounts - 1]; i++) {
		double t0 = bench_now();

		qps[i] = ibv_create_qp(pd, &ia);
		t[i % window] = bench_now() - t0;
		if (!qps[i]) {
			fprintf(stderr, "sv_qpscale: QP %ld: %s\n", i + 1,
				strerror(errno));
			return 1;
		}
		if (i + 1 == counts[k]) {
			double sum = 0, med;
			long rss = rss_kib(pid);
			double per = rss >= 0 && rss0 >= 0 ?
				     (double)(rss - rss0) * 1024 / (double)(i + 1) :
				     -1;

			for (int j = 0; j < window; j++)
				sum += t[j];
			med = bench_median(t, window) * 1e6;
			fprintf(stderr, "%7ld QPs: %8.0f QPs/s over the last "
				"%d, median %.1f us each; daemon %.0f B per "
				"QP\n", i + 1, window / sum, window, med, per);
			printf("%s{\"qps\": %ld, \"per_s\": %.0f, "
			       "\"median_us\": %.2f, \"daemon_bytes_per_qp\": "
			       "%.0f}", k ? ", " : "", i + 1, window / sum, med,
			       per);
			k++;
		}
	}
	printf("]}\n");
	for (long i = counts[ncounts - 1] - 1; i >= 0; i--)
		ibv_destroy_qp(qps[i]);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(qps);
	free(t);
	return 0;
}
