// SPDX-License-Identifier: MIT
/*
 * The responder's execution (RESPST_EXECUTE; resp.c has the steps before
 * it): each request at the expected PSN with its own key and range checks
 * (SEND, into a receive WQE or a tag of resp_recv.c; WRITE; READ; the
 * atomics; ATOMIC WRITE; FLUSH), and the answers to duplicates: SENDs and
 * WRITEs acknowledged again, READs replayed from the memory they name,
 * atomics, FLUSH and ATOMIC WRITE answered from the responder resources
 * (struct sv_rres), never executed twice.
 *
 * WRITE payloads are placed a receive batch at a time: each packet is
 * checked when it arrives (its key resolved to the target's iovecs), and
 * the payloads of one QP's run of WRITE packets go with one
 * process_vm_writev (struct sv_roce_wbatch, the receiving thread's, in its
 * struct sv_roce_tx) before anything that could see them: another QP's or
 * another kind of packet, a completion (WRITE with immediate), the ACKs of
 * the batch. A placement that fails is done again packet by packet to find
 * the packet that failed, which is answered as if it had failed alone.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/uio.h>

#include <infiniband/verbs.h>

#include "device/exec/atomic.h"
#include "device/roce/roce_int.h"

/* The opcode of a response of t (an RC one given): XRC's for XRC. */
static uint8_t resp_op(const struct sv_qp *t, uint8_t rc_op)
{
	return t->type == IBV_QPT_XRC_RECV ? (uint8_t)(rc_op | SV_OP_XRC_BASE)
					   : rc_op;
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
void sv_roce_resp_duplicate(struct sv_qp *t, const struct sv_roce_pkt *p,
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

static void rc_send(struct sv_qp *t, const struct sv_roce_pkt *p,
		    struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;
	uint32_t st, skip = 0;

	if (p->flags & SV_RF_FIRST) {
		/* SEND_WITH_INV goes to an ordinary WQE even there */
		if (__builtin_expect(t->srq && t->srq->tm &&
				     !(p->flags & SV_RF_IETH), 0)) {
			if (!sv_roce_resp_tm_take(t, p, tx, &skip))
				return;
		} else if (!sv_roce_resp_take_or_nak(t, tx, p->psn)) {
			return;         /* nothing consumed: epsn stays */
		}
		rq->in = SV_IN_SEND;
	}
	st = sv_roce_resp_rx_put(t, &rq->rx, rq->rx_off, p->payload + skip,
				 p->paylen - skip);
	if (st == IBV_WC_LOC_PROT_ERR && sv_target_gone(t)) {
		/* no answer, as a vanished host (write_fail): not taken */
		rq->ack_due = false;
		return;
	}
	if (st != IBV_WC_SUCCESS) {
		rq->in = SV_IN_NONE;
		sv_roce_resp_msg_rx_done(t, st, IBV_WC_RECV, 0, NULL);
		sv_roce_resp_nak(t, tx, st == IBV_WC_LOC_LEN_ERR ?
					SV_OUTCOME_RECV_LEN :
					SV_OUTCOME_RECV_ERR, p->psn);
		return;
	}
	rq->rx_off += p->paylen - skip;
	rq->epsn = sv_psn_add(rq->epsn, 1);
	if (!(p->flags & SV_RF_LAST))
		return;
	rq->in = SV_IN_NONE;
	if ((p->flags & SV_RF_IETH) && !sv_mm_remote_inv_ok(t, p->ieth_rkey)) {
		sv_roce_resp_msg_rx_done(t, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0,
					 NULL);
		sv_roce_resp_nak(t, tx, SV_OUTCOME_RECV_ERR, p->psn);
		return;
	}
	if (p->flags & SV_RF_IETH)
		sv_mm_remote_inv(t, p->ieth_rkey);
	rq->msn = sv_psn_add(rq->msn, 1);
	sv_roce_resp_msg_rx_done(t, IBV_WC_SUCCESS, IBV_WC_RECV,
				 (uint32_t)rq->rx_off, p);
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
	sv_roce_resp_nak(t, tx, SV_OUTCOME_ACCESS, psn);
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
			sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
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
		sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		return;
	}
	if (p->paylen) {
		uint64_t va = rq->wr_va + rq->wr_off;

		if (!sv_span_remote(&r, rq->wr_rkey, t, va, p->paylen,
				    IBV_ACCESS_REMOTE_WRITE)) {
			rq->in = SV_IN_NONE;
			sv_roce_resp_nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
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
		if (!sv_roce_resp_take_or_nak(t, tx, p->psn))
			return;         /* the data again with the retry */
		sv_roce_resp_msg_rx_done(t, IBV_WC_SUCCESS,
					 IBV_WC_RECV_RDMA_WITH_IMM,
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
		sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		return;
	}
	if (p->dmalen && !sv_span_remote(&probe, p->rkey, t, p->va,
					   p->dmalen, IBV_ACCESS_REMOTE_READ)) {
		sv_roce_resp_nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
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
		sv_roce_resp_nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
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
		sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		return;
	}
	if (!sv_span_remote(&r, p->rkey, t, p->va, 8,
			      IBV_ACCESS_REMOTE_ATOMIC)) {
		sv_roce_resp_nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
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
	sv_roce_resp_nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
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
		sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
		return;
	}
	if (!sv_span_remote(&r, p->rkey, t, p->va, 8, IBV_ACCESS_REMOTE_WRITE)) {
		sv_roce_resp_nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
		return;
	}
	memcpy(&val, p->payload, 8);
	sv_roce_exec(&x);
	sv_span_raw(&l, &val, sizeof(val));
	if (sv_span_copy(&x, &r.s, 0, &l, 0, 8) != SV_COPY_OK) {
		if (!sv_target_gone(t))
			sv_roce_resp_nak(t, tx, SV_OUTCOME_ACCESS, p->psn);
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
		sv_roce_resp_nak(t, tx, o, p->psn);
		return;
	}
	rdack_done(t, tx, p->psn);
}

/* RESPST_EXECUTE: each operation (with its own key and range checks);
 * true when the packet may ask for an acknowledgement (a SEND or WRITE:
 * READ, atomics and FLUSH answer by themselves). */
bool sv_roce_resp_execute(struct sv_qp *t, const struct sv_roce_pkt *p,
			  struct sv_roce_tx *tx)
{
	struct sv_roce_qp *rq = t->roce;

	if (p->flags & SV_RF_SEND) {
		if ((p->flags & SV_RF_FIRST) && rq->in == SV_IN_SEND &&
		    rq->rx_taken) {
			/* UC restart: keep the WQE taken */
			uint32_t st = sv_roce_resp_rx_put(t, &rq->rx, 0,
							  p->payload,
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
			sv_roce_resp_nak(t, tx, SV_OUTCOME_INV_REQ, p->psn);
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
