// SPDX-License-Identifier: MIT
/*
 * The responder of a wire QP: the request packets that arrive for it (the
 * wire thread, under sv_dev.lock). Its parts: this file has the steps a
 * request passes (the QP, the PSN, the opcode sequence, the length, the
 * acknowledgement), the way in (sv_roce_resp_rx, sv_roce_resp_unknown) and
 * the ACKs a receive batch owes; resp_exec.c executes each request
 * (RESPST_EXECUTE) and answers duplicates again; resp_recv.c takes, fills
 * and completes the receive WQEs (and tags) that SENDs and immediate data
 * land in, and a UD datagram whole. They share roce_int.h.
 *
 * RC, as the IBA has it and Linux rxe does it:
 *  - a packet at the expected PSN is executed; one ahead of it is answered
 *    with one PSN-sequence NAK (not again until the expected PSN moves) and
 *    dropped; one behind it is a duplicate: SENDs and WRITEs are
 *    acknowledged again, READs replayed from the memory they name (the
 *    request was checked the first time and is checked again), atomics
 *    answered from the result kept in the responder resources (never
 *    executed twice);
 *  - a message's packets must come in order (FIRST, MIDDLE..., LAST), every
 *    one but the last a full path MTU;
 *  - a SEND with no receive WQE posted gets an RNR NAK with min_rnr_timer
 *    (nothing consumed); an access violation a remote-access NAK, a
 *    malformed request an invalid-request NAK, and the QP goes to ERR;
 *  - an ACK is sent for every packet that asks for one, coalesced to the
 *    last of a receive batch.
 * Every length, key and address comes from the packet and is checked
 * before a byte is written: payload bytes go through the same key checks as
 * the loopback path (exec/keymap.h), packet by packet (a key invalidated
 * between two packets stops the message there).
 *
 * The responder keeps no state of its own: what it knows of a QP is in the
 * QP (struct sv_roce_qp), what a receive batch leaves to do in the
 * thread's struct sv_roce_tx.
 *
 * UC: the same in-order rules without ACKs; a gap drops the rest of the
 * message, and the next FIRST or ONLY starts afresh. UD: one packet, the
 * Q_Key checked, the GRH built from the IP header.
 */
#define _GNU_SOURCE
#include <string.h>

#include <infiniband/verbs.h>

#include "device/roce/roce_int.h"

/* Answer request psn with outcome o (exec/exec_int.h's table): its NAK (RC;
 * UC has no responses), then, where o says so, t goes to ERR with o's
 * event. */
void sv_roce_resp_nak(struct sv_qp *t, struct sv_roce_tx *tx,
		      enum sv_outcome o, uint32_t psn)
{
	const struct sv_outcome_info *oi = sv_outcome(o);

	if (sv_roce_resp_is_rc(t)) {
		sv_roce_send_ack(tx, t->roce, oi->aeth, psn);
		sv_roce_stats.naks_sent++;
	}
	if (oi->qp_err)
		sv_qp_error(t, oi->event);
}

/* The packet's size rules within a message. */
static bool size_ok(const struct sv_roce_qp *rq, const struct sv_roce_pkt *p)
{
	if (!(p->flags & SV_RF_LAST))
		return p->paylen == rq->mtu;
	return p->paylen <= rq->mtu;
}

/* XRC: may t take request p, and into which SRQ (t->srq, t->pd)? */
static bool xrc_srq(struct sv_qp *t, const struct sv_roce_pkt *p)
{
	struct sv_roce_qp *rq = t->roce;

	if (rq->in != SV_IN_NONE && !(p->flags & SV_RF_FIRST))
		return t->srq && t->srq->srqn == p->xrcsrq;
	return sv_xrc_bind(t, p->xrcsrq);
}

/*
 * ---- the responder's steps ----
 *
 * A request to a connected QP passes these in the order the IBTA's
 * responder (vol. 1, chapter 9: the reliable and unreliable connected
 * services) checks a request packet, with the names Linux rxe gives them
 * (rxe_resp.c's states): the QP takes it (its state, its type, its peer),
 * the PSN (RESPST_CHK_PSN: the expected one, a duplicate, or one past a
 * gap), the opcode sequence (RESPST_CHK_OP_SEQ), the length
 * (RESPST_CHK_LENGTH), then execution (RESPST_EXECUTE, resp_exec.c; the
 * key and range checks, RESPST_CHK_RKEY, are each operation's own:
 * rc_write, rc_read, ...), then the acknowledgement (RESPST_ACKNOWLEDGE).
 * Each step returns false when the packet is done with: dropped, NAKed or
 * answered.
 */

/* Does t take p at all: a connected QP takes packets of its own type from
 * its own peer (an XRC initiator takes responses only, sv_roce_comp_rx). */
static bool chk_qp(struct sv_qp *t, const struct sv_roce_pkt *p,
		   const struct sv_roce_ip *ip)
{
	struct sv_roce_qp *rq = t->roce;

	if (!rq || !sv_roce_resp_takes(t->type, p->flags)) {
		sv_roce_drop(SV_RX_DROP_STATE);
		return false;
	}
	if (memcmp(ip->src, rq->dgid, 16)) {
		sv_roce_drop(SV_RX_DROP_PEER);
		return false;
	}
	return true;
}

/* XRC: the SRQ the request names, of t's domain; a message goes on into
 * the SRQ it began with (d: p's PSN against the expected one). */
static bool chk_xrc_srq(struct sv_qp *t, const struct sv_roce_pkt *p,
			struct sv_roce_tx *tx, int32_t d)
{
	struct sv_roce_qp *rq = t->roce;

	if (t->type != IBV_QPT_XRC_RECV || d != 0 || xrc_srq(t, p))
		return true;
	if (rq->in != SV_IN_NONE) {
		/* another SRQ inside a message */
		sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
	} else {
		/* no such SRQ here: the initiator fails, the target (shared
		 * by the domain) stays */
		sv_roce_resp_nak(t, tx, SV_OUTCOME_NO_SRQ, p->psn);
	}
	return false;
}

/*
 * RESPST_CHK_PSN: the expected PSN goes on; a duplicate (behind it) is
 * answered again (sv_roce_resp_duplicate(), resp_exec.c); one past a gap
 * is NAKed once with a PSN sequence error on RC, and on UC loses the
 * message under way, a new one starting afresh from a FIRST or ONLY.
 */
static bool chk_psn(struct sv_qp *t, const struct sv_roce_pkt *p,
		    struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;
	int32_t d = sv_psn_diff(p->psn, rq->epsn);

	if (t->type == IBV_QPT_XRC_RECV && d < 0) {
		/* an XRC duplicate: answered through the SRQ it names (a READ
		 * is replayed with that SRQ's PD) without moving a message
		 * under way to another SRQ */
		struct sv_srq *srq = t->srq;
		struct sv_pd *pd = t->pd;

		if (sv_xrc_bind(t, p->xrcsrq))
			sv_roce_resp_duplicate(t, p, tx);
		t->srq = srq;
		t->pd = pd;
		return false;
	}
	if (!chk_xrc_srq(t, p, tx, d))
		return false;
	if (d != 0 && !sv_roce_resp_is_rc(t)) {
		/* UC: a gap loses the message; a new one starts afresh */
		if (!(p->flags & SV_RF_FIRST)) {
			rq->in = SV_IN_NONE;
			sv_roce_drop(SV_RX_DROP_PSN);
			return false;
		}
		rq->epsn = p->psn;
		if (rq->in == SV_IN_SEND)
			rq->rx_off = 0;
		rq->in = SV_IN_NONE;
		d = 0;
	}
	if (d > 0) {
		sv_roce_drop(SV_RX_DROP_PSN);
		if (!rq->nak_sent) {
			rq->nak_sent = true;
			sv_roce_resp_nak(t, tx, SV_OUTCOME_SEQ, rq->epsn);
		}
		return false;
	}
	if (d < 0) {
		sv_roce_resp_duplicate(t, p, tx);
		return false;
	}
	return true;
}

/* RESPST_CHK_OP_SEQ: a MIDDLE or LAST continues a message of its kind, a
 * FIRST or ONLY starts one (out of sequence: NAK invalid request on RC,
 * dropped on UC). */
static bool chk_op_seq(struct sv_qp *t, const struct sv_roce_pkt *p,
		       struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;

	if (p->flags & SV_RF_FIRST) {
		if (rq->in != SV_IN_NONE && sv_roce_resp_is_rc(t)) {
			sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
			return false;
		}
		if (rq->in == SV_IN_SEND && rq->rx_taken)
			rq->rx_off = 0; /* UC: the WQE is used again */
	} else if (!(p->flags & (SV_RF_READ | SV_RF_ATOMIC | SV_RF_FLUSH |
				 SV_RF_AWRITE)) &&
		   rq->in != ((p->flags & SV_RF_SEND) ? SV_IN_SEND :
							SV_IN_WRITE)) {
		if (sv_roce_resp_is_rc(t))
			sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		else
			sv_roce_drop(SV_RX_DROP_PSN);
		return false;
	}
	return true;
}

/* RESPST_CHK_LENGTH: a SEND's or WRITE's payload fits the packet's place
 * in its message (size_ok); else NAK invalid request (RC), dropped (UC). */
static bool chk_length(struct sv_qp *t, const struct sv_roce_pkt *p,
		       struct sv_roce_tx *tx)
{
	if (!(p->flags & (SV_RF_SEND | SV_RF_WRITE)) || size_ok(t->roce, p))
		return true;
	if (sv_roce_resp_is_rc(t))
		sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
	else
		sv_roce_drop(SV_RX_DROP_MALFORMED);
	return false;
}

/* softverbs inject: a remote access error armed for t answers the first
 * packet of the next access (not the IBTA's: a test's). */
static bool chk_injected(struct sv_qp *t, const struct sv_roce_pkt *p,
			 struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;

	if (__builtin_expect((t->inj_access | sv_inj_wide) != 0, 0) &&
	    rq->in == SV_IN_NONE &&
	    ((p->flags & (SV_RF_READ | SV_RF_ATOMIC | SV_RF_FLUSH |
			  SV_RF_AWRITE)) ||
	     (p->flags & (SV_RF_WRITE | SV_RF_FIRST)) ==
		     (SV_RF_WRITE | SV_RF_FIRST)) &&
	    sv_inject_resp(t, false)) {
		sv_roce_resp_nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
		return false;
	}
	return true;
}

/* RESPST_ACKNOWLEDGE: an RC request that asked for one (the BTH's A bit),
 * executed whole, is acknowledged once the batch of packets is in
 * (sv_roce_resp_flush_ack: one ACK for the last of them). */
static void acknowledge(struct sv_qp *t, const struct sv_roce_pkt *p)
{
	struct sv_roce_qp *rq = t->roce;

	if (sv_roce_resp_is_rc(t) && p->ackreq && t->state != IBV_QPS_ERR &&
	    sv_psn_diff(rq->epsn, sv_psn_add(p->psn, 1)) == 0) {
		rq->ack_due = true;
		rq->ack_psn = p->psn;
	}
}

void sv_roce_resp_rx(struct sv_qp *t, const struct sv_roce_pkt *p,
		     const struct sv_roce_ip *ip, struct sv_roce_tx *tx)
{
	/* what waits is placed before anything that could see it */
	if (tx->wb.t && (tx->wb.t != t || !(p->flags & SV_RF_WRITE)))
		(void)sv_roce_resp_place(tx);
	if (!sv_qp_can_receive(t)) {
		sv_roce_drop(SV_RX_DROP_STATE);
		return;
	}
	if (t->type == IBV_QPT_UD) {
		if (sv_roce_resp_takes(t->type, p->flags))
			sv_roce_resp_ud_recv(t, p, ip);
		else
			sv_roce_drop(SV_RX_DROP_STATE);
		return;
	}
	if (!chk_qp(t, p, ip) || !chk_psn(t, p, tx))
		return;
	/* the expected packet: a NAK may be sent again, and the first one
	 * a QP takes in RTR establishes it */
	t->roce->nak_sent = false;
	sv_comm_est(t);
	if (!chk_op_seq(t, p, tx) || !chk_length(t, p, tx) ||
	    !chk_injected(t, p, tx) || !sv_roce_resp_execute(t, p, tx))
		return;
	acknowledge(t, p);
}

/*
 * A packet whose opcode the device does not know (only its BTH was parsed;
 * a device started without masked atomics sends those here too): an RC
 * responder answers the request it expects next with a NAK invalid request
 * and goes to the error state, as the IBTA asks of a responder that does
 * not support an opcode; anything else is dropped.
 */
void sv_roce_resp_unknown(struct sv_qp *t, const struct sv_roce_pkt *p,
			  const struct sv_roce_ip *ip, struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;

	if (tx->wb.t)
		(void)sv_roce_resp_place(tx);
	if (!sv_qp_can_receive(t) || !rq || !sv_roce_resp_is_rc(t) ||
	    memcmp(ip->src, rq->dgid, 16) ||
	    sv_psn_diff(p->psn, rq->epsn) != 0)
		return;
	sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
}

void sv_roce_resp_flush_ack(struct sv_qp *t, struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;

	if (!rq || !rq->ack_due)
		return;
	rq->ack_due = false;
	if (t->state == IBV_QPS_ERR || t->state == IBV_QPS_RESET)
		return;
	sv_roce_send_ack(tx, rq, SV_AETH_ACK, rq->ack_psn);
}
