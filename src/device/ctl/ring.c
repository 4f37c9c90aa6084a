// SPDX-License-Identifier: MIT
/*
 * Ring memory: the CQ, QP and SRQ rings of a client lie in a few large
 * memfds of that client's (its pools), not in one memfd each, so that the
 * device's descriptors grow with its clients and not with their objects
 * (docs/DESIGN.md, "Memory").
 *
 * A pool is a sealed memfd of SV_POOL_BYTES (sparse: only the pages of its
 * rings hold memory), mapped once here. A ring takes whole pages of it,
 * first fit, and the response that creates it gives the pool's memfd (a
 * copy, closed once sent) and the ring's offset, which the library maps.
 * A pool holds only rings of the client that made it: a client never gets
 * a descriptor to anyone else's rings. The pages of a ring are punched out
 * (zero, and given back) when it is freed and again when they are taken,
 * so a new ring starts clean whatever was written there in between. A pool
 * whose last ring goes is closed. A ring larger than SV_POOL_RING_MAX has a
 * memfd of its own, as every ring had before.
 *
 * All the daemon's shared memory is made here: the pools, a ring of its
 * own, the engines' doorbell pages and a page list's memory
 * (sv_ring_alloc), and the sealed memfd under each (sv_memfd_sealed, also
 * DM's, dm.c). The layouts that lie in the rings are src/abi's (sv_ring.h:
 * the CQ ring; sv_qp.h: the QP and SRQ rings), shared with the library;
 * this file is the daemon's alone, beside the objects whose rings it
 * holds, since a pool belongs to a client (docs/DESIGN.md "The tree").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/sv_dev.h"

#define SV_POOL_PAGE     4096u
#define SV_POOL_BYTES    (64u << 20)
#define SV_POOL_PAGES    (SV_POOL_BYTES / SV_POOL_PAGE)
#define SV_POOL_RING_MAX (SV_POOL_BYTES / 4)

struct sv_ring_pool {
	struct sv_ring_pool *next;
	struct sv_client *owner;   /* NULL once it is gone */
	int fd;
	void *map;
	uint32_t rings;
	uint64_t used[SV_POOL_PAGES / 64];  /* a bit a page */
};

int sv_memfd_sealed(const char *name, size_t bytes)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int sv_ring_alloc(const char *name, size_t bytes, int *memfd, void **map)
{
	int fd = sv_memfd_sealed(name, bytes);
	void *p;

	if (fd < 0)
		return fd;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int e = -errno;

		close(fd);
		return e;
	}
	*memfd = fd;
	*map = p;
	return 0;
}

static bool page_used(const struct sv_ring_pool *p, uint32_t i)
{
	return p->used[i / 64] >> (i % 64) & 1;
}

static void pages_mark(struct sv_ring_pool *p, uint32_t first, uint32_t n,
		       bool used)
{
	for (uint32_t i = first; i < first + n; i++) {
		if (used)
			p->used[i / 64] |= 1ull << (i % 64);
		else
			p->used[i / 64] &= ~(1ull << (i % 64));
	}
}

/* The first run of n free pages: its first page, or -1. */
static int64_t pages_find(const struct sv_ring_pool *p, uint32_t n)
{
	uint32_t run = 0;

	for (uint32_t i = 0; i < SV_POOL_PAGES; i++) {
		if (!(i % 64) && p->used[i / 64] == ~0ull) {
			run = 0;
			i += 63;
			continue;
		}
		if (page_used(p, i)) {
			run = 0;
			continue;
		}
		if (++run == n)
			return (int64_t)(i + 1 - n);
	}
	return -1;
}

static void zero_range(struct sv_ring_pool *p, uint64_t off, size_t bytes)
{
	/* a hole reads as zeros and holds no memory */
	if (fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)off, (off_t)bytes))
		memset((char *)p->map + off, 0, bytes);
}

static int pool_new(struct sv_client *c, struct sv_ring_pool **out)
{
	struct sv_ring_pool *p = calloc(1, sizeof(*p));
	int fd;

	if (!p)
		return -ENOMEM;
	fd = sv_memfd_sealed("softverbs-rings", SV_POOL_BYTES);
	if (fd < 0) {
		free(p);
		return fd;
	}
	p->map = mmap(NULL, SV_POOL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
		      fd, 0);
	if (p->map == MAP_FAILED) {
		int e = -errno;

		close(fd);
		free(p);
		return e;
	}
	p->fd = fd;
	p->owner = c;
	p->next = c->pools;
	c->pools = p;
	*out = p;
	return 0;
}

static void pool_free(struct sv_ring_pool *p)
{
	if (p->owner) {
		struct sv_ring_pool **pp;

		for (pp = &p->owner->pools; *pp; pp = &(*pp)->next)
			if (*pp == p) {
				*pp = p->next;
				break;
			}
	}
	munmap(p->map, SV_POOL_BYTES);
	close(p->fd);
	free(p);
}

int sv_ring_get(struct sv_client *c, const char *name, size_t bytes,
		struct sv_ring_loc *loc, void **map, int *fd_out)
{
	struct sv_ring_pool *p;
	uint32_t n = (uint32_t)((bytes + SV_POOL_PAGE - 1) / SV_POOL_PAGE);
	int64_t first = -1;
	int fd, ret;

	loc->pool = NULL;
	loc->memfd = -1;
	loc->offset = 0;
	if (bytes > SV_POOL_RING_MAX) {
		ret = sv_ring_alloc(name, bytes, &loc->memfd, map);
		if (ret)
			return ret;
		fd = fcntl(loc->memfd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0) {
			ret = -errno;
			munmap(*map, bytes);
			close(loc->memfd);
			loc->memfd = -1;
			return ret;
		}
		*fd_out = fd;
		return 0;
	}
	for (p = c->pools; p; p = p->next)
		if ((first = pages_find(p, n)) >= 0)
			break;
	if (!p) {
		ret = pool_new(c, &p);
		if (ret)
			return ret;
		first = 0;
	}
	/* the copy that goes to the client, before anything is taken */
	fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		if (!p->rings)
			pool_free(p);
		return ret;
	}
	pages_mark(p, (uint32_t)first, n, true);
	p->rings++;
	loc->pool = p;
	loc->offset = (uint64_t)first * SV_POOL_PAGE;
	zero_range(p, loc->offset, (size_t)n * SV_POOL_PAGE);
	*map = (char *)p->map + loc->offset;
	*fd_out = fd;
	return 0;
}

void sv_ring_put(struct sv_ring_loc *loc, void *map, size_t bytes)
{
	struct sv_ring_pool *p = loc->pool;
	uint32_t n = (uint32_t)((bytes + SV_POOL_PAGE - 1) / SV_POOL_PAGE);

	if (!p) {
		if (loc->memfd >= 0) {
			munmap(map, bytes);
			close(loc->memfd);
		}
		loc->memfd = -1;
		return;
	}
	zero_range(p, loc->offset, (size_t)n * SV_POOL_PAGE);
	pages_mark(p, (uint32_t)(loc->offset / SV_POOL_PAGE), n, false);
	loc->pool = NULL;
	if (!--p->rings)
		pool_free(p);
}

int sv_ring_fd_ro(const struct sv_ring_loc *loc)
{
	char path[64];
	int fd = loc->pool ? loc->pool->fd : loc->memfd;

	if (fd < 0)
		return -EBADF;
	/* a new open file, read-only: no mapping of it can be made
	 * writable */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void sv_ring_pools_detach(struct sv_client *c)
{
	/* each is closed with its last ring (normally gone already) */
	while (c->pools) {
		struct sv_ring_pool *p = c->pools;

		c->pools = p->next;
		p->owner = NULL;
		p->next = NULL;
	}
}
