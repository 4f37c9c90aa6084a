// SPDX-License-Identifier: MIT
/*
 * Thread domains and parent domains (rdma-core's upstream form of resource
 * domains).
 *
 * A thread domain is the application's promise that the objects made with
 * it are used by one thread at a time. It is a daemon DOMAIN too (message
 * model DEFAULT): its QPs get a doorbell page and an engine of their own
 * while the device has one free (else they share one with other domains).
 * A parent domain is a protection domain (the daemon's PD of its parent, by
 * the same handle, so MRs, AHs and SRQs work on it unchanged) that carries a
 * thread domain: QPs made on it (ibv_create_qp_ex) are in the thread
 * domain's DOMAIN, and they and CQs made with it (ibv_create_cq_ex,
 * IBV_CQ_INIT_ATTR_MASK_PD) post and poll without locks.
 *
 * A parent domain's allocator callbacks make the memory of the rings of its
 * QPs and CQs: the daemon's memfd of a ring is mapped over the block they
 * return (MAP_FIXED), and at destroy private anonymous memory is put back
 * over the block before it goes to their free. The rings stay the daemon's
 * memory (it maps the same memfd); only where they appear in the
 * application's address space is the allocator's choice. QPs and CQs hold a
 * reference on their parent domain, which refuses to go (EBUSY) before them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "verbs/sv_verbs.h"

struct ibv_td *sv_alloc_td(struct ibv_context *context,
			   struct ibv_td_init_attr *attr)
{
	struct sv_rsp_domain r;
	struct sv_td *td;
	int ret;

	if (!attr || attr->comp_mask)
		return sv_err_ptr(-EINVAL);
	td = calloc(1, sizeof(*td));
	if (!td)
		return sv_err_ptr(-ENOMEM);
	ret = sv_domain_create(to_sv_ctx(context), SV_MSG_DEFAULT, 0, &r);
	if (ret) {
		free(td);
		return sv_err_ptr(ret);
	}
	td->ibtd.context = context;
	td->domain = r.handle;
	return &td->ibtd;
}

int sv_dealloc_td(struct ibv_td *ibtd)
{
	struct sv_td *td = (struct sv_td *)ibtd;
	int ret;

	if (__atomic_load_n(&td->refs, __ATOMIC_ACQUIRE))
		return EBUSY;
	ret = sv_domain_destroy(to_sv_ctx(ibtd->context), td->domain);
	if (ret)
		return -ret;
	free(td);
	return 0;
}

/* rdma-core 65's IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC (a
 * confidential-computing guest's buffers from ibv_alloc_buf in memory the
 * device may reach): this device is no DMA-bounce device
 * (IBV_DEVICE_CC_DMA_BOUNCE is not claimed), so the flag is taken and the
 * buffers are plain memory, as rdma-core says of an ordinary device. */
#define SV_PARENT_DOMAIN_ALLOW_CC (1u << 2)

struct ibv_pd *sv_alloc_parent_domain(struct ibv_context *context,
				      struct ibv_parent_domain_init_attr *attr)
{
	struct sv_pd *pd, *parent;

	if (!attr || !attr->pd || attr->pd->context != context ||
	    (attr->td && attr->td->context != context))
		return sv_err_ptr(-EINVAL);
	if (attr->comp_mask & ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
					  IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT |
					  SV_PARENT_DOMAIN_ALLOW_CC))
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
	/* a PD with parent domains, a parent domain with QPs or CQs */
	if (__atomic_load_n(&pd->refs, __ATOMIC_ACQUIRE))
		return -EBUSY;
	if (!pd->parent)
		return 0;
	if (pd->td)
		__atomic_fetch_sub(&pd->td->refs, 1, __ATOMIC_ACQ_REL);
	__atomic_fetch_sub(&pd->parent->refs, 1, __ATOMIC_ACQ_REL);
	free(pd);
	return 0;
}

void sv_pd_get(struct ibv_pd *pd)
{
	__atomic_fetch_add(&to_sv_pd(pd)->refs, 1, __ATOMIC_ACQ_REL);
}

void sv_pd_put(struct ibv_pd *pd)
{
	__atomic_fetch_sub(&to_sv_pd(pd)->refs, 1, __ATOMIC_ACQ_REL);
}

/* ---- ring memory from the allocator callbacks ---- */

static size_t page_bytes(void)
{
	long p = sysconf(_SC_PAGESIZE);

	return p > 0 ? (size_t)p : 4096;
}

/*
 * The ring where the library maps it (it is the daemon's memory, shared).
 * A ring's memfd is one of the connection's ring pools (docs/DESIGN.md,
 * "Memory"), which holds many rings: each pool is mapped once, whole, and
 * shared by the rings that lie in it, so a process's mappings do not grow
 * with its QPs and CQs either (vm.max_map_count is 65530 on many hosts).
 * Pools are known by their inode: a pool mapped here stays alive, so its
 * inode names no other file meanwhile.
 */
struct sv_pool_map {
	struct sv_pool_map *next;
	dev_t dev;
	ino_t ino;
	void *map;
	size_t bytes;
	unsigned long refs;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv_pool_map *pool_maps;

static int ring_map_anywhere(struct sv_ring_mem *m, int fd, uint64_t offset,
			     size_t bytes)
{
	struct sv_pool_map *pm;
	struct stat st;
	int ret = 0;

	if (fstat(fd, &st))
		return -errno;
	if (st.st_size < 0 || offset > (uint64_t)st.st_size ||
	    (uint64_t)st.st_size - offset < bytes ||
	    (uint64_t)st.st_size > SIZE_MAX)
		return -EPROTO;
	pthread_mutex_lock(&pool_lock);
	for (pm = pool_maps; pm; pm = pm->next)
		if (pm->dev == st.st_dev && pm->ino == st.st_ino)
			break;
	if (pm && pm->bytes != (size_t)st.st_size) {
		ret = -EPROTO;         /* sealed: never another size */
		goto out;
	}
	if (!pm) {
		void *p = mmap(NULL, (size_t)st.st_size,
			       PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (p == MAP_FAILED) {
			ret = -errno;
			goto out;
		}
		pm = calloc(1, sizeof(*pm));
		if (!pm) {
			munmap(p, (size_t)st.st_size);
			ret = -ENOMEM;
			goto out;
		}
		pm->dev = st.st_dev;
		pm->ino = st.st_ino;
		pm->map = p;
		pm->bytes = (size_t)st.st_size;
		pm->next = pool_maps;
		pool_maps = pm;
	}
	pm->refs++;
	m->pool = pm;
	m->map = (char *)pm->map + offset;
	m->bytes = bytes;
out:
	pthread_mutex_unlock(&pool_lock);
	return ret;
}

static void pool_put(struct sv_pool_map *pm)
{
	struct sv_pool_map **pp;

	pthread_mutex_lock(&pool_lock);
	if (!--pm->refs) {
		for (pp = &pool_maps; *pp; pp = &(*pp)->next)
			if (*pp == pm) {
				*pp = pm->next;
				break;
			}
		munmap(pm->map, pm->bytes);
		free(pm);
	}
	pthread_mutex_unlock(&pool_lock);
}

int sv_ring_map(struct sv_ring_mem *m, struct sv_pd *pd, uint64_t res_type,
		int fd, uint64_t offset, size_t bytes)
{
	size_t page = page_bytes(), len;
	void *block, *p;

	memset(m, 0, sizeof(*m));
	if (!bytes || bytes > SIZE_MAX - page || offset > INT64_MAX)
		return -EINVAL;
	block = IBV_ALLOCATOR_USE_DEFAULT;
	len = (bytes + page - 1) & ~(page - 1);
	if (pd && pd->parent && pd->alloc)
		block = pd->alloc(&pd->ibpd, pd->pd_context, len, page,
				  res_type);
	if (block == IBV_ALLOCATOR_USE_DEFAULT)
		return ring_map_anywhere(m, fd, offset, bytes);
	if (!block)
		return -ENOMEM;
	if ((uintptr_t)block & (page - 1)) {
		pd->free(&pd->ibpd, pd->pd_context, block, res_type);
		return -EINVAL;
	}
	p = mmap(block, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 fd, (off_t)offset);
	if (p == MAP_FAILED) {
		int err = errno;

		/* the block stays as it was (a failed MAP_FIXED unmaps
		 * nothing) and goes back to the allocator */
		pd->free(&pd->ibpd, pd->pd_context, block, res_type);
		if (err != EINVAL)
			return -err;
		/*
		 * EINVAL: memory that cannot take a 4 KiB shared mapping in
		 * its middle, i.e. huge pages (a hugetlb mapping splits only
		 * at its page size). The ring is the device's memory either
		 * way: it stays where the library maps it, so a queue works
		 * over an allocator of any kind of memory.
		 */
		return ring_map_anywhere(m, fd, offset, bytes);
	}
	m->map = p;
	m->bytes = bytes;
	m->pd = pd;
	m->block = block;
	m->block_bytes = len;
	m->res_type = res_type;
	return 0;
}

void sv_ring_unmap(struct sv_ring_mem *m)
{
	struct sv_pd *pd = m->pd;

	if (!m->map)
		return;
	if (m->pool) {
		pool_put(m->pool);
	} else if (!pd) {
		munmap(m->map, m->bytes);
	} else {
		/* the block is the application's again: ordinary memory, no
		 * longer the ring (if this fails, the block keeps showing the
		 * ring, which the daemon no longer uses) */
		mmap(m->block, m->block_bytes, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		pd->free(&pd->ibpd, pd->pd_context, m->block, m->res_type);
	}
	memset(m, 0, sizeof(*m));
}
