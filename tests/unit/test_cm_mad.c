// SPDX-License-Identifier: MIT
/*
 * Unit tests of the CM MAD codec (src/device/cm/mad.c): random encode ->
 * decode round trips of every attribute; known-answer MADs whose bytes are
 * laid out here by hand from the IBTA's tables (Vol. 1 12.6, 12.8, 12.11,
 * 13.4.8.1), not from the codec's field tables; every decode and encode
 * error; the field tables' own shape; the RDMA CM header and service IDs;
 * the datagram to QP1.
 *
 *   test_cm_mad                 the tests
 *   test_cm_mad --pcap FILE     write a pcap of one RoCEv2 datagram per CM
 *                               attribute (tests/unit/cm_mad_tshark.sh)
 *   test_cm_mad --seeds DIR     write the fuzzer's seed MADs (tests/fuzz)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "device/cm/mad.h"

/* ================= helpers ================= */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t rbits(unsigned int n)
{
	return n >= 64 ? rnd() : rnd() & ((1ull << n) - 1);
}

static void rbytes(uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
}

static void v4_gid(uint8_t gid[16], uint8_t a, uint8_t b, uint8_t c,
		   uint8_t d)
{
	memset(gid, 0, 10);
	gid[10] = gid[11] = 0xff;
	gid[12] = a;
	gid[13] = b;
	gid[14] = c;
	gid[15] = d;
}

/* Decode from a heap buffer of exactly len bytes, so that ASan sees a
 * read past it. */
static int decode_exact(const uint8_t *b, size_t len, unsigned int flags,
			struct sv_cm_mad *m)
{
	uint8_t *d = malloc(len ? len : 1);
	int ret;

	assert_non_null(d);
	memcpy(d, b, len);
	ret = sv_cm_decode(d, len, flags, m);
	free(d);
	return ret;
}

/* ================= random messages ================= */

static void rand_path(struct sv_cm_path *p)
{
	p->local_lid = (uint16_t)rnd();
	p->remote_lid = (uint16_t)rnd();
	rbytes(p->local_gid, 16);
	rbytes(p->remote_gid, 16);
	p->flow_label = (uint32_t)rbits(20);
	p->packet_rate = (uint8_t)rbits(6);
	p->traffic_class = (uint8_t)rnd();
	p->hop_limit = (uint8_t)rnd();
	p->sl = (uint8_t)rbits(4);
	p->subnet_local = rnd() & 1;
	p->local_ack_timeout = (uint8_t)rbits(5);
}

static void rand_req(struct sv_cm_mad *m)
{
	struct sv_cm_req *r = &m->req;

	r->local_comm_id = (uint32_t)rnd();
	r->vendor_id = (uint32_t)rbits(24);
	r->service_id = rnd();
	r->local_ca_guid = rnd();
	r->local_qkey = (uint32_t)rnd();
	r->local_qpn = (uint32_t)rbits(24);
	r->responder_resources = (uint8_t)rnd();
	r->local_eecn = (uint32_t)rbits(24);
	r->initiator_depth = (uint8_t)rnd();
	r->remote_eecn = (uint32_t)rbits(24);
	r->remote_cm_response_timeout = (uint8_t)rbits(5);
	r->transport_service_type = (uint8_t)rbits(2);
	r->end_to_end_flow_control = rnd() & 1;
	r->starting_psn = (uint32_t)rbits(24);
	r->local_cm_response_timeout = (uint8_t)rbits(5);
	r->retry_count = (uint8_t)rbits(3);
	r->pkey = (uint16_t)rnd();
	r->path_mtu = (uint8_t)rbits(4);
	r->rdc_exists = rnd() & 1;
	r->rnr_retry_count = (uint8_t)rbits(3);
	r->max_cm_retries = (uint8_t)rbits(4);
	r->srq = rnd() & 1;
	r->extended_transport_type = (uint8_t)rbits(3);
	rand_path(&r->primary);
	rand_path(&r->alternate);
	r->sap_supported = rnd() & 1;
	rbytes(r->private_data, sizeof(r->private_data));
}

static void rand_mra(struct sv_cm_mad *m)
{
	m->mra.local_comm_id = (uint32_t)rnd();
	m->mra.remote_comm_id = (uint32_t)rnd();
	m->mra.message_mraed = (uint8_t)rbits(2);
	m->mra.service_timeout = (uint8_t)rbits(5);
	rbytes(m->mra.private_data, sizeof(m->mra.private_data));
}

static void rand_rej(struct sv_cm_mad *m)
{
	m->rej.local_comm_id = (uint32_t)rnd();
	m->rej.remote_comm_id = (uint32_t)rnd();
	m->rej.message_rejected = (uint8_t)rbits(2);
	m->rej.reject_info_length = (uint8_t)(rnd() % (SV_CM_REJ_ARI + 1));
	m->rej.reason = (uint16_t)rnd();
	rbytes(m->rej.ari, sizeof(m->rej.ari));
	rbytes(m->rej.private_data, sizeof(m->rej.private_data));
}

static void rand_rep(struct sv_cm_mad *m)
{
	struct sv_cm_rep *r = &m->rep;

	r->local_comm_id = (uint32_t)rnd();
	r->remote_comm_id = (uint32_t)rnd();
	r->local_qkey = (uint32_t)rnd();
	r->local_qpn = (uint32_t)rbits(24);
	r->vendor_id = (uint32_t)rbits(24);
	r->local_eecn = (uint32_t)rbits(24);
	r->starting_psn = (uint32_t)rbits(24);
	r->responder_resources = (uint8_t)rnd();
	r->initiator_depth = (uint8_t)rnd();
	r->target_ack_delay = (uint8_t)rbits(5);
	r->failover_accepted = (uint8_t)rbits(2);
	r->end_to_end_flow_control = rnd() & 1;
	r->rnr_retry_count = (uint8_t)rbits(3);
	r->srq = rnd() & 1;
	r->local_ca_guid = rnd();
	rbytes(r->private_data, sizeof(r->private_data));
}

static void rand_rtu(struct sv_cm_mad *m)
{
	m->rtu.local_comm_id = (uint32_t)rnd();
	m->rtu.remote_comm_id = (uint32_t)rnd();
	rbytes(m->rtu.private_data, sizeof(m->rtu.private_data));
}

static void rand_dreq(struct sv_cm_mad *m)
{
	m->dreq.local_comm_id = (uint32_t)rnd();
	m->dreq.remote_comm_id = (uint32_t)rnd();
	m->dreq.remote_qpn_eecn = (uint32_t)rbits(24);
	rbytes(m->dreq.private_data, sizeof(m->dreq.private_data));
}

static void rand_drep(struct sv_cm_mad *m)
{
	m->drep.local_comm_id = (uint32_t)rnd();
	m->drep.remote_comm_id = (uint32_t)rnd();
	rbytes(m->drep.private_data, sizeof(m->drep.private_data));
}

static void rand_sidr_req(struct sv_cm_mad *m)
{
	m->sidr_req.request_id = (uint32_t)rnd();
	m->sidr_req.pkey = (uint16_t)rnd();
	m->sidr_req.service_id = rnd();
	rbytes(m->sidr_req.private_data, sizeof(m->sidr_req.private_data));
}

static void rand_sidr_rep(struct sv_cm_mad *m)
{
	struct sv_cm_sidr_rep *r = &m->sidr_rep;

	r->request_id = (uint32_t)rnd();
	r->status = (uint8_t)rnd();
	r->additional_info_length =
		(uint8_t)(rnd() % (SV_CM_SIDR_REP_INFO + 1));
	r->vendor_id = (uint32_t)rbits(24);
	r->qpn = (uint32_t)rbits(24);
	r->service_id = rnd();
	r->qkey = (uint32_t)rnd();
	rbytes(r->additional_info, sizeof(r->additional_info));
	rbytes(r->private_data, sizeof(r->private_data));
}

static void rand_lap(struct sv_cm_mad *m)
{
	m->lap.local_comm_id = (uint32_t)rnd();
	m->lap.remote_comm_id = (uint32_t)rnd();
	m->lap.remote_qpn_eecn = (uint32_t)rbits(24);
	m->lap.remote_cm_response_timeout = (uint8_t)rbits(5);
	rand_path(&m->lap.alternate);
	rbytes(m->lap.private_data, sizeof(m->lap.private_data));
}

static void rand_apr(struct sv_cm_mad *m)
{
	m->apr.local_comm_id = (uint32_t)rnd();
	m->apr.remote_comm_id = (uint32_t)rnd();
	m->apr.additional_info_length = (uint8_t)(rnd() % (SV_CM_APR_INFO + 1));
	m->apr.ap_status = (uint8_t)rnd();
	rbytes(m->apr.additional_info, sizeof(m->apr.additional_info));
	rbytes(m->apr.private_data, sizeof(m->apr.private_data));
}

static void rand_cpi(struct sv_cm_mad *m)
{
	struct sv_cm_cpi *c = &m->cpi;

	c->base_version = (uint8_t)rnd();
	c->class_version = (uint8_t)rnd();
	c->capability_mask = (uint16_t)rnd();
	c->capability_mask2 = (uint32_t)rbits(27);
	c->resp_time_value = (uint8_t)rbits(5);
	rbytes(c->redirect_gid, 16);
	c->redirect_tc = (uint8_t)rnd();
	c->redirect_sl = (uint8_t)rbits(4);
	c->redirect_fl = (uint32_t)rbits(20);
	c->redirect_lid = (uint16_t)rnd();
	c->redirect_pkey = (uint16_t)rnd();
	c->redirect_qp = (uint32_t)rbits(24);
	c->redirect_qkey = (uint32_t)rnd();
	rbytes(c->trap_gid, 16);
	c->trap_tc = (uint8_t)rnd();
	c->trap_sl = (uint8_t)rbits(4);
	c->trap_fl = (uint32_t)rbits(20);
	c->trap_lid = (uint16_t)rnd();
	c->trap_pkey = (uint16_t)rnd();
	c->trap_hop_limit = (uint8_t)rnd();
	c->trap_qp = (uint32_t)rbits(24);
	c->trap_qkey = (uint32_t)rnd();
}

static const struct {
	uint16_t attr;
	void (*fill)(struct sv_cm_mad *m);
} kinds[] = {
	{ SV_CM_ATTR_CLASS_PORT_INFO, rand_cpi },
	{ SV_CM_ATTR_REQ, rand_req },
	{ SV_CM_ATTR_MRA, rand_mra },
	{ SV_CM_ATTR_REJ, rand_rej },
	{ SV_CM_ATTR_REP, rand_rep },
	{ SV_CM_ATTR_RTU, rand_rtu },
	{ SV_CM_ATTR_DREQ, rand_dreq },
	{ SV_CM_ATTR_DREP, rand_drep },
	{ SV_CM_ATTR_SIDR_REQ, rand_sidr_req },
	{ SV_CM_ATTR_SIDR_REP, rand_sidr_rep },
	{ SV_CM_ATTR_LAP, rand_lap },
	{ SV_CM_ATTR_APR, rand_apr },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static void rand_mad(struct sv_cm_mad *m, unsigned int kind)
{
	sv_cm_mad_init(m, kinds[kind].attr, rnd());
	if (kinds[kind].attr == SV_CM_ATTR_CLASS_PORT_INFO)
		m->method = SV_MAD_METHOD_GET_RESP;
	m->status = (uint16_t)rnd();
	m->class_specific = (uint16_t)rnd();
	m->attr_mod = (uint32_t)rnd();
	kinds[kind].fill(m);
}

/* ================= round trips ================= */

/* Every field of every attribute, random, 2000 times each: encode ->
 * decode (also strict) gives the struct back, and encode of that gives
 * the same bytes. */
static void test_roundtrip(void **state)
{
	(void)state;
	for (unsigned int k = 0; k < NKINDS; k++) {
		for (int i = 0; i < 2000; i++) {
			struct sv_cm_mad m, d, s;
			uint8_t b[SV_MAD_BYTES], b2[SV_MAD_BYTES];

			rand_mad(&m, k);
			assert_int_equal(sv_cm_encode(&m, b), 0);
			assert_int_equal(decode_exact(b, sizeof(b), 0, &d), 0);
			if (memcmp(&m, &d, sizeof(m)) != 0)
				fail_msg("%s: round trip differs (i %d)",
					 sv_cm_attr_name(m.attr_id), i);
			assert_int_equal(decode_exact(b, sizeof(b),
						      SV_CM_DECODE_STRICT, &s),
					 0);
			assert_memory_equal(&m, &s, sizeof(m));
			assert_int_equal(sv_cm_encode(&d, b2), 0);
			assert_memory_equal(b, b2, sizeof(b));
		}
	}
}

/* Every field reaches the wire: changing any one field of a REQ changes
 * the bytes (a field missing from the table would not). */
static void test_every_field_encoded(void **state)
{
	struct sv_cm_mad m, z;
	uint8_t b0[SV_MAD_BYTES], b1[SV_MAD_BYTES];

	(void)state;
	for (unsigned int k = 0; k < NKINDS; k++) {
		rand_mad(&z, k);
		memset(&m, 0, sizeof(m));
		m.method = z.method;
		m.attr_id = z.attr_id;
		assert_int_equal(sv_cm_encode(&m, b0), 0);
		assert_int_equal(sv_cm_encode(&z, b1), 0);
		/* the random message differs from the zero one */
		assert_memory_not_equal(b0, b1, sizeof(b0));
	}
	/* one field at a time: flow label, SL, subnet local, ack timeout of
	 * the alternate path, the last fields of a REQ */
	sv_cm_mad_init(&m, SV_CM_ATTR_REQ, 1);
	assert_int_equal(sv_cm_encode(&m, b0), 0);
	m.req.alternate.local_ack_timeout = 1;
	assert_int_equal(sv_cm_encode(&m, b1), 0);
	assert_int_equal(b1[24 + 139], 1 << 3);
	m.req.alternate.local_ack_timeout = 0;
	m.req.sap_supported = true;
	assert_int_equal(sv_cm_encode(&m, b1), 0);
	assert_int_equal(b1[24 + 139], 1 << 2);
}

/* ================= known answers ================= */

static void kat_hdr(uint8_t *k, uint16_t attr)
{
	memset(k, 0, SV_MAD_BYTES);
	k[0] = 1;                       /* base version */
	k[1] = 0x07;                    /* class CM */
	k[2] = 2;                       /* class version */
	k[3] = 0x03;                    /* Send */
	for (int i = 0; i < 8; i++)     /* TID 0x0102030405060708 */
		k[8 + i] = (uint8_t)(i + 1);
	k[16] = (uint8_t)(attr >> 8);
	k[17] = (uint8_t)attr;
}

static void kat_roundtrip(const uint8_t *k, struct sv_cm_mad *m)
{
	uint8_t b[SV_MAD_BYTES];

	assert_int_equal(decode_exact(k, SV_MAD_BYTES, SV_CM_DECODE_STRICT, m),
			 0);
	assert_int_equal(m->method, SV_MAD_METHOD_SEND);
	assert_true(m->tid == 0x0102030405060708ull);
	assert_int_equal(sv_cm_encode(m, b), 0);
	assert_memory_equal(b, k, SV_MAD_BYTES);
}

/* A REQ as Linux's rdma_cm sends it for an RC connection to 10.77.0.11
 * port 18515 (RDMA_PS_TCP), laid out by hand from Table 106. */
static void test_kat_req(void **state)
{
	uint8_t k[SV_MAD_BYTES], *d = k + 24;
	const uint8_t sid[8] = { 0, 0, 0, 0, 0x01, 0x06, 0x48, 0x53 };
	const uint8_t guid[8] = { 0x00, 0x02, 0xc9, 0x03, 0x00, 0xa1, 0xb2,
				  0xc3 };
	struct sv_cm_mad m;
	struct sv_cma_hdr h;
	uint8_t gid[16];

	(void)state;
	kat_hdr(k, 0x0010);
	d[0] = 0x11; d[1] = 0x22; d[2] = 0x33; d[3] = 0x44; /* local comm ID */
	d[5] = 0xab; d[6] = 0xcd; d[7] = 0xef;       /* vendor ID (ECE) */
	memcpy(d + 8, sid, 8);                        /* service ID */
	memcpy(d + 16, guid, 8);                      /* local CA GUID */
	d[32] = 0x00; d[33] = 0x0a; d[34] = 0xbc;     /* local QPN */
	d[35] = 0x10;                                 /* responder resources */
	d[39] = 0x08;                                 /* initiator depth */
	d[43] = 20 << 3 | 0 << 1 | 1;                 /* rcmrt 20, RC, e2e */
	d[44] = 0x12; d[45] = 0x34; d[46] = 0x56;     /* starting PSN */
	d[47] = 21 << 3 | 7;                          /* lcmrt 21, retry 7 */
	d[48] = 0xff; d[49] = 0xff;                   /* P_Key */
	d[50] = 3 << 4 | 0 << 3 | 6;                  /* MTU 1024, RNR 6 */
	d[51] = 15 << 4 | 1 << 3 | 0;                 /* max retries, SRQ */
	d[52] = 0xff; d[53] = 0xff;                   /* primary local LID */
	d[54] = 0xff; d[55] = 0xff;                   /* primary remote LID */
	v4_gid(d + 56, 10, 77, 0, 12);                /* primary local GID */
	v4_gid(d + 72, 10, 77, 0, 11);                /* primary remote GID */
	d[88] = 0x12; d[89] = 0x34; d[90] = 0x50;     /* flow label 0x12345 */
	d[91] = 0x03;                                 /* packet rate */
	d[92] = 0x60;                                 /* traffic class */
	d[93] = 0x40;                                 /* hop limit */
	d[94] = 5 << 4 | 1 << 3;                      /* SL 5, subnet local */
	d[95] = 18 << 3;                              /* local ACK timeout */
	/* private data: the RDMA CM header, IPv4, from port 50000 */
	d[140] = 0x00;
	d[141] = 0x40;
	d[142] = 0xc3; d[143] = 0x50;
	d[156] = 10; d[157] = 77; d[158] = 0; d[159] = 12;
	d[172] = 10; d[173] = 77; d[174] = 0; d[175] = 11;
	memcpy(d + 176, "hello", 5);

	kat_roundtrip(k, &m);
	assert_int_equal(m.attr_id, SV_CM_ATTR_REQ);
	assert_int_equal(m.req.local_comm_id, 0x11223344);
	assert_int_equal(m.req.vendor_id, 0xabcdef);
	assert_true(m.req.service_id == 0x0000000001064853ull);
	assert_true(m.req.service_id ==
		    sv_cm_service_id(SV_RDMA_PS_TCP, 18515));
	assert_true(m.req.local_ca_guid == 0x0002c90300a1b2c3ull);
	assert_int_equal(m.req.local_qkey, 0);
	assert_int_equal(m.req.local_qpn, 0xabc);
	assert_int_equal(m.req.responder_resources, 0x10);
	assert_int_equal(m.req.initiator_depth, 8);
	assert_int_equal(m.req.remote_cm_response_timeout, 20);
	assert_int_equal(m.req.transport_service_type, SV_CM_TRANSPORT_RC);
	assert_true(m.req.end_to_end_flow_control);
	assert_int_equal(m.req.starting_psn, 0x123456);
	assert_int_equal(m.req.local_cm_response_timeout, 21);
	assert_int_equal(m.req.retry_count, 7);
	assert_int_equal(m.req.pkey, 0xffff);
	assert_int_equal(m.req.path_mtu, SV_CM_MTU_1024);
	assert_false(m.req.rdc_exists);
	assert_int_equal(m.req.rnr_retry_count, 6);
	assert_int_equal(m.req.max_cm_retries, 15);
	assert_true(m.req.srq);
	assert_int_equal(m.req.extended_transport_type, 0);
	assert_int_equal(m.req.primary.local_lid, 0xffff);
	assert_int_equal(m.req.primary.remote_lid, 0xffff);
	v4_gid(gid, 10, 77, 0, 12);
	assert_memory_equal(m.req.primary.local_gid, gid, 16);
	v4_gid(gid, 10, 77, 0, 11);
	assert_memory_equal(m.req.primary.remote_gid, gid, 16);
	assert_int_equal(m.req.primary.flow_label, 0x12345);
	assert_int_equal(m.req.primary.packet_rate, 3);
	assert_int_equal(m.req.primary.traffic_class, 0x60);
	assert_int_equal(m.req.primary.hop_limit, 64);
	assert_int_equal(m.req.primary.sl, 5);
	assert_true(m.req.primary.subnet_local);
	assert_int_equal(m.req.primary.local_ack_timeout, 18);
	assert_int_equal(m.req.alternate.local_lid, 0);
	assert_false(m.req.sap_supported);

	assert_int_equal(sv_cma_hdr_parse(m.req.private_data,
					  sizeof(m.req.private_data), &h), 0);
	assert_int_equal(h.ip_version, 4);
	assert_int_equal(h.src_port, 50000);
	v4_gid(gid, 10, 77, 0, 12);
	assert_memory_equal(h.src, gid, 16);
	v4_gid(gid, 10, 77, 0, 11);
	assert_memory_equal(h.dst, gid, 16);
	assert_memory_equal(m.req.private_data + SV_CMA_HDR_BYTES, "hello", 5);
}

/* REP (Table 110), with the ECE vendor ID in bytes 15, 19 and 23. */
static void test_kat_rep(void **state)
{
	uint8_t k[SV_MAD_BYTES], *d = k + 24;
	struct sv_cm_mad m;

	(void)state;
	kat_hdr(k, 0x0013);
	d[0] = 0x55; d[1] = 0x66; d[2] = 0x77; d[3] = 0x88;
	d[4] = 0x11; d[5] = 0x22; d[6] = 0x33; d[7] = 0x44;
	d[8] = 0x01; d[9] = 0x23; d[10] = 0x45; d[11] = 0x67; /* Q_Key */
	d[12] = 0x00; d[13] = 0x0d; d[14] = 0xef;     /* local QPN */
	d[15] = 0x12;                                 /* vendor ID high */
	d[19] = 0x34;                                 /* vendor ID middle */
	d[20] = 0x65; d[21] = 0x43; d[22] = 0x21;     /* starting PSN */
	d[23] = 0x56;                                 /* vendor ID low */
	d[24] = 4;                                    /* responder res. */
	d[25] = 5;                                    /* initiator depth */
	d[26] = 15 << 3 | 2 << 1 | 1;                 /* ack delay, fo, e2e */
	d[27] = 7 << 5 | 1 << 4;                      /* RNR retry 7, SRQ */
	d[28] = 0xde; d[35] = 0xad;                   /* local CA GUID */
	d[36] = 0x99;                                 /* private data */
	d[231] = 0x77;

	kat_roundtrip(k, &m);
	assert_int_equal(m.rep.local_comm_id, 0x55667788);
	assert_int_equal(m.rep.remote_comm_id, 0x11223344);
	assert_int_equal(m.rep.local_qkey, 0x01234567);
	assert_int_equal(m.rep.local_qpn, 0xdef);
	assert_int_equal(m.rep.vendor_id, 0x123456);
	assert_int_equal(m.rep.local_eecn, 0);
	assert_int_equal(m.rep.starting_psn, 0x654321);
	assert_int_equal(m.rep.responder_resources, 4);
	assert_int_equal(m.rep.initiator_depth, 5);
	assert_int_equal(m.rep.target_ack_delay, 15);
	assert_int_equal(m.rep.failover_accepted, 2);
	assert_true(m.rep.end_to_end_flow_control);
	assert_int_equal(m.rep.rnr_retry_count, 7);
	assert_true(m.rep.srq);
	assert_true(m.rep.local_ca_guid == 0xde000000000000adull);
	assert_int_equal(m.rep.private_data[0], 0x99);
	assert_int_equal(m.rep.private_data[SV_CM_REP_PRIV - 1], 0x77);
}

/* REJ (Table 108), MRA (107), DREQ (112), RTU, DREP. */
static void test_kat_rej_mra_dreq(void **state)
{
	uint8_t k[SV_MAD_BYTES], *d = k + 24;
	struct sv_cm_mad m;

	(void)state;
	kat_hdr(k, 0x0012);
	d[3] = 0x01; d[7] = 0x02;
	d[8] = 1 << 6;                                /* REP rejected */
	d[9] = 72 << 1;                               /* ARI length 72 */
	d[10] = 0x00; d[11] = 28;                     /* consumer reject */
	d[12] = 0xa1; d[83] = 0xa2;                   /* ARI */
	d[84] = 0xb1; d[231] = 0xb2;                  /* private data */
	kat_roundtrip(k, &m);
	assert_int_equal(m.rej.local_comm_id, 1);
	assert_int_equal(m.rej.remote_comm_id, 2);
	assert_int_equal(m.rej.message_rejected, SV_CM_MSG_REP);
	assert_int_equal(m.rej.reject_info_length, 72);
	assert_int_equal(m.rej.reason, SV_CM_REJ_CONSUMER_DEFINED);
	assert_int_equal(m.rej.ari[0], 0xa1);
	assert_int_equal(m.rej.ari[71], 0xa2);
	assert_int_equal(m.rej.private_data[0], 0xb1);
	assert_int_equal(m.rej.private_data[147], 0xb2);

	kat_hdr(k, 0x0011);
	d[3] = 0x03; d[7] = 0x04;
	d[8] = 2 << 6;                                /* LAP MRAed */
	d[9] = 20 << 3;                               /* service timeout */
	d[10] = 0xc1; d[231] = 0xc2;
	kat_roundtrip(k, &m);
	assert_int_equal(m.mra.local_comm_id, 3);
	assert_int_equal(m.mra.remote_comm_id, 4);
	assert_int_equal(m.mra.message_mraed, SV_CM_MSG_OTHER);
	assert_int_equal(m.mra.service_timeout, 20);
	assert_int_equal(m.mra.private_data[0], 0xc1);
	assert_int_equal(m.mra.private_data[221], 0xc2);

	kat_hdr(k, 0x0015);
	d[3] = 5; d[7] = 6;
	d[8] = 0x12; d[9] = 0x34; d[10] = 0x56;       /* remote QPN */
	d[12] = 0xd1; d[231] = 0xd2;
	kat_roundtrip(k, &m);
	assert_int_equal(m.dreq.remote_qpn_eecn, 0x123456);
	assert_int_equal(m.dreq.private_data[0], 0xd1);
	assert_int_equal(m.dreq.private_data[219], 0xd2);

	kat_hdr(k, 0x0014);
	d[3] = 7; d[7] = 8; d[8] = 0xe1; d[231] = 0xe2;
	kat_roundtrip(k, &m);
	assert_int_equal(m.rtu.local_comm_id, 7);
	assert_int_equal(m.rtu.remote_comm_id, 8);
	assert_int_equal(m.rtu.private_data[0], 0xe1);
	assert_int_equal(m.rtu.private_data[223], 0xe2);

	kat_hdr(k, 0x0016);
	d[3] = 9; d[7] = 10; d[8] = 0xf1; d[231] = 0xf2;
	kat_roundtrip(k, &m);
	assert_int_equal(m.drep.remote_comm_id, 10);
	assert_int_equal(m.drep.private_data[0], 0xf1);
	assert_int_equal(m.drep.private_data[223], 0xf2);
}

/* SIDR_REQ (Table 119) and SIDR_REP (120, the vendor ID in 6-7 and 11). */
static void test_kat_sidr(void **state)
{
	uint8_t k[SV_MAD_BYTES], *d = k + 24;
	struct sv_cm_mad m;

	(void)state;
	kat_hdr(k, 0x0017);
	d[0] = 0xca; d[3] = 0xfe;                     /* request ID */
	d[4] = 0x80; d[5] = 0x01;                     /* P_Key */
	d[12] = 0x01; d[13] = 0x11; d[14] = 0x1f; d[15] = 0x90; /* UDP 8080 */
	d[16] = 0x00; d[17] = 0x40; d[231] = 0x5a;
	kat_roundtrip(k, &m);
	assert_int_equal(m.sidr_req.request_id, 0xca0000fe);
	assert_int_equal(m.sidr_req.pkey, 0x8001);
	assert_true(m.sidr_req.service_id ==
		    sv_cm_service_id(SV_RDMA_PS_UDP, 8080));
	assert_int_equal(m.sidr_req.private_data[1], 0x40);
	assert_int_equal(m.sidr_req.private_data[215], 0x5a);

	kat_hdr(k, 0x0018);
	d[3] = 0x42;
	d[4] = SV_CM_SIDR_UNSUPPORTED;
	d[5] = 10;                                    /* info length */
	d[6] = 0xab; d[7] = 0xcd; d[11] = 0xef;       /* vendor ID */
	d[8] = 0x00; d[9] = 0x01; d[10] = 0x23;       /* QPN */
	d[19] = 0x07;                                 /* service ID */
	d[20] = 0x01; d[21] = 0x23; d[22] = 0x45; d[23] = 0x67; /* Q_Key */
	d[24] = 0x31; d[95] = 0x32; d[96] = 0x33; d[231] = 0x34;
	kat_roundtrip(k, &m);
	assert_int_equal(m.sidr_rep.request_id, 0x42);
	assert_int_equal(m.sidr_rep.status, SV_CM_SIDR_UNSUPPORTED);
	assert_int_equal(m.sidr_rep.additional_info_length, 10);
	assert_int_equal(m.sidr_rep.vendor_id, 0xabcdef);
	assert_int_equal(m.sidr_rep.qpn, 0x123);
	assert_true(m.sidr_rep.service_id == 7);
	assert_int_equal(m.sidr_rep.qkey, SV_RDMA_UDP_QKEY);
	assert_int_equal(m.sidr_rep.additional_info[0], 0x31);
	assert_int_equal(m.sidr_rep.additional_info[71], 0x32);
	assert_int_equal(m.sidr_rep.private_data[0], 0x33);
	assert_int_equal(m.sidr_rep.private_data[135], 0x34);
}

/* LAP (Table 115: its path is laid out unlike a REQ's), APR (116),
 * ClassPortInfo (13.4.8.1) as a GetResp. */
static void test_kat_lap_apr_cpi(void **state)
{
	uint8_t k[SV_MAD_BYTES], *d = k + 24;
	struct sv_cm_mad m;
	uint8_t b[SV_MAD_BYTES];

	(void)state;
	kat_hdr(k, 0x0019);
	d[12] = 0x00; d[13] = 0x00; d[14] = 0x99;     /* remote QPN */
	d[15] = 31 << 3;                              /* rcmrt */
	d[20] = 0x12; d[21] = 0x34;                   /* alt local LID */
	d[22] = 0x56; d[23] = 0x78;                   /* alt remote LID */
	d[24] = 0xfe; d[39] = 0x01;                   /* alt local GID */
	d[40] = 0xfd; d[55] = 0x02;                   /* alt remote GID */
	d[56] = 0xff; d[57] = 0xff; d[58] = 0xf0;     /* flow label */
	d[59] = 0x2e;                                 /* traffic class */
	d[60] = 0x05;                                 /* hop limit */
	d[61] = 0x3f;                                 /* packet rate */
	d[62] = 15 << 4 | 1 << 3;                     /* SL, subnet local */
	d[63] = 31 << 3;                              /* ACK timeout */
	d[64] = 0x71; d[231] = 0x72;
	kat_roundtrip(k, &m);
	assert_int_equal(m.lap.remote_qpn_eecn, 0x99);
	assert_int_equal(m.lap.remote_cm_response_timeout, 31);
	assert_int_equal(m.lap.alternate.local_lid, 0x1234);
	assert_int_equal(m.lap.alternate.remote_lid, 0x5678);
	assert_int_equal(m.lap.alternate.local_gid[0], 0xfe);
	assert_int_equal(m.lap.alternate.local_gid[15], 0x01);
	assert_int_equal(m.lap.alternate.remote_gid[0], 0xfd);
	assert_int_equal(m.lap.alternate.remote_gid[15], 0x02);
	assert_int_equal(m.lap.alternate.flow_label, 0xfffff);
	assert_int_equal(m.lap.alternate.traffic_class, 0x2e);
	assert_int_equal(m.lap.alternate.hop_limit, 5);
	assert_int_equal(m.lap.alternate.packet_rate, 0x3f);
	assert_int_equal(m.lap.alternate.sl, 15);
	assert_true(m.lap.alternate.subnet_local);
	assert_int_equal(m.lap.alternate.local_ack_timeout, 31);
	assert_int_equal(m.lap.private_data[0], 0x71);
	assert_int_equal(m.lap.private_data[167], 0x72);

	kat_hdr(k, 0x001a);
	d[8] = 72; d[9] = 3;                          /* info length, status */
	d[12] = 0x81; d[83] = 0x82; d[84] = 0x83; d[231] = 0x84;
	kat_roundtrip(k, &m);
	assert_int_equal(m.apr.additional_info_length, 72);
	assert_int_equal(m.apr.ap_status, 3);
	assert_int_equal(m.apr.additional_info[71], 0x82);
	assert_int_equal(m.apr.private_data[147], 0x84);

	kat_hdr(k, 0x0001);
	k[3] = 0x81;                                  /* GetResp */
	d[0] = 1; d[1] = 2;                           /* base, class version */
	d[2] = 0x01; d[3] = 0x02;                     /* capability mask */
	d[4] = 0x00; d[5] = 0x00; d[6] = 0x00; d[7] = 1 << 5 | 0x12;
	d[24] = 0xaa;                                 /* redirect TC */
	d[25] = 0xb1; d[26] = 0x23; d[27] = 0x45;     /* SL 0xb, FL 0x12345 */
	d[28] = 0x00; d[29] = 0x07;                   /* redirect LID */
	d[33] = 0x00; d[34] = 0x00; d[35] = 0x01;     /* redirect QP */
	d[36] = 0x80; d[37] = 0x01;                   /* redirect Q_Key */
	d[64] = 0x40;                                 /* trap hop limit */
	d[65] = 0x12; d[66] = 0x34; d[67] = 0x56;     /* trap QP */
	d[71] = 0x09;                                 /* trap Q_Key */
	assert_int_equal(decode_exact(k, sizeof(k), SV_CM_DECODE_STRICT, &m),
			 0);
	assert_int_equal(m.method, SV_MAD_METHOD_GET_RESP);
	assert_int_equal(m.cpi.base_version, 1);
	assert_int_equal(m.cpi.class_version, 2);
	assert_int_equal(m.cpi.capability_mask, 0x0102);
	assert_int_equal(m.cpi.capability_mask2, 1);
	assert_int_equal(m.cpi.resp_time_value, 0x12);
	assert_int_equal(m.cpi.redirect_tc, 0xaa);
	assert_int_equal(m.cpi.redirect_sl, 0xb);
	assert_int_equal(m.cpi.redirect_fl, 0x12345);
	assert_int_equal(m.cpi.redirect_lid, 7);
	assert_int_equal(m.cpi.redirect_qp, 1);
	assert_int_equal(m.cpi.redirect_qkey, 0x80010000);
	assert_int_equal(m.cpi.trap_hop_limit, 0x40);
	assert_int_equal(m.cpi.trap_qp, 0x123456);
	assert_int_equal(m.cpi.trap_qkey, 9);
	assert_int_equal(sv_cm_encode(&m, b), 0);
	assert_memory_equal(b, k, sizeof(b));
}

/* ================= errors ================= */

static void test_decode_errors(void **state)
{
	uint8_t k[SV_MAD_BYTES + 1], b[SV_MAD_BYTES];
	struct sv_cm_mad m;

	(void)state;
	sv_cm_mad_init(&m, SV_CM_ATTR_REQ, 7);
	assert_int_equal(sv_cm_encode(&m, b), 0);
	assert_int_equal(decode_exact(b, sizeof(b), 0, &m), 0);

	/* lengths */
	assert_int_equal(decode_exact(b, 0, 0, &m), -SV_CM_E_SHORT);
	assert_int_equal(decode_exact(b, 23, 0, &m), -SV_CM_E_SHORT);
	assert_int_equal(decode_exact(b, 255, 0, &m), -SV_CM_E_SHORT);
	memcpy(k, b, sizeof(b));
	k[256] = 0;
	assert_int_equal(decode_exact(k, 257, 0, &m), -SV_CM_E_LONG);

	/* the constant header fields */
	memcpy(k, b, sizeof(b));
	k[0] = 2;
	assert_int_equal(decode_exact(k, 256, 0, &m), -SV_CM_E_BASE_VERSION);
	memcpy(k, b, sizeof(b));
	k[1] = 0x03;                                  /* SA */
	assert_int_equal(decode_exact(k, 256, 0, &m), -SV_CM_E_CLASS);
	memcpy(k, b, sizeof(b));
	k[2] = 1;
	assert_int_equal(decode_exact(k, 256, 0, &m), -SV_CM_E_CLASS_VERSION);

	/* methods: a REQ is a Send, nothing else */
	const uint8_t bad_methods[] = { 0x00, 0x01, 0x02, 0x04, 0x05, 0x06,
					0x07, 0x81, 0x83, 0xff };
	for (unsigned int i = 0; i < sizeof(bad_methods); i++) {
		memcpy(k, b, sizeof(b));
		k[3] = bad_methods[i];
		assert_int_equal(decode_exact(k, 256, 0, &m),
				 -SV_CM_E_METHOD);
	}
	/* ... and ClassPortInfo is Get, Set, GetResp or Send */
	memcpy(k, b, sizeof(b));
	k[16] = 0; k[17] = 1;
	for (unsigned int meth = 0; meth < 256; meth++) {
		bool ok = meth == 1 || meth == 2 || meth == 3 || meth == 0x81;

		k[3] = (uint8_t)meth;
		assert_int_equal(decode_exact(k, 256, 0, &m),
				 ok ? 0 : -SV_CM_E_METHOD);
	}

	/* attributes: only the table's */
	memcpy(k, b, sizeof(b));
	for (unsigned int a = 0; a < 0x10000; a++) {
		k[16] = (uint8_t)(a >> 8);
		k[17] = (uint8_t)a;
		if (a == 1) {
			k[3] = SV_MAD_METHOD_GET_RESP;
			assert_int_equal(decode_exact(k, 256, 0, &m), 0);
			k[3] = SV_MAD_METHOD_SEND;
		}
		assert_int_equal(decode_exact(k, 256, 0, &m),
				 (a == 1 || (a >= 0x10 && a <= 0x1a)) ? 0 :
				 -SV_CM_E_ATTR);
	}

	/* lengths inside messages */
	sv_cm_mad_init(&m, SV_CM_ATTR_REJ, 1);
	m.rej.reject_info_length = 72;
	assert_int_equal(sv_cm_encode(&m, b), 0);
	b[24 + 9] = 73 << 1;
	assert_int_equal(decode_exact(b, 256, 0, &m), -SV_CM_E_FIELD);
	b[24 + 9] = 127 << 1;
	assert_int_equal(decode_exact(b, 256, 0, &m), -SV_CM_E_FIELD);
	sv_cm_mad_init(&m, SV_CM_ATTR_SIDR_REP, 1);
	assert_int_equal(sv_cm_encode(&m, b), 0);
	b[24 + 5] = 73;
	assert_int_equal(decode_exact(b, 256, 0, &m), -SV_CM_E_FIELD);
	sv_cm_mad_init(&m, SV_CM_ATTR_APR, 1);
	assert_int_equal(sv_cm_encode(&m, b), 0);
	b[24 + 8] = 0xff;
	assert_int_equal(decode_exact(b, 256, 0, &m), -SV_CM_E_FIELD);

	assert_string_equal(sv_cm_strerror(-SV_CM_E_ATTR),
			    "unknown CM attribute ID");
	assert_string_equal(sv_cm_strerror(SV_CM_E_SHORT),
			    "shorter than a MAD (256 bytes)");
	assert_string_equal(sv_cm_strerror(-1000), "unknown error");
}

/* Reserved bits: ignored by default (the IBTA's receivers ignore them),
 * refused with STRICT; every single reserved bit of every attribute. */
static void test_reserved_bits(void **state)
{
	(void)state;
	for (unsigned int k = 0; k < NKINDS; k++) {
		struct sv_cm_mad z, m, d;
		uint8_t b[SV_MAD_BYTES], ones[SV_MAD_BYTES];
		unsigned int reserved = 0;

		/* the bits no field owns: encode all fields as all ones */
		sv_cm_mad_init(&z, kinds[k].attr, 0);
		if (z.attr_id == SV_CM_ATTR_CLASS_PORT_INFO)
			z.method = SV_MAD_METHOD_GET;
		m = z;
		for (unsigned int i = 0; i < sv_cm_attr(z.attr_id)->nfields;
		     i++) {
			const struct sv_cm_field *f =
				&sv_cm_attr(z.attr_id)->fields[i];
			uint8_t *p = (uint8_t *)&m + f->soff;

			if (!f->ssize) {
				memset(p, 0xff, f->width / 8u);
			} else if (f->max) {
				*p = f->max;
			} else {
				uint64_t v = f->width >= 64 ? ~0ull :
					     (1ull << f->width) - 1;

				if (f->low)
					continue;
				v <<= f->shift;
				if (f->shift)   /* the lower parts too */
					v |= (1ull << f->shift) - 1;
				if (f->ssize == 1 && f->width == 1)
					*p = 1; /* a bool */
				else
					memcpy(p, &v, f->ssize);
			}
		}
		assert_int_equal(sv_cm_encode(&m, ones), 0);
		for (unsigned int bit = 0; bit < 8 * SV_MAD_BYTES; bit++) {
			unsigned int byte = bit / 8;
			uint8_t mask = (uint8_t)(0x80 >> (bit % 8));

			/* header bytes 0-3 and 16-17 are checked fields */
			if (byte < 4 || byte == 16 || byte == 17)
				continue;
			if (byte < 24 && byte != 18 && byte != 19)
				continue;       /* status, TID, attr mod */
			if (byte >= 24 && (ones[byte] & mask))
				continue;       /* a field's bit */
			/* a field with a max (lengths) is not all ones */
			if (byte >= 24 && (kinds[k].attr == SV_CM_ATTR_REJ &&
					   byte == 24 + 9 && mask != 1))
				continue;
			if (byte >= 24 && ((kinds[k].attr == SV_CM_ATTR_APR &&
					    byte == 24 + 8) ||
					   (kinds[k].attr == SV_CM_ATTR_SIDR_REP &&
					    byte == 24 + 5)))
				continue;
			assert_int_equal(sv_cm_encode(&z, b), 0);
			b[byte] |= mask;
			assert_int_equal(decode_exact(b, 256, 0, &d), 0);
			assert_memory_equal(&d, &z, sizeof(d));
			assert_int_equal(decode_exact(b, 256,
						      SV_CM_DECODE_STRICT, &d),
					 -SV_CM_E_RESERVED);
			reserved++;
		}
		print_message("%-13s %4u reserved bits\n",
			      sv_cm_attr_name(kinds[k].attr), reserved);
		assert_true(reserved >= 16);    /* at least the header's */
	}
}

static void test_encode_errors(void **state)
{
	struct sv_cm_mad m;
	uint8_t b[SV_MAD_BYTES], before[SV_MAD_BYTES];

	(void)state;
	memset(b, 0x5a, sizeof(b));
	memcpy(before, b, sizeof(b));
	sv_cm_mad_init(&m, 0x0020, 1);
	assert_int_equal(sv_cm_encode(&m, b), -SV_CM_E_ATTR);
	sv_cm_mad_init(&m, SV_CM_ATTR_REQ, 1);
	m.method = SV_MAD_METHOD_GET;
	assert_int_equal(sv_cm_encode(&m, b), -SV_CM_E_METHOD);

#define WIDE(attr, field, value) do { \
		sv_cm_mad_init(&m, attr, 1); \
		m.field = value; \
		assert_int_equal(sv_cm_encode(&m, b), -SV_CM_E_FIELD); \
	} while (0)
	WIDE(SV_CM_ATTR_REQ, req.local_qpn, 1u << 24);
	WIDE(SV_CM_ATTR_REQ, req.vendor_id, 1u << 24);
	WIDE(SV_CM_ATTR_REQ, req.starting_psn, 0xffffffffu);
	WIDE(SV_CM_ATTR_REQ, req.remote_cm_response_timeout, 32);
	WIDE(SV_CM_ATTR_REQ, req.transport_service_type, 4);
	WIDE(SV_CM_ATTR_REQ, req.path_mtu, 16);
	WIDE(SV_CM_ATTR_REQ, req.retry_count, 8);
	WIDE(SV_CM_ATTR_REQ, req.primary.flow_label, 1u << 20);
	WIDE(SV_CM_ATTR_REQ, req.alternate.packet_rate, 64);
	WIDE(SV_CM_ATTR_REP, rep.vendor_id, 1u << 24);
	WIDE(SV_CM_ATTR_REP, rep.rnr_retry_count, 8);
	WIDE(SV_CM_ATTR_SIDR_REP, sidr_rep.vendor_id, 1u << 24);
	WIDE(SV_CM_ATTR_SIDR_REP, sidr_rep.additional_info_length, 73);
	WIDE(SV_CM_ATTR_REJ, rej.reject_info_length, 73);
	WIDE(SV_CM_ATTR_APR, apr.additional_info_length, 73);
	WIDE(SV_CM_ATTR_MRA, mra.message_mraed, 4);
	WIDE(SV_CM_ATTR_LAP, lap.alternate.sl, 16);
	WIDE(SV_CM_ATTR_DREQ, dreq.remote_qpn_eecn, 1u << 24);
#undef WIDE
	/* nothing was written */
	assert_memory_equal(b, before, sizeof(b));
}

/* Random bytes, and random mutations of good MADs, never crash, and what
 * decodes encodes back (strict: to the same bytes). */
static void test_garbage(void **state)
{
	(void)state;
	for (int i = 0; i < 50000; i++) {
		uint8_t b[SV_MAD_BYTES], e[SV_MAD_BYTES];
		struct sv_cm_mad m, d;
		size_t len = SV_MAD_BYTES;
		int ret;

		if (i & 1) {
			rbytes(b, sizeof(b));
			b[0] = 1; b[1] = 7; b[2] = 2;
			b[3] = (rnd() & 3) ? 3 : (uint8_t)rnd();
			b[16] = 0;
			b[17] = (uint8_t)(rnd() % 0x1c);
		} else {
			rand_mad(&m, (unsigned int)(rnd() % NKINDS));
			assert_int_equal(sv_cm_encode(&m, b), 0);
			for (int f = (int)(rnd() % 4); f >= 0; f--)
				b[rnd() % sizeof(b)] ^= (uint8_t)(1 << (rnd() % 8));
		}
		if (rnd() % 16 == 0)
			len = rnd() % sizeof(b);
		ret = decode_exact(b, len, 0, &m);
		if (ret != 0)
			continue;
		assert_int_equal(sv_cm_encode(&m, e), 0);
		assert_int_equal(decode_exact(e, sizeof(e), 0, &d), 0);
		assert_memory_equal(&m, &d, sizeof(m));
		if (decode_exact(b, len, SV_CM_DECODE_STRICT, &d) == 0)
			assert_memory_equal(b, e, sizeof(e));
	}
}

/* ================= the tables ================= */

/* Every field lies inside the 232 bytes, fits its member, and owns its
 * bits alone. */
static void test_field_tables(void **state)
{
	(void)state;
	assert_null(sv_cm_attr(0));
	assert_null(sv_cm_attr(0x0002));
	assert_null(sv_cm_attr(0x000f));
	assert_null(sv_cm_attr(0x001b));
	assert_null(sv_cm_attr(0xffff));
	assert_string_equal(sv_cm_attr_name(0x0010), "REQ");
	assert_string_equal(sv_cm_attr_name(0x001a), "APR");
	assert_string_equal(sv_cm_attr_name(0x0001), "ClassPortInfo");
	assert_string_equal(sv_cm_attr_name(0x0042), "unknown");

	for (unsigned int k = 0; k < NKINDS; k++) {
		const struct sv_cm_attrinfo *a = sv_cm_attr(kinds[k].attr);
		uint8_t owned[SV_CM_DATA_BYTES * 8] = { 0 };

		assert_non_null(a);
		assert_int_equal(a->id, kinds[k].attr);
		for (unsigned int i = 0; i < a->nfields; i++) {
			const struct sv_cm_field *f = &a->fields[i];
			unsigned int first = f->off * 8u + f->bit;

			assert_true(f->width > 0);
			assert_true(first + f->width <= SV_CM_DATA_BYTES * 8);
			if (f->ssize) {
				assert_true(f->width + f->shift <=
					    8u * f->ssize);
				assert_true(f->bit + f->width <= 64);
			} else {
				assert_int_equal(f->bit, 0);
				assert_int_equal(f->width % 8, 0);
			}
			assert_true(f->soff + (f->ssize ? f->ssize :
					       f->width / 8u) <=
				    sizeof(struct sv_cm_mad));
			for (unsigned int b = first; b < first + f->width; b++) {
				if (owned[b])
					fail_msg("%s.%s overlaps", a->name,
						 f->name);
				owned[b] = 1;
			}
		}
	}
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(sv_cm_rej_reason_name(28), "CONSUMER_DEFINED");
	assert_string_equal(sv_cm_rej_reason_name(8), "INVALID_SERVICE_ID");
	assert_string_equal(sv_cm_rej_reason_name(1), "NO_QP");
	assert_string_equal(sv_cm_rej_reason_name(10), "STALE_CONN");
	assert_string_equal(sv_cm_rej_reason_name(35),
			    "VENDOR_OPTION_NOT_SUPPORTED");
	assert_null(sv_cm_rej_reason_name(0));
	assert_null(sv_cm_rej_reason_name(34));
	assert_null(sv_cm_rej_reason_name(36));
	assert_null(sv_cm_rej_reason_name(0xffff));
	assert_int_equal(SV_CM_REJ_TIMEOUT, 4);
	assert_int_equal(SV_CM_REJ_INVALID_COMM_INSTANCE, 7);
	assert_int_equal(SV_CM_REJ_INVALID_MTU, 26);
}

/* ================= the RDMA CM ================= */

static void test_service_ids(void **state)
{
	uint16_t ps, port;

	(void)state;
	assert_true(sv_cm_service_id(SV_RDMA_PS_TCP, 0) == 0x0000000001060000ull);
	assert_true(sv_cm_service_id(SV_RDMA_PS_UDP, 0) == 0x0000000001110000ull);
	assert_true(sv_cm_service_id(SV_RDMA_PS_IB, 0) == 0x00000000013f0000ull);
	assert_true(sv_cm_service_id(SV_RDMA_PS_TCP, 7471) ==
		    0x0000000001061d2full);
	assert_true(sv_cm_service_id(SV_RDMA_PS_UDP, 0xffff) ==
		    0x000000000111ffffull);
	assert_true((sv_cm_service_id(SV_RDMA_PS_IB, 1) & SV_RDMA_SID_PS_MASK)
		    == 0x00000000013f0000ull);

	assert_true(sv_cm_service_id_split(0x0000000001064853ull, &ps, &port));
	assert_int_equal(ps, SV_RDMA_PS_TCP);
	assert_int_equal(port, 18515);
	assert_true(sv_cm_service_id_split(0x0000000001110000ull, &ps, &port));
	assert_int_equal(ps, SV_RDMA_PS_UDP);
	assert_int_equal(port, 0);
	assert_true(sv_cm_service_id_split(0x00000000013f1234ull, &ps, &port));
	assert_int_equal(ps, SV_RDMA_PS_IB);
	assert_int_equal(port, 0x1234);
	assert_false(sv_cm_service_id_split(0x0000000001070000ull, &ps, &port));
	assert_false(sv_cm_service_id_split(0x0000000000020001ull, &ps, &port));
	assert_false(sv_cm_service_id_split(0x1000000001060001ull, &ps, &port));
	assert_false(sv_cm_service_id_split(0, &ps, &port));
}

static void test_cma_hdr(void **state)
{
	struct sv_cma_hdr h = { .version = 0, .ip_version = 4,
				.src_port = 0x1234 }, g;
	uint8_t p[SV_CM_REQ_PRIV], want[SV_CMA_HDR_BYTES] = { 0 };

	(void)state;
	/* IPv4 */
	v4_gid(h.src, 192, 168, 1, 2);
	v4_gid(h.dst, 192, 168, 1, 3);
	memset(p, 0xee, sizeof(p));
	assert_int_equal(sv_cma_hdr_build(p, &h), 0);
	want[1] = 0x40;
	want[2] = 0x12; want[3] = 0x34;
	want[16] = 192; want[17] = 168; want[18] = 1; want[19] = 2;
	want[32] = 192; want[33] = 168; want[34] = 1; want[35] = 3;
	assert_memory_equal(p, want, sizeof(want));
	assert_int_equal(p[SV_CMA_HDR_BYTES], 0xee);  /* nothing past 36 */
	assert_int_equal(sv_cma_hdr_parse(p, sizeof(p), &g), 0);
	assert_memory_equal(&g, &h, sizeof(g));
	/* the reserved nibble and the 12 bytes before an IPv4 address are
	 * not read */
	p[1] |= 0x0f;
	p[4] = 0x77;
	assert_int_equal(sv_cma_hdr_parse(p, sizeof(p), &g), 0);
	assert_memory_equal(&g, &h, sizeof(g));

	/* IPv6 */
	h.ip_version = 6;
	for (int i = 0; i < 16; i++) {
		h.src[i] = (uint8_t)(0xfd - i);
		h.dst[i] = (uint8_t)(0x20 + i);
	}
	assert_int_equal(sv_cma_hdr_build(p, &h), 0);
	assert_int_equal(p[0], 0);
	assert_int_equal(p[1], 0x60);
	assert_memory_equal(p + 4, h.src, 16);
	assert_memory_equal(p + 20, h.dst, 16);
	assert_int_equal(sv_cma_hdr_parse(p, SV_CMA_HDR_BYTES, &g), 0);
	assert_memory_equal(&g, &h, sizeof(g));

	/* errors */
	assert_int_equal(sv_cma_hdr_parse(p, SV_CMA_HDR_BYTES - 1, &g),
			 -EINVAL);
	assert_int_equal(sv_cma_hdr_parse(p, 0, &g), -EINVAL);
	p[0] = 1;
	assert_int_equal(sv_cma_hdr_parse(p, sizeof(p), &g), -EINVAL);
	p[0] = 0;
	for (int v = 0; v < 16; v++) {
		p[1] = (uint8_t)(v << 4);
		assert_int_equal(sv_cma_hdr_parse(p, sizeof(p), &g),
				 v == 4 || v == 6 ? 0 : -EINVAL);
	}
	h.ip_version = 5;
	assert_int_equal(sv_cma_hdr_build(p, &h), -EINVAL);
	h.ip_version = 4;           /* not IPv4-mapped addresses */
	assert_int_equal(sv_cma_hdr_build(p, &h), -EINVAL);
}

/* ================= the datagram to QP1 ================= */

static void dgram_ip(struct sv_roce_ip *ip)
{
	memset(ip, 0, sizeof(*ip));
	v4_gid(ip->src, 10, 77, 0, 12);
	v4_gid(ip->dst, 10, 77, 0, 11);
	ip->sport = sv_roce_sport(SV_GSI_QPN, SV_GSI_QPN);
	ip->dport = SV_ROCE_PORT;
	ip->ip_id = 0x1234;
	ip->df = true;
}

static void test_dgram(void **state)
{
	struct sv_cm_mad m;
	struct sv_roce_ip ip;
	struct sv_roce_pkt p;
	uint8_t mad[SV_MAD_BYTES], buf[SV_CM_DGRAM_BYTES + 8];
	const uint8_t *got;
	size_t len;

	(void)state;
	dgram_ip(&ip);
	rand_mad(&m, 1);
	assert_int_equal(sv_cm_encode(&m, mad), 0);
	len = sv_cm_dgram_build(buf, mad, 0xffff, 0x123456, &ip);
	assert_int_equal(len, 280);
	assert_int_equal(len, SV_CM_DGRAM_BYTES);
	/* BTH: UD SEND_ONLY, P_Key, QP 1, PSN; DETH: Q_Key, source QP 1 */
	assert_int_equal(buf[0], 0x64);
	assert_int_equal(buf[1] & 0x30, 0);           /* no pad */
	assert_int_equal(sv_get_be16(buf + 2), 0xffff);
	assert_int_equal(sv_get_be24(buf + 5), 1);
	assert_int_equal(sv_get_be24(buf + 9), 0x123456);
	assert_int_equal(sv_get_be32(buf + 12), 0x80010000);
	assert_int_equal(sv_get_be24(buf + 17), 1);
	assert_memory_equal(buf + 20, mad, SV_MAD_BYTES);

	assert_int_equal(sv_cm_dgram_parse(buf, len, &ip, &p, &got), 0);
	assert_ptr_equal(got, buf + 20);
	assert_int_equal(p.sqpn, 1);
	assert_int_equal(p.psn, 0x123456);
	assert_int_equal(sv_cm_dgram_parse(buf, len, NULL, &p, &got), 0);
	/* a flipped bit anywhere: bad ICRC, or not a datagram to QP1 */
	for (size_t bit = 0; bit < len * 8; bit++) {
		int ret;

		buf[bit / 8] ^= (uint8_t)(1 << (bit % 8));
		ret = sv_cm_dgram_parse(buf, len, &ip, &p, &got);
		buf[bit / 8] ^= (uint8_t)(1 << (bit % 8));
		if (bit / 8 == 4)   /* FECN/BECN/reserved: masked from ICRC */
			continue;
		assert_true(ret == -EBADMSG || ret == -EINVAL);
	}
	/* short, long, another QP, another Q_Key, another opcode */
	assert_int_equal(sv_cm_dgram_parse(buf, len - 1, &ip, &p, &got),
			 -EINVAL);
	assert_int_equal(sv_cm_dgram_parse(buf, 10, &ip, &p, &got), -EINVAL);
	buf[len] = 0; buf[len + 1] = 0; buf[len + 2] = 0; buf[len + 3] = 0;
	assert_int_equal(sv_cm_dgram_parse(buf, len + 4, NULL, &p, &got),
			 -EINVAL);
	buf[7] = 2;
	assert_int_equal(sv_cm_dgram_parse(buf, len, NULL, &p, &got), -EINVAL);
	buf[7] = 1;
	buf[15] = 1;
	assert_int_equal(sv_cm_dgram_parse(buf, len, NULL, &p, &got), -EINVAL);
	buf[15] = 0;
	buf[0] = SV_OP_RC_SEND_ONLY;
	assert_int_equal(sv_cm_dgram_parse(buf, len, NULL, &p, &got), -EINVAL);
	buf[0] = SV_OP_UD_SEND_ONLY;
	assert_int_equal(sv_cm_dgram_parse(buf, len, NULL, &p, &got), 0);
}

/* ================= --pcap, --seeds ================= */

/* One message of each attribute, with the values cm_mad_tshark.sh looks
 * for: the REQ from 10.77.0.12:50000 to 10.77.0.11:18515 (RDMA_PS_TCP). */
static void sample_mad(struct sv_cm_mad *m, unsigned int kind)
{
	uint64_t seed = rng_state;

	rng_state = 0x1234567 + kind;
	rand_mad(m, kind);
	rng_state = seed;
	m->status = 0;
	m->class_specific = 0;
	m->attr_mod = 0;
	m->tid = 0x0000000100000000ull | (0x11223340u + kind);
	switch (m->attr_id) {
	case SV_CM_ATTR_REQ: {
		struct sv_cma_hdr h = { .ip_version = 4, .src_port = 50000 };

		m->req.local_comm_id = 0x11223344;
		m->req.service_id = sv_cm_service_id(SV_RDMA_PS_TCP, 18515);
		m->req.local_qpn = 0x000abc;
		m->req.local_qkey = 0;
		m->req.transport_service_type = SV_CM_TRANSPORT_RC;
		m->req.extended_transport_type = 0;
		m->req.path_mtu = SV_CM_MTU_1024;
		m->req.primary.local_lid = 0xffff;
		m->req.primary.remote_lid = 0xffff;
		v4_gid(m->req.primary.local_gid, 10, 77, 0, 12);
		v4_gid(m->req.primary.remote_gid, 10, 77, 0, 11);
		v4_gid(h.src, 10, 77, 0, 12);
		v4_gid(h.dst, 10, 77, 0, 11);
		memset(m->req.private_data, 0, sizeof(m->req.private_data));
		assert_int_equal(sv_cma_hdr_build(m->req.private_data, &h), 0);
		memset(&m->req.alternate, 0, sizeof(m->req.alternate));
		break;
	}
	case SV_CM_ATTR_REP:
		m->rep.local_comm_id = 0x55667788;
		m->rep.remote_comm_id = 0x11223344;
		m->rep.local_qpn = 0x000def;
		break;
	case SV_CM_ATTR_REJ:
		m->rej.local_comm_id = 0x55667788;
		m->rej.remote_comm_id = 0x11223344;
		m->rej.reason = SV_CM_REJ_INVALID_SERVICE_ID;
		m->rej.message_rejected = SV_CM_MSG_REQ;
		m->rej.reject_info_length = 0;
		break;
	case SV_CM_ATTR_RTU:
		m->rtu.local_comm_id = 0x11223344;
		m->rtu.remote_comm_id = 0x55667788;
		break;
	case SV_CM_ATTR_DREQ:
		m->dreq.local_comm_id = 0x11223344;
		m->dreq.remote_comm_id = 0x55667788;
		m->dreq.remote_qpn_eecn = 0x000def;
		break;
	case SV_CM_ATTR_DREP:
		m->drep.local_comm_id = 0x55667788;
		m->drep.remote_comm_id = 0x11223344;
		break;
	case SV_CM_ATTR_CLASS_PORT_INFO:
		m->method = SV_MAD_METHOD_GET_RESP;
		m->cpi.base_version = 1;
		m->cpi.class_version = 2;
		break;
	default:
		break;
	}
}

static void put_le32(FILE *f, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
			 (uint8_t)(v >> 24) };

	fwrite(b, 1, 4, f);
}

static uint16_t ip_csum(const uint8_t *h, size_t len)
{
	uint32_t s = 0;

	for (size_t i = 0; i < len; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static int write_pcap(const char *path)
{
	FILE *f = fopen(path, "wb");

	if (!f) {
		perror(path);
		return 1;
	}
	put_le32(f, 0xa1b2c3d4);                      /* pcap, microseconds */
	put_le32(f, 2 | 4 << 16);                     /* version 2.4 */
	put_le32(f, 0);
	put_le32(f, 0);
	put_le32(f, 65535);                           /* snap length */
	put_le32(f, 1);                               /* Ethernet */
	for (unsigned int k = 0; k < NKINDS; k++) {
		struct sv_cm_mad m;
		struct sv_roce_ip ip;
		uint8_t mad[SV_MAD_BYTES], frame[14 + 20 + 8 + SV_CM_DGRAM_BYTES];
		uint8_t *eth = frame, *iph = frame + 14, *udp = iph + 20;
		size_t n;

		sample_mad(&m, k);
		if (sv_cm_encode(&m, mad) != 0)
			return 1;
		memset(frame, 0, 42);
		memcpy(eth, "\x02\x00\x00\x00\x00\x0b"
		       "\x02\x00\x00\x00\x00\x0c", 12);
		dgram_ip(&ip);
		ip.ip_id = (uint16_t)(0x4000 + k);
		switch (m.attr_id) {                  /* the answers go back */
		case SV_CM_ATTR_MRA: case SV_CM_ATTR_REJ: case SV_CM_ATTR_REP:
		case SV_CM_ATTR_DREP: case SV_CM_ATTR_SIDR_REP:
		case SV_CM_ATTR_APR: case SV_CM_ATTR_CLASS_PORT_INFO:
			memcpy(eth, "\x02\x00\x00\x00\x00\x0c"
			       "\x02\x00\x00\x00\x00\x0b", 12);
			v4_gid(ip.src, 10, 77, 0, 11);
			v4_gid(ip.dst, 10, 77, 0, 12);
			break;
		default:
			break;
		}
		n = sv_cm_dgram_build(udp + 8, mad, 0xffff, k, &ip);
		eth[12] = 0x08;
		iph[0] = 0x45;
		sv_put_be16(iph + 2, (uint16_t)(20 + 8 + n));
		sv_put_be16(iph + 4, ip.ip_id);
		iph[6] = 0x40;                        /* DF */
		iph[8] = 64;
		iph[9] = 17;
		memcpy(iph + 12, ip.src + 12, 4);
		memcpy(iph + 16, ip.dst + 12, 4);
		sv_put_be16(iph + 10, ip_csum(iph, 20));
		sv_put_be16(udp, ip.sport);
		sv_put_be16(udp + 2, SV_ROCE_PORT);
		sv_put_be16(udp + 4, (uint16_t)(8 + n));
		put_le32(f, 1700000000 + k);
		put_le32(f, 0);
		put_le32(f, (uint32_t)(42 + n));
		put_le32(f, (uint32_t)(42 + n));
		fwrite(frame, 1, 42 + n, f);
	}
	return fclose(f) ? 1 : 0;
}

static int write_file(const char *dir, const char *name, const char *ext,
		      const uint8_t *b, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, ext);
	f = fopen(path, "wb");
	if (!f || fwrite(b, 1, len, f) != len || fclose(f)) {
		perror(path);
		return 1;
	}
	return 0;
}

/* One MAD of each attribute, and the same as a datagram to QP1 with the
 * ICRC for dgram_ip()'s addresses (fuzz_cm_mad.c checks with them). */
static int write_seeds(const char *dir)
{
	for (unsigned int k = 0; k < NKINDS; k++) {
		struct sv_cm_mad m;
		struct sv_roce_ip ip;
		uint8_t mad[SV_MAD_BYTES], dg[SV_CM_DGRAM_BYTES];
		size_t n;

		sample_mad(&m, k);
		if (sv_cm_encode(&m, mad) != 0)
			return 1;
		dgram_ip(&ip);
		n = sv_cm_dgram_build(dg, mad, 0xffff, k, &ip);
		if (write_file(dir, sv_cm_attr_name(m.attr_id), "mad", mad,
			       sizeof(mad)) ||
		    write_file(dir, sv_cm_attr_name(m.attr_id), "dgram", dg, n))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--pcap"))
		return write_pcap(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--seeds"))
		return write_seeds(argv[2]);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_field_tables),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_every_field_encoded),
		cmocka_unit_test(test_kat_req),
		cmocka_unit_test(test_kat_rep),
		cmocka_unit_test(test_kat_rej_mra_dreq),
		cmocka_unit_test(test_kat_sidr),
		cmocka_unit_test(test_kat_lap_apr_cpi),
		cmocka_unit_test(test_decode_errors),
		cmocka_unit_test(test_reserved_bits),
		cmocka_unit_test(test_encode_errors),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_service_ids),
		cmocka_unit_test(test_cma_hdr),
		cmocka_unit_test(test_dgram),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
