/* SPDX-License-Identifier: MIT */
/*
 * Tag matching: what the library and the daemon share (docs/DESIGN.md "Tag
 * matching"). The device's limits, which the library reports as
 * ibv_device_attr_ex.tm_caps and the daemon enforces; the ops ring of a
 * tag-matching SRQ; the headers a tagged message starts with (rdma-core's
 * <infiniband/tm_types.h>: struct ibv_tmh, struct ibv_rvh, big-endian).
 */
#ifndef SV_ABI_TM_H
#define SV_ABI_TM_H

#include <stdint.h>

#include <infiniband/tm_types.h>

#include "abi/sv_qp.h"

/* ibv_tm_caps */
#define SV_TM_MAX_TAGS      1024u  /* tagged buffers in one SRQ's list */
#define SV_TM_MAX_OPS       1024u  /* ops outstanding: the ops ring */
#define SV_TM_MAX_SGE       1u     /* SGEs of a tagged buffer */
/* a rendezvous message: the TMH, the RVH and up to 32 bytes of the
 * application's own header */
#define SV_TM_MAX_RNDV_HDR  64u

#define SV_TM_TMH_BYTES     16u
#define SV_TM_RVH_BYTES     16u

/*
 * The ops ring: ibv_post_srq_ops writes each op into a slot, as a receive
 * is posted, with no command. It lies in the SRQ's memfd after the receive
 * ring (the create response's tm_ops_offset): a struct sv_wq_ring header
 * page, then tm_ops_entries slots of struct sv_tm_op. The library produces
 * (prod, release) and rings the SRQ's doorbell page; the device's engine of
 * that page applies the ops in order (and so does whoever delivers a
 * message into the SRQ, first), publishes cons, and writes each op's
 * completion on the SRQ's CQ when it is signaled or fails.
 *
 * The header's `done` (written by the device, release) counts the TAG_ADD
 * ops whose tag no longer holds a place in the list: matched, deleted, or
 * refused. The library, which counts the TAG_ADD ops it posted, refuses a
 * TAG_ADD with ENOMEM when posted - done reaches max_num_tags: never more
 * tags than the list holds, as mlx5 counts its free list.
 *
 * A TAG_ADD's handle is the library's own (a per-SRQ counter, never 0); a
 * TAG_DEL names it and the device looks for the posted tag of that handle.
 */
struct sv_tm_op {
	uint64_t wr_id;
	uint64_t recv_wr_id;       /* TAG_ADD */
	uint64_t tag;              /* TAG_ADD */
	uint64_t mask;             /* TAG_ADD */
	struct sv_wqe_sge sge;     /* TAG_ADD, num_sge 1 */
	uint32_t opcode;           /* enum ibv_ops_wr_opcode */
	uint32_t flags;            /* enum ibv_ops_flags */
	uint32_t unexpected_cnt;
	uint32_t handle;           /* TAG_ADD: the tag's; TAG_DEL: whose */
	uint32_t num_sge;          /* TAG_ADD: 0 or 1 (SV_TM_MAX_SGE) */
	uint32_t rsvd;
};

#define SV_TM_OP_STRIDE 128u       /* a slot: two cache lines */

_Static_assert(sizeof(struct sv_tm_op) <= SV_TM_OP_STRIDE, "tm op");
_Static_assert(sizeof(struct ibv_tmh) == SV_TM_TMH_BYTES, "tmh");
_Static_assert(sizeof(struct ibv_rvh) == SV_TM_RVH_BYTES, "rvh");

#endif
