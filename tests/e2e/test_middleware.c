// SPDX-License-Identifier: MIT
/*
 * What middleware needs of the device, at the verbs level (docs/DESIGN.md,
 * "Middleware"): each case is a behaviour UCX 1.13 relies on that sv0 got
 * wrong, so a regression shows here before it shows as a UCX hang.
 *
 *  - A UD receive completion tells the datagram's network header type in
 *    wc.sl, as RoCE NICs report it (bit 3: RoCEv2/UDP, bits 2:0: 2 IPv4,
 *    1 IPv6), and the destination address is where that type puts it in
 *    the first 40 bytes: UCX's ud_verbs reads sl & 7 to choose between the
 *    last 4 and the last 16 bytes, and drops the datagram unless they are
 *    one of its GIDs (every UD packet was dropped: sl was 0).
 *  - ibv_req_notify_cq on a CQ that holds completions not polled yet sends
 *    the event at once (for a solicited arm: when one of them is solicited
 *    or an error) if no event announced them: UCX polls, finds nothing,
 *    arms and sleeps in poll(2), so a completion that lands between its
 *    last poll and its arm must wake it (both ucx_perftest processes slept
 *    forever now and then). One that an event announced does not fire the
 *    arm again: perftest's -e re-arms the CQ that woke it before polling
 *    it, and takes the next event for its other CQ's.
 *
 * Run under tests/e2e/isolated.sh (a device of its own).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "vu.h"

#define BUF 65536
#define GRH 40

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static char *buf;
static struct ibv_mr *mr;

static int group_setup(void **state)
{
	(void)state;
	ctx = vu_open();
	if (!ctx)
		return -1;
	pd = ibv_alloc_pd(ctx);
	buf = calloc(1, BUF);
	if (!pd || !buf)
		return -1;
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	return mr ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	return 0;
}

static void post_recv(struct ibv_qp *qp, uint64_t id, size_t off, size_t len)
{
	struct ibv_sge s = { (uintptr_t)(buf + off), (uint32_t)len, mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	assert_int_equal(ibv_post_recv(qp, &w, &bad), 0);
}

static void post_send(struct ibv_qp *qp, uint64_t id, size_t off, size_t len,
		      unsigned int flags, struct ibv_ah *ah, uint32_t qpn)
{
	struct ibv_sge s = { (uintptr_t)(buf + off), (uint32_t)len, mr->lkey };
	struct ibv_send_wr w = {
		.wr_id = id, .sg_list = &s, .num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | flags,
	};
	struct ibv_send_wr *bad;

	if (ah) {
		w.wr.ud.ah = ah;
		w.wr.ud.remote_qpn = qpn;
		w.wr.ud.remote_qkey = vu_conn_default().qkey;
	}
	assert_int_equal(ibv_post_send(qp, &w, &bad), 0);
}

static void expect_wc(struct ibv_cq *cq, uint64_t id, struct ibv_wc *out)
{
	struct ibv_wc wc;

	assert_int_equal(vu_poll(cq, &wc, 1, VU_WAIT_MS), 1);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id)
		fail_msg("completion %#llx: %s, expected %#llx",
			 (unsigned long long)wc.wr_id,
			 ibv_wc_status_str(wc.status), (unsigned long long)id);
	if (out)
		*out = wc;
}

static bool gid_is_v4(const union ibv_gid *g)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };

	return memcmp(g->raw, v4, sizeof(v4)) == 0;
}

/* What UCX 1.13's ud_verbs does with a received datagram (ud_iface.h,
 * uct_ud_iface_check_grh): the L3 type from sl, then the destination
 * address at the end of the 40 bytes, compared with its GID. */
static bool ucx_takes(const struct ibv_wc *wc, const uint8_t *grh,
		      const union ibv_gid *mine)
{
	size_t len = (wc->sl & 7) == 2 ? 4 : 16;

	return (wc->wc_flags & IBV_WC_GRH) &&
	       memcmp(grh + GRH - len, mine->raw + 16 - len, len) == 0;
}

/* A datagram to ourselves from every GID of the port: wc.sl names the
 * network header, and the 40 bytes hold it where that says. */
static void test_ud_network_header_type(void **state)
{
	struct vu_qp_caps caps = { .send_wr = 8, .recv_wr = 8 };
	struct vu_conn c = vu_conn_default();
	struct ibv_port_attr pa;
	struct vu_ep a, b;
	unsigned int tried = 0;

	(void)state;
	assert_int_equal(vu_ep_create(&a, ctx, pd, IBV_QPT_UD, &caps), 0);
	assert_int_equal(vu_ep_create(&b, ctx, pd, IBV_QPT_UD, &caps), 0);
	assert_int_equal(vu_connect_pair(a.qp, b.qp, &c), 0);
	assert_int_equal(ibv_query_port(ctx, 1, &pa), 0);
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		static const union ibv_gid zero;
		struct ibv_ah_attr aa;
		union ibv_gid gid;
		struct ibv_wc wc;
		struct ibv_ah *ah;
		const uint8_t *g = (const uint8_t *)buf + 4096;
		bool v4;

		if (ibv_query_gid(ctx, 1, i, &gid) ||
		    !memcmp(&gid, &zero, sizeof(gid)))
			continue;
		v4 = gid_is_v4(&gid);
		memset(&aa, 0, sizeof(aa));
		aa.is_global = 1;
		aa.grh.dgid = gid;
		aa.grh.sgid_index = (uint8_t)i;
		aa.grh.hop_limit = 64;
		aa.sl = 5;              /* RoCE carries no SL: not what comes */
		aa.port_num = 1;
		ah = ibv_create_ah(pd, &aa);
		assert_non_null(ah);
		memset(buf + 4096, 0xee, 4096);
		memcpy(buf, "datagram", 8);
		post_recv(b.qp, 100 + (uint64_t)i, 4096, 4096);
		post_send(a.qp, 200 + (uint64_t)i, 0, 8, 0, ah, b.qp->qp_num);
		expect_wc(a.scq, 200 + (uint64_t)i, NULL);
		expect_wc(b.rcq, 100 + (uint64_t)i, &wc);
		assert_int_equal(wc.byte_len, GRH + 8);
		assert_true(wc.wc_flags & IBV_WC_GRH);
		assert_int_equal(wc.src_qp, a.qp->qp_num);
		if (v4) {
			/* RoCEv2 over IPv4: an IPv4 header at byte 20 */
			assert_int_equal(wc.sl, 0xa);
			assert_int_equal(g[20], 0x45);
			assert_memory_equal(g + 32, gid.raw + 12, 4);
			assert_memory_equal(g + 36, gid.raw + 12, 4);
		} else {
			/* RoCEv2 over IPv6: the whole 40 bytes */
			assert_int_equal(wc.sl, 0x9);
			assert_int_equal(g[0] >> 4, 6);
			assert_memory_equal(g + 8, gid.raw, 16);
			assert_memory_equal(g + 24, gid.raw, 16);
		}
		assert_memory_equal(g + GRH, "datagram", 8);
		assert_true(ucx_takes(&wc, g, &gid));
		/* an address handle back to the sender, from the completion */
		{
			struct ibv_ah_attr back;

			assert_int_equal(ibv_init_ah_from_wc(ctx, 1, &wc,
					 (struct ibv_grh *)(void *)(buf + 4096),
					 &back), 0);
			assert_true(back.is_global);
			assert_memory_equal(&back.grh.dgid, &gid, 16);
		}
		assert_int_equal(ibv_destroy_ah(ah), 0);
		tried++;
	}
	assert_true(tried > 0);
	vu_ep_destroy(&a);
	vu_ep_destroy(&b);
}

/* An RC pair whose receiver completes into a CQ with a channel. */
struct armed {
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq;
	struct vu_ep a, b;
};

static void armed_up(struct armed *p)
{
	struct vu_qp_caps ca = { .send_wr = 16, .recv_wr = 16 };
	struct vu_qp_caps cb = ca;
	struct vu_conn c = vu_conn_default();

	p->ch = ibv_create_comp_channel(ctx);
	assert_non_null(p->ch);
	p->rcq = ibv_create_cq(ctx, 64, NULL, p->ch, 0);
	assert_non_null(p->rcq);
	cb.rcq = p->rcq;
	assert_int_equal(vu_ep_create(&p->a, ctx, pd, IBV_QPT_RC, &ca), 0);
	assert_int_equal(vu_ep_create(&p->b, ctx, pd, IBV_QPT_RC, &cb), 0);
	assert_int_equal(vu_connect_pair(p->a.qp, p->b.qp, &c), 0);
	for (int i = 0; i < 8; i++)
		post_recv(p->b.qp, 700 + (uint64_t)i, 8192 + 256 * (size_t)i,
			  256);
}

static void armed_down(struct armed *p)
{
	vu_ep_destroy(&p->a);
	vu_ep_destroy(&p->b);
	assert_int_equal(ibv_destroy_cq(p->rcq), 0);
	assert_int_equal(ibv_destroy_comp_channel(p->ch), 0);
}

/* A message from a to b (its receive completes into the armed CQ); the
 * send's completion is polled, the receive's is left in the CQ. */
static void send_one(struct armed *p, uint64_t id, unsigned int flags)
{
	post_send(p->a.qp, id, 0, 64, flags, NULL, 0);
	expect_wc(p->a.scq, id, NULL);
}

static void expect_event(struct armed *p, const char *what)
{
	struct ibv_cq *got;

	if (vu_cq_event(p->ch, &got, VU_WAIT_MS) != 0)
		fail_msg("no completion event: %s", what);
	assert_ptr_equal(got, p->rcq);
}

/* The event for the next completion; an arm with completions not polled
 * fires at once for those no event announced (UCX polls, finds nothing,
 * arms and sleeps: one landed meanwhile), not again for one that was
 * (perftest -e re-arms before it polls the CQ that woke it). */
static void test_arm_with_unpolled_completion(void **state)
{
	struct armed p;
	struct ibv_wc wc;

	(void)state;
	armed_up(&p);
	/* an empty CQ armed: no event */
	assert_int_equal(ibv_req_notify_cq(p.rcq, 0), 0);
	assert_false(vu_fd_readable(p.ch->fd, 100));
	/* the next completion rings; it stays in the CQ */
	send_one(&p, 1, 0);
	expect_event(&p, "armed before the completion");
	/* armed again, that completion still unpolled: it was announced */
	assert_int_equal(ibv_req_notify_cq(p.rcq, 0), 0);
	assert_false(vu_fd_readable(p.ch->fd, 100));
	/* the arm waits for the next one */
	send_one(&p, 2, 0);
	expect_event(&p, "the next completion, the one before unpolled");
	assert_false(vu_fd_readable(p.ch->fd, 100));
	expect_wc(p.rcq, 700, &wc);
	expect_wc(p.rcq, 701, &wc);
	/* polled empty, armed: nothing until the next one */
	assert_int_equal(ibv_req_notify_cq(p.rcq, 0), 0);
	assert_false(vu_fd_readable(p.ch->fd, 100));
	send_one(&p, 3, 0);
	expect_event(&p, "the next completion");
	expect_wc(p.rcq, 702, &wc);
	/* two that came while the CQ was not armed, one arm: one event, at
	 * once */
	send_one(&p, 4, 0);
	send_one(&p, 5, 0);
	assert_false(vu_fd_readable(p.ch->fd, 100));
	assert_int_equal(ibv_req_notify_cq(p.rcq, 0), 0);
	expect_event(&p, "two completions no event announced");
	assert_false(vu_fd_readable(p.ch->fd, 100));
	expect_wc(p.rcq, 703, &wc);
	expect_wc(p.rcq, 704, &wc);
	armed_down(&p);
}

/* A solicited arm fires at once only for an unpolled solicited (or error)
 * completion that no event announced. */
static void test_arm_solicited_with_unpolled(void **state)
{
	struct armed p;
	struct ibv_wc wc;

	(void)state;
	armed_up(&p);
	/* an unsolicited message in the CQ: a solicited arm waits */
	assert_int_equal(ibv_req_notify_cq(p.rcq, 0), 0);
	send_one(&p, 1, 0);
	expect_event(&p, "the unsolicited completion, armed for any");
	assert_int_equal(ibv_req_notify_cq(p.rcq, 1), 0);
	assert_false(vu_fd_readable(p.ch->fd, 100));
	/* ... until a solicited one comes */
	send_one(&p, 2, IBV_SEND_SOLICITED);
	expect_event(&p, "a solicited completion");
	/* armed solicited again with it unpolled: it was announced */
	assert_int_equal(ibv_req_notify_cq(p.rcq, 1), 0);
	assert_false(vu_fd_readable(p.ch->fd, 100));
	expect_wc(p.rcq, 700, &wc);
	expect_wc(p.rcq, 701, &wc);
	/* empty: a solicited arm waits */
	assert_int_equal(ibv_req_notify_cq(p.rcq, 1), 0);
	assert_false(vu_fd_readable(p.ch->fd, 100));
	send_one(&p, 3, IBV_SEND_SOLICITED);
	expect_event(&p, "the next solicited completion");
	/* one that came while the CQ was not armed fires the arm at once */
	send_one(&p, 4, IBV_SEND_SOLICITED);
	assert_false(vu_fd_readable(p.ch->fd, 100));
	assert_int_equal(ibv_req_notify_cq(p.rcq, 1), 0);
	expect_event(&p, "a solicited completion no event announced");
	/* an unsolicited one never fires a solicited arm */
	send_one(&p, 5, 0);
	assert_int_equal(ibv_req_notify_cq(p.rcq, 1), 0);
	assert_false(vu_fd_readable(p.ch->fd, 100));
	expect_wc(p.rcq, 702, &wc);
	expect_wc(p.rcq, 703, &wc);
	expect_wc(p.rcq, 704, &wc);
	armed_down(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ud_network_header_type),
		cmocka_unit_test(test_arm_with_unpolled_completion),
		cmocka_unit_test(test_arm_solicited_with_unpolled),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
