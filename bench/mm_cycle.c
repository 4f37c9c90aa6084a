// SPDX-License-Identifier: MIT
/*
 * The memory-management extensions' reason to be: re-pointing an MR by a
 * work request instead of a command. For each buffer size, the cycle rate
 * of
 *   - reg:     ibv_reg_mr + ibv_dereg_mr (two commands to the device, the
 *              first checks the range against /proc/PID/maps);
 *   - fr_sync: a fast-register work request and a local invalidate of the
 *              same MR posted together, the application waiting for the
 *              invalidate's completion before the next cycle;
 *   - fr_pipe: the same cycles back to back, 32 per posted list (one
 *              completion each), two lists in flight, each fast
 *              registration with a page list of its own.
 * The fast-register MR is allocated once, the page lists (shared memory
 * mapped into this process) for each fast-register run and freed after
 * it, so that ibv_reg_mr, which reads this process's memory map, runs with
 * no more mappings than a program without them; the pages are those of
 * the buffer (page_size 4 KiB, the buffer's every page), the MR's key
 * changes at every registration. The QP is a UD QP (the two work requests
 * are local operations).
 * Rounds interleave the modes and sizes; the figures are medians over the
 * rounds. One JSON object on stdout, a line per size and mode on stderr.
 *   sv_mm_cycle [--sizes N,N,...] [--min-time SEC] [--rounds N]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

#include "bench_util.h"

#define PAGE      4096u
#define MAX_SIZES 8
#define MAX_ROUNDS 21
#define BATCH     32               /* cycles per posted list */
#define NLISTS    (2 * BATCH)      /* page lists: two lists in flight */
#define ACCESS    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		   IBV_ACCESS_REMOTE_READ)

enum { M_REG, M_FR_SYNC, M_FR_PIPE, NMODES };
static const char *const mode_names[NMODES] = { "reg", "fr_sync", "fr_pipe" };

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static uint8_t *buf;
static double min_time = 0.3;

static void die(const char *what, int err)
{
	fprintf(stderr, "sv_mm_cycle: %s: %s\n", what, strerror(err));
	exit(1);
}

/* One completion, successful. */
static void wait_one(uint64_t wr_id)
{
	struct ibv_wc wc;
	double end = bench_now() + 10;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (bench_now() > end) {
			fprintf(stderr, "sv_mm_cycle: no completion in 10 s\n");
			exit(1);
		}
	if (n < 0 || wc.status != IBV_WC_SUCCESS || wc.wr_id != wr_id) {
		fprintf(stderr, "sv_mm_cycle: completion %d: wr_id %llu, %s\n",
			n, (unsigned long long)wc.wr_id,
			ibv_wc_status_str(wc.status));
		exit(1);
	}
}

static void setup_qp(void)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	cq = ibv_create_cq(ctx, 1024, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq", errno);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = 4 * BATCH + 8;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp", errno);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x11111111;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		die("INIT", errno);
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("RTR", errno);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("RTS", errno);
}

/* Cycles per second of ibv_reg_mr + ibv_dereg_mr of size bytes. */
static double run_reg(size_t size)
{
	double t0 = bench_now(), t;
	long n = 0;

	do {
		for (int i = 0; i < 16; i++, n++) {
			struct ibv_mr *mr = ibv_reg_mr(pd, buf, size, ACCESS);

			if (!mr)
				die("ibv_reg_mr", errno);
			if (ibv_dereg_mr(mr))
				die("ibv_dereg_mr", errno);
		}
		t = bench_now() - t0;
	} while (t < min_time);
	return (double)n / t;
}

struct fr_state {
	struct ibv_mr *mr;
	struct ibv_exp_fast_reg_page_list *pl[NLISTS];
	unsigned int npages;
	uint8_t key;
	uint64_t wr_id;
};

/* cycles WR pairs [FAST_REG, LOCAL_INV] from list l0 on, the last
 * invalidate signaled (wr_id), posted as one list. */
static void post_cycles(struct fr_state *f, struct ibv_exp_send_wr *w,
			int cycles, int l0, size_t size, uint64_t wr_id)
{
	struct ibv_exp_send_wr *bad = NULL;
	int ret;

	for (int c = 0; c < cycles; c++) {
		struct ibv_exp_send_wr *r = &w[2 * c], *v = &w[2 * c + 1];
		uint32_t key;

		f->key++;
		key = ibv_exp_update_fast_reg_key(f->mr->rkey, f->key);
		memset(r, 0, sizeof(*r));
		r->exp_opcode = IBV_EXP_WR_FAST_REG_MR;
		r->fast_reg.mr = f->mr;
		r->fast_reg.page_list = f->pl[l0 + c];
		r->fast_reg.page_size = PAGE;
		r->fast_reg.page_list_len = f->npages;
		r->fast_reg.length = size;
		r->fast_reg.iova_start = (uintptr_t)buf;
		r->fast_reg.access_flags = ACCESS;
		r->fast_reg.key = f->key;
		r->next = v;
		memset(v, 0, sizeof(*v));
		v->exp_opcode = IBV_EXP_WR_LOCAL_INV;
		v->invalidate_rkey = key;
		v->next = c + 1 < cycles ? &w[2 * c + 2] : NULL;
	}
	w[2 * cycles - 1].wr_id = wr_id;
	w[2 * cycles - 1].exp_send_flags = IBV_SEND_SIGNALED;
	ret = ibv_exp_post_send(qp, w, &bad);
	if (ret)
		die("ibv_exp_post_send", ret);
}

static void lists_alloc(struct fr_state *f)
{
	for (int l = 0; l < NLISTS; l++) {
		f->pl[l] = ibv_exp_alloc_fast_reg_page_list(ctx, (int)f->npages);
		if (!f->pl[l])
			die("ibv_exp_alloc_fast_reg_page_list", errno);
		for (unsigned int p = 0; p < f->npages; p++)
			f->pl[l]->page_list[p] = (uintptr_t)(buf + (size_t)p * PAGE);
	}
}

static void lists_free(struct fr_state *f)
{
	for (int l = 0; l < NLISTS; l++) {
		int ret = ibv_exp_free_fast_reg_page_list(f->pl[l]);

		if (ret)
			die("ibv_exp_free_fast_reg_page_list", ret);
		f->pl[l] = NULL;
	}
}

/* Cycles per second of fast register + local invalidate: one cycle at a
 * time (sync) or BATCH per list, two lists in flight. */
static double run_fr(struct fr_state *f, size_t size, int sync)
{
	struct ibv_exp_send_wr w[2 * BATCH];
	double t0 = bench_now(), t;
	long n = 0;

	if (sync) {
		do {
			for (int i = 0; i < 16; i++, n++) {
				post_cycles(f, w, 1, 0, size, ++f->wr_id);
				wait_one(f->wr_id);
			}
			t = bench_now() - t0;
		} while (t < min_time);
		return (double)n / t;
	}
	/* two lists in flight; list k uses page lists (k % 2) * BATCH.. and
	 * is posted once list k - 2 completed */
	uint64_t oldest = ++f->wr_id, newest;

	post_cycles(f, w, BATCH, 0, size, oldest);
	newest = ++f->wr_id;
	post_cycles(f, w, BATCH, BATCH, size, newest);
	for (int k = 2;; k++) {
		wait_one(oldest++);
		n += BATCH;
		if (bench_now() - t0 >= min_time)
			break;
		newest = ++f->wr_id;
		post_cycles(f, w, BATCH, (k % 2) * BATCH, size, newest);
	}
	while (oldest <= newest) {
		wait_one(oldest++);
		n += BATCH;
	}
	t = bench_now() - t0;
	return (double)n / t;
}

static int parse_sizes(const char *s, size_t *sizes)
{
	int n = 0;

	while (*s && n < MAX_SIZES) {
		char *end;
		unsigned long long v = strtoull(s, &end, 0);

		if (end == s || v < PAGE || v % PAGE || v > (64ull << 20))
			return -1;
		sizes[n++] = (size_t)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return n;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sizes", required_argument, NULL, 's' },
		{ "min-time", required_argument, NULL, 't' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	size_t sizes[MAX_SIZES] = { 4096, 65536, 1u << 20 };
	int nsizes = 3, rounds = 3, c, n;
	double cps[MAX_SIZES][NMODES][MAX_ROUNDS], med[MAX_SIZES][NMODES];
	struct fr_state fr[MAX_SIZES];
	struct ibv_device **list;
	size_t maxsize = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			nsizes = parse_sizes(optarg, sizes);
			if (nsizes < 1) {
				fprintf(stderr, "sv_mm_cycle: --sizes: multiples "
					"of 4096 up to 64 MiB\n");
				return 2;
			}
			break;
		case 't':
			min_time = atof(optarg);
			if (!(min_time > 0 && min_time <= 60)) {
				fprintf(stderr, "sv_mm_cycle: --min-time: 0..60 s\n");
				return 2;
			}
			break;
		case 'r':
			rounds = atoi(optarg);
			if (rounds < 1 || rounds > MAX_ROUNDS) {
				fprintf(stderr, "sv_mm_cycle: --rounds: 1..%d\n",
					MAX_ROUNDS);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: sv_mm_cycle [--sizes N,N,...] "
				"[--min-time SEC] [--rounds N]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	for (int s = 0; s < nsizes; s++)
		if (sizes[s] > maxsize)
			maxsize = sizes[s];

	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		fprintf(stderr, "sv_mm_cycle: no verbs device\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device", errno);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd", errno);
	buf = mmap(NULL, maxsize, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap", errno);
	memset(buf, 1, maxsize);
	setup_qp();
	for (int s = 0; s < nsizes; s++) {
		struct fr_state *f = &fr[s];

		memset(f, 0, sizeof(*f));
		f->npages = (unsigned int)(sizes[s] / PAGE);
		f->mr = ibv_exp_alloc_fast_reg_mr(pd, (int)f->npages);
		if (!f->mr)
			die("ibv_exp_alloc_fast_reg_mr", errno);
		f->key = (uint8_t)f->mr->rkey;
	}

	/* a warm-up, then the rounds: every size and mode in each */
	for (int r = -1; r < rounds; r++)
		for (int s = 0; s < nsizes; s++)
			for (int m = 0; m < NMODES; m++) {
				double save = min_time, v;

				if (r < 0)
					min_time = min_time / 10;
				if (m == M_REG) {
					v = run_reg(sizes[s]);
				} else {
					lists_alloc(&fr[s]);
					v = run_fr(&fr[s], sizes[s],
						   m == M_FR_SYNC);
					lists_free(&fr[s]);
				}
				min_time = save;
				if (r >= 0)
					cps[s][m][r] = v;
			}
	for (int s = 0; s < nsizes; s++)
		for (int m = 0; m < NMODES; m++) {
			med[s][m] = bench_median(cps[s][m], rounds);
			fprintf(stderr, "%-8s %8zu bytes: %12.0f cycles/s "
				"(%.2f us a cycle, median of %d)\n",
				mode_names[m], sizes[s], med[s][m],
				1e6 / med[s][m], rounds);
		}

	printf("{\"tool\": \"sv_mm_cycle\", \"device\": \"%s\", \"rounds\": %d,"
	       " \"min_time_s\": %.3f, \"batch\": %d, \"results\": [",
	       ibv_get_device_name(list[0]), rounds, min_time, BATCH);
	for (int s = 0; s < nsizes; s++) {
		printf("%s{\"size\": %zu, \"pages\": %zu", s ? ", " : "",
		       sizes[s], sizes[s] / PAGE);
		for (int m = 0; m < NMODES; m++) {
			printf(", \"%s_cps\": %.1f, \"%s_runs\": [", mode_names[m],
			       med[s][m], mode_names[m]);
			for (int r = 0; r < rounds; r++)
				printf("%s%.1f", r ? ", " : "", cps[s][m][r]);
			printf("]");
		}
		printf(", \"ratio_fr_sync_vs_reg\": %.3f, "
		       "\"ratio_fr_pipe_vs_reg\": %.3f}",
		       med[s][M_FR_SYNC] / med[s][M_REG],
		       med[s][M_FR_PIPE] / med[s][M_REG]);
	}
	printf("]}\n");

	for (int s = 0; s < nsizes; s++)
		ibv_dereg_mr(fr[s].mr);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	munmap(buf, maxsize);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
