// SPDX-License-Identifier: MIT
/*
 * An idle device uses no CPU: after a burst of traffic on a connected RC
 * pair that stays open, softverbsd's engine thread goes to sleep on its
 * doorbell futex and stays asleep: across a quiet half second its CPU time
 * and its context switches do not move (a spinning engine would add CPU
 * time, a polling one context switches). Then one post wakes it, and the
 * transfer completes.
 *
 * The half second is not a speed assertion: a sleeping thread does not
 * change at all, however long or short the interval.
 *
 * Run under tests/e2e/isolated.sh (a daemon of its own, pid in
 * $SV_TEST_DIR/control.lock).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define CHECK(c, ...)                                                        \
	do {                                                                 \
		if (!(c)) {                                                  \
			fprintf(stderr, "FAIL: " __VA_ARGS__);               \
			fprintf(stderr, "\n");                               \
			exit(1);                                             \
		}                                                            \
	} while (0)

struct thread_state {
	char state;
	unsigned long long ticks;    /* utime + stime */
	unsigned long long switches; /* voluntary + involuntary */
};

/* The task id of the daemon's thread named "sv-engine0", or -1. */
static int engine_tid(pid_t pid)
{
	int tid;

	return vu_threads_named(pid, "sv-engine0", &tid) > 0 ? tid : -1;
}

static int read_thread(pid_t pid, int tid, struct thread_state *t)
{
	char path[384], buf[1024], *p;
	unsigned long long ut, st, v = 0, nv = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, tid);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	p = strrchr(buf, ')');   /* the name may hold anything */
	if (!p || sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%llu %llu", &t->state, &ut, &st) != 3)
		return -1;
	t->ticks = ut + st;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f)) {
		sscanf(buf, "voluntary_ctxt_switches: %llu", &v);
		sscanf(buf, "nonvoluntary_ctxt_switches: %llu", &nv);
	}
	fclose(f);
	t->switches = v + nv;
	return 0;
}

static void transfer(struct vu_ep *a, struct vu_ep *b, struct ibv_mr *mr,
		     uint8_t *buf, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge s = { (uintptr_t)buf, 64, mr->lkey };
		struct ibv_send_wr w = {
			.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { (uintptr_t)(buf + 4096), mr->rkey },
		};
		struct ibv_send_wr *bad;
		struct ibv_wc wc;

		buf[0] = (uint8_t)i;
		CHECK(!ibv_post_send(a->qp, &w, &bad), "ibv_post_send");
		CHECK(vu_poll(a->scq, &wc, 1, VU_WAIT_MS) == 1 &&
		      wc.status == IBV_WC_SUCCESS, "write %d", i);
		CHECK(buf[4096] == (uint8_t)i, "write %d did not land", i);
	}
	(void)b;
}

int main(void)
{
	struct vu_qp_caps caps = { .send_wr = 16, .recv_wr = 16, .cqe = 64 };
	struct vu_conn c = vu_conn_default();
	struct thread_state t0, t1;
	struct ibv_context *ctx;
	struct vu_ep a, b;
	struct ibv_mr *mr;
	uint8_t *buf;
	pid_t pid;
	long end;
	int tid;

	/* the engine's doorbell is the subject: the daemon path, which a
	 * WRITE between two QPs of one process takes only without the
	 * direct path (docs/DESIGN.md "The direct path") */
	setenv("SOFTVERBS_DIRECT", "0", 1);
	ctx = vu_open();
	CHECK(ctx, "no sv0");
	buf = calloc(1, 8192);
	CHECK(buf, "calloc");
	CHECK(!vu_ep_create(&a, ctx, NULL, IBV_QPT_RC, &caps) &&
	      !vu_ep_create(&b, ctx, a.pd, IBV_QPT_RC, &caps), "endpoints");
	mr = ibv_reg_mr(a.pd, buf, 8192,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr && !vu_connect_pair(a.qp, b.qp, &c), "connect");
	pid = vu_daemon_pid();
	CHECK(pid > 0, "no daemon pid in $SV_TEST_DIR/control.lock");
	/* the engine names itself once it runs: it may not have yet on a
	 * loaded machine (bounded wait) */
	for (end = vu_now_ms() + VU_WAIT_MS;
	     (tid = engine_tid(pid)) <= 0 && vu_now_ms() < end;)
		vu_sleep_ms(10);
	CHECK(tid > 0, "no sv-engine0 thread in softverbsd (pid %d)", (int)pid);

	transfer(&a, &b, mr, buf, 1000);

	/* the engine goes to sleep by itself (bounded wait) */
	for (end = vu_now_ms() + VU_WAIT_MS;;) {
		CHECK(!read_thread(pid, tid, &t0), "cannot read the engine");
		if (t0.state == 'S')
			break;
		CHECK(vu_now_ms() < end, "the engine never sleeps (state %c)",
		      t0.state);
		vu_sleep_ms(1);
	}
	vu_sleep_ms(500);
	CHECK(!read_thread(pid, tid, &t1), "cannot read the engine");
	printf("engine asleep: state %c -> %c, cpu ticks %llu -> %llu, "
	       "context switches %llu -> %llu\n", t0.state, t1.state,
	       t0.ticks, t1.ticks, t0.switches, t1.switches);
	CHECK(t1.state == 'S' && t1.ticks == t0.ticks &&
	      t1.switches == t0.switches,
	      "an idle engine kept running (it must sleep until a doorbell)");

	/* and a doorbell wakes it: the transfers complete, and the engine,
	 * asleep again afterwards, has been switched out since (a thread's
	 * count moves when it leaves the CPU, not when it is woken) */
	transfer(&a, &b, mr, buf, 10);
	for (end = vu_now_ms() + VU_WAIT_MS;;) {
		CHECK(!read_thread(pid, tid, &t1), "cannot read the engine");
		if (t1.state == 'S' && t1.switches > t0.switches)
			break;
		CHECK(vu_now_ms() < end, "the engine did not wake up and "
		      "sleep again (state %c, switches %llu -> %llu)",
		      t1.state, t0.switches, t1.switches);
		vu_sleep_ms(1);
	}

	ibv_dereg_mr(mr);
	vu_ep_destroy(&b);
	vu_ep_destroy(&a);
	ibv_close_device(ctx);
	free(buf);
	printf("PASS: an idle device sleeps and a post wakes it\n");
	return 0;
}
