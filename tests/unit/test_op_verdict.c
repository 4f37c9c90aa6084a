// SPDX-License-Identifier: MIT
/*
 * One verdict per opcode and QP type (issue 37): every WQE opcode (and a
 * few past the table) on every QP type, as each part of the device sees
 * it, must agree:
 *
 *   - the library's post: ibv_post_send (sv_op_ok, exp false),
 *     ibv_exp_post_send (exp true) and ibv_wr_* (the opcode's
 *     IBV_QP_EX_WITH_* bit in sv_op_ex_flags, or sv_op_ok for the device's
 *     own, as wr_claim_exp asks);
 *   - the device's requester, both transports: sv_op_req_status (the
 *     same-host loop/req.c) and sv_roce_req_status (roce/req.c's take());
 *   - the wire: for what a connected QP type or UD may send, each packet's
 *     BTH opcode that the requester builds (sv_roce_req_opcode, through
 *     sv_roce_req_pkt) is a request of that transport in wire.c's table,
 *     says what the opcode table says of it (SEND, immediate data, IETH,
 *     RETH, READ, atomic, masked, ATOMIC WRITE, FLUSH, no AETH), survives
 *     build -> parse, and the peer's responder takes it (resp.c's
 *     sv_roce_resp_takes); what the table refuses a QP type has no request
 *     packet of that transport at all (no XRC ATOMIC WRITE, no UC READ).
 *
 * Before 4a89aff, roce/req.c had its own switch, which let an ATOMIC
 * WRITE through on an XRC QP (and sent it with an RC opcode): the RoCEv2
 * requester's verdict differed from the same-host one's, and what it let
 * through had no XRC packet. This test fails on that.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <infiniband/verbs.h>

#include "abi/sv_op.h"
#include "device/roce/build.h"
#include "device/roce/wire.h"

static const uint32_t qpts[] = {
	IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND,
	IBV_QPT_XRC_RECV, IBV_QPT_RAW_PACKET,
};

static const char *qpt_name(uint32_t t)
{
	switch (t) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_XRC_SEND: return "XRC_SEND";
	case IBV_QPT_XRC_RECV: return "XRC_RECV";
	case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
	default: return "?";
	}
}

/* The QP type that answers a QP of t (its peer's): -1 for none. */
static int peer_of(uint32_t t)
{
	switch (t) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		return (int)t;
	case IBV_QPT_XRC_SEND:
		return IBV_QPT_XRC_RECV;
	default:
		return -1;
	}
}

static unsigned int failures;

#define CHECK(cond, t, op, ...)                                              \
	do {                                                                 \
		if (!(cond)) {                                               \
			failures++;                                          \
			fprintf(stderr, "opcode %u on %s: ", (unsigned)(op), \
				qpt_name(t));                                \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
		}                                                            \
	} while (0)

/* The library's verdicts on op for a QP of t. */
struct lib_verdict {
	bool post, exp, wr;
};

static struct lib_verdict lib_of(uint32_t t, uint32_t op)
{
	struct lib_verdict v = {
		.post = sv_op_ok(t, op, false),
		.exp = sv_op_ok(t, op, true),
	};
	uint32_t f = sv_op_flags(op);

	if (f & SV_OPF_EXP)
		v.wr = sv_op_ok(t, op, true);          /* wr_claim_exp */
	else if (op < SV_OP_COUNT && sv_op_tab[op].ex)
		v.wr = (sv_op_ex_flags(t) & sv_op_tab[op].ex) != 0;
	return v;
}

/* The library, the same-host requester and the RoCEv2 requester give op
 * on t one verdict. */
static void test_verdicts(void **state)
{
	(void)state;
	failures = 0;
	for (size_t i = 0; i < sizeof(qpts) / sizeof(qpts[0]); i++) {
		uint32_t t = qpts[i];

		for (uint32_t op = 0; op < SV_OP_COUNT + 3; op++) {
			struct lib_verdict l = lib_of(t, op);
			uint32_t f = sv_op_flags(op);
			bool lib = l.post || l.exp || l.wr,
			     loop = sv_op_req_status(t, op, true) ==
				    IBV_WC_SUCCESS,
			     roce = sv_roce_req_status(t, op, true) ==
				    IBV_WC_SUCCESS;

			CHECK(lib == loop, t, op, "the library %s, the "
			      "device %s", lib ? "posts it" : "refuses it",
			      loop ? "runs it" : "refuses it");
			CHECK(!l.post || l.exp, t, op, "ibv_post_send takes "
			      "it, ibv_exp_post_send does not");
			/* the RoCEv2 requester runs the connected types (UD's
			 * datagrams go through the same-host path) */
			if (t != IBV_QPT_UD)
				CHECK(roce == loop, t, op, "the RoCEv2 "
				      "requester %s, the same-host one %s",
				      roce ? "sends it" : "refuses it",
				      loop ? "runs it" : "refuses it");
			/* a device without masked atomics refuses them,
			 * both ways */
			if (f & SV_OPF_MASKED) {
				CHECK(sv_op_req_status(t, op, false) !=
				      IBV_WC_SUCCESS, t, op, "masked atomic "
				      "run without the capability");
				CHECK(sv_roce_req_status(t, op, false) !=
				      IBV_WC_SUCCESS, t, op, "masked atomic "
				      "sent without the capability");
			} else {
				CHECK((sv_op_req_status(t, op, false) ==
				       IBV_WC_SUCCESS) == loop, t, op,
				      "the masked-atomic capability changes "
				      "the verdict");
			}
			/* anything the table does not know, or does not
			 * execute, nobody takes */
			if (!(f & SV_OPF_QPTS))
				CHECK(!lib && !loop && !roce, t, op,
				      "an opcode without flags is taken");
		}
	}
	assert_int_equal(failures, 0);
}

/* What wire flags rf of packet (first, last) of op must say, from op's
 * flags f. */
static void check_meaning(uint32_t t, uint32_t op, uint32_t f, uint32_t rf,
			  bool first, bool last, uint8_t opc)
{
	bool write = (f & (SV_OPF_PAYLOAD | SV_OPF_REMOTE)) ==
		     (SV_OPF_PAYLOAD | SV_OPF_REMOTE);

	CHECK(!(rf & SV_RF_AETH) && !(rf & SV_RF_RESP), t, op,
	      "0x%02x is a response", opc);
	CHECK(!(f & SV_OPF_SEND) == !(rf & SV_RF_SEND), t, op,
	      "0x%02x: SEND %d in the table, %d on the wire", opc,
	      !!(f & SV_OPF_SEND), !!(rf & SV_RF_SEND));
	CHECK(!write == !(rf & SV_RF_WRITE), t, op,
	      "0x%02x: RDMA WRITE %d in the table, %d on the wire", opc,
	      write, !!(rf & SV_RF_WRITE));
	CHECK(!(f & SV_OPF_READ) == !(rf & SV_RF_READ), t, op,
	      "0x%02x: READ %d in the table, %d on the wire", opc,
	      !!(f & SV_OPF_READ), !!(rf & SV_RF_READ));
	CHECK(!(f & SV_OPF_ATOMIC) == !(rf & SV_RF_ATOMIC), t, op,
	      "0x%02x: atomic %d in the table, %d on the wire", opc,
	      !!(f & SV_OPF_ATOMIC), !!(rf & SV_RF_ATOMIC));
	CHECK(!(f & SV_OPF_MASKED) == !(rf & SV_RF_MASKED), t, op,
	      "0x%02x: masked %d in the table, %d on the wire", opc,
	      !!(f & SV_OPF_MASKED), !!(rf & SV_RF_MASKED));
	CHECK(!(f & SV_OPF_AWRITE) == !(rf & SV_RF_AWRITE), t, op,
	      "0x%02x: ATOMIC WRITE %d in the table, %d on the wire", opc,
	      !!(f & SV_OPF_AWRITE), !!(rf & SV_RF_AWRITE));
	CHECK(!(f & SV_OPF_FLUSH) == !(rf & SV_RF_FLUSH), t, op,
	      "0x%02x: FLUSH %d in the table, %d on the wire", opc,
	      !!(f & SV_OPF_FLUSH), !!(rf & SV_RF_FLUSH));
	/* immediate data and the key to invalidate ride on the last */
	CHECK(!((f & SV_OPF_IMM) && last) == !(rf & SV_RF_IMMDT), t, op,
	      "0x%02x: ImmDt %d in the table, %d on the wire", opc,
	      (f & SV_OPF_IMM) && last, !!(rf & SV_RF_IMMDT));
	CHECK(!((f & SV_OPF_INV) && last) == !(rf & SV_RF_IETH), t, op,
	      "0x%02x: IETH %d in the table, %d on the wire", opc,
	      (f & SV_OPF_INV) && last, !!(rf & SV_RF_IETH));
	/* a RETH names the remote range: on a WRITE's first packet, on
	 * every READ request, ATOMIC WRITE and FLUSH */
	CHECK(!((f & SV_OPF_REMOTE) && !(f & SV_OPF_ATOMIC) &&
		(first || !write)) == !(rf & SV_RF_RETH), t, op,
	      "0x%02x: RETH on the wire %d", opc, !!(rf & SV_RF_RETH));
	CHECK(!(f & SV_OPF_ATOMIC) == !(rf & SV_RF_ATMETH), t, op,
	      "0x%02x: AtomicETH on the wire %d", opc,
	      !!(rf & SV_RF_ATMETH));
	CHECK(!(t == IBV_QPT_UD) == !(rf & SV_RF_DETH), t, op,
	      "0x%02x: DETH on the wire %d", opc, !!(rf & SV_RF_DETH));
	CHECK(!(t == IBV_QPT_XRC_SEND) == !(rf & SV_RF_XRCETH), t, op,
	      "0x%02x: XRCETH on the wire %d", opc, !!(rf & SV_RF_XRCETH));
	/* its place in the message */
	CHECK(!!(rf & SV_RF_FIRST) == first && !!(rf & SV_RF_LAST) == last,
	      t, op, "0x%02x is not a %s%s packet", opc,
	      first ? "first" : "", last ? "last" : "middle");
}

/* Every packet op may send from a QP of t is a request of t's transport,
 * means what the table says, and t's peer takes it; what the table
 * refuses t has no packet of t's transport. */
static void test_wire(void **state)
{
	(void)state;
	failures = 0;
	for (size_t i = 0; i < sizeof(qpts) / sizeof(qpts[0]); i++) {
		uint32_t t = qpts[i], tr = sv_roce_qpt_transport(t);
		int peer = peer_of(t);

		for (uint32_t op = 0; op < SV_OP_COUNT + 3; op++) {
			uint32_t f = sv_op_flags(op);
			bool ok = sv_op_req_status(t, op, true) ==
				  IBV_WC_SUCCESS,
			     multi = (f & SV_OPF_PAYLOAD) && t != IBV_QPT_UD,
			     whole;

			if (!(f & SV_OPF_QPTS) || (f & SV_OPF_LOCAL)) {
				CHECK(sv_roce_req_opcode(t, op, true, true) < 0,
				      t, op, "no message, yet a packet");
				continue;
			}
			whole = true;
			for (unsigned int pos = 0; pos < (multi ? 4u : 1u);
			     pos++) {
				bool first = pos == 0 || pos == 1,
				     last = pos == 0 || pos == 3;
				int opc = sv_roce_req_opcode(t, op, first,
							     last);
				const struct sv_roce_opinfo *o =
					opc < 0 ? NULL :
					sv_roce_op((uint8_t)opc);
				bool ours = o && tr && (o->flags & tr) &&
					    (o->flags & SV_RF_REQ);

				if (!ok) {
					/* the table refuses it: some packet
					 * of the message (its ONLY, or its
					 * LAST) is no request of this
					 * transport (an XRC ATOMIC WRITE, a
					 * UC SEND with invalidate's LAST) */
					if (!ours || peer < 0 ||
					    !sv_roce_resp_takes((uint32_t)peer,
								o->flags))
						whole = false;
					continue;
				}
				CHECK(ours, t, op, "its packet 0x%02x (%s) is "
				      "not a request of its transport",
				      opc & 0xff, o ? o->name : "unknown");
				if (!ours)
					continue;
				CHECK(peer >= 0 &&
				      sv_roce_resp_takes((uint32_t)peer,
							 o->flags),
				      t, op, "the peer's responder refuses "
				      "0x%02x (%s)", opc, o->name);
				CHECK(!sv_roce_resp_takes(t, o->flags) ||
				      t != IBV_QPT_XRC_SEND, t, op,
				      "an XRC initiator takes requests");
				check_meaning(t, op, f, o->flags, first, last,
					      (uint8_t)opc);
			}
			CHECK(ok || !whole, t, op, "refused, yet each of its "
			      "packets is a request of its transport");
		}
	}
	assert_int_equal(failures, 0);
}

/* The packets sv_roce_req_pkt builds for a message (the requester's and
 * capture's): the opcode sv_roce_req_opcode gives, headers that parse
 * back to what the WQE says, PSNs that add up. */
static void test_build(void **state)
{
	const uint32_t mtu = 1024;
	const uint64_t lens[] = { 0, 8, mtu, 3 * mtu + 1,
				  (uint64_t)SV_READ_CHUNK * mtu * 2 + 5 };

	(void)state;
	failures = 0;
	for (size_t i = 0; i < sizeof(qpts) / sizeof(qpts[0]); i++) {
		uint32_t t = qpts[i];

		for (uint32_t op = 0; op < SV_OP_COUNT + 3; op++) {
			uint32_t f = sv_op_flags(op);

			if (sv_roce_req_status(t, op, true) != IBV_WC_SUCCESS ||
			    (f & SV_OPF_LOCAL))
				continue;
			for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]);
			     li++) {
				struct sv_send_wqe h;
				struct sv_roce_pkt p, q;
				struct sv_roce_seg s;
				uint8_t buf[SV_ROCE_MAX_HDR + 4096 + 8];
				uint64_t len = lens[li], got = 0;
				uint32_t k = 0, n = sv_roce_req_npkts(t, op,
								       len, mtu);
				bool end = false;

				if (t == IBV_QPT_UD && len > mtu)
					continue;
				memset(&h, 0, sizeof(h));
				h.opcode = op;
				h.flags = IBV_SEND_SOLICITED;
				h.imm = 0x11223344;
				h.rkey = 0x5566;
				h.remote_addr = 0x1000;
				h.remote_qpn = 0x77;
				while (sv_roce_req_pkt(t, op, &h, len, mtu, k, &p,
						       &s)) {
					size_t hl;
					struct sv_roce_ip ip = { .sport = 1 };

					CHECK(!end, t, op, "a packet after the "
					      "last");
					CHECK(p.opcode == sv_roce_req_opcode(
						      t, op, k == 0, s.last),
					      t, op, "packet %u: opcode 0x%02x",
					      k, p.opcode);
					p.dqpn = 0x123;
					p.psn = k;
					hl = sv_roce_build_hdr(buf, &p);
					CHECK(hl > 0, t, op, "0x%02x unbuilt",
					      p.opcode);
					if (!hl)
						break;
					memset(buf + hl, 0xab, s.len);
					hl = sv_roce_finish(buf, hl + s.len, &ip);
					CHECK(sv_roce_parse(buf, hl, &q) == 0 &&
					      q.opcode == p.opcode &&
					      q.paylen == s.len &&
					      q.ackreq == p.ackreq &&
					      q.se == p.se, t, op,
					      "0x%02x does not parse back",
					      p.opcode);
					if ((f & SV_OPF_IMM) && s.last)
						CHECK(q.imm == h.imm, t, op,
						      "immediate data lost");
					if ((f & SV_OPF_INV) && s.last)
						CHECK(q.ieth_rkey == h.imm, t,
						      op, "IETH lost");
					if (q.flags & SV_RF_RETH)
						CHECK(q.rkey == h.rkey ||
						      (f & SV_OPF_MASKED), t,
						      op, "RETH rkey lost");
					if (t == IBV_QPT_XRC_SEND)
						CHECK(q.xrcsrq == 0x77, t, op,
						      "XRCETH lost");
					/* answered alone, or a reliable
					 * message's last: an ACK asked for */
					CHECK(!(s.last &&
						(t == IBV_QPT_RC ||
						 t == IBV_QPT_XRC_SEND)) ||
					      p.ackreq, t, op,
					      "no AckReq on the last packet");
					if (f & SV_OPF_READ)
						got += q.dmalen;
					else if (!(f & (SV_OPF_ATOMIC |
							SV_OPF_AWRITE |
							SV_OPF_FLUSH)))
						got += s.len;
					end = s.last;
					k += s.span;
				}
				CHECK(end && k == n, t, op, "len %llu: %u of "
				      "%u PSNs, last %d",
				      (unsigned long long)len, k, n, end);
				if (!(f & (SV_OPF_ATOMIC | SV_OPF_AWRITE |
					   SV_OPF_FLUSH)))
					CHECK(got == len, t, op, "len %llu: "
					      "%llu bytes sent or asked for",
					      (unsigned long long)len,
					      (unsigned long long)got);
			}
		}
	}
	assert_int_equal(failures, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_wire),
		cmocka_unit_test(test_build),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
