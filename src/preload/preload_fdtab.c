// SPDX-License-Identifier: MIT
/*
 * The preload's tables of descriptors (preload.h, struct svp_fdtab): which
 * of a program's descriptors are our devices' (the rdma_cm files, the
 * NETLINK_RDMA sockets), with an entry each, shared by the duplicates of a
 * descriptor as the kernel's file is. A table is mapped at its first entry:
 * SVP_MAX_FD pointers, only the pages touched cost memory; until then a
 * lookup is one load. Entries are counted: a slot naming one holds a
 * reference, and so does a call using it (svp_fd_get), so a close() that
 * races a call leaves the entry to the call.
 */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <sys/mman.h>

void *svp_fd_peek(struct svp_fdtab *t, int fd)
{
	void **tab = __atomic_load_n(&t->tab, __ATOMIC_ACQUIRE);

	if (__builtin_expect(!tab, 1) || fd < 0 || fd >= SVP_MAX_FD)
		return NULL;
	return __atomic_load_n(&tab[fd], __ATOMIC_ACQUIRE);
}

bool svp_fd_ready(struct svp_fdtab *t)
{
	void *m;

	if (__atomic_load_n(&t->tab, __ATOMIC_ACQUIRE))
		return true;
	pthread_mutex_lock(&t->lock);
	if (!t->tab) {
		m = mmap(NULL, SVP_MAX_FD * sizeof(void *), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m != MAP_FAILED)
			__atomic_store_n(&t->tab, (void **)m, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&t->lock);
	return t->tab != NULL;
}

void svp_fd_set(struct svp_fdtab *t, int fd, struct svp_fdent *e)
{
	pthread_mutex_lock(&t->lock);
	e->refs = 1;
	__atomic_store_n(&t->tab[fd], e, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->lock);
}

struct svp_fdent *svp_fd_get(struct svp_fdtab *t, int fd)
{
	struct svp_fdent *e;

	if (!svp_fd_peek(t, fd))
		return NULL;
	pthread_mutex_lock(&t->lock);
	e = svp_fd_peek(t, fd);
	if (e)
		e->refs++;
	pthread_mutex_unlock(&t->lock);
	return e;
}

bool svp_fd_put(struct svp_fdtab *t, struct svp_fdent *e)
{
	bool last;

	pthread_mutex_lock(&t->lock);
	last = --e->refs == 0;
	pthread_mutex_unlock(&t->lock);
	return last;
}

void svp_fd_dup(struct svp_fdtab *t, int fd, int newfd)
{
	struct svp_fdent *e;

	if (!svp_fd_peek(t, fd) || newfd < 0 || newfd >= SVP_MAX_FD || newfd == fd)
		return;
	pthread_mutex_lock(&t->lock);
	e = svp_fd_peek(t, fd);
	if (e) {
		e->refs++;
		__atomic_store_n(&t->tab[newfd], e, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&t->lock);
}

struct svp_fdent *svp_fd_clear(struct svp_fdtab *t, int fd)
{
	void **tab = __atomic_load_n(&t->tab, __ATOMIC_ACQUIRE);
	struct svp_fdent *e;

	if (!tab || fd < 0 || fd >= SVP_MAX_FD)
		return NULL;
	pthread_mutex_lock(&t->lock);
	e = __atomic_exchange_n((struct svp_fdent **)&tab[fd], NULL, __ATOMIC_ACQ_REL);
	if (e && --e->refs)
		e = NULL;          /* another slot or a call still holds it */
	pthread_mutex_unlock(&t->lock);
	return e;
}
