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
 * kernel reads them (direct_fenced).
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

#include "abi/sv_direct.h"
#include "abi/sv_lock.h"
#include "abi/sv_op.h"
#include "verbs/sv_verbs.h"

/* The most one WQE moves directly: its copy is one system call, and a
 * revocation waits for it. */
#define SV_DIRECT_MAX_MSG (64u << 20)
/* Completions a CQ's private ring holds (at most its size) */
#define SV_DIRECT_CQ_MAX  1024u
/* How long a poster waits for the engine to finish the WQEs of its QP
 * ahead of a WR that could go direct (then it goes to the daemon too) */
#define SV_DIRECT_WAIT_NS 200000ull

/* The opcodes that take a receive WQE of the peer (send_direct) */
#define SV_DIRECT_RECV_OPS                                                   \
	(1u << IBV_WR_SEND | 1u << IBV_WR_SEND_WITH_IMM |                    \
	 1u << IBV_WR_RDMA_WRITE_WITH_IMM)

struct sv_direct {
	const struct sv_direct_hdr *hdr;
	struct sv_direct_guard *guard;     /* [qp_slots], our uid's */
	struct sv_direct_riov *riov;       /* [qp_slots], our uid's */
	const union sv_direct_qp_u *qp;    /* [qp_slots] */
	const union sv_direct_key_u *key;  /* [key_slots] */
	uint32_t qp_mask;
	uint32_t key_slots;
	struct sv_keyperm perm;            /* a copy of the header's */
	/* key index -> slot, the permutation's inverse remembered: idx << 32
	 * | slot in entry idx % 256 (a pure function, so any
	 * thread may fill it; one 64-bit store each) */
	uint64_t slot_cache[256];
	pid_t pid;
	void *map;
	size_t bytes;
	void *gmap;
	size_t gbytes;
};

_Static_assert(sizeof(struct iovec) == 16, "the riov slots are iovecs");

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
				  sizeof(struct sv_direct_riov) > h->guard_bytes)
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
static bool cq_hold(struct sv_cq *cq)
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

static void cq_unhold(struct sv_cq *cq)
{
	sv_spin_lock(&cq->dlock);
	__atomic_store_n(&cq->ring->dused, --cq->dheld, __ATOMIC_RELAXED);
	sv_spin_unlock(&cq->dlock);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The completion of a WR that ran here, in the slot it holds, stamped
 * with hdr's cq_mark: the daemon's ring past the last completion it wrote
 * for the QP (read after done; no WQE of the QP is at the daemon now, the
 * SQ lock held). A mark past the ring's producer (one left from before a
 * resize renumbered the ring) is the producer: every completion there. */
static void cq_push(struct sv_cq *cq, const struct sv_wq_ring *hdr,
		    uint64_t wr_id, uint32_t op, uint32_t qpn, uint64_t len)
{
	struct sv_cqe *e;
	uint32_t mark, prod;

	sv_spin_lock(&cq->dlock);
	mark = __atomic_load_n(&hdr->cq_mark, __ATOMIC_RELAXED);
	prod = __atomic_load_n(&cq->ring->prod, __ATOMIC_ACQUIRE);
	if ((int32_t)(prod - mark) < 0)
		mark = prod;
	cq->dstamp[cq->dprod & cq->dmask] = mark;
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
static bool cq_arm_to_fire(struct sv_cq *cq, uint32_t *sn)
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
static __attribute__((noinline)) void cq_fire(struct sv_context *ctx,
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

/* ---- the checks ---- */

static bool in_range(uint64_t base, uint64_t size, uint64_t addr, uint64_t len)
{
	return addr >= base && len <= size && addr - base <= size - len;
}

/* The published entry of QP qpn (exactly), copied consistently. */
static bool qp_entry(const struct sv_direct *d, uint32_t qpn,
		     union sv_direct_qp_u *out)
{
	const union sv_direct_qp_u *e = &d->qp[qpn & d->qp_mask];

	for (int tries = 0; tries < 4; tries++)
		if (sv_direct_read(e->w, out->w, sizeof(out->w) / 8))
			return qpn && out->e.qpn == qpn;
	return false;
}

/* The key table slot of key's index (the permutation's inverse). */
static uint32_t key_slot(struct sv_direct *d, uint32_t key)
{
	uint32_t idx = SV_KEY_INDEX(key), slot;
	uint64_t *c = &d->slot_cache[idx % 256];
	uint64_t v = __atomic_load_n(c, __ATOMIC_RELAXED);

	if ((uint32_t)(v >> 32) == idx && idx)
		return (uint32_t)v;
	slot = sv_keyperm_inv(&d->perm, idx);
	__atomic_store_n(c, (uint64_t)idx << 32 | slot, __ATOMIC_RELAXED);
	return slot;
}

/* The published entry of key (exactly: all 32 bits), copied consistently. */
static bool key_entry(struct sv_direct *d, uint32_t key,
		      union sv_direct_key_u *out)
{
	uint32_t slot = key_slot(d, key);

	if (!slot || slot >= d->key_slots)
		return false;
	for (int tries = 0; tries < 4; tries++)
		if (sv_direct_read(d->key[slot].w, out->w,
				   sizeof(out->w) / 8))
			return key && out->e.key == key;
	return false;
}

static bool can_receive(uint32_t state)
{
	return state == IBV_QPS_RTR || state == IBV_QPS_RTS ||
	       state == IBV_QPS_SQD || state == IBV_QPS_SQE;
}

/*
 * ---- SEND and RECV: the peer's receive queue ----
 *
 * A SEND (with or without immediate data) and a WRITE with immediate
 * data take the peer's head receive WQE. The peer's library keeps a
 * completion ring for its receive queue (sv_direct_rq_init) and says where
 * in its receive ring's header (struct sv_rq_xpub); we map that ring and
 * the peer's receive CQ's ring read-only (DIRECT_RECV: the device then
 * lets that queue be taken from here too), read the head WQE there, check
 * its buffers' keys as the device's responder would, and write, in one
 * process_vm_writev into the peer: the message, the completion, its stamp
 * (the receive CQ's producer counter: the device's completions of that
 * queue before ours are below it), the queue's cons + 1, the completion
 * ring's xprod + 1, and 1 into the CQ's hint. A copy that stops short
 * publishes nothing (the WQE stays the head; the WR goes to the device).
 * Nothing else takes that queue meanwhile: it is an RC or UC QP connected
 * to ours alone, whose WRs the device has all done (the SQ lock held), and
 * the device flushes it only once our guard is past its entry's change
 * (sv_direct_rq_held).
 */
struct sv_dpeer {
	uint32_t qpn;              /* the peer these map; 0: none */
	uint32_t asked;            /* the peer QPN last asked for */
	pid_t pid;
	uint32_t entries, stride, max_sge;
	uint32_t cq_entries;
	uint32_t cq_gen;           /* the receive CQ's ring mapped (xpub) */
	const struct sv_wq_ring *rq;
	const struct sv_cq_ring *cq;
	void *rq_map, *cq_map;
	size_t rq_len, cq_len;
};

/* What one direct SEND writes after the message, in the order the peer
 * reads it (the local side of the system call's last iovecs). */
struct sv_xsend {
	struct sv_cqe cqe;         /* its stamp in it (SV_XCQE_STAMP) */
	uint32_t cons;             /* then these two, one piece */
	uint32_t xprod;
	uint32_t hint;
};

static void dpeer_drop(struct sv_dpeer *p)
{
	if (p->rq_map)
		munmap(p->rq_map, p->rq_len);
	if (p->cq_map)
		munmap(p->cq_map, p->cq_len);
	p->rq_map = p->cq_map = NULL;
	p->rq = NULL;
	p->cq = NULL;
	p->qpn = 0;
}

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
#define SV_DMAP_N 8

struct sv_dmap {
	uint32_t key;              /* 0: free */
	uint64_t addr, iova, length, gen; /* the key's entry it was made for */
	uint8_t *base;             /* where the entry's byte addr is here */
	void *map;
	size_t map_len;
};

/* WRs of one list run together, and the local pieces of a batch of
 * WRITEs (sv_direct_post_many) */
#define SV_DIRECT_BATCH     64
#define SV_DIRECT_BATCH_IOV 256

struct sv_dcache {
	struct sv_dmap m[SV_DMAP_N];
	uint32_t next;             /* the next one to replace */
	uint32_t want;             /* a key to map after the WR (0: none) */
	/* a batch's iovecs: local pieces, and a remote range per WR */
	struct iovec bl[SV_DIRECT_BATCH_IOV];
	struct iovec br[SV_DIRECT_BATCH];
	/* what a direct SEND writes after its message (send_direct) */
	struct sv_xsend xs;
};

static long page_bytes(void)
{
	static long pg;

	if (!pg)
		pg = sysconf(_SC_PAGESIZE);
	return pg;
}

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
	if (qp->dpeer) {
		dpeer_drop(qp->dpeer);
		free(qp->dpeer);
		qp->dpeer = NULL;
	}
	if (!qp->dcache)
		return;
	for (unsigned int i = 0; i < SV_DMAP_N; i++)
		dmap_drop(&qp->dcache->m[i]);
	free(qp->dcache);
	qp->dcache = NULL;
}

/* What one WR needs: the local iovecs, the remote range and the peer; and
 * where both are mapped here, when they are (plain copies). */
struct dwr {
	struct iovec liov[32];
	unsigned int nl;
	uint64_t len;
	struct iovec riov;
	pid_t rpid;
	bool mapped;               /* every side below is set */
	uint8_t *lptr[32];         /* the local pieces in our mappings */
	uint8_t *rptr;             /* the remote range in ours */
	bool est;                  /* refused: the peer is in RTR, and no
				    * message has established it yet */
	uint32_t peer_qpn;         /* the peer's entry, as checked */
	uint32_t peer_pd;
	pid_t peer_pid;
};

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
static bool direct_fenced(struct sv_direct *d, struct sv_direct_guard *g,
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

	if (!b->nr || !direct_fenced(d, g, slot, dc->br, b->nr, epoch))
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

/* ---- SEND and RECV (above): the copy ---- */

/* DIRECT_RECV's part, mapped read-only: where its header is, or NULL. */
static const void *dpeer_part(struct sv_context *ctx, struct sv_qp *qp,
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
		m = mmap(NULL, *len, PROT_READ, MAP_SHARED, fd,
			 (off_t)(o->offset - skip));
	}
	if (fd >= 0)
		close(fd);
	if (m == MAP_FAILED)
		return NULL;
	*map = m;
	return (const char *)m + skip;
}

/* Map the receive ring and CQ ring of our peer (outside any guard, once
 * per peer): true when they are. */
static __attribute__((noinline)) bool dpeer_fill(struct sv_context *ctx,
						 struct sv_qp *qp,
						 uint32_t peer_qpn)
{
	struct sv_dpeer *p = qp->dpeer;
	struct sv_rsp_direct_recv o, oc;

	if (!p) {
		p = qp->dpeer = calloc(1, sizeof(*p));
		if (!p)
			return false;
	}
	if (p->asked == peer_qpn && !p->qpn)
		return false;      /* refused for this peer: not again */
	dpeer_drop(p);
	p->asked = peer_qpn;
	p->rq = dpeer_part(ctx, qp, SV_DRECV_RQ, &o, &p->rq_map, &p->rq_len);
	if (!p->rq)
		return false;
	/* (read before the CQ's ring: a move after it maps it again) */
	p->cq_gen = __atomic_load_n(&((const struct sv_rq_xpub *)(const void *)
				      p->rq->mb)->cq_gen, __ATOMIC_ACQUIRE);
	p->cq = dpeer_part(ctx, qp, SV_DRECV_CQ, &oc, &p->cq_map, &p->cq_len);
	if (!p->cq || !o.entries || (o.entries & (o.entries - 1)) ||
	    o.bytes < sv_wq_ring_bytes(o.entries, o.stride) ||
	    !oc.entries || (oc.entries & (oc.entries - 1))) {
		dpeer_drop(p);
		return false;
	}
	p->pid = o.pid;
	p->entries = o.entries;
	p->stride = o.stride;
	p->max_sge = o.max_sge;
	p->cq_entries = oc.entries;
	p->qpn = peer_qpn;
	return true;
}

/*
 * One SEND-like WR (checked, x) into the peer's head receive WQE, under
 * our guard: SV_DREF_MAX when it landed, else the reason it goes to the
 * device (which finds the same: no WQE is an RNR, a WQE too short a
 * length error, a bad key an access error). *want: the peer's rings must
 * be mapped first.
 */
static unsigned int send_direct(struct sv_direct *d, struct sv_qp *qp,
				const struct ibv_send_wr *wr,
				const struct dwr *x, struct sv_direct_guard *g,
				struct sv_direct_riov *slot, uint64_t epoch,
				struct sv_xsend *xs, uint32_t *xprod_out,
				bool *want)
{
	const struct sv_dpeer *p = qp->dpeer;
	const struct sv_wq_ring *rq;
	const struct sv_rq_xpub *xp;
	const uint8_t *wqe;
	struct sv_recv_wqe h;
	struct sv_wqe_sge sge[SV_DIRECT_BATCH - 8];
	struct iovec riov[SV_DIRECT_BATCH], liov[32 + 5];
	union sv_direct_key_u k;
	uint64_t xring, self, hint, left = x->len, total;
	uint32_t prod, cons, xprod, xcons, xent, cp, cc, used;
	unsigned int nr = 0, nl;
	ssize_t got;
	bool imm_write = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	if (!p || p->qpn != x->peer_qpn || p->pid != x->peer_pid ||
	    __atomic_load_n(&p->cq->entries, __ATOMIC_RELAXED) !=
		    p->cq_entries ||
	    __atomic_load_n(&p->rq->entries, __ATOMIC_RELAXED) != p->entries) {
		*want = true;
		return SV_DREF_PEER;
	}
	rq = p->rq;
	xp = (const struct sv_rq_xpub *)(const void *)rq->mb;
	if (__atomic_load_n(&xp->cq_gen, __ATOMIC_ACQUIRE) != p->cq_gen) {
		*want = true;      /* the receive CQ's ring moved */
		return SV_DREF_PEER;
	}
	xent = __atomic_load_n(&xp->xentries, __ATOMIC_RELAXED);
	xring = __atomic_load_n(&xp->xring, __ATOMIC_RELAXED);
	self = __atomic_load_n(&xp->self, __ATOMIC_RELAXED);
	hint = __atomic_load_n(&xp->hint, __ATOMIC_RELAXED);
	if (!xent || (xent & (xent - 1)) ||
	    __atomic_load_n(&xp->qpn, __ATOMIC_RELAXED) != p->qpn ||
	    !xring || !self || !hint)
		return SV_DREF_PEER;
	/* acquire: pairs with the owner's release store of prod after the
	 * WQE */
	prod = __atomic_load_n(&rq->prod, __ATOMIC_ACQUIRE);
	cons = __atomic_load_n(&rq->cons, __ATOMIC_RELAXED);
	/* none posted: the device's RNR NAK and retries */
	if (prod == cons || prod - cons > p->entries)
		return SV_DREF_PEER;
	/* room in the completion ring, and in the receive CQ as a whole
	 * (else the device overruns it where a NIC would) */
	xprod = __atomic_load_n(&rq->xprod, __ATOMIC_RELAXED);
	xcons = __atomic_load_n(&rq->xcons, __ATOMIC_ACQUIRE);
	if (xprod - xcons >= xent)
		return SV_DREF_CQ;
	cp = __atomic_load_n(&p->cq->prod, __ATOMIC_ACQUIRE);
	cc = __atomic_load_n(&p->cq->cons, __ATOMIC_ACQUIRE);
	used = cp - cc + __atomic_load_n(&p->cq->dused, __ATOMIC_RELAXED) +
	       (xprod - xcons);
	if (cp - cc > p->cq_entries || used >= p->cq_entries)
		return SV_DREF_CQ;
	/* the head WQE, copied before any field is used */
	wqe = (const uint8_t *)rq + SV_RING_HDR_BYTES +
	      (size_t)(cons & (p->entries - 1)) * p->stride;
	memcpy(&h, wqe, sizeof(h));
	if (h.num_sge > p->max_sge || h.num_sge > SV_DIRECT_BATCH - 8 ||
	    SV_RECV_WQE_HDR + (size_t)h.num_sge * sizeof(sge[0]) > p->stride)
		return SV_DREF_CHECK;
	memcpy(sge, wqe + SV_RECV_WQE_HDR, h.num_sge * sizeof(sge[0]));
	if (imm_write) {
		/* the bytes go where the rkey says; the WQE only completes */
		if (x->len)
			riov[nr++] = x->riov;
		left = 0;
	}
	/* the receive buffers, as the device's responder checks them: keys
	 * of the peer's PD and process, LOCAL_WRITE, in range */
	for (uint32_t i = 0; i < h.num_sge && left; i++) {
		uint64_t n = sge[i].length < left ? sge[i].length : left;

		if (!n)
			continue;
		if (!key_entry(d, sge[i].lkey, &k) || k.e.pd != x->peer_pd ||
		    k.e.pid != x->peer_pid ||
		    !(k.e.access & IBV_ACCESS_LOCAL_WRITE) ||
		    !in_range(k.e.iova, k.e.length, sge[i].addr, n))
			return SV_DREF_CHECK;
		riov[nr].iov_base = (void *)(uintptr_t)(k.e.addr +
							(sge[i].addr -
							 k.e.iova));
		riov[nr++].iov_len = n;
		left -= n;
	}
	if (left)
		return SV_DREF_CHECK;      /* longer than the buffers */
	/* the completion, as the device's responder writes it */
	memset(xs, 0, sizeof(*xs));
	xs->cqe.wr_id = h.wr_id;
	xs->cqe.status = IBV_WC_SUCCESS;
	xs->cqe.opcode = imm_write ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	xs->cqe.byte_len = (uint32_t)x->len;
	xs->cqe.qp_num = p->qpn;
	xs->cqe.src_qp = qp->ex.qp_base.qp_num;
	if (wr->opcode != IBV_WR_SEND) {
		xs->cqe.imm_data = wr->imm_data;
		xs->cqe.wc_flags = IBV_WC_WITH_IMM;
	}
	xs->cqe.sl = qp->dsl;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		xs->cqe.dev_flags = SV_CQE_F_SOLICITED;
	xs->cqe.timestamp = mono_ns();
	SV_XCQE_STAMP(&xs->cqe) = cp;
	xs->cons = cons + 1;
	xs->xprod = xprod + 1;
	xs->hint = 1;
	riov[nr].iov_base = (void *)(uintptr_t)(xring + (uint64_t)(xprod &
						(xent - 1)) * sizeof(xs->cqe));
	riov[nr++].iov_len = sizeof(xs->cqe);
	riov[nr].iov_base = (void *)(uintptr_t)(self +
				offsetof(struct sv_wq_ring, cons));
	riov[nr++].iov_len = 8;            /* cons, xprod */
	riov[nr].iov_base = (void *)(uintptr_t)hint;
	riov[nr++].iov_len = 4;
	nl = x->nl;
	memcpy(liov, x->liov, nl * sizeof(liov[0]));
	liov[nl].iov_base = &xs->cqe;
	liov[nl++].iov_len = sizeof(xs->cqe);
	liov[nl].iov_base = &xs->cons;
	liov[nl++].iov_len = 8;
	liov[nl].iov_base = &xs->hint;
	liov[nl++].iov_len = 4;
	total = x->len + sizeof(xs->cqe) + 12;
	if (!direct_fenced(d, g, slot, riov, nr, epoch))
		return SV_DREF_FENCE;
	got = process_vm_writev(x->peer_pid, liov, nl,
				(const struct iovec *)slot->iov, nr, 0);
	if (got < 0 || (uint64_t)got != total)
		return SV_DREF_FENCE;
	*xprod_out = xprod + 1;
	return SV_DREF_MAX;
}

/* After direct SENDs (outside the guard): the peer's receive CQ, armed,
 * is fired by them as the device's completions would fire it. The fence:
 * Dekker with the peer's ibv_req_notify_cq (store arm_sn, fence, look at
 * its completion rings). */
static __attribute__((noinline)) void
send_notify(struct sv_context *ctx, struct sv_qp *qp, uint32_t xprod,
	    bool solicited)
{
	const struct sv_dpeer *p = qp->dpeer;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	uint32_t sn, fired, flags;

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

/* ---- the receive side: our completion rings ---- */

void sv_direct_rq_init(struct sv_qp *qp)
{
	struct ibv_qp *ibqp = &qp->ex.qp_base;
	struct sv_context *ctx = to_sv_ctx(ibqp->context);
	struct sv_cq *cq = ibqp->recv_cq ? to_sv_cq(ibqp->recv_cq) : NULL;
	struct sv_rq_xpub *xp;
	uint32_t n = qp->rq.entries;

	if (!ctx->direct || ibqp->srq || !cq || !cq->dring || !n ||
	    (n & (n - 1)) || qp->rq.hdr == NULL ||
	    (ibqp->qp_type != IBV_QPT_RC && ibqp->qp_type != IBV_QPT_UC))
		return;
	qp->xring = calloc(n, sizeof(*qp->xring));
	if (!qp->xring)
		return;
	qp->xmask = n - 1;
	qp->xcons = 0;
	xp = sv_rq_xpub_of(qp->rq.hdr);
	xp->self = (uint64_t)(uintptr_t)qp->rq.hdr;
	xp->xring = (uint64_t)(uintptr_t)qp->xring;
	xp->hint = (uint64_t)(uintptr_t)&cq->xhint;
	xp->qpn = ibqp->qp_num;
	/* release: a sender that reads xentries reads the rest */
	__atomic_store_n(&xp->xentries, n, __ATOMIC_RELEASE);
	sv_cq_xadd(cq, qp);
}

void sv_direct_cq_moved(struct sv_cq *cq)
{
	for (struct sv_qp *qp = cq->xqps; qp; qp = qp->xnext) {
		struct sv_rq_xpub *xp = sv_rq_xpub_of(qp->rq.hdr);

		__atomic_store_n(&xp->cq_gen, xp->cq_gen + 1,
				 __ATOMIC_RELEASE);
	}
}

void sv_direct_rq_clean(struct sv_qp *qp)
{
	struct sv_wq_ring *hdr = qp->rq.hdr;

	if (!qp->xring)
		return;
	/* no sender is inside (the device waited for its guard when the QP
	 * left its state): what it left is dropped */
	qp->xcons = __atomic_load_n(&hdr->xprod, __ATOMIC_ACQUIRE);
	__atomic_store_n(&hdr->xcons, qp->xcons, __ATOMIC_RELEASE);
}

void sv_direct_rq_fini(struct sv_qp *qp)
{
	struct ibv_qp *ibqp = &qp->ex.qp_base;
	struct sv_cq *cq;

	if (!qp->xring)
		return;
	cq = to_sv_cq(ibqp->recv_cq);
	sv_cq_xdel(cq, qp);
	free(qp->xring);
	qp->xring = NULL;
}

/*
 * The completions senders put in the completion rings of cq's QPs, into
 * its private ring, in each ring's order, with their stamps: from there
 * poll merges them with the device's ring as it merges our own direct
 * completions. The hint first (exchanged: a sender that publishes after
 * our look sets it again). Completions an event announced
 * (DIRECT_NOTIFY's xannounced) count as announced here too. CQ lock held.
 */
void sv_direct_xdrain(struct sv_cq *cq)
{
	uint32_t prod;
	bool more = false;

	if (!__atomic_exchange_n(&cq->xhint, 0, __ATOMIC_SEQ_CST))
		return;
	sv_spin_lock(&cq->dlock);
	prod = __atomic_load_n(&cq->ring->prod, __ATOMIC_ACQUIRE);
	for (struct sv_qp *qp = cq->xqps; qp; qp = qp->xnext) {
		struct sv_wq_ring *hdr = qp->rq.hdr;
		uint32_t xp = __atomic_load_n(&hdr->xprod, __ATOMIC_ACQUIRE);
		uint32_t ann = __atomic_load_n(&hdr->xannounced,
					       __ATOMIC_ACQUIRE);
		uint32_t c = qp->xcons;

		if (xp - c > qp->xmask + 1)
			xp = c + qp->xmask + 1;    /* never trust it */
		for (; c != xp; c++) {
			uint32_t to = cq->dprod & cq->dmask, st;

			if (cq->dheld > cq->dmask) {
				more = true;
				break;
			}
			cq->dring[to] = qp->xring[c & qp->xmask];
			st = SV_XCQE_STAMP(&cq->dring[to]);
			cq->dring[to].tm_tag = 0;
			/* it is this QP's, whatever the sender said */
			cq->dring[to].qp_num = qp->ex.qp_base.qp_num;
			if ((int32_t)(prod - st) < 0)
				st = prod;
			cq->dstamp[to] = st;
			if (cq->dannounced == cq->dprod &&
			    (int32_t)(ann - c) > 0)
				cq->dannounced = cq->dprod + 1;
			cq->dheld++;
			/* release: the CQE before the counter */
			__atomic_store_n(&cq->dprod, cq->dprod + 1,
					 __ATOMIC_RELEASE);
		}
		if (c != qp->xcons) {
			qp->xcons = c;
			/* release: the slots are read before a sender reuses
			 * them */
			__atomic_store_n(&hdr->xcons, c, __ATOMIC_RELEASE);
		}
	}
	__atomic_store_n(&cq->ring->dused, cq->dheld, __ATOMIC_RELAXED);
	if (more)
		__atomic_store_n(&cq->xhint, 1, __ATOMIC_RELAXED);
	sv_spin_unlock(&cq->dlock);
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
	uint32_t xprod;            /* its completion ring's producer then */
};

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
	struct sv_wq_ring *hdr = qp->sq.hdr;
	struct sv_direct_guard *g;
	struct sv_direct_riov *slot;
	struct batch b = { 0 };
	uint64_t epoch, total = 0, bytes = 0, mapped = 0;
	unsigned int held = 0, done = 0, i;
	uint32_t lens[SV_DIRECT_BATCH];
	bool sig_all = qp->sq_sig_all, pushed = false;

	/* room in the CQ for the completions of the signaled WRs (the
	 * first that finds none ends the run) */
	for (i = 0; i < n; i++) {
		if (!(sig_all || (wrs[i]->send_flags & IBV_SEND_SIGNALED)))
			continue;
		if (!cq_hold(cq))
			break;
		held++;
	}
	r->why = SV_DREF_CQ;
	r->est = false;
	r->fire = false;
	r->want_peer = false;
	r->xsent = false;
	r->xsol = false;
	n = i;
	if (!n)
		goto out;
	/* The guard: the epoch we start at, then a full fence, then the
	 * entries (Dekker with the daemon's entry write, epoch increment,
	 * guard scan; abi/sv_direct.h). */
	g = &d->guard[qp->ex.qp_base.qp_num & d->qp_mask];
	slot = &d->riov[qp->ex.qp_base.qp_num & d->qp_mask];
	epoch = __atomic_load_n(&d->hdr->epoch, __ATOMIC_RELAXED);
	if (!epoch)
		epoch = 1;
	__atomic_store_n(&g->tid, direct_tid(), __ATOMIC_RELAXED);
	/* release: who sees the epoch sees whose it is */
	__atomic_store_n(&g->epoch, epoch, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
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
		r->why = SV_DREF_FENCE;
		if (recv) {
			/* into the peer's receive queue: a system call of
			 * its own */
			why = send_direct(d, qp, wr, &x, g, slot, epoch,
					  &dc->xs, &r->xprod, &r->want_peer);
			if (why != SV_DREF_MAX) {
				r->why = why;
				break;
			}
			r->xsent = true;
			r->xsol |= (wr->send_flags & IBV_SEND_SOLICITED) != 0;
		} else if (x.mapped && x.len) {
			/* no fence can stop a plain copy: the daemon waits
			 * for its end */
			if (!direct_fenced(d, g, slot, NULL, 0, epoch))
				break;
			copy_mapped(&x, read);
			__atomic_store_n(&g->flags, 0, __ATOMIC_RELAXED);
			mapped++;
		} else if (x.len) {
			/* a READ: one system call of its own */
			ssize_t got;

			if (!direct_fenced(d, g, slot, &x.riov, 1, epoch))
				break;
			got = process_vm_readv(x.rpid, x.liov, x.nl,
					       (const struct iovec *)slot->iov,
					       1, 0);
			if (got < 0 || (uint64_t)got != x.len)
				break;
		}
		done = i + 1;
	}
	if (b.nr) {
		unsigned int k = batch_flush(d, dc, g, slot, epoch, &b);

		done += k;
		if (k < b.nr)
			r->why = SV_DREF_FENCE;
	}
	/* a plain copy announced and not run (its fence failed) */
	if (unlikely(__atomic_load_n(&g->flags, __ATOMIC_RELAXED)))
		__atomic_store_n(&g->flags, 0, __ATOMIC_RELAXED);
	/* release: our copies end before the daemon sees the guard clear */
	__atomic_store_n(&g->epoch, 0, __ATOMIC_RELEASE);
	for (i = 0; i < done; i++)
		bytes += lens[i];
	/* the daemon's counters add these up (one writer: this QP's poster) */
	__atomic_store_n(&g->msgs, g->msgs + done, __ATOMIC_RELAXED);
	__atomic_store_n(&g->bytes, g->bytes + bytes, __ATOMIC_RELAXED);
	if (mapped)
		__atomic_store_n(&g->mapped, g->mapped + mapped,
				 __ATOMIC_RELAXED);
	for (i = 0; i < done; i++) {
		const struct ibv_send_wr *wr = wrs[i];

		if (!(sig_all || (wr->send_flags & IBV_SEND_SIGNALED)))
			continue;
		cq_push(cq, hdr, wr->wr_id, (uint32_t)wr->opcode,
			qp->ex.qp_base.qp_num, lens[i]);
		held--;
		pushed = true;
	}
	if (pushed && cq->ex.channel)
		r->fire = cq_arm_to_fire(cq, &r->fire_sn);
out:
	/* the slots of WRs that go to the daemon after all */
	while (held--)
		cq_unhold(cq);
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

/* What a run leaves to do outside its guard: fire our CQ's arm, the
 * peer's receive CQ's. */
static inline void after_run(struct sv_context *ctx, struct sv_qp *qp,
			     struct sv_cq *cq, const struct refusal *r)
{
	if (unlikely(r->fire))
		cq_fire(ctx, cq, r->fire_sn);
	if (r->xsent)
		send_notify(ctx, qp, r->xprod, r->xsol);
}

/* Map our peer's rings (DIRECT_RECV) for a SEND: true when they are. */
static __attribute__((noinline)) bool want_peer(struct sv_context *ctx,
						struct sv_direct *d,
						struct sv_qp *qp)
{
	union sv_direct_qp_u me;

	return qp_entry(d, qp->ex.qp_base.qp_num, &me) &&
	       dpeer_fill(ctx, qp, me.e.dest_qpn);
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
	unsigned int done;

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
	done = run(d, qp, cq, wrs, n, &r);
	after_run(ctx, qp, cq, &r);
	/* the first message to a peer in RTR establishes it: once asked,
	 * the rest run here; and a first SEND maps the peer's rings */
	if (done < n && ((r.est && ask_est(ctx, qp)) ||
			 (r.want_peer && want_peer(ctx, d, qp)))) {
		done += run(d, qp, cq, wrs + done, n - done, &r);
		after_run(ctx, qp, cq, &r);
		if (done < n && r.want_peer && want_peer(ctx, d, qp)) {
			done += run(d, qp, cq, wrs + done, n - done, &r);
			after_run(ctx, qp, cq, &r);
		}
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
