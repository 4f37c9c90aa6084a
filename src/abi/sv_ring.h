/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory ring layouts: one definition for the library and the daemon.
 *
 * A ring is a memfd created and sealed (no shrink, no grow) by the daemon and
 * mapped by both sides: a 512-byte header (its counters each on a cache line
 * of their own), then a power-of-two array of fixed-size slots. Rings start
 * on a page of their memfd (a pool of one client's rings, ctl/ring.c); a QP's
 * receive ring follows its send ring on the next cache line, so that an
 * idle QP of small queues takes one page (issue 35: 65,536 QPs). Producer and consumer counters are free-running uint32_t,
 * masked only to address a slot; each side writes only its own counter,
 * publishes it with a release store and reads the other's with an acquire
 * load. Each counter sits on its own cache line.
 *
 * Nothing the other side can write is trusted: the daemon clamps what it reads
 * of the consumer counter (prod - cons <= entries) and keeps its own state in
 * private memory.
 */
#ifndef SV_ABI_RING_H
#define SV_ABI_RING_H

#include <stddef.h>
#include <stdint.h>

#define SV_RING_HDR_BYTES 512u
#define SV_CACHELINE 64u

/* Completion queue ring header. */
struct sv_cq_ring {
	/* written by the device (daemon) */
	uint32_t prod;             /* CQEs published */
	uint32_t overflow;         /* non-zero once a CQE could not be written */
	uint32_t events;           /* completion events sent */
	uint32_t fired_sn;         /* the arm (arm_sn) that last sent one:
				    * armed while arm_sn differs */
	uint8_t pad0[SV_CACHELINE - 16];
	/* written by the library */
	uint32_t cons;             /* CQEs consumed */
	/* completions in the library's private ring (the direct path,
	 * src/abi/sv_direct.h), not polled yet: the CQ holds them too, so
	 * the device counts them when it decides an overrun */
	uint32_t dused;
	uint8_t pad1[SV_CACHELINE - 8];
	/* written by the library: ibv_req_notify_cq */
	uint32_t arm_sn;           /* bumped on every arm */
	uint32_t arm_flags;        /* SV_CQ_ARM_* */
	uint8_t pad2[SV_CACHELINE - 8];
	/* written once by the daemon at creation; the library keeps a copy */
	uint32_t entries;          /* slots, a power of two */
	uint32_t cqe_size;         /* sizeof(struct sv_cqe) */
};

enum {
	SV_CQ_ARM_NEXT = 1u << 0,      /* next completion */
	SV_CQ_ARM_SOLICITED = 1u << 1, /* next solicited completion */
};

enum {
	/* the completion of a solicited message: it fires a solicited arm,
	 * also one made after it arrived (NOTIFY_CQ) */
	SV_CQE_F_SOLICITED = 1u << 0,
};

/* One completion, 64 bytes. Opcode and status use the ibv_wc enums. */
struct sv_cqe {
	uint64_t wr_id;
	uint32_t status;           /* enum ibv_wc_status */
	uint32_t opcode;           /* enum ibv_wc_opcode */
	union {
		uint32_t vendor_err;
		/* a receive that matched a tag (IBV_WC_TM_MATCH): the
		 * TMH's app_ctx, host order (a successful completion has
		 * no vendor error) */
		uint32_t tm_priv;
	};
	uint32_t byte_len;
	uint32_t imm_data;         /* big-endian imm, or the invalidated rkey */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;         /* enum ibv_wc_flags */
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint16_t dev_flags;        /* SV_CQE_F_*: the device's own, not a
				    * wc field (ibv_wc's padding) */
	uint64_t timestamp;        /* ns, CLOCK_MONOTONIC */
	uint64_t tm_tag;           /* IBV_WC_TM_MATCH: the TMH's tag, host
				    * order; else 0 */
};

_Static_assert(sizeof(struct sv_cq_ring) <= SV_RING_HDR_BYTES, "cq ring hdr");
_Static_assert(offsetof(struct sv_cq_ring, cons) == SV_CACHELINE, "cons line");
_Static_assert(offsetof(struct sv_cq_ring, arm_sn) == 2 * SV_CACHELINE, "arm line");
_Static_assert(sizeof(struct sv_cqe) == 64, "cqe size");

static inline size_t sv_cq_ring_bytes(uint32_t entries)
{
	return SV_RING_HDR_BYTES + (size_t)entries * sizeof(struct sv_cqe);
}

static inline struct sv_cqe *sv_cq_slot(void *ring, uint32_t entries,
					uint32_t idx)
{
	return (struct sv_cqe *)((char *)ring + SV_RING_HDR_BYTES) +
	       (idx & (entries - 1));
}

#endif
