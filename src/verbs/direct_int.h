/* SPDX-License-Identifier: MIT */
/*
 * The direct path inside the library (docs/DESIGN.md "The direct path"),
 * what its three files share: direct.c (opening, the checks, WRITE and READ,
 * the post), direct_cq.c (a CQ's private ring, a receive queue's completion
 * ring) and direct_send.c (SEND and RECV: the peer's receive queue).
 */
#ifndef SV_VERBS_DIRECT_INT_H
#define SV_VERBS_DIRECT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
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

/* The completions a completion ring of a QP on an SRQ holds at most
 * (direct_cq.c) */
#define SV_DIRECT_XRING_MAX 4096u

/* How often a direct SEND into an SRQ looks again at its head when
 * another taker had it (or the device holds it) before it goes to the
 * device too */
#define SV_DIRECT_CLAIM_TRIES 16u

/* The opcodes that take a receive WQE of the peer (sv_d_send) */
#define SV_DIRECT_RECV_OPS                                                   \
	(1u << IBV_WR_SEND | 1u << IBV_WR_SEND_WITH_IMM |                    \
	 1u << IBV_WR_RDMA_WRITE_WITH_IMM)

struct sv_direct {
	const struct sv_direct_hdr *hdr;
	struct sv_direct_guard *guard;     /* [qp_slots], our uid's */
	struct sv_direct_riov *riov;       /* [qp_slots], our uid's */
	struct sv_direct_claim *claim;     /* [qp_slots], our uid's */
	struct sv_direct_srq *srq;         /* [SV_DIRECT_SRQ_SLOTS], ours */
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
	/* what a direct SEND writes after its message (sv_d_send) */
};

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

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline long page_bytes(void)
{
	static long pg;

	if (!pg)
		pg = sysconf(_SC_PAGESIZE);
	return pg;
}

static inline bool in_range(uint64_t base, uint64_t size, uint64_t addr,
			    uint64_t len)
{
	return addr >= base && len <= size && addr - base <= size - len;
}

/* The published entry of QP qpn (exactly), copied consistently. */
static inline bool qp_entry(const struct sv_direct *d, uint32_t qpn,
		     union sv_direct_qp_u *out)
{
	const union sv_direct_qp_u *e = &d->qp[qpn & d->qp_mask];

	for (int tries = 0; tries < 4; tries++)
		if (sv_direct_read(e->w, out->w, sizeof(out->w) / 8))
			return qpn && out->e.qpn == qpn;
	return false;
}

/* The key table slot of key's index (the permutation's inverse). */
static inline uint32_t key_slot(struct sv_direct *d, uint32_t key)
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
static inline bool key_entry(struct sv_direct *d, uint32_t key,
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

static inline bool can_receive(uint32_t state)
{
	return state == IBV_QPS_RTR || state == IBV_QPS_RTS ||
	       state == IBV_QPS_SQD || state == IBV_QPS_SQE;
}

/* direct.c: the daemon's fence before a copy (n remote iovecs of riov in
 * our guard slot; n 0: a plain copy announced) */
bool sv_d_fenced(struct sv_direct *d, struct sv_direct_guard *g,
		 struct sv_direct_riov *slot, const struct iovec *riov,
		 unsigned int n, uint64_t epoch);

/* direct_cq.c: a CQ's private ring, for the poster */
bool sv_d_cq_hold(struct sv_cq *cq);
void sv_d_cq_unhold(struct sv_cq *cq);
void sv_d_cq_push(struct sv_cq *cq, const struct sv_wq_ring *hdr,
		  uint64_t wr_id, uint32_t op, uint32_t qpn, uint64_t len);
bool sv_d_cq_arm_to_fire(struct sv_cq *cq, uint32_t *sn);
void sv_d_cq_fire(struct sv_context *ctx, struct sv_cq *cq, uint32_t sn);

/* direct_send.c: SEND and RECV, the sender's side */
unsigned int sv_d_send(struct sv_direct *d, struct sv_qp *qp,
		       const struct ibv_send_wr *wr, const struct dwr *x,
		       struct sv_direct_guard *g, struct sv_direct_riov *slot,
		       uint64_t epoch,
		       uint32_t *xprod_out, bool *limit, bool *want);
void sv_d_send_notify(struct sv_context *ctx, struct sv_qp *qp,
		      uint32_t xprod, bool solicited, bool limit);
bool sv_d_peer_fill(struct sv_context *ctx, struct sv_qp *qp,
		    uint32_t peer_qpn);
void sv_d_peer_free(struct sv_qp *qp);

#endif /* SV_VERBS_DIRECT_INT_H */
