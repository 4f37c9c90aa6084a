// SPDX-License-Identifier: MIT
/*
 * The completer of a wire QP (RC and XRC initiators; the wire thread,
 * sv_roce_comp_rx): the ACKs, NAKs, READ responses and atomic ACKs that
 * come back for what the requester (req.c) sent, and the retransmission
 * timer (sv_roce_timed_out, from the requester's step).
 *
 * Completion is in order: an ACK of PSN p completes every SEND and WRITE
 * that ends at or before p, and a READ or atomic once its answer is in.
 * Going back (go-back-N) is only ever moving the requester's cursor back:
 * on a sequence NAK to its PSN, on an RNR NAK after the responder's timer,
 * on a gap in READ responses to the first missing one, on the
 * retransmission timer to the oldest unacknowledged PSN. The responder's
 * duplicate detection makes packets sent twice harmless. The congestion
 * window (cwnd) grows with ACKs and is cut on a loss.
 *
 * A NAK's completion status is the outcome table's (sv_nak_status,
 * exec/exec_int.h). Under sv_dev.lock.
 */
#define _GNU_SOURCE
#include <string.h>

#include <infiniband/verbs.h>

#include "abi/sv_op.h"
#include "device/roce/roce_int.h"

/* ---- completion ---- */

void sv_roce_complete_head(struct sv_qp *qp, uint32_t status)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_rwin *e = sv_rwin(rq, rq->head);
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
		struct sv_rwin *e = sv_rwin(rq, n);
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
		struct sv_rwin *e = sv_rwin(rq, n);

		if (e->rd && !e->done) {
			lim = sv_psn_add(e->psn, (uint32_t)(e->got / rq->mtu));
			break;
		}
	}
	if (sv_psn_diff(sv_psn_add(p, 1), lim) > 0) {
		/* p passes a READ's missing responses: they were lost */
		lost = sv_psn_diff(lim, rq->snd) < 0;
		*gap = lim;
		p = sv_psn_prev(lim);
	}
	if (sv_psn_diff(sv_psn_add(p, 1), rq->una) > 0 &&
	    sv_psn_diff(sv_psn_add(p, 1), rq->snd) <= 0) {
		cwnd_grow(rq, (uint32_t)sv_psn_diff(sv_psn_add(p, 1), rq->una));
		rq->una = sv_psn_add(p, 1);
		rq->rnr_probe = false;
		cursor_catch_up(rq);
		rq->retry_left = qp->attr.retry_cnt;
		rq->rto = sv_roce_timeout_ns(qp) == UINT64_MAX ? 0 :
			  sv_now_ns() + sv_roce_timeout_ns(qp);
	}
	while (rq->head != rq->tail && qp->roce == rq &&
	       qp->state != IBV_QPS_ERR) {
		struct sv_rwin *e = sv_rwin(rq, rq->head);

		if (e->rd) {
			if (!e->done)
				break;
		} else if (sv_psn_diff(p, sv_psn_add(e->psn,
						   e->npkts - 1)) < 0) {
			break;
		}
		/* (an ACK of PSNs we sent: even if a rewind put the cursor
		 * back on the head, the peer has the whole message) */
		sv_roce_complete_head(qp, IBV_WC_SUCCESS);
	}
	if (rq->head == rq->tail)
		rq->rto = 0;
	return lost;
}

/* Move the cursor back to PSN p (a packet in flight). */
static void rewind_to(struct sv_roce_qp *rq, uint32_t p)
{
	for (uint32_t n = rq->head; n != rq->tail; n++) {
		struct sv_rwin *e = sv_rwin(rq, n);

		if (sv_psn_diff(p, e->psn) >= 0 &&
		    sv_psn_diff(p, end_psn(e)) < 0) {
			if (n == rq->cur &&
			    sv_psn_diff(sv_psn_add(e->psn, rq->cur_pkt), p) <= 0)
				return;         /* not sent yet anyway */
			if (sv_psn_diff(sv_rwin(rq, rq->cur)->psn, e->psn) >= 0 ||
			    rq->cur == rq->tail) {
				rq->cur = n;
				rq->cur_pkt = (uint32_t)sv_psn_diff(p, e->psn);
				if (e->rd)
					rq->cur_pkt = (uint32_t)(e->got / rq->mtu);
				sv_roce_stats.retransmits++;
				rq->qp->st_retrans++;
			}
			return;
		}
	}
}

static void kick(struct sv_qp *qp)
{
	sv_engine_kick(qp->engine);
}

/*
 * An ACK wakes the engine only if it gave the engine something to do (room
 * in the window or the congestion window for packets not yet sent, an SQ
 * drained in SQD): in a ping-pong every message's ACK used to wake an
 * engine that found nothing, and that engine then waited for the lock the
 * wire thread held (docs/PERFORMANCE.md). The timers need no kick: an ACK
 * only moves the retransmission timer later or stops it, and an engine
 * that wakes for the old time finds nothing and sleeps again.
 */
static void kick_if_ready(struct sv_qp *qp)
{
	if (sv_roce_ready(qp, sv_now_ns(), NULL))
		kick(qp);
}

/* Find the in-flight WQE that PSN p belongs to (NULL: none). */
static struct sv_rwin *find_psn(struct sv_roce_qp *rq, uint32_t p)
{
	for (uint32_t n = rq->head; n != rq->tail; n++) {
		struct sv_rwin *e = sv_rwin(rq, n);

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
 * the batch (sv_roce_comp_flush, dev.c). The gathering is the receiving
 * thread's (struct sv_roce_land in its struct sv_roce_tx).
 *
 * land_flush: write the gathered payloads: false if they cannot land (the
 * READ then completes with a local protection error, as one payload that
 * fails).
 */
static bool land_flush(struct sv_roce_land *pend)
{
	struct sv_qp *qp = pend->qp;
	struct sv_rwin *e = pend->e;
	struct sv_map map[SV_MAX_SGE];
	struct iovec iov[SV_IOV_WINDOW];
	struct span d, s;
	struct sv_exec x;
	uint64_t total, off = pend->off;
	unsigned int n = pend->n;

	if (!n)
		return true;
	pend->n = 0;
	/* the READ may have gone meanwhile (the QP's error, a reset): its
	 * buffers are the application's again */
	if (qp->roce != pend->rq || e->done || e->psn != pend->psn ||
	    (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD))
		return true;
	if (sv_span_sges(&d, map, iov, e->w.u.sge, e->w.h.num_sge, qp->pd,
			 true, &total) != IBV_WC_SUCCESS ||
	    off + pend->len > total)
		return false;
	sv_roce_exec(&x);
	if (d.whole) {
		s = (struct span){ .mem = { .pid = 0, .iov = pend->v,
					    .niov = n }, .whole = true };
		return sv_span_copy(&x, &d, off, &s, 0, pend->len) ==
		       SV_COPY_OK;
	}
	for (unsigned int i = 0; i < n; i++) {
		sv_span_raw(&s, pend->v[i].iov_base, pend->v[i].iov_len);
		if (sv_span_copy(&x, &d, off, &s, 0, pend->v[i].iov_len) !=
		    SV_COPY_OK)
			return false;
		off += pend->v[i].iov_len;
	}
	return true;
}

/* Flush the gathering; on failure the READ's QP completes its head with a
 * local protection error. */
static void land_now(struct sv_roce_land *pend)
{
	struct sv_qp *qp = pend->qp;

	if (pend->n && !land_flush(pend))
		sv_roce_complete_head(qp, IBV_WC_LOC_PROT_ERR);
}

void sv_roce_comp_flush(struct sv_roce_tx *tx)
{
	land_now(&tx->land);
}

/* Gather len bytes of payload for byte off of e's buffers: false when they
 * could not land (the gathering before them failed). */
static bool land_later(struct sv_roce_land *pend, struct sv_qp *qp,
		       struct sv_rwin *e, uint64_t off, const void *data,
		       uint32_t len)
{
	if (pend->n && (pend->e != e || pend->qp != qp ||
			pend->off + pend->len != off ||
			pend->n == SV_IOV_WINDOW)) {
		if (!land_flush(pend))
			return false;
	}
	if (!pend->n) {
		pend->qp = qp;
		pend->rq = qp->roce;
		pend->e = e;
		pend->psn = e->psn;
		pend->off = off;
		pend->len = 0;
	}
	pend->v[pend->n].iov_base = (void *)data;
	pend->v[pend->n++].iov_len = len;
	pend->len += len;
	return true;
}

static void comp_read_resp(struct sv_qp *qp, const struct sv_roce_pkt *p,
			   struct sv_roce_land *pend)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_rwin *e = find_psn(rq, p->psn);
	uint32_t want, gap;
	bool last = (p->flags & SV_RF_LAST) != 0;

	/* READ responses answer a READ, an ATOMIC WRITE and a FLUSH */
	if (!e || !e->rd || e->done ||
	    !(sv_op_flags(e->w.h.opcode) &
	      (SV_OPF_READ | SV_OPF_AWRITE | SV_OPF_FLUSH)))
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
	if (p->paylen &&
	    !land_later(pend, qp, e, e->got, p->payload, p->paylen)) {
		sv_roce_complete_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	e->got += p->paylen;
	/* a response acknowledges what was sent before the READ, and itself:
	 * the window moves with a long READ's responses */
	if (sv_psn_diff(e->psn, rq->una) > 0 &&
	    ack_upto(qp, sv_psn_prev(e->psn), &gap)) {
		rewind_to(rq, gap);
		kick(qp);
		return;
	}
	if (qp->state == IBV_QPS_ERR || qp->roce != rq)
		return;
	if (sv_psn_diff(sv_psn_add(p->psn, 1), rq->una) > 0) {
		rq->una = sv_psn_add(p->psn, 1);
		rq->rnr_probe = false;
		rq->retry_left = qp->attr.retry_cnt;
		rq->rto = sv_roce_timeout_ns(qp) == UINT64_MAX ? 0 :
			  sv_now_ns() + sv_roce_timeout_ns(qp);
		kick(qp);
	}
	if (e->got != e->len)
		return;
	/* the data in place before anything says the READ is done */
	if (pend->n && !land_flush(pend)) {
		sv_roce_complete_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	e->done = true;
	rq->rewound = false;
	if (ack_upto(qp, sv_psn_prev(end_psn(e)), &gap)) {
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
		sv_roce_complete_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	e->done = true;
	if (ack_upto(qp, p->psn, &gap))
		rewind_to(rq, gap);
	kick(qp);
}

void sv_roce_comp_rx(struct sv_qp *qp, const struct sv_roce_pkt *p,
		     struct sv_roce_tx *tx)
{
	struct sv_roce_land *pend = &tx->land;
	struct sv_roce_qp *rq = qp->roce;
	uint32_t gap;
	uint8_t syn;

	/* what was gathered lands before anything else is looked at, but
	 * the next response of the same READ */
	if (pend->n && (pend->qp != qp || !(p->flags & SV_RF_READ)))
		land_now(pend);
	/* responses of our transport only (XRC's to an XRC initiator) */
	if (!rq || !sv_roce_reliable(qp) ||
	    (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD) ||
	    !(p->flags & sv_roce_qpt_transport(qp->type))) {
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
		comp_read_resp(qp, p, pend);
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
			kick(qp);
			return;
		}
		kick_if_ready(qp);
		return;
	case 1:                         /* RNR NAK: p->psn waits */
		sv_roce_stats.rnr_naks_rcvd++;
		if (ack_upto(qp, sv_psn_prev(p->psn), &gap)) {
			rewind_to(rq, gap);
			kick(qp);
			return;
		}
		if (qp->attr.rnr_retry != 7 && !rq->rnr_left) {
			if (rq->head != rq->tail)
				sv_roce_complete_head(qp,
					sv_outcome(SV_OUTCOME_RNR)->status);
			return;
		}
		if (qp->attr.rnr_retry != 7)
			rq->rnr_left--;
		rq->hold_until = sv_now_ns() + sv_rnr_timer_ns(syn & 0x1f);
		/* the responder answered: nothing was lost, and the transport
		 * timer runs again from the retry after the RNR wait. Left to
		 * run, it counted an RNR wait longer than retry_cnt timeouts
		 * as the peer's silence (IBV_WC_RETRY_EXC_ERR with rnr_retry
		 * 7, which waits forever) */
		if (rq->rto)
			rq->rto = rq->hold_until + sv_roce_timeout_ns(qp);
		rq->rnr_probe = true;
		rewind_to(rq, p->psn);
		kick(qp);
		return;
	case 3:                         /* NAK */
		sv_roce_stats.naks_rcvd++;
		if (ack_upto(qp, sv_psn_prev(p->psn), &gap)) {
			rewind_to(rq, gap);
			kick(qp);
			return;
		}
		if (syn == SV_AETH_NAK_SEQ) {
			cwnd_cut(rq, false);
			rewind_to(rq, p->psn);
		} else if (rq->head != rq->tail && find_psn(rq, p->psn) ==
						       sv_rwin(rq, rq->head)) {
			sv_roce_complete_head(qp, sv_nak_status(syn));
		}
		kick(qp);
		return;
	default:
		sv_roce_drop(SV_RX_DROP_MALFORMED); /* reserved */
		return;
	}
}

/* The retransmission timer expired. */
void sv_roce_timed_out(struct sv_qp *qp)
{
	struct sv_roce_qp *rq = qp->roce;

	rq->rto = 0;
	if (rq->head == rq->tail)
		return;
	sv_roce_stats.timeouts++;
	if (!rq->retry_left) {
		const struct sv_rwin *h = sv_rwin(rq, rq->head);

		sv_log(SV_LOG_WARN, "qp %#x: retry exceeded: wqe %u (op %u psn "
		       "%#x n %u got %llu done %d) una %#x snd %#x cur %u/%u "
		       "tail %u", qp->qpn, rq->head, h->w.h.opcode, h->psn,
		       h->npkts, (unsigned long long)h->got, h->done, rq->una,
		       rq->snd, rq->cur, rq->cur_pkt, rq->tail);
		sv_roce_stats.retry_exceeded++;
		sv_roce_complete_head(qp, sv_outcome(SV_OUTCOME_NOACK)->status);
		return;
	}
	rq->retry_left--;
	cwnd_cut(rq, true);
	rq->hold_until = 0;
	rewind_to(rq, rq->una);
	/* a READ's gap may be asked for again */
	rq->rewound = false;
}
