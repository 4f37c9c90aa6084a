// SPDX-License-Identifier: MIT
/*
 * The requester and the completer of a wire QP (RC and UC).
 *
 * The requester (the QP's engine, sv_roce_step) takes WQEs from the send
 * ring into a private window (struct sv_rwin: the WQE is copied out and
 * checked once; its ring slot is consumed only when it completes, so the
 * send queue's room stays what the application sized), gives each its PSNs,
 * and sends their packets from a cursor (cur, cur_pkt): segmentation at the
 * path MTU, an ACK request on each message's last packet and every
 * SV_ACKREQ_EVERY packets, at most SV_PKT_WIN packets unacknowledged and
 * max_rd_atomic READs and atomics outstanding.
 *
 * The completer (the wire thread, sv_roce_comp_rx) takes ACKs, NAKs, READ
 * responses and atomic ACKs. Completion is in order: an ACK of PSN p
 * completes every SEND and WRITE that ends at or before p, and a READ or
 * atomic once its answer is in. Going back (go-back-N) is only ever moving
 * the cursor back: on a sequence NAK to its PSN, on an RNR NAK after the
 * responder's timer, on a gap in READ responses to the first missing one,
 * on the retransmission timer to the oldest unacknowledged PSN. The
 * responder's duplicate detection makes packets sent twice harmless.
 *
 * UC: no ACKs; a WQE completes once its last packet is handed to the
 * kernel.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "abi/sv_op.h"
#include "device/roce/roce_int.h"

static inline struct sv_rwin *rwin(const struct sv_roce_qp *rq, uint32_t n)
{
	return &rq->win[n & (SV_RQ_WIN - 1)];
}

static inline uint32_t wire_base(const struct sv_qp *qp)
{
	return qp->type == IBV_QPT_UC ? 0x20u :
	       qp->type == IBV_QPT_XRC_SEND ? SV_OP_XRC_BASE : 0x00u;
}

/* RC and XRC initiators: acknowledged, retried */
static inline bool reliable(const struct sv_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND;
}

static uint64_t timeout_ns(const struct sv_qp *qp)
{
	return sv_ack_timeout_ns(qp->attr.timeout);
}

/* ---- completion ---- */

/* Complete the head WQE with status (the ring's head is ours). */
static void complete_head(struct sv_qp *qp, uint32_t status)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_rwin *e = rwin(rq, rq->head);
	uint64_t len = e->len;

	rq->head++;
	if ((int32_t)(rq->cur - rq->head) < 0) {
		rq->cur = rq->head;
		rq->cur_pkt = 0;
	}
	sv_sq_complete(qp, &e->w, status, status == IBV_WC_SUCCESS ? len : 0);
	if (status != IBV_WC_SUCCESS) {
		/* the QP is in ERR (RC) or SQE (UC): the window is gone,
		 * the ring's flush completes the rest */
		rq->tail = rq->cur = rq->head;
		rq->cur_pkt = 0;
		rq->rto = 0;
	}
}

/* The PSN after WQE e. */
static inline uint32_t end_psn(const struct sv_rwin *e)
{
	return sv_psn_add(e->psn, e->npkts);
}

/* The cursor never stays behind what the peer acknowledged: after a
 * rewind, an ACK of packets sent before moves it on to the first one not
 * acknowledged (a READ: its first missing response). */
static void cursor_catch_up(struct sv_roce_qp *rq)
{
	for (uint32_t n = rq->cur; n != rq->tail; n++) {
		struct sv_rwin *e = rwin(rq, n);
		uint32_t k;

		if (sv_psn_diff(rq->una, end_psn(e)) >= 0 && !(e->rd && !e->done))
			continue;       /* all of it acknowledged */
		if (e->rd)
			k = (uint32_t)(e->got / rq->mtu);
		else if (sv_psn_diff(rq->una, e->psn) > 0)
			k = (uint32_t)sv_psn_diff(rq->una, e->psn);
		else
			k = 0;
		if (n != rq->cur || k > rq->cur_pkt) {
			rq->cur = n;
			rq->cur_pkt = k;
		}
		return;
	}
	rq->cur = rq->tail;
	rq->cur_pkt = 0;
}

/* k more packets acknowledged: the congestion window grows (doubling
 * below ssthresh, one packet per window's worth of ACKs above it). */
static void cwnd_grow(struct sv_roce_qp *rq, uint32_t k)
{
	if (rq->cwnd < rq->ssthresh) {
		rq->cwnd += k;
	} else {
		rq->cwnd_acc += k;
		if (rq->cwnd_acc >= rq->cwnd) {
			rq->cwnd_acc -= rq->cwnd;
			rq->cwnd++;
		}
	}
	if (rq->cwnd > SV_PKT_WIN)
		rq->cwnd = SV_PKT_WIN;
}

/* A loss (timeout: the timer expired): the window is cut, once per window
 * of packets in flight. */
static void cwnd_cut(struct sv_roce_qp *rq, bool timeout)
{
	if (!timeout && sv_psn_diff(rq->una, rq->recover) < 0)
		return;
	rq->ssthresh = rq->cwnd / 2 > SV_CWND_MIN ? rq->cwnd / 2 : SV_CWND_MIN;
	rq->cwnd = timeout ? SV_CWND_MIN : rq->ssthresh;
	rq->cwnd_acc = 0;
	rq->recover = rq->snd;
}

/*
 * Complete, in order, what PSN p (inclusive) acknowledges: SENDs and WRITEs
 * that end at or before p, READs and atomics whose answer arrived. A READ
 * or atomic that p passes without its answer lost its responses: true,
 * with *gap its first missing PSN.
 */
static bool ack_upto(struct sv_qp *qp, uint32_t p, uint32_t *gap)
{
	struct sv_roce_qp *rq = qp->roce;
	uint32_t lim = rq->snd;
	bool lost = false;

	/* an ACK never acknowledges READ responses that did not come: the
	 * first missing one bounds what p can acknowledge */
	for (uint32_t n = rq->head; n != rq->tail; n++) {
		struct sv_rwin *e = rwin(rq, n);

		if (e->rd && !e->done) {
			lim = sv_psn_add(e->psn, (uint32_t)(e->got / rq->mtu));
			break;
		}
	}
	if (sv_psn_diff(sv_psn_add(p, 1), lim) > 0) {
		/* p passes a READ's missing responses: they were lost */
		lost = sv_psn_diff(lim, rq->snd) < 0;
		*gap = lim;
		p = sv_psn_add(lim, 0xffffff);
	}
	if (sv_psn_diff(sv_psn_add(p, 1), rq->una) > 0 &&
	    sv_psn_diff(sv_psn_add(p, 1), rq->snd) <= 0) {
		cwnd_grow(rq, (uint32_t)sv_psn_diff(sv_psn_add(p, 1), rq->una));
		rq->una = sv_psn_add(p, 1);
		cursor_catch_up(rq);
		rq->retry_left = qp->attr.retry_cnt;
		rq->rto = timeout_ns(qp) == UINT64_MAX ? 0 :
			  sv_now_ns() + timeout_ns(qp);
	}
	while (rq->head != rq->tail && qp->roce == rq &&
	       qp->state != IBV_QPS_ERR) {
		struct sv_rwin *e = rwin(rq, rq->head);

		if (e->rd) {
			if (!e->done)
				break;
		} else if (sv_psn_diff(p, sv_psn_add(e->psn,
						   e->npkts - 1)) < 0) {
			break;
		}
		/* (an ACK of PSNs we sent: even if a rewind put the cursor
		 * back on the head, the peer has the whole message) */
		complete_head(qp, IBV_WC_SUCCESS);
	}
	if (rq->head == rq->tail)
		rq->rto = 0;
	return lost;
}

/* Move the cursor back to PSN p (a packet in flight). */
static void rewind_to(struct sv_roce_qp *rq, uint32_t p)
{
	for (uint32_t n = rq->head; n != rq->tail; n++) {
		struct sv_rwin *e = rwin(rq, n);

		if (sv_psn_diff(p, e->psn) >= 0 &&
		    sv_psn_diff(p, end_psn(e)) < 0) {
			if (n == rq->cur &&
			    sv_psn_diff(sv_psn_add(e->psn, rq->cur_pkt), p) <= 0)
				return;         /* not sent yet anyway */
			if (sv_psn_diff(rwin(rq, rq->cur)->psn, e->psn) >= 0 ||
			    rq->cur == rq->tail) {
				rq->cur = n;
				rq->cur_pkt = (uint32_t)sv_psn_diff(p, e->psn);
				if (e->rd)
					rq->cur_pkt = (uint32_t)(e->got / rq->mtu);
				sv_roce_stats.retransmits++;
			}
			return;
		}
	}
}

static void kick(struct sv_qp *qp)
{
	sv_engine_kick(qp->engine);
}

/* Find the in-flight WQE that PSN p belongs to (NULL: none). */
static struct sv_rwin *find_psn(struct sv_roce_qp *rq, uint32_t p)
{
	for (uint32_t n = rq->head; n != rq->tail; n++) {
		struct sv_rwin *e = rwin(rq, n);

		if (sv_psn_diff(p, e->psn) >= 0 && sv_psn_diff(p, end_psn(e)) < 0)
			return e;
	}
	return NULL;
}

/* A READ response's or atomic ACK's bytes into the WQE's local SGEs. */
static bool land(struct sv_qp *qp, struct sv_rwin *e, uint64_t off,
		 const void *data, uint32_t len)
{
	struct sv_exec x;
	struct sv_map map[SV_MAX_SGE];
	struct iovec iov[SV_IOV_WINDOW];
	struct span d, s;
	uint64_t total;

	if (sv_span_sges(&d, map, iov, e->w.u.sge, e->w.h.num_sge, qp->pd,
			   true, &total) != IBV_WC_SUCCESS ||
	    off + len > total)
		return false;
	sv_roce_exec(&x);
	sv_span_raw(&s, (void *)data, len);
	return sv_span_copy(&x, &d, off, &s, 0, len) == SV_COPY_OK;
}

/*
 * READ responses land a receive batch at a time: the in-order payloads of
 * one READ are gathered (pointers into the packets received, which live
 * until the batch ends) and written with one copy (land_flush) before
 * anything could see them or change the READ: another packet for the
 * completer, a response of another READ, the READ's completion, the end of
 * the batch (sv_roce_comp_flush, dev.c). Only the wire thread completes, so
 * one gathering serves the device.
 */
static struct {
	struct sv_qp *qp;
	struct sv_roce_qp *rq;
	struct sv_rwin *e;
	uint32_t psn;              /* e's, to know it is still the same */
	uint64_t off, len;         /* where the first payload goes; bytes */
	unsigned int n;
	struct iovec v[SV_IOV_WINDOW];
} pend;

/* Write the gathered payloads: false if they cannot land (the READ then
 * completes with a local protection error, as one payload that fails). */
static bool land_flush(void)
{
	struct sv_qp *qp = pend.qp;
	struct sv_rwin *e = pend.e;
	struct sv_map map[SV_MAX_SGE];
	struct iovec iov[SV_IOV_WINDOW];
	struct span d, s;
	struct sv_exec x;
	uint64_t total, off = pend.off;
	unsigned int n = pend.n;

	if (!n)
		return true;
	pend.n = 0;
	/* the READ may have gone meanwhile (the QP's error, a reset): its
	 * buffers are the application's again */
	if (qp->roce != pend.rq || e->done || e->psn != pend.psn ||
	    (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD))
		return true;
	if (sv_span_sges(&d, map, iov, e->w.u.sge, e->w.h.num_sge, qp->pd,
			 true, &total) != IBV_WC_SUCCESS ||
	    off + pend.len > total)
		return false;
	sv_roce_exec(&x);
	if (d.whole) {
		s = (struct span){ .mem = { .pid = 0, .iov = pend.v,
					    .niov = n }, .whole = true };
		return sv_span_copy(&x, &d, off, &s, 0, pend.len) ==
		       SV_COPY_OK;
	}
	for (unsigned int i = 0; i < n; i++) {
		sv_span_raw(&s, pend.v[i].iov_base, pend.v[i].iov_len);
		if (sv_span_copy(&x, &d, off, &s, 0, pend.v[i].iov_len) !=
		    SV_COPY_OK)
			return false;
		off += pend.v[i].iov_len;
	}
	return true;
}

/* Flush the gathering; on failure the READ's QP completes its head with a
 * local protection error. */
static void land_now(void)
{
	struct sv_qp *qp = pend.qp;

	if (pend.n && !land_flush())
		complete_head(qp, IBV_WC_LOC_PROT_ERR);
}

void sv_roce_comp_flush(void)
{
	land_now();
}

/* Gather len bytes of payload for byte off of e's buffers: false when they
 * could not land (the gathering before them failed). */
static bool land_later(struct sv_qp *qp, struct sv_rwin *e, uint64_t off,
		       const void *data, uint32_t len)
{
	if (pend.n && (pend.e != e || pend.qp != qp ||
		       pend.off + pend.len != off || pend.n == SV_IOV_WINDOW)) {
		if (!land_flush())
			return false;
	}
	if (!pend.n) {
		pend.qp = qp;
		pend.rq = qp->roce;
		pend.e = e;
		pend.psn = e->psn;
		pend.off = off;
		pend.len = 0;
	}
	pend.v[pend.n].iov_base = (void *)data;
	pend.v[pend.n++].iov_len = len;
	pend.len += len;
	return true;
}

static void comp_read_resp(struct sv_qp *qp, const struct sv_roce_pkt *p)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_rwin *e = find_psn(rq, p->psn);
	uint32_t want, gap;
	bool last = (p->flags & SV_RF_LAST) != 0;

	if (!e || !e->rd || e->done || (e->w.h.opcode != IBV_WR_RDMA_READ &&
					 e->w.h.opcode != SV_WR_RDMA_READ_INV))
		return;                 /* stale or a duplicate */
	want = sv_psn_add(e->psn, (uint32_t)(e->got / rq->mtu));
	if (p->psn != want) {
		/* a gap: ask again from the first missing response, once */
		if (sv_psn_diff(p->psn, want) > 0 &&
		    (!rq->rewound || rq->rewound_at != want)) {
			rq->rewound = true;
			rq->rewound_at = want;
			cwnd_cut(rq, false);
			rewind_to(rq, want);
			kick(qp);
		}
		return;
	}
	/* every response but the READ's last is a full MTU (a request may
	 * cover part of the READ: its last response need not be the
	 * READ's); the total is the READ's length */
	if (e->got + p->paylen > e->len ||
	    (e->got + p->paylen < e->len && p->paylen != rq->mtu) ||
	    (e->got + p->paylen == e->len && e->len && !last)) {
		sv_qp_error(qp, 0);   /* the peer broke the protocol */
		return;
	}
	if (p->paylen && !land_later(qp, e, e->got, p->payload, p->paylen)) {
		complete_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	e->got += p->paylen;
	/* a response acknowledges what was sent before the READ, and itself:
	 * the window moves with a long READ's responses */
	if (sv_psn_diff(e->psn, rq->una) > 0 &&
	    ack_upto(qp, sv_psn_add(e->psn, 0xffffff), &gap)) {
		rewind_to(rq, gap);
		kick(qp);
		return;
	}
	if (qp->state == IBV_QPS_ERR || qp->roce != rq)
		return;
	if (sv_psn_diff(sv_psn_add(p->psn, 1), rq->una) > 0) {
		rq->una = sv_psn_add(p->psn, 1);
		rq->retry_left = qp->attr.retry_cnt;
		rq->rto = timeout_ns(qp) == UINT64_MAX ? 0 :
			  sv_now_ns() + timeout_ns(qp);
		kick(qp);
	}
	if (e->got != e->len)
		return;
	/* the data in place before anything says the READ is done */
	if (pend.n && !land_flush()) {
		complete_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	e->done = true;
	rq->rewound = false;
	if (ack_upto(qp, sv_psn_add(end_psn(e), 0xffffff), &gap)) {
		rewind_to(rq, gap);
		kick(qp);
	}
	kick(qp);
}

static void comp_atomic_ack(struct sv_qp *qp, const struct sv_roce_pkt *p)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_rwin *e = find_psn(rq, p->psn);
	uint64_t orig = p->orig;
	uint32_t gap;

	if (!e || !e->rd || e->done ||
	    !(sv_op_flags(e->w.h.opcode) & SV_OPF_ATOMIC))
		return;
	if (!land(qp, e, 0, &orig, sizeof(orig))) {
		complete_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	e->done = true;
	if (ack_upto(qp, p->psn, &gap))
		rewind_to(rq, gap);
	kick(qp);
}

void sv_roce_comp_rx(struct sv_qp *qp, const struct sv_roce_pkt *p)
{
	struct sv_roce_qp *rq = qp->roce;
	uint32_t gap;
	uint8_t syn;

	/* what was gathered lands before anything else is looked at, but
	 * the next response of the same READ */
	if (pend.n && (pend.qp != qp || !(p->flags & SV_RF_READ)))
		land_now();
	/* responses of our transport only (XRC's to an XRC initiator) */
	if (!rq || !reliable(qp) ||
	    (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD) ||
	    !(p->flags & (qp->type == IBV_QPT_XRC_SEND ? SV_RF_XRC :
							   SV_RF_RC))) {
		sv_roce_drop(SV_RX_DROP_STATE);
		return;
	}
	/* a response to nothing we sent is stale */
	if (sv_psn_diff(p->psn, rq->snd) >= 0 &&
	    !(p->flags & SV_RF_READ)) {
		sv_roce_drop(SV_RX_DROP_PSN);
		return;
	}
	if (p->flags & SV_RF_READ) {
		comp_read_resp(qp, p);
		return;
	}
	if (p->flags & SV_RF_ATMACK) {
		comp_atomic_ack(qp, p);
		return;
	}
	syn = p->syndrome;
	switch (SV_AETH_KIND(syn)) {
	case 0:                         /* ACK */
		if (ack_upto(qp, p->psn, &gap)) {
			cwnd_cut(rq, false);
			rewind_to(rq, gap);
		}
		kick(qp);
		return;
	case 1:                         /* RNR NAK: p->psn waits */
		sv_roce_stats.rnr_naks_rcvd++;
		if (ack_upto(qp, sv_psn_add(p->psn, 0xffffff), &gap)) {
			rewind_to(rq, gap);
			kick(qp);
			return;
		}
		if (qp->attr.rnr_retry != 7 && !rq->rnr_left) {
			if (rq->head != rq->tail)
				complete_head(qp,
					sv_outcome(SV_OUTCOME_RNR)->status);
			return;
		}
		if (qp->attr.rnr_retry != 7)
			rq->rnr_left--;
		rq->hold_until = sv_now_ns() + sv_rnr_timer_ns(syn & 0x1f);
		rewind_to(rq, p->psn);
		kick(qp);
		return;
	case 3:                         /* NAK */
		sv_roce_stats.naks_rcvd++;
		if (ack_upto(qp, sv_psn_add(p->psn, 0xffffff), &gap)) {
			rewind_to(rq, gap);
			kick(qp);
			return;
		}
		if (syn == SV_AETH_NAK_SEQ) {
			cwnd_cut(rq, false);
			rewind_to(rq, p->psn);
		} else if (rq->head != rq->tail && find_psn(rq, p->psn) ==
						       rwin(rq, rq->head)) {
			complete_head(qp, sv_nak_status(syn));
		}
		kick(qp);
		return;
	default:
		sv_roce_drop(SV_RX_DROP_MALFORMED); /* reserved */
		return;
	}
}

/* ---- the requester ---- */

static uint32_t pkts_of(uint64_t len, uint32_t mtu)
{
	return len ? (uint32_t)((len + mtu - 1) / mtu) : 1;
}

enum take_res {
	TAKE_NONE,      /* nothing to take (or no room) */
	TAKE_ONE,       /* a WQE is in the window */
	TAKE_LOCAL,     /* the next one runs at the requester alone: on the
			 * loopback path, once nothing is in flight */
	TAKE_REFUSED,   /* the next one is refused with *status: it
			 * completes in its turn */
};

/* Take the next WQE from the ring into the window. */
static enum take_res refuse(uint32_t *status, uint32_t st)
{
	*status = st;
	return TAKE_REFUSED;
}

static enum take_res take(struct sv_qp *qp, uint32_t *status)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_rwin *e;
	bool corrupt;
	uint32_t pending = wq_pending(&qp->sq, &corrupt), op, f;
	const void *slot;
	uint64_t total = 0;

	if (corrupt) {
		sv_qp_error(qp, IBV_EVENT_QP_FATAL);
		return TAKE_NONE;
	}
	if (rq->tail - qp->sq.cons >= pending || rq->tail - rq->head >= SV_RQ_WIN)
		return TAKE_NONE;
	if (qp->state == IBV_QPS_SQD && !(qp->sqd_armed &&
	    (int32_t)(qp->sqd_prod - rq->tail) > 0))
		return TAKE_NONE;
	slot = wq_slot(&qp->sq, rq->tail);
	e = rwin(rq, rq->tail);
	memcpy(&e->w.h, slot, sizeof(e->w.h));
	op = e->w.h.opcode;
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_READ:
	case SV_WR_RDMA_READ_INV:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		if (!reliable(qp))
			return refuse(status, IBV_WC_LOC_QP_OP_ERR);
		break;
	case SV_WR_MASKED_CMP_SWAP:
	case SV_WR_MASKED_FETCH_ADD:
		if (qp->type != IBV_QPT_RC ||
		    !(sv_dev.attr.exp_cap_flags & SV_EXP_CAP_MASKED_ATOMICS))
			return refuse(status, IBV_WC_LOC_QP_OP_ERR);
		break;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
	case SV_WR_FAST_REG_MR:
		return TAKE_LOCAL;
	default:
		return refuse(status, IBV_WC_LOC_QP_OP_ERR);
	}
	if (!sv_swqe_body(qp, &e->w, (const uint8_t *)slot + SV_SEND_WQE_HDR,
			  qp->sq.stride - SV_SEND_WQE_HDR))
		return refuse(status, IBV_WC_LOC_QP_OP_ERR);
	f = sv_op_flags(op);
	e->rd = (f & SV_OPF_SINK) != 0;
	if (e->w.h.flags & IBV_SEND_INLINE) {
		if (e->rd)
			return refuse(status, IBV_WC_LOC_QP_OP_ERR);
		total = e->w.h.num_sge;
	} else {
		for (uint32_t i = 0; i < e->w.h.num_sge; i++)
			total += e->w.u.sge[i].length;
	}
	if (e->rd && (f & SV_OPF_ATOMIC) && (e->w.h.num_sge != 1 || total != 8))
		return refuse(status, IBV_WC_LOC_LEN_ERR);
	if (total > SV_MAX_MSG_SZ)
		return refuse(status, IBV_WC_LOC_LEN_ERR);
	e->len = total;
	e->got = 0;
	e->done = false;
	e->psn = rq->next_psn;
	e->npkts = (f & SV_OPF_ATOMIC) ? 1 : pkts_of(total, rq->mtu);
	rq->next_psn = sv_psn_add(rq->next_psn, e->npkts);
	rq->tail++;
	return TAKE_ONE;
}

/* READs and atomics in flight before WQE n. */
static uint32_t rd_before(const struct sv_roce_qp *rq, uint32_t n)
{
	uint32_t k = 0;

	for (uint32_t i = rq->head; i != n; i++)
		if (rwin(rq, i)->rd && !rwin(rq, i)->done)
			k++;
	return k;
}

/*
 * The payloads of the packets one step sends of one WQE, gathered with one
 * copy: the WQE's SGEs resolved once, and the packets' payload places in
 * the tx batch as the destination's iovecs (one process_vm_readv for all
 * of them). Nothing is finished or sent before the tx flush, so packets
 * whose payload failed are taken back out of the batch.
 */
struct gather {
	bool on;
	uint32_t wqe;              /* its WQE, packet first_pkt on */
	uint32_t first_pkt;
	uint64_t off;              /* the first packet's message offset */
	uint64_t bytes;
	unsigned int first_tx;     /* the first packet's place in tx */
	uint32_t snd;              /* rq->snd before it */
	unsigned int nd;
	struct iovec dst[SV_TX_BATCH];
	struct span s;
	struct sv_map map[SV_MAX_SGE];
	struct iovec iov[SV_IOV_WINDOW];
};

/* Copy what g gathered: IBV_WC_SUCCESS, or (its packets taken back out of
 * tx and the cursor back at its first) the status of the failure. */
static uint32_t gather_run(struct sv_exec *x, struct sv_qp *qp,
			   struct sv_roce_tx *tx, struct gather *g)
{
	struct sv_roce_qp *rq = qp->roce;
	struct span d;

	if (!g->on)
		return IBV_WC_SUCCESS;
	g->on = false;
	if (!g->nd)
		return IBV_WC_SUCCESS;
	memset(&d, 0, sizeof(d));
	d.mem.pid = 0;
	d.mem.iov = g->dst;
	d.mem.niov = g->nd;
	d.whole = true;
	if (sv_span_copy(x, &d, 0, &g->s, g->off, g->bytes) == SV_COPY_OK)
		return IBV_WC_SUCCESS;
	tx->n = g->first_tx;
	rq->cur = g->wqe;
	rq->cur_pkt = g->first_pkt;
	rq->snd = g->snd;
	return IBV_WC_LOC_PROT_ERR;
}

/* The payload of packet k of e (len bytes at off) into buf, or into g to
 * copy later (tx->n: the packet's place in tx). */
static bool payload(struct sv_exec *x, struct sv_qp *qp,
		    const struct sv_rwin *e, uint64_t off, uint32_t len,
		    uint8_t *buf, struct sv_roce_tx *tx, struct gather *g)
{
	struct sv_roce_qp *rq = qp->roce;
	struct span d;
	uint64_t total;

	if (!len)
		return true;
	if (e->w.h.flags & IBV_SEND_INLINE) {
		memcpy(buf, e->w.u.data + off, len);
		return true;
	}
	if (g->on && g->wqe == rq->cur && g->off + g->bytes == off &&
	    g->nd < SV_TX_BATCH) {
		g->dst[g->nd].iov_base = buf;
		g->dst[g->nd++].iov_len = len;
		g->bytes += len;
		return true;
	}
	if (g->on && gather_run(x, qp, tx, g) != IBV_WC_SUCCESS)
		return false;
	if (sv_span_sges(&g->s, g->map, g->iov, e->w.u.sge, e->w.h.num_sge,
			 qp->pd, false, &total) != IBV_WC_SUCCESS)
		return false;
	if (g->s.whole) {
		g->on = true;
		g->wqe = rq->cur;
		g->first_pkt = rq->cur_pkt;
		g->off = off;
		g->bytes = len;
		g->first_tx = tx->n;
		g->snd = rq->snd;
		g->dst[0].iov_base = buf;
		g->dst[0].iov_len = len;
		g->nd = 1;
		return true;
	}
	/* more iovecs than one window: this packet alone, now */
	sv_span_raw(&d, buf, len);
	return sv_span_copy(x, &d, 0, &g->s, off, len) == SV_COPY_OK;
}

/* A long message asks for an ACK every this many packets: a quarter of
 * the congestion window (one lost ACK does not close it), at most
 * SV_ACKREQ_EVERY. */
static inline uint32_t ackreq_every(const struct sv_roce_qp *rq)
{
	uint32_t n = rq->cwnd / 4;

	return n > SV_ACKREQ_EVERY ? SV_ACKREQ_EVERY : n;
}

/* Build and queue the next packet of the cursor's WQE: IBV_WC_SUCCESS, or
 * the WQE's completion status (its local memory failed). Its payload may
 * wait in g until gather_run; a WQE's last packet runs g. */
static uint32_t send_one(struct sv_exec *x, struct sv_qp *qp,
			 struct sv_roce_tx *tx, struct gather *g)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_rwin *e = rwin(rq, rq->cur);
	uint32_t op = e->w.h.opcode, k = rq->cur_pkt, psn;
	struct sv_roce_pkt p;
	uint8_t *buf;
	uint64_t off = (uint64_t)k * rq->mtu;
	uint32_t len = 0, base = wire_base(qp), span = 1;
	bool first = k == 0, last;
	size_t hdr;

	if (e->rd && (e->done || (e->len && (uint64_t)k * rq->mtu >= e->len &&
				  !(sv_op_flags(op) & SV_OPF_ATOMIC)))) {
		/* its answer is in (a rewind went back past it) */
		rq->cur++;
		rq->cur_pkt = 0;
		return IBV_WC_SUCCESS;
	}
	memset(&p, 0, sizeof(p));
	psn = sv_psn_add(e->psn, k);
	p.psn = psn;
	p.dqpn = rq->dqpn;
	p.pkey = 0xffff;
	last = k + 1 >= e->npkts;
	switch (op) {
	case IBV_WR_RDMA_READ:
	case SV_WR_RDMA_READ_INV:
		/* a request for at most SV_READ_CHUNK responses of what is
		 * still missing: a lost response costs the rest of its
		 * request, not the rest of the READ */
		span = e->npkts - k < SV_READ_CHUNK ? e->npkts - k :
						      SV_READ_CHUNK;
		p.opcode = (uint8_t)(SV_OP_RC_READ_REQ + base);
		p.va = e->w.h.remote_addr + off;
		p.rkey = e->w.h.rkey;
		p.dmalen = (uint32_t)(e->len - off < (uint64_t)span * rq->mtu ?
				      e->len - off : (uint64_t)span * rq->mtu);
		p.ackreq = true;
		last = k + span >= e->npkts;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		p.opcode = (uint8_t)((op == IBV_WR_ATOMIC_CMP_AND_SWP ?
				      SV_OP_RC_CMP_SWAP : SV_OP_RC_FETCH_ADD) +
				     base);
		p.va = e->w.h.remote_addr;
		p.rkey = e->w.h.rkey;
		p.swap_add = op == IBV_WR_ATOMIC_CMP_AND_SWP ?
			     e->w.h.atomic.swap : e->w.h.atomic.compare_add;
		p.compare = e->w.h.atomic.compare_add;
		p.ackreq = true;
		break;
	case SV_WR_MASKED_CMP_SWAP:
	case SV_WR_MASKED_FETCH_ADD:
		/* MaskedAtomicETH (wire.h); the rkey travels in imm */
		p.opcode = op == SV_WR_MASKED_CMP_SWAP ?
			   SV_OP_RC_MASKED_CMP_SWAP : SV_OP_RC_MASKED_FETCH_ADD;
		p.va = e->w.h.masked.remote_addr;
		p.rkey = e->w.h.imm;
		if (op == SV_WR_MASKED_CMP_SWAP) {
			p.swap_add = e->w.h.masked.swap;
			p.compare = e->w.h.masked.compare_add;
			p.swap_mask = e->w.h.masked.swap_mask;
			p.compare_mask = e->w.h.masked.compare_mask;
		} else {
			p.swap_add = e->w.h.masked.compare_add;
			p.compare = e->w.h.masked.swap;    /* field ends */
		}
		p.ackreq = true;
		break;
	default: {
		bool send = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
			    op == IBV_WR_SEND_WITH_INV;
		bool imm = op == IBV_WR_SEND_WITH_IMM ||
			   op == IBV_WR_RDMA_WRITE_WITH_IMM;
		bool inv = op == IBV_WR_SEND_WITH_INV;

		len = (uint32_t)(e->len - off < rq->mtu ? e->len - off : rq->mtu);
		if (send) {
			if (first && last)
				p.opcode = imm ? SV_OP_RC_SEND_ONLY_IMM :
					   inv ? SV_OP_RC_SEND_ONLY_INV :
						 SV_OP_RC_SEND_ONLY;
			else if (first)
				p.opcode = SV_OP_RC_SEND_FIRST;
			else if (last)
				p.opcode = imm ? SV_OP_RC_SEND_LAST_IMM :
					   inv ? SV_OP_RC_SEND_LAST_INV :
						 SV_OP_RC_SEND_LAST;
			else
				p.opcode = SV_OP_RC_SEND_MIDDLE;
			p.se = last && (e->w.h.flags & IBV_SEND_SOLICITED);
		} else {
			if (first && last)
				p.opcode = imm ? SV_OP_RC_WRITE_ONLY_IMM :
						 SV_OP_RC_WRITE_ONLY;
			else if (first)
				p.opcode = SV_OP_RC_WRITE_FIRST;
			else if (last)
				p.opcode = imm ? SV_OP_RC_WRITE_LAST_IMM :
						 SV_OP_RC_WRITE_LAST;
			else
				p.opcode = SV_OP_RC_WRITE_MIDDLE;
			if (first) {
				p.va = e->w.h.remote_addr;
				p.rkey = e->w.h.rkey;
				p.dmalen = (uint32_t)e->len;
			}
			p.se = last && imm &&
			       (e->w.h.flags & IBV_SEND_SOLICITED);
		}
		p.opcode = (uint8_t)(p.opcode + base);
		if (imm)
			p.imm = e->w.h.imm;
		if (inv)
			p.ieth_rkey = e->w.h.imm;
		/* an ACK for the last packet, every so often, and for the
		 * packet that fills the congestion window (no ACK would
		 * come to open it again) */
		p.ackreq = reliable(qp) &&
			   (last || (k + 1) % ackreq_every(rq) == 0 ||
			    sv_psn_diff(sv_psn_add(psn, 1), rq->una) >=
				    (int32_t)rq->cwnd);
		break;
	}
	}
	/* XRC: every request names the responder's SRQ */
	p.xrcsrq = e->w.h.remote_qpn & 0xffffffu;
	buf = sv_roce_tx_next(tx);
	hdr = sv_roce_build_hdr(buf, &p);
	if (!payload(x, qp, e, off, len, buf + hdr, tx, g))
		return IBV_WC_LOC_PROT_ERR;
	sv_roce_tx_push(tx, hdr + len, rq->sgid, rq->dgid, rq->sport);
	/* the PSNs this packet takes (a READ request: its responses') */
	if (sv_psn_diff(sv_psn_add(psn, span), rq->snd) > 0)
		rq->snd = sv_psn_add(psn, span);
	else
		sv_roce_stats.retransmits++;
	if (last) {
		rq->cur++;
		rq->cur_pkt = 0;
		/* the WQE is all out: its payload too (UC completes it) */
		return gather_run(x, qp, tx, g);
	}
	rq->cur_pkt += span;
	return IBV_WC_SUCCESS;
}

/* May the cursor's next packet go now? */
static bool may_send(const struct sv_qp *qp, uint64_t now)
{
	const struct sv_roce_qp *rq = qp->roce;
	const struct sv_rwin *e;
	uint32_t psn;

	if (rq->cur == rq->tail || (rq->hold_until && now < rq->hold_until))
		return false;
	e = rwin(rq, rq->cur);
	if (e->rd && e->done)
		return true;    /* send_one steps over it */
	psn = sv_psn_add(e->psn, rq->cur_pkt);
	if (!reliable(qp))
		return true;
	if (sv_psn_diff(psn, rq->una) >= (int32_t)rq->cwnd)
		return false;
	if (e->rd && rq->cur_pkt == (uint32_t)(e->got / rq->mtu) &&
	    rd_before(rq, rq->cur) >=
		    (qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1u))
		return false;
	return true;
}

/* Do the ring or the window hold something to take? */
static bool ring_has_more(const struct sv_qp *qp)
{
	const struct sv_roce_qp *rq = qp->roce;
	bool corrupt;
	uint32_t pending = wq_pending(&qp->sq, &corrupt);

	if (corrupt)
		return true;
	return rq->tail - qp->sq.cons < pending &&
	       rq->tail - rq->head < SV_RQ_WIN;
}

/* In SQD, is everything that was to run done (the window empty, nothing
 * posted before the drain left to take)? */
static bool sqd_done(const struct sv_qp *qp)
{
	const struct sv_roce_qp *rq = qp->roce;

	return qp->state == IBV_QPS_SQD && rq->head == rq->tail &&
	       !(qp->sqd_armed && (int32_t)(qp->sqd_prod - rq->tail) > 0);
}

int sv_roce_ready(const struct sv_qp *qp, uint64_t now, uint64_t *timer)
{
	const struct sv_roce_qp *rq = qp->roce;

	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD)
		return false;
	if (sqd_done(qp) && !qp->sq_drained_sent)
		return true;
	if (rq->rto) {
		if (now >= rq->rto)
			return true;
		if (timer && rq->rto < *timer)
			*timer = rq->rto;
	}
	if (rq->hold_until && now < rq->hold_until) {
		if (timer && rq->hold_until < *timer)
			*timer = rq->hold_until;
		return false;
	}
	return ring_has_more(qp) || may_send(qp, now);
}

int sv_roce_sq_owes(const struct sv_qp *qp, uint32_t upto, uint64_t now)
{
	const struct sv_roce_qp *rq = qp->roce;
	bool corrupt;
	uint32_t n = wq_pending(&qp->sq, &corrupt);

	if (corrupt || (rq->hold_until && now < rq->hold_until) ||
	    rq->retry_left != qp->attr.retry_cnt)
		return false;
	/* not taken into the window yet (upto within what is posted) */
	if ((int32_t)(upto - rq->tail) > 0 && upto - qp->sq.cons <= n)
		return true;
	/* taken, packets still to send (whatever the congestion window:
	 * its ACKs come in an RTT) */
	return rq->cur != rq->tail && (int32_t)(upto - rq->cur) > 0;
}

/* The retransmission timer expired. */
static void timed_out(struct sv_qp *qp)
{
	struct sv_roce_qp *rq = qp->roce;

	rq->rto = 0;
	if (rq->head == rq->tail)
		return;
	sv_roce_stats.timeouts++;
	if (!rq->retry_left) {
		const struct sv_rwin *h = rwin(rq, rq->head);

		sv_log(SV_LOG_WARN, "qp %#x: retry exceeded: wqe %u (op %u psn "
		       "%#x n %u got %llu done %d) una %#x snd %#x cur %u/%u "
		       "tail %u", qp->qpn, rq->head, h->w.h.opcode, h->psn,
		       h->npkts, (unsigned long long)h->got, h->done, rq->una,
		       rq->snd, rq->cur, rq->cur_pkt, rq->tail);
		sv_roce_stats.retry_exceeded++;
		complete_head(qp, sv_outcome(SV_OUTCOME_NOACK)->status);
		return;
	}
	rq->retry_left--;
	cwnd_cut(rq, true);
	rq->hold_until = 0;
	rewind_to(rq, rq->una);
	/* a READ's gap may be asked for again */
	rq->rewound = false;
}

int sv_roce_step(struct sv_exec *x, struct sv_qp *qp)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_roce_tx *tx;
	bool did = false;
	unsigned int sent = 0, room;
	enum take_res t;
	uint32_t st;
	static __thread struct gather g;

	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD)
		return false;
	if (rq->rto && x->now >= rq->rto) {
		timed_out(qp);
		did = true;
		if (qp->roce != rq || qp->state == IBV_QPS_ERR)
			return true;
	}
	tx = sv_roce_tx_get();
	if (!tx)
		return did;
	/* take new WQEs while the window has room */
	while ((t = take(qp, &st)) == TAKE_ONE)
		did = true;
	if (rq->head == rq->tail && (t == TAKE_LOCAL || t == TAKE_REFUSED)) {
		if (t == TAKE_LOCAL) {
			/* run by the loopback path */
			did |= sv_exec_local_head(x, qp);
		} else {
			struct swqe w;

			memcpy(&w.h, wq_head(&qp->sq), sizeof(w.h));
			sv_sq_complete(qp, &w, st, 0);
			did = true;
		}
		/* the window follows the ring past it */
		rq->head = rq->tail = rq->cur = qp->sq.cons;
		rq->cur_pkt = 0;
		return did;
	}
	/* the batch never fills up while a gather waits (a full batch is
	 * flushed before its payloads are in) */
	room = SV_TX_BATCH - tx->n;
	g.on = false;
	while (sent < room && may_send(qp, x->now)) {
		st = send_one(x, qp, tx, &g);
		if (st != IBV_WC_SUCCESS) {
			/* only the head can fail here in order: complete it
			 * once what is before it completed; until then,
			 * stop sending */
			if (rq->cur == rq->head)
				complete_head(qp, st);
			break;
		}
		sent++;
		did = true;
		if (qp->type == IBV_QPT_UC) {
			/* no ACKs: a WQE is done once its packets are out */
			while (rq->head != rq->cur)
				complete_head(qp, IBV_WC_SUCCESS);
			rq->una = rq->snd;
		}
	}
	st = gather_run(x, qp, tx, &g);
	if (st != IBV_WC_SUCCESS && rq->cur == rq->head)
		complete_head(qp, st);
	sv_roce_tx_flush(tx);
	if (qp->roce == rq && sqd_done(qp) && !qp->sq_drained_sent) {
		sv_sq_drained(qp);
		did = true;
	}
	/* the timer runs while a WQE that was sent is not complete */
	if (reliable(qp) && rq->head != rq->tail &&
	    (rq->cur != rq->head || rq->cur_pkt) && !rq->rto &&
	    timeout_ns(qp) != UINT64_MAX)
		rq->rto = x->now + timeout_ns(qp);
	return did;
}
