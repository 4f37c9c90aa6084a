/* SPDX-License-Identifier: MIT */
/*
 * The send opcodes, once: which QP types take each, through which post
 * path, what it does, and the opcode of its completion. The library's post
 * paths (src/verbs/sv_post.h) and the daemon (the work-queue code and the
 * RoCEv2 requester) read this table; nobody else writes these rules down.
 *
 * The index is a WQE's opcode (struct sv_send_wqe.opcode): enum
 * ibv_wr_opcode, or the device's own SV_WR_* (abi/sv_qp.h). Any uint32_t is
 * a safe argument to the functions below (unknown opcodes have no flags).
 */
#ifndef SV_ABI_OP_H
#define SV_ABI_OP_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "abi/sv_qp.h"

/* softverbs.h's IBV_EXP_WC_FAST_REG_MR, IBV_EXP_WC_MASKED_COMP_SWAP and
 * IBV_EXP_WC_MASKED_FETCH_ADD: the completion opcodes of the device's own
 * WR opcodes */
#define SV_WC_FAST_REG_MR 8u
#define SV_WC_MASKED_COMP_SWAP 9u
#define SV_WC_MASKED_FETCH_ADD 10u
/* rdma-core 56's IBV_WC_FLUSH and IBV_QP_EX_WITH_FLUSH (Debian 12's header
 * has neither) */
#define SV_WC_FLUSH 8u
#define SV_QP_EX_WITH_FLUSH (1ull << 11)

/* Flags of an opcode. The low 8 bits: the QP types (enum ibv_qp_type < 8)
 * that take it; an XRC_SEND QP takes what RC takes, unless SV_OPF_NOXRC. */
#define SV_OPF_QPT(t) (1u << (t))
#define SV_OPF_CONN   (SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_QPT(IBV_QPT_UC))
#define SV_OPF_ALL    (SV_OPF_CONN | SV_OPF_QPT(IBV_QPT_UD))
#define SV_OPF_QPTS   0xffu
#define SV_OPF_SINK    (1u << 8)   /* local SGEs take data (READ, atomic) */
#define SV_OPF_ATOMIC  (1u << 9)   /* 8 bytes, atomic at the responder */
#define SV_OPF_LOCAL   (1u << 10)  /* no message: runs at the requester */
#define SV_OPF_IMM     (1u << 11)  /* carries immediate data */
#define SV_OPF_INV     (1u << 12)  /* the responder invalidates imm's key */
#define SV_OPF_PAYLOAD (1u << 13)  /* sends local SGEs' bytes (or inline) */
#define SV_OPF_REMOTE  (1u << 14)  /* names remote memory: address, rkey */
#define SV_OPF_EXP     (1u << 15)  /* the device's own: exp post only */
#define SV_OPF_FAST    (1u << 16)  /* ibv_post_send's one-WR fast path */
#define SV_OPF_NOXRC   (1u << 17)  /* not on XRC_SEND QPs, though on RC */
#define SV_OPF_MM      (1u << 18)  /* memory management: no SGE, no data */
#define SV_OPF_IMMF    (1u << 19)  /* the WQE's imm field is used: immediate
				    * data, or the key to invalidate */
#define SV_OPF_AWRITE  (1u << 20)  /* ATOMIC WRITE: the 8 bytes travel in
				    * the WQE (atomic.swap), no SGE; stored
				    * at once at the responder, atomic with
				    * respect to every atomic of the device */
#define SV_OPF_FLUSH   (1u << 21)  /* RDMA FLUSH: remote range or MR in the
				    * WQE (SV_WR_FLUSH), no SGE, no data;
				    * answered as ATOMIC WRITE is; posted by
				    * ibv_wr_flush only */
#define SV_OPF_SEND    (1u << 22)  /* a SEND: lands in the responder's
				    * receive WQE (RC/UC/XRC SEND opcodes,
				    * UD's SEND ONLY) */
#define SV_OPF_READ    (1u << 23)  /* an RDMA READ: answered by READ
				    * responses with the remote bytes */
#define SV_OPF_LINV    (1u << 24)  /* the requester invalidates imm's key
				    * once the data has landed (READ with
				    * invalidate) */
#define SV_OPF_MASKED  (1u << 25)  /* a masked atomic: the device's own,
				    * only where it was started with them */

struct sv_op_info {
	uint32_t flags;
	uint8_t wc;        /* enum ibv_wc_opcode (or SV_WC_*) of its completion */
	uint64_t ex;       /* its IBV_QP_EX_WITH_* bit (0: none) */
};

static const struct sv_op_info sv_op_tab[] = {
	[IBV_WR_RDMA_WRITE] = {
		SV_OPF_CONN | SV_OPF_PAYLOAD | SV_OPF_REMOTE | SV_OPF_FAST,
		IBV_WC_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE },
	[IBV_WR_RDMA_WRITE_WITH_IMM] = {
		SV_OPF_CONN | SV_OPF_IMM | SV_OPF_PAYLOAD | SV_OPF_REMOTE |
		SV_OPF_FAST | SV_OPF_IMMF,
		IBV_WC_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM },
	[IBV_WR_SEND] = {
		SV_OPF_ALL | SV_OPF_SEND | SV_OPF_PAYLOAD | SV_OPF_FAST,
		IBV_WC_SEND, IBV_QP_EX_WITH_SEND },
	[IBV_WR_SEND_WITH_IMM] = {
		SV_OPF_ALL | SV_OPF_SEND | SV_OPF_IMM | SV_OPF_PAYLOAD |
		SV_OPF_FAST | SV_OPF_IMMF,
		IBV_WC_SEND, IBV_QP_EX_WITH_SEND_WITH_IMM },
	[IBV_WR_RDMA_READ] = {
		SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_READ | SV_OPF_SINK |
		SV_OPF_REMOTE | SV_OPF_FAST,
		IBV_WC_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ },
	[IBV_WR_ATOMIC_CMP_AND_SWP] = {
		SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_SINK | SV_OPF_ATOMIC |
		SV_OPF_REMOTE | SV_OPF_FAST,
		IBV_WC_COMP_SWAP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP },
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = {
		SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_SINK | SV_OPF_ATOMIC |
		SV_OPF_REMOTE | SV_OPF_FAST,
		IBV_WC_FETCH_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD },
	[IBV_WR_LOCAL_INV] = {
		SV_OPF_ALL | SV_OPF_LOCAL | SV_OPF_MM,
		IBV_WC_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV },
	[IBV_WR_BIND_MW] = {
		SV_OPF_CONN | SV_OPF_LOCAL | SV_OPF_MM,
		IBV_WC_BIND_MW, IBV_QP_EX_WITH_BIND_MW },
	[IBV_WR_SEND_WITH_INV] = {
		SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_SEND | SV_OPF_INV |
		SV_OPF_PAYLOAD | SV_OPF_IMMF,
		IBV_WC_SEND, IBV_QP_EX_WITH_SEND_WITH_INV },
	/* not executed by this device: no flags */
	[IBV_WR_TSO] = { 0, IBV_WC_TSO, 0 },
	[IBV_WR_DRIVER1] = { 0, IBV_WC_SEND, 0 },
	/* IBTA 1.5's ATOMIC WRITE (issue 23): ibv_post_send's WR names the
	 * 8 bytes with its one SGE, read at post; ibv_wr_atomic_write gives
	 * them */
	[IBV_WR_ATOMIC_WRITE] = {
		SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_REMOTE | SV_OPF_AWRITE |
		SV_OPF_NOXRC,
		IBV_WC_ATOMIC_WRITE, IBV_QP_EX_WITH_ATOMIC_WRITE },
	/* IBTA 1.5's RDMA FLUSH, as rxe: RC only, ibv_wr_flush only (no
	 * struct ibv_send_wr names its fields: ibv_post_send refuses it) */
	[SV_WR_FLUSH] = {
		SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_REMOTE | SV_OPF_FLUSH |
		SV_OPF_NOXRC,
		SV_WC_FLUSH, SV_QP_EX_WITH_FLUSH },
	[SV_WR_FAST_REG_MR] = {
		SV_OPF_ALL | SV_OPF_LOCAL | SV_OPF_EXP | SV_OPF_MM,
		SV_WC_FAST_REG_MR, 0 },
	[SV_WR_RDMA_READ_INV] = {
		SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_READ | SV_OPF_SINK |
		SV_OPF_REMOTE | SV_OPF_EXP | SV_OPF_IMMF | SV_OPF_LINV,
		IBV_WC_RDMA_READ, 0 },
	[SV_WR_MASKED_CMP_SWAP] = {
		SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_SINK | SV_OPF_ATOMIC |
		SV_OPF_REMOTE | SV_OPF_EXP | SV_OPF_NOXRC | SV_OPF_MASKED,
		SV_WC_MASKED_COMP_SWAP, 0 },
	[SV_WR_MASKED_FETCH_ADD] = {
		SV_OPF_QPT(IBV_QPT_RC) | SV_OPF_SINK | SV_OPF_ATOMIC |
		SV_OPF_REMOTE | SV_OPF_EXP | SV_OPF_NOXRC | SV_OPF_MASKED,
		SV_WC_MASKED_FETCH_ADD, 0 },
};

#define SV_OP_COUNT (sizeof(sv_op_tab) / sizeof(sv_op_tab[0]))

/* The WQE opcode of an opcode ibv_exp_post_send takes (softverbs.h's
 * IBV_EXP_WR_*: those of enum ibv_wr_opcode, and the device's own at 12 ..
 * 15); UINT32_MAX for any other (refused). */
static inline uint32_t sv_exp_wqe_op(uint32_t exp_op)
{
	if (exp_op >= 12 && exp_op <= 15)
		return SV_WR_FAST_REG_MR + (exp_op - 12);
	return exp_op < 12 ? exp_op : UINT32_MAX;
}

/* The flags of op (0: an opcode this device does not know). */
static inline uint32_t sv_op_flags(uint32_t op)
{
	return op < SV_OP_COUNT ? sv_op_tab[op].flags : 0;
}

/* The completion opcode of op (IBV_WC_SEND for an unknown one). */
static inline uint32_t sv_op_wc(uint32_t op)
{
	return op < SV_OP_COUNT ? sv_op_tab[op].wc : IBV_WC_SEND;
}

/* Whether a QP of qp_type may execute an opcode of these flags (whatever
 * the post path: see sv_op_ok for who may post it). */
static inline bool sv_op_flags_ok(uint32_t qp_type, uint32_t flags)
{
	if (qp_type == IBV_QPT_XRC_SEND) {     /* sends as RC does */
		if (flags & SV_OPF_NOXRC)
			return false;
		qp_type = IBV_QPT_RC;
	}
	return qp_type < 8 && (flags & SV_OPF_QPT(qp_type));
}

/* The device's verdict on a send WQE of op on a QP of qp_type, whichever
 * transport runs it (the same host's loop/req.c, the RoCEv2 requester's
 * roce/req.c): IBV_WC_SUCCESS, or IBV_WC_LOC_QP_OP_ERR for an opcode the
 * table does not give that QP type (or does not know), or a masked atomic
 * on a device started without them (masked_ok false). */
static inline uint32_t sv_op_req_status(uint32_t qp_type, uint32_t op,
					bool masked_ok)
{
	uint32_t f = sv_op_flags(op);

	if (!sv_op_flags_ok(qp_type, f))
		return IBV_WC_LOC_QP_OP_ERR;
	if ((f & SV_OPF_MASKED) && !masked_ok)
		return IBV_WC_LOC_QP_OP_ERR;
	return IBV_WC_SUCCESS;
}

/* Whether op may be posted on a QP of qp_type: through ibv_post_send
 * (exp false) or ibv_exp_post_send and the extension's calls (exp true).
 * FLUSH only through its ibv_wr_flush (see sv_op_ex_flags). */
static inline bool sv_op_ok(uint32_t qp_type, uint32_t op, bool exp)
{
	uint32_t f = sv_op_flags(op);

	if ((f & SV_OPF_EXP) && !exp)
		return false;
	if (f & SV_OPF_FLUSH)
		return false;
	return sv_op_flags_ok(qp_type, f);
}

/* The IBV_QP_EX_WITH_* bits of the opcodes a QP of qp_type takes. */
static inline uint64_t sv_op_ex_flags(uint32_t qp_type)
{
	uint64_t f = 0;

	for (uint32_t op = 0; op < SV_OP_COUNT; op++)
		if (!(sv_op_tab[op].flags & SV_OPF_EXP) &&
		    sv_op_flags_ok(qp_type, sv_op_tab[op].flags))
			f |= sv_op_tab[op].ex;
	return f;
}

#endif /* SV_ABI_OP_H */
