// SPDX-License-Identifier: MIT
/*
 * Memory-management extensions: the work requests that change what a key
 * grants (fast register, invalidate, bind) and the loading of a block list
 * they and REG_MR_LIST share. See mm.h for the semantics; how a key becomes
 * memory (sv_lkey_map, sv_rkey_map, sv_mr_iov) is keymap.c's.
 *
 * Everything here runs under sv_dev.lock, never allocates and never makes a
 * system call: it is on the engine's path. The objects' commands are in
 * ctl/mem.c and ctl/mw.c.
 *
 * An MR's bytes are contiguous (nblocks 0: byte o at addr + o) or runs of a
 * list (blocks): byte o is at list position fbo + o; a run holds positions
 * [start, next start). Adjacent runs are merged when the list is loaded, so
 * a list of consecutive pages costs one run (keymap.c finds a run by binary
 * search over the starts).
 */
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "device/exec/keymap.h"
#include "device/exec/mm.h"
#include "device/sv_dev.h"

#define MR_ACCESS_SUPPORTED                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                 \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING |                 \
	 SV_ACCESS_FLUSH_GLOBAL | SV_ACCESS_FLUSH_PERSISTENT)

#define MW_ACCESS_SUPPORTED                                                  \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |                   \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED)

/* Rights of the MR itself, meaningless in a bind (the IBTA gives a window
 * remote rights only): rdma-core's providers (rxe, mlx5) accept them
 * there and ignore them, and so does the device. */
#define MW_ACCESS_IGNORED (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)

#define NEEDS_LOCAL_WRITE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

#define PAGE_SHIFT_MIN 12
#define PAGE_SHIFT_MAX 30

int sv_mr_access_check(uint32_t access, const char **why)
{
	if (access & ~(uint32_t)MR_ACCESS_SUPPORTED) {
		*why = "unknown access flags";
		return -EINVAL;
	}
	/* no persistent memory here (what rxe says for memory that is not
	 * pmem) */
	if (access & SV_ACCESS_FLUSH_PERSISTENT) {
		*why = "no persistent memory: FLUSH_PERSISTENT";
		return -EOPNOTSUPP;
	}
	/* IBTA 10.6.3.1: remote write or atomic needs local write */
	if ((access & NEEDS_LOCAL_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
		*why = "remote write/atomic without local write";
		return -EINVAL;
	}
	return 0;
}

/* ---- loading a list ---- */

/* One entry of the shared list, read once (the client may change it at any
 * time: only the private copy is checked and used). */
static inline uint64_t list_word(const struct sv_page_list *pl, size_t i)
{
	return __atomic_load_n(&((const uint64_t *)pl->map)[i],
			       __ATOMIC_RELAXED);
}

/* Append the run [addr, addr + len) at list position *total. */
static void runs_add(struct sv_mr *mr, uint32_t *nb, uint64_t *total,
		     uint64_t addr, uint64_t len)
{
	struct sv_mr_block *b = mr->blocks;

	if (*nb && b[*nb - 1].addr + (*total - b[*nb - 1].start) == addr) {
		*total += len;          /* continues the previous run */
		return;
	}
	b[*nb].addr = addr;
	b[*nb].start = *total;
	(*nb)++;
	*total += len;
}

int sv_mr_load_list(struct sv_mr *mr, const struct sv_page_list *pl,
		    uint32_t n, uint32_t fbo, uint64_t length,
		    uint32_t page_shift, uint32_t flags, const char **why)
{
	bool blocks = flags & SV_REG_BLOCKS;
	uint64_t total = 0, psize = 0;
	uint32_t nb = 0;

	mr->nblocks = 0;
	if (flags & ~SV_REG_BLOCKS) {
		*why = "unknown list flags";
		return -EINVAL;
	}
	if (!n || n > mr->max_blocks || n > pl->max_entries) {
		*why = "list length out of range";
		return -EINVAL;
	}
	if (!length || length > SV_MAX_MR_SIZE) {
		*why = "length out of range";
		return -EINVAL;
	}
	if (!blocks) {
		if (page_shift < PAGE_SHIFT_MIN || page_shift > PAGE_SHIFT_MAX) {
			*why = "page size out of range";
			return -EINVAL;
		}
		psize = 1ull << page_shift;
		/* n <= 2^16 pages of <= 2^30 bytes: no overflow */
		if (fbo >= psize || fbo + length > (uint64_t)n * psize) {
			*why = "first byte offset or length outside the pages";
			return -EINVAL;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t addr, len;

		if (blocks) {
			addr = list_word(pl, 2 * (size_t)i);
			len = list_word(pl, 2 * (size_t)i + 1);
			if (!len || len > SV_MAX_MR_SIZE) {
				*why = "block length out of range";
				return -EINVAL;
			}
		} else {
			addr = list_word(pl, i);
			len = psize;
			if (addr & (psize - 1)) {
				*why = "page address not aligned to the page size";
				return -EINVAL;
			}
		}
		if (len > UINT64_MAX - addr) {
			*why = "block wraps";
			return -EINVAL;
		}
		/* total <= 2^16 * 2^47: no overflow */
		runs_add(mr, &nb, &total, addr, len);
	}
	if ((uint64_t)fbo + length > total) {
		*why = "first byte offset and length beyond the blocks";
		return -EINVAL;
	}
	mr->blocks[nb].addr = 0;
	mr->blocks[nb].start = total;
	mr->nblocks = nb;
	mr->fbo = fbo;
	return 0;
}

/* ---- the work requests ---- */

uint32_t sv_mm_fast_reg(struct sv_qp *qp, const struct sv_wqe_reg *reg,
			uint32_t n)
{
	struct sv_mr *mr = sv_keytab_by_index(&sv_dev.keys, reg->key,
					      SV_KEY_MR);
	const struct sv_page_list *pl;
	const char *why;
	uint32_t key;

	if (!mr || mr->kind != SV_MR_FAST_REG || mr->pd != qp->pd ||
	    !mr->invalid)
		return IBV_WC_LOC_QP_OP_ERR;
	pl = sv_objtab_lookup(sv_client_tab(qp->owner, reg->list),
			      reg->list, SV_OBJ_PAGE_LIST);
	if (!pl || sv_mr_access_check(reg->access, &why))
		return IBV_WC_LOC_QP_OP_ERR;
	if (!(reg->access & IBV_ACCESS_ZERO_BASED) &&
	    reg->length > UINT64_MAX - reg->iova)
		return IBV_WC_LOC_QP_OP_ERR;
	if (sv_mr_load_list(mr, pl, n, reg->fbo, reg->length, reg->page_shift,
			    reg->flags, &why))
		return IBV_WC_LOC_QP_OP_ERR;
	if (sv_keytab_rekey(&sv_dev.keys, mr->key,
			    (uint8_t)SV_KEY_CONSUMER(reg->key), &key))
		return IBV_WC_LOC_QP_OP_ERR;   /* cannot happen: the slot is live */
	mr->key = key;
	mr->length = reg->length;
	mr->iova = (reg->access & IBV_ACCESS_ZERO_BASED) ? 0 : reg->iova;
	mr->access = reg->access;
	mr->addr = mr->blocks[0].addr;
	mr->gen++;
	mr->invalid = false;
	return IBV_WC_SUCCESS;
}

void sv_mw_unbind(struct sv_mw *mw)
{
	if (!mw->bound)
		return;
	mw->mr->mw_bound--;
	mw->mr = NULL;
	mw->bound = false;
	mw->qpn = 0;
}

/*
 * Can queue pair q invalidate key (locally, or as the responder of a
 * SEND_WITH_INV)? IBV_WC_SUCCESS and the object, or the error status.
 */
static uint32_t inv_check(const struct sv_qp *q, uint32_t key, void **obj,
			  unsigned int *kind)
{
	*obj = sv_keytab_find(&sv_dev.keys, key, kind);
	if (!*obj)
		return IBV_WC_LOC_QP_OP_ERR;
	if (*kind == SV_KEY_MR) {
		const struct sv_mr *mr = *obj;

		if (mr->kind != SV_MR_FAST_REG || mr->invalid || mr->pd != q->pd)
			return IBV_WC_LOC_QP_OP_ERR;
	} else {
		const struct sv_mw *mw = *obj;

		if (mw->type == SV_MW_TYPE_1)
			return IBV_WC_MW_BIND_ERR;
		if (!mw->bound || mw->pd != q->pd || mw->qpn != q->qpn)
			return IBV_WC_LOC_QP_OP_ERR;
	}
	return IBV_WC_SUCCESS;
}

static void inv_do(void *obj, unsigned int kind)
{
	if (kind == SV_KEY_MR)
		((struct sv_mr *)obj)->invalid = true;
	else
		sv_mw_unbind(obj);
}

uint32_t sv_mm_local_inv(struct sv_qp *qp, uint32_t key)
{
	unsigned int kind;
	void *obj;
	uint32_t st = inv_check(qp, key, &obj, &kind);

	if (st == IBV_WC_SUCCESS)
		inv_do(obj, kind);
	return st;
}

bool sv_mm_remote_inv_ok(const struct sv_qp *t, uint32_t rkey)
{
	unsigned int kind;
	void *obj;

	return inv_check(t, rkey, &obj, &kind) == IBV_WC_SUCCESS;
}

void sv_mm_remote_inv(struct sv_qp *t, uint32_t rkey)
{
	unsigned int kind;
	void *obj;

	if (inv_check(t, rkey, &obj, &kind) == IBV_WC_SUCCESS)
		inv_do(obj, kind);
}

uint32_t sv_mm_bind_mw(struct sv_qp *qp, const struct sv_wqe_reg *reg)
{
	struct sv_mw *mw = sv_keytab_by_index(&sv_dev.keys, reg->key,
					      SV_KEY_MW);
	bool type1 = reg->flags & SV_REG_TYPE1;
	uint32_t access = reg->access & ~(uint32_t)MW_ACCESS_IGNORED;
	struct sv_mr *mr = NULL;
	unsigned int kind;
	uint32_t key;

	if (!mw || mw->owner != qp->owner || mw->pd != qp->pd ||
	    (reg->flags & ~SV_REG_TYPE1) ||
	    (mw->type == SV_MW_TYPE_1) != type1 ||
	    (!type1 && mw->bound) ||
	    (access & ~(uint32_t)MW_ACCESS_SUPPORTED))
		return IBV_WC_MW_BIND_ERR;
	if (!type1 || reg->length) {
		if (reg->list > UINT32_MAX)
			return IBV_WC_MW_BIND_ERR;
		mr = sv_keytab_find(&sv_dev.keys, (uint32_t)reg->list, &kind);
		if (!mr || kind != SV_KEY_MR || mr->invalid ||
		    mr->pd != qp->pd || !(mr->access & IBV_ACCESS_MW_BIND) ||
		    !sv_in_range(mr->iova, mr->length, reg->iova, reg->length) ||
		    ((access & NEEDS_LOCAL_WRITE) &&
		     !(mr->access & IBV_ACCESS_LOCAL_WRITE)))
			return IBV_WC_MW_BIND_ERR;
	}
	if (sv_keytab_rekey(&sv_dev.keys, mw->key,
			    (uint8_t)SV_KEY_CONSUMER(reg->key), &key))
		return IBV_WC_MW_BIND_ERR;     /* cannot happen: the slot is live */
	mw->key = key;
	sv_mw_unbind(mw);                      /* type 1: the old binding ends */
	if (!mr)
		return IBV_WC_SUCCESS;         /* type 1, length 0: unbound */
	mw->bound = true;
	mw->mr = mr;
	mr->mw_bound++;
	mw->mr_gen = mr->gen;
	mw->qpn = type1 ? 0 : qp->qpn;
	mw->access = access;
	mw->length = reg->length;
	mw->off = reg->iova - mr->iova;
	mw->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : reg->iova;
	return IBV_WC_SUCCESS;
}
