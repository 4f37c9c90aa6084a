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

/* The two halves, connected by a stream socket. 0, or 1 after a message on
 * stderr. The client fills res[0 .. o->nsizes). */
int bt_server(const struct bt_opts *o, int fd);
int bt_client(const struct bt_opts *o, int fd, struct bt_result *res);

/* Set by the client once the server may end (it is told to quit). */
extern volatile sig_atomic_t bt_server_may_exit;

/* Progress, read by the progress bar's thread: the index of the size being
 * measured and the messages done at that size (all QPs, warm-up included
 * in lat mode). */
extern uint64_t bt_progress_done;
extern unsigned int bt_progress_index;

#endif
