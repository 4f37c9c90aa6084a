// SPDX-License-Identifier: MIT
/*
 * The responder of a wire QP: the request packets that arrive for it (the
 * wire thread, under sv_dev.lock).
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
 * WRITE payloads are placed a receive batch at a time: each packet is
 * checked when it arrives (its key resolved to the target's iovecs), and
 * the payloads of one QP's run of WRITE packets go with one
 * process_vm_writev (struct sv_roce_wbatch, the receiving thread's, in its
 * struct sv_roce_tx) before anything that could see them: another QP's or
 * another kind of packet, a completion (WRITE with immediate), the ACKs of
 * the batch. A placement that fails is done again packet by packet to find
 * the packet that failed, which is answered as if it had failed alone.
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
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "device/exec/atomic.h"
#include "device/roce/roce_int.h"

/* RC and XRC targets: acknowledged */
static bool is_rc(const struct sv_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_RECV;
}

/* The opcode of a response of t (an RC one given): XRC's for XRC. */
static uint8_t resp_op(const struct sv_qp *t, uint8_t rc_op)
{
	return t->type == IBV_QPT_XRC_RECV ? (uint8_t)(rc_op | SV_OP_XRC_BASE)
					   : rc_op;
}

/* Answer request psn with outcome o (exec/exec_int.h's table): its NAK (RC;
 * UC has no responses), then, where o says so, t goes to ERR with o's
 * event. */
static void nak(struct sv_qp *t, struct sv_roce_tx *tx, enum sv_outcome o,
		uint32_t psn)
{
	const struct sv_outcome_info *oi = sv_outcome(o);

	if (is_rc(t)) {
		sv_roce_send_ack(tx, t->roce, oi->aeth, psn);
		sv_roce_stats.naks_sent++;
	}
	if (oi->qp_err)
		sv_qp_error(t, oi->event);
}

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
static void msg_rx_done(struct sv_qp *t, uint32_t status, uint32_t opcode,
			uint32_t byte_len, const struct sv_roce_pkt *p)
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
static uint32_t rx_put(struct sv_qp *t, struct rwqe *r, uint64_t off,
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

/* Copy len bytes at va of the requester's peer memory (rkey) into the
 * payloads dst lists: one copy when the MR is one run of memory, else a
 * payload at a time (a span's windows take one raw buffer). */
static bool read_gather(struct sv_exec *x, struct sv_qp *t, uint32_t rkey,
			uint64_t va, uint64_t len, const struct sv_mem *dst)
{
	struct rspan r;
	struct span d;
	uint64_t off = 0;

	if (!sv_span_remote(&r, rkey, t, va, len, IBV_ACCESS_REMOTE_READ))
		return false;
	if (r.s.whole) {
		d = (struct span){ .mem = *dst, .whole = true };
		return sv_span_copy(x, &d, 0, &r.s, 0, len) == SV_COPY_OK;
	}
	for (unsigned int i = 0; i < dst->niov; i++) {
		sv_span_raw(&d, dst->iov[i].iov_base, dst->iov[i].iov_len);
		if (sv_span_copy(x, &d, 0, &r.s, off, dst->iov[i].iov_len) !=
		    SV_COPY_OK)
			return false;
		off += dst->iov[i].iov_len;
	}
	return true;
}

/*
 * Send the READ responses for psn .. of a READ of len bytes at va. They go
 * a tx batch at a time: the headers of as many responses as the batch has
 * room for are written, then every payload of them comes with one copy from
 * the requester's peer memory (one process_vm_readv for up to SV_TX_BATCH
 * packets, as a WRITE's payloads are gathered), with the key checked for
 * the batch's whole range first. A batch whose key check or copy fails is
 * taken back before anything of it is sent: false, and the responses sent
 * before it stand.
 */
static bool read_respond(struct sv_qp *t, struct sv_roce_tx *tx, uint32_t psn,
			 uint64_t va, uint32_t rkey, uint64_t len)
{
	struct sv_roce_qp *rq = t->roce;
	uint32_t n = len ? (uint32_t)((len + rq->mtu - 1) / rq->mtu) : 1;
	struct iovec dv[SV_TX_BATCH];
	struct sv_exec x;
	uint32_t k = 0;

	sv_roce_exec(&x);
	while (k < n) {
		unsigned int n0, room, i;
		uint64_t off = (uint64_t)k * rq->mtu, blen = 0;
		struct sv_mem dst = { .pid = 0, .iov = dv, .niov = 0 };

		if (tx->n == SV_TX_BATCH)
			sv_roce_tx_flush(tx);
		n0 = tx->n;
		room = SV_TX_BATCH - n0;
		for (i = 0; i < room && k + i < n; i++) {
			uint64_t o = (uint64_t)(k + i) * rq->mtu;
			uint32_t l = (uint32_t)(len - o < rq->mtu ? len - o :
						rq->mtu);
			struct sv_roce_pkt p;
			uint8_t *buf;
			size_t hdr;

			memset(&p, 0, sizeof(p));
			p.opcode = resp_op(t, n == 1 ? SV_OP_RC_READ_RESP_ONLY :
					      k + i == 0 ? SV_OP_RC_READ_RESP_FIRST :
					      k + i + 1 == n ? SV_OP_RC_READ_RESP_LAST :
					      SV_OP_RC_READ_RESP_MIDDLE);
			p.dqpn = rq->dqpn;
			p.pkey = SV_PKEY_DEFAULT;
			p.psn = sv_psn_add(psn, k + i);
			p.syndrome = SV_AETH_ACK;
			p.msn = rq->msn;
			buf = sv_roce_tx_next(tx);
			hdr = sv_roce_build_hdr(buf, &p);
			if (l) {
				dv[dst.niov].iov_base = buf + hdr;
				dv[dst.niov++].iov_len = l;
				blen += l;
			}
			sv_roce_tx_push(tx, hdr + l, rq->sgid, rq->dgid,
					rq->sport, rq->qp->qpn);
		}
		if (blen && !read_gather(&x, t, rkey, va + off, blen, &dst)) {
			tx->n = n0;     /* none of this batch goes */
			return false;
		}
		k += i;
	}
	return true;
}

static void atomic_ack(struct sv_qp *t, struct sv_roce_tx *tx, uint32_t psn,
		       uint64_t orig)
{
	sv_roce_send_resp(tx, t->roce, resp_op(t, SV_OP_RC_ATOMIC_ACK),
			  SV_AETH_ACK, psn, orig);
}

/* The answer to a FLUSH or an ATOMIC WRITE: a zero-length READ response
 * (what Linux rxe sends; IBTA 1.5) */
static void rdack(struct sv_qp *t, struct sv_roce_tx *tx, uint32_t psn)
{
	sv_roce_send_resp(tx, t->roce, resp_op(t, SV_OP_RC_READ_RESP_ONLY),
			  SV_AETH_ACK, psn, 0);
}

static struct sv_rres *res_find(struct sv_roce_qp *rq, uint32_t psn)
{
	for (unsigned int i = 0; i < SV_MAX_RD_ATOM; i++) {
		struct sv_rres *r = &rq->res[i];

		if (r->valid && sv_psn_diff(psn, r->psn) >= 0 &&
		    sv_psn_diff(psn, sv_psn_add(r->psn, r->npkts)) < 0)
			return r;
	}
	return NULL;
}

static struct sv_rres *res_new(struct sv_roce_qp *rq)
{
	struct sv_rres *r = &rq->res[rq->res_next++ % SV_MAX_RD_ATOM];

	memset(r, 0, sizeof(*r));
	r->valid = true;
	return r;
}

/* A request behind the expected PSN. */
static void duplicate(struct sv_qp *t, const struct sv_roce_pkt *p,
		      struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;
	struct sv_rres *r;

	sv_roce_stats.dup_reqs++;
	if (p->flags & (SV_RF_READ | SV_RF_ATOMIC | SV_RF_FLUSH |
			SV_RF_AWRITE)) {
		r = res_find(rq, p->psn);
		if (!r)
			return;         /* too old: the requester gave up */
		if (r->rdack) {
			/* executed once; its answer again */
			if (r->psn == p->psn)
				rdack(t, tx, r->psn);
			return;
		}
		if (r->atomic) {
			if (r->psn == p->psn)
				atomic_ack(t, tx, r->psn, r->orig);
			return;
		}
		/* replay from the PSN asked for */
		{
			uint64_t off = (uint64_t)sv_psn_diff(p->psn, r->psn) *
				       rq->mtu;

			if (off < r->len || (!off && !r->len))
				read_respond(t, tx, p->psn, r->va + off, r->rkey,
					     r->len - off);
		}
		return;
	}
	/* SEND, WRITE: say again how far we are */
	rq->ack_due = true;
	rq->ack_psn = sv_psn_prev(rq->epsn);
}

/* The packet's size rules within a message. */
static bool size_ok(const struct sv_roce_qp *rq, const struct sv_roce_pkt *p)
{
	if (!(p->flags & SV_RF_LAST))
		return p->paylen == rq->mtu;
	return p->paylen <= rq->mtu;
}

/* Take a receive WQE for the message of packet psn: true; or false, and
 * an RNR NAK (RC, none posted) or a NAK and ERR (the ring is bad). */
static bool take_or_nak(struct sv_qp *t, struct sv_roce_tx *tx, uint32_t psn)
{
	/* softverbs inject: as if none were posted */
	int ret = sv_inject_resp(t, true) ? -ENOENT : msg_rx_take(t);

	if (ret == -ENOENT) {
		if (is_rc(t)) {
			sv_roce_send_ack(tx, t->roce,
					 SV_AETH_RNR(t->attr.min_rnr_timer), psn);
			sv_roce_stats.rnr_naks_sent++;
		} else {
			sv_roce_drop(SV_RX_DROP_NORES);
		}
		return false;
	}
	if (ret) {
		nak(t, tx, SV_OUTCOME_RECV_ERR, psn);
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
static __attribute__((noinline)) bool
tm_take(struct sv_qp *t, const struct sv_roce_pkt *p, struct sv_roce_tx *tx,
	uint32_t *skip)
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
		if (!take_or_nak(t, tx, p->psn))
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

static void rc_send(struct sv_qp *t, const struct sv_roce_pkt *p,
		    struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;
	uint32_t st, skip = 0;

	if (p->flags & SV_RF_FIRST) {
		/* SEND_WITH_INV goes to an ordinary WQE even there */
		if (__builtin_expect(t->srq && t->srq->tm &&
				     !(p->flags & SV_RF_IETH), 0)) {
			if (!tm_take(t, p, tx, &skip))
				return;
		} else if (!take_or_nak(t, tx, p->psn)) {
			return;         /* nothing consumed: epsn stays */
		}
		rq->in = SV_IN_SEND;
	}
	st = rx_put(t, &rq->rx, rq->rx_off, p->payload + skip,
		    p->paylen - skip);
	if (st == IBV_WC_LOC_PROT_ERR && sv_target_gone(t)) {
		/* no answer, as a vanished host (write_fail): not taken */
		rq->ack_due = false;
		return;
	}
	if (st != IBV_WC_SUCCESS) {
		rq->in = SV_IN_NONE;
		msg_rx_done(t, st, IBV_WC_RECV, 0, NULL);
		nak(t, tx, st == IBV_WC_LOC_LEN_ERR ? SV_OUTCOME_RECV_LEN :
			   SV_OUTCOME_RECV_ERR, p->psn);
		return;
	}
	rq->rx_off += p->paylen - skip;
	rq->epsn = sv_psn_add(rq->epsn, 1);
	if (!(p->flags & SV_RF_LAST))
		return;
	rq->in = SV_IN_NONE;
	if ((p->flags & SV_RF_IETH) && !sv_mm_remote_inv_ok(t, p->ieth_rkey)) {
		msg_rx_done(t, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, NULL);
		nak(t, tx, SV_OUTCOME_RECV_ERR, p->psn);
		return;
	}
	if (p->flags & SV_RF_IETH)
		sv_mm_remote_inv(t, p->ieth_rkey);
	rq->msn = sv_psn_add(rq->msn, 1);
	msg_rx_done(t, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)rq->rx_off, p);
}

/* The end of a WRITE packet's copy (copy: its sv_span_copy result): true
 * if placed; else the failure answered (a vanished target: not at all) and
 * false. */
static bool write_fail(struct sv_qp *t, struct sv_roce_tx *tx, uint32_t psn,
		       int copy)
{
	struct sv_roce_qp *rq = t->roce;

	if (copy == SV_COPY_OK)
		return true;
	if (sv_target_gone(t)) {
		/* no answer, as a vanished host: the packet was not taken */
		rq->epsn = psn;
		rq->ack_due = false;
		return false;
	}
	rq->in = SV_IN_NONE;
	nak(t, tx, SV_OUTCOME_ACCESS, psn);
	return false;
}

/* Add a WRITE packet of t (its target memory resolved in r, from its key
 * rkey at va) to the batch wb: false when it does not fit (place what
 * waits first) or must go alone. */
static bool wb_add(struct sv_roce_wbatch *wb, struct sv_qp *t,
		   const struct sv_roce_pkt *p, uint32_t rkey, uint64_t va,
		   const struct rspan *r)
{
	const struct sv_mem *m = &r->s.mem;
	unsigned int k;

	if (!r->s.whole || m->pid == 0)
		return false;
	if (wb->t && (wb->t != t || wb->pid != m->pid ||
		      wb->n == SV_WB_PKTS || wb->nrem + m->niov > SV_WB_IOVS))
		return false;
	if (!wb->t) {
		wb->t = t;
		wb->pid = m->pid;
		wb->n = wb->nrem = 0;
	}
	k = wb->n++;
	wb->pkt[k].psn = p->psn;
	wb->pkt[k].rkey = rkey;
	wb->pkt[k].va = va;
	wb->loc[k].iov_base = (void *)p->payload;
	wb->loc[k].iov_len = p->paylen;
	for (unsigned int i = 0; i < m->niov; i++) {
		struct iovec *last = wb->nrem ? &wb->rem[wb->nrem - 1] : NULL;

		if (last && (char *)last->iov_base + last->iov_len ==
			    (char *)m->iov[i].iov_base)
			last->iov_len += m->iov[i].iov_len;
		else
			wb->rem[wb->nrem++] = m->iov[i];
	}
	return true;
}

bool sv_roce_resp_place(struct sv_roce_tx *tx)
{
	struct sv_roce_wbatch *wb = &tx->wb;
	struct sv_qp *t = wb->t;
	size_t bytes = 0;
	ssize_t r;

	if (!t)
		return true;
	wb->t = NULL;
	for (unsigned int i = 0; i < wb->n; i++)
		bytes += wb->loc[i].iov_len;
	r = process_vm_writev(wb->pid, wb->loc, wb->n, wb->rem, wb->nrem, 0);
	if (r >= 0 && (size_t)r == bytes)
		return true;
	/* packet by packet, as they came: the first that fails is
	 * answered; those after it were not taken */
	for (unsigned int i = 0; i < wb->n; i++) {
		struct sv_exec x;
		struct rspan rs;
		struct span s;
		int copy = SV_COPY_DST_FAULT;

		if (t->state == IBV_QPS_ERR || !t->roce)
			return false;
		const struct iovec *l = &wb->loc[i];

		if (sv_span_remote(&rs, wb->pkt[i].rkey, t, wb->pkt[i].va,
				   l->iov_len, IBV_ACCESS_REMOTE_WRITE)) {
			sv_roce_exec(&x);
			sv_span_raw(&s, l->iov_base, l->iov_len);
			copy = sv_span_copy(&x, &rs.s, 0, &s, 0, l->iov_len);
		}
		if (!write_fail(t, tx, wb->pkt[i].psn, copy))
			return false;
	}
	return true;
}

static void rc_write(struct sv_qp *t, const struct sv_roce_pkt *p,
		     struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;
	struct sv_exec x;
	struct rspan r;
	struct span s;

	if (p->flags & SV_RF_FIRST) {
		if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE)) {
			nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
			return;
		}
		rq->wr_va = p->va;
		rq->wr_rkey = p->rkey;
		rq->wr_len = p->dmalen;
		rq->wr_off = 0;
		rq->in = SV_IN_WRITE;
	}
	if (rq->wr_off + p->paylen > rq->wr_len ||
	    ((p->flags & SV_RF_LAST) && rq->wr_off + p->paylen != rq->wr_len)) {
		rq->in = SV_IN_NONE;
		nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		return;
	}
	if (p->paylen) {
		uint64_t va = rq->wr_va + rq->wr_off;

		if (!sv_span_remote(&r, rq->wr_rkey, t, va, p->paylen,
				    IBV_ACCESS_REMOTE_WRITE)) {
			rq->in = SV_IN_NONE;
			nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
			return;
		}
		if (!wb_add(&tx->wb, t, p, rq->wr_rkey, va, &r) &&
		    (!sv_roce_resp_place(tx) ||
		     !wb_add(&tx->wb, t, p, rq->wr_rkey, va, &r))) {
			/* it goes alone, now (if what waited went well) */
			if (t->state == IBV_QPS_ERR ||
			    sv_psn_diff(rq->epsn, p->psn) != 0)
				return;
			sv_roce_exec(&x);
			sv_span_raw(&s, (void *)p->payload, p->paylen);
			if (!write_fail(t, tx, p->psn,
					sv_span_copy(&x, &r.s, 0, &s, 0,
						     p->paylen)))
				return;
		}
	}
	if ((p->flags & SV_RF_LAST) && (p->flags & SV_RF_IMMDT)) {
		/* the data is in place before the completion says so */
		if (!sv_roce_resp_place(tx))
			return;
		/* the immediate data takes a receive WQE */
		if (!take_or_nak(t, tx, p->psn))
			return;         /* the data again with the retry */
		msg_rx_done(t, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
			    (uint32_t)rq->wr_len, p);
	}
	rq->wr_off += p->paylen;
	rq->epsn = sv_psn_add(rq->epsn, 1);
	if (p->flags & SV_RF_LAST) {
		rq->in = SV_IN_NONE;
		rq->msn = sv_psn_add(rq->msn, 1);
	}
}

static void rc_read(struct sv_qp *t, const struct sv_roce_pkt *p,
		    struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;
	struct sv_rres *r;
	struct rspan probe;
	uint32_t n = p->dmalen ? (p->dmalen + rq->mtu - 1) / rq->mtu : 1;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ)) {
		nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		return;
	}
	if (p->dmalen && !sv_span_remote(&probe, p->rkey, t, p->va,
					   p->dmalen, IBV_ACCESS_REMOTE_READ)) {
		nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
		return;
	}
	r = res_new(rq);
	r->psn = p->psn;
	r->npkts = n;
	r->va = p->va;
	r->rkey = p->rkey;
	r->len = p->dmalen;
	rq->epsn = sv_psn_add(rq->epsn, n);
	rq->msn = sv_psn_add(rq->msn, 1);
	if (!read_respond(t, tx, p->psn, p->va, p->rkey, p->dmalen)) {
		if (sv_target_gone(t))
			return;
		nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
	}
}

static void rc_atomic(struct sv_qp *t, const struct sv_roce_pkt *p,
		      struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;
	struct sv_atomic_op op = {
		.compare_add = p->compare, .swap = p->swap_add,
		.compare_mask = p->compare_mask, .swap_mask = p->swap_mask,
	};
	struct sv_exec x;
	struct rspan r;
	struct span l;
	uint64_t orig, val;
	struct sv_rres *res;
	bool store;

	if (p->opcode == SV_OP_RC_MASKED_CMP_SWAP) {
		op.kind = SV_ATOMIC_MASKED_CMP_SWAP;
	} else if (p->opcode == SV_OP_RC_MASKED_FETCH_ADD) {
		/* add data in swap/add, field ends in compare */
		op.kind = SV_ATOMIC_MASKED_FETCH_ADD;
		op.compare_add = p->swap_add;
		op.swap = p->compare;
	} else if ((p->opcode & 0x1f) == SV_OP_RC_CMP_SWAP) {
		op.kind = SV_ATOMIC_CMP_SWAP;       /* RC's or XRC's */
	} else {
		/* the add data is in swap/add; compare is not used */
		op.kind = SV_ATOMIC_FETCH_ADD;
		op.compare_add = p->swap_add;
	}
	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) ||
	    (p->va & 7)) {
		nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		return;
	}
	if (!sv_span_remote(&r, p->rkey, t, p->va, 8,
			      IBV_ACCESS_REMOTE_ATOMIC)) {
		nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
		return;
	}
	sv_roce_exec(&x);
	/* atomic with respect to every other atomic: sv_dev.lock is held */
	sv_span_raw(&l, &orig, sizeof(orig));
	if (sv_span_copy(&x, &l, 0, &r.s, 0, 8) != SV_COPY_OK)
		goto fault;
	store = sv_atomic_apply(&op, orig, &val);
	sv_span_raw(&l, &val, sizeof(val));
	if (store && sv_span_copy(&x, &r.s, 0, &l, 0, 8) != SV_COPY_OK)
		goto fault;
	res = res_new(rq);
	res->atomic = true;
	res->psn = p->psn;
	res->npkts = 1;
	res->orig = orig;
	rq->epsn = sv_psn_add(rq->epsn, 1);
	rq->msn = sv_psn_add(rq->msn, 1);
	atomic_ack(t, tx, p->psn, orig);
	return;
fault:
	if (sv_target_gone(t))
		return;
	nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
}

/* A FLUSH or an ATOMIC WRITE done: a responder resource remembers it, so
 * that a duplicate is answered and not executed again. */
static void rdack_done(struct sv_qp *t, struct sv_roce_tx *tx, uint32_t psn)
{
	struct sv_roce_qp *rq = t->roce;
	struct sv_rres *res = res_new(rq);

	res->rdack = true;
	res->psn = psn;
	res->npkts = 1;
	rq->epsn = sv_psn_add(rq->epsn, 1);
	rq->msn = sv_psn_add(rq->msn, 1);
	rdack(t, tx, psn);
}

/*
 * ATOMIC WRITE (IBTA 1.5, as Linux rxe does it): 8 bytes at an aligned
 * address, stored at once under sv_dev.lock, which every atomic of the
 * device holds (no atomic sees half of it). The rights are a WRITE's.
 */
static void rc_atomic_write(struct sv_qp *t, const struct sv_roce_pkt *p,
			    struct sv_roce_tx *tx)
{
	struct sv_exec x;
	struct rspan r;
	struct span l;
	uint64_t val;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) ||
	    (p->va & 7) || p->dmalen != 8 || p->paylen != 8) {
		nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		return;
	}
	if (!sv_span_remote(&r, p->rkey, t, p->va, 8, IBV_ACCESS_REMOTE_WRITE)) {
		nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
		return;
	}
	memcpy(&val, p->payload, 8);
	sv_roce_exec(&x);
	sv_span_raw(&l, &val, sizeof(val));
	if (sv_span_copy(&x, &r.s, 0, &l, 0, 8) != SV_COPY_OK) {
		if (!sv_target_gone(t))
			nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
		return;
	}
	rdack_done(t, tx, p->psn);
}

/* RDMA FLUSH (IBTA 1.5, the FETH as Linux rxe sends it): everything this
 * responder placed before it is visible to every later access once it is
 * answered (the receive batch's WRITEs are placed before any other packet
 * is looked at, sv_roce_resp_rx); the checks: sv_flush_run. */
static void rc_flush(struct sv_qp *t, const struct sv_roce_pkt *p,
		     struct sv_roce_tx *tx)
{
	enum sv_outcome o = sv_flush_run(t, SV_FETH_PLT(p->feth),
					 SV_FETH_SEL(p->feth), p->rkey, p->va,
					 p->dmalen);

	if (o != SV_OUTCOME_OK) {
		nak(t, tx, o, p->psn);
		return;
	}
	rdack_done(t, tx, p->psn);
}

/* UD: one datagram; trouble drops it silently. */
static void ud_recv(struct sv_qp *t, const struct sv_roce_pkt *p,
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
	st = rx_put(t, &r, 0, grh, sizeof(grh));
	if (st == IBV_WC_SUCCESS)
		st = rx_put(t, &r, sizeof(grh), p->payload, p->paylen);
	rx_done(t, &r, st, IBV_WC_RECV,
		st == IBV_WC_SUCCESS ? (uint32_t)sizeof(grh) + p->paylen : 0,
		p, sv_grh_wc_sl(ip->src), p->sqpn);
}

/* XRC: may t take request p, and into which SRQ (t->srq, t->pd)? */
static bool xrc_srq(struct sv_qp *t, const struct sv_roce_pkt *p)
{
	struct sv_roce_qp *rq = t->roce;

	if (rq->in != SV_IN_NONE && !(p->flags & SV_RF_FIRST))
		return t->srq && t->srq->srqn == p->xrcsrq;
	return sv_xrc_bind(t, p->xrcsrq);
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

/*
 * ---- the responder's steps ----
 *
 * A request to a connected QP passes these in the order the IBTA's
 * responder (vol. 1, chapter 9: the reliable and unreliable connected
 * services) checks a request packet, with the names Linux rxe gives them
 * (rxe_resp.c's states): the QP takes it (its state, its type, its peer),
 * the PSN (RESPST_CHK_PSN: the expected one, a duplicate, or one past a
 * gap), the opcode sequence (RESPST_CHK_OP_SEQ), the length
 * (RESPST_CHK_LENGTH), then execution (RESPST_EXECUTE; the key and range
 * checks, RESPST_CHK_RKEY, are each operation's own: rc_write, rc_read,
 * ...), then the acknowledgement (RESPST_ACKNOWLEDGE). Each step returns
 * false when the packet is done with: dropped, NAKed or answered.
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
		nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
	} else {
		/* no such SRQ here: the initiator fails, the target (shared
		 * by the domain) stays */
		nak(t, tx, SV_OUTCOME_NO_SRQ, p->psn);
	}
	return false;
}

/*
 * RESPST_CHK_PSN: the expected PSN goes on; a duplicate (behind it) is
 * answered again (duplicate()); one past a gap is NAKed once with a PSN
 * sequence error on RC, and on UC loses the message under way, a new one
 * starting afresh from a FIRST or ONLY.
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
			duplicate(t, p, tx);
		t->srq = srq;
		t->pd = pd;
		return false;
	}
	if (!chk_xrc_srq(t, p, tx, d))
		return false;
	if (d != 0 && !is_rc(t)) {
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
			nak(t, tx, SV_OUTCOME_SEQ, rq->epsn);
		}
		return false;
	}
	if (d < 0) {
		duplicate(t, p, tx);
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
		if (rq->in != SV_IN_NONE && is_rc(t)) {
			nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
			return false;
		}
		if (rq->in == SV_IN_SEND && rq->rx_taken)
			rq->rx_off = 0; /* UC: the WQE is used again */
	} else if (!(p->flags & (SV_RF_READ | SV_RF_ATOMIC | SV_RF_FLUSH |
				 SV_RF_AWRITE)) &&
		   rq->in != ((p->flags & SV_RF_SEND) ? SV_IN_SEND :
							SV_IN_WRITE)) {
		if (is_rc(t))
			nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
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
	if (is_rc(t))
		nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
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
		nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
		return false;
	}
	return true;
}

/* RESPST_EXECUTE: each operation (with its own key and range checks);
 * true when the packet may ask for an acknowledgement (a SEND or WRITE:
 * READ, atomics and FLUSH answer by themselves). */
static bool execute(struct sv_qp *t, const struct sv_roce_pkt *p,
		    struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;

	if (p->flags & SV_RF_SEND) {
		if ((p->flags & SV_RF_FIRST) && rq->in == SV_IN_SEND &&
		    rq->rx_taken) {
			/* UC restart: keep the WQE taken */
			uint32_t st = rx_put(t, &rq->rx, 0, p->payload,
					     p->paylen);

			if (st != IBV_WC_SUCCESS)
				return false;
			rq->rx_off = p->paylen;
			rq->epsn = sv_psn_add(rq->epsn, 1);
			return false;
		}
		rc_send(t, p, tx);
		return true;
	}
	if (p->flags & SV_RF_WRITE) {
		rc_write(t, p, tx);
		return true;
	}
	if (p->flags & (SV_RF_READ | SV_RF_ATOMIC | SV_RF_FLUSH |
			SV_RF_AWRITE)) {
		/* never inside another message */
		if (rq->in != SV_IN_NONE)
			nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		else if (p->flags & SV_RF_READ)
			rc_read(t, p, tx);
		else if (p->flags & SV_RF_FLUSH)
			rc_flush(t, p, tx);
		else if (p->flags & SV_RF_AWRITE)
			rc_atomic_write(t, p, tx);
		else
			rc_atomic(t, p, tx);
		return false;
	}
	sv_roce_drop(SV_RX_DROP_OPCODE);
	return false;
}

/* RESPST_ACKNOWLEDGE: an RC request that asked for one (the BTH's A bit),
 * executed whole, is acknowledged once the batch of packets is in
 * (sv_roce_resp_flush_ack: one ACK for the last of them). */
static void acknowledge(struct sv_qp *t, const struct sv_roce_pkt *p)
{
	struct sv_roce_qp *rq = t->roce;

	if (is_rc(t) && p->ackreq && t->state != IBV_QPS_ERR &&
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
			ud_recv(t, p, ip);
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
	    !chk_injected(t, p, tx) || !execute(t, p, tx))
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
	if (!sv_qp_can_receive(t) || !rq || !is_rc(t) ||
	    memcmp(ip->src, rq->dgid, 16) ||
	    sv_psn_diff(p->psn, rq->epsn) != 0)
		return;
	nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
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

int sv_roce_flush(struct sv_qp *qp)
{
	struct sv_roce_qp *rq = qp->roce;

	if (!rq || !rq->rx_taken)
		return false;
	rq->in = SV_IN_NONE;
	msg_rx_done(qp, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, NULL);
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
