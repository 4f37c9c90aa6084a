// SPDX-License-Identifier: MIT
/*
 * A send WQE as RoCEv2 request packets (build.h): the opcode of each from
 * the opcode table's flags (abi/sv_op.h) and the transport's numbering
 * (wire.h), the headers from the WQE. The one place that does it: the
 * requester (req.c) and capture (diag/capture.c) both call sv_roce_req_pkt.
 */
#include <string.h>

#include <infiniband/verbs.h>

#include "abi/sv_op.h"
#include "device/roce/build.h"

uint32_t sv_roce_qpt_transport(uint32_t qp_type)
{
	switch (qp_type) {
	case IBV_QPT_RC:
		return SV_RF_RC;
	case IBV_QPT_UC:
		return SV_RF_UC;
	case IBV_QPT_UD:
		return SV_RF_UD;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return SV_RF_XRC;
	default:
		return 0;
	}
}

bool sv_roce_resp_takes(uint32_t qp_type, uint32_t rf)
{
	return qp_type != IBV_QPT_XRC_SEND &&
	       (rf & sv_roce_qpt_transport(qp_type)) != 0;
}

/* The opcode base of qp_type's requests (wire.h): RC 0, UC 0x20, UD 0x60,
 * XRC 0xa0; -1 for a QP type that sends none. */
static int op_base(uint32_t qp_type)
{
	switch (qp_type) {
	case IBV_QPT_RC:
		return 0x00;
	case IBV_QPT_UC:
		return 0x20;
	case IBV_QPT_UD:
		return 0x60;
	case IBV_QPT_XRC_SEND:
		return SV_OP_XRC_BASE;
	default:
		return -1;
	}
}

int sv_roce_req_opcode(uint32_t qp_type, uint32_t op, bool first, bool last)
{
	uint32_t f = sv_op_flags(op);
	int base = op_base(qp_type), rc;

	if (base < 0 || !(f & SV_OPF_QPTS) || (f & SV_OPF_LOCAL))
		return -1;
	/* which atomic: the WQE opcode's own (the completion's opcode
	 * says which) */
	if (f & SV_OPF_MASKED)
		rc = sv_op_wc(op) == SV_WC_MASKED_COMP_SWAP ?
		     SV_OP_RC_MASKED_CMP_SWAP : SV_OP_RC_MASKED_FETCH_ADD;
	else if (f & SV_OPF_ATOMIC)
		rc = sv_op_wc(op) == IBV_WC_COMP_SWAP ? SV_OP_RC_CMP_SWAP :
							SV_OP_RC_FETCH_ADD;
	else if (f & SV_OPF_READ)
		rc = SV_OP_RC_READ_REQ;
	else if (f & SV_OPF_AWRITE)
		rc = SV_OP_RC_ATOMIC_WRITE;
	else if (f & SV_OPF_FLUSH)
		rc = SV_OP_RC_FLUSH;
	else if (f & SV_OPF_PAYLOAD)
		rc = sv_roce_data_opcode((f & SV_OPF_SEND) != 0,
					 (f & SV_OPF_IMM) != 0,
					 (f & SV_OPF_INV) != 0, first, last);
	else
		return -1;
	return base + rc <= 0xff ? base + rc : -1;
}

uint32_t sv_roce_req_status(uint32_t qp_type, uint32_t op, bool masked_ok)
{
	uint32_t st = sv_op_req_status(qp_type, op, masked_ok);
	const struct sv_roce_opinfo *o;
	int opc;

	if (st != IBV_WC_SUCCESS || (sv_op_flags(op) & SV_OPF_LOCAL))
		return st;
	opc = sv_roce_req_opcode(qp_type, op, true, true);
	o = opc < 0 ? NULL : sv_roce_op((uint8_t)opc);
	if (!o || !(o->flags & SV_RF_REQ) ||
	    !(o->flags & sv_roce_qpt_transport(qp_type)))
		return IBV_WC_LOC_QP_OP_ERR;
	return IBV_WC_SUCCESS;
}

uint32_t sv_roce_req_npkts(uint32_t qp_type, uint32_t op, uint64_t len,
			   uint32_t mtu)
{
	uint32_t f = sv_op_flags(op);

	if ((f & (SV_OPF_ATOMIC | SV_OPF_AWRITE | SV_OPF_FLUSH)) || !len ||
	    qp_type == IBV_QPT_UD)
		return 1;
	return (uint32_t)((len + mtu - 1) / mtu);
}

bool sv_roce_req_pkt(uint32_t qp_type, uint32_t op,
		     const struct sv_send_wqe *h, uint64_t len, uint32_t mtu,
		     uint32_t k, struct sv_roce_pkt *p, struct sv_roce_seg *s)
{
	uint32_t f = sv_op_flags(op), n = sv_roce_req_npkts(qp_type, op, len,
							    mtu);
	uint64_t off = (uint64_t)k * mtu;
	bool reliable = qp_type == IBV_QPT_RC || qp_type == IBV_QPT_XRC_SEND,
	     send = (f & SV_OPF_SEND) != 0, imm = (f & SV_OPF_IMM) != 0;
	int opc;

	if (k >= n)
		return false;
	memset(p, 0, sizeof(*p));
	*s = (struct sv_roce_seg){ .span = 1, .last = k + 1 >= n };
	p->pkey = SV_PKEY_DEFAULT;
	/* XRC: every request names the responder's SRQ */
	p->xrcsrq = h->remote_qpn & SV_SRQN_MASK;
	if (f & SV_OPF_READ) {
		/* a request for at most SV_READ_CHUNK responses of what is
		 * still missing: a lost response costs the rest of its
		 * request, not the rest of the READ */
		s->span = n - k < SV_READ_CHUNK ? n - k : SV_READ_CHUNK;
		s->last = k + s->span >= n;
		p->va = h->remote_addr + off;
		p->rkey = h->rkey;
		p->dmalen = (uint32_t)(len - off < (uint64_t)s->span * mtu ?
				       len - off : (uint64_t)s->span * mtu);
		p->ackreq = true;
	} else if (f & SV_OPF_MASKED) {
		/* MaskedAtomicETH (wire.h); the rkey travels in imm */
		p->va = h->masked.remote_addr;
		p->rkey = h->imm;
		if (sv_op_wc(op) == SV_WC_MASKED_COMP_SWAP) {
			p->swap_add = h->masked.swap;
			p->compare = h->masked.compare_add;
			p->swap_mask = h->masked.swap_mask;
			p->compare_mask = h->masked.compare_mask;
		} else {
			p->swap_add = h->masked.compare_add;
			p->compare = h->masked.swap;    /* field ends */
		}
		p->ackreq = true;
	} else if (f & SV_OPF_ATOMIC) {
		p->va = h->remote_addr;
		p->rkey = h->rkey;
		p->swap_add = sv_op_wc(op) == IBV_WC_COMP_SWAP ?
			      h->atomic.swap : h->atomic.compare_add;
		p->compare = h->atomic.compare_add;
		p->ackreq = true;
	} else if (f & SV_OPF_AWRITE) {
		/* RETH and the WQE's 8 bytes */
		p->va = h->remote_addr;
		p->rkey = h->rkey;
		p->dmalen = 8;
		p->ackreq = true;
		s->raw = &h->atomic.swap;
		s->len = 8;
	} else if (f & SV_OPF_FLUSH) {
		/* FETH and RETH (the RETH's length: the range's; MR
		 * selectivity ignores it), no payload */
		p->feth = SV_FETH(SV_FLUSH_WQE_TYPE(h->atomic.swap),
				  SV_FLUSH_WQE_LEVEL(h->atomic.swap));
		p->va = h->remote_addr;
		p->rkey = h->rkey;
		p->dmalen = (uint32_t)h->atomic.compare_add;
		p->ackreq = true;
	} else {
		/* SEND or RDMA WRITE: cut at the MTU (a datagram is one
		 * packet), the RETH on a WRITE's first */
		s->off = off;
		s->len = (uint32_t)(qp_type == IBV_QPT_UD ? len :
				    len - off < mtu ? len - off : mtu);
		if (!send && k == 0) {
			p->va = h->remote_addr;
			p->rkey = h->rkey;
			p->dmalen = (uint32_t)len;
		}
		if (imm)
			p->imm = h->imm;
		if (f & SV_OPF_INV)
			p->ieth_rkey = h->imm;
		p->se = s->last && (send || imm) &&
			(h->flags & IBV_SEND_SOLICITED);
		p->ackreq = reliable && s->last;
	}
	opc = sv_roce_req_opcode(qp_type, op, k == 0, s->last);
	if (opc < 0)
		return false;
	p->opcode = (uint8_t)opc;
	return true;
}
