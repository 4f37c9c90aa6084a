/* SPDX-License-Identifier: MIT */
/*
 * A send WQE as RoCEv2 request packets: which BTH opcode each packet has
 * on the QP's transport, and its headers, from the one opcode table
 * (abi/sv_op.h) and the wire's (wire.h). The requester (req.c) sends what
 * sv_roce_req_pkt builds, and capture (diag/capture.c) renders a same-host
 * message with the same function, so that it shows what the wire would
 * have carried. Pure functions, no daemon state (unit tests link them:
 * tests/unit/test_op_verdict.c).
 */
#ifndef SV_DEVICE_ROCE_BUILD_H
#define SV_DEVICE_ROCE_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "abi/sv_qp.h"
#include "device/roce/wire.h"

/* Responses one READ request asks for at most (a long READ is several
 * requests, each with its own PSNs). */
#define SV_READ_CHUNK   64u

/* The transport bit (wire.h's SV_RF_RC, _UC, _UD or _XRC) of the packets
 * between a QP of qp_type and its peer (XRC for both halves of XRC); 0 for
 * a QP type with no RoCEv2 transport. */
uint32_t sv_roce_qpt_transport(uint32_t qp_type);

/* Does a responder QP of qp_type take a packet of wire flags rf (its own
 * transport's; an XRC initiator takes requests of none)? resp.c's check. */
bool sv_roce_resp_takes(uint32_t qp_type, uint32_t rf);

/* The BTH opcode of a request packet of WQE opcode op sent by a QP of
 * qp_type, at its place in the message (first, last), made from op's
 * flags and qp_type's transport alone: -1 for an opcode that sends no
 * packet (a local one, an unknown one) or whose operation the transport's
 * numbering has no room for. It may name an opcode that the wire table
 * does not have (a READ over UC): sv_roce_req_status refuses those. */
int sv_roce_req_opcode(uint32_t qp_type, uint32_t op, bool first, bool last);

/* The RoCEv2 requester's verdict on a WQE of op on a QP of qp_type: the
 * table's (sv_op_req_status), and a message opcode whose request has no
 * packet of qp_type's transport in the wire table is refused too (it is
 * never sent with another transport's opcode). IBV_WC_SUCCESS or
 * IBV_WC_LOC_QP_OP_ERR. */
uint32_t sv_roce_req_status(uint32_t qp_type, uint32_t op, bool masked_ok);

/* What a request packet takes beyond its headers. */
struct sv_roce_seg {
	uint32_t span;          /* its PSNs (a READ request: its responses') */
	bool last;              /* the message's last request packet */
	uint64_t off;           /* its payload: len bytes of the message */
	uint32_t len;           /* from off, */
	const void *raw;        /* or these (an ATOMIC WRITE's 8, in h) */
};

/* The request packets of a message of len bytes of op (1 for an atomic,
 * an ATOMIC WRITE, a FLUSH and a datagram). */
uint32_t sv_roce_req_npkts(uint32_t qp_type, uint32_t op, uint64_t len,
			   uint32_t mtu);

/*
 * Request packet k (k PSNs past the message's first; a READ's requests
 * are SV_READ_CHUNK apart) of a message of len bytes of op (an opcode
 * sv_roce_req_status takes), WQE h, from a QP of qp_type, cut at mtu: *p
 * zeroed, then its opcode, P_Key (the default), SE, AckReq and extended
 * headers (XRCETH, FETH, RETH, AtomicETH, ImmDt, IETH), and *s. The caller
 * sets the PSN, the destination QP and a datagram's DETH. AckReq is set on
 * every request answered alone (READ, atomics, ATOMIC WRITE, FLUSH) and on
 * a reliable message's last packet; a requester may ask more often. false:
 * no such packet (nothing written to *s).
 */
bool sv_roce_req_pkt(uint32_t qp_type, uint32_t op,
		     const struct sv_send_wqe *h, uint64_t len, uint32_t mtu,
		     uint32_t k, struct sv_roce_pkt *p, struct sv_roce_seg *s);

#endif /* SV_DEVICE_ROCE_BUILD_H */
