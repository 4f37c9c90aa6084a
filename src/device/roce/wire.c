// SPDX-License-Identifier: MIT
/*
 * RoCEv2 headers (wire.h): the opcode table, and the parser and builder of
 * BTH and the extended headers. Pure functions, no daemon state. Every
 * packet handed to sv_roce_parse comes from the network: it reads no byte
 * before it has checked that the byte is there.
 */
#include <errno.h>
#include <string.h>

#include "device/roce/wire.h"

/* The largest UDP payload an IPv4 or IPv6 (non-jumbo) datagram carries. */
#define SV_ROCE_MAX_UDP (65535u - 8u)

/* ================= the opcode table ================= */

/* One entry: opcode `T_op` is named "T_op", belongs to transport T, and
 * carries BTH plus the headers whose sizes are summed in hdr. */
#define OP(T, op, fl, hdr) \
	[SV_OP_##T##_##op] = { .flags = SV_RF_##T | (fl), \
			       .hdr_bytes = SV_BTH_BYTES + (hdr), \
			       .name = #T "_" #op }

/* XRC: RC's operations; the requests carry an XRCETH. */
#define XREQ(T, op, fl, hdr) \
	OP(T, op, (fl) | SV_RF_XRCETH, SV_XRCETH_BYTES + (hdr))

/* SEND and RDMA WRITE exist on RC, UC and XRC alike; R makes a request's
 * entry (OP, or XREQ for XRC). */
#define REQ_SEND  (SV_RF_REQ | SV_RF_SEND | SV_RF_PAYLOAD)
#define REQ_WRITE (SV_RF_REQ | SV_RF_WRITE | SV_RF_PAYLOAD)
#define SEND_WRITE_OPS(T, R) \
	R(T, SEND_FIRST,     REQ_SEND | SV_RF_FIRST, 0), \
	R(T, SEND_MIDDLE,    REQ_SEND | SV_RF_MIDDLE, 0), \
	R(T, SEND_LAST,      REQ_SEND | SV_RF_LAST, 0), \
	R(T, SEND_LAST_IMM,  REQ_SEND | SV_RF_LAST | SV_RF_IMMDT, \
	  SV_IMMDT_BYTES), \
	R(T, SEND_ONLY,      REQ_SEND | SV_RF_ONLY, 0), \
	R(T, SEND_ONLY_IMM,  REQ_SEND | SV_RF_ONLY | SV_RF_IMMDT, \
	  SV_IMMDT_BYTES), \
	R(T, WRITE_FIRST,    REQ_WRITE | SV_RF_FIRST | SV_RF_RETH, \
	  SV_RETH_BYTES), \
	R(T, WRITE_MIDDLE,   REQ_WRITE | SV_RF_MIDDLE, 0), \
	R(T, WRITE_LAST,     REQ_WRITE | SV_RF_LAST, 0), \
	R(T, WRITE_LAST_IMM, REQ_WRITE | SV_RF_LAST | SV_RF_IMMDT, \
	  SV_IMMDT_BYTES), \
	R(T, WRITE_ONLY,     REQ_WRITE | SV_RF_ONLY | SV_RF_RETH, \
	  SV_RETH_BYTES), \
	R(T, WRITE_ONLY_IMM, REQ_WRITE | SV_RF_ONLY | SV_RF_RETH | \
	  SV_RF_IMMDT, SV_RETH_BYTES + SV_IMMDT_BYTES)

/* The reliable connection's operations (RC, and XRC with R = XREQ): SEND,
 * WRITE, READ, atomics, SEND with invalidate, and the responses. */
#define RESP_READ (SV_RF_RESP | SV_RF_READ | SV_RF_PAYLOAD)
#define RELIABLE_OPS(T, R) \
	SEND_WRITE_OPS(T, R), \
	R(T, READ_REQ,           SV_RF_REQ | SV_RF_READ | SV_RF_ONLY | \
	  SV_RF_RETH, SV_RETH_BYTES), \
	OP(T, READ_RESP_FIRST,   RESP_READ | SV_RF_FIRST | SV_RF_AETH, \
	   SV_AETH_BYTES), \
	OP(T, READ_RESP_MIDDLE,  RESP_READ | SV_RF_MIDDLE, 0), \
	OP(T, READ_RESP_LAST,    RESP_READ | SV_RF_LAST | SV_RF_AETH, \
	   SV_AETH_BYTES), \
	OP(T, READ_RESP_ONLY,    RESP_READ | SV_RF_ONLY | SV_RF_AETH, \
	   SV_AETH_BYTES), \
	OP(T, ACK,               SV_RF_RESP | SV_RF_ONLY | SV_RF_AETH, \
	   SV_AETH_BYTES), \
	OP(T, ATOMIC_ACK,        SV_RF_RESP | SV_RF_ATOMIC | SV_RF_ONLY | \
	   SV_RF_AETH | SV_RF_ATMACK, SV_AETH_BYTES + SV_ATMACK_BYTES), \
	R(T, CMP_SWAP,           SV_RF_REQ | SV_RF_ATOMIC | SV_RF_ONLY | \
	  SV_RF_ATMETH, SV_ATMETH_BYTES), \
	R(T, FETCH_ADD,          SV_RF_REQ | SV_RF_ATOMIC | SV_RF_ONLY | \
	  SV_RF_ATMETH, SV_ATMETH_BYTES), \
	R(T, SEND_LAST_INV,      REQ_SEND | SV_RF_LAST | SV_RF_IETH, \
	  SV_IETH_BYTES), \
	R(T, SEND_ONLY_INV,      REQ_SEND | SV_RF_ONLY | SV_RF_IETH, \
	  SV_IETH_BYTES)

static const struct sv_roce_opinfo sv_roce_ops[256] = {
	RELIABLE_OPS(RC, OP),
	OP(RC, MASKED_CMP_SWAP,  SV_RF_REQ | SV_RF_ATOMIC | SV_RF_ONLY |
	   SV_RF_ATMETH | SV_RF_MASKED, SV_MATMETH_BYTES),
	OP(RC, MASKED_FETCH_ADD, SV_RF_REQ | SV_RF_ATOMIC | SV_RF_ONLY |
	   SV_RF_ATMETH | SV_RF_MASKED, SV_MATMETH_BYTES),
	OP(RC, FLUSH,            SV_RF_REQ | SV_RF_FLUSH | SV_RF_ONLY |
	   SV_RF_FETH | SV_RF_RETH, SV_FETH_BYTES + SV_RETH_BYTES),
	OP(RC, ATOMIC_WRITE,     SV_RF_REQ | SV_RF_AWRITE | SV_RF_ONLY |
	   SV_RF_RETH | SV_RF_PAYLOAD, SV_RETH_BYTES),

	SEND_WRITE_OPS(UC, OP),

	RELIABLE_OPS(XRC, XREQ),

	OP(UD, SEND_ONLY,        REQ_SEND | SV_RF_ONLY | SV_RF_DETH,
	   SV_DETH_BYTES),
	OP(UD, SEND_ONLY_IMM,    REQ_SEND | SV_RF_ONLY | SV_RF_DETH |
	   SV_RF_IMMDT, SV_DETH_BYTES + SV_IMMDT_BYTES),
};

#undef OP
#undef XREQ
#undef RELIABLE_OPS
#undef SEND_WRITE_OPS
#undef REQ_SEND
#undef REQ_WRITE
#undef RESP_READ

const struct sv_roce_opinfo *sv_roce_op(uint8_t opcode)
{
	const struct sv_roce_opinfo *op = &sv_roce_ops[opcode];

	return op->flags ? op : NULL;
}

/* ================= parse ================= */

int sv_roce_parse(const uint8_t *buf, size_t len, struct sv_roce_pkt *p)
{
	const struct sv_roce_opinfo *op;
	const uint8_t *h;
	size_t body;

	if (len < SV_BTH_BYTES + SV_ICRC_BYTES || len > SV_ROCE_MAX_UDP)
		return -EINVAL;
	*p = (struct sv_roce_pkt){ 0 };
	p->opcode = buf[0];

	/* BTH; the reserved bits of bytes 4 and 8 are ignored */
	p->se = buf[1] >> 7;
	p->migreq = buf[1] >> 6 & 1;
	p->pad = buf[1] >> 4 & 3;
	p->tver = buf[1] & 0xf;
	if (p->tver != 0)
		return -EINVAL;
	p->pkey = sv_get_be16(buf + 2);
	p->fecn = buf[4] >> 7;
	p->becn = buf[4] >> 6 & 1;
	p->dqpn = sv_get_be24(buf + 5);
	p->ackreq = buf[8] >> 7;
	p->psn = sv_get_be24(buf + 9);
	op = sv_roce_op(buf[0]);
	if (!op)
		return -EOPNOTSUPP;     /* the BTH is there: see wire.h */
	if (len < (size_t)op->hdr_bytes + SV_ICRC_BYTES)
		return -EINVAL;
	p->flags = op->flags;

	/* what is left after the headers and the ICRC is payload and pad */
	body = len - op->hdr_bytes - SV_ICRC_BYTES;
	if (!(op->flags & SV_RF_PAYLOAD)) {
		if (body != 0 || p->pad != 0)
			return -EINVAL;
	} else if (body < p->pad) {
		return -EINVAL;
	}
	p->payload = buf + op->hdr_bytes;
	p->paylen = (uint32_t)(body - p->pad);

	/* the extended headers, in their wire order */
	h = buf + SV_BTH_BYTES;
	if (op->flags & SV_RF_XRCETH) {
		p->xrcsrq = sv_get_be24(h + 1);  /* h[0] is reserved */
		h += SV_XRCETH_BYTES;
	}
	if (op->flags & SV_RF_DETH) {
		p->qkey = sv_get_be32(h);
		p->sqpn = sv_get_be24(h + 5);   /* h[4] is reserved */
		h += SV_DETH_BYTES;
	}
	if (op->flags & SV_RF_FETH) {
		p->feth = sv_get_be32(h);
		h += SV_FETH_BYTES;
	}
	if (op->flags & SV_RF_RETH) {
		p->va = sv_get_be64(h);
		p->rkey = sv_get_be32(h + 8);
		p->dmalen = sv_get_be32(h + 12);
		h += SV_RETH_BYTES;
	}
	if (op->flags & SV_RF_ATMETH) {
		p->va = sv_get_be64(h);
		p->rkey = sv_get_be32(h + 8);
		p->swap_add = sv_get_be64(h + 12);
		p->compare = sv_get_be64(h + 20);
		h += SV_ATMETH_BYTES;
		if (op->flags & SV_RF_MASKED) {
			p->swap_mask = sv_get_be64(h);
			p->compare_mask = sv_get_be64(h + 8);
			h += SV_MATMETH_BYTES - SV_ATMETH_BYTES;
		}
	}
	if (op->flags & SV_RF_AETH) {
		p->syndrome = h[0];
		p->msn = sv_get_be24(h + 1);
		h += SV_AETH_BYTES;
	}
	if (op->flags & SV_RF_ATMACK) {
		p->orig = sv_get_be64(h);
		h += SV_ATMACK_BYTES;
	}
	if (op->flags & SV_RF_IMMDT) {
		memcpy(&p->imm, h, 4);
		h += SV_IMMDT_BYTES;
	}
	if (op->flags & SV_RF_IETH) {
		p->ieth_rkey = sv_get_be32(h);
		h += SV_IETH_BYTES;
	}
	return 0;
}

/* ================= build ================= */

size_t sv_roce_build_hdr(uint8_t *buf, const struct sv_roce_pkt *p)
{
	const struct sv_roce_opinfo *op = sv_roce_op(p->opcode);
	uint8_t *h;

	if (!op)
		return 0;

	buf[0] = p->opcode;
	buf[1] = (uint8_t)(p->se << 7 | p->migreq << 6 | (p->pad & 3) << 4 |
			   (p->tver & 0xf));
	sv_put_be16(buf + 2, p->pkey);
	buf[4] = (uint8_t)(p->fecn << 7 | p->becn << 6);
	sv_put_be24(buf + 5, p->dqpn);
	buf[8] = (uint8_t)(p->ackreq << 7);
	sv_put_be24(buf + 9, p->psn);

	h = buf + SV_BTH_BYTES;
	if (op->flags & SV_RF_XRCETH) {
		h[0] = 0;
		sv_put_be24(h + 1, p->xrcsrq);
		h += SV_XRCETH_BYTES;
	}
	if (op->flags & SV_RF_DETH) {
		sv_put_be32(h, p->qkey);
		h[4] = 0;
		sv_put_be24(h + 5, p->sqpn);
		h += SV_DETH_BYTES;
	}
	if (op->flags & SV_RF_FETH) {
		sv_put_be32(h, p->feth);
		h += SV_FETH_BYTES;
	}
	if (op->flags & SV_RF_RETH) {
		sv_put_be64(h, p->va);
		sv_put_be32(h + 8, p->rkey);
		sv_put_be32(h + 12, p->dmalen);
		h += SV_RETH_BYTES;
	}
	if (op->flags & SV_RF_ATMETH) {
		sv_put_be64(h, p->va);
		sv_put_be32(h + 8, p->rkey);
		sv_put_be64(h + 12, p->swap_add);
		sv_put_be64(h + 20, p->compare);
		h += SV_ATMETH_BYTES;
		if (op->flags & SV_RF_MASKED) {
			sv_put_be64(h, p->swap_mask);
			sv_put_be64(h + 8, p->compare_mask);
			h += SV_MATMETH_BYTES - SV_ATMETH_BYTES;
		}
	}
	if (op->flags & SV_RF_AETH) {
		h[0] = p->syndrome;
		sv_put_be24(h + 1, p->msn);
		h += SV_AETH_BYTES;
	}
	if (op->flags & SV_RF_ATMACK) {
		sv_put_be64(h, p->orig);
		h += SV_ATMACK_BYTES;
	}
	if (op->flags & SV_RF_IMMDT) {
		memcpy(h, &p->imm, 4);
		h += SV_IMMDT_BYTES;
	}
	if (op->flags & SV_RF_IETH) {
		sv_put_be32(h, p->ieth_rkey);
		h += SV_IETH_BYTES;
	}
	return (size_t)(h - buf);
}

size_t sv_roce_finish(uint8_t *buf, size_t hdr_plus_payload,
		      const struct sv_roce_ip *ip)
{
	size_t n = hdr_plus_payload;
	unsigned int pad = (unsigned int)(-n & 3);
	uint32_t icrc;

	memset(buf + n, 0, pad);
	buf[1] = (uint8_t)((buf[1] & ~0x30) | pad << 4);
	n += pad;
	icrc = htole32(sv_roce_icrc(ip, buf, n));
	memcpy(buf + n, &icrc, SV_ICRC_BYTES);
	return n + SV_ICRC_BYTES;
}

uint8_t sv_roce_data_opcode(bool send, bool imm, bool inv, bool first,
			    bool last)
{
	if (send) {
		if (first && last)
			return imm ? SV_OP_RC_SEND_ONLY_IMM :
			       inv ? SV_OP_RC_SEND_ONLY_INV :
				     SV_OP_RC_SEND_ONLY;
		if (first)
			return SV_OP_RC_SEND_FIRST;
		if (last)
			return imm ? SV_OP_RC_SEND_LAST_IMM :
			       inv ? SV_OP_RC_SEND_LAST_INV :
				     SV_OP_RC_SEND_LAST;
		return SV_OP_RC_SEND_MIDDLE;
	}
	if (first && last)
		return imm ? SV_OP_RC_WRITE_ONLY_IMM : SV_OP_RC_WRITE_ONLY;
	if (first)
		return SV_OP_RC_WRITE_FIRST;
	if (last)
		return imm ? SV_OP_RC_WRITE_LAST_IMM : SV_OP_RC_WRITE_LAST;
	return SV_OP_RC_WRITE_MIDDLE;
}

/* ================= UDP source port ================= */

uint16_t sv_roce_sport(uint32_t src_qpn, uint32_t dst_qpn)
{
	/* A 20-bit flow label from the product of the two QPNs, folded to
	 * 14 bits, in the dynamic port range (the same hash as Linux). */
	uint64_t v = (uint64_t)(src_qpn & SV_QPN_MASK) * (dst_qpn & SV_QPN_MASK);
	uint32_t fl;

	v ^= v >> 20;
	v ^= v >> 40;
	fl = (uint32_t)v & 0xfffff;
	return (uint16_t)(0xc000 | ((fl ^ fl >> 14) & 0x3fff));
}
