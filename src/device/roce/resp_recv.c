// SPDX-License-Identifier: MIT
/*
 * The responder's receive WQEs (resp.c has its steps, resp_exec.c executes
 * each request): a WQE taken off the QP's ring or its SRQ for a message
 * (an RNR NAK when none is posted), its bytes written with the keys checked
 * again for every packet, its completion; a SEND into a tag-matching SRQ
 * (its TMH: a tag, or an ordinary WQE) and its completion; a UD datagram,
 * whole; and what the rest of the daemon asks of a message half received
 * (flushed in ERR, its tag released, its SRQ gone).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "device/roce/roce_int.h"

/* Complete receive WQE r (taken off t's ring by rx_take). */
static void rx_done(struct sv_qp *t, const struct rwqe *r, uint32_t status,
		    uint32_t opcode, uint32_t byte_len,
		    const struct sv_roce_pkt *p, uint8_t grh_sl, uint32_t src_qp)
{
	struct sv_cqe e;
	bool solicited = false;

	sv_cqe_init(&e, r->h.wr_id, status, opcode, t->qpn);
	e.byte_len = byte_len;
	e.src_qp = src_qp;
	if (status == IBV_WC_SUCCESS && p) {
		if (p->flags & SV_RF_IMMDT) {
			e.imm_data = p->imm;
			e.wc_flags |= IBV_WC_WITH_IMM;
		} else if (p->flags & SV_RF_IETH) {
			e.imm_data = p->ieth_rkey;
			e.wc_flags |= IBV_WC_WITH_INV;
		}
		/* a datagram: the GRH, and its network header type */
		if (grh_sl) {
			e.wc_flags |= IBV_WC_GRH;
			e.sl = grh_sl;
		}
		solicited = p->se;
	}
	sv_qp_push(t, sv_recv_cq(t, r), &e, solicited);
	if (status != IBV_WC_SUCCESS)
		sv_qp_error(t, 0);
}

/*
 * The end of a SEND into a tag-matching SRQ (rq->tm_op): a matched tag
 * leaves the list, an unexpected message that arrived whole is counted;
 * the completion is the tag's (TM_MATCH, its TMH's tag and app_ctx) or an
 * ordinary WQE's (TM_RECV, TM_NO_TAG). A matched rendezvous is not read
 * across the wire: its tag completes with IBV_WC_TM_RNDV_INCOMPLETE and
 * holds the message after the TMH (the RVH first), for software to finish
 * (docs/DESIGN.md "Tag matching").
 */
static __attribute__((noinline)) void
tm_rx_done(struct sv_qp *t, uint32_t status, uint32_t byte_len,
	   const struct sv_roce_pkt *p)
{
	struct sv_roce_qp *rq = t->roce;
	struct sv_tm *tm = rq->rx.srq ? rq->rx.srq->tm : NULL;
	struct sv_cqe e;

	if (rq->tm_tag != SV_TM_NONE) {
		if (tm)
			sv_tm_take(tm, &tm->tag[rq->tm_tag]);
		if (status == IBV_WC_SUCCESS && rq->tm_rndv)
			status = IBV_WC_TM_RNDV_INCOMPLETE;
	} else if (status == IBV_WC_SUCCESS && rq->tm_unexp && tm) {
		tm->unexp++;
	}
	sv_cqe_init(&e, rq->rx.h.wr_id, status, rq->tm_op, t->qpn);
	e.byte_len = byte_len;
	e.src_qp = rq->dqpn;
	if (status == IBV_WC_SUCCESS ||
	    status == IBV_WC_TM_RNDV_INCOMPLETE) {
		e.wc_flags = rq->tm_flags;
		if (rq->tm_flags & IBV_WC_TM_MATCH) {
			e.tm_tag = be64toh(rq->tm_tmh.tag);
			e.tm_priv = be32toh(rq->tm_tmh.app_ctx);
		}
		if (p && (p->flags & SV_RF_IMMDT)) {
			e.imm_data = p->imm;
			e.wc_flags |= IBV_WC_WITH_IMM;
		}
	}
	rq->tm_op = 0;
	sv_qp_push(t, sv_recv_cq(t, &rq->rx), &e, false);
	if (status != IBV_WC_SUCCESS && status != IBV_WC_TM_RNDV_INCOMPLETE)
		sv_qp_error(t, 0);
}

/* The connected QP's message in progress completes its receive WQE. */
void sv_roce_resp_msg_rx_done(struct sv_qp *t, uint32_t status,
			      uint32_t opcode, uint32_t byte_len,
			      const struct sv_roce_pkt *p)
{
	struct sv_roce_qp *rq = t->roce;

	rq->rx_taken = false;
	if (__builtin_expect(rq->tm_op != 0, 0)) {
		tm_rx_done(t, status, byte_len, p);
		return;
	}
	rx_done(t, &rq->rx, status, opcode, byte_len, p, 0, rq->dqpn);
}

/* Take the next receive WQE of t into r: 0, or RNR (-ENOENT), or the ring
 * is corrupt (-EIO). */
static int rx_take(struct sv_qp *t, struct rwqe *r)
{
	int ret = sv_rq_peek(t, r);

	if (ret)
		return ret;
	sv_rq_commit(r);
	return 0;
}

/* The connected QP's message takes its receive WQE. */
static int msg_rx_take(struct sv_qp *t)
{
	struct sv_roce_qp *rq = t->roce;
	int ret = rx_take(t, &rq->rx);

	if (ret)
		return ret;
	rq->rx_taken = true;
	rq->rx_off = 0;
	return 0;
}

/* Copy len bytes of data to byte off of taken receive WQE r: a status. */
uint32_t sv_roce_resp_rx_put(struct sv_qp *t, struct rwqe *r, uint64_t off,
			     const void *data, uint32_t len)
{
	struct sv_exec x;
	struct span s;
	uint32_t st;

	/* checked again for every packet: the lock was let go between */
	st = sv_rq_resolve(t, r);
	if (st != IBV_WC_SUCCESS)
		return st;
	if (off + len > r->cap)
		return IBV_WC_LOC_LEN_ERR;
	if (!len)
		return IBV_WC_SUCCESS;
	sv_roce_exec(&x);
	sv_span_raw(&s, (void *)data, len);
	if (sv_span_copy(&x, &r->mem, off, &s, 0, len) != SV_COPY_OK)
		return IBV_WC_LOC_PROT_ERR;
	return IBV_WC_SUCCESS;
}

/* Take a receive WQE for the message of packet psn: true; or false, and
 * an RNR NAK (RC, none posted) or a NAK and ERR (the ring is bad). */
bool sv_roce_resp_take_or_nak(struct sv_qp *t, struct sv_roce_tx *tx,
			      uint32_t psn)
{
	/* softverbs inject: as if none were posted */
	int ret = sv_inject_resp(t, true) ? -ENOENT : msg_rx_take(t);

	if (ret == -ENOENT) {
		if (sv_roce_resp_is_rc(t)) {
			sv_roce_send_ack(tx, t->roce,
					 SV_AETH_RNR(t->attr.min_rnr_timer), psn);
			sv_roce_stats.rnr_naks_sent++;
		} else {
			sv_roce_drop(SV_RX_DROP_NORES);
		}
		return false;
	}
	if (ret) {
		sv_roce_resp_nak(t, tx, SV_OUTCOME_RECV_ERR, psn);
		return false;
	}
	return true;
}

/*
 * The first packet of a SEND into a tag-matching SRQ: its TMH (the first
 * 16 bytes) says where the message goes (loop/resp.c's deliver_tm on one
 * host): an EAGER or RNDV whose tag matches (sv_tm_match) fills the
 * tagged buffer from the byte after the TMH, the tag busy until the last
 * packet; anything else takes an ordinary receive WQE, whole. true: taken
 * (*skip: the bytes of this packet not placed); false: answered (RNR).
 */
__attribute__((noinline)) bool
sv_roce_resp_tm_take(struct sv_qp *t, const struct sv_roce_pkt *p,
		     struct sv_roce_tx *tx, uint32_t *skip)
{
	struct sv_roce_qp *rq = t->roce;
	struct sv_tm *tm = t->srq->tm;
	struct sv_tm_tag *g = NULL;
	struct ibv_tmh h;
	uint32_t op = IBV_WC_TM_NO_TAG;

	/* the ops posted before the message came apply first */
	sv_tm_drain(t->srq);
	memset(&h, 0, sizeof(h));
	if (p->paylen >= sizeof(h))
		memcpy(&h, p->payload, sizeof(h));
	/* an SRQ in error (a corrupt ring): take_or_nak NAKs */
	if (p->paylen >= sizeof(h) && !t->srq->in_error &&
	    (h.opcode == IBV_TMH_EAGER ||
	     (h.opcode == IBV_TMH_RNDV &&
	      p->paylen >= sizeof(h) + sizeof(struct ibv_rvh)))) {
		op = IBV_WC_TM_RECV;
		g = sv_tm_match(tm, be64toh(h.tag));
	}
	*skip = 0;
	if (!g) {
		if (!sv_roce_resp_take_or_nak(t, tx, p->psn))
			return false;
		rq->tm_tag = SV_TM_NONE;
		rq->tm_flags = 0;
		rq->tm_unexp = op == IBV_WC_TM_RECV;
		rq->tm_rndv = false;
	} else {
		memset(&rq->rx.h, 0, sizeof(rq->rx.h));
		rq->rx.h.wr_id = g->wr_id;
		rq->rx.h.num_sge = g->num_sge;
		rq->rx.sge[0] = g->sge;
		rq->rx.srq = t->srq;
		rq->rx.wq = NULL;
		rq->rx_taken = true;
		rq->rx_off = 0;
		g->busy = true;
		rq->tm_tag = (uint32_t)(g - tm->tag);
		rq->tm_unexp = false;
		rq->tm_rndv = h.opcode == IBV_TMH_RNDV;
		rq->tm_flags = rq->tm_rndv ? IBV_WC_TM_MATCH :
			       IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;
		*skip = sizeof(h);
	}
	rq->tm_op = op;
	rq->tm_tmh = h;
	return true;
}

/* UD: one datagram; trouble drops it silently. */
void sv_roce_resp_ud_recv(struct sv_qp *t, const struct sv_roce_pkt *p,
			  const struct sv_roce_ip *ip)
{
	uint8_t grh[SV_GRH_BYTES];
	struct rwqe r;
	uint32_t st;

	if (p->qkey != t->attr.qkey) {
		sv_roce_drop(SV_RX_DROP_QKEY);
		return;
	}
	if (rx_take(t, &r)) {
		sv_roce_drop(SV_RX_DROP_NORES);
		return;
	}
	sv_grh_build(grh, ip->src, ip->dst, 0, 0, 64, p->paylen,
		     (p->flags & SV_RF_IMMDT) != 0);
	st = sv_roce_resp_rx_put(t, &r, 0, grh, sizeof(grh));
	if (st == IBV_WC_SUCCESS)
		st = sv_roce_resp_rx_put(t, &r, sizeof(grh), p->payload,
					 p->paylen);
	rx_done(t, &r, st, IBV_WC_RECV,
		st == IBV_WC_SUCCESS ? (uint32_t)sizeof(grh) + p->paylen : 0,
		p, sv_grh_wc_sl(ip->src), p->sqpn);
}

int sv_roce_srq_gone(struct sv_qp *t, const struct sv_srq *srq)
{
	struct sv_roce_qp *rq = t->roce;

	/* a message half received into it ends (flushed) while it lives */
	if (rq && rq->rx_taken && rq->rx.srq == srq) {
		struct sv_cqe e;

		/* its WQE completes flushed; the target, which the whole
		 * domain may share, stays (the message's next packet names
		 * an SRQ that is gone: NAK, the initiator fails) */
		rq->in = SV_IN_NONE;
		rq->rx_taken = false;
		sv_cqe_init(&e, rq->rx.h.wr_id, IBV_WC_WR_FLUSH_ERR,
			    IBV_WC_RECV, t->qpn);
		e.src_qp = rq->dqpn;
		sv_qp_push(t, sv_recv_cq(t, &rq->rx), &e, false);
		return 1;
	}
	return 0;
}

int sv_roce_flush(struct sv_qp *qp)
{
	struct sv_roce_qp *rq = qp->roce;

	if (!rq || !rq->rx_taken)
		return false;
	rq->in = SV_IN_NONE;
	sv_roce_resp_msg_rx_done(qp, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0,
				 NULL);
	return true;
}

void sv_roce_tm_release(struct sv_qp *qp)
{
	struct sv_roce_qp *rq = qp->roce;

	/* nothing of the message completed: the tag may match again */
	if (rq && rq->rx_taken && rq->tm_op && rq->tm_tag != SV_TM_NONE &&
	    rq->rx.srq && rq->rx.srq->tm)
		rq->rx.srq->tm->tag[rq->tm_tag].busy = false;
	if (rq)
		rq->tm_op = 0;
}

int sv_roce_flush_pending(const struct sv_qp *qp)
{
	return qp->roce && qp->roce->rx_taken;
}
