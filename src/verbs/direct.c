// SPDX-License-Identifier: MIT
/*
 * The direct path, the library's side (docs/DESIGN.md "The direct path"):
 * an RDMA WRITE or READ between two QPs of this host runs in the process
 * that posts it, as one process_vm_writev/readv, against the tables the
 * daemon publishes (src/abi/sv_direct.h), with every check the daemon's
 * engine would make; so does a SEND (and a WRITE with immediate data) to
 * a peer with a receive queue of its own, which takes the peer's receive
 * WQE and writes its completion into the peer's completion ring (below,
 * "SEND and RECV"). Anything the direct path cannot do, and every error
 * it finds, goes to the daemon's ring instead, which then does what it has
 * always done: a program sees the same completions either way, sooner.
 *
 * A WR goes direct only when nothing of its QP waits at the daemon: every
 * WQE published before it is done (the send ring's `done`; the poster
 * waits a bounded time for the engine to get there). Its completion goes
 * to its CQ's private ring, stamped with the daemon ring's position past
 * the last completion the daemon wrote for the QP (`cq_mark`); poll_cq
 * delivers every daemon completion below a stamp before the direct one,
 * so one QP's completions stay in posting order whoever wrote them, and
 * the program need not poll between the two.
 *
 * A peer in RTR that has taken no message yet is established by the first
 * WRITE, as a NIC's first packet does: the poster asks the daemon once
 * (DIRECT_EST), which raises COMM_EST there, and the WRITE then goes
 * direct. Every WR of a direct opcode that goes to the daemon after all is
 * counted by reason in its QP's guard (enum sv_direct_refusal), which
 * softverbs stat adds up.
 *
 * Revocation (a dereg, a rereg, a QP leaving RTS) is the daemon's: the
 * guard of our QP holds the epoch we read while we read entries and copy,
 * so that a revocation that missed our guard is one we see in the entries
 * (sv_direct.h). Each copy passes the daemon's fence first: its remote
 * iovecs are in our guard table, where the daemon zeroes them when it
 * finds us stopped, and the epoch must still be ours just before the
 * kernel reads them (sv_d_fenced).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "verbs/direct_int.h"

/* The calling thread's id, for the guard (one system call per thread and
 * fork). */
static __thread pid_t my_tid;

static void tid_forget(void)
{
	my_tid = 0;
}

static pthread_once_t tid_once = PTHREAD_ONCE_INIT;

static void tid_init(void)
{
	pthread_atfork(NULL, NULL, tid_forget);
}

static inline pid_t direct_tid(void)
{
	if (unlikely(!my_tid))
		my_tid = (pid_t)syscall(SYS_gettid);
	return my_tid;
}

/* ---- opening ---- */

static bool direct_wanted(void)
{
	const char *e = getenv("SOFTVERBS_DIRECT");

	return !e || strcmp(e, "0");
}

/* Map OPEN_DIRECT's part: its memfd's bytes, or MAP_FAILED. */
static void *direct_part(struct sv_context *ctx, uint32_t part, int prot,
			 size_t *bytes)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	void *map = MAP_FAILED;
	int fd = -1;

	sv_cmd_init(&cmd, SV_CMD_OPEN_DIRECT);
	cmd.u.open_direct.part = part;
	if (!sv_conn_call(&ctx->conn, &cmd, -1, &rsp, &fd) && fd >= 0) {
		*bytes = rsp.u.open_direct.bytes;
		map = mmap(NULL, *bytes, prot, MAP_SHARED, fd, 0);
	}
	if (fd >= 0)
		close(fd);
	return map;
}

void sv_direct_open(struct sv_context *ctx)
{
	struct sv_direct *d;
	const struct sv_direct_hdr *h;
	size_t guard_bytes;

	if (!direct_wanted())
		return;
	pthread_once(&tid_once, tid_init);
	d = calloc(1, sizeof(*d));
	if (!d)
		return;
	d->map = direct_part(ctx, SV_DIRECT_PART_TABLES, PROT_READ, &d->bytes);
	if (d->map == MAP_FAILED)
		goto err_free;
	h = d->map;
	/* acquire: pairs with the daemon's release store of the magic */
	if (d->bytes < sizeof(*h) ||
	    __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SV_DIRECT_MAGIC ||
	    h->version != SV_DIRECT_VERSION || h->bytes != d->bytes ||
	    !h->qp_slots || (h->qp_slots & (h->qp_slots - 1)) ||
	    h->qp_off % 4096 || h->qp_off < sizeof(*h))
		goto err_unmap;
	guard_bytes = (size_t)h->qp_slots * sizeof(struct sv_direct_guard);
	if (h->qp_off + (size_t)h->qp_slots * sizeof(union sv_direct_qp_u) >
		    h->key_off ||
	    h->key_off + (size_t)h->key_slots *
				 sizeof(union sv_direct_key_u) > d->bytes ||
	    h->riov_off < guard_bytes || h->riov_off % 4096 ||
	    h->riov_off + (size_t)h->qp_slots *
				  sizeof(struct sv_direct_riov) > h->claim_off ||
	    h->claim_off % 4096 ||
	    h->claim_off + (size_t)h->qp_slots *
				   sizeof(struct sv_direct_claim) >
		    h->srq_off ||
	    h->srq_off % 4096 ||
	    h->srq_off + (size_t)SV_DIRECT_SRQ_SLOTS *
				 sizeof(struct sv_direct_srq) >
		    h->guard_bytes)
		goto err_unmap;
	d->gmap = direct_part(ctx, SV_DIRECT_PART_GUARDS,
			      PROT_READ | PROT_WRITE, &d->gbytes);
	if (d->gmap == MAP_FAILED)
		goto err_unmap;
	if (d->gbytes != h->guard_bytes) {
		munmap(d->gmap, d->gbytes);
		goto err_unmap;
	}
	d->hdr = h;
	d->guard = d->gmap;
	d->riov = (struct sv_direct_riov *)((char *)d->gmap + h->riov_off);
	d->claim = (struct sv_direct_claim *)((char *)d->gmap + h->claim_off);
	d->srq = (struct sv_direct_srq *)((char *)d->gmap + h->srq_off);
	d->qp = (const void *)((const char *)d->map + h->qp_off);
	d->key = (const void *)((const char *)d->map + h->key_off);
	d->qp_mask = h->qp_slots - 1;
	d->key_slots = h->key_slots;
	d->perm = h->perm;
	d->pid = getpid();
	ctx->direct = d;
	return;

err_unmap:
	munmap(d->map, d->bytes);
err_free:
	free(d);
}

void sv_direct_close(struct sv_context *ctx)
{
	struct sv_direct *d = ctx->direct;

	if (!d)
		return;
	ctx->direct = NULL;
	munmap(d->gmap, d->gbytes);
	munmap(d->map, d->bytes);
	free(d);
}

/* WRITE and READ only: never FLUSH nor ATOMIC WRITE (the daemon answers
 * those; ibv_wr_* sessions never come here anyway), nor anything else. */
uint32_t sv_direct_ops(struct sv_context *ctx, enum ibv_qp_type type)
{
	if (!ctx->direct)
		return 0;
	switch (type) {
	case IBV_QPT_RC:
		return 1u << IBV_WR_RDMA_WRITE | 1u << IBV_WR_RDMA_READ |
		       SV_DIRECT_RECV_OPS;
	case IBV_QPT_UC:
		return 1u << IBV_WR_RDMA_WRITE | SV_DIRECT_RECV_OPS;
	default:
		return 0;
	}
}

/* ---- the checks (direct_int.h) ---- */

/*
 * ---- memory both sides map (SV_DKEY_FILE) ----
 *
 * A QP keeps a few of the sealed memfds behind the keys it used mapped
 * (MR_FILE hands one out): its WRs between such MRs copy with memcpy, no
 * system call. A mapping is ours, so nothing the MR's owner does to its
 * own mappings can make a copy fault, and the file cannot shrink (sealed).
 * An entry is used only while the key's published entry is the one it was
 * made for; the guard covers the copy as it covers process_vm_writev.
 */


/* Our slot for the entry k's memory (its base NULL when it could not be
 * mapped), or NULL when there is none yet. */
static const struct sv_dmap *dmap_find(const struct sv_dcache *c,
				       const struct sv_direct_key *k)
{
	for (unsigned int i = 0; i < SV_DMAP_N; i++) {
		const struct sv_dmap *m = &c->m[i];

		if (m->key == k->key && m->addr == k->addr &&
		    m->iova == k->iova && m->length == k->length &&
		    m->gen == k->file_gen && m->key)
			return m;
	}
	return NULL;
}

/* Where the entry k's byte addr is mapped here, or NULL; and, when the
 * memory can be mapped and is not yet, ask for it (c->want). */
static uint8_t *dmap_base(struct sv_dcache *c, const struct sv_direct_key *k)
{
	const struct sv_dmap *m;

	if (!(k->flags & SV_DKEY_FILE))
		return NULL;
	m = dmap_find(c, k);
	if (!m && !c->want)
		c->want = k->key;
	return m ? m->base : NULL;
}

static void dmap_drop(struct sv_dmap *m)
{
	if (m->map)
		munmap(m->map, m->map_len);
	memset(m, 0, sizeof(*m));
}

/* The next slot to (re)use. */
static struct sv_dmap *dmap_slot(struct sv_dcache *c,
				 const struct sv_direct_key *k)
{
	struct sv_dmap *m = &c->m[c->next++ % SV_DMAP_N];

	dmap_drop(m);
	m->key = k->key;
	m->addr = k->addr;
	m->iova = k->iova;
	m->length = k->length;
	m->gen = k->file_gen;
	return m;
}

/* Map the memfd of key (outside any guard: a command to the daemon), for
 * the entry k. A slot says the outcome: a mapping, or none (base NULL: not
 * asked again while the slot stays). */
static void dmap_fill(struct sv_context *ctx, struct sv_dcache *c,
		      const struct sv_direct_key *k)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	struct sv_dmap *m;
	uint64_t off, skip;
	void *map = MAP_FAILED;
	int fd = -1;

	if (dmap_find(c, k))
		return;
	sv_cmd_init(&cmd, SV_CMD_MR_FILE);
	cmd.u.mr_file.key = k->key;
	if (!sv_conn_call(&ctx->conn, &cmd, -1, &rsp, &fd) && fd >= 0 &&
	    rsp.u.mr_file.length == k->length) {
		off = rsp.u.mr_file.offset;
		skip = off % (uint64_t)page_bytes();
		map = mmap(NULL, k->length + skip, PROT_READ | PROT_WRITE,
			   MAP_SHARED, fd, (off_t)(off - skip));
	}
	if (fd >= 0)
		close(fd);
	m = dmap_slot(c, k);
	if (map != MAP_FAILED) {
		m->map = map;
		m->map_len = k->length + skip;
		m->base = (uint8_t *)map + skip;
	}
}

int sv_direct_qp_init(struct sv_qp *qp)
{
	if (!qp->direct_ops)
		return 0;
	qp->dcache = calloc(1, sizeof(*qp->dcache));
	return qp->dcache ? 0 : -ENOMEM;
}

void sv_direct_qp_fini(struct sv_qp *qp)
{
	sv_d_peer_free(qp);
	if (!qp->dcache)
		return;
	for (unsigned int i = 0; i < SV_DMAP_N; i++)
		dmap_drop(&qp->dcache->m[i]);
	free(qp->dcache);
	qp->dcache = NULL;
}


/*
 * The checks of the daemon's requester and responder (device/loop/req.c
 * sq_run; loop/resp.c deliver, deliver_write, deliver_read;
 * exec/keymap.c sv_lkey_map, sv_rkey_map), on
 * the published entries: SV_DREF_MAX when the WR may run here as x says,
 * else the reason it goes to the daemon, which finds the same and says it
 * with its completion status. A peer of this host in RTR that took no
 * message yet sets x->est (the first WRITE establishes it: DIRECT_EST).
 */
static unsigned int check(struct sv_direct *d, struct sv_qp *qp,
			  const struct ibv_send_wr *wr, bool read, bool inl,
			  bool send, struct dwr *x)
{
	struct sv_dcache *dc = qp->dcache;
	uint32_t qpn = qp->ex.qp_base.qp_num;
	uint32_t need = send ? 0 : read ? IBV_ACCESS_REMOTE_READ :
					  IBV_ACCESS_REMOTE_WRITE;
	union sv_direct_qp_u me, peer;
	union sv_direct_key_u k;

	x->est = false;
	if (!qp_entry(d, qpn, &me) || me.e.state != IBV_QPS_RTS ||
	    (me.e.flags & (SV_DQP_LOCAL | SV_DQP_NODIRECT)) != SV_DQP_LOCAL ||
	    me.e.type != qp->ex.qp_base.qp_type)
		return SV_DREF_PEER;
	/* the peer's entry: on this host, connected to us, not withdrawn
	 * from the direct path (a fault armed for it answers at the
	 * device), and established (in RTR, not yet: the caller asks) */
	if (!qp_entry(d, me.e.dest_qpn, &peer) || peer.e.type != me.e.type ||
	    (peer.e.flags & (SV_DQP_LOCAL | SV_DQP_NODIRECT)) !=
		    SV_DQP_LOCAL ||
	    !can_receive(peer.e.state) || peer.e.dest_qpn != qpn ||
	    (peer.e.access & need) != need)
		return SV_DREF_PEER;
	x->peer_qpn = peer.e.qpn;
	x->peer_pd = peer.e.pd;
	x->peer_pid = peer.e.pid;
	if (!(peer.e.flags & SV_DQP_EST)) {
		x->est = peer.e.state == IBV_QPS_RTR;
		return SV_DREF_PEER;
	}
	if (wr->num_sge < 0 || wr->num_sge > 32 || (wr->num_sge && !wr->sg_list))
		return SV_DREF_CHECK;
	x->nl = 0;
	x->len = 0;
	x->mapped = dc != NULL;
	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];

		x->len += s->length;
		if (!s->length)
			continue;
		if (inl) {
			/* our own bytes, as the post would copy them */
			x->liov[x->nl].iov_base = (void *)(uintptr_t)s->addr;
			x->lptr[x->nl] = (uint8_t *)(uintptr_t)s->addr;
		} else {
			if (!key_entry(d, s->lkey, &k) || k.e.pd != me.e.pd ||
			    k.e.pid != d->pid ||
			    !in_range(k.e.iova, k.e.length, s->addr,
				      s->length) ||
			    (read && !(k.e.access & IBV_ACCESS_LOCAL_WRITE)))
				return SV_DREF_CHECK;
			x->liov[x->nl].iov_base =
				(void *)(uintptr_t)(k.e.addr +
						    (s->addr - k.e.iova));
			if (x->mapped) {
				uint8_t *b = dmap_base(dc, &k.e);

				x->mapped = b != NULL;
				x->lptr[x->nl] = b ? b + (s->addr - k.e.iova) :
						     NULL;
			}
		}
		x->liov[x->nl++].iov_len = s->length;
	}
	if (x->len > SV_DIRECT_MAX_MSG)
		return SV_DREF_CHECK;
	if (!x->len || send)
		return SV_DREF_MAX;
	if (!key_entry(d, wr->wr.rdma.rkey, &k) || k.e.pd != peer.e.pd ||
	    (k.e.access & need) != need || k.e.pid != peer.e.pid ||
	    !in_range(k.e.iova, k.e.length, wr->wr.rdma.remote_addr, x->len))
		return SV_DREF_CHECK;
	x->riov.iov_base = (void *)(uintptr_t)(k.e.addr +
					       (wr->wr.rdma.remote_addr -
						k.e.iova));
	x->riov.iov_len = x->len;
	x->rpid = k.e.pid;
	if (x->mapped) {
		uint8_t *b = dmap_base(dc, &k.e);

		x->mapped = b != NULL;
		x->rptr = b ? b + (wr->wr.rdma.remote_addr - k.e.iova) : NULL;
	}
	return SV_DREF_MAX;
}

/* The copy through our mappings: gather the local pieces into the remote
 * range (WRITE) or scatter it into them (READ). */
static void copy_mapped(const struct dwr *x, bool read)
{
	uint8_t *r = x->rptr;

	for (unsigned int i = 0; i < x->nl; i++) {
		size_t n = x->liov[i].iov_len;

		if (read)
			memcpy(x->lptr[i], r, n);
		else
			memcpy(r, x->lptr[i], n);
		r += n;
	}
}

/* ---- the post ---- */

/* Map the memfd of the key a WR found unmapped (once per key and QP; a
 * failure is not tried again until the cache turns over). */
static __attribute__((noinline)) void direct_want(struct sv_context *ctx,
						  struct sv_direct *d,
						  struct sv_dcache *dc)
{
	union sv_direct_key_u k;
	uint32_t key = dc->want;

	dc->want = 0;
	if (key_entry(d, key, &k) && (k.e.flags & SV_DKEY_FILE))
		dmap_fill(ctx, dc, &k.e);
}

/* A batch of WRITEs to one process whose copies need the kernel: one
 * process_vm_writev for all (partial transfers stop between iovecs, so
 * the bytes done say which WRs are). */
struct batch {
	pid_t pid;
	unsigned int nl, nr;       /* pieces in dc->bl, WRs (dc->br) */
	uint64_t bytes;
};

/*
 * The daemon's fence (sv_direct.h): the remote iovecs of our next system
 * call are in our slot of the guard table (n of them from riov; or, with
 * n 0, a plain copy is announced), then a full fence, then the epoch must
 * still be the one our guard holds. False: a revocation began since, and
 * the copy must not start (its WRs go to the daemon). True: either no
 * revocation began before our look, and its scan will see what we stored,
 * or the kernel reads the lengths it zeroed.
 */
bool sv_d_fenced(struct sv_direct *d, struct sv_direct_guard *g,
			  struct sv_direct_riov *slot, const struct iovec *riov,
			  unsigned int n, uint64_t epoch)
{
	for (unsigned int i = 0; i < n; i++) {
		__atomic_store_n(&slot->iov[i].base,
				 (uint64_t)(uintptr_t)riov[i].iov_base,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&slot->iov[i].len, (uint64_t)riov[i].iov_len,
				 __ATOMIC_RELAXED);
	}
	if (!n)
		__atomic_store_n(&g->flags, SV_DGUARD_MAPPED, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&d->hdr->epoch, __ATOMIC_RELAXED) == epoch;
}

/* Send the batch: how many of its WRs landed whole. */
static unsigned int batch_flush(struct sv_direct *d, struct sv_dcache *dc,
				struct sv_direct_guard *g,
				struct sv_direct_riov *slot, uint64_t epoch,
				struct batch *b)
{
	ssize_t got;
	uint64_t sum = 0;
	unsigned int k = 0;

	if (!b->nr || !sv_d_fenced(d, g, slot, dc->br, b->nr, epoch))
		return 0;
	got = process_vm_writev(b->pid, dc->bl, b->nl,
				(const struct iovec *)slot->iov, b->nr, 0);
	if (got >= 0 && (uint64_t)got == b->bytes) {
		k = b->nr;
	} else if (got > 0) {
		while (k < b->nr && sum + dc->br[k].iov_len <= (uint64_t)got)
			sum += dc->br[k++].iov_len;
	}
	return k;
}

/* What became of a run's first WR that did not run here (run()), and of
 * its completions. */
struct refusal {
	unsigned int why;          /* enum sv_direct_refusal */
	bool est;                  /* the peer waits for a first message */
	bool fire;                 /* they fire the CQ's arm fire_sn */
	uint32_t fire_sn;
	bool want_peer;            /* the peer's rings must be mapped */
	bool xsent;                /* SENDs went into the peer's queue, */
	bool xsol;                 /* a solicited one among them, */
	bool xlimit;               /* one took the SRQ below its limit, */
	uint32_t xprod;            /* its completion ring's producer then */
};

/* The guard: the epoch we start at, then a full fence, then the entries
 * (Dekker with the daemon's entry write, epoch increment, guard scan;
 * abi/sv_direct.h). The epoch taken. */
static uint64_t guard_take(struct sv_direct *d, const struct sv_qp *qp,
			   struct sv_direct_guard **g,
			   struct sv_direct_riov **slot)
{
	uint64_t epoch;

	*g = &d->guard[qp->ex.qp_base.qp_num & d->qp_mask];
	*slot = &d->riov[qp->ex.qp_base.qp_num & d->qp_mask];
	epoch = __atomic_load_n(&d->hdr->epoch, __ATOMIC_RELAXED);
	if (!epoch)
		epoch = 1;
	__atomic_store_n(&(*g)->tid, direct_tid(), __ATOMIC_RELAXED);
	/* release: who sees the epoch sees whose it is */
	__atomic_store_n(&(*g)->epoch, epoch, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return epoch;
}

/* A checked WR that joins no batch, run alone under the guard: a SEND into
 * the peer's receive queue, a plain copy between mapped memfds, a READ.
 * False when it did not run (r->why says). */
static bool run_alone(struct sv_direct *d, struct sv_qp *qp,
		      const struct ibv_send_wr *wr, const struct dwr *x,
		      bool read, bool recv, struct sv_direct_guard *g,
		      struct sv_direct_riov *slot, uint64_t epoch,
		      struct refusal *r, uint64_t *mapped)
{
	unsigned int why;
	ssize_t got;

	r->why = SV_DREF_FENCE;
	if (recv) {
		/* into the peer's receive queue: a system call of its own */
		why = sv_d_send(d, qp, wr, x, g, slot, epoch,
				&r->xprod, &r->xlimit, &r->want_peer);
		if (why != SV_DREF_MAX) {
			r->why = why;
			return false;
		}
		r->xsent = true;
		r->xsol |= (wr->send_flags & IBV_SEND_SOLICITED) != 0;
	} else if (x->mapped && x->len) {
		/* no fence can stop a plain copy: the daemon waits for its
		 * end */
		if (!sv_d_fenced(d, g, slot, NULL, 0, epoch))
			return false;
		copy_mapped(x, read);
		__atomic_store_n(&g->flags, 0, __ATOMIC_RELAXED);
		(*mapped)++;
	} else if (x->len) {
		/* a READ: one system call of its own */
		if (!sv_d_fenced(d, g, slot, &x->riov, 1, epoch))
			return false;
		got = process_vm_readv(x->rpid, x->liov, x->nl,
				       (const struct iovec *)slot->iov, 1, 0);
		if (got < 0 || (uint64_t)got != x->len)
			return false;
	}
	return true;
}

/* The guard let go after wrs[0 .. done) ran (lens their bytes, mapped of
 * them plain copies): the counters, and the completions of the signaled
 * ones into the CQ's private ring (the slots *held for them). */
static void run_end(struct sv_qp *qp, struct sv_cq *cq,
		    struct ibv_send_wr *const *wrs, unsigned int done,
		    const uint32_t *lens, uint64_t mapped,
		    struct sv_direct_guard *g, struct refusal *r,
		    unsigned int *held)
{
	uint64_t bytes = 0;
	bool pushed = false;

	/* a plain copy announced and not run (its fence failed) */
	if (unlikely(__atomic_load_n(&g->flags, __ATOMIC_RELAXED)))
		__atomic_store_n(&g->flags, 0, __ATOMIC_RELAXED);
	/* release: our copies end before the daemon sees the guard clear */
	__atomic_store_n(&g->epoch, 0, __ATOMIC_RELEASE);
	for (unsigned int i = 0; i < done; i++)
		bytes += lens[i];
	/* the daemon's counters add these up (one writer: this QP's poster) */
	__atomic_store_n(&g->msgs, g->msgs + done, __ATOMIC_RELAXED);
	__atomic_store_n(&g->bytes, g->bytes + bytes, __ATOMIC_RELAXED);
	if (mapped)
		__atomic_store_n(&g->mapped, g->mapped + mapped,
				 __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < done; i++) {
		const struct ibv_send_wr *wr = wrs[i];

		if (!(qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED)))
			continue;
		sv_d_cq_push(cq, qp->sq.hdr, wr->wr_id, (uint32_t)wr->opcode,
			     qp->ex.qp_base.qp_num, lens[i]);
		(*held)--;
		pushed = true;
	}
	if (pushed && cq->ex.channel)
		r->fire = sv_d_cq_arm_to_fire(cq, &r->fire_sn);
}

/*
 * Run wrs[0 .. n) here as far as they can (nothing of the QP at the
 * daemon, n at most SV_DIRECT_BATCH): how many did, a prefix; when fewer
 * than n, *r says why the next did not.
 */
static unsigned int run(struct sv_direct *d, struct sv_qp *qp,
			struct sv_cq *cq, struct ibv_send_wr *const *wrs,
			unsigned int n, struct refusal *r)
{
	struct sv_dcache *dc = qp->dcache;
	struct sv_direct_guard *g;
	struct sv_direct_riov *slot;
	struct batch b = { 0 };
	uint64_t epoch, total = 0, mapped = 0;
	unsigned int held = 0, done = 0, i;
	uint32_t lens[SV_DIRECT_BATCH];

	/* room in the CQ for the completions of the signaled WRs (the
	 * first that finds none ends the run) */
	for (i = 0; i < n; i++) {
		if (!(qp->sq_sig_all ||
		      (wrs[i]->send_flags & IBV_SEND_SIGNALED)))
			continue;
		if (!sv_d_cq_hold(cq))
			break;
		held++;
	}
	memset(r, 0, sizeof(*r));
	r->why = SV_DREF_CQ;
	n = i;
	if (!n)
		goto out;
	epoch = guard_take(d, qp, &g, &slot);
	/* [0, done) ran; a batch, when it holds WRs, holds [done, i) */
	for (i = 0; i < n; i++) {
		const struct ibv_send_wr *wr = wrs[i];
		bool read = wr->opcode == IBV_WR_RDMA_READ;
		bool inl = !read && (wr->send_flags & IBV_SEND_INLINE);
		bool send = wr->opcode == IBV_WR_SEND ||
			    wr->opcode == IBV_WR_SEND_WITH_IMM;
		bool recv = send || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
		bool ok, joins;
		unsigned int why;
		struct dwr x;

		why = check(d, qp, wr, read, inl, send, &x);
		if (why == SV_DREF_MAX && total + x.len > SV_DIRECT_MAX_MSG)
			why = SV_DREF_CHECK;
		ok = why == SV_DREF_MAX;
		/* a WRITE by system call joins the batch (of one process,
		 * with room for its pieces) */
		joins = ok && x.len && !x.mapped && !read && !recv &&
			(!b.nr || (x.rpid == b.pid && b.nr < SV_DIRECT_BATCH &&
				   b.nl + x.nl <= SV_DIRECT_BATCH_IOV));
		if (b.nr && !joins) {
			unsigned int k = batch_flush(d, dc, g, slot, epoch, &b);

			done += k;
			if (k < b.nr) {
				r->why = SV_DREF_FENCE;
				break;
			}
			memset(&b, 0, sizeof(b));
		}
		if (!ok) {
			r->why = why;
			r->est = x.est;
			break;
		}
		lens[i] = (uint32_t)x.len;
		total += x.len;
		if (joins) {
			if (!b.nr)
				b.pid = x.rpid;
			memcpy(&dc->bl[b.nl], x.liov, x.nl * sizeof(x.liov[0]));
			b.nl += x.nl;
			dc->br[b.nr++] = x.riov;
			b.bytes += x.len;
			continue;
		}
		if (!run_alone(d, qp, wr, &x, read, recv, g, slot, epoch, r,
			       &mapped))
			break;
		done = i + 1;
	}
	if (b.nr) {
		unsigned int k = batch_flush(d, dc, g, slot, epoch, &b);

		done += k;
		if (k < b.nr)
			r->why = SV_DREF_FENCE;
	}
	run_end(qp, cq, wrs, done, lens, mapped, g, r, &held);
out:
	/* the slots of WRs that go to the daemon after all */
	while (held--)
		sv_d_cq_unhold(cq);
	return done;
}

/*
 * The WQEs of the QP ahead are at the daemon: wait a bounded time for its
 * engine to finish them (each was rung for), so that a WR that had to go
 * there does not send every WR after it there too. A wait that ran out is
 * not waited again until the engine moved on.
 */
static bool wait_done(struct sv_qp *qp, const struct sv_wq_ring *hdr)
{
	uint64_t until = 0, now;
	uint32_t done = __atomic_load_n(&hdr->done, __ATOMIC_ACQUIRE);

	if (qp->dwait_gave_up && done + 1 == qp->dwait_gave_up)
		return false;
	for (unsigned int i = 0;; i++) {
		/* acquire: pairs with the engine's release store of done,
		 * after the completion, the QP's state and cq_mark */
		done = __atomic_load_n(&hdr->done, __ATOMIC_ACQUIRE);
		if (done == qp->sq.prod)
			return true;
		if (i < 256) {
			sv_cpu_relax();
			continue;
		}
		now = mono_ns();
		if (!until) {
			until = now + SV_DIRECT_WAIT_NS;
		} else if (now >= until) {
			qp->dwait_gave_up = done + 1;
			return false;
		}
		sched_yield();
	}
}

/* Could the QP's WRs go direct at all: it and its peer are QPs of this
 * host, neither withdrawn, it in RTS (a look before waiting for the
 * engine: a QP whose peer is across the wire never waits). */
static bool peer_here(struct sv_direct *d, struct sv_qp *qp)
{
	union sv_direct_qp_u me, peer;

	return qp_entry(d, qp->ex.qp_base.qp_num, &me) &&
	       me.e.state == IBV_QPS_RTS &&
	       (me.e.flags & (SV_DQP_LOCAL | SV_DQP_NODIRECT)) == SV_DQP_LOCAL &&
	       qp_entry(d, me.e.dest_qpn, &peer) &&
	       (peer.e.flags & (SV_DQP_LOCAL | SV_DQP_NODIRECT)) ==
		       SV_DQP_LOCAL;
}

/* Count n WRs sent to the daemon for reason why in the QP's guard (one
 * writer: the poster, under the SQ lock). */
static void refuse(struct sv_direct *d, struct sv_qp *qp, unsigned int why,
		   unsigned int n)
{
	struct sv_direct_guard *g =
		&d->guard[qp->ex.qp_base.qp_num & d->qp_mask];

	if (n)
		__atomic_store_n(&g->refused[why], g->refused[why] + n,
				 __ATOMIC_RELAXED);
}

/* DIRECT_EST for our peer (once per peer QPN): true when the daemon has
 * established it. */
static __attribute__((noinline)) bool ask_est(struct sv_context *ctx,
					      struct sv_qp *qp)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	union sv_direct_qp_u me;
	uint32_t qpn = qp->ex.qp_base.qp_num;

	if (!qp_entry(ctx->direct, qpn, &me) || qp->est_asked == me.e.dest_qpn)
		return false;
	qp->est_asked = me.e.dest_qpn;
	sv_cmd_init(&cmd, SV_CMD_DIRECT_EST);
	cmd.u.direct_est.qp = qp->handle;
	return !sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
}

/* Map our peer's rings (DIRECT_RECV) for a SEND: true when they are. */
static __attribute__((noinline)) bool want_peer(struct sv_context *ctx,
						struct sv_direct *d,
						struct sv_qp *qp)
{
	union sv_direct_qp_u me;

	return qp_entry(d, qp->ex.qp_base.qp_num, &me) &&
	       sv_d_peer_fill(ctx, qp, me.e.dest_qpn);
}

unsigned int sv_direct_post_many(struct sv_qp *qp,
				 struct ibv_send_wr *const *wrs,
				 unsigned int n)
{
	struct sv_context *ctx = to_sv_ctx(qp->ex.qp_base.context);
	struct sv_direct *d = ctx->direct;
	struct sv_cq *cq = to_sv_cq(qp->ex.qp_base.send_cq);
	struct sv_dcache *dc = qp->dcache;
	struct refusal r;
	unsigned int done = 0;

	if (!d || !dc || !n)
		return 0;
	if (!cq || !cq->dring) {
		/* (a CQ whose private ring could not be made) */
		refuse(d, qp, SV_DREF_CHANNEL, n);
		return 0;
	}
	if (n > SV_DIRECT_BATCH)
		n = SV_DIRECT_BATCH;
	/* nothing of ours is with the daemon: each WQE posted is done (a
	 * wait for that only where the WR could go direct then) */
	if (__atomic_load_n(&qp->sq.hdr->done, __ATOMIC_ACQUIRE) !=
	    qp->sq.prod) {
		if (!peer_here(d, qp)) {
			refuse(d, qp, SV_DREF_PEER, n);
			return 0;
		}
		if (!wait_done(qp, qp->sq.hdr)) {
			refuse(d, qp, SV_DREF_BUSY, n);
			return 0;
		}
	}
	/* the first message to a peer in RTR establishes it, and a first
	 * SEND maps the peer's rings: once each is asked, the rest run here
	 * (a run again after each; at most both) */
	for (int tries = 0;; tries++) {
		done += run(d, qp, cq, wrs + done, n - done, &r);
		if (unlikely(r.fire))
			sv_d_cq_fire(ctx, cq, r.fire_sn);
		if (r.xsent)
			sv_d_send_notify(ctx, qp, r.xprod, r.xsol, r.xlimit);
		if (done == n || tries == 2 ||
		    !((r.est && ask_est(ctx, qp)) ||
		      (r.want_peer && want_peer(ctx, d, qp))))
			break;
	}
	if (done < n) {
		refuse(d, qp, r.why, 1);
		refuse(d, qp, SV_DREF_BUSY, n - done - 1);
	}
	/* a memfd seen and not mapped yet: map it now, for the next WRs */
	if (unlikely(dc->want))
		direct_want(ctx, d, dc);
	return done;
}

int sv_direct_post(struct sv_qp *qp, const struct ibv_send_wr *wr,
		   uint32_t op, unsigned int flags)
{
	struct ibv_send_wr *const one[1] = { (struct ibv_send_wr *)wr };

	(void)op;
	(void)flags;
	return sv_direct_post_many(qp, one, 1) == 1 ? 0 : -1;
}
