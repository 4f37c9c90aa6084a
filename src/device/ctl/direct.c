// SPDX-License-Identifier: MIT
/*
 * The direct path's daemon side (docs/DESIGN.md "The direct path"): the
 * tables it publishes (src/abi/sv_direct.h), kept equal to what its own
 * checks would find, and revocation: an entry made less permissive is
 * rewritten first, then the epoch goes up, then the command that revoked
 * it waits for every guard that may have read the old entry.
 *
 * The guards are in one memfd per uid (only processes that may write each
 * other's memory share one): a client gets its uid's with OPEN_DIRECT's
 * GUARDS part, and a QP's guard is the slot of its owner's uid's table.
 *
 * Everything here runs under sv_dev.lock (entries are written by whoever
 * changes the object: the control thread, or an engine changing a QP's
 * state); sv_direct_revoke runs on the control thread only and may let the
 * lock go while it waits, as sv_engine_quiesce does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_direct.h"
#include "device/ctl/direct.h"
#include "device/ctl/direct_int.h"
#include "device/exec/engine.h"
#include "device/exec/exec_int.h"
#include "device/exec/wq.h"
#include "device/sv_dev.h"

#define PAGE     4096u

/* How long a revocation waits for a held guard before it fences the copy
 * (zeroes the slot's iovecs and looks at the thread, sv_direct.h): a guard
 * is held for one system call, so only a thread stopped, frozen or starved
 * that long gets there. */
#define FENCE_AFTER_NS 2000000ull
/* After this, a wait for a copy that cannot be fenced says so in the log
 * (once per revocation). */
#define WAIT_LOG_NS 1000000000ull


static struct {
	int memfd;                 /* -1: no direct path */
	void *map;
	size_t bytes;
	struct sv_direct_hdr *hdr;
	union sv_direct_qp_u *qp;  /* [QP_SLOTS] */
	union sv_direct_key_u *key; /* [key_slots] */
	uint32_t key_slots;
	size_t guard_bytes, riov_off, claim_off, srq_off; /* of a gtab's */
	struct gtab *gtabs;
	uint64_t revokes, waits, fenced;
	uint64_t msgs_gone, bytes_gone, mapped_gone; /* of QPs gone */
	uint64_t refused_gone[SV_DREF_MAX];
	bool all_off;              /* a capture is on (sv_direct_all_off) */
	bool dirty;                /* an entry changed since the last
				    * revocation's epoch */
	uint32_t qp_hi;            /* 1 + the highest QP slot ever given an
				    * entry: no guard above can be held */
} dt = { .memfd = -1 };

static size_t page_up(size_t n)
{
	return (n + PAGE - 1) & ~(size_t)(PAGE - 1);
}

int sv_direct_init(void)
{
	size_t qp_off = PAGE, key_off, bytes;
	uint32_t key_slots = sv_dev.keys.max + 1;
	int fd;

	key_off = qp_off + page_up((size_t)QP_SLOTS *
				   sizeof(union sv_direct_qp_u));
	bytes = key_off + page_up((size_t)key_slots *
				  sizeof(union sv_direct_key_u));
	/* sparse: only the pages of live entries take memory */
	fd = sv_memfd_sealed("softverbs-direct", bytes);
	if (fd < 0)
		return fd;
	dt.map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (dt.map == MAP_FAILED) {
		int err = -errno;

		close(fd);
		dt.map = NULL;
		return err;
	}
	dt.memfd = fd;
	dt.bytes = bytes;
	dt.hdr = dt.map;
	dt.qp = (union sv_direct_qp_u *)((char *)dt.map + qp_off);
	dt.key = (union sv_direct_key_u *)((char *)dt.map + key_off);
	dt.key_slots = key_slots;
	dt.riov_off = page_up((size_t)QP_SLOTS * sizeof(struct sv_direct_guard));
	dt.claim_off = dt.riov_off +
		       page_up((size_t)QP_SLOTS * sizeof(struct sv_direct_riov));
	dt.srq_off = dt.claim_off +
		     page_up((size_t)QP_SLOTS * sizeof(struct sv_direct_claim));
	dt.guard_bytes = dt.srq_off +
			 page_up((size_t)SV_DIRECT_SRQ_SLOTS *
				 sizeof(struct sv_direct_srq));
	dt.hdr->qp_slots = QP_SLOTS;
	dt.hdr->key_slots = key_slots;
	dt.hdr->guard_bytes = dt.guard_bytes;
	dt.hdr->riov_off = dt.riov_off;
	dt.hdr->claim_off = dt.claim_off;
	dt.hdr->srq_off = dt.srq_off;
	dt.hdr->qp_off = qp_off;
	dt.hdr->key_off = key_off;
	dt.hdr->bytes = bytes;
	dt.hdr->perm = sv_dev.keys.perm;
	dt.hdr->epoch = 1;
	dt.hdr->version = SV_DIRECT_VERSION;
	/* release: a client that sees the magic sees the rest */
	__atomic_store_n(&dt.hdr->magic, SV_DIRECT_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* uid's guard table, made the first time one of its clients asks: NULL
 * when it cannot be made. */
struct gtab *sv_dgtab_get(uid_t uid, bool make)
{
	struct gtab *t;
	void *map;
	int fd;

	for (t = dt.gtabs; t; t = t->next)
		if (t->uid == uid)
			return t;
	if (!make || dt.memfd < 0)
		return NULL;
	fd = sv_memfd_sealed("softverbs-guards", dt.guard_bytes);
	if (fd < 0)
		return NULL;
	if ((map = mmap(NULL, dt.guard_bytes, PROT_READ | PROT_WRITE,
			MAP_SHARED, fd, 0)) == MAP_FAILED ||
	    !(t = calloc(1, sizeof(*t)))) {
		/* (a map made before calloc failed goes with the process) */
		close(fd);
		return NULL;
	}
	t->uid = uid;
	t->memfd = fd;
	t->guard = map;
	t->riov = (struct sv_direct_riov *)((char *)map + dt.riov_off);
	t->claim = (struct sv_direct_claim *)((char *)map + dt.claim_off);
	t->srq = (struct sv_direct_srq *)((char *)map + dt.srq_off);
	t->next = dt.gtabs;
	dt.gtabs = t;
	return t;
}

/* qp's guard slot, in its owner's uid's table (NULL: no table, nothing
 * held). */
struct sv_direct_guard *sv_dguard_of(const struct sv_qp *qp,
				      struct gtab **tp)
{
	struct gtab *t = qp->owner ? sv_dgtab_get(qp->owner->uid, false) : NULL;

	if (tp)
		*tp = t;
	return t ? &t->guard[qp->qpn & QP_MASK] : NULL;
}

void sv_direct_fini(void)
{
	if (dt.memfd < 0)
		return;
	while (dt.gtabs) {
		struct gtab *t = dt.gtabs;

		dt.gtabs = t->next;
		munmap(t->guard, dt.guard_bytes);
		close(t->memfd);
		free(t);
	}
	munmap(dt.map, dt.bytes);
	close(dt.memfd);
	dt.memfd = -1;
	dt.map = NULL;
}

bool sv_direct_enabled(void)
{
	return dt.memfd >= 0;
}

/* Rewrites an entry of n words (word 0's low half is its seq) if its value
 * changes; a change that weakens it (takes away something a copy may have
 * read it for) is what the next sv_direct_revoke waits out. */
static void entry_write(uint64_t *dst, const uint64_t *val, unsigned int n,
			bool weakens)
{
	bool same = (__atomic_load_n(&dst[0], __ATOMIC_RELAXED) >> 32) ==
		    (val[0] >> 32);

	for (unsigned int i = 1; same && i < n; i++)
		same = __atomic_load_n(&dst[i], __ATOMIC_RELAXED) == val[i];
	if (same)
		return;
	if (weakens)
		dt.dirty = true;
	sv_direct_write(dst, val, n);
}

/* Does a key entry going from old to v take a grant away? An empty entry
 * (key 0) grants nothing: filling it weakens nothing. Written only under
 * the device lock, so old is read as is. */
static bool key_weakens(const union sv_direct_key_u *old,
			const union sv_direct_key_u *v)
{
	if (!old->e.key)
		return false;
	for (unsigned int i = 1; i < sizeof(v->w) / 8; i++)
		if (old->w[i] != v->w[i])
			return true;
	return (old->w[0] >> 32) != (v->w[0] >> 32);
}

/* A state the library lets a peer's copy land in (src/verbs/direct.c's
 * can_receive), and the one it copies from. */
static bool state_receives(uint8_t s)
{
	return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD ||
	       s == IBV_QPS_SQE;
}

/* Does a QP entry going from old to v take a grant away? A copy reads an
 * entry for: its own QP in RTS, a peer in a receiving state, both LOCAL
 * and not NODIRECT, EST, the type, PD, owner, peer QPN and access. An
 * entry that granted neither weakens nothing when it changes (a QP's
 * RESET -> INIT -> RTR, a never-connected QP destroyed); one that keeps
 * all of it and adds (RTR -> RTS, EST set) weakens nothing either. */
static bool qp_weakens(const union sv_direct_qp_u *old,
		       const union sv_direct_qp_u *v)
{
	const struct sv_direct_qp *o = &old->e, *n = &v->e;

	if (!o->qpn || !(o->flags & SV_DQP_LOCAL) ||
	    (o->flags & SV_DQP_NODIRECT) || !state_receives(o->state))
		return false;
	if (n->qpn != o->qpn || n->type != o->type || n->pd != o->pd ||
	    n->pid != o->pid || n->dest_qpn != o->dest_qpn ||
	    (o->access & ~n->access) || (o->flags & ~n->flags) ||
	    (n->flags & SV_DQP_NODIRECT) || !state_receives(n->state))
		return true;
	return o->state == IBV_QPS_RTS && n->state != IBV_QPS_RTS;
}

/* ---- keys ---- */

static union sv_direct_key_u *key_entry(uint32_t key)
{
	uint32_t slot = sv_keyperm_inv(&sv_dev.keys.perm, SV_KEY_INDEX(key));

	return slot && slot < dt.key_slots ? &dt.key[slot] : NULL;
}

/* What the direct path may use of mr: a regular contiguous valid MR;
 * anything else is the daemon path's (an entry of key 0). */
static void mr_value(const struct sv_mr *mr, union sv_direct_key_u *v)
{
	memset(v, 0, sizeof(*v));
	if (mr->kind != SV_MR_REGULAR || mr->invalid || mr->nblocks ||
	    !mr->pd || !mr->owner)
		return;
	v->e.key = mr->key;
	v->e.access = mr->access;
	v->e.pd = mr->pd->id;
	v->e.pid = mr->owner->pid;
	v->e.addr = mr->addr;
	v->e.iova = mr->iova;
	v->e.length = mr->length;
	if (mr->has_file) {
		v->e.flags |= SV_DKEY_FILE;
		v->e.file_gen = mr->file_gen;
	}
}

void sv_direct_mr(const struct sv_mr *mr)
{
	union sv_direct_key_u v, *e;

	if (dt.memfd < 0 || !(e = key_entry(mr->key)))
		return;
	mr_value(mr, &v);
	entry_write(e->w, v.w, sizeof(v.w) / 8, key_weakens(e, &v));
}

void sv_direct_key_clear(uint32_t key)
{
	union sv_direct_key_u v, *e;

	if (dt.memfd < 0 || !(e = key_entry(key)))
		return;
	memset(&v, 0, sizeof(v));
	entry_write(e->w, v.w, sizeof(v.w) / 8, key_weakens(e, &v));
}

/* ---- QPs ---- */

static void qp_value(const struct sv_qp *qp, union sv_direct_qp_u *v)
{
	memset(v, 0, sizeof(*v));
	v->e.qpn = qp->qpn;
	v->e.state = (uint8_t)qp->state;
	v->e.type = (uint8_t)qp->type;
	if (!qp->roce)
		v->e.flags |= SV_DQP_LOCAL;
	if (qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD ||
	    qp->state == IBV_QPS_SQE || qp->comm_est_sent)
		v->e.flags |= SV_DQP_EST;
	if (qp->direct_off || dt.all_off)
		v->e.flags |= SV_DQP_NODIRECT;
	v->e.access = qp->attr.qp_access_flags;
	v->e.pd = qp->pd ? qp->pd->id : 0;
	v->e.pid = qp->owner ? qp->owner->pid : 0;
	v->e.dest_qpn = qp->attr.dest_qp_num;
}

void sv_direct_qp(struct sv_qp *qp)
{
	union sv_direct_qp_u v, *e;
	bool weakens;

	if (dt.memfd < 0 || qp->opened)
		return;
	qp_value(qp, &v);
	/* a copy can start only from a QP whose entry was written (the
	 * library refuses an empty one after storing its guard), so the
	 * revocations scan the guards below the highest such slot */
	if ((qp->qpn & QP_MASK) >= dt.qp_hi)
		dt.qp_hi = (qp->qpn & QP_MASK) + 1;
	e = &dt.qp[qp->qpn & QP_MASK];
	weakens = qp_weakens(e, &v);
	entry_write(e->w, v.w, sizeof(v.w) / 8, weakens);
	/* a receive queue a sender takes WQEs of directly: an epoch past
	 * this entry, which its flush waits for the sender's guard to reach
	 * (sv_direct_rq_held; the engine cannot wait, so it looks) */
	if (weakens && qp->drecv)
		qp->drecv_epoch = __atomic_add_fetch(&dt.hdr->epoch, 1,
						     __ATOMIC_SEQ_CST);
}

/* QP qpn (exactly), or NULL */
struct sv_qp *sv_dqp_at(uint32_t qpn)
{
	struct sv_qp *qp = sv_dev.qpn_tab[qpn & QP_MASK];

	return qp && qp->qpn == qpn ? qp : NULL;
}


void sv_direct_all_off(bool off)
{
	if (dt.all_off == off)
		return;
	/* kept also before the tables exist: they are made with it */
	dt.all_off = off;
	if (dt.memfd < 0)
		return;
	for (uint32_t i = 0; i < QP_SLOTS; i++)
		if (sv_dev.qpn_tab[i])
			sv_direct_qp(sv_dev.qpn_tab[i]);
	if (off)
		sv_direct_revoke();
}

void sv_direct_qp_clear(const struct sv_qp *qp)
{
	union sv_direct_qp_u v;
	union sv_direct_qp_u *e;

	if (dt.memfd < 0 || qp->opened)
		return;
	e = &dt.qp[qp->qpn & QP_MASK];
	if ((uint32_t)(e->w[0] >> 32) != qp->qpn)
		return;         /* another QP's slot now */
	memset(&v, 0, sizeof(v));
	entry_write(e->w, v.w, sizeof(v.w) / 8, qp_weakens(e, &v));
}

void sv_direct_qp_counts(const struct sv_qp *qp, uint64_t *sends,
			 uint64_t *recvs)
{
	const struct sv_direct_guard *g;
	uint32_t xprod;

	if (dt.memfd < 0 || qp->opened)
		return;
	if ((g = sv_dguard_of(qp, NULL)))
		*sends += __atomic_load_n(&g->msgs, __ATOMIC_RELAXED);
	/* the completion ring's producer: a direct receive each */
	if (qp->drecv && sv_drx_hdr(qp, &xprod))
		*recvs += xprod;
}

void sv_direct_guard_reset(const struct sv_qp *qp)
{
	struct sv_direct_guard *g;
	struct gtab *t;

	if (dt.memfd < 0 || qp->opened || !(g = sv_dguard_of(qp, &t)))
		return;
	__atomic_store_n(&t->claim[qp->qpn & QP_MASK].qpn, 0,
			 __ATOMIC_RELEASE);
	/* what its last QP ran stays counted */
	dt.msgs_gone += __atomic_load_n(&g->msgs, __ATOMIC_RELAXED);
	dt.bytes_gone += __atomic_load_n(&g->bytes, __ATOMIC_RELAXED);
	dt.mapped_gone += __atomic_load_n(&g->mapped, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < SV_DREF_MAX; i++) {
		dt.refused_gone[i] +=
			__atomic_load_n(&g->refused[i], __ATOMIC_RELAXED);
		__atomic_store_n(&g->refused[i], 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&g->msgs, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&g->bytes, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&g->mapped, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&g->flags, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&g->tid, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&g->epoch, 0, __ATOMIC_RELEASE);
}

_Static_assert(SV_DREF_MAX ==
		       sizeof(((struct sv_direct_guard *)0)->refused) /
			       sizeof(uint32_t) &&
	       SV_DREF_MAX == sizeof(((struct sv_rsp_stat_wire *)0)
					     ->direct_refused) /
				      sizeof(uint64_t),
	       "a refusal counter per reason");

void sv_direct_counts(uint64_t *msgs, uint64_t *bytes, uint64_t *mapped,
		      uint64_t *refused)
{
	*msgs = dt.msgs_gone;
	*bytes = dt.bytes_gone;
	*mapped = dt.mapped_gone;
	for (unsigned int i = 0; i < SV_DREF_MAX; i++)
		refused[i] = dt.refused_gone[i];
	if (dt.memfd < 0)
		return;
	for (uint32_t i = 0; i < dt.qp_hi; i++) {
		const struct sv_direct_guard *g;

		if (!sv_dev.qpn_tab[i] || !(g = sv_dguard_of(sv_dev.qpn_tab[i], NULL)))
			continue;
		*msgs += __atomic_load_n(&g->msgs, __ATOMIC_RELAXED);
		*bytes += __atomic_load_n(&g->bytes, __ATOMIC_RELAXED);
		*mapped += __atomic_load_n(&g->mapped, __ATOMIC_RELAXED);
		for (unsigned int k = 0; k < SV_DREF_MAX; k++)
			refused[k] += __atomic_load_n(&g->refused[k],
						      __ATOMIC_RELAXED);
	}
}

void sv_direct_sq_done(struct sv_qp *qp)
{
	struct sv_wq_ring *hdr = qp->sq.hdr;

	if (!hdr)
		return;
	__atomic_store_n(&hdr->cq_mark, qp->send_cq ? qp->send_cq->prod : 0,
			 __ATOMIC_RELAXED);
	/* release: the completion, the state and cq_mark before done
	 * (pairs with the library's acquire load of done) */
	__atomic_store_n(&hdr->done, qp->sq.cons, __ATOMIC_RELEASE);
}

/* ---- revocation ---- */

/* Slot i's guard, when it is held by a copy that may have read an entry
 * older than epoch e (NULL otherwise). A guard of a QP gone, or of a
 * process gone, holds nothing. */
struct sv_direct_guard *sv_dguard_busy(uint32_t i, uint64_t e)
{
	const struct sv_qp *qp = sv_dev.qpn_tab[i];
	struct sv_direct_guard *g;
	uint64_t v;

	if (!qp || qp->opened || !(g = sv_dguard_of(qp, NULL)))
		return NULL;
	v = __atomic_load_n(&g->epoch, __ATOMIC_ACQUIRE);
	if (!v || v >= e)
		return NULL;
	if (!qp->owner || qp->owner->dead ||
	    sv_proc_gone(qp->owner->pid, qp->owner->pidfd))
		return NULL;
	return g;
}

static void pause_ns(uint64_t ns)
{
	struct timespec ts = { 0, (long)ns };

	nanosleep(&ts, NULL);
}

/* Where a guard's thread is, as far as a copy under it goes. */
enum writer {
	W_COPYING,                 /* running, or inside the copy's system
				    * call, or unknown: wait */
	W_OUTSIDE,                 /* stopped, frozen, or blocked anywhere
				    * but in the copy's call: a fenced copy
				    * moves nothing */
	W_GONE,                    /* the thread has exited */
};

/* The first line of /proc/PID/task/TID/NAME into buf: 0, or -errno. */
static int task_line(pid_t pid, pid_t tid, const char *name, char *buf,
		     int len)
{
	char path[64];
	FILE *f;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)pid,
		 (int)tid, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	p = fgets(buf, len, f);
	fclose(f);
	return p ? 0 : -EIO;
}

static enum writer writer_at(pid_t pid, pid_t tid)
{
	char buf[512], *p;
	long nr;
	char st;
	int ret;

	/* a guard held by no thread (the library stores its thread before
	 * the epoch, with release): scribbled, it guards no copy */
	if (tid <= 0)
		return W_OUTSIDE;
	ret = task_line(pid, tid, "stat", buf, sizeof(buf));
	if (ret == -ENOENT || ret == -ESRCH)
		return W_GONE;
	if (ret || !(p = strrchr(buf, ')')) || p[1] != ' ')
		return W_COPYING;
	st = p[2];
	if (st == 'Z' || st == 'X' || st == 'x')
		return W_GONE;
	/* a stop (SIGSTOP, a tracer) is taken on the way back to user
	 * space: not inside a copy (one that was is over) */
	if (st == 'T' || st == 't')
		return W_OUTSIDE;
	if (st == 'R')
		return W_COPYING;
	/* asleep: in which call? (the cgroup freezer's trap, too, is on the
	 * way back to user space, and shows the last call's number) */
	ret = task_line(pid, tid, "syscall", buf, sizeof(buf));
	if (ret == -ENOENT || ret == -ESRCH)
		return W_GONE;
	if (ret || !strncmp(buf, "running", 7))
		return W_COPYING;
	nr = strtol(buf, NULL, 10);
	if (nr == SYS_process_vm_writev || nr == SYS_process_vm_readv)
		return W_COPYING;
	return W_OUTSIDE;
}

/* Fence slot i's copy: no iovec of it moves a byte from now on. */
static void fence_slot(const struct gtab *t, uint32_t i)
{
	struct sv_direct_riov *r = &t->riov[i];

	for (unsigned int k = 0; k < SV_DIRECT_RIOV; k++)
		__atomic_store_n(&r->iov[k].len, 0, __ATOMIC_RELAXED);
	/* the zeroes before anything we read of the thread */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Wait until slot i holds nothing that may have read an entry older than
 * e: the copy ends, or it is fenced while its thread is outside it. */
static void guard_wait(uint32_t i, uint64_t e, uint64_t start)
{
	bool fenced = false, logged = false;
	struct sv_direct_guard *g;

	for (unsigned int round = 0; (g = sv_dguard_busy(i, e)); round++) {
		struct sv_qp *qp = sv_dev.qpn_tab[i];
		uint64_t now = sv_now_ns();

		if (now - start > FENCE_AFTER_NS) {
			struct gtab *t;
			bool mapped;
			enum writer w;

			sv_dguard_of(qp, &t);
			if (!fenced) {
				fence_slot(t, i);
				fenced = true;
			}
			mapped = __atomic_load_n(&g->flags, __ATOMIC_RELAXED) &
				 SV_DGUARD_MAPPED;
			w = writer_at(qp->owner->pid,
				      __atomic_load_n(&g->tid,
						      __ATOMIC_RELAXED));
			if (w == W_GONE || (w == W_OUTSIDE && !mapped)) {
				dt.fenced++;
				sv_log(SV_LOG_INFO, "qp %#x: a direct copy of "
				       "pid %d held its guard %llu ms, its "
				       "thread outside the copy: fenced (it "
				       "moves nothing)", qp->qpn,
				       (int)qp->owner->pid,
				       (unsigned long long)((now - start) /
							    1000000u));
				return;
			}
			if (!logged && now - start > WAIT_LOG_NS) {
				logged = true;
				sv_log(SV_LOG_WARN, "qp %#x: waiting for a "
				       "direct copy of pid %d thread %d (%s) "
				       "before the revocation completes",
				       qp->qpn, (int)qp->owner->pid,
				       (int)__atomic_load_n(&g->tid,
							    __ATOMIC_RELAXED),
				       mapped ? "a plain copy between mapped "
						"memfds, which only its end "
						"can fence" :
						"inside its system call");
			}
		}
		if (round < 64)
			sched_yield();
		else
			pause_ns(round < 256 ? 10000 : 100000);
	}
}

void sv_direct_revoke(void)
{
	uint64_t e, start;
	uint32_t first = QP_SLOTS;

	/* no entry changed since the last revocation's epoch: every copy
	 * that read an older one began before that epoch, and that
	 * revocation waited for it (a client's whole teardown clears its
	 * entries first and revokes once, sv_client_free_objs) */
	if (dt.memfd < 0 || !dt.dirty)
		return;
	dt.dirty = false;
	dt.revokes++;
	/* seq_cst: the entries rewritten before are seen by any initiator
	 * whose guard store this scan misses (its seq_cst fence between the
	 * guard store and its reads of the entries) */
	e = __atomic_add_fetch(&dt.hdr->epoch, 1, __ATOMIC_SEQ_CST);
	/* the guards' epochs first (most are 0), the QP behind one only
	 * when it is set */
	for (const struct gtab *t = dt.gtabs; t; t = t->next)
		for (uint32_t i = 0; i < dt.qp_hi && i < first; i++)
			if (__atomic_load_n(&t->guard[i].epoch,
					    __ATOMIC_RELAXED) &&
			    sv_dguard_busy(i, e))
				first = i;
	if (first == QP_SLOTS)
		return;
	/* a copy is on its way: wait for it, without the lock (the QPs and
	 * their owners stay: only this thread frees them) */
	dt.waits++;
	start = sv_now_ns();
	sv_dev_unlock();
	for (uint32_t i = first; i < dt.qp_hi; i++)
		guard_wait(i, e, start);
	sv_dev_lock(true);
}

void sv_direct_stat(uint64_t *revokes, uint64_t *waits, uint64_t *fenced)
{
	*revokes = dt.revokes;
	*waits = dt.waits;
	*fenced = dt.fenced;
}

/* ---- the commands ---- */

int sv_cmd_mr_file(struct sv_req *r)
{
	const struct sv_cmd_mr_file *a = &r->cmd->u.mr_file;
	unsigned int kind;
	const struct sv_mr *mr;

	if (a->rsvd) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	mr = sv_keytab_find(&sv_dev.keys, a->key, &kind);
	if (!mr || kind != SV_KEY_MR || !mr->has_file || dt.memfd < 0) {
		r->why = "no memfd behind that key";
		return -ENOENT;
	}
	r->fd_out = fcntl(mr->file_fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd_out < 0) {
		r->why = "cannot hand out the memfd";
		return -EMFILE;
	}
	r->rsp->u.mr_file.offset = mr->file_off;
	r->rsp->u.mr_file.length = mr->length;
	return 0;
}

/* A command of the direct path with a part up to max: 0, or its refusal
 * (reserved bits, no such part, the path off). */
int sv_direct_args(struct sv_req *r, uint32_t rsvd, uint32_t part,
		    uint32_t max)
{
	if (rsvd || part > max) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	if (dt.memfd < 0) {
		r->why = "the direct path is off (softverbsd --no-direct)";
		return -EOPNOTSUPP;
	}
	return 0;
}

int sv_cmd_open_direct(struct sv_req *r)
{
	const struct sv_cmd_open_direct *a = &r->cmd->u.open_direct;
	struct gtab *t;

	int ret = sv_direct_args(r, a->rsvd, a->part, SV_DIRECT_PART_GUARDS);

	if (ret)
		return ret;
	if (a->part == SV_DIRECT_PART_TABLES) {
		r->fd_out = fcntl(dt.memfd, F_DUPFD_CLOEXEC, 0);
		r->rsp->u.open_direct.bytes = dt.bytes;
	} else {
		t = sv_dgtab_get(r->client->uid, true);
		if (!t) {
			r->why = "cannot make the guard table of this uid";
			return -ENOMEM;
		}
		r->fd_out = fcntl(t->memfd, F_DUPFD_CLOEXEC, 0);
		r->rsp->u.open_direct.bytes = dt.guard_bytes;
	}
	if (r->fd_out < 0) {
		r->why = "cannot hand out the direct path's tables";
		return -EMFILE;
	}
	return 0;
}

