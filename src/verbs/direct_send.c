// SPDX-License-Identifier: MIT
/*
 * SEND and RECV, the sender's side (docs/DESIGN.md "The direct path"):
 * A SEND (with or without immediate data) and a WRITE with immediate
 * data take the peer's head receive WQE. The device gives the peer's QP a
 * completion side for each connection (struct sv_xside); we map it
 * read-write, and the peer's receive ring (the ring the WQEs are in, and
 * the header that holds its receive side) and its receive CQ's ring
 * read-only (DIRECT_RECV: the device then lets that queue be taken from
 * here too), read the head WQE there, check its buffers' keys as the
 * device's responder would, write the message into them in one
 * process_vm_writev into the peer, then the completion into the side's
 * slot xprod with plain stores, with its stamp (the receive CQ's producer
 * counter: the device's completions of that queue before ours are below
 * it), and publish it by a CAS of the side's word from xprod to xprod + 1.
 * On a receive queue of its own that also takes the WQE (its cons is the
 * header's xbase + xprod). A copy that stops short publishes nothing, and
 * neither does a CAS after the device closed the side.
 *  - Its own receive queue: nothing else takes that queue meanwhile: it is
 *    an RC or UC QP connected to ours alone, whose WRs the device has all
 *    done (the SQ lock held), and the device flushes it only once our
 *    guard is past its entry's change (sv_direct_rq_held). The WQE of a
 *    copy that stops short stays the head.
 *  - An SRQ: every taker claims the head by CAS on the SRQ's word in our
 *    uid's guard table (struct sv_direct_srq), after it copied the WQE; we
 *    keep a copy of what we claimed in our claim record (struct
 *    sv_direct_claim), armed from the CAS until the copy landed, so that
 *    the device fills or flushes a WQE whose copy did not land.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "abi/sv_cpu.h"
#include "verbs/direct_int.h"

struct sv_dpeer {
	uint32_t qpn;              /* the peer these map; 0: none */
	uint32_t asked;            /* the peer QPN last asked for */
	pid_t pid;
	uint32_t entries, stride, max_sge; /* of the ring its WQEs are in */
	uint32_t cq_entries;
	uint32_t cq_gen;           /* the receive CQ's ring mapped (xpub) */
	uint32_t srqn;             /* on an SRQ: its number; 0: none */
	uint32_t srq_tag;          /* the tag its word has for wqs */
	const struct sv_wq_ring *rx;  /* the header of its receive side */
	const struct sv_wq_ring *wqs; /* its receive WQEs' ring (rx, or the
				       * SRQ's) */
	const struct sv_cq_ring *cq;
	struct sv_xside *xs;       /* its completion side (read-write) */
	uint32_t xent;             /* its ring's slots */
	uint32_t xcons;            /* the owner's consumer there, as last read */
	void *rq_map, *cq_map, *srq_map, *xs_map;
	size_t rq_len, cq_len, srq_len, xs_len;
};

static void dpeer_drop(struct sv_dpeer *p)
{
	if (p->rq_map)
		munmap(p->rq_map, p->rq_len);
	if (p->cq_map)
		munmap(p->cq_map, p->cq_len);
	if (p->srq_map)
		munmap(p->srq_map, p->srq_len);
	if (p->xs_map)
		munmap(p->xs_map, p->xs_len);
	p->rq_map = p->cq_map = p->srq_map = p->xs_map = NULL;
	p->rx = p->wqs = NULL;
	p->cq = NULL;
	p->xs = NULL;
	p->qpn = 0;
	p->srqn = 0;
}

/* Where the peer says where its completion ring is. */
static const struct sv_rq_xpub *dpeer_xpub(const struct sv_dpeer *p)
{
	return p->srqn ? &p->rx->sxpub :
			 (const struct sv_rq_xpub *)(const void *)p->rx->mb;
}

void sv_d_peer_free(struct sv_qp *qp)
{
	if (!qp->dpeer)
		return;
	dpeer_drop(qp->dpeer);
	free(qp->dpeer);
	qp->dpeer = NULL;
}

/* DIRECT_RECV's part, mapped read-only (the completion side read-write):
 * where its header is, or NULL. */
static void *dpeer_part(struct sv_context *ctx, struct sv_qp *qp,
			uint32_t part, struct sv_rsp_direct_recv *o,
			void **map, size_t *len)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	uint64_t skip;
	void *m = MAP_FAILED;
	int fd = -1;

	sv_cmd_init(&cmd, SV_CMD_DIRECT_RECV);
	cmd.u.direct_recv.qp = qp->handle;
	cmd.u.direct_recv.part = part;
	if (!sv_conn_call(&ctx->conn, &cmd, -1, &rsp, &fd) && fd >= 0 &&
	    rsp.u.direct_recv.bytes >= SV_RING_HDR_BYTES) {
		*o = rsp.u.direct_recv;
		skip = o->offset % (uint64_t)page_bytes();
		*len = o->bytes + skip;
		m = mmap(NULL, *len, part == SV_DRECV_XSIDE ?
			 PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd,
			 (off_t)(o->offset - skip));
	}
	if (fd >= 0)
		close(fd);
	if (m == MAP_FAILED)
		return NULL;
	*map = m;
	return (char *)m + skip;
}

/* A ring's geometry as DIRECT_RECV gave it, checked. */
static bool ring_ok(const struct sv_rsp_direct_recv *o)
{
	return o->entries && !(o->entries & (o->entries - 1)) &&
	       o->bytes >= sv_wq_ring_bytes(o->entries, o->stride);
}

/* Map the receive side, the WQEs' ring and the CQ ring of our peer
 * (outside any guard, once per peer): true when they are. */
bool sv_d_peer_fill(struct sv_context *ctx, struct sv_qp *qp,
		    uint32_t peer_qpn)
{
	struct sv_dpeer *p = qp->dpeer;
	struct sv_rsp_direct_recv o, oc, os, ox;

	if (!p) {
		p = qp->dpeer = calloc(1, sizeof(*p));
		if (!p)
			return false;
	}
	if (p->asked == peer_qpn && !p->qpn)
		return false;      /* refused for this peer: not again */
	dpeer_drop(p);
	p->asked = peer_qpn;
	p->rx = dpeer_part(ctx, qp, SV_DRECV_RQ, &o, &p->rq_map, &p->rq_len);
	if (!p->rx)
		return false;
	p->srqn = o.srqn;
	if (o.srqn) {
		p->wqs = dpeer_part(ctx, qp, SV_DRECV_SRQ, &os, &p->srq_map,
				    &p->srq_len);
		if (!p->wqs || os.srqn != o.srqn || !os.srq_tag ||
		    !ring_ok(&os)) {
			dpeer_drop(p);
			return false;
		}
		p->srq_tag = os.srq_tag;
		o.entries = os.entries;
		o.stride = os.stride;
		o.max_sge = os.max_sge;
	} else {
		p->wqs = p->rx;
		if (!ring_ok(&o)) {
			dpeer_drop(p);
			return false;
		}
	}
	/* (read before the CQ's ring: a move after it maps it again) */
	p->cq_gen = __atomic_load_n(&dpeer_xpub(p)->cq_gen, __ATOMIC_ACQUIRE);
	p->cq = dpeer_part(ctx, qp, SV_DRECV_CQ, &oc, &p->cq_map, &p->cq_len);
	if (!p->cq || !oc.entries || (oc.entries & (oc.entries - 1))) {
		dpeer_drop(p);
		return false;
	}
	p->xs = dpeer_part(ctx, qp, SV_DRECV_XSIDE, &ox, &p->xs_map,
			   &p->xs_len);
	if (!p->xs || !ox.entries || (ox.entries & (ox.entries - 1)) ||
	    ox.bytes < sv_xside_bytes(ox.entries) ||
	    __atomic_load_n(&p->xs->word, __ATOMIC_ACQUIRE) >> 32) {
		dpeer_drop(p);
		return false;
	}
	p->xent = ox.entries;
	p->xcons = __atomic_load_n(&p->rx->xcons, __ATOMIC_ACQUIRE);
	/* may we write into the peer at all (the kernel's ptrace rule: Yama
	 * may forbid it between processes of one uid)? Asked once, by a read
	 * of one byte of its header where it says it is: an SRQ's WQE is
	 * claimed before the copy, and must not be claimed for a copy that
	 * cannot be made */
	{
		uint8_t b;
		struct iovec l = { &b, 1 }, r = {
			(void *)(uintptr_t)__atomic_load_n(&dpeer_xpub(p)->self,
							   __ATOMIC_RELAXED), 1 };

		/* (the system call itself: not a copy, which a debugger or a
		 * test may stop at) */
		if (!r.iov_base || syscall(SYS_process_vm_readv, o.pid, &l, 1UL,
					   &r, 1UL, 0UL) != 1) {
			dpeer_drop(p);
			return false;
		}
	}
	p->pid = o.pid;
	p->entries = o.entries;
	p->stride = o.stride;
	p->max_sge = o.max_sge;
	p->cq_entries = oc.entries;
	p->qpn = peer_qpn;
	return true;
}

/* The peer's head receive WQE (number *cons), its copy checked in h and
 * sge: SV_DREF_MAX, or the reason it goes to the device. *xw is the
 * completion side's word as read (the publication's expected value); on
 * an SRQ, *w is the SRQ's word as read (the claim's expected value). */
static unsigned int head_wqe(struct sv_direct *d, const struct sv_dpeer *p,
			     uint64_t *xw, uint32_t *cons, uint64_t **word,
			     uint64_t *w, uint32_t *prod,
			     struct sv_recv_wqe *h, struct sv_wqe_sge *sge,
			     bool *want)
{
	const uint8_t *wqe;
	uint32_t most = SV_DIRECT_BATCH - 8;

	/* (before the cons it gives: acquire) */
	*xw = __atomic_load_n(&p->xs->word, __ATOMIC_ACQUIRE);
	if (*xw >> 32) {
		/* closed: the peer left RTR and RTS (connected again, it
		 * has a new side: asked for once) */
		*want = true;
		return SV_DREF_PEER;
	}
	if (p->srqn) {
		*word = &d->srq[p->srqn & (SV_DIRECT_SRQ_SLOTS - 1)].word;
		*w = __atomic_load_n(*word, __ATOMIC_ACQUIRE);
		if ((sv_dsrq_tag(*w) & ~SV_DSRQ_HELD) != p->srq_tag) {
			*want = true;      /* its ring moved (resize), or gone */
			return SV_DREF_PEER;
		}
		if (sv_dsrq_tag(*w) & SV_DSRQ_HELD)
			return SV_DREF_BUSY;   /* the device fills the head */
		*cons = sv_dsrq_cons(*w);
		most = SV_DCLAIM_SGE;
	} else {
		/* the device's takes and the senders' */
		*word = NULL;
		*cons = __atomic_load_n(&p->rx->xbase, __ATOMIC_ACQUIRE) +
			sv_xside_prod(*xw);
	}
	/* acquire: pairs with the owner's release store of prod after the
	 * WQE (the SRQ's word was read first: the WQE at *cons is posted) */
	*prod = __atomic_load_n(&p->wqs->prod, __ATOMIC_ACQUIRE);
	/* none posted: the device's RNR NAK and retries */
	if (*prod == *cons || *prod - *cons > p->entries)
		return SV_DREF_PEER;
	/* copied before any field is used */
	wqe = (const uint8_t *)p->wqs + SV_RING_HDR_BYTES +
	      (size_t)(*cons & (p->entries - 1)) * p->stride;
	memcpy(h, wqe, sizeof(*h));
	if (h->num_sge > p->max_sge || h->num_sge > most ||
	    SV_RECV_WQE_HDR + (size_t)h->num_sge * sizeof(sge[0]) > p->stride)
		return SV_DREF_CHECK;
	memcpy(sge, wqe + SV_RECV_WQE_HDR, h->num_sge * sizeof(sge[0]));
	return SV_DREF_MAX;
}

/* Claim WQE cons of the peer's SRQ (its word still *w) for the peer, the
 * copy of it in our claim record first: false when another taker had it. */
static bool srq_claim(struct sv_direct *d, struct sv_qp *qp,
		      const struct sv_dpeer *p, uint64_t *word, uint64_t w,
		      uint32_t cons, const struct sv_recv_wqe *h,
		      const struct sv_wqe_sge *sge, uint32_t xprod)
{
	struct sv_direct_claim *cl =
		&d->claim[qp->ex.qp_base.qp_num & d->qp_mask];

	cl->xprod = xprod;
	cl->srqn = p->srqn;
	cl->num_sge = h->num_sge;
	cl->wr_id = h->wr_id;
	for (uint32_t i = 0; i < h->num_sge; i++) {
		cl->sge[i].addr = sge[i].addr;
		cl->sge[i].length = sge[i].length;
		cl->sge[i].lkey = sge[i].lkey;
	}
	if (!__atomic_compare_exchange_n(word, &w,
					 sv_dsrq_word(cons + 1, p->srq_tag),
					 false, __ATOMIC_SEQ_CST,
					 __ATOMIC_RELAXED))
		return false;
	/* armed: from here the device may complete it (release: the copy
	 * above first) */
	__atomic_store_n(&cl->qpn, p->qpn, __ATOMIC_RELEASE);
	return true;
}

/* One direct SEND as it is put together (sv_d_send's steps). */
struct dsend {
	/* its completion side's word as read */
	uint64_t xw;
	/* its head WQE (number cons of prod; on an SRQ, its word was w) */
	uint32_t cons, prod;
	uint64_t *word, w;
	struct sv_recv_wqe h;
	struct sv_wqe_sge sge[SV_DIRECT_BATCH - 8];
	/* its completion ring's producer, its receive CQ's */
	uint32_t xprod, cp;
	/* the system call's pieces: remote (the message's) */
	struct iovec riov[SV_DIRECT_BATCH];
	unsigned int nr;
};

/* The peer's receive side as mapped, still the one its QP has (*want:
 * map it again): SV_DREF_MAX, or why not. */
static unsigned int peer_side(const struct sv_dpeer *p, const struct dwr *x,
			      bool *want)
{
	const struct sv_rq_xpub *xp;

	if (!p || p->qpn != x->peer_qpn || p->pid != x->peer_pid ||
	    __atomic_load_n(&p->cq->entries, __ATOMIC_RELAXED) !=
		    p->cq_entries ||
	    __atomic_load_n(&p->wqs->entries, __ATOMIC_RELAXED) !=
		    p->entries) {
		*want = true;
		return SV_DREF_PEER;
	}
	xp = dpeer_xpub(p);
	if (__atomic_load_n(&xp->cq_gen, __ATOMIC_ACQUIRE) != p->cq_gen) {
		*want = true;      /* the receive CQ's ring moved */
		return SV_DREF_PEER;
	}
	return SV_DREF_MAX;
}

/* Room in the completion ring, and in the receive CQ as a whole (else the
 * device overruns it where a NIC would): SV_DREF_MAX or SV_DREF_CQ. */
static unsigned int room(struct sv_dpeer *p, struct dsend *s)
{
	uint32_t cc, used;
	bool fresh = false;

	s->cp = __atomic_load_n(&p->cq->prod, __ATOMIC_ACQUIRE);
	cc = __atomic_load_n(&p->cq->cons, __ATOMIC_ACQUIRE);
	/* the owner's consumer of the side as we last read it, which only
	 * grows: a line it writes as it polls, read again only when what we
	 * knew says full */
	for (;;) {
		used = s->cp - cc +
		       __atomic_load_n(&p->cq->dused, __ATOMIC_RELAXED) +
		       (s->xprod - p->xcons);
		if (s->xprod - p->xcons < p->xent &&
		    s->cp - cc <= p->cq_entries && used < p->cq_entries)
			return SV_DREF_MAX;
		if (fresh)
			return SV_DREF_CQ;
		p->xcons = __atomic_load_n(&p->rx->xcons, __ATOMIC_ACQUIRE);
		fresh = true;
	}
}

/* Where the message goes: the head WQE's buffers, as the device's
 * responder checks them (keys of the peer's PD and process, LOCAL_WRITE,
 * in range, long enough), or, for a WRITE with immediate data, its rkey's
 * range (the WQE only completes): SV_DREF_MAX or SV_DREF_CHECK. */
static unsigned int message_iovs(struct sv_direct *d, const struct dwr *x,
				 bool imm_write, struct dsend *s)
{
	union sv_direct_key_u k;
	uint64_t left = x->len;

	s->nr = 0;
	if (imm_write) {
		if (x->len)
			s->riov[s->nr++] = x->riov;
		left = 0;
	}
	for (uint32_t i = 0; i < s->h.num_sge && left; i++) {
		const struct sv_wqe_sge *e = &s->sge[i];
		uint64_t n = e->length < left ? e->length : left;

		if (!n)
			continue;
		if (!key_entry(d, e->lkey, &k) || k.e.pd != x->peer_pd ||
		    k.e.pid != x->peer_pid ||
		    !(k.e.access & IBV_ACCESS_LOCAL_WRITE) ||
		    !in_range(k.e.iova, k.e.length, e->addr, n))
			return SV_DREF_CHECK;
		s->riov[s->nr].iov_base =
			(void *)(uintptr_t)(k.e.addr + (e->addr - k.e.iova));
		s->riov[s->nr++].iov_len = n;
		left -= n;
	}
	return left ? SV_DREF_CHECK : SV_DREF_MAX;
}

/* The completion, as the device's responder writes it. */
static void completion(const struct sv_qp *qp, const struct sv_dpeer *p,
		       const struct ibv_send_wr *wr, const struct dwr *x,
		       struct sv_cqe *e, const struct dsend *s)
{
	memset(e, 0, sizeof(*e));
	e->wr_id = s->h.wr_id;
	e->status = IBV_WC_SUCCESS;
	e->opcode = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ?
		    IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	e->byte_len = (uint32_t)x->len;
	e->qp_num = p->qpn;
	e->src_qp = qp->ex.qp_base.qp_num;
	if (wr->opcode != IBV_WR_SEND) {
		e->imm_data = wr->imm_data;
		e->wc_flags = IBV_WC_WITH_IMM;
	}
	e->sl = qp->dsl;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		e->dev_flags = SV_CQE_F_SOLICITED;
	e->timestamp = mono_ns();
	SV_XCQE_STAMP(e) = s->cp;
}

/* The message landed: its completion into the side's slot xprod, then
 * published (false: the device closed the side meanwhile, and the WQE is
 * its to complete). */
static bool publish(const struct sv_dpeer *p, const struct sv_cqe *e,
		    const struct dsend *s)
{
	struct sv_cqe *slot = &p->xs->ring[s->xprod & (p->xent - 1)];
	uint64_t w = s->xw;

	/* (its number 0 meanwhile: e's) */
	memcpy(slot, e, sizeof(*e));
	/* release: the CQE before the counter (the owner's poll acquires
	 * it); the message came before, in the system call */
	if (!__atomic_compare_exchange_n(&p->xs->word, &w, w + 1, false,
					 __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		return false;
	__atomic_store_n(&SV_XCQE_SEQ(slot), s->xprod + 1, __ATOMIC_RELEASE);
	return true;
}

/*
 * One SEND-like WR (checked, x) into the peer's head receive WQE, under
 * our guard: SV_DREF_MAX when it landed, else the reason it goes to the
 * device (which finds the same: no WQE is an RNR, a WQE too short a
 * length error, a bad key an access error). *want: the peer's rings must
 * be mapped first; *limit: it took the peer's SRQ below its armed limit.
 */
unsigned int sv_d_send(struct sv_direct *d, struct sv_qp *qp,
		       const struct ibv_send_wr *wr, const struct dwr *x,
		       struct sv_direct_guard *g, struct sv_direct_riov *slot,
		       uint64_t epoch,
		       uint32_t *xprod_out, bool *limit, bool *want)
{
	struct sv_dpeer *p = qp->dpeer;
	struct dsend s;
	struct sv_cqe e;
	uint32_t lim;
	unsigned int why, tries = 0;
	ssize_t got;

	why = peer_side(p, x, want);
	if (why != SV_DREF_MAX)
		return why;
again:
	s.w = 0;
	why = head_wqe(d, p, &s.xw, &s.cons, &s.word, &s.w, &s.prod, &s.h,
		       s.sge, want);
	if (why == SV_DREF_BUSY && ++tries < SV_DIRECT_CLAIM_TRIES) {
		sv_cpu_relax();    /* the device fills the SRQ's head */
		goto again;
	}
	s.xprod = sv_xside_prod(s.xw);
	if (why == SV_DREF_MAX)
		why = room(p, &s);
	if (why == SV_DREF_MAX)
		why = message_iovs(d, x,
				   wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM, &s);
	if (why != SV_DREF_MAX)
		return why;
	completion(qp, p, wr, x, &e, &s);
	/* (a message of no bytes writes nothing the fence guards) */
	if (s.nr && !sv_d_fenced(d, g, slot, s.riov, s.nr, epoch))
		return SV_DREF_FENCE;
	if (s.word && !srq_claim(d, qp, p, s.word, s.w, s.cons, &s.h, s.sge,
				 s.xprod + 1)) {
		/* another taker had it: the next head */
		if (++tries < SV_DIRECT_CLAIM_TRIES)
			goto again;
		return SV_DREF_BUSY;
	}
	if (s.nr) {
		got = process_vm_writev(x->peer_pid, x->liov, x->nl,
					(const struct iovec *)slot->iov, s.nr,
					0);
		/* short: the claim stays armed, and the device fills or
		 * flushes the WQE it names (its WR goes there) */
		if (got < 0 || (uint64_t)got != x->len)
			return SV_DREF_FENCE;
	}
	if (!publish(p, &e, &s))
		return SV_DREF_FENCE;   /* (the claim too) */
	if (s.word) {
		__atomic_store_n(&d->claim[qp->ex.qp_base.qp_num &
					   d->qp_mask].qpn, 0,
				 __ATOMIC_RELEASE);
		lim = __atomic_load_n(&p->wqs->srq_limit, __ATOMIC_RELAXED);
		if (lim && s.prod - (s.cons + 1) < lim)
			*limit = true;
	}
	*xprod_out = s.xprod + 1;
	return SV_DREF_MAX;
}

/* After direct SENDs (outside the guard): the peer's receive CQ, armed,
 * is fired by them as the device's completions would fire it. The fence:
 * Dekker with the peer's ibv_req_notify_cq (store arm_sn, fence, look at
 * its completion rings). */
void sv_d_send_notify(struct sv_context *ctx, struct sv_qp *qp,
		      uint32_t xprod, bool solicited, bool limit)
{
	const struct sv_dpeer *p = qp->dpeer;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	uint32_t sn, fired, flags;

	if (limit) {
		/* the SRQ's limit event, which the device raises (and
		 * disarms) if it finds the SRQ below it too */
		sv_cmd_init(&cmd, SV_CMD_DIRECT_NOTIFY);
		cmd.u.direct_notify.qp = qp->handle;
		cmd.u.direct_notify.flags = SV_NOTIFY_SRQ_LIMIT;
		(void)sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	sn = __atomic_load_n(&p->cq->arm_sn, __ATOMIC_ACQUIRE);
	fired = __atomic_load_n(&p->cq->fired_sn, __ATOMIC_ACQUIRE);
	flags = __atomic_load_n(&p->cq->arm_flags, __ATOMIC_RELAXED);
	if (sn == fired || !((flags & SV_CQ_ARM_NEXT) ||
			     ((flags & SV_CQ_ARM_SOLICITED) && solicited)))
		return;
	sv_cmd_init(&cmd, SV_CMD_DIRECT_NOTIFY);
	cmd.u.direct_notify.qp = qp->handle;
	cmd.u.direct_notify.arm_sn = sn;
	cmd.u.direct_notify.xprod = xprod;
	cmd.u.direct_notify.flags = solicited ? SV_NOTIFY_SOLICITED : 0;
	(void)sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
}
