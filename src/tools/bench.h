/* SPDX-License-Identifier: MIT */
/*
 * sv-bench, the program behind `softverbs bench`: what the command line
 * says (bench.c parses it) and what the measuring halves (bench_run.c)
 * return.
 */
#ifndef SV_TOOLS_BENCH_H
#define SV_TOOLS_BENCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#define BT_NAME "softverbs bench"

enum bt_test { BT_WRITE, BT_READ, BT_SEND, BT_ATOMIC };
enum bt_mode { BT_BW, BT_LAT };
/* --domains: how the QPs (and their CQs) are placed in resource domains */
enum bt_domains { BT_DOM_NONE, BT_DOM_ONE, BT_DOM_PER_QP };

#define BT_MAX_SIZES  64
#define BT_MAX_SIZE   (1ull << 30)   /* one message */
#define BT_MAX_QPS    256
#define BT_MAX_OUTST  16384          /* per QP: the device's max_qp_wr */
#define BT_MAX_QP_WRS 32768          /* -q x -o */
#define BT_MAX_ITERS  1000000000ull
#define BT_MAX_LAT_ITERS 10000000ull /* one timestamp each */

struct bt_opts {
	enum bt_test test;
	enum bt_mode mode;
	uint64_t sizes[BT_MAX_SIZES];
	unsigned int nsizes;
	uint64_t iters;          /* per QP and size; 0: chosen per size */
	unsigned int qps;
	unsigned int outstanding;
	bool events;
	bool json;
	bool progress;           /* a progress bar on stderr */
	int server_fd;           /* >= 0: this process is the server */
	/* resource domains (include/softverbs/softverbs.h): none, all QPs
	 * in one, or one per QP (each QP then has CQs of its own); the
	 * models of every domain made, as enum ibv_exp_thread_model and
	 * enum ibv_exp_msg_model */
	enum bt_domains domains;
	unsigned int thread_model, msg_model;
	/* the buffers in a memfd sealed against shrinking (MAP_SHARED), which
	 * the direct path copies with plain loads and stores */
	bool memfd;
	/* the buffers in device memory (ibv_alloc_dm, ibv_reg_dm_mr: a
	 * zero-based MR); -m bw only */
	bool dm;
};

/* What the client's QPs got: the doorbell page of each (sv_query_qp_db;
 * 0 is the default page that objects without a domain share), and how many
 * pages the device can dedicate to domains (ibv_exp_query_device). */
struct bt_placement {
	uint32_t qp_db[BT_MAX_QPS];
	unsigned int nqp;
	uint32_t max_resource_domains;
};

struct bt_result {
	uint64_t size;
	uint64_t iters;          /* measured, per QP (warm-up not counted) */
	double seconds;
	double bw_MBps, msg_rate_Mpps;                    /* bw */
	double lat_min_us, lat_p50_us, lat_p99_us, lat_max_us; /* lat */
};

/* Iterations at one size (per QP), and the latency warm-up before them. */
uint64_t bt_iters_for(const struct bt_opts *o, uint64_t size);
uint64_t bt_warmup_for(const struct bt_opts *o, uint64_t iters);

const char *bt_test_name(enum bt_test t);
/* The names on the command line and in the JSON output. */
const char *bt_domains_name(enum bt_domains d);
const char *bt_thread_model_name(unsigned int m);
const char *bt_msg_model_name(unsigned int m);

/* The two halves, connected by a stream socket. 0, or 1 after a message on
 * stderr. The client fills res[0 .. o->nsizes) and *where. */
int bt_server(const struct bt_opts *o, int fd);
int bt_client(const struct bt_opts *o, int fd, struct bt_result *res,
	      struct bt_placement *where);

/* Set by the client once the server may end (it is told to quit). */
extern volatile sig_atomic_t bt_server_may_exit;

/* Progress, read by the progress bar's thread: the index of the size being
 * measured and the messages done at that size (all QPs, warm-up included
 * in lat mode). */
extern uint64_t bt_progress_done;
extern unsigned int bt_progress_index;

#endif
