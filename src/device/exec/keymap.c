// SPDX-License-Identifier: MIT
/*
 * The key check: how an lkey or an rkey becomes memory (sv_lkey_map,
 * sv_rkey_map) and how the range it grants becomes iovecs of its owner
 * (sv_mr_iov). See keymap.h for the rules. Every local SGE and every
 * remote access of every transport passes here (span.c, loop/, roce/), and
 * the direct path's tables publish what these checks would find
 * (ctl/direct.c). The work requests that change what a key grants (fast
 * register, invalidate, bind) are mm.c's.
 *
 * Everything here runs under sv_dev.lock, never allocates and never makes a
 * system call: it is on the engine's path. A failed check says why
 * (sv_why_set, diag/why.c), only on failure.
 */
#include <infiniband/verbs.h>

#include "device/exec/keymap.h"
#include "device/sv_dev.h"

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

	if (!mr || mr->pd != pd || !sv_in_range(mr->iova, mr->length, addr, len) ||
	    (write && !(mr->access & IBV_ACCESS_LOCAL_WRITE))) {
		if (!mr)
			sv_why_set("lkey %#x names no valid MR", lkey);
		else if (mr->pd != pd)
			sv_why_set("lkey %#x: its MR is of another PD", lkey);
		else if (!sv_in_range(mr->iova, mr->length, addr, len))
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
		    !sv_in_range(mr->iova, mr->length, addr, len)) {
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
		    !sv_in_range(mw->iova, mw->length, addr, len) ||
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
