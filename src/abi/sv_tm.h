/* SPDX-License-Identifier: MIT */
/*
 * Tag matching: what the library and the daemon share (docs/DESIGN.md "Tag
 * matching"). The device's limits, which the library reports as
 * ibv_device_attr_ex.tm_caps and the daemon enforces; the handle a TAG_ADD
 * gives back; the headers a tagged message starts with (rdma-core's
 * <infiniband/tm_types.h>: struct ibv_tmh, struct ibv_rvh, big-endian).
 */
#ifndef SV_ABI_TM_H
#define SV_ABI_TM_H

#include <stdint.h>

#include <infiniband/tm_types.h>

/* ibv_tm_caps */
#define SV_TM_MAX_TAGS      1024u  /* tagged buffers in one SRQ's list */
#define SV_TM_MAX_OPS       1024u  /* ops outstanding (each completes at
				    * once: this only bounds max_ops) */
#define SV_TM_MAX_SGE       1u     /* SGEs of a tagged buffer */
/* a rendezvous message: the TMH, the RVH and up to 32 bytes of the
 * application's own header */
#define SV_TM_MAX_RNDV_HDR  64u

#define SV_TM_TMH_BYTES     16u
#define SV_TM_RVH_BYTES     16u

/* A tag's handle: its slot in the list, and the slot's generation, so that
 * a handle of a tag consumed (or deleted) does not name the tag that takes
 * the slot next. */
#define SV_TM_HANDLE_IDX_BITS 16u
#define SV_TM_HANDLE_IDX_MASK ((1u << SV_TM_HANDLE_IDX_BITS) - 1u)

static inline uint32_t sv_tm_handle(uint32_t idx, uint32_t gen)
{
	return (gen << SV_TM_HANDLE_IDX_BITS) | (idx & SV_TM_HANDLE_IDX_MASK);
}

_Static_assert(SV_TM_MAX_TAGS <= SV_TM_HANDLE_IDX_MASK, "tm handle");
_Static_assert(sizeof(struct ibv_tmh) == SV_TM_TMH_BYTES, "tmh");
_Static_assert(sizeof(struct ibv_rvh) == SV_TM_RVH_BYTES, "rvh");

#endif
