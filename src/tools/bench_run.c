// SPDX-License-Identifier: MIT
/*
 * sv-bench: the measuring halves. Each process opens the device, makes its
 * PD, one buffer (receive half, send half) and its MR, a send CQ and a
 * receive CQ (the send CQs on one completion channel under -e, the receive
 * CQs on another) and -q RC QPs; the two exchange QPNs, GID, address and
 * rkey over their socket and connect. With --domains one, the CQs and QPs
 * are made in one resource domain (ibv_exp_create_cq, ibv_exp_create_qp);
 * with --domains per-qp, each QP has a domain and a send and a receive CQ
 * of its own, and the loops that serve every QP look at the CQs in turn.
 * Then the client leads, size by size:
 *
 *   client                               server
 *   RUN {size, iterations}  ---------->  prepares
 *                           <----------  READY
 *   measures (the server takes part in ping-pongs and receives sends)
 *   FINISH                  ---------->  finishes its part
 *                           <----------  DONE
 *   ... QUIT at the end.
 *
 * Everything the timed loops touch is made before RUN: work requests and
 * SGEs are built once per QP and only their lengths and flags change; the
 * loops neither allocate nor make system calls (except the blocking wait
 * for a completion event under -e).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

#include "tools/bench.h"
#include "tools/bench_ep.h"

uint64_t bt_progress_done;
unsigned int bt_progress_index;

void bt_errmsg(const struct bt_ep *e, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, BT_NAME " (%s): ", e->server ? "server" : "client");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *bt_test_name(enum bt_test t)
{
	switch (t) {
	case BT_WRITE: return "write";
	case BT_READ: return "read";
	case BT_SEND: return "send";
	case BT_ATOMIC: return "atomic";
	}
	return "?";
}

const char *bt_domains_name(enum bt_domains d)
{
	switch (d) {
	case BT_DOM_NONE: return "none";
	case BT_DOM_ONE: return "one";
	case BT_DOM_PER_QP: return "per-qp";
	}
	return "?";
}

const char *bt_thread_model_name(unsigned int m)
{
	switch (m) {
	case IBV_EXP_THREAD_SAFE: return "safe";
	case IBV_EXP_THREAD_UNSAFE: return "unsafe";
	case IBV_EXP_THREAD_SINGLE: return "single";
	}
	return "?";
}

const char *bt_msg_model_name(unsigned int m)
{
	switch (m) {
	case IBV_EXP_MSG_DEFAULT: return "default";
	case IBV_EXP_MSG_LOW_LATENCY: return "low_latency";
	case IBV_EXP_MSG_HIGH_BW: return "high_bw";
	case IBV_EXP_MSG_FORCE_LOW_LATENCY: return "force_low_latency";
	}
	return "?";
}

uint64_t bt_iters_for(const struct bt_opts *o, uint64_t size)
{
	uint64_t n;

	if (o->iters)
		return o->iters;
	/* 1000 up to 64 KiB, then about 64 MiB per QP and size, at least 32 */
	if (size <= 65536)
		return 1000;
	n = 1000ull * 65536 / size;
	return n < 32 ? 32 : n;
}

uint64_t bt_warmup_for(const struct bt_opts *o, uint64_t iters)
{
	uint64_t w = iters / 10;

	if (o->mode != BT_LAT)
		return 0;
	return w > 100 ? 100 : w;
}

/* ---- the socket between the two processes ---- */

int bt_xwrite(int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len) {
		ssize_t n = write(fd, c, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

/* 0, or -1 (1 for a clean end of file before the first byte). */
int bt_xread(int fd, void *p, size_t len)
{
	char *c = p;
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, c + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && got == 0)
			return 1;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static int send_msg(struct bt_ep *e, uint32_t op, uint64_t size,
		    uint64_t iters)
{
	struct bt_msg m = { .op = op, .size = size, .iters = iters };

	if (bt_xwrite(e->fd, &m, sizeof(m))) {
		bt_errmsg(e, "the other process is gone");
		return -1;
	}
	return 0;
}

static int recv_msg(struct bt_ep *e, struct bt_msg *m)
{
	int r = bt_xread(e->fd, m, sizeof(*m));

	if (r) {
		bt_errmsg(e, "the other process is gone");
		return -1;
	}
	return 0;
}

static int expect_msg(struct bt_ep *e, uint32_t op)
{
	struct bt_msg m;

	if (recv_msg(e, &m))
		return -1;
	if (m.op != op) {
		bt_errmsg(e, "protocol error: message %u, expected %u", m.op, op);
		return -1;
	}
	return 0;
}

/* ---- completions ---- */


/* Wait for at least one completion on the CQs [first, first + count) of
 * s (all of them in turn, from where the last look ended): how many
 * (<= max, in e->wc) or -1. Busy polling, or under -e: poll, arm those
 * not armed, poll again, sleep on the channel (an event for another CQ of
 * the set only disarms that one). */
static int cq_wait(struct bt_ep *e, struct bt_cqs *s, unsigned int first,
		   unsigned int count, int max)
{
	for (;;) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		bool armed = false;

		for (unsigned int k = 0; k < count; k++) {
			unsigned int i = count == 1 ? first :
					 first + (s->next + k) % count;
			int n = ibv_poll_cq(s->c[i].cq, max, e->wc);

			if (n < 0) {
				bt_errmsg(e, "ibv_poll_cq failed");
				return -1;
			}
			if (n) {
				if (count > 1)
					s->next = (i - first + 1) % count;
				return n;
			}
		}
		if (!s->ch)
			continue;
		for (unsigned int k = 0; k < count; k++) {
			struct bt_cq *c = &s->c[first + k];

			if (c->armed)
				continue;
			if (ibv_req_notify_cq(c->cq, 0)) {
				bt_errmsg(e, "ibv_req_notify_cq failed");
				return -1;
			}
			c->armed = armed = true;
		}
		if (armed)
			continue;
		if (ibv_get_cq_event(s->ch, &ev_cq, &ev_ctx)) {
			bt_errmsg(e, "ibv_get_cq_event: %s", strerror(errno));
			return -1;
		}
		ibv_ack_cq_events(ev_cq, 1);
		((struct bt_cq *)ev_ctx)->armed = false;
	}
}

static int wc_check(struct bt_ep *e, const struct ibv_wc *wc)
{
	if (wc->status == IBV_WC_SUCCESS)
		return 0;
	bt_errmsg(e, "completion error on QP %u: %s (vendor error %u)", wc->qp_num,
	       ibv_wc_status_str(wc->status), wc->vendor_err);
	return -1;
}

/* Send completions: each signaled WR carries (QP index << 32 | the WRs it
 * retires). */
static int reap_send(struct bt_ep *e, const struct ibv_wc *wc, int n,
		     uint64_t *completed)
{
	for (int i = 0; i < n; i++) {
		uint32_t j = (uint32_t)(wc[i].wr_id >> 32);
		uint32_t c = (uint32_t)wc[i].wr_id;

		if (wc_check(e, &wc[i]))
			return -1;
		if (j >= e->nqp) {
			bt_errmsg(e, "completion for an unknown WR %#" PRIx64,
			       (uint64_t)wc[i].wr_id);
			return -1;
		}
		e->done[j] += c;
		*completed += c;
	}
	return 0;
}

/* Post the next WR on QP j; every sig_every-th and the run's last are
 * signaled. */
static inline int post_one(struct bt_ep *e, uint32_t j)
{
	struct ibv_send_wr *wr = &e->swr[j], *bad;
	int ret;

	e->posted[j]++;
	wr->send_flags = e->base_flags;
	if (++e->unsig[j] >= e->sig_every || e->posted[j] == e->iters) {
		wr->send_flags |= IBV_SEND_SIGNALED;
		wr->wr_id = (uint64_t)j << 32 | e->unsig[j];
		e->unsig[j] = 0;
	}
	ret = ibv_post_send(e->qp[j], wr, &bad);
	if (ret) {
		bt_errmsg(e, "ibv_post_send: %s", strerror(ret));
		return -1;
	}
	return 0;
}

/* Room for one more WR on QP j, waiting for send completions if needed. */
static inline int sq_room(struct bt_ep *e, uint32_t j)
{
	uint64_t dummy = 0;

	while (e->posted[j] - e->done[j] >= e->sq_depth) {
		int n = cq_wait(e, &e->scq, cq_of(&e->scq, j), 1,
				BT_WC_BATCH);

		if (n < 0 || reap_send(e, e->wc, n, &dummy))
			return -1;
	}
	return 0;
}

/* Wait until every WR posted is retired (untimed, between runs). */
static int sq_drain(struct bt_ep *e)
{
	uint64_t dummy = 0;

	for (uint32_t j = 0; j < e->nqp; j++)
		while (e->done[j] < e->posted[j]) {
			int n = cq_wait(e, &e->scq, cq_of(&e->scq, j), 1,
					BT_WC_BATCH);

			if (n < 0 || reap_send(e, e->wc, n, &dummy))
				return -1;
		}
	return 0;
}

/* A look at the send CQs while spinning on memory, so an error completion
 * ends the run instead of hanging it. */
static int sq_peek(struct bt_ep *e)
{
	uint64_t dummy = 0;

	for (unsigned int i = 0; i < e->scq.n; i++) {
		int n = ibv_poll_cq(e->scq.c[i].cq, BT_WC_BATCH, e->wc);

		if (n < 0) {
			bt_errmsg(e, "ibv_poll_cq failed");
			return -1;
		}
		if (reap_send(e, e->wc, n, &dummy))
			return -1;
	}
	return 0;
}

int bt_post_recv(struct bt_ep *e, uint32_t j)
{
	struct ibv_recv_wr *bad;
	int ret = ibv_post_recv(e->qp[j], &e->rwr[j], &bad);

	if (ret) {
		bt_errmsg(e, "ibv_post_recv: %s", strerror(ret));
		return -1;
	}
	return 0;
}

/* Wait for one receive completion (lat: one QP) and repost it. */
static inline int recv_one(struct bt_ep *e)
{
	int n = cq_wait(e, &e->rcq, 0, 1, 1);

	if (n < 0 || wc_check(e, &e->wc[0]))
		return -1;
	return bt_post_recv(e, (uint32_t)e->wc[0].wr_id);
}

/* ---- the timed loops ---- */

/* bw warm-up WRs per QP before the clock starts (the engine awake, the
 * paths warm): up to 16, up to 8 MiB. Both sides know it (the receiver of
 * sends takes them too). */
static uint64_t bw_warmup(const struct bt_ep *e, uint64_t size)
{
	uint64_t w = (8ull << 20) / size;

	if (w > 16)
		w = 16;
	if (w > e->sq_depth)
		w = e->sq_depth;
	return w ? w : 1;
}

/* Keep -o WRs in flight on every QP until each has done e->iters. */
static int bw_pump(struct bt_ep *e, bool progress)
{
	uint64_t total = e->iters * e->nqp, completed = 0;

	for (uint32_t j = 0; j < e->nqp; j++)
		while (e->posted[j] < e->iters &&
		       e->posted[j] - e->done[j] < e->sq_depth)
			if (post_one(e, j))
				return -1;
	while (completed < total) {
		int n = cq_wait(e, &e->scq, 0, e->scq.n, BT_WC_BATCH);

		if (n < 0)
			return -1;
		for (int i = 0; i < n; i++) {
			uint32_t j = (uint32_t)(e->wc[i].wr_id >> 32);

			if (reap_send(e, &e->wc[i], 1, &completed))
				return -1;
			while (e->posted[j] < e->iters &&
			       e->posted[j] - e->done[j] < e->sq_depth)
				if (post_one(e, j))
					return -1;
		}
		if (progress)
			__atomic_store_n(&bt_progress_done, completed,
					 __ATOMIC_RELAXED);
	}
	return 0;
}

/* bw, the initiator: a warm-up, then iters WRs per QP against the clock
 * (from the first post to the last completion). */
static int bw_initiator(struct bt_ep *e, uint64_t size, uint64_t *ns)
{
	uint64_t iters = e->iters, t0, t1;

	e->iters = bw_warmup(e, size);
	if (bw_pump(e, false))
		return -1;
	for (uint32_t j = 0; j < e->nqp; j++)
		e->posted[j] = e->done[j] = e->unsig[j] = 0;
	e->iters = iters;
	t0 = now_ns();
	if (bw_pump(e, true))
		return -1;
	t1 = now_ns();
	*ns = t1 > t0 ? t1 - t0 : 1;
	return 0;
}

/* bw, the receiver of sends: take (warm-up + iters) x QPs messages,
 * reposting each receive WR as it completes. */
static int bw_receiver(struct bt_ep *e, uint64_t size)
{
	uint64_t total = (bw_warmup(e, size) + e->iters) * e->nqp, got = 0;

	while (got < total) {
		int n = cq_wait(e, &e->rcq, 0, e->rcq.n, BT_WC_BATCH);

		if (n < 0)
			return -1;
		for (int i = 0; i < n; i++) {
			if (wc_check(e, &e->wc[i]) ||
			    bt_post_recv(e, (uint32_t)e->wc[i].wr_id))
				return -1;
		}
		got += (uint64_t)n;
	}
	return 0;
}

/* Spin until the last byte of the receive half says val. */
static inline int wait_byte(struct bt_ep *e, const uint8_t *p, uint8_t val)
{
	unsigned int spins = 0;

	while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != val)
		if (++spins == BT_REAP_SPINS) {
			spins = 0;
			if (sq_peek(e))
				return -1;
		}
	return 0;
}

/* One ping (or pong): the last byte of the message says which. */
static inline int lat_post(struct bt_ep *e, uint64_t i, uint64_t size)
{
	if (e->o->test == BT_WRITE && !e->imm)
		e->sbuf[size - 1] = (char)(uint8_t)(i % 255 + 1);
	if (sq_room(e, 0))
		return -1;
	return post_one(e, 0);
}

/* Wait for the peer's ping (or pong) number i. */
static inline int lat_arrival(struct bt_ep *e, uint64_t i, uint64_t size)
{
	if (e->o->test == BT_WRITE && !e->imm)
		return wait_byte(e, (const uint8_t *)e->rbuf + size - 1,
				 (uint8_t)(i % 255 + 1));
	return recv_one(e);
}

/* lat, the client: samples[i] = the round trip of iteration i. */
static int lat_client(struct bt_ep *e, uint64_t size)
{
	uint64_t t = now_ns(), t1;

	for (uint64_t i = 0; i < e->iters; i++) {
		if (lat_post(e, i, size))
			return -1;
		if (e->o->test == BT_WRITE || e->o->test == BT_SEND) {
			if (lat_arrival(e, i, size))
				return -1;
		} else {
			/* read, atomic: the operation's own completion */
			uint64_t c = 0;
			int n = cq_wait(e, &e->scq, 0, 1, 1);

			if (n < 0 || reap_send(e, e->wc, n, &c))
				return -1;
		}
		t1 = now_ns();
		e->samples[i] = t1 - t;
		t = t1;
		__atomic_store_n(&bt_progress_done, i + 1,
				 __ATOMIC_RELAXED);
	}
	return 0;
}

/* lat, the server of a ping-pong: answer each ping. */
static int lat_server(struct bt_ep *e, uint64_t size)
{
	for (uint64_t i = 0; i < e->iters; i++)
		if (lat_arrival(e, i, size) || lat_post(e, i, size))
			return -1;
	return 0;
}

/* ---- results ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The nearest-rank percentile p (0 < p <= 100) of n sorted values. */
static uint64_t pct(const uint64_t *v, uint64_t n, unsigned int p)
{
	uint64_t rank = (n * p + 99) / 100;

	return v[rank ? rank - 1 : 0];
}

static void lat_result(struct bt_ep *e, uint64_t warm, struct bt_result *r)
{
	const uint64_t *v = e->samples + warm;
	uint64_t n = e->iters - warm, sum = 0;
	/* write and send ping-pongs: one way = half the round trip */
	double div = e->o->test == BT_WRITE || e->o->test == BT_SEND ?
		     2000.0 : 1000.0;

	for (uint64_t i = 0; i < n; i++)
		sum += v[i];
	qsort(e->samples + warm, n, sizeof(uint64_t), cmp_u64);
	r->iters = n;
	r->seconds = (double)sum / 1e9;
	r->lat_min_us = (double)v[0] / div;
	r->lat_p50_us = (double)pct(v, n, 50) / div;
	r->lat_p99_us = (double)pct(v, n, 99) / div;
	r->lat_max_us = (double)v[n - 1] / div;
}

/* ---- the two halves ---- */

int bt_client(const struct bt_opts *o, int fd, struct bt_result *res,
	      struct bt_placement *where)
{
	struct bt_ep e;
	int ret = 1;

	if (bt_ep_create(&e, o, fd, false))
		goto out;
	/* where the QPs went (the doorbell page, whatever API put them
	 * there), and out of how many pages */
	{
		struct ibv_exp_device_attr xa;
		int err;

		memset(&xa, 0, sizeof(xa));
		xa.comp_mask = IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS;
		err = ibv_exp_query_device(e.ctx, &xa);
		if (err || !(xa.comp_mask &
			     IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS)) {
			bt_errmsg(&e, "ibv_exp_query_device: %s",
			       err ? strerror(err) : "no max_resource_domains");
			goto out;
		}
		where->max_resource_domains = xa.max_resource_domains;
	}
	where->nqp = e.nqp;
	for (uint32_t j = 0; j < e.nqp; j++) {
		int err = sv_query_qp_db(e.qp[j], &where->qp_db[j]);

		if (err) {
			bt_errmsg(&e, "sv_query_qp_db: %s", strerror(err));
			goto out;
		}
	}
	for (unsigned int s = 0; s < o->nsizes; s++) {
		uint64_t size = o->sizes[s], n = bt_iters_for(o, size);
		uint64_t warm = bt_warmup_for(o, n), ns = 0;
		struct bt_result *r = &res[s];

		memset(r, 0, sizeof(*r));
		r->size = size;
		bt_prepare(&e, size, n + warm);
		__atomic_store_n(&bt_progress_done, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&bt_progress_index, s, __ATOMIC_RELAXED);
		if (send_msg(&e, BT_RUN, size, n + warm) ||
		    expect_msg(&e, BT_READY))
			goto out;
		if (o->mode == BT_BW) {
			if (bw_initiator(&e, size, &ns))
				goto out;
			r->iters = n;
			r->seconds = (double)ns / 1e9;
			r->bw_MBps = (double)(size * n * e.nqp) /
				     ((double)ns / 1e9) / 1e6;
			r->msg_rate_Mpps = (double)(n * e.nqp) /
					   ((double)ns / 1e9) / 1e6;
		} else {
			if (lat_client(&e, size))
				goto out;
			lat_result(&e, warm, r);
		}
		if (sq_drain(&e) || send_msg(&e, BT_FINISH, 0, 0) ||
		    expect_msg(&e, BT_DONE))
			goto out;
	}
	bt_server_may_exit = 1;
	if (send_msg(&e, BT_QUIT, 0, 0))
		goto out;
	ret = 0;
out:
	if (bt_ep_destroy(&e))
		ret = 1;
	return ret;
}

int bt_server(const struct bt_opts *o, int fd)
{
	struct bt_ep e;
	struct bt_msg m;
	int ret = 1;

	if (bt_ep_create(&e, o, fd, true))
		goto out;
	for (;;) {
		if (recv_msg(&e, &m))
			goto out;
		if (m.op == BT_QUIT)
			break;
		if (m.op != BT_RUN || m.size == 0 || m.size > e.half ||
		    m.iters == 0) {
			bt_errmsg(&e, "protocol error: message %u", m.op);
			goto out;
		}
		bt_prepare(&e, m.size, m.iters);
		if (send_msg(&e, BT_READY, 0, 0))
			goto out;
		if (o->mode == BT_LAT &&
		    (o->test == BT_WRITE || o->test == BT_SEND)) {
			if (lat_server(&e, m.size) || sq_drain(&e))
				goto out;
		} else if (o->mode == BT_BW && o->test == BT_SEND) {
			if (bw_receiver(&e, m.size))
				goto out;
		}
		/* read and atomic targets, write bw targets: passive */
		if (expect_msg(&e, BT_FINISH) || send_msg(&e, BT_DONE, 0, 0))
			goto out;
	}
	ret = 0;
out:
	if (bt_ep_destroy(&e))
		ret = 1;
	return ret;
}
