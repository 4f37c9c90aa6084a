// SPDX-License-Identifier: MIT
/*
 * Thread domains and parent domains (rdma-core's upstream form of resource
 * domains).
 *
 * A thread domain is the application's promise that the objects made with
 * it are used by one thread at a time. A parent domain is a protection
 * domain (the daemon's PD of its parent, by the same handle, so MRs, AHs and
 * SRQs work on it unchanged) that carries a thread domain: QPs made on it
 * (ibv_create_qp_ex) and CQs made with it (ibv_create_cq_ex,
 * IBV_CQ_INIT_ATTR_MASK_PD) post and poll without locks.
 *
 * Not yet: a thread domain does not get a doorbell page and an engine of its
 * own (docs/DESIGN.md, "Next: resource domains"); the allocator callbacks
 * are kept but not called, since ring memory is the daemon's.
 */
#include <errno.h>
#include <stdlib.h>

#include "verbs/sv_verbs.h"

struct ibv_td *sv_alloc_td(struct ibv_context *context,
			   struct ibv_td_init_attr *attr)
{
	struct sv_td *td;

	if (!attr || attr->comp_mask)
		return sv_err_ptr(-EINVAL);
	td = calloc(1, sizeof(*td));
	if (!td)
		return sv_err_ptr(-ENOMEM);
	td->ibtd.context = context;
	return &td->ibtd;
}

int sv_dealloc_td(struct ibv_td *ibtd)
{
	struct sv_td *td = (struct sv_td *)ibtd;

	if (__atomic_load_n(&td->refs, __ATOMIC_ACQUIRE))
		return EBUSY;
	free(td);
	return 0;
}

struct ibv_pd *sv_alloc_parent_domain(struct ibv_context *context,
				      struct ibv_parent_domain_init_attr *attr)
{
	struct sv_pd *pd, *parent;

	if (!attr || !attr->pd || attr->pd->context != context ||
	    (attr->td && attr->td->context != context))
		return sv_err_ptr(-EINVAL);
	if (attr->comp_mask & ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
					  IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT))
		return sv_err_ptr(-EINVAL);
	if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!attr->alloc || !attr->free))
		return sv_err_ptr(-EINVAL);
	parent = (struct sv_pd *)attr->pd;
	if (parent->parent)
		return sv_err_ptr(-EINVAL); /* a parent domain of a parent domain */
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return sv_err_ptr(-ENOMEM);
	pd->ibpd.context = context;
	pd->ibpd.handle = parent->ibpd.handle;
	pd->handle = parent->handle;
	pd->parent = parent;
	pd->td = (struct sv_td *)attr->td;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	__atomic_fetch_add(&parent->refs, 1, __ATOMIC_ACQ_REL);
	if (pd->td)
		__atomic_fetch_add(&pd->td->refs, 1, __ATOMIC_ACQ_REL);
	return &pd->ibpd;
}

int sv_dealloc_parent_domain(struct sv_pd *pd)
{
	if (!pd->parent)
		return __atomic_load_n(&pd->refs, __ATOMIC_ACQUIRE) ? -EBUSY : 0;
	if (pd->td)
		__atomic_fetch_sub(&pd->td->refs, 1, __ATOMIC_ACQ_REL);
	__atomic_fetch_sub(&pd->parent->refs, 1, __ATOMIC_ACQ_REL);
	free(pd);
	return 0;
}
