// SPDX-License-Identifier: MIT
/*
 * Registration cost: ibv_reg_mr and ibv_dereg_mr of 4 KiB, 1 MiB and 1 GiB
 * on the first verbs device (sv0 under 'softverbs run'). softverbs pins
 * nothing and touches no page, so the cost should not grow with the size:
 * the figure to read is the ratio 1 GiB / 4 KiB of the median times.
 * The 1 GiB region is reserved address space that is never touched.
 * --mappings N first makes N more mappings (of one page each, below the
 * regions, which the text of /proc/PID/maps lists first), as a large
 * program has: the daemon checks every registration against the
 * process's mappings, and the cost of that check is what grows.
 * Prints one JSON object on stdout, a line per size on stderr.
 *   sv_regcost [--iters N] [--mappings N]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "bench_util.h"

#define NSIZES 3
static const size_t sizes[NSIZES] = { 4096, 1u << 20, 1u << 30 };
static const char *const names[NSIZES] = { "4k", "1m", "1g" };

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "iters", required_argument, NULL, 'n' },
		{ "mappings", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	int iters = 200, nmaps = 0, c, n;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	double *reg[NSIZES], *dereg[NSIZES], mreg[NSIZES], mdereg[NSIZES];
	char *base, *many = NULL;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'm') {
			nmaps = atoi(optarg);
			if (nmaps < 0 || nmaps > 60000) {
				fprintf(stderr, "sv_regcost: --mappings "
					"0..60000\n");
				return 2;
			}
			continue;
		}
		if (c != 'n') {
			fprintf(stderr, "usage: sv_regcost [--iters N] "
				"[--mappings N]\n");
			return 2;
		}
		iters = atoi(optarg);
		if (iters < 1 || iters > 1000000) {
			fprintf(stderr, "sv_regcost: --iters 1..1000000\n");
			return 2;
		}
	}

	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		fprintf(stderr, "sv_regcost: no verbs device\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx) {
		perror("sv_regcost: ibv_open_device");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		perror("sv_regcost: ibv_alloc_pd");
		return 1;
	}
	/* address space only: nothing is faulted in, nothing is pinned */
	base = mmap(NULL, sizes[NSIZES - 1], PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) {
		perror("sv_regcost: mmap");
		return 1;
	}
	/* made after the regions, so below them: every other page without
	 * access keeps the kernel from merging them into one */
	if (nmaps) {
		many = mmap(NULL, (size_t)nmaps * 4096, PROT_READ,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (many == MAP_FAILED) {
			perror("sv_regcost: mmap of the mappings");
			return 1;
		}
		for (int i = 1; i < nmaps; i += 2)
			if (mprotect(many + (size_t)i * 4096, 4096, PROT_NONE)) {
				perror("sv_regcost: mprotect");
				return 1;
			}
	}
	for (int s = 0; s < NSIZES; s++) {
		reg[s] = calloc((size_t)iters, sizeof(double));
		dereg[s] = calloc((size_t)iters, sizeof(double));
		if (!reg[s] || !dereg[s]) {
			perror("sv_regcost: calloc");
			return 1;
		}
	}

	/* interleaved, so that a noisy moment hits every size alike */
	for (int i = -1; i < iters; i++) {
		for (int s = 0; s < NSIZES; s++) {
			double t0 = bench_now(), t1, t2;
			struct ibv_mr *mr = ibv_reg_mr(pd, base, sizes[s],
						       access);

			t1 = bench_now();
			if (!mr) {
				fprintf(stderr, "sv_regcost: ibv_reg_mr of %zu"
					" bytes: %s\n", sizes[s],
					strerror(errno));
				return 1;
			}
			if (ibv_dereg_mr(mr)) {
				perror("sv_regcost: ibv_dereg_mr");
				return 1;
			}
			t2 = bench_now();
			if (i >= 0) {	/* the first round is a warm-up */
				reg[s][i] = t1 - t0;
				dereg[s][i] = t2 - t1;
			}
		}
	}
	for (int s = 0; s < NSIZES; s++) {
		mreg[s] = bench_median(reg[s], iters) * 1e6;
		mdereg[s] = bench_median(dereg[s], iters) * 1e6;
		fprintf(stderr, "ibv_reg_mr %10zu bytes: %8.2f us,"
			" ibv_dereg_mr %8.2f us (medians of %d)\n",
			sizes[s], mreg[s], mdereg[s], iters);
	}

	printf("{\"tool\": \"sv_regcost\", \"device\": \"%s\", \"iters\": %d,"
	       " \"mappings\": %d", ibv_get_device_name(list[0]), iters, nmaps);
	for (int s = 0; s < NSIZES; s++)
		printf(", \"reg_%s_us\": %.3f, \"dereg_%s_us\": %.3f",
		       names[s], mreg[s], names[s], mdereg[s]);
	printf(", \"ratio_reg_1g_4k\": %.3f, \"ratio_dereg_1g_4k\": %.3f}\n",
	       mreg[2] / mreg[0], mdereg[2] / mdereg[0]);

	for (int s = 0; s < NSIZES; s++) {
		free(reg[s]);
		free(dereg[s]);
	}
	munmap(base, sizes[NSIZES - 1]);
	if (many)
		munmap(many, (size_t)nmaps * 4096);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
