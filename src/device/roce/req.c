// SPDX-License-Identifier: MIT
/*
 * The requester of a wire QP (RC, UC and XRC initiators; the QP's engine,
 * sv_roce_transport's ready and step): takes WQEs from the send ring into
 * a private window (struct sv_rwin: the WQE is copied out and checked
 * once; its ring slot is consumed only when it completes, so the send
 * queue's room stays what the application sized), gives each its PSNs,
 * and sends their packets from a cursor (cur, cur_pkt): segmentation at
 * the path MTU, an ACK request on each message's last packet and every
 * SV_ACKREQ_EVERY packets, at most SV_PKT_WIN packets unacknowledged and
 * max_rd_atomic READs and atomics outstanding.
 *
 * What comes back (ACKs, NAKs, READ responses, atomic ACKs) is the
 * completer's (comp.c), which also moves the cursor back when packets
 * must go again.
 *
 * UC: no ACKs; a WQE completes once its last packet is handed to the
 * kernel. Under sv_dev.lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "abi/sv_op.h"
#include "device/roce/roce_int.h"

/* ---- the requester ---- */

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
	uint32_t pending = wq_pending(&qp->sq, &corrupt), op, f, st;
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
	e = sv_rwin(rq, rq->tail);
	memcpy(&e->w.h, slot, sizeof(e->w.h));
	op = e->w.h.opcode;
	/* which QP type takes which opcode: the one table (abi/sv_op.h), as
	 * the same-host requester and the library read it (an ATOMIC WRITE
	 * or a masked atomic is RC's, not XRC's), and only what has a
	 * request packet of the QP's transport (build.c) */
	f = sv_op_flags(op);
	st = sv_roce_req_status(qp->type, op, (sv_dev.attr.exp_cap_flags &
					       SV_EXP_CAP_MASKED_ATOMICS) != 0);
	if (st != IBV_WC_SUCCESS)
		return refuse(status, st);
	if (f & SV_OPF_LOCAL)
		return TAKE_LOCAL;
	if ((f & SV_OPF_FLUSH) &&
	    (st = sv_flush_wqe_status(&e->w.h)) != IBV_WC_SUCCESS)
		return refuse(status, st);
	if (!sv_swqe_body(qp, &e->w, (const uint8_t *)slot + SV_SEND_WQE_HDR,
			  qp->sq.stride - SV_SEND_WQE_HDR))
		return refuse(status, IBV_WC_LOC_QP_OP_ERR);
	f = sv_op_flags(op);
	/* an ATOMIC WRITE or a FLUSH is answered as a READ is (a zero-length
	 * READ response, which rxe sends), and counts as one against
	 * max_rd_atomic; the ATOMIC WRITE's 8 bytes are in the WQE, a FLUSH
	 * has no SGE (sv_flush_wqe_status) */
	e->rd = (f & (SV_OPF_SINK | SV_OPF_AWRITE | SV_OPF_FLUSH)) != 0;
	if (f & SV_OPF_AWRITE)
		e->w.h.num_sge = 0;
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
	e->npkts = sv_roce_req_npkts(qp->type, op, total, rq->mtu);
	rq->next_psn = sv_psn_add(rq->next_psn, e->npkts);
	rq->tail++;
	return TAKE_ONE;
}

/* READs and atomics in flight before WQE n. */
static uint32_t rd_before(const struct sv_roce_qp *rq, uint32_t n)
{
	uint32_t k = 0;

	for (uint32_t i = rq->head; i != n; i++)
		if (sv_rwin(rq, i)->rd && !sv_rwin(rq, i)->done)
			k++;
	return k;
}

/*
 * The payloads of the packets one step sends of one WQE, gathered with one
 * copy: the WQE's SGEs resolved once, and the packets' payload places in
 * the tx batch as the destination's iovecs. Nothing is finished or sent
 * before the tx flush, so packets whose payload failed are taken back out
 * of the batch.
 */
/* Where sending stood before a gather's first packet: what a failed copy
 * goes back to. */
struct resume {
	uint32_t wqe;              /* the WQE, packet first_pkt on */
	uint32_t first_pkt;
	uint32_t snd;              /* rq->snd */
	unsigned int first_tx;     /* the first packet's place in tx */
};

struct gather {
	bool on;
	struct resume at;
	uint64_t off;              /* the first packet's message offset */
	uint64_t bytes;
	unsigned int nd;
	struct iovec dst[SV_TX_BATCH];
	struct span s;
	struct sv_map map[SV_MAX_SGE];
	struct iovec iov[SV_IOV_WINDOW];
};

/*
 * The gathers of one step, copied together: their bytes in the sender's
 * memory (one process) and their packets' payload places side by side, so
 * that one process_vm_readv fills the packets of many small WQEs (it was
 * one call per WQE: 74 % of the sending engine's time at 64 bytes,
 * docs/PERFORMANCE.md). Resolved under the lock held for the whole step,
 * so no key checked here can go away before the copy. When the one copy
 * fails, each gather is copied again alone, in order, to find the first
 * that fails: the ones before it stand.
 */
#define SV_BATCH_SRC 256u

struct batch_entry {
	struct resume at;
	unsigned int src0, nsrc, dst0, ndst;
	uint64_t bytes;
};

struct batch {
	pid_t pid;
	unsigned int n, nsrc, ndst;
	uint64_t bytes;
	struct iovec src[SV_BATCH_SRC];
	struct iovec dst[SV_TX_BATCH];
	struct batch_entry e[SV_TX_BATCH];
};

/* The step's state, per engine thread (steps never nest). */
static __thread struct gather step_g;
static __thread struct batch step_b;

/* Take tx and the cursor back to where the gather that failed began. */
static void roll_back(struct sv_qp *qp, struct sv_roce_tx *tx,
		      const struct resume *at)
{
	struct sv_roce_qp *rq = qp->roce;

	tx->n = at->first_tx;
	rq->cur = at->wqe;
	rq->cur_pkt = at->first_pkt;
	rq->snd = at->snd;
}

/* Copy what b holds: IBV_WC_SUCCESS, or (tx and the cursor back at the
 * first gather that fails) the status of the failure. b is empty after. */
static uint32_t batch_run(struct sv_exec *x, struct sv_qp *qp,
			  struct sv_roce_tx *tx, struct batch *b)
{
	struct sv_mem sm, dm;
	unsigned int n = b->n;

	if (!n)
		return IBV_WC_SUCCESS;
	b->n = 0;
	sm.pid = b->pid;
	sm.iov = b->src;
	sm.niov = b->nsrc;
	dm.pid = 0;
	dm.iov = b->dst;
	dm.niov = b->ndst;
	if (sv_mem_copy(&dm, 0, &sm, 0, b->bytes, x->bounce,
			x->bounce_bytes) == SV_COPY_OK)
		return IBV_WC_SUCCESS;
	for (unsigned int i = 0; i < n; i++) {
		const struct batch_entry *e = &b->e[i];

		sm.iov = b->src + e->src0;
		sm.niov = e->nsrc;
		dm.iov = b->dst + e->dst0;
		dm.niov = e->ndst;
		if (sv_mem_copy(&dm, 0, &sm, 0, e->bytes, x->bounce,
				x->bounce_bytes) != SV_COPY_OK) {
			roll_back(qp, tx, &e->at);
			return IBV_WC_LOC_PROT_ERR;
		}
	}
	return IBV_WC_SUCCESS;
}

/* Put g's copy into b: false if it does not fit (b untouched). */
static bool batch_add(struct batch *b, const struct gather *g)
{
	struct sv_iov_cur c = { 0, 0 };
	struct batch_entry *e;
	unsigned int k;

	if (!g->s.mem.pid || (b->n && b->pid != g->s.mem.pid) ||
	    b->n == SV_TX_BATCH || b->ndst + g->nd > SV_TX_BATCH ||
	    !sv_iov_seek(g->s.mem.iov, g->s.mem.niov, &c, g->off))
		return false;
	if (sv_iov_take(g->s.mem.iov, g->s.mem.niov, &c, g->bytes,
			b->src + b->nsrc, SV_BATCH_SRC - b->nsrc, &k) !=
	    g->bytes)
		return false;
	e = &b->e[b->n++];
	e->at = g->at;
	e->src0 = b->nsrc;
	e->nsrc = k;
	e->dst0 = b->ndst;
	e->ndst = g->nd;
	e->bytes = g->bytes;
	memcpy(b->dst + b->ndst, g->dst, g->nd * sizeof(g->dst[0]));
	b->pid = g->s.mem.pid;
	b->nsrc += k;
	b->ndst += g->nd;
	b->bytes += g->bytes;
	return true;
}

/* g is complete: into the step's batch, or (when it does not fit) the
 * batch copied first and g too if it still does not. IBV_WC_SUCCESS, or
 * (tx and the cursor back at the first gather that failed) the status of
 * the failure. */
static uint32_t gather_run(struct sv_exec *x, struct sv_qp *qp,
			   struct sv_roce_tx *tx, struct gather *g)
{
	struct batch *b = &step_b;
	struct span d;
	uint32_t st;

	if (!g->on)
		return IBV_WC_SUCCESS;
	g->on = false;
	if (!g->nd || batch_add(b, g))
		return IBV_WC_SUCCESS;
	st = batch_run(x, qp, tx, b);
	if (st != IBV_WC_SUCCESS)
		return st;
	if (batch_add(b, g))
		return IBV_WC_SUCCESS;
	memset(&d, 0, sizeof(d));
	d.mem.pid = 0;
	d.mem.iov = g->dst;
	d.mem.niov = g->nd;
	d.whole = true;
	if (sv_span_copy(x, &d, 0, &g->s, g->off, g->bytes) == SV_COPY_OK)
		return IBV_WC_SUCCESS;
	roll_back(qp, tx, &g->at);
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
	if (g->on && g->at.wqe == rq->cur && g->off + g->bytes == off &&
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
		g->at = (struct resume){ rq->cur, rq->cur_pkt, rq->snd, tx->n };
		g->off = off;
		g->bytes = len;
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
 * the WQE's completion status (its local memory failed). Its headers are
 * build.c's (as capture renders them); its payload may wait in g until
 * gather_run; a WQE's last packet runs g. */
static uint32_t send_one(struct sv_exec *x, struct sv_qp *qp,
			 struct sv_roce_tx *tx, struct gather *g)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_rwin *e = sv_rwin(rq, rq->cur);
	uint32_t op = e->w.h.opcode, k = rq->cur_pkt, psn;
	struct sv_roce_pkt p;
	struct sv_roce_seg s;
	uint8_t *buf;
	size_t hdr;

	if (e->rd && (e->done || (e->len && (uint64_t)k * rq->mtu >= e->len &&
				  !(sv_op_flags(op) & SV_OPF_ATOMIC)))) {
		/* its answer is in (a rewind went back past it) */
		rq->cur++;
		rq->cur_pkt = 0;
		return IBV_WC_SUCCESS;
	}
	/* take() let only what has a packet in */
	if (!sv_roce_req_pkt(qp->type, op, &e->w.h, e->len, rq->mtu, k, &p,
			     &s))
		return IBV_WC_LOC_QP_OP_ERR;
	psn = sv_psn_add(e->psn, k);
	p.psn = psn;
	p.dqpn = rq->dqpn;
	/* an ACK for the last packet (build.c's), every so often, and for
	 * the packet that fills the congestion window (no ACK would come to
	 * open it again) */
	if (!p.ackreq && sv_roce_reliable(qp) &&
	    ((k + 1) % ackreq_every(rq) == 0 ||
	     sv_psn_diff(sv_psn_add(psn, 1), rq->una) >= (int32_t)rq->cwnd ||
	     rq->rnr_probe))
		p.ackreq = true;
	buf = sv_roce_tx_next(tx);
	hdr = sv_roce_build_hdr(buf, &p);
	if (s.raw)
		memcpy(buf + hdr, s.raw, s.len);
	else if (!payload(x, qp, e, s.off, s.len, buf + hdr, tx, g))
		return IBV_WC_LOC_PROT_ERR;
	sv_roce_tx_push(tx, hdr + s.len, rq->sgid, rq->dgid, rq->sport,
			qp->qpn);
	/* the PSNs this packet takes (a READ request: its responses') */
	if (sv_psn_diff(sv_psn_add(psn, s.span), rq->snd) > 0)
		rq->snd = sv_psn_add(psn, s.span);
	else {
		sv_roce_stats.retransmits++;
		rq->qp->st_retrans++;
	}
	if (s.last) {
		rq->cur++;
		rq->cur_pkt = 0;
		/* the WQE is all out: its payload too (UC completes it) */
		return gather_run(x, qp, tx, g);
	}
	rq->cur_pkt += s.span;
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
	e = sv_rwin(rq, rq->cur);
	if (e->rd && e->done)
		return true;    /* send_one steps over it */
	psn = sv_psn_add(e->psn, rq->cur_pkt);
	if (!sv_roce_reliable(qp))
		return true;
	if (sv_psn_diff(psn, rq->una) >= (int32_t)rq->cwnd)
		return false;
	if (rq->rnr_probe && psn != rq->una)
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

int sv_roce_step(struct sv_exec *x, struct sv_qp *qp)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_roce_tx *tx;
	bool did = false;
	unsigned int sent = 0, room;
	enum take_res t;
	uint32_t st, fail;
	struct gather *g = &step_g;

	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD)
		return false;
	if (rq->rto && x->now >= rq->rto) {
		sv_roce_timed_out(qp);
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
	g->on = false;
	step_b.n = step_b.nsrc = step_b.ndst = 0;
	step_b.bytes = 0;
	st = IBV_WC_SUCCESS;
	while (sent < room && may_send(qp, x->now)) {
		st = send_one(x, qp, tx, g);
		if (st != IBV_WC_SUCCESS)
			break;
		sent++;
		did = true;
	}
	/* the payloads (a failure before the one send_one met moves the
	 * cursor back to it) */
	fail = gather_run(x, qp, tx, g);
	if (fail == IBV_WC_SUCCESS)
		fail = batch_run(x, qp, tx, &step_b);
	if (fail != IBV_WC_SUCCESS)
		st = fail;
	if (qp->type == IBV_QPT_UC) {
		/* no ACKs: a WQE is done once its packets are out */
		while (rq->head != rq->cur)
			sv_roce_complete_head(qp, IBV_WC_SUCCESS);
		rq->una = rq->snd;
	}
	/* only the head can fail here in order: complete it once what is
	 * before it completed; until then, stop sending */
	if (st != IBV_WC_SUCCESS && rq->cur == rq->head)
		sv_roce_complete_head(qp, st);
	sv_roce_tx_flush(tx);
	if (qp->roce == rq && sqd_done(qp) && !qp->sq_drained_sent) {
		sv_sq_drained(qp);
		did = true;
	}
	/* the timer runs while a WQE that was sent is not complete */
	if (sv_roce_reliable(qp) && rq->head != rq->tail &&
	    (rq->cur != rq->head || rq->cur_pkt) && !rq->rto &&
	    sv_roce_timeout_ns(qp) != UINT64_MAX)
		rq->rto = x->now + sv_roce_timeout_ns(qp);
	return did;
}
