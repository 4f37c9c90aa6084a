// SPDX-License-Identifier: MIT
/*
 * The resolved memory of one side of a copy (struct span, exec_int.h): local
 * SGEs or a remote range turned, through their keys (keymap.h), into iovecs of
 * the process that owns them, and copied a window at a time when a side
 * needs more iovecs than one window holds. Shared by the same-host path
 * (loop/req.c, loop/resp.c) and the RoCEv2 wire (roce/). Under sv_dev.lock;
 * never allocates.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/uio.h>

#include <infiniband/verbs.h>

#include "device/exec/exec_int.h"

#define likely(x)   __builtin_expect(!!(x), 1)

/* iovecs for len bytes from byte off of piece mp (at most max, >= 1): the
 * count, *done the bytes. sv_mr_iov, with its common case here: a
 * contiguous MR (nblocks 0, sv_dev.h) is one iovec. mp was resolved under
 * the lock held now, so the range lies in the MR. */
static inline unsigned int map_iov(const struct sv_map *mp, uint64_t off,
				   uint64_t len, struct iovec *iov,
				   unsigned int max, uint64_t *done)
{
	const struct sv_mr *mr = mp->mr;

	if (likely(!mr->nblocks)) {
		iov->iov_base = (void *)(uintptr_t)(mr->addr + mp->off + off);
		iov->iov_len = len;
		*done = len;
		return 1;
	}
	return sv_mr_iov(mr, mp->off + off, len, iov, max, done);
}

/* Add piece mp to s's iovecs, while they still hold every byte. */
static inline void span_add(struct span *s, const struct sv_map *mp)
{
	unsigned int room = SV_IOV_WINDOW - s->mem.niov;
	uint64_t done;

	if (!s->whole)
		return;
	if (!room) {
		s->whole = false;
		return;
	}
	s->mem.niov += map_iov(mp, 0, mp->len,
			       (struct iovec *)s->mem.iov + s->mem.niov, room,
			       &done);
	if (done < mp->len)
		s->whole = false;
}

/* Resolve n local SGEs of pd into s (pieces in map, iovecs in iov): a
 * completion status, and *total their bytes. Zero-length SGEs are skipped
 * (no key is checked for them). */
uint32_t sv_span_sges(struct span *s, struct sv_map *map, struct iovec *iov,
		      const struct sv_wqe_sge *sge, uint32_t n,
		      const struct sv_pd *pd, bool write, uint64_t *total)
{
	uint64_t sum = 0;
	unsigned int k = 0;

	s->mem.iov = iov;
	s->mem.niov = 0;
	s->mem.pid = -1;    /* never 0 (this process): set by the first MR */
	s->whole = true;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t st;

		sum += sge[i].length;
		if (!sge[i].length)
			continue;
		st = sv_lkey_map(sge[i].lkey, pd, sge[i].addr, sge[i].length,
				 write, &map[k]);
		if (st != IBV_WC_SUCCESS)
			return st;
		s->mem.pid = map[k].pid;
		span_add(s, &map[k]);
		k++;
	}
	s->map = map;
	s->nmap = k;
	s->sge = sge;
	s->nsge = n;
	s->pd = pd;
	s->write = write;
	*total = sum;
	return IBV_WC_SUCCESS;
}

/* Move p n bytes on; false past the end of s. */
bool sv_span_seek(const struct span *s, struct spos *p, uint64_t n)
{
	if (!s->map) {
		p->off += n;
		return p->off <= s->raw.iov_len;
	}
	while (n) {
		uint64_t left;

		if (p->idx >= s->nmap)
			return false;
		left = s->map[p->idx].len - p->off;
		if (n < left) {
			p->off += n;
			return true;
		}
		n -= left;
		p->idx++;
		p->off = 0;
	}
	return true;
}

/* Fill r with up to max bytes of s from p (at most SV_IOV_WINDOW iovecs):
 * the bytes it covers, 0 when s has none left. Under sv_dev.lock. */
static uint64_t span_fill(const struct span *s, struct spos p, uint64_t max,
			  struct round *r)
{
	uint64_t got = 0;
	unsigned int k = 0;

	r->mem.pid = s->mem.pid;
	r->mem.iov = r->v;
	if (!s->map) {
		if (p.off < s->raw.iov_len) {
			got = s->raw.iov_len - p.off;
			if (got > max)
				got = max;
			r->v[0].iov_base = (char *)s->raw.iov_base + p.off;
			r->v[0].iov_len = got;
			k = 1;
		}
		r->mem.niov = k;
		return got;
	}
	while (got < max && k < SV_IOV_WINDOW && p.idx < s->nmap) {
		const struct sv_map *mp = &s->map[p.idx];
		uint64_t want = mp->len - p.off, done;

		if (want > max - got)
			want = max - got;
		k += map_iov(mp, p.off, want, r->v + k, SV_IOV_WINDOW - k,
			     &done);
		got += done;
		if (done < want)
			break;          /* the window is full */
		p.idx++;
		p.off = 0;
	}
	r->mem.niov = k;
	return got;
}

/* The next window of a copy of left bytes from s at sp to d at dp: the
 * bytes both sides' iovecs cover, or 0 and *err (a side ran out). */
uint64_t sv_span_round(struct round *rs, const struct span *s, struct spos sp,
		       struct round *rd, const struct span *d, struct spos dp,
		       uint64_t left, int *err)
{
	uint64_t n = span_fill(s, sp, left, rs);

	if (!n) {
		*err = SV_COPY_SRC_FAULT;
		return 0;
	}
	n = span_fill(d, dp, n, rd);
	if (!n)
		*err = SV_COPY_DST_FAULT;
	return n;
}

/* sv_span_copy of sides that are not whole: a window at a time. */
__attribute__((noinline)) int
sv_span_copy_windows(const struct sv_exec *x, const struct span *d,
		     uint64_t doff, const struct span *s, uint64_t soff,
		     uint64_t len)
{
	struct spos sp = { 0, 0 }, dp = { 0, 0 };
	struct round rs, rd;
	int err = SV_COPY_OK;

	if (!sv_span_seek(s, &sp, soff))
		return SV_COPY_SRC_FAULT;
	if (!sv_span_seek(d, &dp, doff))
		return SV_COPY_DST_FAULT;
	while (len) {
		uint64_t n = sv_span_round(&rs, s, sp, &rd, d, dp, len, &err);

		if (!n)
			return err;
		err = sv_mem_copy(&rd.mem, 0, &rs.mem, 0, n, x->bounce,
				  x->bounce_bytes);
		if (err)
			return err;
		len -= n;
		if (len) {
			sv_span_seek(s, &sp, n);
			sv_span_seek(d, &dp, n);
		}
	}
	return SV_COPY_OK;
}

