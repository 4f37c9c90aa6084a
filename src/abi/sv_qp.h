/* SPDX-License-Identifier: MIT */
/*
 * Work-queue rings and doorbell pages: one definition for the library and
 * the daemon.
 *
 * A QP's memfd (created, sized and sealed by the daemon) holds its send ring
 * and, unless the QP uses an SRQ, its receive ring; an SRQ's memfd holds one
 * receive ring. Each ring is a 4 KiB header page (struct sv_wq_ring) followed
 * by a power-of-two array of fixed-size slots; the byte offset of each ring
 * in the memfd and its slot size come in the create response.
 *
 * The library is the producer: it writes a WQE into slot (prod & (entries-1))
 * and then publishes prod + 1 with a release store. The daemon is the
 * consumer: it reads prod with an acquire load, COPIES the slot into private
 * memory before it looks at any field (the client can still write the ring),
 * validates the copy, and publishes cons with a release store once the slot
 * may be reused. Free-running uint32_t counters; prod - cons > entries means
 * a corrupt ring, and the QP goes to the error state.
 *
 * The send ring's mailbox (LOW_LATENCY and FORCE_LOW_LATENCY QPs): the
 * library-written part of the header is two cache lines, prod's and the
 * next, and they also hold a copy of one small send WQE (the 64-byte header
 * and up to SV_WQ_MB_BODY bytes of body: one SGE, or up to 16 inline bytes),
 * so that the engine, which reads prod's line anyway, finds the WQE there
 * instead of fetching the slot's lines. The slot is written all the same and
 * stays the truth; the mailbox is a copy that may be used when it provably
 * holds the head WQE. Protocol (a seqlock; plain stores, each side's order
 * as written):
 *   library, one WQE numbered n (= prod before the post), after the slot:
 *     mb_seq = 0; release fence; mb = header + body; mb_seq = n + 1
 *     (release); then the release store of prod = n + 1 as always.
 *     Posting that does not fill the mailbox (a list) sets mb_seq = 0 once,
 *     so that a stale copy never outlives 2^32 WQEs.
 *   engine, head WQE cons: s = mb_seq (after its acquire load of prod,
 *     which made WQE cons's copy visible); if s == cons + 1 and s != 0: copy
 *     the mailbox, acquire fence, and use the copy only if mb_seq still
 *     reads s (else the library was rewriting it for a later WQE: the slot).
 * n + 1 == 0 (once every 2^32 WQEs) reads as "no mailbox": the slot. The
 * copy is validated exactly as a slot's, with a body of SV_WQ_MB_BODY bytes:
 * a mailbox WQE that claims more is refused like a malformed slot. A client
 * that writes a mailbox unlike its slot only changes what its own QP runs.
 * Receive rings have the same header; their mailbox is unused (mb_seq 0).
 *
 * Doorbells: the daemon's engine threads spin briefly on the rings they own,
 * then sleep on a futex in their doorbell page. A poster that finds
 * `sleeping` set bumps `seq` and wakes the futex; that FUTEX_WAKE is the only
 * system call on the post path.
 */
#ifndef SV_ABI_QP_H
#define SV_ABI_QP_H

#include <stddef.h>
#include <stdint.h>

#include "abi/sv_ring.h" /* SV_RING_HDR_BYTES, SV_CACHELINE */

/* The send ring's mailbox: a WQE header and this much body. */
#define SV_WQ_MB_BODY  16u
#define SV_WQ_MB_BYTES 80u         /* SV_SEND_WQE_HDR + SV_WQ_MB_BODY */

/*
 * A receive ring's direct side (docs/DESIGN.md "The direct path": SEND
 * and RECV between processes of one host). The owner of an RC or UC QP
 * with a receive queue of its own says here, in the receive ring's header,
 * in the bytes a send ring's mailbox takes (unused in a receive ring),
 * once, before the QP leaves RESET, which QP it is and where the header is
 * in its own memory; a QP on a basic SRQ says it in its send ring's header
 * (sxpub). Every address here is the owner's own claim about its own
 * memory; the device never reads them. The completions that senders of
 * this host write for it are in its completion side (struct sv_xside).
 */
struct sv_rq_xpub {
	uint64_t self;             /* the owner's address of this header */
	uint32_t cq_gen;           /* bumped when the receive CQ's ring moved
				    * (ibv_resize_cq): map it again */
	uint32_t qpn;              /* the QP whose ring this is */
};

/*
 * A receiving QP's completion side: a memfd of its own per connection,
 * which the device makes (sealed) when an RC or UC QP with a direct
 * receive side enters RTR, and hands to its owner with MODIFY_QP's
 * response and, read-write, to its peer's process (DIRECT_RECV part
 * SV_DRECV_XSIDE, only where any process of the uid could write into the
 * owner anyway). A sender of this host writes, for one SEND, the message
 * into the head WQE's buffers (one process_vm_writev), then the
 * completion into ring[xprod % xentries] with plain stores (its stamp, see
 * SV_XCQE_STAMP), then publishes it by moving word from {xprod, 0} to
 * {xprod + 1, 0} with a compare-and-swap (release). On a receive queue of
 * its own, xprod also counts the WQEs that senders took: its consumer
 * counter is the ring header's xbase (the device's takes) + xprod. The
 * device closes the side (SV_XSIDE_CLOSED: no CAS succeeds after) before it
 * flushes the queue, when the QP leaves for RESET, and when it adopts a
 * stopped or dead sender's claim; a sender stopped for ever after its copy
 * then publishes nothing, and its late stores land in a memfd that no other
 * QP ever uses. A side is never reopened: the next connection gets a new
 * one.
 */
struct sv_xside {
	uint64_t word;             /* xprod | flags << 32 (SV_XSIDE_*) */
	uint8_t pad0[SV_CACHELINE - 8];
	/* written by the device before it hands the side out */
	uint32_t xentries;         /* completions ring holds, a power of two */
	uint32_t qpn;              /* the QP whose side this is */
	uint8_t pad1[SV_CACHELINE - 8];
	struct sv_cqe ring[];      /* [xentries] */
};

#define SV_XSIDE_CLOSED 1u         /* flags: the device closed the side */
/* The most completions a side on an SRQ holds for its CQ's sake. */
#define SV_XSIDE_MAX 4096u

static inline uint32_t sv_xside_prod(uint64_t w)
{
	return (uint32_t)w;
}

static inline size_t sv_xside_bytes(uint32_t xentries)
{
	return sizeof(struct sv_xside) +
	       (size_t)xentries * sizeof(struct sv_cqe);
}

/* Send or receive ring header (4 KiB page, counters on their own lines). */
struct sv_wq_ring {
	/* written by the library (two cache lines) */
	uint32_t prod;             /* WQEs posted */
	uint32_t mb_seq;           /* the WQE number (prod value before the
				    * post) the mailbox holds + 1; 0 none */
	uint8_t mb[SV_WQ_MB_BYTES]; /* send ring: a copy of that WQE's
				    * header and body (see above) */
	uint8_t pad0[2 * SV_CACHELINE - 8 - SV_WQ_MB_BYTES];
	/* written by the device */
	uint32_t cons;             /* slots the device is done with */
	union {
		/* send ring, for the direct path (src/abi/sv_direct.h):
		 * the WQEs whose execution has ended, their completion
		 * written and the QP's state changed as they demand
		 * (release, after cq_mark) */
		uint32_t done;
		/* receive ring with a direct side (struct sv_xside): the
		 * WQEs the device took since the side was made, plus cons
		 * then (release, with cons): the ring's consumer counter is
		 * xbase + the side's xprod */
		uint32_t xbase;
	};
	/* the send CQ's producer counter once the last of them completed:
	 * a completion of this QP that the library has not polled yet lies
	 * before it */
	uint32_t cq_mark;
	uint8_t pad1[SV_CACHELINE - 12];
	/* written once by the daemon at creation; each side keeps a copy */
	uint32_t entries;          /* slots, a power of two */
	uint32_t stride;           /* bytes per slot, a multiple of 64 */
	uint32_t max_sge;          /* SGEs a slot holds */
	uint32_t max_inline;       /* inline bytes a slot holds (send ring) */
	uint8_t pad2[SV_CACHELINE - 16];
	/* written by the device: state the library may look at (advisory,
	 * but for one use: a receive ring's qp_state tells ibv_post_recv
	 * whether the engine must hear of new WQEs, ERR's flush; the device
	 * fences after each store of it, see sv_rq_publish) */
	uint32_t qp_state;         /* enum ibv_qp_state, as the device sees it */
	uint32_t srq_limit;        /* SRQ ring: armed limit, 0 = not armed */
	uint8_t pad3[SV_CACHELINE - 8];
	/* A receive ring's direct side (struct sv_rq_xpub, struct
	 * sv_xside), each counter on a line of its own: written by the
	 * owner (the library), its completion side's consumer counter */
	uint32_t xcons;
	uint8_t pad5[SV_CACHELINE - 4];
	/* written by the device: xprod when an event last announced the
	 * completion ring's completions (DIRECT_NOTIFY) */
	uint32_t xannounced;
	uint8_t pad6[SV_CACHELINE - 4];
	/* A send ring of an RC or UC QP attached to an SRQ: its receive
	 * side (it has no receive ring of its own), as a receive ring's
	 * mailbox bytes are for a QP with one; xcons and xannounced above
	 * serve both. */
	struct sv_rq_xpub sxpub;
};

/* A completion ring's CQE carries its stamp (the receive CQ's producer
 * counter when it was written) where a tag-matching one has its tag; the
 * owner clears it as it takes the CQE. */
#define SV_XCQE_STAMP(e) (*(uint32_t *)(void *)&(e)->tm_tag)
/* ... and, in the tag's other half, its number in the side + 1 (xprod +
 * 1), which the sender stores (release) once its CAS published it: the
 * owner's poll looks at the slot, a line the sender writes anyway, rather
 * than at the word, which then stays in the sender's cache for its CAS;
 * the word stays the truth (a sender stopped between the two is found by
 * a look at it now and then). */
#define SV_XCQE_SEQ(e) (((uint32_t *)(void *)&(e)->tm_tag)[1])

static inline struct sv_rq_xpub *sv_rq_xpub_of(struct sv_wq_ring *hdr)
{
	return (struct sv_rq_xpub *)(void *)hdr->mb;
}

/* One scatter/gather element, as ibv_sge. */
struct sv_wqe_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/*
 * Send WQE opcodes: enum ibv_wr_opcode, plus the device's own where
 * upstream has no opcode (values upstream leaves unused):
 *  - SV_WR_FAST_REG_MR: make a fast-register MR valid over a page list or
 *    block list (the `reg` overlay; num_sge = the list's entries).
 *  - SV_WR_RDMA_READ_INV: an RDMA_READ, then, once its data has landed, a
 *    local invalidate of the key in `imm` (seed 004's read with
 *    invalidate of the local sink).
 *  - SV_WR_MASKED_CMP_SWAP, SV_WR_MASKED_FETCH_ADD: 8-byte masked atomics
 *    (the `masked` overlay; the rkey is in `imm`, in host order; one SGE of
 *    8 bytes takes the original value, as for the standard atomics).
 * IBV_WR_LOCAL_INV: invalidate the MR or type 2 MW whose key is in `imm`.
 * IBV_WR_BIND_MW: bind (or, type 1 with length 0, unbind) an MW (`reg`).
 * IBV_WR_SEND_WITH_INV: a SEND whose responder invalidates the key in `imm`.
 * SV_WR_FLUSH (rdma-core 56's IBV_WR_FLUSH, from ibv_wr_flush only): RDMA
 *    FLUSH of remote_addr, rkey; atomic.compare_add = the length,
 *    atomic.swap = SV_FLUSH_WQE(placement type, selectivity level); no SGE.
 */
/* IBV_WR_FLUSH of rdma-core 56 (Debian 12's header has no name for 14) */
#define SV_WR_FLUSH         14u
#define SV_FLUSH_WQE(type, level) \
	((uint64_t)(uint8_t)(type) | (uint64_t)(uint8_t)(level) << 8)
#define SV_FLUSH_WQE_TYPE(v)  ((uint32_t)(v) & 0xffu)
#define SV_FLUSH_WQE_LEVEL(v) ((uint32_t)((v) >> 8) & 0xffu)
/* Above every enum ibv_wr_opcode (rdma-core took 14 and 15 for FLUSH and
 * ATOMIC_WRITE): the extension's IBV_EXP_WR_* 12 .. 15, which ibv_exp_post_send
 * takes, are these in a WQE (sv_exp_wqe_op). */
#define SV_WR_FAST_REG_MR   32u
#define SV_WR_RDMA_READ_INV 33u
#define SV_WR_MASKED_CMP_SWAP  34u
#define SV_WR_MASKED_FETCH_ADD 35u

/* sv_wqe_reg.flags */
#define SV_REG_BLOCKS  1u  /* FAST_REG: entries are {addr, length} blocks */
#define SV_REG_TYPE1   2u  /* BIND: from ibv_bind_mw (type 1 windows only) */

/*
 * The second half of the header for FAST_REG_MR and BIND_MW.
 *  FAST_REG_MR: key = the MR's key with its new consumer byte; iova = the
 *    MR's first address (ignored with IBV_ACCESS_ZERO_BASED: 0); length;
 *    access (enum ibv_access_flags); list = the page list's handle; fbo =
 *    offset of the first byte in the first page / block; page_shift =
 *    log2(page size) (page lists only).
 *  BIND_MW: key = the MW's new key (index unchanged); iova = the window's
 *    first address in the MR's addresses; length (0 with SV_REG_TYPE1:
 *    unbind); access = the window's (IBV_ACCESS_REMOTE_*, ZERO_BASED);
 *    list = the MR's lkey.
 */
struct sv_wqe_reg {
	uint64_t iova;
	uint32_t key;
	uint32_t access;
	uint64_t length;
	uint64_t list;
	uint32_t fbo;
	uint8_t page_shift;
	uint8_t rsvd;
	uint16_t flags;            /* SV_REG_* */
};

/* Send WQE header; the slot continues with num_sge struct sv_wqe_sge, or with
 * inline_len bytes of data when flags has IBV_SEND_INLINE. */
struct sv_send_wqe {
	uint64_t wr_id;
	uint32_t opcode;           /* enum ibv_wr_opcode or SV_WR_* */
	uint32_t flags;            /* enum ibv_send_flags */
	uint32_t imm;              /* imm_data (big-endian) or the key to
				    * invalidate (host order) */
	uint32_t num_sge;          /* SGEs, or inline bytes with IBV_SEND_INLINE;
				    * FAST_REG_MR: list entries */
	union {
		struct {
			uint64_t remote_addr;      /* RDMA, atomics */
			uint32_t rkey;             /* RDMA, atomics */
			uint32_t remote_qpn;       /* UD */
			union {
				struct {
					uint64_t compare_add;
					uint64_t swap;
				} atomic;
				struct {
					uint64_t ah;       /* the AH's daemon handle */
					uint32_t remote_qkey;
					uint32_t rsvd;
				} ud;
			};
			uint64_t rsvd;
		};
		struct sv_wqe_reg reg;     /* FAST_REG_MR, BIND_MW */
		/* SV_WR_MASKED_*: compare/add, swap/field boundaries (see
		 * src/device/exec/atomic.h); the rkey is in imm */
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;  /* compare value; add value */
			uint64_t swap;         /* swap value; field ends */
			uint64_t compare_mask; /* CMP_SWAP only */
			uint64_t swap_mask;    /* CMP_SWAP only */
		} masked;
	};
};

/* Receive WQE header; the slot continues with num_sge struct sv_wqe_sge. */
struct sv_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t rsvd;
};

#define SV_SEND_WQE_HDR 64u
#define SV_RECV_WQE_HDR 16u

_Static_assert(sizeof(struct sv_wq_ring) <= SV_RING_HDR_BYTES, "wq hdr");
_Static_assert(offsetof(struct sv_wq_ring, cons) == 2 * SV_CACHELINE,
	       "cons line");
_Static_assert(offsetof(struct sv_wq_ring, mb) % 8 == 0, "mailbox align");
_Static_assert(sizeof(struct sv_rq_xpub) <= SV_WQ_MB_BYTES, "xpub");
_Static_assert(offsetof(struct sv_wq_ring, xbase) ==
	       offsetof(struct sv_wq_ring, cons) + 4, "cons and xbase");
_Static_assert(sizeof(struct sv_xside) == 2 * SV_CACHELINE, "xside");
_Static_assert(offsetof(struct sv_wq_ring, xcons) == 5 * SV_CACHELINE,
	       "xcons line");
_Static_assert(offsetof(struct sv_wq_ring, xannounced) == 6 * SV_CACHELINE,
	       "xannounced line");
_Static_assert(offsetof(struct sv_wq_ring, sxpub) == 7 * SV_CACHELINE,
	       "an SRQ QP's receive side");
_Static_assert(SV_WQ_MB_BYTES == SV_SEND_WQE_HDR + SV_WQ_MB_BODY, "mailbox");
_Static_assert(sizeof(struct sv_wqe_sge) == 16, "sge");
_Static_assert(sizeof(struct sv_send_wqe) == SV_SEND_WQE_HDR, "send wqe");
_Static_assert(sizeof(struct sv_recv_wqe) == SV_RECV_WQE_HDR, "recv wqe");
_Static_assert(sizeof(struct sv_wqe_reg) == 40, "reg overlay");
_Static_assert(offsetof(struct sv_send_wqe, reg) == 24, "reg offset");
_Static_assert(offsetof(struct sv_send_wqe, masked.remote_addr) ==
	       offsetof(struct sv_send_wqe, remote_addr), "masked offset");

/* Slot size of a send ring for max_sge SGEs and max_inline inline bytes. */
static inline uint32_t sv_send_stride(uint32_t max_sge, uint32_t max_inline)
{
	uint32_t body = max_sge * (uint32_t)sizeof(struct sv_wqe_sge);

	if (max_inline > body)
		body = max_inline;
	return (SV_SEND_WQE_HDR + body + 63u) & ~63u;
}

static inline uint32_t sv_recv_stride(uint32_t max_sge)
{
	return (SV_RECV_WQE_HDR + max_sge * (uint32_t)sizeof(struct sv_wqe_sge) +
		15u) & ~15u;
}

static inline size_t sv_wq_ring_bytes(uint32_t entries, uint32_t stride)
{
	return SV_RING_HDR_BYTES + (size_t)entries * stride;
}

/* The slot of counter value idx in a ring whose header is at hdr. */
static inline void *sv_wq_slot(void *hdr, uint32_t entries, uint32_t stride,
			       uint32_t idx)
{
	return (char *)hdr + SV_RING_HDR_BYTES +
	       (size_t)(idx & (entries - 1)) * stride;
}

/*
 * A doorbell page: one per engine thread, mapped by every client whose
 * objects that engine serves (all clients of one daemon run as one user).
 * Only liveness depends on it: a client that scribbles on it can delay the
 * engine's wake-up, never make it touch memory.
 */
struct sv_doorbell {
	uint32_t seq;              /* futex word: bumped by a waker */
	uint32_t sleeping;         /* the engine is (about to go) asleep */
	uint8_t pad0[SV_CACHELINE - 8];
};

#define SV_DB_PAGE_BYTES 4096u

/* Wire form of struct ibv_ah_attr (with its GRH). */
struct sv_wire_ah {
	uint8_t dgid[16];
	uint32_t flow_label;
	uint16_t dlid;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t is_global;
	uint8_t port_num;
	uint8_t rsvd[2];
};
_Static_assert(sizeof(struct sv_wire_ah) == 32, "wire ah");

/* Wire form of struct ibv_qp_attr (the fields the mask bits name). */
struct sv_wire_qp_attr {
	uint32_t qp_state;
	uint32_t cur_qp_state;
	uint32_t path_mtu;
	uint32_t path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	uint32_t qp_access_flags;
	uint32_t rate_limit;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint8_t rsvd;
	struct sv_wire_ah ah_attr;
	struct sv_wire_ah alt_ah_attr;
};
_Static_assert(sizeof(struct sv_wire_qp_attr) == 120, "wire qp attr");

/* Queue capacities, as struct ibv_qp_cap. */
struct sv_wire_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

#endif
