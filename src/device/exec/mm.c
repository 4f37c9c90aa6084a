// SPDX-License-Identifier: MIT
/*
 * Memory-management extensions: how a key becomes memory (sv_lkey_map,
 * sv_rkey_map, sv_mr_iov) and the work requests that change what a key
 * grants (fast register, invalidate, bind). See mm.h for the semantics.
 *
 * Everything here runs under sv_dev.lock, never allocates and never makes a
 * system call: it is on the engine's path. The objects' commands are in
 * mem.c and mw.c.
 *
 * An MR's bytes are contiguous (nblocks 0: byte o at addr + o) or runs of a
 * list (blocks): byte o is at list position fbo + o; a run holds positions
 * [start, next start). Adjacent runs are merged when the list is loaded, so
 * a list of consecutive pages costs one run, and a run is found by binary
 * search over the starts.
 */
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

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

/* Is [addr, addr + len) inside [base, base + size)? Never overflows. */
static inline bool in_range(uint64_t base, uint64_t size, uint64_t addr,
			    uint64_t len)
{
	return addr >= base && len <= size && addr - base <= size - len;
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

/* ---- translation ---- */

/* The run holding list position p (< the list's total): the last one whose
 * start is <= p. */
static uint32_t run_find(const struct sv_mr *mr, uint64_t p)
{
	const struct sv_mr_block *b = mr->blocks;
	uint32_t lo = 0, hi = mr->nblocks;     /* b[lo].start <= p < b[hi].start */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (b[mid].start <= p)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

unsigned int sv_mr_iov(const struct sv_mr *mr, uint64_t off, uint64_t len,
		       struct iovec *iov, unsigned int max, uint64_t *done)
{
	const struct sv_mr_block *b = mr->blocks;
	uint64_t p, left;
	unsigned int k = 0;
	uint32_t i;

	*done = 0;
	if (off >= mr->length || !len || !max)
		return 0;
	if (len > mr->length - off)
		len = mr->length - off;
	if (!mr->nblocks) {
		iov[0].iov_base = (void *)(uintptr_t)(mr->addr + off);
		iov[0].iov_len = len;
		*done = len;
		return 1;
	}
	p = mr->fbo + off;
	left = len;
	for (i = run_find(mr, p); left && k < max && i < mr->nblocks; i++) {
		uint64_t take = b[i + 1].start - p;

		if (take > left)
			take = left;
		iov[k].iov_base = (void *)(uintptr_t)(b[i].addr +
						      (p - b[i].start));
		iov[k].iov_len = take;
		k++;
		p += take;
		left -= take;
	}
	*done = len - left;
	return k;
}

/* The valid MR whose key is exactly key. */
static const struct sv_mr *mr_valid(uint32_t key)
{
	unsigned int kind;
	const struct sv_mr *mr = sv_keytab_find(&sv_dev.keys, key, &kind);

	if (!mr || kind != SV_KEY_MR || mr->invalid)
		return NULL;
	return mr;
}

uint32_t sv_lkey_map(uint32_t lkey, const struct sv_pd *pd, uint64_t addr,
		     uint64_t len, bool write, struct sv_map *out)
{
	const struct sv_mr *mr = mr_valid(lkey);

	if (!mr || mr->pd != pd || !in_range(mr->iova, mr->length, addr, len) ||
	    (write && !(mr->access & IBV_ACCESS_LOCAL_WRITE))) {
		if (!mr)
			sv_why_set("lkey %#x names no valid MR", lkey);
		else if (mr->pd != pd)
			sv_why_set("lkey %#x: its MR is of another PD", lkey);
		else if (!in_range(mr->iova, mr->length, addr, len))
			sv_why_set("lkey %#x: [%#llx, +%llu) is outside its MR "
				   "[%#llx, +%llu)", lkey,
				   (unsigned long long)addr,
				   (unsigned long long)len,
				   (unsigned long long)mr->iova,
				   (unsigned long long)mr->length);
		else
			sv_why_set("lkey %#x: its MR has no LOCAL_WRITE, and "
				   "this writes into it", lkey);
		return IBV_WC_LOC_PROT_ERR;
	}
	out->mr = mr;
	out->off = addr - mr->iova;
	out->len = len;
	out->pid = mr->owner->pid;
	return IBV_WC_SUCCESS;
}

/* Does a bound window's type let responder t use it? */
static bool mw_grants_to(const struct sv_mw *mw, const struct sv_qp *t)
{
	switch (mw->type) {
	case SV_MW_TYPE_1:
		return mw->pd == t->pd;
	case SV_MW_TYPE_2A:
		return mw->qpn == t->qpn;
	case SV_MW_TYPE_2B:
		return mw->qpn == t->qpn && mw->pd == t->pd;
	default:
		return false;
	}
}

/* Why an rkey check failed (only then: softverbs why). */
static __attribute__((noinline, cold)) void
rkey_why(uint32_t rkey, const char *what, bool invalid, bool other,
	 uint32_t has, uint32_t need, uint64_t base, uint64_t length,
	 uint64_t addr, uint64_t len)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} rights[] = {
		{ IBV_ACCESS_REMOTE_WRITE, "REMOTE_WRITE" },
		{ IBV_ACCESS_REMOTE_READ, "REMOTE_READ" },
		{ IBV_ACCESS_REMOTE_ATOMIC, "REMOTE_ATOMIC" },
	};

	if (invalid) {
		sv_why_set("rkey %#x: its %s is invalidated", rkey, what);
	} else if (other) {
		sv_why_set("rkey %#x: its %s is not this QP's (another PD, or "
			   "a window bound to another QP)", rkey, what);
	} else if ((has & need) != need) {
		const char *lack = "a right";

		for (size_t i = 0; i < sizeof(rights) / sizeof(rights[0]); i++)
			if ((need & rights[i].bit) && !(has & rights[i].bit))
				lack = rights[i].name;
		sv_why_set("rkey %#x: its %s lacks %s", rkey, what, lack);
	} else {
		sv_why_set("rkey %#x: [%#llx, +%llu) is outside its %s "
			   "[%#llx, +%llu)", rkey, (unsigned long long)addr,
			   (unsigned long long)len, what,
			   (unsigned long long)base,
			   (unsigned long long)length);
	}
}

bool sv_rkey_map(uint32_t rkey, const struct sv_qp *t, uint64_t addr,
		 uint64_t len, uint32_t access, struct sv_map *out)
{
	unsigned int kind;
	const void *obj = sv_keytab_find(&sv_dev.keys, rkey, &kind);

	if (!obj || !access) {
		sv_why_set("rkey %#x names no MR or window", rkey);
		return false;
	}
	if (kind == SV_KEY_MR) {
		const struct sv_mr *mr = obj;

		if (mr->invalid || mr->pd != t->pd ||
		    (mr->access & access) != access ||
		    !in_range(mr->iova, mr->length, addr, len)) {
			rkey_why(rkey, "MR", mr->invalid, mr->pd != t->pd,
				 mr->access, access, mr->iova, mr->length,
				 addr, len);
			return false;
		}
		out->mr = mr;
		out->off = addr - mr->iova;
	} else {
		const struct sv_mw *mw = obj;
		const struct sv_mr *mr = mw->mr;

		if (!mw->bound || !mw_grants_to(mw, t) ||
		    (mw->access & access) != access ||
		    !in_range(mw->iova, mw->length, addr, len) ||
		    mr->invalid || mr->gen != mw->mr_gen) {
			if (!mw->bound)
				sv_why_set("rkey %#x: the window is not bound",
					   rkey);
			else
				rkey_why(rkey, "window", mr->invalid ||
					 mr->gen != mw->mr_gen,
					 !mw_grants_to(mw, t), mw->access,
					 access, mw->iova, mw->length, addr,
					 len);
			return false;
		}
		out->mr = mr;
		out->off = mw->off + (addr - mw->iova);
	}
	out->len = len;
	out->pid = out->mr->owner->pid;
	return true;
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
		    !in_range(mr->iova, mr->length, reg->iova, reg->length) ||
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
