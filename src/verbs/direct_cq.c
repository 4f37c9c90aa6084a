// SPDX-License-Identifier: MIT
/*
 * The direct path's completions (docs/DESIGN.md "The direct path"): a CQ's
 * private ring, where a poster puts the completions of the WRs it ran
 * itself, stamped for poll's merge with the daemon's ring; and the
 * completion ring of a receive queue, which senders of this host fill
 * (direct_send.c) and poll moves into the private ring.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verbs/direct_int.h"

/* ---- the CQ's private ring ---- */

int sv_direct_cq_init(struct sv_context *ctx, struct sv_cq *cq)
{
	uint32_t n = 1;

	if (!ctx->direct)
		return 0;
	while (n < cq->entries && n < SV_DIRECT_CQ_MAX)
		n <<= 1;
	cq->dring = calloc(n, sizeof(*cq->dring));
	cq->dstamp = calloc(n, sizeof(*cq->dstamp));
	if (!cq->dring || !cq->dstamp) {
		free(cq->dring);
		free(cq->dstamp);
		cq->dring = NULL;
		cq->dstamp = NULL;
		return -ENOMEM;
	}
	cq->dmask = n - 1;
	cq->dprod = cq->dcons = cq->dheld = 0;
	sv_spin_init(&cq->dlock);
	return 0;
}

void sv_direct_cq_fini(struct sv_cq *cq)
{
	free(cq->dring);
	free(cq->dstamp);
	cq->dring = NULL;
	cq->dstamp = NULL;
}

/*
 * Hold a slot of cq's private ring for the completion of a signaled WR:
 * false when it is full, or when the CQ as a whole (both rings) holds as
 * many unpolled completions as the daemon's ring has slots: the WR goes to
 * the daemon, which then overruns the CQ (IBV_EVENT_CQ_ERR) where a NIC
 * would. The slots held are published in the ring (dused), which the
 * daemon counts for the same decision. Under dlock, as everything that
 * reads cq->ring from the post path (ibv_resize_cq maps a new one under
 * it).
 */
bool sv_d_cq_hold(struct sv_cq *cq)
{
	struct sv_cq_ring *ring;
	uint32_t used;
	bool ok;

	sv_spin_lock(&cq->dlock);
	ring = cq->ring;
	used = __atomic_load_n(&ring->prod, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(&ring->cons, __ATOMIC_ACQUIRE) + cq->dheld;
	ok = cq->dheld <= cq->dmask && used < cq->entries;
	if (ok)
		__atomic_store_n(&ring->dused, ++cq->dheld, __ATOMIC_RELAXED);
	sv_spin_unlock(&cq->dlock);
	return ok;
}

void sv_d_cq_unhold(struct sv_cq *cq)
{
	sv_spin_lock(&cq->dlock);
	__atomic_store_n(&cq->ring->dused, --cq->dheld, __ATOMIC_RELAXED);
	sv_spin_unlock(&cq->dlock);
}


/* The completion of a WR that ran here, in the slot it holds, stamped
 * with hdr's cq_mark: the daemon's ring past the last completion it wrote
 * for the QP (read after done; no WQE of the QP is at the daemon now, the
 * SQ lock held). A mark past the ring's producer (one left from before a
 * resize renumbered the ring) is the producer: every completion there. */
void sv_d_cq_push(struct sv_cq *cq, const struct sv_wq_ring *hdr,
		    uint64_t wr_id, uint32_t op, uint32_t qpn, uint64_t len)
{
	struct sv_cqe *e;
	uint32_t mark, prod;

	sv_spin_lock(&cq->dlock);
	mark = __atomic_load_n(&hdr->cq_mark, __ATOMIC_RELAXED);
	prod = __atomic_load_n(&cq->ring->prod, __ATOMIC_ACQUIRE);
	cq->dstamp[cq->dprod & cq->dmask] = sv_stamp_clamp(mark, prod);
	e = &cq->dring[cq->dprod & cq->dmask];
	memset(e, 0, sizeof(*e));
	e->wr_id = wr_id;
	e->status = IBV_WC_SUCCESS;
	e->opcode = sv_op_wc(op);
	e->qp_num = qpn;
	e->byte_len = (uint32_t)len;
	if (cq->ex_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK))
		e->timestamp = mono_ns();
	/* release: the CQE before the counter (pairs with the poller's
	 * acquire load of dprod) */
	__atomic_store_n(&cq->dprod, cq->dprod + 1, __ATOMIC_RELEASE);
	sv_spin_unlock(&cq->dlock);
}

/*
 * After completions went into the private ring of a CQ with a channel: an
 * arm that has not fired (a NEXT arm: they are successful WRITEs and
 * READs, never solicited) is fired by them, and they are announced. True
 * with its sn in *sn. The fence: Dekker with ibv_req_notify_cq, which
 * stores arm_sn, fences, then looks at dprod: either it sees these
 * completions (and asks the daemon itself) or we see its arm.
 */
bool sv_d_cq_arm_to_fire(struct sv_cq *cq, uint32_t *sn)
{
	struct sv_cq_ring *ring;
	uint32_t fired, flags;
	bool fire;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	sv_spin_lock(&cq->dlock);
	ring = cq->ring;
	*sn = __atomic_load_n(&ring->arm_sn, __ATOMIC_ACQUIRE);
	fired = __atomic_load_n(&ring->fired_sn, __ATOMIC_ACQUIRE);
	flags = __atomic_load_n(&ring->arm_flags, __ATOMIC_RELAXED);
	fire = *sn != fired && (flags & SV_CQ_ARM_NEXT);
	if (fire)
		cq->dannounced = cq->dprod;
	sv_spin_unlock(&cq->dlock);
	return fire;
}

/* NOTIFY_CQ for arm sn, the private ring's completions due: the daemon
 * sends the event unless the arm fired or a later one came. */
__attribute__((noinline)) void sv_d_cq_fire(struct sv_context *ctx,
						 struct sv_cq *cq, uint32_t sn)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_NOTIFY_CQ);
	cmd.u.notify_cq.cq = cq->handle;
	cmd.u.notify_cq.arm_sn = sn;
	cmd.u.notify_cq.flags = SV_NOTIFY_DIRECT;
	(void)sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
}

/* ---- the receive side: our completion rings ---- */

bool sv_direct_srq_room(struct sv_srq *srq, uint32_t max)
{
	struct sv_context *ctx = to_sv_ctx(srq->ibsrq.context);
	uint64_t w;
	uint32_t n;

	if (!ctx->direct)
		return false;
	w = __atomic_load_n(&ctx->direct->srq[srq->srqn &
					      (SV_DIRECT_SRQ_SLOTS - 1)].word,
			    __ATOMIC_ACQUIRE);
	if ((sv_dsrq_tag(w) & SV_DSRQ_SRQN) != (srq->srqn & SV_DSRQ_SRQN))
		return false;      /* no sender took any of its WQEs */
	n = srq->rq.prod - sv_dsrq_cons(w);
	return n < max && n <= srq->rq.entries;
}

void sv_direct_rq_init(struct sv_qp *qp)
{
	struct ibv_qp *ibqp = &qp->ex.qp_base;
	struct sv_context *ctx = to_sv_ctx(ibqp->context);
	struct sv_cq *cq = ibqp->recv_cq ? to_sv_cq(ibqp->recv_cq) : NULL;
	struct sv_srq *srq = ibqp->srq ? to_sv_srq(ibqp->srq) : NULL;
	struct sv_rq_xpub *xp;

	if (!ctx->direct || !cq || !cq->dring ||
	    (ibqp->qp_type != IBV_QPT_RC && ibqp->qp_type != IBV_QPT_UC))
		return;
	if (srq ? srq->tm_ops.hdr || !qp->sq.hdr : !qp->rq.hdr)
		return;
	qp->xhdr = srq ? qp->sq.hdr : qp->rq.hdr;
	qp->xpub = xp = srq ? &qp->xhdr->sxpub : sv_rq_xpub_of(qp->xhdr);
	xp->self = (uint64_t)(uintptr_t)qp->xhdr;
	/* release: a sender that reads qpn reads the rest */
	__atomic_store_n(&xp->qpn, ibqp->qp_num, __ATOMIC_RELEASE);
}

/* Off the receive CQ's list, the side unmapped (its completions dropped
 * or taken before). */
static void xside_drop(struct sv_qp *qp)
{
	if (!qp->xs)
		return;
	sv_cq_xdel(to_sv_cq(qp->ex.qp_base.recv_cq), qp);
	munmap(qp->xs, qp->xs_len);
	qp->xs = NULL;
	qp->xring = NULL;
}

void sv_direct_xside_set(struct sv_qp *qp, int fd)
{
	struct stat st;
	struct sv_xside *xs;
	uint32_t n;

	if (!qp->xhdr || fstat(fd, &st) || st.st_size < (off_t)sizeof(*xs)) {
		close(fd);
		return;
	}
	xs = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
		  MAP_SHARED, fd, 0);
	close(fd);
	if (xs == MAP_FAILED)
		return;
	n = xs->xentries;
	if (!n || (n & (n - 1)) || xs->qpn != qp->ex.qp_base.qp_num ||
	    sv_xside_bytes(n) > (size_t)st.st_size) {
		munmap(xs, (size_t)st.st_size);
		return;
	}
	xside_drop(qp);            /* the last connection's */
	qp->xs = xs;
	qp->xs_len = (size_t)st.st_size;
	qp->xring = xs->ring;
	qp->xmask = n - 1;
	qp->xcons = 0;
	__atomic_store_n(&qp->xhdr->xcons, 0, __ATOMIC_RELEASE);
	sv_cq_xadd(to_sv_cq(qp->ex.qp_base.recv_cq), qp);
}

bool sv_direct_rq_room(const struct sv_qp *qp, uint32_t max)
{
	uint32_t n;

	if (!qp->xs)
		return false;
	/* its cons: the device's takes, then the senders' */
	n = qp->rq.prod -
	    (__atomic_load_n(&qp->rq.hdr->xbase, __ATOMIC_ACQUIRE) +
	     sv_xside_prod(__atomic_load_n(&qp->xs->word, __ATOMIC_ACQUIRE)));
	return n < max && n <= qp->rq.entries;
}

void sv_direct_cq_moved(struct sv_cq *cq)
{
	for (struct sv_qp *qp = cq->xqps; qp; qp = qp->xnext) {
		struct sv_rq_xpub *xp = qp->xpub;

		__atomic_store_n(&xp->cq_gen, xp->cq_gen + 1,
				 __ATOMIC_RELEASE);
	}
}

void sv_direct_rq_clean(struct sv_qp *qp)
{
	if (!qp->xs)
		return;
	/* no sender is inside (the device closed the side when the QP left
	 * its state): what it left is dropped */
	qp->xcons = sv_xside_prod(__atomic_load_n(&qp->xs->word,
						  __ATOMIC_ACQUIRE));
	__atomic_store_n(&qp->xhdr->xcons, qp->xcons, __ATOMIC_RELEASE);
}

void sv_direct_rq_fini(struct sv_qp *qp)
{
	xside_drop(qp);
}

bool sv_direct_xwords(struct sv_cq *cq)
{
	for (const struct sv_qp *qp = cq->xqps; qp; qp = qp->xnext)
		if (sv_xside_prod(__atomic_load_n(&qp->xs->word,
						  __ATOMIC_RELAXED)) !=
		    qp->xcons)
			cq->xlook = true;
	return cq->xlook;
}

void sv_direct_xtaken(struct sv_qp *qp, uint32_t c)
{
	if (c == qp->xcons)
		return;
	qp->xcons = c;
	/* release: the slots are read before a sender reuses them */
	__atomic_store_n(&qp->xhdr->xcons, c, __ATOMIC_RELEASE);
}

uint32_t sv_direct_xavail(const struct sv_qp *qp, bool look)
{
	uint32_t c = qp->xcons, most = qp->xmask + 1, n = 0;

	/* acquire: pairs with the sender's release store of the number,
	 * after its CQE */
	while (n < most &&
	       __atomic_load_n(&SV_XCQE_SEQ(&qp->xring[(c + n) & qp->xmask]),
			       __ATOMIC_ACQUIRE) == c + n + 1 &&
	       c + n + 1)
		n++;
	if (look) {
		/* acquire: pairs with the sender's CAS after the CQE */
		uint32_t w = sv_xside_prod(__atomic_load_n(&qp->xs->word,
							   __ATOMIC_ACQUIRE)) - c;

		if (w > n)
			n = w < most ? w : most;   /* never trust it */
	}
	return n;
}

/*
 * One completion e (stamp st, announced or not by an event) into cq's
 * private ring, in stamp order among those not polled (equal stamps keep
 * their order): the completions of several QPs' rings come in one after
 * the other, and poll_merged compares the daemon's ring with the head's
 * stamp alone. Per QP the stamps grow, so a QP's completions keep their
 * order. CQ lock and dlock held, room checked.
 */
static void dring_insert(struct sv_cq *cq, const struct sv_cqe *e,
			 uint32_t st, bool announced)
{
	uint32_t pos = cq->dprod, m = cq->dmask;
	uint32_t ann = (int32_t)(cq->dannounced - cq->dcons) > 0 ?
		       cq->dannounced : cq->dcons;
	bool all = cq->dannounced == cq->dprod;

	while (pos != cq->dcons &&
	       (int32_t)(cq->dstamp[(pos - 1) & m] - st) > 0) {
		cq->dring[pos & m] = cq->dring[(pos - 1) & m];
		cq->dstamp[pos & m] = cq->dstamp[(pos - 1) & m];
		pos--;
	}
	cq->dring[pos & m] = *e;
	cq->dstamp[pos & m] = st;
	/* what an event announced stays a prefix: one announced among
	 * announced ones extends it, one not announced inside it cuts it
	 * there (an arm may then fire again for some: never none) */
	if (announced && (all || pos - cq->dcons < ann - cq->dcons))
		cq->dannounced = all ? cq->dprod + 1 : cq->dannounced + 1;
	else if (!announced && pos - cq->dcons < ann - cq->dcons)
		cq->dannounced = pos;
	cq->dheld++;
	/* release: the CQE before the counter */
	__atomic_store_n(&cq->dprod, cq->dprod + 1, __ATOMIC_RELEASE);
}

/*
 * The completions senders put in the completion sides of cq's QPs, into
 * its private ring, in each side's order, with their stamps: from there
 * poll merges them with the device's ring as it merges our own direct
 * completions. Each side as its word says (sv_direct_xavail): a drain
 * takes everything published. Completions an event announced
 * (DIRECT_NOTIFY's xannounced) count as announced here too. When the
 * private ring is full, the smallest stamp of what stays behind caps what
 * poll takes of the daemon's ring (xcap). CQ lock held.
 */
void sv_direct_xdrain(struct sv_cq *cq)
{
	uint32_t prod;

	if (!cq->xqps)
		return;
	sv_spin_lock(&cq->dlock);
	prod = __atomic_load_n(&cq->ring->prod, __ATOMIC_ACQUIRE);
	cq->xcapped = false;
	for (struct sv_qp *qp = cq->xqps; qp; qp = qp->xnext) {
		struct sv_wq_ring *hdr = qp->xhdr;
		uint32_t c = qp->xcons;
		uint32_t xp = c + sv_direct_xavail(qp, true);
		uint32_t ann = __atomic_load_n(&hdr->xannounced,
					       __ATOMIC_ACQUIRE);

		for (; c != xp; c++) {
			struct sv_cqe e = qp->xring[c & qp->xmask];
			uint32_t st = sv_stamp_clamp(SV_XCQE_STAMP(&e), prod);

			if (cq->dheld > cq->dmask) {
				/* left for the next poll, which the daemon's
				 * ring waits for */
				if (!cq->xcapped ||
				    (int32_t)(st - cq->xcap) < 0)
					cq->xcap = st;
				cq->xcapped = true;
				break;
			}
			e.tm_tag = 0;
			/* it is this QP's, whatever the sender said */
			e.qp_num = qp->ex.qp_base.qp_num;
			dring_insert(cq, &e, st, (int32_t)(ann - c) > 0);
		}
		sv_direct_xtaken(qp, c);
	}
	__atomic_store_n(&cq->ring->dused, cq->dheld, __ATOMIC_RELAXED);
	/* (what the private ring had no room for stays in the sides: the
	 * next drain's, by their words) */
	cq->xlook = cq->xcapped;
	sv_spin_unlock(&cq->dlock);
}
