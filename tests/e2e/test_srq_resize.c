// SPDX-License-Identifier: MIT
/*
 * Resizing an SRQ (ibv_modify_srq with IBV_SRQ_MAX_WR, as Linux rxe): the
 * device claims IBV_DEVICE_SRQ_RESIZE; a resize keeps the receives posted
 * and not yet taken, in order; ibv_query_srq and the post path see the new
 * size; a size below the receives posted, 0, above max_srq_wr, or below an
 * armed srq_limit is EINVAL and changes nothing; a tag-matching SRQ is not
 * resized (EOPNOTSUPP); an XRC SRQ is. Traffic: one RC pair on one
 * context, the receiver's QP on the SRQ; also resizes while the device
 * consumes receives.
 *
 * Waits are bounded (vu_poll), never used as synchronisation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define SLOTS 512u                 /* messages each buffer holds */
#define BIG   (256u * 1024u)       /* copied without the device lock */

struct rig {
	struct ibv_context *ctx;
	struct ibv_device_attr_ex attr;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_srq *srq;
	struct ibv_qp *a, *b;      /* a sends; b receives through srq */
	struct ibv_mr *mr;
	uint8_t *sbuf, *rbuf;      /* slots messages each */
	size_t msg;
	unsigned int slots;
};

/* An SRQ of max_wr; messages of msg bytes, slots of them in flight. */
static void rig_up_n(struct rig *r, uint32_t max_wr, size_t msg,
		     unsigned int slots)
{
	struct ibv_srq_init_attr sa;
	struct ibv_qp_init_attr qa;
	struct vu_conn c = vu_conn_default();
	size_t bytes = 2 * (size_t)slots * msg;

	memset(r, 0, sizeof(*r));
	r->msg = msg;
	r->slots = slots;
	r->ctx = vu_open();
	assert_non_null(r->ctx);
	assert_int_equal(ibv_query_device_ex(r->ctx, NULL, &r->attr), 0);
	r->pd = ibv_alloc_pd(r->ctx);
	assert_non_null(r->pd);
	r->scq = ibv_create_cq(r->ctx, 1024, NULL, NULL, 0);
	r->rcq = ibv_create_cq(r->ctx, 1024, NULL, NULL, 0);
	assert_non_null(r->scq);
	assert_non_null(r->rcq);
	r->sbuf = aligned_alloc(4096, bytes);
	assert_non_null(r->sbuf);
	memset(r->sbuf, 0, bytes);
	r->rbuf = r->sbuf + (size_t)slots * msg;
	r->mr = ibv_reg_mr(r->pd, r->sbuf, bytes, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(r->mr);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = max_wr;
	sa.attr.max_sge = 1;
	r->srq = ibv_create_srq(r->pd, &sa);
	assert_non_null(r->srq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = r->scq;
	qa.recv_cq = r->rcq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = SLOTS;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_recv_sge = 1;
	r->a = ibv_create_qp(r->pd, &qa);
	assert_non_null(r->a);
	qa.srq = r->srq;
	qa.cap.max_recv_wr = 0;
	qa.cap.max_recv_sge = 0;
	r->b = ibv_create_qp(r->pd, &qa);
	assert_non_null(r->b);
	assert_int_equal(vu_connect_pair(r->a, r->b, &c), 0);
}

static void rig_up(struct rig *r, uint32_t max_wr)
{
	rig_up_n(r, max_wr, 64, SLOTS);
}

static void rig_down(struct rig *r)
{
	assert_int_equal(ibv_destroy_qp(r->a), 0);
	assert_int_equal(ibv_destroy_qp(r->b), 0);
	assert_int_equal(ibv_destroy_srq(r->srq), 0);
	assert_int_equal(ibv_dereg_mr(r->mr), 0);
	free(r->sbuf);
	assert_int_equal(ibv_destroy_cq(r->scq), 0);
	assert_int_equal(ibv_destroy_cq(r->rcq), 0);
	assert_int_equal(ibv_dealloc_pd(r->pd), 0);
	assert_int_equal(ibv_close_device(r->ctx), 0);
}

/* A receive of wr_id id into receive slot id % slots: 0 or the errno. */
static int post_recv(struct rig *r, uint64_t id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(r->rbuf + (id % r->slots) * r->msg),
		.length = (uint32_t)r->msg,
		.lkey = r->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;

	return ibv_post_srq_recv(r->srq, &wr, &bad);
}

/* n signaled sends, of the messages of tags tag0.. */
static void send_n(struct rig *r, unsigned int tag0, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		unsigned int tag = tag0 + i;
		uint8_t *p = r->sbuf + (size_t)(tag % r->slots) * r->msg;
		struct ibv_sge sge = {
			.addr = (uintptr_t)p, .length = (uint32_t)r->msg,
			.lkey = r->mr->lkey,
		};
		struct ibv_send_wr wr = {
			.wr_id = tag, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		};
		struct ibv_send_wr *bad = NULL;

		vu_fill(p, tag, r->msg);
		assert_int_equal(ibv_post_send(r->a, &wr, &bad), 0);
	}
}

/* n receive completions, successful, of wr_ids ids[0..n) in that order,
 * each holding the message of tag tags[i]; and n send completions. */
static void expect_recvs(struct rig *r, const uint64_t *ids,
			 const unsigned int *tags, unsigned int n)
{
	struct ibv_wc wc[64];
	unsigned int got = 0, sent = 0;

	while (got < n) {
		int k = vu_poll(r->rcq, wc, 1, VU_WAIT_MS);

		assert_int_equal(k, 1);
		if (wc[0].status != IBV_WC_SUCCESS || wc[0].wr_id != ids[got])
			fail_msg("receive %u: wr_id %llu status %s, expected "
				 "wr_id %llu", got,
				 (unsigned long long)wc[0].wr_id,
				 ibv_wc_status_str(wc[0].status),
				 (unsigned long long)ids[got]);
		assert_int_equal(wc[0].byte_len, r->msg);
		vu_expect(r->rbuf + (ids[got] % r->slots) * r->msg, tags[got],
			  r->msg, "SRQ receive");
		got++;
	}
	while (sent < n) {
		int k = vu_poll(r->scq, wc, 1, VU_WAIT_MS);

		assert_int_equal(k, 1);
		assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
		sent++;
	}
}

static uint32_t srq_max_wr(struct ibv_srq *srq, uint32_t *limit)
{
	struct ibv_srq_attr a;

	memset(&a, 0, sizeof(a));
	assert_int_equal(ibv_query_srq(srq, &a), 0);
	assert_int_equal(a.max_sge, 1);
	if (limit)
		*limit = a.srq_limit;
	return a.max_wr;
}

static int resize(struct ibv_srq *srq, uint32_t max_wr)
{
	struct ibv_srq_attr a = { .max_wr = max_wr };

	return ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR);
}

/* Up with receives posted: the old ones are taken first, then the ones
 * posted after; the refusals change nothing. */
static void test_grow_keeps_order(void **state)
{
	uint64_t ids[SLOTS];
	unsigned int tags[SLOTS], n = 0, i;
	struct rig r;

	(void)state;
	rig_up(&r, 8);
	assert_true(r.attr.orig_attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
	assert_int_equal(srq_max_wr(r.srq, NULL), 8);
	for (i = 0; i < 6; i++)
		assert_int_equal(post_recv(&r, 100 + i), 0);
	/* refused: below the 6 posted, 0, over the device's maximum */
	assert_int_equal(resize(r.srq, 5), EINVAL);
	assert_int_equal(resize(r.srq, 0), EINVAL);
	assert_int_equal(resize(r.srq,
				(uint32_t)r.attr.orig_attr.max_srq_wr + 1),
			 EINVAL);
	assert_int_equal(resize(r.srq, UINT32_MAX), EINVAL);
	assert_int_equal(srq_max_wr(r.srq, NULL), 8);
	/* the ring is still the old one: 2 more fit, not 3 */
	assert_int_equal(post_recv(&r, 106), 0);
	assert_int_equal(post_recv(&r, 107), 0);
	assert_int_equal(post_recv(&r, 108), ENOMEM);
	/* exactly the posted count: allowed (8 -> 8) */
	assert_int_equal(resize(r.srq, 8), 0);
	assert_int_equal(post_recv(&r, 108), ENOMEM);
	/* up: 8 old ones kept, 56 more fit, not 57 */
	assert_int_equal(resize(r.srq, 64), 0);
	assert_int_equal(srq_max_wr(r.srq, NULL), 64);
	for (i = 0; i < 8; i++) {
		ids[n] = 100 + i;
		tags[n] = n;
		n++;
	}
	for (i = 0; i < 56; i++) {
		assert_int_equal(post_recv(&r, 200 + i), 0);
		ids[n] = 200 + i;
		tags[n] = n;
		n++;
	}
	assert_int_equal(post_recv(&r, 300), ENOMEM);
	/* a device maximum is a size too */
	send_n(&r, 0, n);
	expect_recvs(&r, ids, tags, n);
	assert_int_equal(resize(r.srq, (uint32_t)r.attr.orig_attr.max_srq_wr),
			 0);
	assert_true(srq_max_wr(r.srq, NULL) >=
		    (uint32_t)r.attr.orig_attr.max_srq_wr);
	rig_down(&r);
}

/* Down to what is posted, with the ring wrapped; and an armed limit. */
static void test_shrink_and_limit(void **state)
{
	uint64_t ids[64];
	unsigned int tags[64], n = 0, i;
	struct ibv_srq_attr a;
	uint32_t limit;
	struct rig r;

	(void)state;
	rig_up(&r, 16);
	/* wrap the ring: 13 taken, then 3 left posted at numbers 13..15,
	 * 5 more at 16..20 (slots 0..4) */
	for (i = 0; i < 16; i++)
		assert_int_equal(post_recv(&r, 400 + i), 0);
	for (i = 0; i < 13; i++) {
		ids[i] = 400 + i;
		tags[i] = 1000 + i;
	}
	send_n(&r, 1000, 13);
	expect_recvs(&r, ids, tags, 13);
	for (i = 0; i < 5; i++)
		assert_int_equal(post_recv(&r, 416 + i), 0);
	/* 8 posted: 7 is too small, 8 is not */
	assert_int_equal(resize(r.srq, 7), EINVAL);
	assert_int_equal(resize(r.srq, 8), 0);
	assert_int_equal(srq_max_wr(r.srq, NULL), 8);
	assert_int_equal(post_recv(&r, 500), ENOMEM);
	for (i = 0; i < 8; i++) {
		ids[n] = 413 + i;
		tags[n] = 2000 + n;
		n++;
	}
	send_n(&r, 2000, 8);
	expect_recvs(&r, ids, tags, 8);
	/* empty: a size of 1 (rounded to the device's) */
	assert_int_equal(resize(r.srq, 1), 0);
	assert_true(srq_max_wr(r.srq, NULL) >= 1);
	assert_int_equal(resize(r.srq, 32), 0);
	/* an armed limit: the size may not go below it */
	memset(&a, 0, sizeof(a));
	a.srq_limit = 10;
	assert_int_equal(ibv_modify_srq(r.srq, &a, IBV_SRQ_LIMIT), 0);
	assert_int_equal(resize(r.srq, 9), EINVAL);
	assert_int_equal(resize(r.srq, 10), 0);
	assert_int_equal(srq_max_wr(r.srq, &limit), 16);
	assert_int_equal(limit, 10);
	/* both at once: checked together, the limit against the new size */
	memset(&a, 0, sizeof(a));
	a.max_wr = 4;
	a.srq_limit = 5;
	assert_int_equal(ibv_modify_srq(r.srq, &a,
					IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT),
			 EINVAL);
	a.srq_limit = 3;
	assert_int_equal(ibv_modify_srq(r.srq, &a,
					IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), 0);
	assert_int_equal(srq_max_wr(r.srq, &limit), 4);
	assert_int_equal(limit, 3);
	/* traffic after all that: 4 receives, in order */
	n = 0;
	for (i = 0; i < 4; i++) {
		assert_int_equal(post_recv(&r, 600 + i), 0);
		ids[n] = 600 + i;
		tags[n] = 3000 + n;
		n++;
	}
	send_n(&r, 3000, 4);
	expect_recvs(&r, ids, tags, 4);
	rig_down(&r);
}

/* Resizes while the device takes receives: every message lands, in the
 * order the receives were posted. */
static void test_resize_under_traffic(void **state)
{
	static const uint32_t sizes[] = { 512, 256, 300, 512, 400 };
	uint64_t ids[SLOTS];
	unsigned int tags[SLOTS], i, n = 0, round;
	struct rig r;

	(void)state;
	rig_up(&r, 256);
	for (round = 0; round < 4; round++) {
		unsigned int base = round * 100000u;

		n = 0;
		for (i = 0; i < 200; i++) {
			assert_int_equal(post_recv(&r, base + i), 0);
			ids[n] = base + i;
			tags[n] = n;
			n++;
		}
		send_n(&r, 0, 200);
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			assert_int_equal(resize(r.srq, sizes[i]), 0);
		for (i = 0; i < 56; i++) {
			assert_int_equal(post_recv(&r, base + 200 + i), 0);
			ids[n] = base + 200 + i;
			tags[n] = n;
			n++;
		}
		send_n(&r, 200, 56);
		expect_recvs(&r, ids, tags, n);
	}
	rig_down(&r);
}

/* Resizes while large messages are copied into the head receive without
 * the device lock (that receive taken from the new ring when it ends). */
static void test_resize_during_big_copy(void **state)
{
	uint64_t ids[16];
	unsigned int tags[16], i, k;
	struct rig r;

	(void)state;
	rig_up_n(&r, 16, BIG, 16);
	for (k = 0; k < 3; k++) {
		for (i = 0; i < 16; i++) {
			assert_int_equal(post_recv(&r, 50 * k + i), 0);
			ids[i] = 50 * k + i;
			tags[i] = 100 * k + i;
		}
		send_n(&r, 100 * k, 16);
		for (i = 0; i < 200; i++)
			assert_int_equal(resize(r.srq, i & 1 ? 16 : 64), 0);
		expect_recvs(&r, ids, tags, 16);
	}
	rig_down(&r);
}

/* An XRC SRQ resizes; a tag-matching one is refused. */
static void test_srq_types(void **state)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};
	struct ibv_srq_init_attr_ex sa;
	struct ibv_xrcd *xrcd;
	struct ibv_srq *srq;
	struct rig r;

	(void)state;
	rig_up(&r, 4);
	xrcd = ibv_open_xrcd(r.ctx, &xa);
	assert_non_null(xrcd);
	memset(&sa, 0, sizeof(sa));
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	sa.srq_type = IBV_SRQT_XRC;
	sa.pd = r.pd;
	sa.xrcd = xrcd;
	sa.cq = r.rcq;
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq_ex(r.ctx, &sa);
	assert_non_null(srq);
	assert_int_equal(resize(srq, 100), 0);
	assert_int_equal(srq_max_wr(srq, NULL), 128);
	assert_int_equal(ibv_destroy_srq(srq), 0);
	assert_int_equal(ibv_close_xrcd(xrcd), 0);

	memset(&sa, 0, sizeof(sa));
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = r.pd;
	sa.cq = r.rcq;
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	sa.tm_cap.max_num_tags = 4;
	sa.tm_cap.max_ops = 4;
	srq = ibv_create_srq_ex(r.ctx, &sa);
	if (srq) {
		assert_int_equal(resize(srq, 100), EOPNOTSUPP);
		assert_int_equal(srq_max_wr(srq, NULL), 4);
		assert_int_equal(ibv_destroy_srq(srq), 0);
	}
	rig_down(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow_keeps_order),
		cmocka_unit_test(test_shrink_and_limit),
		cmocka_unit_test(test_resize_under_traffic),
		cmocka_unit_test(test_resize_during_big_copy),
		cmocka_unit_test(test_srq_types),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
