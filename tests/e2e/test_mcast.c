// SPDX-License-Identifier: MIT
/*
 * UD multicast (issue 8): ibv_attach_mcast / ibv_detach_mcast, the fan-out
 * of a send to a multicast GID, IBV_QP_CREATE_BLOCK_SELF_MCAST_LB.
 *
 *   test_mcast                       API edges, then a sender with NLOCAL
 *                                    receiver processes on this host
 *   test_mcast sender PORT NLOCAL NREMOTE [GROUP]
 *                                    the sender, NLOCAL receiver processes
 *                                    forked here, NREMOTE more connecting
 *                                    to TCP PORT from elsewhere (another
 *                                    namespace: tests/net/mcast_netns.sh)
 *   test_mcast receiver HOST PORT [GROUP]
 *                                    one receiver for a sender at HOST:PORT
 *
 * The sender has three UD QPs attached to the group: S_block (created with
 * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB), S_plain (without) and R0 (another QP
 * of the same process). It sends NMSG numbered messages, the even ones
 * from S_block, the odd ones from S_plain, then an end marker from S_plain.
 * Every receiver, and R0 and S_plain, must get every message exactly once;
 * S_block exactly the odd ones (its own never). Each receiver posts all its
 * receives before it says it is ready; the sender sends a window of W
 * messages at a time and waits until every receiver has acknowledged the
 * window over TCP (pacing, and a check that nothing is missing), never by
 * sleeping. Every wait is bounded (VU_WAIT_MS): a bound turns a hang into
 * a failure, it is never synchronisation.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

#include "vu.h"

#define W       16                  /* messages per window */
#define NROUND  25
#define NMSG    (W * NROUND)        /* message NMSG is the end marker */
#define QKEY    0x1234abcdu
#define MAGIC   0x6d636173u         /* "mcas" */
#define SLOT    128                 /* receive buffer: GRH + payload */
#define GRH     40
#define NLOCAL_DEFAULT 3

#define CHECK(c, ...)                                                        \
	do {                                                                 \
		if (!(c)) {                                                  \
			fprintf(stderr, "FAIL (pid %d, line %d): ",          \
				(int)getpid(), __LINE__);                    \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, "\n");                               \
			exit(1);                                             \
		}                                                            \
	} while (0)

struct payload {
	uint32_t magic;
	uint32_t k;                 /* message number */
	uint32_t qpn;               /* the QP that sent it */
};

/* The side channel: fixed 8-byte messages. */
enum { MSG_READY = 1, MSG_ACK = 2, MSG_END = 3 };
struct ctl {
	uint32_t type;
	uint32_t val;
};

static union ibv_gid group;
static bool group_v6;

static void group_parse(const char *s)
{
	struct in_addr a;

	memset(&group, 0, sizeof(group));
	if (strchr(s, ':')) {
		CHECK(inet_pton(AF_INET6, s, group.raw) == 1, "bad group %s",
		      s);
		CHECK(group.raw[0] == 0xff, "%s is not multicast", s);
		group_v6 = true;
		return;
	}
	CHECK(inet_pton(AF_INET, s, &a) == 1, "bad group %s", s);
	CHECK(IN_MULTICAST(ntohl(a.s_addr)), "%s is not multicast", s);
	group.raw[10] = group.raw[11] = 0xff;
	memcpy(&group.raw[12], &a.s_addr, 4);
}

/* The GID index to send to the group from: 0 for an IPv4 group, the first
 * IPv6 GID that is not link-local for an IPv6 one. */
static uint8_t sgid_index(struct ibv_context *ctx)
{
	static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					0xff, 0xff };

	if (!group_v6)
		return 0;
	for (int i = 0; i < 16; i++) {
		union ibv_gid g;

		if (ibv_query_gid(ctx, 1, i, &g))
			break;
		if (!memcmp(g.raw, v4, sizeof(v4)) ||
		    (g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80))
			continue;
		if (g.global.subnet_prefix || g.global.interface_id)
			return (uint8_t)i;
	}
	CHECK(0, "no IPv6 GID to send to %s from", "the group");
	return 0;
}

/* ---- a receiving QP ---- */

struct rq {
	const char *name;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;               /* NMSG + 1 slots */
	uint8_t seen[NMSG + 1];
	bool blocked;               /* S_block: its own (even) ones never */
	uint32_t got;
};

static bool expected(const struct rq *r, uint32_t k)
{
	return k == NMSG || !r->blocked || (k & 1);
}

static void ud_up(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_QKEY), "UD to INIT");
	a.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "UD to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN),
	      "UD to RTS");
}

static struct ibv_qp *ud_qp(struct ibv_context *ctx, struct ibv_pd *pd,
			    struct ibv_cq *scq, struct ibv_cq *rcq,
			    bool block)
{
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = 2 * W;
	ia.cap.max_recv_wr = NMSG + 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = pd;
	if (block) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
		ia.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
	}
	qp = ibv_create_qp_ex(ctx, &ia);
	CHECK(qp, "create UD QP%s: %s", block ? " (block self)" : "",
	      strerror(errno));
	return qp;
}

/* A receiving QP (qp given: one of the sender's), attached, every receive
 * posted. */
static void rq_make(struct rq *r, const char *name, struct ibv_context *ctx,
		    struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_cq *cq)
{
	memset(r, 0, sizeof(*r));
	r->name = name;
	r->buf = calloc(NMSG + 1, SLOT);
	CHECK(r->buf, "no memory");
	r->mr = ibv_reg_mr(pd, r->buf, (size_t)(NMSG + 1) * SLOT,
			   IBV_ACCESS_LOCAL_WRITE);
	CHECK(r->mr, "reg_mr: %s", strerror(errno));
	if (!qp) {
		cq = ibv_create_cq(ctx, NMSG + 8, NULL, NULL, 0);
		CHECK(cq, "create_cq");
		qp = ud_qp(ctx, pd, cq, cq, false);
		ud_up(qp);
	}
	r->cq = cq;
	r->qp = qp;
	for (uint32_t i = 0; i <= NMSG; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)(r->buf + (size_t)i * SLOT),
			.length = SLOT,
			.lkey = r->mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		CHECK(!ibv_post_recv(qp, &wr, &bad), "post_recv %u", i);
	}
	CHECK(!ibv_attach_mcast(qp, &group, 0), "%s: attach: %s", name,
	      strerror(errno));
}

/* Take what r's CQ holds (waiting up to ms for the first): each message
 * checked and marked. */
static void rq_take(struct rq *r, long ms)
{
	struct ibv_wc wc[32];
	int n = vu_poll(r->cq, wc, 1, ms);

	while (n > 0) {
		for (int i = 0; i < n; i++) {
			const struct payload *p;

			CHECK(wc[i].status == IBV_WC_SUCCESS,
			      "%s: receive status %s", r->name,
			      ibv_wc_status_str(wc[i].status));
			CHECK(wc[i].opcode == IBV_WC_RECV, "%s: opcode %d",
			      r->name, wc[i].opcode);
			CHECK(wc[i].byte_len == GRH + sizeof(*p),
			      "%s: byte_len %u", r->name, wc[i].byte_len);
			CHECK(wc[i].wc_flags & IBV_WC_GRH, "%s: no GRH",
			      r->name);
			CHECK(wc[i].wr_id <= NMSG, "%s: wr_id", r->name);
			p = (const void *)(r->buf + wc[i].wr_id * SLOT + GRH);
			CHECK(p->magic == MAGIC && p->k <= NMSG,
			      "%s: garbage", r->name);
			CHECK(p->qpn == wc[i].src_qp,
			      "%s: message %u from QP %#x, src_qp %#x", r->name,
			      p->k, p->qpn, wc[i].src_qp);
			CHECK(expected(r, p->k),
			      "%s: got its own message %u (block self)",
			      r->name, p->k);
			CHECK(!r->seen[p->k], "%s: message %u twice", r->name,
			      p->k);
			/* the GRH's destination is the group (IPv4: the IP
			 * header in its last 20 bytes) */
			CHECK(group_v6 ?
			      !memcmp(r->buf + wc[i].wr_id * SLOT + 24,
				      group.raw, 16) :
			      !memcmp(r->buf + wc[i].wr_id * SLOT + 36,
				      group.raw + 12, 4),
			      "%s: GRH dgid is not the group", r->name);
			r->seen[p->k] = 1;
			r->got++;
		}
		n = ibv_poll_cq(r->cq, (int)VU_ARRAY_SIZE(wc), wc);
		CHECK(n >= 0, "poll_cq");
	}
}

/* Wait (bounded) until r has every message of round rd it must get
 * (rd == NROUND: the end marker). */
static void rq_round(struct rq *r, uint32_t rd)
{
	uint32_t lo = rd * W, hi = rd == NROUND ? NMSG + 1 : lo + W;
	long end = vu_now_ms() + VU_WAIT_MS;

	for (;;) {
		uint32_t miss = UINT32_MAX;

		for (uint32_t k = lo; k < hi && miss == UINT32_MAX; k++)
			if (expected(r, k) && !r->seen[k])
				miss = k;
		if (miss == UINT32_MAX)
			return;
		CHECK(vu_now_ms() < end, "%s: message %u missing", r->name,
		      miss);
		rq_take(r, 100);
	}
}

/* ---- the side channel ---- */

static void ctl_send(int fd, uint32_t type, uint32_t val)
{
	struct ctl m = { type, val };

	CHECK(write(fd, &m, sizeof(m)) == sizeof(m), "side channel write: %s",
	      strerror(errno));
}

static struct ctl ctl_recv(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct ctl m;
	size_t got = 0;

	while (got < sizeof(m)) {
		ssize_t n;

		CHECK(poll(&p, 1, VU_WAIT_MS) == 1,
		      "side channel: nothing in %d ms", VU_WAIT_MS);
		n = read(fd, (char *)&m + got, sizeof(m) - got);
		CHECK(n > 0, "side channel closed");
		got += (size_t)n;
	}
	return m;
}

/* ---- receiver ---- */

static int receiver(const char *host, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	struct ibv_context *ctx = vu_open();
	struct ibv_pd *pd;
	struct rq r;
	int fd, one = 1;
	long end = vu_now_ms() + VU_WAIT_MS;

	CHECK(ctx, "no device");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	rq_make(&r, "receiver", ctx, pd, NULL, NULL);
	CHECK(inet_pton(AF_INET, host, &sa.sin_addr) == 1, "bad host %s",
	      host);
	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK(fd >= 0, "socket");
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			break;
		close(fd);
		CHECK(vu_now_ms() < end, "cannot reach the sender at %s:%d",
		      host, port);
		vu_sleep_ms(20);    /* polling a bounded wait, not sync */
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ctl_send(fd, MSG_READY, r.qp->qp_num);
	for (uint32_t rd = 0; rd <= NROUND; rd++) {
		rq_round(&r, rd);
		ctl_send(fd, MSG_ACK, rd);
	}
	/* what is left: nothing (a second copy would show here) */
	rq_take(&r, 0);
	CHECK(r.got == NMSG + 1, "received %u, not %u", r.got, NMSG + 1);
	CHECK(ctl_recv(fd).type == MSG_END, "no end from the sender");
	CHECK(!ibv_detach_mcast(r.qp, &group, 0), "detach");
	printf("receiver %d: %u messages, each once\n", (int)getpid(), r.got);
	close(fd);
	ibv_destroy_qp(r.qp);
	ibv_destroy_cq(r.cq);
	ibv_dereg_mr(r.mr);
	free(r.buf);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

/* ---- sender ---- */

static void send_one(struct ibv_qp *qp, struct ibv_cq *scq, struct ibv_ah *ah,
		     struct ibv_mr *mr, struct payload *p, uint32_t k)
{
	struct ibv_sge sge = { .addr = (uintptr_t)p, .length = sizeof(*p),
			       .lkey = mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	p->magic = MAGIC;
	p->k = k;
	p->qpn = qp->qp_num;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = k;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0xffffff;
	wr.wr.ud.remote_qkey = QKEY;
	CHECK(!ibv_post_send(qp, &wr, &bad), "post_send %u", k);
	CHECK(vu_poll(scq, &wc, 1, VU_WAIT_MS) == 1, "send %u: no completion",
	      k);
	CHECK(wc.status == IBV_WC_SUCCESS, "send %u: %s", k,
	      ibv_wc_status_str(wc.status));
}

static int sender(int port, int nlocal, int nremote, const char *self)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int nrecv = nlocal + nremote, lfd, one = 1;
	int *fds = calloc((size_t)nrecv + 1, sizeof(int));
	pid_t *kids = calloc((size_t)nlocal + 1, sizeof(pid_t));
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *cq_block, *cq_plain;
	struct ibv_qp *s_block, *s_plain;
	struct ibv_mr *smr;
	struct ibv_ah *ah;
	struct payload *p;
	struct rq r[3];             /* S_block, S_plain, R0 */
	char portbuf[16];
	int rc = 0;

	CHECK(fds && kids, "no memory");
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(lfd >= 0, "socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(!bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), "bind TCP %d: %s",
	      port, strerror(errno));
	CHECK(!listen(lfd, nrecv + 1), "listen");
	if (!port) {                /* one the kernel picked */
		socklen_t sl = sizeof(sa);

		CHECK(!getsockname(lfd, (struct sockaddr *)&sa, &sl),
		      "getsockname");
		port = ntohs(sa.sin_port);
	}
	/* the local receivers: this program again, in other processes */
	snprintf(portbuf, sizeof(portbuf), "%d", port);
	for (int i = 0; i < nlocal; i++) {
		char gbuf[INET6_ADDRSTRLEN];

		if (group_v6)
			inet_ntop(AF_INET6, group.raw, gbuf, sizeof(gbuf));
		else
			inet_ntop(AF_INET, &group.raw[12], gbuf, sizeof(gbuf));
		kids[i] = fork();
		CHECK(kids[i] >= 0, "fork");
		if (!kids[i]) {
			close(lfd);
			execl(self, self, "receiver", "127.0.0.1", portbuf, gbuf,
			      (char *)NULL);
			_exit(127);
		}
	}

	ctx = vu_open();
	CHECK(ctx, "no device");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	scq = ibv_create_cq(ctx, 4 * W, NULL, NULL, 0);
	cq_block = ibv_create_cq(ctx, NMSG + 8, NULL, NULL, 0);
	cq_plain = ibv_create_cq(ctx, NMSG + 8, NULL, NULL, 0);
	CHECK(scq && cq_block && cq_plain, "create_cq");
	s_block = ud_qp(ctx, pd, scq, cq_block, true);
	s_plain = ud_qp(ctx, pd, scq, cq_plain, false);
	ud_up(s_block);
	ud_up(s_plain);
	rq_make(&r[0], "S_block", ctx, pd, s_block, cq_block);
	r[0].blocked = true;
	rq_make(&r[1], "S_plain", ctx, pd, s_plain, cq_plain);
	rq_make(&r[2], "R0", ctx, pd, NULL, NULL);
	p = calloc(1, 4096);
	CHECK(p, "no memory");
	smr = ibv_reg_mr(pd, p, 4096, 0);
	CHECK(smr, "reg_mr");
	{
		struct ibv_ah_attr aa;

		memset(&aa, 0, sizeof(aa));
		aa.is_global = 1;
		aa.grh.dgid = group;
		aa.grh.sgid_index = sgid_index(ctx);
		aa.grh.hop_limit = 1;
		aa.port_num = 1;
		ah = ibv_create_ah(pd, &aa);
	}
	CHECK(ah, "create_ah to the group: %s", strerror(errno));

	for (int i = 0; i < nrecv; i++) {
		struct pollfd pf = { .fd = lfd, .events = POLLIN };

		CHECK(poll(&pf, 1, VU_WAIT_MS) == 1,
		      "only %d of %d receivers connected", i, nrecv);
		fds[i] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		CHECK(fds[i] >= 0, "accept");
		setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		CHECK(ctl_recv(fds[i]).type == MSG_READY, "not ready");
	}
	for (uint32_t rd = 0; rd <= NROUND; rd++) {
		uint32_t lo = rd * W, hi = rd == NROUND ? NMSG + 1 : lo + W;

		for (uint32_t k = lo; k < hi; k++)
			send_one(k == NMSG || (k & 1) ? s_plain : s_block, scq,
				 ah, smr, p, k);
		for (int i = 0; i < 3; i++)
			rq_round(&r[i], rd);
		for (int i = 0; i < nrecv; i++) {
			struct ctl m = ctl_recv(fds[i]);

			CHECK(m.type == MSG_ACK && m.val == rd,
			      "receiver %d: no ack for round %u", i, rd);
		}
	}
	for (int i = 0; i < 3; i++) {
		rq_take(&r[i], 0);
		CHECK(r[i].got == (r[i].blocked ? NMSG / 2 + 1 : NMSG + 1),
		      "%s: %u messages", r[i].name, r[i].got);
	}
	for (int i = 0; i < nrecv; i++)
		ctl_send(fds[i], MSG_END, 0);
	for (int i = 0; i < nlocal; i++) {
		int st;

		CHECK(waitpid(kids[i], &st, 0) == kids[i], "waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "FAIL: local receiver %d failed\n", i);
			rc = 1;
		}
	}
	printf("sender: %u messages to %d receivers (%d here, %d remote); "
	       "S_block got %u (none of its own), S_plain %u, R0 %u\n",
	       NMSG + 1, nrecv, nlocal, nremote, r[0].got, r[1].got, r[2].got);
	for (int i = 0; i < nrecv; i++)
		close(fds[i]);
	close(lfd);
	/* destroyed while attached: the device detaches them */
	ibv_destroy_ah(ah);
	ibv_destroy_qp(s_block);
	ibv_destroy_qp(s_plain);
	ibv_destroy_qp(r[2].qp);
	ibv_destroy_cq(r[2].cq);
	ibv_destroy_cq(cq_block);
	ibv_destroy_cq(cq_plain);
	ibv_destroy_cq(scq);
	for (int i = 0; i < 3; i++) {
		ibv_dereg_mr(r[i].mr);
		free(r[i].buf);
	}
	ibv_dereg_mr(smr);
	free(p);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(fds);
	free(kids);
	return rc;
}

/* ---- API edges ---- */

static void api_edges(void)
{
	struct ibv_context *ctx = vu_open();
	struct ibv_device_attr da;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *ud, *rc, *many[64];
	struct ibv_qp_init_attr ia;
	union ibv_gid uni, v6;
	uint32_t nmany;

	CHECK(ctx, "no device");
	CHECK(!ibv_query_device(ctx, &da), "query_device");
	CHECK(da.max_mcast_grp > 0 && da.max_mcast_qp_attach > 0 &&
	      da.max_total_mcast_qp_attach >= da.max_mcast_qp_attach,
	      "limits %d %d %d", da.max_mcast_grp, da.max_mcast_qp_attach,
	      da.max_total_mcast_qp_attach);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq, "pd, cq");
	ud = ud_qp(ctx, pd, cq, cq, false);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	rc = ibv_create_qp(pd, &ia);
	CHECK(rc, "create RC QP");

	/* a unicast GID (::ffff:10.1.2.3), an IPv6 group (ff0e::1:2) */
	memset(&uni, 0, sizeof(uni));
	uni.raw[10] = uni.raw[11] = 0xff;
	uni.raw[12] = 10, uni.raw[13] = 1, uni.raw[14] = 2, uni.raw[15] = 3;
	memset(&v6, 0, sizeof(v6));
	v6.raw[0] = 0xff, v6.raw[1] = 0x0e, v6.raw[13] = 1, v6.raw[15] = 2;

	CHECK(ibv_attach_mcast(ud, &uni, 0) == EINVAL, "unicast GID taken");
	CHECK(ibv_attach_mcast(rc, &group, 0) == EINVAL, "RC QP attached");
	CHECK(ibv_detach_mcast(ud, &group, 0) == EINVAL,
	      "detach of a group never attached");
	CHECK(!ibv_attach_mcast(ud, &group, 0), "attach");
	CHECK(!ibv_attach_mcast(ud, &group, 0), "attach twice");
	CHECK(!ibv_detach_mcast(ud, &group, 0), "detach");
	CHECK(ibv_detach_mcast(ud, &group, 0) == EINVAL, "detach twice");
	CHECK(!ibv_attach_mcast(ud, &v6, 0), "attach to an IPv6 group");
	CHECK(!ibv_detach_mcast(ud, &v6, 0), "detach from an IPv6 group");
	CHECK(ibv_detach_mcast(rc, &group, 0) == EINVAL, "RC QP detached");

	/* a group holds max_mcast_qp_attach QPs; destroying attached QPs
	 * frees their places (twice over: nothing leaks) */
	nmany = da.max_mcast_qp_attach < 64 ? (uint32_t)da.max_mcast_qp_attach
					    : 64;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < nmany; i++) {
			many[i] = ud_qp(ctx, pd, cq, cq, false);
			CHECK(!ibv_attach_mcast(many[i], &group, 0),
			      "attach %u of %u (pass %d)", i, nmany, pass);
		}
		if (nmany == (uint32_t)da.max_mcast_qp_attach)
			CHECK(ibv_attach_mcast(ud, &group, 0) == ENOMEM,
			      "more than max_mcast_qp_attach QPs attached");
		for (uint32_t i = 0; i < nmany; i++)
			CHECK(!ibv_destroy_qp(many[i]),
			      "destroy an attached QP");
	}
	CHECK(!ibv_attach_mcast(ud, &group, 0), "attach after the destroys");

	/* the creation flag: offered alone, also through ibv_exp_create_qp */
	{
		struct ibv_qp_init_attr_ex ix;
		struct ibv_exp_qp_init_attr ex;
		struct ibv_qp *q;

		memset(&ix, 0, sizeof(ix));
		ix.send_cq = ix.recv_cq = cq;
		ix.qp_type = IBV_QPT_UD;
		ix.cap.max_send_wr = ix.cap.max_recv_wr = 1;
		ix.cap.max_send_sge = ix.cap.max_recv_sge = 1;
		ix.comp_mask = IBV_QP_INIT_ATTR_PD |
			       IBV_QP_INIT_ATTR_CREATE_FLAGS;
		ix.pd = pd;
		ix.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB |
				  IBV_QP_CREATE_SCATTER_FCS;
		CHECK(!ibv_create_qp_ex(ctx, &ix) && errno == EOPNOTSUPP,
		      "an unsupported creation flag taken");
		memset(&ex, 0, sizeof(ex));
		ex.send_cq = ex.recv_cq = cq;
		ex.qp_type = IBV_QPT_UD;
		ex.cap = ix.cap;
		ex.comp_mask = IBV_EXP_QP_INIT_ATTR_PD |
			       IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS;
		ex.pd = pd;
		ex.exp_create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
		q = ibv_exp_create_qp(ctx, &ex);
		CHECK(q, "ibv_exp_create_qp with BLOCK_SELF_MCAST_LB: %s",
		      strerror(errno));
		CHECK(!ibv_attach_mcast(q, &group, 0), "attach the exp QP");
		CHECK(!ibv_destroy_qp(q), "destroy the exp QP");
	}
	CHECK(!ibv_destroy_qp(ud), "destroy attached");
	CHECK(!ibv_destroy_qp(rc), "destroy RC");
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("api edges: ok\n");
}

int main(int argc, char **argv)
{
	char gbuf[32];

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* a group of our own: 239.255.X.Y from the pid */
	snprintf(gbuf, sizeof(gbuf), "239.255.%d.%d", (getpid() >> 8) & 0xff,
		 getpid() & 0xff);
	if (argc >= 2 && !strcmp(argv[1], "receiver")) {
		CHECK(argc >= 4, "receiver HOST PORT [GROUP]");
		group_parse(argc > 4 ? argv[4] : gbuf);
		return receiver(argv[2], atoi(argv[3]));
	}
	if (argc >= 2 && !strcmp(argv[1], "sender")) {
		CHECK(argc >= 5, "sender PORT NLOCAL NREMOTE [GROUP]");
		group_parse(argc > 5 ? argv[5] : gbuf);
		return sender(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]),
			      "/proc/self/exe");
	}
	group_parse(gbuf);
	api_edges();
	/* the side channel on a TCP port the kernel picks */
	return sender(0, NLOCAL_DEFAULT, 0,
		      "/proc/self/exe");
}
