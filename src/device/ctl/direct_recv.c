// SPDX-License-Identifier: MIT
/*
 * The direct path's receive side in the daemon (docs/DESIGN.md "The direct
 * path", "SEND and RECV"): a same-host sender of the same uid takes its
 * peer's receive WQEs itself. DIRECT_RECV hands it the peer's rings
 * read-only (and, for a peer on an SRQ, makes the SRQ's consumer a word of
 * the uid's guard table that every taker moves by CAS); DIRECT_NOTIFY
 * fires the peer's CQ or SRQ limit for it; a flush of the peer's queue
 * waits for its guard; a WQE it claimed from an SRQ and did not fill is
 * adopted by the receiving QP (sv_direct_adopt).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/sv_direct.h"
#include "device/ctl/direct.h"
#include "device/ctl/direct_int.h"
#include "device/exec/engine.h"
#include "device/exec/exec_int.h"
#include "device/exec/wq.h"
#include "device/sv_dev.h"

struct sv_wq_ring *sv_drx_hdr(const struct sv_qp *qp, uint32_t *xprod)
{
	struct sv_wq_ring *h = qp->srq ? qp->sq.hdr : qp->rq.hdr;

	if (!h || !qp->xs)
		return NULL;
	if (xprod)
		*xprod = sv_xside_prod(__atomic_load_n(&qp->xs->word,
						       __ATOMIC_ACQUIRE));
	return h;
}

/* ---- the completion side (struct sv_xside) ---- */

/* As many completions as the queue holds; on an SRQ, whose ring a resize
 * may grow, at least as many as the receive CQ holds (a sender finding
 * it full goes to the device). */
static uint32_t xside_entries(const struct sv_qp *qp)
{
	uint32_t n = qp->srq ? qp->srq->rq.entries : qp->rq.entries;

	if (qp->srq && n)
		while (n < qp->recv_cq->entries && n < SV_XSIDE_MAX)
			n <<= 1;
	return n;
}

/* Completion sides live: each holds a descriptor and a mapping here,
 * which the device otherwise spends per pool, not per object ("Memory"):
 * at most a quarter of the descriptor limit; past it, a QP's SENDs take
 * the device's path. */
static uint32_t xs_live;

static bool xside_room(void)
{
	static uint32_t cap;
	static bool said;
	struct rlimit rl;

	if (!cap) {
		rlim_t q = getrlimit(RLIMIT_NOFILE, &rl) ? 0 : rl.rlim_cur / 4;

		cap = q < 64 ? 64 : q > UINT32_MAX ? UINT32_MAX : (uint32_t)q;
	}
	if (xs_live < cap)
		return true;
	if (!said)
		sv_log(SV_LOG_INFO, "%u completion sides, a quarter of the "
		       "descriptor limit: SENDs to QPs connected from now on "
		       "take the device's path", cap);
	said = true;
	return false;
}

void sv_direct_xside_close(struct sv_qp *qp)
{
	uint64_t closed = (uint64_t)SV_XSIDE_CLOSED << 32;

	if (qp->xs && !(__atomic_load_n(&qp->xs->word, __ATOMIC_RELAXED) &
			closed))
		__atomic_fetch_or(&qp->xs->word, closed, __ATOMIC_SEQ_CST);
}

void sv_direct_xside_free(struct sv_qp *qp)
{
	if (!qp->xs)
		return;
	sv_direct_xside_close(qp);
	if (!qp->srq && qp->rq.xword == &qp->xs->word) {
		wq_sync_cons(&qp->rq);
		qp->rq.xword = NULL;
	}
	munmap(qp->xs, qp->xs_bytes);
	close(qp->xs_fd);
	qp->xs = NULL;
	qp->xs_fd = -1;
	xs_live--;
}

int sv_direct_xside_make(struct sv_req *r, struct sv_qp *qp)
{
	struct sv_srq *srq = qp->srq;
	struct sv_wq_ring *h;
	uint32_t n;
	size_t bytes;
	void *map;
	int fd;

	sv_direct_xside_free(qp);  /* the last connection's */
	if (!sv_direct_enabled() || qp->opened || qp->roce || !qp->owner ||
	    (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC) ||
	    !qp->recv_cq || !qp->sq.hdr ||
	    (srq ? srq->type != IBV_SRQT_BASIC || srq->tm :
		   !qp->rq.hdr || !qp->rq.entries))
		return 0;
	n = xside_entries(qp);
	if (!n || (n & (n - 1)) || !xside_room())
		return 0;
	bytes = sv_xside_bytes(n);
	bytes = (bytes + 4095) & ~(size_t)4095;
	if (sv_ring_alloc("softverbs-xside", bytes, &fd, &map))
		return 0;          /* no direct side: the device's path */
	r->fd_out = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd_out < 0) {
		munmap(map, bytes);
		close(fd);
		return 0;
	}
	xs_live++;
	qp->xs = map;
	qp->xs_fd = fd;
	qp->xs_bytes = bytes;
	qp->xs->xentries = n;
	qp->xs->qpn = qp->qpn;
	/* the owner's counters of the last side: this one's from 0 */
	h = srq ? qp->sq.hdr : qp->rq.hdr;
	__atomic_store_n(&h->xcons, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&h->xannounced, 0, __ATOMIC_RELEASE);
	if (!srq) {
		/* from here its cons is ours plus what senders took */
		wq_sync_cons(&qp->rq);
		qp->rq.xbase = qp->rq.cons;
		__atomic_store_n(&qp->rq.hdr->xbase, qp->rq.xbase,
				 __ATOMIC_RELEASE);
		qp->rq.xword = &qp->xs->word;
	}
	return 0;
}

bool sv_direct_rq_held(const struct sv_qp *t)
{
	const struct sv_qp *s;

	if (!t->drecv || !sv_direct_enabled())
		return false;
	/* the one QP that may send to it directly: its peer, connected
	 * back (the library checks both entries under its guard); held as
	 * a revocation's scan finds a guard held */
	s = sv_dqp_at(t->attr.dest_qp_num);
	return s && sv_dguard_busy(s->qpn & QP_MASK, t->drecv_epoch);
}

uint32_t sv_direct_rq_held_cqes(const struct sv_qp *qp,
				const struct sv_cq *cq)
{
	uint32_t xprod, n, most;
	const struct sv_wq_ring *h;

	if (!qp->drecv || cq != qp->recv_cq || !(h = sv_drx_hdr(qp, &xprod)))
		return 0;
	n = xprod - __atomic_load_n(&h->xcons, __ATOMIC_ACQUIRE);
	/* (a completion ring on an SRQ: as large as the SRQ or the CQ) */
	most = qp->srq ? qp->srq->rq.entries : qp->rq.entries;
	if (qp->srq && cq->entries > most)
		most = cq->entries;
	return n <= most ? n : most;
}

/*
 * The caller's QP (handle qp) and its peer for a direct SEND: an RC or UC
 * QP of the caller's, not on the wire, whose peer is a QP of this host, of
 * the caller's uid, connected back to it. NULL (r->why says) otherwise.
 */
static struct sv_qp *direct_peer(struct sv_req *r, uint64_t handle,
				 int *err)
{
	struct sv_qp *qp = sv_req_obj(r, handle, SV_OBJ_QP), *t;

	*err = -EINVAL;
	if (!qp)
		return NULL;
	if (qp->opened || qp->roce ||
	    (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC)) {
		r->why = "not a connected QP with its peer on this host";
		return NULL;
	}
	t = sv_dqp_at(qp->attr.dest_qp_num);
	if (!t || t == qp || t->opened || t->roce || t->type != qp->type ||
	    t->attr.dest_qp_num != qp->qpn || !t->owner ||
	    t->owner->uid != r->client->uid) {
		r->why = "its peer is no QP of this host and uid connected to it";
		*err = -ENOENT;
		return NULL;
	}
	return t;
}

/* The tag of srq's word while its ring is the one it has now. */
static uint32_t srq_tag(const struct sv_srq *srq)
{
	return (srq->srqn & SV_DSRQ_SRQN) |
	       ((uint32_t)srq->dsrq_gen << 24 & SV_DSRQ_GEN);
}

/* srq's word in its owner's uid's guard table, written now if no sender
 * took WQEs of it before: its tag, or 0 when there is no table. */
static uint32_t srq_share(struct sv_srq *srq)
{
	struct gtab *g = sv_dgtab_get(srq->owner->uid, true);
	struct sv_wq *wq = &srq->rq;
	uint32_t tag;

	if (!g)
		return 0;
	if (wq->dsrq)
		return wq->dsrq_tag;
	tag = srq_tag(srq);
	wq->dsrq = &g->srq[srq->srqn & (SV_DIRECT_SRQ_SLOTS - 1)].word;
	wq->dsrq_tag = tag;
	/* an engine filling the head unlocked holds it (its commit lets go) */
	__atomic_store_n(wq->dsrq, sv_dsrq_word(wq->cons, tag |
			 (srq->rx_busy ? SV_DSRQ_HELD : 0)), __ATOMIC_RELEASE);
	return tag;
}

int sv_direct_srq_moved(struct sv_srq *srq, bool gone, uint32_t *cons)
{
	struct sv_wq *wq = &srq->rq;
	uint32_t tag;
	uint64_t w;

	*cons = wq->cons;
	if (!wq->dsrq)
		return 0;
	if (gone) {
		__atomic_store_n(wq->dsrq, 0, __ATOMIC_RELEASE);
		wq->dsrq = NULL;
		return 0;
	}
	srq->dsrq_gen++;
	tag = srq_tag(srq);
	w = __atomic_load_n(wq->dsrq, __ATOMIC_ACQUIRE);
	for (;;) {
		uint32_t c = sv_dsrq_cons(w), p = wq_prod(wq);

		if (!wq_dsrq_ours(wq, w) || !wq_cons_ok(wq, c, p)) {
			__atomic_store_n(wq->dsrq, sv_dsrq_word(wq->cons, tag),
					 __ATOMIC_RELEASE);
			wq->dsrq_tag = tag;
			return -EIO;
		}
		/* (a sender's claim in between fails this: again) */
		if (__atomic_compare_exchange_n(wq->dsrq, &w, sv_dsrq_word(c,
				tag | (sv_dsrq_tag(w) & SV_DSRQ_HELD)), false,
				__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			wq->cons = *cons = c;
			wq->dsrq_tag = tag;
			return 0;
		}
	}
}

/* s's claim record, when armed (a copy of it in *out). */
static struct sv_direct_claim *claim_of(const struct sv_qp *s,
					struct sv_direct_claim *out)
{
	struct gtab *g;
	struct sv_direct_claim *cl;

	if (!sv_direct_enabled() || s->opened || !sv_dguard_of(s, &g))
		return NULL;
	cl = &g->claim[s->qpn & QP_MASK];
	/* acquire: pairs with the poster's release store of qpn */
	if (!__atomic_load_n(&cl->qpn, __ATOMIC_ACQUIRE))
		return NULL;
	memcpy(out, cl, sizeof(*out));
	return cl;
}

bool sv_direct_claim_due(const struct sv_qp *t)
{
	struct sv_direct_claim c;
	const struct sv_qp *s;

	if (!t->srq || !t->drecv || t->dclaim.valid)
		return false;
	s = sv_dqp_at(t->attr.dest_qp_num);
	return s && claim_of(s, &c) && c.qpn == t->qpn;
}

/*
 * Could any process of t's owner's uid write into t's owner itself (no
 * Yama restriction, the owner dumpable: its /proc entry is its own)? What
 * the uid's guard table says (an SRQ's word, a claim record naming
 * buffers and a wr_id) is written by any of them: the daemon shares an
 * SRQ through it, and acts on a claim record, only where that grants
 * nothing a process of the uid does not have already. Elsewhere a
 * record's WQE is lost, as a NIC loses the WQE of a message cut off
 * midway (and an SRQ is not shared at all, so there are none).
 */
static bool uid_writes_owner(const struct sv_qp *t)
{
	char path[64];
	struct stat st;
	int scope = 0;
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");

	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = 1;
		fclose(f);
	}
	if (scope != 0 || !t->owner)
		return false;
	snprintf(path, sizeof(path), "/proc/%d", (int)t->owner->pid);
	return !stat(path, &st) && st.st_uid == t->owner->uid;
}

void sv_direct_adopt(struct sv_qp *s, bool force)
{
	struct sv_direct_claim c, *cl = claim_of(s, &c);
	const struct sv_direct_guard *g = sv_dguard_of(s, NULL);
	struct sv_qp *t;
	uint32_t xprod;

	/* a poster still inside its guard may yet fill it */
	if (!cl || (!force && __atomic_load_n(&g->epoch, __ATOMIC_ACQUIRE)))
		return;
	t = sv_dqp_at(c.qpn);
	if (t && t->srq && t->drecv && t->dclaim.valid)
		return;            /* (one at a time: this one later) */
	__atomic_store_n(&cl->qpn, 0, __ATOMIC_RELEASE);
	if (!t || !t->srq || t->srq->srqn != c.srqn || !t->drecv ||
	    t->attr.dest_qp_num != s->qpn || c.num_sge > SV_DCLAIM_SGE ||
	    !t->xs || !uid_writes_owner(t))
		return;            /* nothing of it is left to complete */
	/* a poster stopped inside its guard publishes nothing from now on */
	if (force)
		sv_direct_xside_close(t);
	/* it landed after all (its poster died before it cleared this) */
	if (!sv_drx_hdr(t, &xprod) || (int32_t)(xprod - c.xprod) >= 0)
		return;
	t->dclaim.wr_id = c.wr_id;
	t->dclaim.num_sge = c.num_sge;
	for (uint32_t i = 0; i < c.num_sge; i++) {
		t->dclaim.sge[i].addr = c.sge[i].addr;
		t->dclaim.sge[i].length = c.sge[i].length;
		t->dclaim.sge[i].lkey = c.sge[i].lkey;
	}
	t->dclaim.valid = true;
	if (t->state == IBV_QPS_ERR)
		sv_engine_kick(t->engine);
}

void sv_direct_claim_take(struct sv_qp *t)
{
	struct sv_qp *s;

	if (t->srq && t->drecv && !t->dclaim.valid &&
	    (s = sv_dqp_at(t->attr.dest_qp_num)))
		sv_direct_adopt(s, true);
}

int sv_cmd_direct_recv(struct sv_req *r)
{
	const struct sv_cmd_direct_recv *a = &r->cmd->u.direct_recv;
	struct sv_rsp_direct_recv *o = &r->rsp->u.direct_recv;
	struct sv_srq *srq;
	struct sv_qp *t;
	int err;

	err = sv_direct_args(r, a->rsvd, a->part, SV_DRECV_XSIDE);
	if (err)
		return err;
	t = direct_peer(r, a->qp, &err);
	if (!t)
		return err;
	srq = t->srq;
	if (srq ? srq->type != IBV_SRQT_BASIC || srq->tm || srq->in_error ||
			  !t->sq.hdr || !t->recv_cq :
		  !t->rq.hdr || !t->rq.entries || !t->recv_cq) {
		r->why = srq ? "its peer's SRQ is not a basic one" :
			       "its peer has no receive queue of its own";
		return -EOPNOTSUPP;
	}
	if (!srq && a->part == SV_DRECV_SRQ) {
		r->why = "its peer has no SRQ";
		return -EINVAL;
	}
	if (!t->xs) {
		r->why = "its peer has no completion side (not in RTR or RTS)";
		return -EOPNOTSUPP;
	}
	if (!uid_writes_owner(t)) {
		r->why = "its peer's receive side is not shared where Yama "
			 "keeps the processes of a uid apart";
		return -EPERM;
	}
	memset(o, 0, sizeof(*o));
	o->pid = t->owner->pid;
	o->srqn = srq ? srq->srqn : 0;
	if (a->part == SV_DRECV_SRQ) {
		o->srq_tag = srq_share(srq);
		if (!o->srq_tag) {
			r->why = "cannot make the guard table of this uid";
			return -ENOMEM;
		}
		r->fd_out = sv_ring_fd_ro(&srq->loc);
		o->offset = srq->loc.offset;
		o->bytes = sv_wq_ring_bytes(srq->rq.entries, srq->rq.stride);
		o->entries = srq->rq.entries;
		o->stride = srq->rq.stride;
		o->max_sge = srq->rq.max_sge;
	} else if (a->part == SV_DRECV_XSIDE) {
		/* read-write: the one part a sender writes */
		r->fd_out = fcntl(t->xs_fd, F_DUPFD_CLOEXEC, 0);
		if (r->fd_out < 0)
			r->fd_out = -errno;
		o->bytes = t->xs_bytes;
		o->entries = t->xs->xentries;
	} else if (a->part == SV_DRECV_RQ && srq) {
		/* its receive side is in its send ring's header */
		r->fd_out = sv_ring_fd_ro(&t->loc);
		o->offset = t->loc.offset +
			    (uint64_t)((char *)t->sq.hdr - (char *)t->ring);
		o->bytes = SV_RING_HDR_BYTES;
	} else if (a->part == SV_DRECV_RQ) {
		r->fd_out = sv_ring_fd_ro(&t->loc);
		o->offset = t->loc.offset +
			    (uint64_t)((char *)t->rq.hdr - (char *)t->ring);
		o->bytes = sv_wq_ring_bytes(t->rq.entries, t->rq.stride);
		o->entries = t->rq.entries;
		o->stride = t->rq.stride;
		o->max_sge = t->rq.max_sge;
	} else {
		r->fd_out = sv_ring_fd_ro(&t->recv_cq->loc);
		o->offset = t->recv_cq->loc.offset;
		o->bytes = t->recv_cq->ring_bytes;
		o->entries = t->recv_cq->entries;
	}
	if (r->fd_out < 0) {
		r->why = "cannot hand out the ring";
		return r->fd_out;
	}
	/* from now on its receive queue is taken from here too */
	t->drecv = true;
	return 0;
}

struct sv_qp *sv_direct_notify_peer(struct sv_req *r, uint64_t handle,
				    uint32_t xprod, uint32_t flags, int *err)
{
	struct sv_qp *t = direct_peer(r, handle, err);
	struct sv_wq_ring *h;

	if (!t)
		return NULL;
	if (!t->drecv || !(h = sv_drx_hdr(t, NULL))) {
		r->why = "its peer's receive queue was never taken directly";
		*err = -EINVAL;
		return NULL;
	}
	if (flags & SV_NOTIFY_SRQ_LIMIT) {
		if (t->srq)
			sv_srq_limit_check(t->srq);
		return t;
	}
	__atomic_store_n(&h->xannounced, xprod, __ATOMIC_RELEASE);
	return t;
}
