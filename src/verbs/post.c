// SPDX-License-Identifier: MIT
/*
 * The post path: ibv_post_send, ibv_post_recv, ibv_post_srq_recv.
 *
 * Each WR is checked, then copied into the next free slot of its ring; once
 * the list is done (or stops at the first WR that cannot be posted), one
 * release store publishes the producer counter and the doorbell is rung.
 * No allocation, no system call except the FUTEX_WAKE of a sleeping engine;
 * a spinlock per queue.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "verbs/qp_ops.h"
#include "verbs/sv_post.h"

/* The engine behind db sleeps: wake it (the post path's one system call). */
static __attribute__((noinline, cold)) void doorbell_wake(struct sv_doorbell *db)
{
	__atomic_fetch_add(&db->seq, 1, __ATOMIC_SEQ_CST);
	/* not FUTEX_PRIVATE: the page is shared with the daemon */
	syscall(SYS_futex, &db->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static inline void doorbell_ring(struct sv_doorbell *db)
{
	/* Order our prod store before the load of `sleeping`; the engine
	 * orders its store of `sleeping` before its last look at the rings.
	 * So either it sees our WQE or we see it asleep. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (unlikely(__atomic_load_n(&db->sleeping, __ATOMIC_RELAXED)))
		doorbell_wake(db);
}

void sv_doorbell_ring(struct sv_doorbell *db)
{
	doorbell_ring(db);
}

/*
 * ibv_post_send is the hottest call of the library; its budget is counted
 * in instructions (bench/budgets.sh). Hence: every field of a WR is read
 * once into a local (the slot is written through a char pointer, which
 * would otherwise make the compiler read the WR again after each store),
 * opcode properties are bit tests, small inline data is copied without a
 * call, and the ring's geometry and free room are read once per call.
 */

/* The flags (abi/sv_op.h) of a checked opcode: one sv_exp_opcode_ok
 * accepts. They are read once per WR, before the slot is written (stores
 * through the slot's pointer would make the compiler read them again). */
static inline uint32_t op_flags(uint32_t op)
{
	return sv_op_tab[op].flags;
}

/* Opcode flags f are of an RDMA WRITE or READ (a remote range, not an
 * atomic) */
static inline bool op_rdma(uint32_t f)
{
	return (f & (SV_OPF_REMOTE | SV_OPF_ATOMIC)) == SV_OPF_REMOTE;
}

/* ... of an atomic of verbs (not the extension's masked ones) */
static inline bool op_atomic(uint32_t f)
{
	return (f & (SV_OPF_ATOMIC | SV_OPF_EXP)) == SV_OPF_ATOMIC;
}

/* ... of a masked atomic (ibv_exp_post_send only) */
static inline bool op_masked(uint32_t f)
{
	return (f & (SV_OPF_ATOMIC | SV_OPF_EXP)) ==
	       (SV_OPF_ATOMIC | SV_OPF_EXP);
}

/* 0 or the errno that refuses this send WR on this QP (exp: a WR of
 * ibv_exp_post_send); *ilen: the inline bytes when inl. The
 * memory-management opcodes stop at the flags: put_mm does the rest. */
static inline int check_send(const struct sv_qp *qp, enum ibv_qp_type type,
			     const struct ibv_send_wr *wr, uint32_t op,
			     unsigned int flags, int num_sge,
			     const struct ibv_sge *sgl, bool inl,
			     uint32_t *ilen, bool exp)
{
	if (unlikely(exp ? !sv_exp_opcode_ok(type, op) :
			   !sv_send_opcode_ok(type, (enum ibv_wr_opcode)op)))
		return EINVAL;
	if (unlikely(flags & ~SV_SEND_FLAGS_OK))
		return EINVAL;
	if (unlikely(sv_send_opcode_mm(op)))
		return 0;
	if (unlikely(num_sge < 0 || (num_sge && !sgl)))
		return EINVAL;
	/* ATOMIC WRITE: its 8 bytes are the one SGE's (read at post) */
	if (unlikely(sv_op_flags(op) & SV_OPF_AWRITE))
		return num_sge == 1 && sgl->length == 8 && sgl->addr ? 0 :
								      EINVAL;
	if (inl) {
		uint64_t total = 0;

		if (likely(num_sge == 1))
			total = sgl->length;
		else
			for (int i = 0; i < num_sge; i++)
				total += sgl[i].length;
		if (unlikely(total > qp->sq.max_inline))
			return EINVAL;
		*ilen = (uint32_t)total;
	} else if (unlikely((uint32_t)num_sge > qp->sq.max_sge)) {
		return EINVAL;
	}
	if (unlikely(type == IBV_QPT_UD) &&
	    (!wr->wr.ud.ah || wr->wr.ud.ah->context != qp->ex.qp_base.context))
		return EINVAL;
	return 0;
}

/* Does the WR carry its data inline? (READ and atomics have none: for them
 * IBV_SEND_INLINE means nothing.) */
static inline bool wr_inline(uint32_t op, unsigned int flags)
{
	return (flags & IBV_SEND_INLINE) &&
	       sv_send_opcode_has_payload((enum ibv_wr_opcode)op);
}

/* memcpy of at most 16 bytes, without a call or a loop: two overlapping
 * loads and stores of the widest size that fits. */
static inline void copy_upto16(char *restrict dst, const char *restrict src,
			       uint32_t n)
{
	if (n >= 8) {
		uint64_t a, b;

		memcpy(&a, src, 8);
		memcpy(&b, src + n - 8, 8);
		memcpy(dst, &a, 8);
		memcpy(dst + n - 8, &b, 8);
	} else if (n >= 4) {
		uint32_t a, b;

		memcpy(&a, src, 4);
		memcpy(&b, src + n - 4, 4);
		memcpy(dst, &a, 4);
		memcpy(dst + n - 4, &b, 4);
	} else if (n >= 2) {
		uint16_t a, b;

		memcpy(&a, src, 2);
		memcpy(&b, src + n - 2, 2);
		memcpy(dst, &a, 2);
		memcpy(dst + n - 2, &b, 2);
	} else if (n) {
		dst[0] = src[0];
	}
}

/* memcpy for inline data, without a call for n <= 16. */
static inline void copy_inline(char *restrict dst, const char *restrict src,
			       uint32_t n)
{
	if (n <= 16)
		copy_upto16(dst, src, n);
	else
		memcpy(dst, src, n);
}

/* The header's second half (from remote_addr on), every byte of it: the
 * remote address and key, the atomic operands or the UD address; xrc (an
 * XRC_SEND QP, never on post_one's path): the remote SRQ number. */
static inline void fill_tail(enum ibv_qp_type type,
			     struct sv_send_wqe *restrict w,
			     const struct ibv_send_wr *restrict wr, uint32_t f,
			     bool xrc)
{
	if (likely(op_rdma(f))) {
		w->remote_addr = wr->wr.rdma.remote_addr;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		/* rkey and, beside it, remote_qpn 0: one store */
		uint64_t rkey_qpn = wr->wr.rdma.rkey;

		memcpy(&w->rkey, &rkey_qpn, sizeof(rkey_qpn));
#else
		w->rkey = wr->wr.rdma.rkey;
		w->remote_qpn = 0;
#endif
		w->atomic.compare_add = 0;
		w->atomic.swap = 0;
	} else if (op_atomic(f)) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->remote_qpn = 0;
		w->atomic.compare_add = wr->wr.atomic.compare_add;
		w->atomic.swap = wr->wr.atomic.swap;
	} else if (type == IBV_QPT_UD) {
		w->remote_addr = 0;
		w->rkey = 0;
		w->remote_qpn = wr->wr.ud.remote_qpn;
		w->ud.ah = to_sv_ah(wr->wr.ud.ah)->handle;
		w->ud.remote_qkey = wr->wr.ud.remote_qkey;
		w->ud.rsvd = 0;
	} else {
		w->remote_addr = 0;
		w->rkey = 0;
		w->remote_qpn = 0;
		w->atomic.compare_add = 0;
		w->atomic.swap = 0;
	}
	/* XRC: every message names the remote SRQ */
	if (unlikely(xrc))
		w->remote_qpn = wr->qp_type.xrc.remote_srqn;
	w->rsvd = 0;
}

/* Copy a checked WR into its slot: every byte of the 64-byte header (nothing
 * of the slot's last WQE stays), then the SGEs or the inline bytes. Each
 * field is stored as soon as it is known, so that little is held in
 * registers. */
static inline void fill_send(enum ibv_qp_type type,
			     struct sv_send_wqe *restrict w,
			     const struct ibv_send_wr *restrict wr, uint32_t op,
			     unsigned int flags, int num_sge,
			     const struct ibv_sge *restrict sgl, bool inl,
			     uint32_t ilen)
{
	char *body = (char *)w + SV_SEND_WQE_HDR;
	uint32_t f = op_flags(op);

	if (!inl)
		flags &= ~(unsigned int)IBV_SEND_INLINE; /* READ, atomics */
	w->wr_id = wr->wr_id;
	w->opcode = op;
	w->flags = flags; /* the device applies sq_sig_all */
	w->imm = (f & SV_OPF_IMMF) ? wr->imm_data : 0; /* big-endian */
	if (inl) {
		if (likely(num_sge == 1)) {
			copy_inline(body, (const char *)(uintptr_t)sgl->addr,
				    ilen);
		} else {
			uint32_t len = 0;

			for (int i = 0; i < num_sge; i++) {
				uint32_t n = sgl[i].length;

				copy_inline(body + len,
					    (const char *)(uintptr_t)sgl[i].addr,
					    n);
				len += n;
			}
		}
		w->num_sge = ilen;
	} else {
		if (likely(num_sge == 1))
			memcpy(body, sgl, sizeof(struct sv_wqe_sge));
		else if (num_sge) /* sg_list may be NULL without SGEs */
			memcpy(body, sgl,
			       (size_t)num_sge * sizeof(struct sv_wqe_sge));
		w->num_sge = (uint32_t)num_sge;
	}
	fill_tail(type, w, wr, f, type == IBV_QPT_XRC_SEND);
	if (unlikely(f & SV_OPF_AWRITE)) {
		/* the value travels in the WQE (check_send: 8 bytes) */
		memcpy(&w->atomic.swap, (const void *)(uintptr_t)sgl->addr, 8);
		w->num_sge = 0;
		w->flags = flags & ~(unsigned int)IBV_SEND_INLINE;
	}
}

_Static_assert(sizeof(struct ibv_sge) == sizeof(struct sv_wqe_sge), "sge");
_Static_assert(offsetof(struct ibv_sge, addr) ==
	       offsetof(struct sv_wqe_sge, addr), "sge addr");
_Static_assert(offsetof(struct ibv_sge, length) ==
	       offsetof(struct sv_wqe_sge, length), "sge length");
_Static_assert(offsetof(struct ibv_sge, lkey) ==
	       offsetof(struct sv_wqe_sge, lkey), "sge lkey");
_Static_assert(offsetof(struct sv_send_wqe, remote_qpn) ==
	       offsetof(struct sv_send_wqe, rkey) + 4, "rkey, remote_qpn");
_Static_assert(sizeof(((struct sv_send_wqe *)0)->ud) ==
	       sizeof(((struct sv_send_wqe *)0)->atomic), "wqe union");

/* Free slots for WQEs from prod on: the acquire load of cons pairs with the
 * device's release store, so a slot is rewritten only after the device
 * copied it out. */
static inline uint32_t sq_room(const struct sv_qp *qp, uint32_t prod)
{
	uint32_t used = prod - __atomic_load_n(&qp->sq.hdr->cons,
					       __ATOMIC_ACQUIRE);

	return used < qp->max_send_wr ? qp->max_send_wr - used : 0;
}

/* Is there room in the SQ for one more WQE at prod? (see sq_room) */
static inline bool sq_has_room(const struct sv_qp *qp, uint32_t prod)
{
	return prod - __atomic_load_n(&qp->sq.hdr->cons, __ATOMIC_ACQUIRE) <
	       qp->max_send_wr;
}

static __attribute__((noinline)) int post_list(struct sv_qp *qp,
					       struct ibv_send_wr *wr,
					       struct ibv_send_wr **bad_wr,
					       bool exp);

/*
 * The mailbox of a LOW_LATENCY QP's send ring (src/abi/sv_qp.h): a copy of
 * WQE n, just written to slot w, for the engine to find on prod's lines.
 * mb_seq goes to 0 before the copy is rewritten and to n + 1 after it, so
 * an engine that reads the mailbox meanwhile sees that it changed and reads
 * the slot instead. Plain stores (on x86 the fences cost no instruction).
 */
static inline void mailbox_put(struct sv_wq_ring *hdr,
			       const struct sv_send_wqe *w, uint32_t n)
{
	__atomic_store_n(&hdr->mb_seq, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(hdr->mb, w, SV_WQ_MB_BYTES);
	__atomic_store_n(&hdr->mb_seq, n + 1, __ATOMIC_RELEASE);
}

/*
 * One WR, under the SQ lock: the common case, one SGE or up to 16 bytes of
 * inline data. A function of its own that calls nothing (but the wake of a
 * sleeping engine); each header field is stored as soon as it is known, so
 * that little is held in registers. Anything else goes to post_list, which
 * does the same for any WR. mb (a constant: post_one, post_one_mb): the QP
 * has a mailbox, and the WQE goes there too.
 */
static inline __attribute__((always_inline)) int
post_one_in(struct sv_qp *qp, struct ibv_send_wr *wr,
	    struct ibv_send_wr **bad_wr, bool mb, bool direct, bool ud)
{
	/* ud (a constant): a UD QP; any other is checked and filled as
	 * one that is not, which post_one's callers guarantee */
	enum ibv_qp_type type = ud ? IBV_QPT_UD : IBV_QPT_RC;
	uint32_t op = (uint32_t)wr->opcode;
	unsigned int flags = wr->send_flags;
	const struct ibv_sge *sgl = wr->sg_list;
	struct sv_send_wqe *w;
	struct sv_wq_ring *hdr;
	uint32_t prod, ilen = 0, f;
	int err = EINVAL;

	if (unlikely(wr->num_sge != 1 || !sgl))
		return post_list(qp, wr, bad_wr, false);
	/* check_send, for one SGE and the data opcodes (the others, the
	 * opcodes refused, and every WR of an XRC_SEND QP are post_list's):
	 * sv_send_opcode_fast, as a mask made when the QP was) */
	if (unlikely(op >= 32 || !(qp->fast_ops & (1u << op))))
		return post_list(qp, wr, bad_wr, false);
	f = op_flags(op);
	if (unlikely(flags & ~SV_SEND_FLAGS_OK))
		goto fail;
	if ((flags & IBV_SEND_INLINE) && (f & SV_OPF_PAYLOAD)) { /* wr_inline */
		ilen = sgl->length;
		/* more than the QP takes (post_list refuses it) or than
		 * copy_upto16 copies */
		if (unlikely(ilen > qp->fast_inline))
			return post_list(qp, wr, bad_wr, false);
	} else {
		flags &= ~(unsigned int)IBV_SEND_INLINE; /* READ, atomics */
		if (unlikely(!qp->sq.max_sge))
			goto fail;
	}
	if (ud &&
	    (!wr->wr.ud.ah || wr->wr.ud.ah->context != qp->ex.qp_base.context))
		goto fail;
	/* a WRITE or READ to a peer of this host runs here (direct.c) */
	if (direct && (qp->direct_ops & (1u << op)) &&
	    !sv_direct_post(qp, wr, op, flags))
		return 0;

	prod = qp->sq.prod;
	if (unlikely(!sq_has_room(qp, prod))) {
		err = ENOMEM;
		goto fail;
	}
	hdr = qp->sq.hdr;
	w = (struct sv_send_wqe *)((char *)hdr + SV_RING_HDR_BYTES +
				   (size_t)(prod & (qp->sq.entries - 1)) *
					   qp->sq.stride);
	/* fill_send, for one SGE (flags keeps IBV_SEND_INLINE only when the
	 * data is inline) */
	w->wr_id = wr->wr_id;
	w->opcode = op;
	w->flags = flags; /* the device applies sq_sig_all */
	/* big-endian; the device reads it only for the opcodes that carry
	 * it (SV_OPF_IMMF), so a WR's field goes as it is */
	w->imm = wr->imm_data;
	if (flags & IBV_SEND_INLINE) {
		copy_upto16((char *)w + SV_SEND_WQE_HDR,
			    (const char *)(uintptr_t)sgl->addr, ilen);
		w->num_sge = ilen;
	} else {
		memcpy((char *)w + SV_SEND_WQE_HDR, sgl,
		       sizeof(struct sv_wqe_sge));
		w->num_sge = 1;
	}
	fill_tail(type, w, wr, f, false);
	if (mb)
		mailbox_put(hdr, w, prod);
	qp->sq.prod = ++prod;
	/* release: the slot (and the mailbox) are written before the device
	 * sees prod */
	__atomic_store_n(&hdr->prod, prod, __ATOMIC_RELEASE);
	doorbell_ring(qp->db);
	return 0;
fail:
	*bad_wr = wr;
	return err;
}

/* The variants of post_one_in, one per kind of QP, chosen at creation
 * (sv_qp_init_post) so that each pays only for what it is: a mailbox (mb),
 * the direct path (RC and UC only), UD. */
#define SV_POST_ONE(name, mb, direct, ud)                                    \
	static __attribute__((noinline)) int                                 \
	name(struct sv_qp *qp, struct ibv_send_wr *wr,                       \
	     struct ibv_send_wr **bad_wr)                                    \
	{                                                                    \
		return post_one_in(qp, wr, bad_wr, mb, direct, ud);          \
	}
SV_POST_ONE(post_one, false, false, false)
SV_POST_ONE(post_one_mb, true, false, false)
SV_POST_ONE(post_one_ud, false, false, true)
SV_POST_ONE(post_one_mb_ud, true, false, true)
/* The QPs the direct path may serve (direct.c): the same, and WRITEs and
 * READs run here when they can. */
SV_POST_ONE(post_one_direct, false, true, false)
SV_POST_ONE(post_one_mb_direct, true, true, false)
#undef SV_POST_ONE

void sv_qp_init_post(struct sv_qp *qp, enum ibv_qp_type type)
{
	if (qp->direct_ops)        /* RC and UC only (sv_direct_ops) */
		qp->post_one = qp->mailbox ? post_one_mb_direct :
					     post_one_direct;
	else if (type == IBV_QPT_UD)
		qp->post_one = qp->mailbox ? post_one_mb_ud : post_one_ud;
	else
		qp->post_one = qp->mailbox ? post_one_mb : post_one;
	qp->fast_inline = qp->sq.max_inline < 16 ? qp->sq.max_inline : 16;
	qp->fast_ops = 0;
	for (uint32_t op = 0; op < SV_OP_COUNT && op < 32; op++)
		if (sv_send_opcode_fast(type, (enum ibv_wr_opcode)op))
			qp->fast_ops |= 1u << op;
}

/*
 * A checked memory-management WR (SV_OPF_MM) into its slot: its own checks
 * (0 or EINVAL), then every byte of the header; it has no SGEs (num_sge and
 * sg_list are ignored). BIND_MW and FAST_REG_MR update the window's or the
 * MR's keys, as posted. exp: wr is a struct ibv_exp_send_wr.
 */
static __attribute__((noinline)) int put_mm(const struct sv_qp *qp,
					    struct sv_send_wqe *w,
					    const struct ibv_send_wr *wr,
					    uint32_t op, unsigned int flags,
					    bool exp)
{
	const struct ibv_context *ctx = qp->ex.qp_base.context;

	switch (op) {
	case IBV_WR_LOCAL_INV:
		sv_wqe_head(w, wr->wr_id, op, flags, wr->invalidate_rkey, 0);
		memset(&w->reg, 0, sizeof(w->reg));
		return 0;
	case IBV_WR_BIND_MW:
		if (sv_bind_wr_check(ctx, wr->bind_mw.mw, wr->bind_mw.rkey,
				     &wr->bind_mw.bind_info))
			return EINVAL;
		sv_wqe_head(w, wr->wr_id, op, flags, 0, 0);
		sv_fill_bind(w, wr->bind_mw.rkey, &wr->bind_mw.bind_info, 0);
		wr->bind_mw.mw->rkey = wr->bind_mw.rkey;
		return 0;
	case SV_WR_FAST_REG_MR:
		if (exp) {
			const struct ibv_exp_send_wr *x =
				(const struct ibv_exp_send_wr *)wr;
			const struct ibv_exp_fast_reg_attr a = {
				.page_list = x->fast_reg.page_list,
				.page_size = x->fast_reg.page_size,
				.page_list_len = x->fast_reg.page_list_len,
				.first_byte_offset =
					x->fast_reg.first_byte_offset,
				.length = x->fast_reg.length,
				.iova_start = x->fast_reg.iova_start,
				.access_flags = x->fast_reg.access_flags,
				.flags = x->fast_reg.flags,
			};

			sv_wqe_head(w, wr->wr_id, op, flags, 0, 0);
			return sv_fill_fast_reg(w, ctx, x->fast_reg.mr,
						x->fast_reg.key, &a);
		}
		return EINVAL;
	default:
		return EINVAL;
	}
}

/*
 * A checked masked atomic (op_masked, from ibv_exp_post_send) into its
 * slot: 8-byte operands only (EINVAL otherwise); the SGEs as for any WR,
 * then sv_fill_masked.
 */
static __attribute__((noinline)) int
put_masked(struct ibv_context *ctx, enum ibv_qp_type type,
	   struct sv_send_wqe *w, const struct ibv_send_wr *wr, uint32_t op,
	   unsigned int flags, int num_sge, const struct ibv_sge *sgl)
{
	const struct ibv_exp_send_wr *x = (const struct ibv_exp_send_wr *)wr;
	const __typeof__(x->ext_op.masked_atomics) *a =
		&x->ext_op.masked_atomics;
	bool cas = op == SV_WR_MASKED_CMP_SWAP;
	int err = sv_masked_check(ctx);

	if (err)
		return err;
	if (a->log_arg_sz != 3)
		return EINVAL;
	fill_send(type, w, wr, op, flags, num_sge, sgl, false, 0);
	sv_fill_masked(w, a->rkey, a->remote_addr,
		       cas ? &a->wr_data.inline_data.op.cmp_swap : NULL,
		       cas ? NULL : &a->wr_data.inline_data.op.fetch_add);
	return 0;
}

/*
 * The direct path (direct.c) for a list: wr (checked, a direct opcode) and
 * the WRs after it that are checked and direct too, up to SV_DIRECT_LIST,
 * run here as far as they can: the last WR that ran, or NULL when none did.
 * (Those checked here and not run are checked again on their way to the
 * ring.)
 */
static __attribute__((noinline)) struct ibv_send_wr *
direct_run(struct sv_qp *qp, enum ibv_qp_type type, struct ibv_send_wr *wr,
	   bool exp)
{
	struct ibv_send_wr *run[SV_DIRECT_LIST];
	unsigned int n = 0, done;

	run[n++] = wr;
	for (wr = wr->next; wr && n < SV_DIRECT_LIST; wr = wr->next) {
		uint32_t op = exp ? sv_exp_wqe_op((uint32_t)wr->opcode) :
				    (uint32_t)wr->opcode;
		uint32_t ilen = 0;

		if (op >= 32 || !(qp->direct_ops & (1u << op)) ||
		    check_send(qp, type, wr, op, wr->send_flags, wr->num_sge,
			       wr->sg_list, wr_inline(op, wr->send_flags),
			       &ilen, exp))
			break;
		run[n++] = wr;
	}
	done = sv_direct_post_many(qp, run, n);
	return done ? run[done - 1] : NULL;
}

/* Any list of WRs (and the single WRs post_one leaves), under the SQ lock:
 * each checked and copied into the next free slot; one release store of
 * prod and one doorbell for all of them. exp: the list is of struct
 * ibv_exp_send_wr (ibv_exp_post_send), whose head is a struct ibv_send_wr. */
static int post_list(struct sv_qp *qp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr, bool exp)
{
	enum ibv_qp_type type = qp->ex.qp_base.qp_type;
	struct sv_wq_ring *hdr;
	uint32_t prod, start, mask, stride, room = 0;
	int err = 0;

	hdr = qp->sq.hdr;
	mask = qp->sq.entries - 1;
	stride = qp->sq.stride;
	prod = start = qp->sq.prod;
	for (; wr; wr = wr->next) {
		uint32_t op = exp ? sv_exp_wqe_op((uint32_t)wr->opcode) :
				    (uint32_t)wr->opcode;
		unsigned int flags = wr->send_flags;
		int num_sge = wr->num_sge;
		const struct ibv_sge *sgl = wr->sg_list;
		bool inl = wr_inline(op, flags);
		uint32_t ilen = 0;
		struct sv_send_wqe *slot;

		err = check_send(qp, type, wr, op, flags, num_sge, sgl, inl,
				 &ilen, exp);
		if (err)
			break;
		/* direct (direct.c) while nothing of this list is queued */
		if (unlikely(qp->direct_ops) && prod == start && op < 32 &&
		    (qp->direct_ops & (1u << op))) {
			struct ibv_send_wr *last = direct_run(qp, type, wr, exp);

			if (last) {
				wr = last;      /* the loop moves past it */
				continue;
			}
		}
		if (!room) {
			room = sq_room(qp, prod);
			if (!room) {
				err = ENOMEM;
				break;
			}
		}
		slot = (struct sv_send_wqe *)((char *)hdr + SV_RING_HDR_BYTES +
					      (size_t)(prod & mask) * stride);
		if (unlikely(sv_send_opcode_mm(op))) {
			err = put_mm(qp, slot, wr, op, flags, exp);
			if (err)
				break;
		} else if (unlikely(op_masked(op_flags(op)))) {
			/* only ibv_exp_post_send gets here (check_send) */
			err = put_masked(qp->ex.qp_base.context, type, slot,
					 wr, op, flags, num_sge, sgl);
			if (err)
				break;
		} else {
			fill_send(type, slot, wr, op, flags, num_sge, sgl, inl,
				  ilen);
		}
		prod++;
		room--;
	}
	if (prod != start) {
		qp->sq.prod = prod;
		/* the mailbox's copy is older than these: none, so that it
		 * never names a WQE again once prod wraps (sv_qp.h) */
		if (unlikely(qp->mailbox))
			__atomic_store_n(&hdr->mb_seq, 0, __ATOMIC_RELAXED);
		/* release: the slots are written before the device sees prod */
		__atomic_store_n(&hdr->prod, prod, __ATOMIC_RELEASE);
		doorbell_ring(qp->db);
	}
	if (err)
		*bad_wr = wr;
	return err;
}

int sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		 struct ibv_send_wr **bad_wr)
{
	struct sv_qp *qp = to_sv_qp(ibqp);
	int err;

	if (unlikely(!sv_qp_send_state_ok(qp) || sv_ctx_dead(ibqp->context))) {
		*bad_wr = wr;
		return sv_post_refusal(qp);
	}
	sv_sq_lock(qp);
	if (likely(wr && !wr->next))
		err = qp->post_one(qp, wr, bad_wr); /* post_one or post_one_mb */
	else
		err = post_list(qp, wr, bad_wr, false);
	sv_sq_unlock(qp);
	return err;
}

/* struct ibv_exp_send_wr begins as struct ibv_send_wr: post_list reads an
 * exp list through that head, and the extension behind it. */
#define EXP_SAME(f)                                                          \
	_Static_assert(offsetof(struct ibv_send_wr, f) ==                    \
			       offsetof(struct ibv_exp_send_wr, f) &&        \
		       sizeof(((struct ibv_send_wr *)0)->f) ==               \
			       sizeof(((struct ibv_exp_send_wr *)0)->f),     \
		       "exp wr field " #f)
EXP_SAME(wr_id);
EXP_SAME(next);
EXP_SAME(sg_list);
EXP_SAME(num_sge);
EXP_SAME(imm_data);
EXP_SAME(invalidate_rkey);
EXP_SAME(wr.rdma);
EXP_SAME(wr.atomic);
EXP_SAME(wr.ud);
EXP_SAME(qp_type.xrc);
EXP_SAME(bind_mw);
EXP_SAME(tso);
_Static_assert(offsetof(struct ibv_send_wr, opcode) ==
		       offsetof(struct ibv_exp_send_wr, exp_opcode) &&
	       sizeof(enum ibv_wr_opcode) == sizeof(enum ibv_exp_wr_opcode),
	       "exp wr opcode");
_Static_assert(offsetof(struct ibv_send_wr, send_flags) ==
		       offsetof(struct ibv_exp_send_wr, exp_send_flags) &&
	       sizeof(((struct ibv_send_wr *)0)->send_flags) ==
		       sizeof(((struct ibv_exp_send_wr *)0)->exp_send_flags),
	       "exp wr flags");
_Static_assert(offsetof(struct ibv_exp_send_wr, fast_reg) >=
		       sizeof(struct ibv_send_wr),
	       "exp wr extension");
#undef EXP_SAME

/* include/softverbs/softverbs.h: ibv_post_send for both kinds of WR */
SV_EXPORT int ibv_exp_post_send(struct ibv_qp *ibqp, struct ibv_exp_send_wr *wr,
				struct ibv_exp_send_wr **bad_wr)
{
	struct sv_qp *qp = to_sv_qp(ibqp);
	struct ibv_send_wr *bad = NULL;
	int err;

	if (unlikely(!sv_qp_send_state_ok(qp) || sv_ctx_dead(ibqp->context))) {
		*bad_wr = wr;
		return sv_post_refusal(qp);
	}
	sv_sq_lock(qp);
	err = post_list(qp, (struct ibv_send_wr *)wr, &bad, true);
	sv_sq_unlock(qp);
	if (err)
		*bad_wr = (struct ibv_exp_send_wr *)bad;
	return err;
}

/* Check a receive WR against its ring and copy it into the slot at
 * wq->prod: 0, EINVAL or ENOMEM (the caller holds the ring's lock). */
static int put_recv(struct sv_wq *wq, uint32_t max_wr,
		    const struct ibv_recv_wr *wr, const struct sv_qp *qp,
		    struct sv_srq *srq)
{
	struct sv_recv_wqe *w;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	/* (WQEs taken by senders of this host free their slots before the
	 * device's cons says so) */
	if (!sv_wq_has_room(wq, max_wr) &&
	    !(srq ? sv_direct_srq_room(srq, max_wr) :
		    sv_direct_rq_room(qp, max_wr)))
		return ENOMEM;
	w = sv_wq_slot_at(wq, wq->prod);
	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	w->rsvd = 0;
	if (wr->num_sge) /* sg_list may be NULL without SGEs */
		memcpy((char *)w + SV_RECV_WQE_HDR, wr->sg_list,
		       (size_t)wr->num_sge * sizeof(struct sv_wqe_sge));
	wq->prod++;
	return 0;
}

int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad_wr)
{
	struct sv_qp *qp = to_sv_qp(ibqp);
	uint32_t start;
	int err = 0;

	/* receives of a QP with an SRQ are posted to the SRQ */
	if (ibqp->srq || !sv_qp_recv_state_ok(qp)) {
		*bad_wr = wr;
		return EINVAL;
	}
	if (unlikely(sv_ctx_dead(ibqp->context))) {
		*bad_wr = wr;
		return EIO; /* as a NIC in its fatal state */
	}
	sv_rq_lock(qp);
	start = qp->rq.prod;
	for (; wr; wr = wr->next) {
		err = put_recv(&qp->rq, qp->max_recv_wr, wr, qp, NULL);
		if (err)
			break;
	}
	/* rung in ERR: the engine flushes the new receives */
	if (qp->rq.prod != start)
		sv_rq_publish(&qp->rq, qp->db);
	sv_rq_unlock(qp);
	if (err)
		*bad_wr = wr;
	return err;
}

int sv_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr)
{
	struct sv_srq *srq = to_sv_srq(ibsrq);
	uint32_t start;
	int err = 0;

	if (unlikely(sv_ctx_dead(ibsrq->context))) {
		*bad_wr = wr;
		return EIO; /* as a NIC in its fatal state */
	}
	sv_spin_lock(&srq->lock);
	start = srq->rq.prod;
	for (; wr; wr = wr->next) {
		err = put_recv(&srq->rq, srq->max_wr, wr, NULL, srq);
		if (err)
			break;
	}
	/* an engine has nothing to do with a basic SRQ's new receives
	 * (whoever delivers a message takes them, and a sender at RNR
	 * retries on its own timer, as for a QP's own receive queue:
	 * sv_rq_publish); a tag-matching SRQ's engine is rung */
	if (srq->rq.prod != start) {
		if (srq->tm_ops.hdr)
			sv_wq_publish(&srq->rq, srq->db);
		else
			__atomic_store_n(&srq->rq.hdr->prod, srq->rq.prod,
					 __ATOMIC_RELEASE);
	}
	sv_spin_unlock(&srq->lock);
	if (err)
		*bad_wr = wr;
	return err;
}
