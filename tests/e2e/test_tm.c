// SPDX-License-Identifier: MIT
/*
 * Tag matching (issue 23) through the verbs, on one host: two RC QPs
 * receive into one tag-matching SRQ (IBV_SRQT_TM), each fed by a sender
 * QP of another PD. Checks:
 *  - tm_caps: RC, the limits the device enforces; a TM SRQ beyond them,
 *    or for a UD QP, is refused (EINVAL);
 *  - expected: a tag posted (TAG_ADD, its handle given back at once)
 *    before an EAGER message: the data after the TMH lands in the tagged
 *    buffer, IBV_WC_TM_RECV with TM_MATCH | TM_DATA_VALID, the tag's
 *    recv_wr_id, the TMH's tag and app_ctx (ibv_wc_read_tm_info); also a
 *    message large enough to be copied without the device lock;
 *  - unexpected: an EAGER message no tag matches goes whole to an
 *    ordinary SRQ buffer (TM_RECV, no TM_MATCH); a tag added while the
 *    device counts an unexpected message software has not acknowledged
 *    completes with TM_SYNC_REQ and matches nothing until a TAG_SYNC with
 *    the count, after which it matches;
 *  - NO_TAG: an ordinary buffer, IBV_WC_TM_NO_TAG;
 *  - rendezvous: the device READs the RVH's range of the sender into the
 *    tagged buffer: TM_MATCH first, then TM_DATA_VALID with the length,
 *    and a FIN (a TMH with opcode FIN and the tag) lands in the sender's
 *    receive queue after its SEND completed;
 *  - removal: TAG_DEL, then a message with that tag is unexpected; a
 *    second TAG_DEL of the handle, or one of a handle never given,
 *    completes with IBV_WC_TM_ERR;
 *  - order: 64 tags of one value (and masks), messages from both QPs are
 *    matched in the order the tags were posted; the 65th tag of an SRQ of
 *    64 is refused (ENOMEM, *bad_wr);
 *  - bad ops refused at post (EINVAL, *bad_wr, the ops before it done):
 *    an unknown opcode or flag, two SGEs; ops on an SRQ that is not TM;
 *  - an EAGER message larger than its tagged buffer: the tag completes
 *    with IBV_WC_LOC_LEN_ERR, the sender sees a remote invalid request;
 *  - a client that writes its ops ring itself (found through
 *    /proc/self/maps): ops the library would refuse fail
 *    (IBV_WC_TM_ERR), a producer counter more than a ring ahead errs the
 *    SRQ (IBV_EVENT_SRQ_ERR).
 *
 * Across two hosts (RoCEv2, tests/net/tm_netns.sh):
 *   test_tm server PORT        the TM SRQ's side
 *   test_tm client HOST PORT   the sender
 * EAGER messages of several packets into their tags (posted in one order,
 * sent in the other), two tags of one value taken in posting order, an
 * unexpected message, a NO_TAG, a rendezvous (not read across the wire:
 * its tag completes with IBV_WC_TM_RNDV_INCOMPLETE, TM_MATCH and the
 * tag, and holds the RVH and what follows, for software to finish), and a
 * message too long for its tag (LOC_LEN_ERR; the sender's REM_INV_REQ).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <infiniband/tm_types.h>
#include <infiniband/verbs.h>

#include "abi/sv_qp.h"
#include "abi/sv_tm.h"
#include "vu.h"

#define CHECK VU_CHECK

#define NT       64            /* tags in the order test (the SRQ's max) */
#define NRECV    32            /* ordinary SRQ buffers */
#define RBUF     4096          /* an ordinary buffer */
#define BIG      (256 * 1024)  /* large eager, rendezvous */
#define TMH      ((uint32_t)sizeof(struct ibv_tmh))

struct comp {
	uint64_t wr_id;
	int status, opcode;
	unsigned int flags;
	uint32_t byte_len, qp_num;
	struct ibv_wc_tm_info tm;
};

static struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd_r, *pd_s;
	struct ibv_cq_ex *cqx;     /* the SRQ's, and its QPs' receive CQ */
	struct ibv_cq *cq_r;
	struct ibv_srq *srq;
	struct ibv_qp *rq[2];      /* receivers, into srq */
	struct vu_ep s[2];         /* senders */
	uint8_t *rbuf;             /* NRECV ordinary buffers */
	struct ibv_mr *rmr;
	uint8_t *tbuf;             /* tagged buffers: BIG + NT * RBUF */
	struct ibv_mr *tmr;
	uint8_t *sbuf;             /* the senders' messages (pd_s) */
	struct ibv_mr *smr;
	uint8_t *fin;              /* the senders' receive buffers */
	struct ibv_mr *fmr;
	uint32_t unexp;            /* unexpected messages handled */
	uint64_t next_recv;
} g;

/* Poll the extended CQ for one completion (bounded). */
static struct comp poll_one(void)
{
	struct ibv_poll_cq_attr pa = { 0 };
	long end = vu_now_ms() + VU_WAIT_MS;
	struct comp c;
	int ret;

	while ((ret = ibv_start_poll(g.cqx, &pa)) == ENOENT)
		CHECK(vu_now_ms() < end, "no completion on the TM CQ");
	CHECK(!ret, "ibv_start_poll: %d", ret);
	c.wr_id = g.cqx->wr_id;
	c.status = g.cqx->status;
	c.opcode = ibv_wc_read_opcode(g.cqx);
	c.flags = ibv_wc_read_wc_flags(g.cqx);
	c.byte_len = ibv_wc_read_byte_len(g.cqx);
	c.qp_num = ibv_wc_read_qp_num(g.cqx);
	ibv_wc_read_tm_info(g.cqx, &c.tm);
	ibv_end_poll(g.cqx);
	return c;
}

static void cq_empty(void)
{
	struct ibv_poll_cq_attr pa = { 0 };

	vu_sleep_ms(20);
	CHECK(ibv_start_poll(g.cqx, &pa) == ENOENT,
	      "a completion nobody asked for on the TM CQ");
}

static void expect(const struct comp *c, int status, int opcode,
		   unsigned int flags, uint64_t wr_id, const char *what)
{
	CHECK(c->status == status, "%s: status %s, expected %s", what,
	      ibv_wc_status_str(c->status), ibv_wc_status_str(status));
	CHECK(c->opcode == opcode, "%s: opcode %d, expected %d", what,
	      c->opcode, opcode);
	CHECK((c->flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID |
			   IBV_WC_TM_SYNC_REQ)) == flags,
	      "%s: wc_flags %#x, expected %#x", what, c->flags, flags);
	CHECK(c->wr_id == wr_id, "%s: wr_id %#llx, expected %#llx", what,
	      (unsigned long long)c->wr_id, (unsigned long long)wr_id);
}

/* One op; 0 or post's errno. */
static int op(struct ibv_srq *srq, struct ibv_ops_wr *wr)
{
	struct ibv_ops_wr *bad = NULL;
	int ret = ibv_post_srq_ops(srq, wr, &bad);

	CHECK(!ret || bad == wr, "a refused op is *bad_wr");
	return ret;
}

/* TAG_ADD of buffer [p, p + len) for tag/mask, signaled: its handle; the
 * completion's flags in *flags. */
static uint32_t tag_add(uint64_t tag, uint64_t mask, void *p, uint32_t len,
			uint64_t wr_id, unsigned int *flags)
{
	struct ibv_sge sge = { (uintptr_t)p, len, g.tmr->lkey };
	struct ibv_ops_wr wr = {
		.wr_id = 0x70000000 + wr_id,
		.opcode = IBV_WR_TAG_ADD,
		.flags = IBV_OPS_SIGNALED,
		.tm.unexpected_cnt = g.unexp,
		.tm.handle = 0xdeadbeef,
		.tm.add = { .recv_wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
			    .tag = tag, .mask = mask },
	};
	struct comp c;

	CHECK(!op(g.srq, &wr), "TAG_ADD");
	CHECK(wr.tm.handle != 0xdeadbeef, "TAG_ADD gave no handle");
	c = poll_one();
	CHECK(c.status == IBV_WC_SUCCESS && c.opcode == IBV_WC_TM_ADD &&
	      c.wr_id == wr.wr_id, "TAG_ADD's completion");
	if (flags)
		*flags = c.flags;
	else
		CHECK(!(c.flags & IBV_WC_TM_SYNC_REQ), "TAG_ADD: SYNC_REQ");
	return wr.tm.handle;
}

/* TAG_DEL (signaled): its completion's status. */
static int tag_del(uint32_t handle)
{
	struct ibv_ops_wr wr = {
		.wr_id = 0x71,
		.opcode = IBV_WR_TAG_DEL,
		.flags = IBV_OPS_SIGNALED,
		.tm.unexpected_cnt = g.unexp,
		.tm.handle = handle,
	};
	struct comp c;

	CHECK(!op(g.srq, &wr), "TAG_DEL");
	c = poll_one();
	CHECK(c.opcode == IBV_WC_TM_DEL && c.wr_id == 0x71, "TAG_DEL's cqe");
	return c.status;
}

static void tag_sync(void)
{
	struct ibv_ops_wr wr = {
		.wr_id = 0x72,
		.opcode = IBV_WR_TAG_SYNC,
		.flags = IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC,
		.tm.unexpected_cnt = g.unexp,
	};
	struct comp c;

	CHECK(!op(g.srq, &wr), "TAG_SYNC");
	c = poll_one();
	expect(&c, IBV_WC_SUCCESS, IBV_WC_TM_SYNC, 0, 0x72, "TAG_SYNC");
}

static void post_recv(void)
{
	uint64_t i = g.next_recv++;
	struct ibv_sge sge = { (uintptr_t)(g.rbuf + (i % NRECV) * RBUF), RBUF,
			       g.rmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 0x100 + i, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	CHECK(!ibv_post_srq_recv(g.srq, &wr, &bad), "ibv_post_srq_recv");
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

/* Sender k sends a message: a TMH (opcode, tag, app_ctx), then body
 * bytes of fill(seed) (RNDV: an RVH first); waits for its completion,
 * which must be `status`. */
static void send_msg(int k, uint8_t opcode, uint64_t tag, uint32_t app_ctx,
		     uint32_t body, unsigned int seed, int status)
{
	struct ibv_tmh *h = (struct ibv_tmh *)g.sbuf;
	struct ibv_sge sge = { (uintptr_t)g.sbuf, TMH + body, g.smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x200 + k, .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	memset(h, 0, TMH);
	h->opcode = opcode;
	h->app_ctx = htobe32(app_ctx);
	h->tag = htobe64(tag);
	fill(g.sbuf + TMH, body, seed);
	CHECK(!ibv_post_send(g.s[k].qp, &wr, &bad), "ibv_post_send");
	CHECK(vu_poll(g.s[k].scq, &wc, 1, VU_WAIT_MS) == 1, "send cqe");
	CHECK(wc.status == (enum ibv_wc_status)status,
	      "the sender's completion: %s, expected %s",
	      ibv_wc_status_str(wc.status),
	      ibv_wc_status_str((enum ibv_wc_status)status));
}

/* Sender k sends a rendezvous: a TMH for tag, RVH v, 16 bytes more. */
static void send_rndv(int k, uint64_t tag, const struct ibv_rvh *v)
{
	struct ibv_tmh *h = (struct ibv_tmh *)g.sbuf;
	struct ibv_sge sge = { (uintptr_t)g.sbuf, 2 * TMH + 16, g.smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x400, .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	memset(h, 0, TMH);
	h->opcode = IBV_TMH_RNDV;
	h->app_ctx = htobe32(0x99);
	h->tag = htobe64(tag);
	memcpy(g.sbuf + TMH, v, sizeof(*v));
	memset(g.sbuf + 2 * TMH, 0x5a, 16);
	CHECK(!ibv_post_send(g.s[k].qp, &wr, &bad), "ibv_post_send");
	CHECK(vu_poll(g.s[k].scq, &wc, 1, VU_WAIT_MS) == 1 &&
	      wc.status == IBV_WC_SUCCESS && wc.wr_id == 0x400,
	      "the rendezvous SEND: %s", ibv_wc_status_str(wc.status));
}

static bool body_is(const uint8_t *p, uint32_t n, unsigned int seed)
{
	uint8_t *want = malloc(n ? n : 1);
	bool ok;

	CHECK(want, "malloc");
	fill(want, n, seed);
	ok = !memcmp(p, want, n);
	free(want);
	return ok;
}

/* An unexpected message just arrived (c): whole, in an ordinary buffer. */
static void check_unexpected(const struct comp *c, int opcode, uint32_t body,
			     uint64_t tag, unsigned int seed, const char *what)
{
	uint64_t i = c->wr_id - 0x100;
	const uint8_t *p = g.rbuf + (i % NRECV) * RBUF;
	const struct ibv_tmh *h = (const struct ibv_tmh *)p;

	CHECK(c->wr_id >= 0x100 && c->wr_id < 0x100 + g.next_recv, "%s: wr_id",
	      what);
	expect(c, IBV_WC_SUCCESS, opcode, 0, c->wr_id, what);
	CHECK(c->byte_len == TMH + body, "%s: byte_len %u", what, c->byte_len);
	CHECK(be64toh(h->tag) == tag && body_is(p + TMH, body, seed),
	      "%s: the message is not whole in the buffer", what);
	CHECK(c->tm.tag == 0, "%s: tm_info without a match", what);
	post_recv();
}

static void caps(void)
{
	struct ibv_device_attr_ex a;
	struct ibv_srq_init_attr_ex sa;
	struct ibv_srq *srq;

	CHECK(!ibv_query_device_ex(g.ctx, NULL, &a), "ibv_query_device_ex");
	CHECK(a.tm_caps.flags == IBV_TM_CAP_RC, "tm_caps.flags %#x",
	      a.tm_caps.flags);
	CHECK(a.tm_caps.max_num_tags >= NT && a.tm_caps.max_ops >= 1 &&
	      a.tm_caps.max_sge == 1 &&
	      a.tm_caps.max_rndv_hdr_size >= 2 * TMH,
	      "tm_caps: tags %u ops %u sge %u rndv_hdr %u",
	      a.tm_caps.max_num_tags, a.tm_caps.max_ops, a.tm_caps.max_sge,
	      a.tm_caps.max_rndv_hdr_size);
	memset(&sa, 0, sizeof(sa));
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = g.pd_r;
	sa.cq = g.cq_r;
	sa.attr.max_wr = 64;
	sa.attr.max_sge = 1;
	sa.tm_cap.max_ops = 16;
	sa.tm_cap.max_num_tags = a.tm_caps.max_num_tags + 1;
	errno = 0;
	CHECK(!ibv_create_srq_ex(g.ctx, &sa) && errno == EINVAL,
	      "a TM SRQ over max_num_tags: %s", strerror(errno));
	sa.tm_cap.max_num_tags = NT;
	sa.tm_cap.max_ops = a.tm_caps.max_ops + 1;
	errno = 0;
	CHECK(!ibv_create_srq_ex(g.ctx, &sa) && errno == EINVAL,
	      "a TM SRQ over max_ops");
	sa.tm_cap.max_ops = 16;
	sa.comp_mask &= ~(uint32_t)IBV_SRQ_INIT_ATTR_CQ;
	CHECK(!ibv_create_srq_ex(g.ctx, &sa), "a TM SRQ without its CQ");
	sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	srq = ibv_create_srq_ex(g.ctx, &sa);
	CHECK(srq, "ibv_create_srq_ex(TM): %s", strerror(errno));
	{
		struct vu_qp_caps c = { .srq = srq, .scq = g.cq_r,
					.rcq = g.cq_r };
		struct vu_ep ud;

		CHECK(vu_ep_create(&ud, g.ctx, g.pd_r, IBV_QPT_UD, &c) != 0,
		      "a UD QP on a TM SRQ");
	}
	CHECK(!ibv_destroy_srq(srq), "destroy TM SRQ");
	g.srq = ibv_create_srq_ex(g.ctx, &sa);
	CHECK(g.srq, "ibv_create_srq_ex(TM)");
	printf("ok caps: tags %u ops %u sge %u rndv_hdr %u\n",
	       a.tm_caps.max_num_tags, a.tm_caps.max_ops, a.tm_caps.max_sge,
	       a.tm_caps.max_rndv_hdr_size);
}

static void setup(void)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 1024,
		.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_TM_INFO,
	};
	struct vu_conn c = vu_conn_default();
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;

	g.ctx = vu_open();
	CHECK(g.ctx, "no sv0");
	g.pd_r = ibv_alloc_pd(g.ctx);
	g.pd_s = ibv_alloc_pd(g.ctx);
	CHECK(g.pd_r && g.pd_s, "pd");
	g.cqx = ibv_create_cq_ex(g.ctx, &ca);
	CHECK(g.cqx, "ibv_create_cq_ex with TM_INFO: %s", strerror(errno));
	g.cq_r = ibv_cq_ex_to_cq(g.cqx);
	g.rbuf = calloc(NRECV, RBUF);
	g.tbuf = calloc(1, BIG + (size_t)NT * RBUF);
	g.sbuf = calloc(1, BIG + 64);
	g.fin = calloc(16, 64);
	CHECK(g.rbuf && g.tbuf && g.sbuf && g.fin, "memory");
	g.rmr = ibv_reg_mr(g.pd_r, g.rbuf, NRECV * RBUF, acc);
	g.tmr = ibv_reg_mr(g.pd_r, g.tbuf, BIG + (size_t)NT * RBUF, acc);
	g.smr = ibv_reg_mr(g.pd_s, g.sbuf, BIG + 64, acc);
	g.fmr = ibv_reg_mr(g.pd_s, g.fin, 16 * 64, acc);
	CHECK(g.rmr && g.tmr && g.smr && g.fmr, "ibv_reg_mr");
	caps();
	for (int k = 0; k < 2; k++) {
		struct vu_qp_caps rc = { .srq = g.srq, .scq = g.cq_r,
					 .rcq = g.cq_r, .send_wr = 4 };
		struct vu_qp_caps sc = { .recv_wr = 16 };
		struct vu_ep ep;

		CHECK(!vu_ep_create(&ep, g.ctx, g.pd_r, IBV_QPT_RC, &rc),
		      "an RC QP on the TM SRQ");
		g.rq[k] = ep.qp;
		CHECK(!vu_ep_create(&g.s[k], g.ctx, g.pd_s, IBV_QPT_RC, &sc),
		      "sender");
		CHECK(!vu_connect_pair(g.rq[k], g.s[k].qp, &c), "connect");
	}
	for (int i = 0; i < NRECV / 2; i++)
		post_recv();
}

static void expected(void)
{
	struct comp c;

	tag_add(0x10, ~0ull, g.tbuf, RBUF, 1001, NULL);
	send_msg(0, IBV_TMH_EAGER, 0x10, 0xabcd, 1000, 1, IBV_WC_SUCCESS);
	c = poll_one();
	expect(&c, IBV_WC_SUCCESS, IBV_WC_TM_RECV,
	       IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 1001, "expected");
	CHECK(c.byte_len == 1000 && c.tm.tag == 0x10 && c.tm.priv == 0xabcd,
	      "expected: byte_len %u tag %#llx priv %#x", c.byte_len,
	      (unsigned long long)c.tm.tag, c.tm.priv);
	CHECK(c.qp_num == g.rq[0]->qp_num, "expected: qp_num");
	CHECK(body_is(g.tbuf, 1000, 1), "expected: the data after the TMH");
	/* large: copied without the device lock */
	tag_add(0x11, ~0ull, g.tbuf, BIG, 1002, NULL);
	send_msg(1, IBV_TMH_EAGER, 0x11, 7, BIG - TMH, 2, IBV_WC_SUCCESS);
	c = poll_one();
	expect(&c, IBV_WC_SUCCESS, IBV_WC_TM_RECV,
	       IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 1002, "expected big");
	CHECK(c.byte_len == BIG - TMH && c.qp_num == g.rq[1]->qp_num &&
	      body_is(g.tbuf, BIG - TMH, 2), "expected big: data");
	cq_empty();
	printf("ok expected\n");
}

static void unexpected(void)
{
	unsigned int flags;
	uint32_t h;
	struct comp c;

	send_msg(0, IBV_TMH_EAGER, 0x20, 5, 300, 3, IBV_WC_SUCCESS);
	c = poll_one();
	check_unexpected(&c, IBV_WC_TM_RECV, 300, 0x20, 3, "unexpected");
	/* software has not acknowledged it: the new tag waits */
	h = tag_add(0x20, ~0ull, g.tbuf, RBUF, 1003, &flags);
	CHECK(flags & IBV_WC_TM_SYNC_REQ, "TAG_ADD out of sync: no SYNC_REQ");
	send_msg(1, IBV_TMH_EAGER, 0x20, 5, 301, 4, IBV_WC_SUCCESS);
	c = poll_one();
	check_unexpected(&c, IBV_WC_TM_RECV, 301, 0x20, 4,
			 "a tag out of phase matched");
	g.unexp += 2;
	tag_sync();
	send_msg(0, IBV_TMH_EAGER, 0x20, 6, 302, 5, IBV_WC_SUCCESS);
	c = poll_one();
	expect(&c, IBV_WC_SUCCESS, IBV_WC_TM_RECV,
	       IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 1003, "after the sync");
	CHECK(body_is(g.tbuf, 302, 5) && c.tm.priv == 6, "after the sync");
	/* consumed: deleting it now is the verbs' concurrent consumption */
	CHECK(tag_del(h) == IBV_WC_TM_ERR, "TAG_DEL of a consumed tag");
	cq_empty();
	printf("ok unexpected\n");
}

static void no_tag(void)
{
	struct comp c;

	tag_add(0x30, ~0ull, g.tbuf, RBUF, 1004, NULL);
	/* the tag is 0x30 but NO_TAG says "do not match" */
	send_msg(1, IBV_TMH_NO_TAG, 0x30, 0, 200, 6, IBV_WC_SUCCESS);
	c = poll_one();
	check_unexpected(&c, IBV_WC_TM_NO_TAG, 200, 0x30, 6, "NO_TAG");
	/* the tag is still there */
	send_msg(0, IBV_TMH_EAGER, 0x30, 0, 10, 7, IBV_WC_SUCCESS);
	c = poll_one();
	expect(&c, IBV_WC_SUCCESS, IBV_WC_TM_RECV,
	       IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 1004, "after NO_TAG");
	cq_empty();
	printf("ok no_tag\n");
}

static void rndv(void)
{
	uint8_t *src = g.sbuf + 64;  /* the data, 64 bytes after the headers */
	struct ibv_sge fs = { (uintptr_t)g.fin, 64, g.fmr->lkey };
	struct ibv_recv_wr fw = { .wr_id = 0x300, .sg_list = &fs,
				  .num_sge = 1 }, *bad;
	struct ibv_tmh *h = (struct ibv_tmh *)g.sbuf;
	struct ibv_rvh *v = (struct ibv_rvh *)(g.sbuf + TMH);
	struct ibv_sge sge = { (uintptr_t)g.sbuf, 2 * TMH + 16, g.smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x400, .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *sbad;
	const struct ibv_tmh *f = (const struct ibv_tmh *)g.fin;
	uint32_t len = BIG - 64;
	struct ibv_wc wc[2];
	struct comp c;

	CHECK(!ibv_post_recv(g.s[1].qp, &fw, &bad), "the sender's receive");
	memset(g.tbuf, 0, BIG);
	fill(src, len, 8);
	tag_add(0x40, ~0ull, g.tbuf, BIG, 1005, NULL);
	memset(h, 0, TMH);
	h->opcode = IBV_TMH_RNDV;
	h->app_ctx = htobe32(0x99);
	h->tag = htobe64(0x40);
	v->va = htobe64((uintptr_t)src);
	v->rkey = htobe32(g.smr->rkey);
	v->len = htobe32(len);
	CHECK(!ibv_post_send(g.s[1].qp, &wr, &sbad), "ibv_post_send");
	c = poll_one();
	expect(&c, IBV_WC_SUCCESS, IBV_WC_TM_RECV, IBV_WC_TM_MATCH, 1005,
	       "rndv: the match");
	CHECK(c.tm.tag == 0x40 && c.tm.priv == 0x99, "rndv: tm_info");
	c = poll_one();
	expect(&c, IBV_WC_SUCCESS, IBV_WC_TM_RECV, IBV_WC_TM_DATA_VALID, 1005,
	       "rndv: the data");
	CHECK(c.byte_len == len && body_is(g.tbuf, len, 8),
	      "rndv: the data read (byte_len %u)", c.byte_len);
	/* the sender: its SEND, then the FIN */
	CHECK(vu_poll(g.s[1].scq, &wc[0], 1, VU_WAIT_MS) == 1 &&
	      wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 0x400,
	      "rndv: the SEND's completion");
	CHECK(vu_poll(g.s[1].rcq, &wc[1], 1, VU_WAIT_MS) == 1 &&
	      wc[1].status == IBV_WC_SUCCESS && wc[1].wr_id == 0x300 &&
	      wc[1].opcode == IBV_WC_RECV && wc[1].byte_len == TMH,
	      "rndv: the FIN");
	CHECK(f->opcode == IBV_TMH_FIN && be64toh(f->tag) == 0x40 &&
	      be32toh(f->app_ctx) == 0x99, "rndv: the FIN's TMH");
	cq_empty();
	printf("ok rndv\n");
}

static void removal(void)
{
	uint32_t h;
	struct comp c;

	h = tag_add(0x50, ~0ull, g.tbuf, RBUF, 1006, NULL);
	CHECK(tag_del(h) == IBV_WC_SUCCESS, "TAG_DEL");
	send_msg(0, IBV_TMH_EAGER, 0x50, 0, 40, 9, IBV_WC_SUCCESS);
	c = poll_one();
	check_unexpected(&c, IBV_WC_TM_RECV, 40, 0x50, 9, "after TAG_DEL");
	g.unexp++;
	tag_sync();
	CHECK(tag_del(h) == IBV_WC_TM_ERR, "TAG_DEL twice");
	CHECK(tag_del(0xfffffff0) == IBV_WC_TM_ERR,
	      "TAG_DEL of a handle never given");
	cq_empty();
	printf("ok removal\n");
}

static void order(void)
{
	uint32_t h[NT];
	struct ibv_sge sge = { (uintptr_t)g.tbuf, RBUF, g.tmr->lkey };
	struct ibv_ops_wr wr = {
		.opcode = IBV_WR_TAG_ADD,
		.flags = IBV_OPS_SIGNALED,
		.tm.add = { .sg_list = &sge, .num_sge = 1, .tag = 1,
			    .mask = ~0ull },
	};
	struct comp c;

	/* one value for every tag, masks that all match it */
	for (int i = 0; i < NT; i++)
		h[i] = tag_add(0x6000 + (i % 4 == 3 ? 0xff : 0),
			       i % 4 == 3 ? ~0xffull : ~0ull,
			       g.tbuf + BIG + (size_t)i * RBUF, RBUF, 2000 + i,
			       NULL);
	for (int i = 0; i < NT; i++)
		CHECK(h[i] != h[(i + 1) % NT], "two tags, one handle");
	/* the list is full */
	CHECK(op(g.srq, &wr) == ENOMEM, "TAG_ADD beyond max_num_tags");
	for (int i = 0; i < NT; i++) {
		send_msg(i & 1, IBV_TMH_EAGER, 0x6000, (uint32_t)i, 64,
			 100 + i, IBV_WC_SUCCESS);
		c = poll_one();
		expect(&c, IBV_WC_SUCCESS, IBV_WC_TM_RECV,
		       IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 2000 + i,
		       "in posting order");
		CHECK(c.tm.priv == (uint32_t)i &&
		      body_is(g.tbuf + BIG + (size_t)i * RBUF, 64, 100 + i),
		      "in order: message %d", i);
	}
	cq_empty();
	printf("ok order: %d tags\n", NT);
}

static void bad_ops(void)
{
	struct ibv_sge sge[2] = { { (uintptr_t)g.tbuf, 8, g.tmr->lkey },
				  { (uintptr_t)g.tbuf + 8, 8, g.tmr->lkey } };
	struct ibv_ops_wr wr = { .opcode = IBV_WR_TAG_ADD,
				 .tm.add = { .sg_list = sge, .num_sge = 2 } };
	struct ibv_ops_wr good = wr, list[2];
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *basic;

	CHECK(op(g.srq, &wr) == EINVAL, "TAG_ADD with 2 SGEs");
	wr.opcode = (enum ibv_ops_wr_opcode)77;
	CHECK(op(g.srq, &wr) == EINVAL, "an unknown op");
	wr.opcode = IBV_WR_TAG_SYNC;
	wr.flags = 1 << 7;
	CHECK(op(g.srq, &wr) == EINVAL, "unknown op flags");
	basic = ibv_create_srq(g.pd_r, &sa);
	CHECK(basic, "a basic SRQ");
	good.opcode = IBV_WR_TAG_SYNC;
	good.flags = 0;
	CHECK(op(basic, &good) == EINVAL, "ops on a basic SRQ");
	CHECK(!ibv_destroy_srq(basic), "destroy");
	/* a list stops at the refused op; the one before it was done */
	list[0] = good;
	list[0].next = &list[1];
	list[1] = wr;
	{
		struct ibv_ops_wr *bad = NULL;

		CHECK(ibv_post_srq_ops(g.srq, list, &bad) == EINVAL &&
		      bad == &list[1], "a list with a bad op");
	}
	cq_empty();
	printf("ok bad ops\n");
}

/* The SRQ's ops ring as the library mapped it (in the connection's pool of
 * rings, a memfd found in /proc/self/maps, mapped whole; only g.srq is a
 * TM SRQ now): its header, the page-aligned ring header followed by one of
 * SV_TM_OP_STRIDE slots. */
static struct sv_wq_ring *ops_ring(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	struct sv_wq_ring *ops = NULL;
	char line[512];

	CHECK(f, "/proc/self/maps");
	while (!ops && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, at;

		if ((!strstr(line, "softverbs-rings") &&
		     !strstr(line, "softverbs-srq")) ||
		    sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		for (at = lo; !ops && at + SV_RING_HDR_BYTES <= hi;
		     at += 4096) {
			const struct sv_wq_ring *rq =
				(const struct sv_wq_ring *)at;
			size_t off;

			if (!rq->entries || (rq->entries & (rq->entries - 1)) ||
			    !rq->stride || rq->stride > (1u << 20))
				continue;
			off = (SV_RING_HDR_BYTES +
			       (size_t)rq->entries * rq->stride + 4095) &
			      ~(size_t)4095;
			if (off + SV_RING_HDR_BYTES > hi - at)
				continue;
			ops = (struct sv_wq_ring *)(at + off);
			if (ops->stride != SV_TM_OP_STRIDE || !ops->entries)
				ops = NULL;
		}
	}
	fclose(f);
	CHECK(ops, "no ops ring in /proc/self/maps");
	return ops;
}

/*
 * A client that writes its ops ring itself: ops the library refuses
 * (unknown opcode, 9 SGEs, a reserved field set) and a TAG_DEL of a handle
 * never given each fail (IBV_WC_TM_ERR), applied at the latest when a
 * message comes; then a producer counter more than a ring ahead: the SRQ
 * errs (IBV_EVENT_SRQ_ERR) and takes no message. The library's own view
 * of the ring is stale after this: last.
 */
static void scribble(void)
{
	struct sv_wq_ring *h = ops_ring();
	uint32_t p;
	struct ibv_async_event ev;
	struct comp c;
	struct sv_tm_op o[4] = {
		{ .wr_id = 0x81, .opcode = 99, .flags = IBV_OPS_SIGNALED },
		{ .wr_id = 0x82, .opcode = IBV_WR_TAG_ADD, .num_sge = 9,
		  .flags = IBV_OPS_SIGNALED },
		{ .wr_id = 0x83, .opcode = IBV_WR_TAG_ADD, .rsvd = 1,
		  .flags = IBV_OPS_SIGNALED },
		{ .wr_id = 0x84, .opcode = IBV_WR_TAG_DEL, .handle = 0x7777,
		  .flags = IBV_OPS_SIGNALED },
	};
	static const int op_wc[4] = { IBV_WC_TM_SYNC, IBV_WC_TM_ADD,
				      IBV_WC_TM_ADD, IBV_WC_TM_DEL };

	/* a tag the last message would match, were the SRQ not in error */
	tag_add(0x1, ~0ull, g.tbuf, RBUF, 1010, NULL);
	p = __atomic_load_n(&h->prod, __ATOMIC_ACQUIRE);
	for (int i = 0; i < 4; i++)
		memcpy(sv_wq_slot(h, h->entries, h->stride, p + i), &o[i],
		       sizeof(o[i]));
	__atomic_store_n(&h->prod, p + 4, __ATOMIC_RELEASE);
	send_msg(0, IBV_TMH_NO_TAG, 0, 0, 8, 50, IBV_WC_SUCCESS);
	for (int i = 0; i < 4; i++) {
		c = poll_one();
		expect(&c, IBV_WC_TM_ERR, op_wc[i], 0, 0x81 + (uint64_t)i,
		       "a forged op");
	}
	c = poll_one();
	check_unexpected(&c, IBV_WC_TM_NO_TAG, 8, 0, 50, "after forged ops");
	__atomic_store_n(&h->prod, h->cons + h->entries + 5, __ATOMIC_RELEASE);
	send_msg(0, IBV_TMH_EAGER, 0x1, 0, 8, 51, IBV_WC_RETRY_EXC_ERR);
	/* the QPs' own events come too (the receivers went to ERR); each
	 * acknowledged by vu_async_event */
	for (bool seen = false; !seen;) {
		CHECK(!vu_async_event(g.ctx, &ev, VU_WAIT_MS),
		      "a corrupt ops ring: no IBV_EVENT_SRQ_ERR");
		seen = ev.event_type == IBV_EVENT_SRQ_ERR;
		CHECK(!seen || ev.element.srq == g.srq, "SRQ_ERR of %p",
		      (void *)ev.element.srq);
	}
	printf("ok forged ops\n");
}

/* Last: it puts a receiver QP in the error state. */
static void too_long(void)
{
	struct comp c;

	tag_add(0x70, ~0ull, g.tbuf, 100, 1007, NULL);
	send_msg(1, IBV_TMH_EAGER, 0x70, 0, 101, 10, IBV_WC_REM_INV_REQ_ERR);
	c = poll_one();
	CHECK(c.status == IBV_WC_LOC_LEN_ERR && c.wr_id == 1007,
	      "too long for its tagged buffer: %s",
	      ibv_wc_status_str(c.status));
	CHECK(vu_qp_state(g.rq[1]) == IBV_QPS_ERR, "the receiver in ERR");
	printf("ok too long\n");
}

/* ---------------- across two hosts ---------------- */

#define W_MSG   5000           /* an EAGER of several packets */
#define W_NT    8
#define W_RNDV  100000

static void wire_bufs(void)
{
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;

	g.rbuf = calloc(NRECV, RBUF);
	g.tbuf = calloc(1, BIG + (size_t)NT * RBUF);
	g.sbuf = calloc(1, BIG + 64);
	CHECK(g.rbuf && g.tbuf && g.sbuf, "memory");
	g.rmr = ibv_reg_mr(g.pd_r, g.rbuf, NRECV * RBUF, acc);
	g.tmr = ibv_reg_mr(g.pd_r, g.tbuf, BIG + (size_t)NT * RBUF, acc);
	g.smr = ibv_reg_mr(g.pd_s, g.sbuf, BIG + 64, acc);
	CHECK(g.rmr && g.tmr && g.smr, "ibv_reg_mr");
}

static int server(int ls)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 1024,
		.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_TM_INFO,
	};
	struct vu_qp_caps rc = { .send_wr = 4 };
	struct vu_conn c = vu_conn_default();
	struct vu_addr me, peer;
	struct vu_ep ep;
	struct comp cp;
	char go = 1;
	int fd;

	g.ctx = vu_open();
	CHECK(g.ctx, "no sv0");
	g.pd_r = g.pd_s = ibv_alloc_pd(g.ctx);
	g.cqx = ibv_create_cq_ex(g.ctx, &ca);
	CHECK(g.pd_r && g.cqx, "pd, cq");
	g.cq_r = ibv_cq_ex_to_cq(g.cqx);
	wire_bufs();
	caps();
	rc.srq = g.srq;
	rc.scq = rc.rcq = g.cq_r;
	CHECK(!vu_ep_create(&ep, g.ctx, g.pd_r, IBV_QPT_RC, &rc), "qp");
	for (int i = 0; i < NRECV / 2; i++)
		post_recv();
	/* tags 0x900 + i, each a buffer of its own; two of one value; the
	 * rendezvous'; one too small */
	for (int i = 0; i < W_NT; i++)
		tag_add(0x900 + i, ~0ull, g.tbuf + (size_t)i * 2 * RBUF,
			2 * RBUF, 3000 + i, NULL);
	tag_add(0x970, ~0ull, g.tbuf + BIG, RBUF, 3100, NULL);
	tag_add(0x970, ~0ull, g.tbuf + BIG + RBUF, RBUF, 3101, NULL);
	tag_add(0x950, ~0ull, g.tbuf + BIG + 2 * RBUF, RBUF, 3200, NULL);
	tag_add(0x960, ~0ull, g.tbuf + BIG + 3 * RBUF, 100, 3300, NULL);
	fd = accept(ls, NULL, NULL);
	CHECK(fd >= 0, "accept");
	close(ls);
	me = vu_addr_of(ep.qp, c.sq_psn);
	vu_xfer_all(fd, &peer, sizeof(peer), false);
	vu_xfer_all(fd, &me, sizeof(me), true);
	CHECK(!vu_connect(ep.qp, &peer, &c), "connect");
	vu_xfer_all(fd, &go, 1, true);
	for (int i = W_NT - 1; i >= 0; i--) {
		cp = poll_one();
		expect(&cp, IBV_WC_SUCCESS, IBV_WC_TM_RECV,
		       IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 3000 + i,
		       "wire: expected");
		CHECK(cp.byte_len == W_MSG && cp.tm.tag == 0x900u + i &&
		      cp.tm.priv == (uint32_t)i &&
		      body_is(g.tbuf + (size_t)i * 2 * RBUF, W_MSG, 20 + i),
		      "wire: expected %d (byte_len %u)", i, cp.byte_len);
	}
	for (int i = 0; i < 2; i++) {
		cp = poll_one();
		expect(&cp, IBV_WC_SUCCESS, IBV_WC_TM_RECV,
		       IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 3100 + i,
		       "wire: in posting order");
	}
	cp = poll_one();
	check_unexpected(&cp, IBV_WC_TM_RECV, 3000, 0x999, 30,
			 "wire: unexpected");
	cp = poll_one();
	check_unexpected(&cp, IBV_WC_TM_NO_TAG, 100, 0x950, 31,
			 "wire: NO_TAG");
	cp = poll_one();
	CHECK(cp.status == IBV_WC_TM_RNDV_INCOMPLETE && cp.wr_id == 3200 &&
	      cp.opcode == IBV_WC_TM_RECV && (cp.flags & IBV_WC_TM_MATCH) &&
	      cp.tm.tag == 0x950 && cp.byte_len == TMH + 16,
	      "wire: rendezvous left to software: %s, byte_len %u",
	      ibv_wc_status_str(cp.status), cp.byte_len);
	{
		const struct ibv_rvh *v =
			(const struct ibv_rvh *)(g.tbuf + BIG + 2 * RBUF);

		CHECK(be32toh(v->len) == W_RNDV && v->va && v->rkey,
		      "wire: the RVH in the tagged buffer");
	}
	cp = poll_one();
	CHECK(cp.status == IBV_WC_LOC_LEN_ERR && cp.wr_id == 3300,
	      "wire: too long: %s", ibv_wc_status_str(cp.status));
	vu_xfer_all(fd, &go, 1, false);          /* the client is done */
	close(fd);
	printf("server: tag matching across the wire: %d expected, in "
	       "order, unexpected, NO_TAG, rendezvous, too long\n", W_NT);
	return 0;
}

static void client(const char *host, int port)
{
	struct vu_conn c = vu_conn_default();
	struct vu_qp_caps sc = { .recv_wr = 16 };
	struct vu_addr me, peer;
	char go;
	int fd;

	g.ctx = vu_open();
	CHECK(g.ctx, "no sv0");
	g.pd_r = g.pd_s = ibv_alloc_pd(g.ctx);
	CHECK(g.pd_s, "pd");
	wire_bufs();
	CHECK(!vu_ep_create(&g.s[0], g.ctx, g.pd_s, IBV_QPT_RC, &sc), "qp");
	fd = vu_tcp_connect(host, port);
	me = vu_addr_of(g.s[0].qp, c.sq_psn);
	vu_xfer_all(fd, &me, sizeof(me), true);
	vu_xfer_all(fd, &peer, sizeof(peer), false);
	CHECK(!vu_connect(g.s[0].qp, &peer, &c), "connect");
	vu_xfer_all(fd, &go, 1, false);
	for (int i = W_NT - 1; i >= 0; i--)
		send_msg(0, IBV_TMH_EAGER, 0x900 + i, (uint32_t)i, W_MSG,
			 20 + i, IBV_WC_SUCCESS);
	send_msg(0, IBV_TMH_EAGER, 0x970, 0, 64, 40, IBV_WC_SUCCESS);
	send_msg(0, IBV_TMH_EAGER, 0x970, 1, 64, 41, IBV_WC_SUCCESS);
	send_msg(0, IBV_TMH_EAGER, 0x999, 0, 3000, 30, IBV_WC_SUCCESS);
	send_msg(0, IBV_TMH_NO_TAG, 0x950, 0, 100, 31, IBV_WC_SUCCESS);
	{
		/* a TMH, an RVH, 16 bytes of the application's header */
		struct ibv_rvh v = { htobe64((uintptr_t)g.sbuf + 64),
				     htobe32(g.smr->rkey), htobe32(W_RNDV) };

		fill(g.sbuf + 64, W_RNDV, 9);
		send_rndv(0, 0x950, &v);
	}
	send_msg(0, IBV_TMH_EAGER, 0x960, 0, 200, 33, IBV_WC_REM_INV_REQ_ERR);
	vu_xfer_all(fd, &go, 1, true);
	close(fd);
	printf("PASS: tag matching across the wire\n");
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(vu_tcp_listen(atoi(argv[2]), 1));
	if (argc == 4 && !strcmp(argv[1], "client")) {
		client(argv[2], atoi(argv[3]));
		return 0;
	}
	if (argc != 1) {
		fprintf(stderr,
			"usage: test_tm [server PORT | client HOST PORT]\n");
		return 2;
	}
	setup();
	expected();
	unexpected();
	no_tag();
	rndv();
	removal();
	bad_ops();
	order();
	too_long();
	scribble();
	for (int k = 0; k < 2; k++) {
		CHECK(!ibv_destroy_qp(g.rq[k]), "destroy qp");
		vu_ep_destroy(&g.s[k]);
	}
	CHECK(!ibv_destroy_srq(g.srq), "destroy TM SRQ");
	CHECK(!ibv_destroy_cq(g.cq_r), "destroy cq");
	ibv_dereg_mr(g.rmr);
	ibv_dereg_mr(g.tmr);
	ibv_dereg_mr(g.smr);
	ibv_dereg_mr(g.fmr);
	ibv_dealloc_pd(g.pd_r);
	ibv_dealloc_pd(g.pd_s);
	ibv_close_device(g.ctx);
	free(g.rbuf);
	free(g.tbuf);
	free(g.sbuf);
	free(g.fin);
	printf("PASS test_tm\n");
	return 0;
}
