// SPDX-License-Identifier: MIT
/*
 * Unit tests of the memory-management extensions inside the daemon: the
 * commands of ctl/mem.c and ctl/mw.c (ALLOC_MR, page lists, REG_MR_LIST,
 * windows), exec/keymap.c, through which execution turns keys into memory,
 * and exec/mm.c, through which it executes FAST_REG_MR, LOCAL_INV, BIND_MW
 * and the responder's side of SEND_WITH_INV.
 *
 * Real clients (ctl/client.c, on a socketpair: this process is the client, so
 * the memory-map checks read our own /proc/self/maps) and real commands;
 * QPs are built here by hand (exec/ needs their owner, PD and QPN only).
 * Fast registration checks no memory map, so its translation is tested on
 * made-up addresses against a reference walk of the raw list.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <infiniband/verbs.h>

#include "device/exec/keymap.h"
#include "device/exec/mm.h"
#include "device/sv_dev.h"

/* ---- what ctl/mem.c, mw.c, cq.c and client.c need from the rest ---- */

struct sv_device sv_dev;
static int quiesces;

void sv_engine_quiesce(void)
{
	quiesces++;
}

void sv_async_event(struct sv_client *c, uint32_t type, uint64_t cookie,
		    uint64_t handle)
{
	(void)c; (void)type; (void)cookie; (void)handle;
}

/* ctl/cq.c's resize lets the engines catch up (none here) */
void sv_engine_kick(struct sv_engine *e) { (void)e; }
void sv_dev_lock(bool ctl) { (void)ctl; }
void sv_dev_unlock(void) { }

void sv_qp_destroy(struct sv_qp *qp) { (void)qp; }
void sv_srq_destroy(struct sv_srq *srq) { (void)srq; }
void sv_srq_limit_check(struct sv_srq *srq) { (void)srq; }
void sv_ah_destroy(struct sv_ah *ah) { (void)ah; }
void sv_domain_destroy(struct sv_domain *d) { (void)d; }
void sv_xrcd_destroy(struct sv_xrcd *x) { (void)x; }

/* ---- fixture: two clients, PDs, QPs ---- */

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC
#define MWB IBV_ACCESS_MW_BIND
#define ZB IBV_ACCESS_ZERO_BASED
#define ALL_REMOTE (RW | RR | RA)

#define MAX_MAPS 64

static struct {
	struct sv_client *c, *c2;
	int peer, peer2;           /* our ends of the clients' sockets */
	struct sv_pd *pd, *pd2;    /* c's */
	struct sv_pd *opd;         /* c2's */
	struct sv_qp qp, qp_b;     /* c, on pd */
	struct sv_qp qp2;          /* c, on pd2 */
	struct sv_qp qpo;          /* c2, on opd */
	struct {
		void *p;
		size_t n;
	} maps[MAX_MAPS];          /* page lists as the client maps them */
	unsigned int nmaps;
} F;

static struct sv_client *mk_client(int *peer)
{
	int sv[2];
	struct sv_client *c;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				    sv), 0);
	c = sv_client_new(sv[0]);
	assert_non_null(c);
	assert_int_equal(c->pid, getpid());
	*peer = sv[1];
	return c;
}

static struct sv_pd *mk_pd(struct sv_client *c)
{
	struct sv_pd *pd = calloc(1, sizeof(*pd));
	struct sv_req r = { .client = c };

	assert_non_null(pd);
	pd->owner = c;
	assert_int_equal(sv_client_add_obj(&r, SV_OBJ_PD, pd, &pd->handle), 0);
	return pd;
}

static void mk_qp(struct sv_qp *qp, struct sv_client *c, struct sv_pd *pd,
		  uint32_t qpn)
{
	memset(qp, 0, sizeof(*qp));
	qp->owner = c;
	qp->pd = pd;
	qp->qpn = qpn;
	qp->type = IBV_QPT_RC;
}

static int setup(void **state)
{
	(void)state;
	memset(&sv_dev, 0, sizeof(sv_dev));
	memset(&F, 0, sizeof(F));
	sv_dev.clients.next = sv_dev.clients.prev = &sv_dev.clients;
	if (sv_keytab_init(&sv_dev.keys, 4096))
		return -1;
	F.c = mk_client(&F.peer);
	F.c2 = mk_client(&F.peer2);
	F.pd = mk_pd(F.c);
	F.pd2 = mk_pd(F.c);
	/* handles are per client: make c2's differ from c's in number too,
	 * so that using one in the other's name means something */
	(void)mk_pd(F.c2);
	(void)mk_pd(F.c2);
	(void)mk_pd(F.c2);
	F.opd = mk_pd(F.c2);
	mk_qp(&F.qp, F.c, F.pd, 0x102);
	mk_qp(&F.qp_b, F.c, F.pd, 0x103);
	mk_qp(&F.qp2, F.c, F.pd2, 0x104);
	mk_qp(&F.qpo, F.c2, F.opd, 0x105);
	quiesces = 0;
	return 0;
}

/* Both clients go (their teardown frees every object, windows before
 * MRs); nothing is left on the device. */
static int teardown(void **state)
{
	(void)state;
	sv_client_teardown(F.c);
	sv_client_free(F.c);
	sv_client_teardown(F.c2);
	sv_client_free(F.c2);
	close(F.peer);
	close(F.peer2);
	for (unsigned int i = 0; i < F.nmaps; i++)
		munmap(F.maps[i].p, F.maps[i].n);
	for (unsigned int t = 0; t < SV_OBJ_TYPE_MAX; t++)
		if (sv_dev.total[t])
			fail_msg("%u objects of type %u left", sv_dev.total[t], t);
	assert_int_equal(sv_dev.keys.live, 0);
	assert_int_equal(sv_dev.mr_blocks, 0);
	assert_int_equal(sv_dev.nclients, 0);
	sv_keytab_fini(&sv_dev.keys);
	return 0;
}

/* ---- commands ---- */

static int run_cmd(struct sv_client *c, int (*fn)(struct sv_req *),
		   struct sv_cmd *cmd, struct sv_rsp *rsp, int *fd)
{
	struct sv_req r = {
		.client = c, .cmd = cmd, .rsp = rsp, .fd_in = -1, .fd_out = -1,
	};
	int ret;

	memset(rsp, 0, sizeof(*rsp));
	ret = fn(&r);
	if (ret) {
		assert_true(ret < 0);
		assert_int_equal(r.fd_out, -1);  /* nothing handed out */
		assert_non_null(r.why);
	}
	if (fd)
		*fd = r.fd_out;
	else if (r.fd_out >= 0)
		close(r.fd_out);
	return ret;
}

static int cmd_handle(struct sv_client *c, int (*fn)(struct sv_req *),
		      uint64_t h)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, 0);
	cmd.u.handle.handle = h;
	return run_cmd(c, fn, &cmd, &rsp, NULL);
}

/* ALLOC_PAGE_LIST: the handle, and the list as the client maps it. */
static int alloc_pl_rsvd(struct sv_client *c, uint32_t max, uint32_t rsvd,
			 uint64_t *h, void **map)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	struct stat st;
	int fd, ret, seals;
	void *p;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_PAGE_LIST);
	cmd.u.alloc_page_list.max_entries = max;
	cmd.u.alloc_page_list.rsvd = rsvd;
	ret = run_cmd(c, sv_cmd_alloc_page_list, &cmd, &rsp, &fd);
	if (ret)
		return ret;
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal((uint64_t)st.st_size, rsp.u.page_list.bytes);
	assert_true(rsp.u.page_list.bytes >= (uint64_t)max * 16);
	assert_int_equal(rsp.u.page_list.bytes % (uint64_t)getpagesize(), 0);
	assert_int_equal(rsp.u.page_list.max_entries, max);
	seals = fcntl(fd, F_GET_SEALS);
	assert_int_equal(seals & (F_SEAL_SHRINK | F_SEAL_GROW),
			 F_SEAL_SHRINK | F_SEAL_GROW);
	p = mmap(NULL, rsp.u.page_list.bytes, PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	close(fd);
	assert_true(F.nmaps < MAX_MAPS);
	F.maps[F.nmaps].p = p;
	F.maps[F.nmaps].n = rsp.u.page_list.bytes;
	F.nmaps++;
	*h = rsp.u.page_list.handle;
	*map = p;
	return 0;
}

static void *alloc_pl(struct sv_client *c, uint32_t max, uint64_t *h)
{
	void *map = NULL;

	assert_int_equal(alloc_pl_rsvd(c, max, 0, h, &map), 0);
	return map;
}

/* Run a command answered with struct sv_rsp_mr; on success *out is the
 * object its key names (an MR: lkey == rkey; a window: rkey, lkey 0). */
static int run_key_cmd(struct sv_client *c, int (*fn)(struct sv_req *),
		       struct sv_cmd *cmd, unsigned int kind, void **out)
{
	struct sv_rsp rsp;
	unsigned int k = 99;
	uint64_t handle;
	int ret = run_cmd(c, fn, cmd, &rsp, NULL);

	if (ret || !out)
		return ret;
	*out = sv_keytab_find(&sv_dev.keys, rsp.u.mr.rkey, &k);
	assert_non_null(*out);
	assert_int_equal(k, kind);
	if (kind == SV_KEY_MR) {
		assert_int_equal(rsp.u.mr.lkey, rsp.u.mr.rkey);
		handle = ((struct sv_mr *)*out)->handle;
	} else {
		assert_int_equal(rsp.u.mr.lkey, 0);
		handle = ((struct sv_mw *)*out)->handle;
	}
	assert_true(handle == rsp.u.mr.handle);
	return 0;
}

static int alloc_fr_x(struct sv_client *c, uint64_t pd, uint32_t max,
		      uint32_t rsvd, struct sv_mr **out)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_MR);
	cmd.u.alloc_mr.pd = pd;
	cmd.u.alloc_mr.max_entries = max;
	cmd.u.alloc_mr.rsvd = rsvd;
	return run_key_cmd(c, sv_cmd_alloc_mr, &cmd, SV_KEY_MR, (void **)out);
}

static struct sv_mr *alloc_fr(struct sv_pd *pd, uint32_t max)
{
	struct sv_mr *mr = NULL;

	assert_int_equal(alloc_fr_x(pd->owner, pd->handle, max, 0, &mr), 0);
	assert_int_equal(mr->kind, SV_MR_FAST_REG);
	assert_true(mr->invalid);
	return mr;
}

static int reg_mr_x(struct sv_pd *pd, const void *addr, uint64_t len,
		    uint64_t iova, uint32_t access, struct sv_mr **out)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_REG_MR);
	cmd.u.reg_mr.pd = pd->handle;
	cmd.u.reg_mr.addr = (uintptr_t)addr;
	cmd.u.reg_mr.length = len;
	cmd.u.reg_mr.iova = iova;
	cmd.u.reg_mr.access = access;
	return run_key_cmd(pd->owner, sv_cmd_reg_mr, &cmd, SV_KEY_MR,
			   (void **)out);
}

static struct sv_mr *reg_mr(struct sv_pd *pd, const void *addr, uint64_t len,
			    uint32_t access)
{
	struct sv_mr *mr = NULL;

	assert_int_equal(reg_mr_x(pd, addr, len, (uintptr_t)addr, access, &mr),
			 0);
	return mr;
}

struct list_args {
	uint64_t pd, list, length, iova;
	uint32_t n, fbo, access;
	uint8_t shift, rsvd;
	uint16_t flags;
};

static int reg_list(struct sv_client *c, const struct list_args *a,
		    struct sv_mr **out)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_REG_MR_LIST);
	cmd.u.reg_mr_list = (struct sv_cmd_reg_mr_list){
		.pd = a->pd, .list = a->list, .length = a->length,
		.iova = a->iova, .nentries = a->n, .fbo = a->fbo,
		.access = a->access, .page_shift = a->shift, .rsvd = a->rsvd,
		.flags = a->flags,
	};
	return run_key_cmd(c, sv_cmd_reg_mr_list, &cmd, SV_KEY_MR,
			   (void **)out);
}

static int alloc_mw_x(struct sv_client *c, uint64_t pd, uint32_t type,
		      uint32_t rsvd, struct sv_mw **out)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_MW);
	cmd.u.alloc_mw.pd = pd;
	cmd.u.alloc_mw.type = type;
	cmd.u.alloc_mw.rsvd = rsvd;
	return run_key_cmd(c, sv_cmd_alloc_mw, &cmd, SV_KEY_MW, (void **)out);
}

static struct sv_mw *alloc_mw(struct sv_pd *pd, uint32_t type)
{
	struct sv_mw *mw = NULL;

	assert_int_equal(alloc_mw_x(pd->owner, pd->handle, type, 0, &mw), 0);
	assert_false(mw->bound);
	return mw;
}

/* ---- work requests ---- */

static uint32_t newkey(uint32_t key, unsigned int ck)
{
	return SV_KEY_MAKE(SV_KEY_INDEX(key), ck);
}

struct fr_args {
	uint64_t list, iova, length;
	uint32_t n, fbo, access;
	uint8_t shift;
	uint16_t flags;
};

static uint32_t fast_reg(struct sv_qp *qp, struct sv_mr *mr, unsigned int ck,
			 const struct fr_args *a)
{
	struct sv_wqe_reg reg = {
		.iova = a->iova, .key = newkey(mr->key, ck),
		.access = a->access, .length = a->length, .list = a->list,
		.fbo = a->fbo, .page_shift = a->shift, .flags = a->flags,
	};

	return sv_mm_fast_reg(qp, &reg, a->n);
}

static uint32_t bind_mw(struct sv_qp *qp, struct sv_mw *mw, unsigned int ck,
		     uint64_t lkey, uint64_t iova, uint64_t len,
		     uint32_t access, uint16_t flags)
{
	struct sv_wqe_reg reg = {
		.iova = iova, .key = newkey(mw->key, ck), .access = access,
		.length = len, .list = lkey, .flags = flags,
	};

	return sv_mm_bind_mw(qp, &reg);
}

static bool rkey_ok(uint32_t rkey, const struct sv_qp *t, uint64_t addr,
		    uint64_t len, uint32_t access, struct sv_map *m)
{
	struct sv_map tmp;

	return sv_rkey_map(rkey, t, addr, len, access, m ? m : &tmp);
}

static bool lkey_ok(uint32_t lkey, const struct sv_pd *pd, uint64_t addr,
		    uint64_t len, bool write)
{
	struct sv_map m;

	return sv_lkey_map(lkey, pd, addr, len, write, &m) == IBV_WC_SUCCESS;
}

/* ---- a reference for translation: the raw list, walked byte by byte ---- */

#define REF_MAX 4096

struct ref {
	uint64_t addr[REF_MAX];
	uint64_t len[REF_MAX];
	uint32_t n;
	uint64_t fbo;
};

/* The iovs of sv_mr_iov for [off, off + done) must be exactly the list's
 * bytes from position fbo + off on, with adjacent runs merged. */
static void ref_check(const struct ref *rf, uint64_t off,
		      const struct iovec *iov, unsigned int k, uint64_t done)
{
	uint64_t p = rf->fbo + off, sum = 0;
	uint32_t j = 0;

	while (j < rf->n && p >= rf->len[j])
		p -= rf->len[j++];
	for (unsigned int i = 0; i < k; i++) {
		uint64_t a = (uintptr_t)iov[i].iov_base, l = iov[i].iov_len;

		assert_true(l > 0);
		if (i)
			assert_true((uintptr_t)iov[i - 1].iov_base +
				    iov[i - 1].iov_len != a); /* merged */
		sum += l;
		while (l) {
			uint64_t take;

			assert_true(j < rf->n);
			take = rf->len[j] - p;
			if (take > l)
				take = l;
			assert_int_equal(a, rf->addr[j] + p);
			a += take;
			l -= take;
			p += take;
			if (p == rf->len[j]) {
				j++;
				p = 0;
			}
		}
	}
	assert_int_equal(sum, done);
}

/* Translate [off, off + len) of mr in pieces of at most max iovecs,
 * resuming from off + done each time, and check every piece. */
static void check_range(const struct ref *rf, const struct sv_mr *mr,
			uint64_t off, uint64_t len, unsigned int max)
{
	struct iovec iov[8];
	uint64_t done, left = len;
	unsigned int k;

	assert_true(max <= 8);
	while (left) {
		k = sv_mr_iov(mr, off, left, iov, max, &done);
		assert_true(k >= 1 && k <= max);
		assert_true(done > 0 && done <= left);
		if (done < left)
			assert_int_equal(k, max);
		ref_check(rf, off, iov, k, done);
		off += done;
		left -= done;
	}
}

/* Every run boundary of the raw list, +-1, in lengths 1..3 and across. */
static void check_boundaries(const struct ref *rf, const struct sv_mr *mr)
{
	uint64_t b = 0;

	for (uint32_t j = 0; j <= rf->n; j++) {
		for (int d = -2; d <= 2; d++) {
			uint64_t pos = b + (uint64_t)(int64_t)d, off;

			if (pos < rf->fbo || pos >= rf->fbo + mr->length)
				continue;
			off = pos - rf->fbo;
			for (uint64_t l = 1; l <= 3 && off + l <= mr->length; l++)
				check_range(rf, mr, off, l, 8);
			check_range(rf, mr, off, mr->length - off, 1 + (j % 8));
		}
		if (j < rf->n)
			b += rf->len[j];
	}
}

static uint64_t rnd_state;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 0x2545f4914f6cdd1dull;
}

/* ---- page lists and ALLOC_MR ---- */

static void test_page_list_cmds(void **state)
{
	uint64_t h, h2;
	void *map;

	(void)state;
	assert_int_equal(alloc_pl_rsvd(F.c, 0, 0, &h, &map), -EINVAL);
	assert_int_equal(alloc_pl_rsvd(F.c, SV_MAX_PAGE_LIST + 1, 0, &h, &map),
			 -EINVAL);
	assert_int_equal(alloc_pl_rsvd(F.c, ~0u, 0, &h, &map), -EINVAL);
	assert_int_equal(alloc_pl_rsvd(F.c, 4, 1, &h, &map), -EINVAL);
	alloc_pl(F.c, 1, &h);
	alloc_pl(F.c, SV_MAX_PAGE_LIST, &h2);
	assert_int_equal(sv_dev.total[SV_OBJ_PAGE_LIST], 2);
	assert_int_equal(F.c->objs.count[SV_OBJ_PAGE_LIST], 2);
	/* FREE_PAGE_LIST: another type's handle, garbage, twice */
	assert_int_equal(cmd_handle(F.c, sv_cmd_free_page_list, F.pd->handle),
			 -EINVAL);
	assert_int_equal(cmd_handle(F.c, sv_cmd_free_page_list, 0), -EINVAL);
	assert_int_equal(cmd_handle(F.c, sv_cmd_free_page_list, ~0ull), -EINVAL);
	assert_int_equal(cmd_handle(F.c2, sv_cmd_free_page_list, h), -EINVAL);
	assert_int_equal(cmd_handle(F.c, sv_cmd_free_page_list, h), 0);
	assert_int_equal(cmd_handle(F.c, sv_cmd_free_page_list, h), -EINVAL);
	assert_int_equal(sv_dev.total[SV_OBJ_PAGE_LIST], 1);
	/* h2 goes with the client */
}

static void test_alloc_mr_cmd(void **state)
{
	struct sv_mr *mr;
	uint32_t key;

	(void)state;
	assert_int_equal(alloc_fr_x(F.c, 0, 4, 0, NULL), -EINVAL);
	assert_int_equal(alloc_fr_x(F.c, ~0ull, 4, 0, NULL), -EINVAL);
	assert_int_equal(alloc_fr_x(F.c, F.opd->handle, 4, 0, NULL), -EINVAL);
	assert_int_equal(alloc_fr_x(F.c, F.pd->handle, 0, 0, NULL), -EINVAL);
	assert_int_equal(alloc_fr_x(F.c, F.pd->handle, SV_MAX_PAGE_LIST + 1, 0,
				    NULL), -EINVAL);
	assert_int_equal(alloc_fr_x(F.c, F.pd->handle, 4, 7, NULL), -EINVAL);
	assert_int_equal(sv_dev.total[SV_OBJ_MR], 0);
	assert_int_equal(sv_dev.keys.live, 0);

	mr = alloc_fr(F.pd, SV_MAX_PAGE_LIST);
	assert_int_equal(mr->max_blocks, SV_MAX_PAGE_LIST);
	assert_int_equal(sv_dev.mr_blocks, SV_MAX_PAGE_LIST + 1);
	assert_int_equal(F.pd->refs, 1);
	key = mr->key;
	/* invalid: its key grants nothing */
	assert_false(lkey_ok(key, F.pd, 0, 0, false));
	assert_false(rkey_ok(key, &F.qp, 0, 0, RR, NULL));
	assert_int_equal(sv_mm_local_inv(&F.qp, key), IBV_WC_LOC_QP_OP_ERR);
	/* no rereg of a fast-register MR */
	{
		struct sv_cmd cmd;
		struct sv_rsp rsp;

		sv_cmd_init(&cmd, SV_CMD_REREG_MR);
		cmd.u.rereg_mr.mr = mr->handle;
		cmd.u.rereg_mr.flags = IBV_REREG_MR_CHANGE_ACCESS;
		cmd.u.rereg_mr.access = 0;
		assert_int_equal(run_cmd(F.c, sv_cmd_rereg_mr, &cmd, &rsp, NULL),
				 -EINVAL);
	}
	assert_int_equal(cmd_handle(F.c2, sv_cmd_dereg_mr, mr->handle), -EINVAL);
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), 0);
	assert_int_equal(sv_dev.mr_blocks, 0);
	assert_int_equal(F.pd->refs, 0);
	assert_null(sv_keytab_lookup(&sv_dev.keys, key));
}

/* ---- fast registration: translation ---- */

static struct ref R;

/* Write R's entries to list map (page addresses, or blocks). */
static void put_list(void *map, bool blocks)
{
	uint64_t *w = map;

	for (uint32_t i = 0; i < R.n; i++) {
		if (blocks) {
			w[2 * i] = R.addr[i];
			w[2 * i + 1] = R.len[i];
		} else {
			w[i] = R.addr[i];
		}
	}
}

static void test_fast_reg_pages(void **state)
{
	static const uint8_t shifts[] = { 12, 13, 16, 21, 30 };
	struct sv_mr *mr = alloc_fr(F.pd, 64);
	uint64_t h;
	void *map = alloc_pl(F.c, 64, &h);
	unsigned int ck = 1;

	(void)state;
	rnd_state = 0x1234567;
	for (unsigned int round = 0; round < 60; round++) {
		uint8_t shift = shifts[round % sizeof(shifts)];
		uint64_t ps = 1ull << shift, total, len, iova;
		bool zb = round & 1;
		struct fr_args a;
		struct sv_map m;

		R.n = 1 + (uint32_t)(rnd() % 64);
		for (uint32_t i = 0; i < R.n; i++) {
			/* some runs of consecutive pages, some scattered */
			if (i && rnd() % 3 == 0)
				R.addr[i] = R.addr[i - 1] + ps;
			else
				R.addr[i] = (rnd() % ((1ull << 47) >> shift)) << shift;
			R.len[i] = ps;
		}
		total = (uint64_t)R.n * ps;
		R.fbo = rnd() % ps;
		len = 1 + rnd() % (total - R.fbo);
		iova = rnd() % (1ull << 50);
		put_list(map, false);
		a = (struct fr_args){ .list = h, .iova = iova, .length = len,
				      .n = R.n, .fbo = (uint32_t)R.fbo,
				      .access = LW | RW | RR, .shift = shift };
		if (zb)
			a.access |= ZB;
		ck = (ck + 1) & 0xff;
		assert_int_equal(fast_reg(&F.qp, mr, ck, &a), IBV_WC_SUCCESS);
		assert_false(mr->invalid);
		assert_int_equal(SV_KEY_CONSUMER(mr->key), ck);
		assert_int_equal(mr->iova, zb ? 0 : iova);
		assert_int_equal(mr->length, len);
		check_boundaries(&R, mr);
		for (int i = 0; i < 50; i++) {
			uint64_t off = rnd() % len;

			check_range(&R, mr, off, 1 + rnd() % (len - off),
				    1 + (unsigned int)(rnd() % 8));
		}
		/* the key maps addresses from iova (or 0) */
		assert_int_equal(sv_lkey_map(mr->key, F.pd, mr->iova + len - 1, 1,
					     true, &m), IBV_WC_SUCCESS);
		assert_ptr_equal(m.mr, mr);
		assert_int_equal(m.off, len - 1);
		assert_int_equal(m.pid, getpid());
		assert_false(lkey_ok(mr->key, F.pd, mr->iova + len, 1, false));
		assert_true(rkey_ok(mr->key, &F.qp, mr->iova, len, RW, &m));
		assert_int_equal(m.off, 0);
		assert_false(rkey_ok(mr->key, &F.qp, mr->iova, len, RA, NULL));
		assert_int_equal(sv_mm_local_inv(&F.qp, mr->key), IBV_WC_SUCCESS);
		assert_true(mr->invalid);
		assert_false(lkey_ok(mr->key, F.pd, mr->iova, 1, false));
	}
}

/* Consecutive pages become one run; a list in one run gives one iovec. */
static void test_fast_reg_merge(void **state)
{
	struct sv_mr *mr = alloc_fr(F.pd, 8);
	uint64_t h, *w = alloc_pl(F.c, 8, &h), done;
	struct iovec iov[8];
	struct fr_args a = { .list = h, .n = 8, .fbo = 100, .length = 8 * 4096 - 100,
			     .access = LW, .shift = 12 };

	(void)state;
	for (int i = 0; i < 8; i++)
		w[i] = 0x10000000 + 4096ull * i;
	assert_int_equal(fast_reg(&F.qp, mr, 7, &a), IBV_WC_SUCCESS);
	assert_int_equal(mr->nblocks, 1);
	assert_int_equal(sv_mr_iov(mr, 0, a.length, iov, 8, &done), 1);
	assert_int_equal(done, a.length);
	assert_int_equal((uintptr_t)iov[0].iov_base, 0x10000000 + 100);
	/* beyond the end: clipped; from the end: nothing */
	assert_int_equal(sv_mr_iov(mr, a.length - 1, 100, iov, 8, &done), 1);
	assert_int_equal(done, 1);
	assert_int_equal(sv_mr_iov(mr, a.length, 1, iov, 8, &done), 0);
	assert_int_equal(done, 0);
	assert_int_equal(sv_mr_iov(mr, 0, 1, iov, 0, &done), 0);
	assert_int_equal(done, 0);
	assert_int_equal(sv_mm_local_inv(&F.qp, mr->key), IBV_WC_SUCCESS);

	/* two runs: pages 5-7 then 0-2 of the same memory */
	for (int i = 0; i < 3; i++) {
		w[i] = 0x20005000 + 4096ull * i;
		w[i + 3] = 0x20000000 + 4096ull * i;
	}
	a.n = 6;
	a.fbo = 0;
	a.length = 6 * 4096;
	assert_int_equal(fast_reg(&F.qp, mr, 8, &a), IBV_WC_SUCCESS);
	assert_int_equal(mr->nblocks, 2);
	assert_int_equal(sv_mr_iov(mr, 3 * 4096 - 5, 10, iov, 8, &done), 2);
	assert_int_equal(done, 10);
	assert_int_equal((uintptr_t)iov[0].iov_base, 0x20005000 + 3 * 4096 - 5);
	assert_int_equal(iov[0].iov_len, 5);
	assert_int_equal((uintptr_t)iov[1].iov_base, 0x20000000);
	assert_int_equal(iov[1].iov_len, 5);
	/* ... with room for one: the first, then resume from there */
	assert_int_equal(sv_mr_iov(mr, 3 * 4096 - 5, 10, iov, 1, &done), 1);
	assert_int_equal(done, 5);
	assert_int_equal(sv_mr_iov(mr, 3 * 4096, 5, iov, 1, &done), 1);
	assert_int_equal((uintptr_t)iov[0].iov_base, 0x20000000);
	assert_int_equal(done, 5);
}

static void test_fast_reg_blocks(void **state)
{
	struct sv_mr *mr = alloc_fr(F.pd, 300);
	uint64_t h;
	void *map = alloc_pl(F.c, 300, &h);

	(void)state;
	rnd_state = 0xfeedbeef;
	for (unsigned int round = 0; round < 80; round++) {
		uint64_t total = 0, len;
		struct fr_args a;

		R.n = 1 + (uint32_t)(rnd() % (round < 40 ? 12 : 300));
		for (uint32_t i = 0; i < R.n; i++) {
			switch (rnd() % 4) {
			case 0:
				R.len[i] = 1 + rnd() % 3;   /* tiny */
				break;
			case 1:
				R.len[i] = 4095 + rnd() % 3;
				break;
			default:
				R.len[i] = 1 + rnd() % 20000;
				break;
			}
			if (i && rnd() % 4 == 0)
				R.addr[i] = R.addr[i - 1] + R.len[i - 1];
			else
				R.addr[i] = rnd() % (1ull << 47); /* any alignment */
			total += R.len[i];
		}
		/* fbo anywhere, also past the first block */
		R.fbo = rnd() % (total < (1u << 31) ? total : (1u << 31));
		len = 1 + rnd() % (total - R.fbo);
		put_list(map, true);
		a = (struct fr_args){ .list = h, .iova = 0x1000, .length = len,
				      .n = R.n, .fbo = (uint32_t)R.fbo,
				      .access = LW | RR,
				      .flags = SV_REG_BLOCKS,
				      .shift = (uint8_t)rnd() /* ignored */ };
		assert_int_equal(fast_reg(&F.qp, mr, round, &a), IBV_WC_SUCCESS);
		assert_int_equal(mr->iova, 0x1000);
		check_boundaries(&R, mr);
		for (int i = 0; i < 50; i++) {
			uint64_t off = rnd() % len;

			check_range(&R, mr, off, 1 + rnd() % (len - off),
				    1 + (unsigned int)(rnd() % 8));
		}
		assert_int_equal(sv_mm_local_inv(&F.qp, mr->key), IBV_WC_SUCCESS);
	}
}

/* ---- fast registration: every refusal ---- */

static void test_fast_reg_refusals(void **state)
{
	struct sv_mr *mr = alloc_fr(F.pd, 4), *mr2 = alloc_fr(F.pd2, 4);
	struct sv_mr *small = alloc_fr(F.pd, 2);
	static char buf[8192];
	struct sv_mr *reg = reg_mr(F.pd, buf, sizeof(buf), LW);
	struct sv_mw *mw = alloc_mw(F.pd, SV_MW_TYPE_2B);
	uint64_t h, h1, ho, *w = alloc_pl(F.c, 4, &h), *w1 = alloc_pl(F.c, 1, &h1);
	uint64_t *wo = alloc_pl(F.c2, 4, &ho);
	const struct fr_args good = { .list = h, .iova = 0x7000, .length = 4 * 4096 - 10,
				      .n = 4, .fbo = 10, .access = LW | RR, .shift = 12 };
	struct fr_args a;
	uint32_t key = mr->key;
	struct sv_wqe_reg wr;

	(void)state;
	for (int i = 0; i < 4; i++)
		w[i] = wo[i] = 0x40000000 + 0x10000ull * i;
	w1[0] = 0x40000000;

#define REFUSED(qp_, mr_, args_)                                               \
	do {                                                                   \
		assert_int_equal(fast_reg(qp_, mr_, 0x33, args_),              \
				 IBV_WC_LOC_QP_OP_ERR);                        \
		assert_true(mr->invalid);                                      \
		assert_int_equal(mr->key, key);                                \
		assert_ptr_equal(sv_keytab_lookup(&sv_dev.keys, key), mr);     \
	} while (0)

	/* the MR: an MW's index, a regular MR, another PD's, another QP's */
	wr = (struct sv_wqe_reg){ .key = mw->key, .list = h, .length = 100,
				  .access = LW, .page_shift = 12 };
	assert_int_equal(sv_mm_fast_reg(&F.qp, &wr, 1), IBV_WC_LOC_QP_OP_ERR);
	assert_false(mw->bound);
	assert_int_equal(fast_reg(&F.qp, reg, 0x33, &good), IBV_WC_LOC_QP_OP_ERR);
	assert_false(reg->invalid);
	REFUSED(&F.qp, mr2, &good);
	REFUSED(&F.qp2, mr, &good);
	REFUSED(&F.qpo, mr, &good);
	/* a key index that names nothing */
	wr.key = SV_KEY_MAKE(4000, 1);
	assert_int_equal(sv_mm_fast_reg(&F.qp, &wr, 1), IBV_WC_LOC_QP_OP_ERR);
	wr.key = 0;
	assert_int_equal(sv_mm_fast_reg(&F.qp, &wr, 1), IBV_WC_LOC_QP_OP_ERR);
	wr.key = 0xffffffffu;
	assert_int_equal(sv_mm_fast_reg(&F.qp, &wr, 1), IBV_WC_LOC_QP_OP_ERR);

	/* the list: garbage, another client's, another type's handle */
	a = good; a.list = 0; REFUSED(&F.qp, mr, &a);
	a = good; a.list = ~0ull; REFUSED(&F.qp, mr, &a);
	a = good; a.list = ho; REFUSED(&F.qp, mr, &a);
	a = good; a.list = F.pd->handle; REFUSED(&F.qp, mr, &a);
	a = good; a.list = mr->handle; REFUSED(&F.qp, mr, &a);
	/* the count: 0, above the MR's room, above the list's */
	a = good; a.n = 0; REFUSED(&F.qp, mr, &a);
	a = good; a.n = 5; REFUSED(&F.qp, mr, &a);
	a = good; a.n = ~0u; REFUSED(&F.qp, mr, &a);
	a = good; a.list = h1; a.n = 2; a.fbo = 0; a.length = 4096;
	REFUSED(&F.qp, mr, &a);
	a = good; a.n = 3;
	assert_int_equal(fast_reg(&F.qp, small, 1, &a), IBV_WC_LOC_QP_OP_ERR);
	/* page size */
	a = good; a.shift = 11; REFUSED(&F.qp, mr, &a);
	a = good; a.shift = 0; REFUSED(&F.qp, mr, &a);
	a = good; a.shift = 31; REFUSED(&F.qp, mr, &a);
	a = good; a.shift = 255; REFUSED(&F.qp, mr, &a);
	/* fbo and length */
	a = good; a.fbo = 4096; a.length = 100; REFUSED(&F.qp, mr, &a);
	a = good; a.fbo = ~0u; REFUSED(&F.qp, mr, &a);
	a = good; a.length = 4 * 4096 - 9; REFUSED(&F.qp, mr, &a);
	a = good; a.length = 0; REFUSED(&F.qp, mr, &a);
	a = good; a.length = ~0ull; REFUSED(&F.qp, mr, &a);
	a = good; a.length = (1ull << 47) + 1; REFUSED(&F.qp, mr, &a);
	/* iova + length wraps (not zero-based) */
	a = good; a.iova = ~0ull - 100; REFUSED(&F.qp, mr, &a);
	/* access */
	a = good; a.access = RW; REFUSED(&F.qp, mr, &a);
	a = good; a.access = RA | RR; REFUSED(&F.qp, mr, &a);
	a = good; a.access = LW | (1u << 30); REFUSED(&F.qp, mr, &a);
	/* flags */
	a = good; a.flags = SV_REG_TYPE1; REFUSED(&F.qp, mr, &a);
	a = good; a.flags = 4; REFUSED(&F.qp, mr, &a);
	a = good; a.flags = 0xffff; REFUSED(&F.qp, mr, &a);
	/* pages: unaligned, wrapping */
	w[2] += 1; REFUSED(&F.qp, mr, &good); w[2] -= 1;
	w[2] += 2048; REFUSED(&F.qp, mr, &good); w[2] -= 2048;
	w[3] = ~0ull & ~4095ull; REFUSED(&F.qp, mr, &good);
	w[3] = 0x40030000;
	/* blocks: empty, huge, wrapping, too short for fbo + length */
	a = good;
	a.flags = SV_REG_BLOCKS;
	a.n = 2;
	a.fbo = 5;
	a.length = 100;
	w[0] = 0x1000; w[1] = 50; w[2] = 0x9000; w[3] = 55;
	assert_int_equal(fast_reg(&F.qp, mr, 9, &a), IBV_WC_SUCCESS);
	assert_int_equal(sv_mm_local_inv(&F.qp, mr->key), IBV_WC_SUCCESS);
	key = mr->key;
	w[3] = 54; REFUSED(&F.qp, mr, &a);
	w[3] = 0; REFUSED(&F.qp, mr, &a);
	w[3] = (1ull << 47) + 1; REFUSED(&F.qp, mr, &a);
	w[3] = ~0ull; REFUSED(&F.qp, mr, &a);
	w[3] = 55; w[2] = ~0ull - 10; REFUSED(&F.qp, mr, &a);
	w[2] = 0x9000;
	a.fbo = 6; REFUSED(&F.qp, mr, &a);
	a.fbo = 5;

	/* a refusal leaves the MR as it was: the good request still works */
	assert_int_equal(fast_reg(&F.qp, mr, 0x44, &a), IBV_WC_SUCCESS);
	assert_int_equal(mr->key, newkey(key, 0x44));
	assert_null(sv_keytab_lookup(&sv_dev.keys, key));
	assert_true(lkey_ok(mr->key, F.pd, 0x7000, 100, true));
	assert_false(lkey_ok(key, F.pd, 0x7000, 100, true));
	/* valid: no second fast registration, even with the same key */
	assert_int_equal(fast_reg(&F.qp, mr, 0x44, &a), IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(fast_reg(&F.qp, mr, 0x45, &a), IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(mr->key, newkey(key, 0x44));
	assert_false(mr->invalid);
	/* the list may change now: the MR keeps its copy */
	w[0] = 0xdead000;
	{
		struct iovec iov[2];
		uint64_t done;

		assert_int_equal(sv_mr_iov(mr, 0, 100, iov, 2, &done), 2);
		assert_int_equal((uintptr_t)iov[0].iov_base, 0x1005);
		assert_int_equal(iov[0].iov_len, 45);
		assert_int_equal((uintptr_t)iov[1].iov_base, 0x9000);
	}
#undef REFUSED
}

/* ---- keys of plain MRs ---- */

static void test_lkey_rkey_plain(void **state)
{
	static char buf[3 * 4096];
	struct sv_mr *mr = reg_mr(F.pd, buf, sizeof(buf), LW | RR | RW);
	struct sv_mr *ro = reg_mr(F.pd, buf, 100, RR);
	struct sv_mr *zb = NULL;
	uint64_t a = (uintptr_t)buf;
	struct sv_map m;

	(void)state;
	assert_int_equal(reg_mr_x(F.pd, buf + 8, 64, 0x1234, LW | RA | ZB, &zb), 0);
	assert_int_equal(zb->iova, 0);
	assert_null(zb->blocks);

	assert_int_equal(sv_lkey_map(mr->key, F.pd, a + 5, 10, true, &m),
			 IBV_WC_SUCCESS);
	assert_ptr_equal(m.mr, mr);
	assert_int_equal(m.off, 5);
	assert_int_equal(m.len, 10);
	assert_true(lkey_ok(mr->key, F.pd, a, sizeof(buf), true));
	assert_true(lkey_ok(mr->key, F.pd, a + sizeof(buf), 0, true));
	assert_false(lkey_ok(mr->key, F.pd, a, sizeof(buf) + 1, true));
	assert_false(lkey_ok(mr->key, F.pd, a - 1, 1, true));
	assert_false(lkey_ok(mr->key, F.pd, a + 1, ~0ull, true));
	assert_false(lkey_ok(mr->key, F.pd2, a, 1, false));
	assert_false(lkey_ok(mr->key, F.opd, a, 1, false));
	assert_false(lkey_ok(mr->key ^ 0x80, F.pd, a, 1, false));
	assert_false(lkey_ok(SV_KEY_MAKE(4000, mr->key), F.pd, a, 1, false));
	assert_false(lkey_ok(ro->key, F.pd, a, 1, true));
	assert_true(lkey_ok(ro->key, F.pd, a, 1, false));
	assert_true(lkey_ok(zb->key, F.pd, 0, 64, true));
	assert_false(lkey_ok(zb->key, F.pd, a + 8, 1, true));
	assert_int_equal(sv_lkey_map(zb->key, F.pd, 63, 1, true, &m),
			 IBV_WC_SUCCESS);
	assert_int_equal(m.off, 63);

	assert_true(rkey_ok(mr->key, &F.qp, a, 10, RR, NULL));
	assert_true(rkey_ok(mr->key, &F.qp_b, a, 10, RW, NULL));
	assert_false(rkey_ok(mr->key, &F.qp, a, 10, RA, NULL));
	assert_false(rkey_ok(mr->key, &F.qp, a, 10, 0, NULL));
	assert_false(rkey_ok(mr->key, &F.qp2, a, 10, RR, NULL));
	assert_false(rkey_ok(mr->key, &F.qpo, a, 10, RR, NULL));
	assert_false(rkey_ok(mr->key, &F.qp, a + sizeof(buf) - 9, 10, RR, NULL));
	assert_false(rkey_ok(ro->key, &F.qp, a, 1, RW, NULL));
	assert_true(rkey_ok(zb->key, &F.qp, 56, 8, RA, NULL));
	assert_false(rkey_ok(zb->key, &F.qp, 57, 8, RA, NULL));
	assert_false(rkey_ok(zb->key, &F.qp, 0, 8, RR, NULL));

	/* regular MRs cannot be invalidated, locally or by the peer */
	assert_int_equal(sv_mm_local_inv(&F.qp, mr->key), IBV_WC_LOC_QP_OP_ERR);
	assert_false(sv_mm_remote_inv_ok(&F.qp, mr->key));
	sv_mm_remote_inv(&F.qp, mr->key);
	assert_true(lkey_ok(mr->key, F.pd, a, 1, false));
	/* contiguous translation */
	{
		struct iovec iov[2];
		uint64_t done;

		assert_int_equal(sv_mr_iov(mr, 100, 5000, iov, 2, &done), 1);
		assert_int_equal(done, 5000);
		assert_ptr_equal(iov[0].iov_base, buf + 100);
		assert_int_equal(iov[0].iov_len, 5000);
	}
}

/* ---- local and remote invalidation ---- */

static void test_invalidate(void **state)
{
	struct sv_mr *mr = alloc_fr(F.pd, 1);
	uint64_t h, *w = alloc_pl(F.c, 1, &h);
	const struct fr_args a = { .list = h, .length = 4096, .n = 1,
				   .access = LW | RR | RW, .shift = 12 };
	uint32_t k;

	(void)state;
	w[0] = 0x5000;
	assert_int_equal(fast_reg(&F.qp, mr, 0x10, &a), IBV_WC_SUCCESS);
	k = mr->key;
	/* not quite the key, another PD's QP, another client's QP */
	assert_int_equal(sv_mm_local_inv(&F.qp, k ^ 1), IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(sv_mm_local_inv(&F.qp, newkey(k, 0x11)),
			 IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(sv_mm_local_inv(&F.qp2, k), IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(sv_mm_local_inv(&F.qpo, k), IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(sv_mm_local_inv(&F.qp, 0), IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(sv_mm_local_inv(&F.qp, 0xffffffffu),
			 IBV_WC_LOC_QP_OP_ERR);
	assert_false(sv_mm_remote_inv_ok(&F.qp2, k));
	assert_false(sv_mm_remote_inv_ok(&F.qpo, k));
	assert_false(sv_mm_remote_inv_ok(&F.qp, k ^ 1));
	sv_mm_remote_inv(&F.qp2, k);
	sv_mm_remote_inv(&F.qp, k ^ 1);
	assert_false(mr->invalid);
	/* any QP of the PD may: the peer of qp_b, by SEND_WITH_INV */
	assert_true(sv_mm_remote_inv_ok(&F.qp_b, k));
	assert_false(mr->invalid);     /* asking changes nothing */
	sv_mm_remote_inv(&F.qp_b, k);
	assert_true(mr->invalid);
	assert_false(rkey_ok(k, &F.qp, 0x5000, 1, RR, NULL));
	assert_false(sv_mm_remote_inv_ok(&F.qp_b, k));
	assert_int_equal(sv_mm_local_inv(&F.qp, k), IBV_WC_LOC_QP_OP_ERR);
	/* again, locally */
	assert_int_equal(fast_reg(&F.qp, mr, 0x12, &a), IBV_WC_SUCCESS);
	assert_int_equal(sv_mm_local_inv(&F.qp_b, mr->key), IBV_WC_SUCCESS);
	assert_true(mr->invalid);
	/* the same consumer key twice in a row is allowed */
	assert_int_equal(fast_reg(&F.qp, mr, 0x12, &a), IBV_WC_SUCCESS);
	assert_true(rkey_ok(mr->key, &F.qp, 0, 4096, RW, NULL));
}

/* ---- memory windows ---- */

static void test_mw_cmds(void **state)
{
	static char buf[4096];
	struct sv_mr *mr = reg_mr(F.pd, buf, sizeof(buf), LW | MWB);
	struct sv_mw *mw;
	uint32_t key;

	(void)state;
	assert_int_equal(alloc_mw_x(F.c, 0, SV_MW_TYPE_1, 0, NULL), -EINVAL);
	assert_int_equal(alloc_mw_x(F.c, mr->handle, SV_MW_TYPE_1, 0, NULL),
			 -EINVAL);
	assert_int_equal(alloc_mw_x(F.c, F.opd->handle, SV_MW_TYPE_1, 0, NULL),
			 -EINVAL);
	assert_int_equal(alloc_mw_x(F.c, F.pd->handle, 0, 0, NULL), -EINVAL);
	assert_int_equal(alloc_mw_x(F.c, F.pd->handle, 4, 0, NULL), -EINVAL);
	assert_int_equal(alloc_mw_x(F.c, F.pd->handle, ~0u, 0, NULL), -EINVAL);
	assert_int_equal(alloc_mw_x(F.c, F.pd->handle, SV_MW_TYPE_2A, 1, NULL),
			 -EINVAL);
	assert_int_equal(sv_dev.total[SV_OBJ_MW], 0);
	assert_int_equal(F.pd->refs, 1);

	mw = alloc_mw(F.pd, SV_MW_TYPE_2A);
	key = mw->key;
	assert_int_equal(F.pd->refs, 2);
	/* unbound: its key grants nothing; it is no lkey */
	assert_false(rkey_ok(key, &F.qp, 0, 0, RR, NULL));
	assert_false(lkey_ok(key, F.pd, 0, 0, false));
	assert_int_equal(bind_mw(&F.qp, mw, 5, mr->key, (uintptr_t)buf, 100, RR, 0),
			 IBV_WC_SUCCESS);
	assert_int_equal(mr->mw_bound, 1);
	/* an MR with a window bound: no dereg, no rereg */
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), -EBUSY);
	{
		struct sv_cmd cmd;
		struct sv_rsp rsp;

		sv_cmd_init(&cmd, SV_CMD_REREG_MR);
		cmd.u.rereg_mr.mr = mr->handle;
		cmd.u.rereg_mr.flags = IBV_REREG_MR_CHANGE_ACCESS;
		cmd.u.rereg_mr.access = LW;
		assert_int_equal(run_cmd(F.c, sv_cmd_rereg_mr, &cmd, &rsp, NULL),
				 -EBUSY);
	}
	/* dealloc of a bound window: fine, waits for copies */
	assert_int_equal(cmd_handle(F.c, sv_cmd_dealloc_mw, mr->handle), -EINVAL);
	assert_int_equal(cmd_handle(F.c2, sv_cmd_dealloc_mw, mw->handle), -EINVAL);
	quiesces = 0;
	assert_int_equal(cmd_handle(F.c, sv_cmd_dealloc_mw, mw->handle), 0);
	assert_int_equal(quiesces, 1);
	assert_int_equal(mr->mw_bound, 0);
	assert_int_equal(F.pd->refs, 1);
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), 0);
	assert_int_equal(sv_dev.keys.live, 0);
}

/* Every refusal of BIND_MW, for each type. */
static void test_bind_refusals(void **state)
{
	static char buf[8192];
	uint64_t a = (uintptr_t)buf;
	struct sv_mr *mr = reg_mr(F.pd, buf, sizeof(buf), LW | MWB);
	struct sv_mr *nobind = reg_mr(F.pd, buf, sizeof(buf), LW);
	struct sv_mr *ro = reg_mr(F.pd, buf, sizeof(buf), MWB);
	struct sv_mr *other = reg_mr(F.pd2, buf, sizeof(buf), LW | MWB);
	struct sv_mr *fr = alloc_fr(F.pd, 1);
	struct sv_mw *mo = alloc_mw(F.opd, SV_MW_TYPE_2B);
	struct sv_mw *m2 = alloc_mw(F.pd2, SV_MW_TYPE_2A);

	(void)state;
	for (uint32_t type = SV_MW_TYPE_1; type <= SV_MW_TYPE_2B; type++) {
		struct sv_mw *mw = alloc_mw(F.pd, type);
		uint16_t fl = type == SV_MW_TYPE_1 ? SV_REG_TYPE1 : 0;
		uint32_t key = mw->key;

#define BAD(qp_, mw_, lkey_, iova_, len_, acc_, fl_)                            \
	do {                                                                   \
		assert_int_equal(bind_mw(qp_, mw_, 0x77, lkey_, iova_, len_,     \
				      acc_, fl_), IBV_WC_MW_BIND_ERR);         \
		assert_false(mw->bound);                                       \
		assert_int_equal(mw->key, key);                                \
	} while (0)

		/* the window: wrong type flag, an MR's index, other PD/client */
		BAD(&F.qp, mw, mr->key, a, 10, RR, fl ^ SV_REG_TYPE1);
		BAD(&F.qp, mw, mr->key, a, 10, RR, fl | SV_REG_BLOCKS);
		BAD(&F.qp, mw, mr->key, a, 10, RR, fl | 0x100);
		{
			struct sv_wqe_reg wr = {
				.iova = a, .key = mr->key, .access = RR,
				.length = 10, .list = mr->key, .flags = fl,
			};

			assert_int_equal(sv_mm_bind_mw(&F.qp, &wr),
					 IBV_WC_MW_BIND_ERR);
		}
		BAD(&F.qp2, mw, mr->key, a, 10, RR, fl);
		BAD(&F.qpo, mw, mr->key, a, 10, RR, fl);
		assert_int_equal(bind_mw(&F.qp, mo, 1, mr->key, a, 10, RR, 0),
				 IBV_WC_MW_BIND_ERR);
		assert_int_equal(bind_mw(&F.qp, m2, 1, mr->key, a, 10, RR, 0),
				 IBV_WC_MW_BIND_ERR);
		/* access: an unknown bit (LOCAL_WRITE and MW_BIND are the
		 * MR's rights, ignored in a bind: test_mw_bind_local_bits) */
		BAD(&F.qp, mw, mr->key, a, 10, RR | (1u << 20), fl);
		/* the MR: not one, stale, 64-bit junk, no MW_BIND, other PD,
		 * invalid, a window's key */
		BAD(&F.qp, mw, 0, a, 10, RR, fl);
		BAD(&F.qp, mw, mr->key ^ 1, a, 10, RR, fl);
		BAD(&F.qp, mw, (1ull << 32) | mr->key, a, 10, RR, fl);
		BAD(&F.qp, mw, nobind->key, a, 10, RR, fl);
		BAD(&F.qp, mw, other->key, a, 10, RR, fl);
		BAD(&F.qp, mw, fr->key, 0, 1, RR, fl);
		BAD(&F.qp, mw, mo->key, a, 10, RR, fl);
		/* remote write / atomic without the MR's local write */
		BAD(&F.qp, mw, ro->key, a, 10, RW, fl);
		BAD(&F.qp, mw, ro->key, a, 10, RA, fl);
		/* the range */
		BAD(&F.qp, mw, mr->key, a - 1, 10, RR, fl);
		BAD(&F.qp, mw, mr->key, a + 8000, 193, RR, fl);
		BAD(&F.qp, mw, mr->key, a + 1, ~0ull, RR, fl);
		BAD(&F.qp, mw, mr->key, ~0ull, 2, RR, fl);
		/* and right: it binds */
		assert_int_equal(bind_mw(&F.qp, mw, 0x77, ro->key, a, 10, RR, fl),
				 IBV_WC_SUCCESS);
		assert_true(mw->bound);
		assert_int_equal(mw->key, newkey(key, 0x77));
		assert_null(sv_keytab_lookup(&sv_dev.keys, key));
		if (type != SV_MW_TYPE_1) {
			/* type 2: bound, so no second bind until invalidated */
			assert_int_equal(bind_mw(&F.qp, mw, 0x78, mr->key, a, 10,
					      RR, 0), IBV_WC_MW_BIND_ERR);
			assert_int_equal(mw->key, newkey(key, 0x77));
			assert_ptr_equal(mw->mr, ro);
		}
		assert_int_equal(cmd_handle(F.c, sv_cmd_dealloc_mw, mw->handle), 0);
#undef BAD
	}
	assert_int_equal(mr->mw_bound + ro->mw_bound, 0);
}

/* What a bound window grants, to whom, per type. */
static void test_mw_access(void **state)
{
	static char buf[8192];
	uint64_t a = (uintptr_t)buf;
	struct sv_mr *mr = reg_mr(F.pd, buf, sizeof(buf), LW | MWB | RR);
	struct sv_mw *t1 = alloc_mw(F.pd, SV_MW_TYPE_1);
	struct sv_mw *t2a = alloc_mw(F.pd, SV_MW_TYPE_2A);
	struct sv_mw *t2b = alloc_mw(F.pd, SV_MW_TYPE_2B);
	struct sv_map m;
	uint32_t k;

	(void)state;
	assert_int_equal(bind_mw(&F.qp, t1, 1, mr->key, a + 100, 200, RR | RW,
			      SV_REG_TYPE1), IBV_WC_SUCCESS);
	assert_int_equal(bind_mw(&F.qp, t2a, 2, mr->key, a + 1000, 50, RW | ZB, 0),
			 IBV_WC_SUCCESS);
	assert_int_equal(bind_mw(&F.qp, t2b, 3, mr->key, a, 8192, RA | RR, 0),
			 IBV_WC_SUCCESS);
	assert_int_equal(mr->mw_bound, 3);

	/* type 1: any QP of the PD */
	assert_true(rkey_ok(t1->key, &F.qp, a + 100, 200, RR, &m));
	assert_ptr_equal(m.mr, mr);
	assert_int_equal(m.off, 100);
	assert_true(rkey_ok(t1->key, &F.qp_b, a + 299, 1, RW, &m));
	assert_int_equal(m.off, 299);
	assert_false(rkey_ok(t1->key, &F.qp, a + 99, 1, RR, NULL));
	assert_false(rkey_ok(t1->key, &F.qp, a + 300, 1, RR, NULL));
	assert_false(rkey_ok(t1->key, &F.qp, a + 100, 1, RA, NULL));
	assert_false(rkey_ok(t1->key, &F.qp2, a + 100, 1, RR, NULL));
	assert_false(rkey_ok(t1->key, &F.qpo, a + 100, 1, RR, NULL));
	assert_false(rkey_ok(t1->key ^ 0x40, &F.qp, a + 100, 1, RR, NULL));
	/* type 2A: zero-based, only the QP it is bound to */
	assert_true(rkey_ok(t2a->key, &F.qp, 0, 50, RW, &m));
	assert_int_equal(m.off, 1000);
	assert_true(rkey_ok(t2a->key, &F.qp, 49, 1, RW, &m));
	assert_int_equal(m.off, 1049);
	assert_false(rkey_ok(t2a->key, &F.qp, a + 1000, 1, RW, NULL));
	assert_false(rkey_ok(t2a->key, &F.qp, 50, 1, RW, NULL));
	assert_false(rkey_ok(t2a->key, &F.qp, 0, 1, RR, NULL));
	assert_false(rkey_ok(t2a->key, &F.qp_b, 0, 1, RW, NULL));
	assert_false(rkey_ok(t2a->key, &F.qp2, 0, 1, RW, NULL));
	/* type 2B: the QP and its PD */
	assert_true(rkey_ok(t2b->key, &F.qp, a, 8192, RR, NULL));
	assert_true(rkey_ok(t2b->key, &F.qp, a + 8, 8, RA, NULL));
	assert_false(rkey_ok(t2b->key, &F.qp, a, 1, RW, NULL));
	assert_false(rkey_ok(t2b->key, &F.qp_b, a, 1, RR, NULL));
	/* a window is never an lkey */
	assert_false(lkey_ok(t1->key, F.pd, a + 100, 1, false));
	assert_false(lkey_ok(t2b->key, F.pd, a, 1, false));

	/* invalidation: type 1 never (MW_BIND_ERR); type 2 by its QP only */
	assert_int_equal(sv_mm_local_inv(&F.qp, t1->key), IBV_WC_MW_BIND_ERR);
	assert_false(sv_mm_remote_inv_ok(&F.qp, t1->key));
	assert_int_equal(sv_mm_local_inv(&F.qp_b, t2a->key), IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(sv_mm_local_inv(&F.qp2, t2a->key), IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(sv_mm_local_inv(&F.qp, t2a->key ^ 1),
			 IBV_WC_LOC_QP_OP_ERR);
	assert_false(sv_mm_remote_inv_ok(&F.qp_b, t2b->key));
	k = t2a->key;
	assert_int_equal(sv_mm_local_inv(&F.qp, k), IBV_WC_SUCCESS);
	assert_false(t2a->bound);
	assert_int_equal(mr->mw_bound, 2);
	assert_false(rkey_ok(k, &F.qp, 0, 1, RW, NULL));
	assert_int_equal(sv_mm_local_inv(&F.qp, k), IBV_WC_LOC_QP_OP_ERR);
	/* free again: it binds anew, to another QP */
	assert_int_equal(bind_mw(&F.qp_b, t2a, 9, mr->key, a, 10, RR, 0),
			 IBV_WC_SUCCESS);
	assert_true(rkey_ok(t2a->key, &F.qp_b, a, 10, RR, NULL));
	assert_false(rkey_ok(t2a->key, &F.qp, a, 10, RR, NULL));
	/* by the peer of its QP */
	assert_true(sv_mm_remote_inv_ok(&F.qp, t2b->key));
	k = t2b->key;
	sv_mm_remote_inv(&F.qp, k);
	assert_false(t2b->bound);
	assert_false(rkey_ok(k, &F.qp, a, 1, RR, NULL));
	assert_int_equal(mr->mw_bound, 2);

	/* type 1: rebind moves it (the old key and range go), unbind */
	k = t1->key;
	assert_int_equal(bind_mw(&F.qp_b, t1, SV_KEY_CONSUMER(k) + 1, mr->key,
			      a + 4096, 4096, RR | ZB, SV_REG_TYPE1),
			 IBV_WC_SUCCESS);
	assert_int_equal(mr->mw_bound, 2);
	assert_false(rkey_ok(k, &F.qp, a + 100, 1, RR, NULL));
	assert_true(rkey_ok(t1->key, &F.qp, 4095, 1, RR, &m));
	assert_int_equal(m.off, 8191);
	k = t1->key;
	assert_int_equal(bind_mw(&F.qp, t1, SV_KEY_CONSUMER(k) + 1, 0, 0, 0, 0,
			      SV_REG_TYPE1), IBV_WC_SUCCESS);
	assert_false(t1->bound);
	assert_int_equal(mr->mw_bound, 1);
	assert_false(rkey_ok(k, &F.qp, 0, 1, RR, NULL));
	assert_false(rkey_ok(t1->key, &F.qp, 0, 0, RR, NULL));
	/* unbinding an unbound type 1 window is fine too */
	assert_int_equal(bind_mw(&F.qp, t1, 3, 0, 0, 0, 0, SV_REG_TYPE1),
			 IBV_WC_SUCCESS);
	/* LOCAL_WRITE and MW_BIND are the MR's rights: a bind ignores them
	 * (as rdma-core's providers do); the window grants the remote ones */
	assert_int_equal(bind_mw(&F.qp, t1, 4, mr->key, a, 64,
				 LW | MWB | RW, SV_REG_TYPE1), IBV_WC_SUCCESS);
	assert_int_equal(t1->access, RW);
	assert_true(rkey_ok(t1->key, &F.qp, a, 64, RW, NULL));
	assert_false(rkey_ok(t1->key, &F.qp, a, 64, RR, NULL));
	assert_false(lkey_ok(t1->key, F.pd, a, 1, true));
	assert_int_equal(bind_mw(&F.qp, t1, 5, mr->key, a, 64, LW,
				 SV_REG_TYPE1), IBV_WC_SUCCESS);
	assert_false(rkey_ok(t1->key, &F.qp, a, 1, RR, NULL));
	assert_false(rkey_ok(t1->key, &F.qp, a, 1, RW, NULL));
	/* the client goes with t2a bound: windows go before the MR */
}

/* A window over a fast-register MR dies with the MR's registration. */
static void test_mw_over_fast_reg(void **state)
{
	struct sv_mr *mr = alloc_fr(F.pd, 2);
	struct sv_mw *mw = alloc_mw(F.pd, SV_MW_TYPE_1);
	uint64_t h, *w = alloc_pl(F.c, 2, &h);
	const struct fr_args fa = { .list = h, .iova = 0x10000, .length = 8192,
				    .n = 2, .access = LW | MWB, .shift = 12 };

	(void)state;
	w[0] = 0x3000;
	w[1] = 0x9000;
	assert_int_equal(fast_reg(&F.qp, mr, 1, &fa), IBV_WC_SUCCESS);
	assert_int_equal(bind_mw(&F.qp, mw, 1, mr->key, 0x10ff0, 0x20, RR,
			      SV_REG_TYPE1), IBV_WC_SUCCESS);
	{
		struct sv_map m;
		struct iovec iov[4];
		uint64_t done;

		assert_true(rkey_ok(mw->key, &F.qp, 0x10ff0, 0x20, RR, &m));
		assert_int_equal(sv_mr_iov(m.mr, m.off, m.len, iov, 4, &done), 2);
		assert_int_equal((uintptr_t)iov[0].iov_base, 0x3ff0);
		assert_int_equal((uintptr_t)iov[1].iov_base, 0x9000);
		assert_int_equal(iov[1].iov_len, 0x10);
	}
	assert_int_equal(sv_mm_local_inv(&F.qp, mr->key), IBV_WC_SUCCESS);
	assert_false(rkey_ok(mw->key, &F.qp, 0x10ff0, 1, RR, NULL));
	/* registered again, even at the same place: the window stays dead */
	assert_int_equal(fast_reg(&F.qp, mr, 2, &fa), IBV_WC_SUCCESS);
	assert_false(rkey_ok(mw->key, &F.qp, 0x10ff0, 1, RR, NULL));
	/* still counted until unbound */
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), -EBUSY);
	assert_int_equal(bind_mw(&F.qp, mw, 3, 0, 0, 0, 0, SV_REG_TYPE1),
			 IBV_WC_SUCCESS);
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), 0);
}

/* ---- REG_MR_LIST ---- */

static void test_reg_mr_list(void **state)
{
	long pg = getpagesize();
	char *mem = mmap(NULL, (size_t)pg * 8, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t h, h2, ho, *w = alloc_pl(F.c, 8, &h);
	uint64_t *wo = alloc_pl(F.c2, 8, &ho);
	struct sv_mr *mr = NULL;
	struct list_args good, x;

	(void)state;
	(void)alloc_pl(F.c, 2, &h2);
	assert_true(mem != MAP_FAILED);
	/* pages 1..5 read-write, 6 read-only, 7 unmapped, 0 no access */
	assert_int_equal(mprotect(mem, (size_t)pg, PROT_NONE), 0);
	assert_int_equal(mprotect(mem + 6 * pg, (size_t)pg, PROT_READ), 0);
	assert_int_equal(munmap(mem + 7 * pg, (size_t)pg), 0);

	/* blocks of odd sizes and alignments, out of order */
	R.n = 4;
	R.addr[0] = (uintptr_t)mem + 3 * pg + 17;  R.len[0] = 1000;
	R.addr[1] = (uintptr_t)mem + pg + 1;       R.len[1] = 3;
	R.addr[2] = R.addr[1] + 3;                 R.len[2] = (uint64_t)pg;
	R.addr[3] = (uintptr_t)mem + 5 * pg - 5;   R.len[3] = 5 + (uint64_t)pg;
	R.fbo = 7;
	put_list(w, true);
	memcpy(wo, w, 64);
	good = (struct list_args){ .pd = F.pd->handle, .list = h,
				   .length = 1000 + 3 + (uint64_t)pg + 5 +
					     (uint64_t)pg - 7,
				   .iova = 0x1000, .n = 4, .fbo = 7,
				   .access = LW | RW, .flags = SV_REG_BLOCKS };
	assert_int_equal(reg_list(F.c, &good, &mr), 0);
	assert_int_equal(mr->kind, SV_MR_REGULAR);
	assert_false(mr->invalid);
	assert_int_equal(mr->nblocks, 3);           /* blocks 1 and 2 merged */
	assert_int_equal(sv_dev.mr_blocks, 5);
	check_boundaries(&R, mr);
	assert_true(lkey_ok(mr->key, F.pd, 0x1000, good.length, true));
	assert_true(rkey_ok(mr->key, &F.qp, 0x1000 + good.length - 1, 1, RW,
			    NULL));
	/* a regular MR: no invalidation */
	assert_int_equal(sv_mm_local_inv(&F.qp, mr->key), IBV_WC_LOC_QP_OP_ERR);
	/* rereg adding a write right checks the blocks again ... */
	{
		struct sv_cmd cmd;
		struct sv_rsp rsp;

		sv_cmd_init(&cmd, SV_CMD_REREG_MR);
		cmd.u.rereg_mr.mr = mr->handle;
		cmd.u.rereg_mr.flags = IBV_REREG_MR_CHANGE_ACCESS;
		cmd.u.rereg_mr.access = LW | RA;
		assert_int_equal(run_cmd(F.c, sv_cmd_rereg_mr, &cmd, &rsp, NULL),
				 0);
		assert_int_equal(mr->nblocks, 3);
		/* ... and a new translation makes it contiguous */
		cmd.u.rereg_mr.flags = IBV_REREG_MR_CHANGE_TRANSLATION;
		cmd.u.rereg_mr.addr = (uintptr_t)mem + pg;
		cmd.u.rereg_mr.length = (uint64_t)pg;
		cmd.u.rereg_mr.iova = 0x2000;
		assert_int_equal(run_cmd(F.c, sv_cmd_rereg_mr, &cmd, &rsp, NULL),
				 0);
		assert_null(mr->blocks);
		assert_int_equal(mr->nblocks, 0);
		assert_int_equal(sv_dev.mr_blocks, 0);
		assert_true(lkey_ok(rsp.u.mr.lkey, F.pd, 0x2000, (uint64_t)pg,
				    true));
	}
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), 0);

	/* pages: page_shift from the system page size */
	for (int i = 0; i < 4; i++)
		w[i] = (uintptr_t)mem + (uint64_t)pg * (uint64_t)(5 - i);
	x = (struct list_args){ .pd = F.pd->handle, .list = h, .n = 4,
				.length = 4 * (uint64_t)pg - 100, .fbo = 100,
				.access = LW | ZB, .iova = 0x5555,
				.shift = (uint8_t)__builtin_ctzl((unsigned long)pg) };
	assert_int_equal(reg_list(F.c, &x, &mr), 0);
	assert_int_equal(mr->iova, 0);
	assert_int_equal(mr->nblocks, 4);
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), 0);

	/* the memory map: no access, read-only with a write right, a hole */
	w[0] = (uintptr_t)mem;
	assert_int_equal(reg_list(F.c, &x, NULL), -EFAULT);
	w[0] = (uintptr_t)mem + 6 * pg;
	assert_int_equal(reg_list(F.c, &x, NULL), -EFAULT);
	x.access = RR;
	assert_int_equal(reg_list(F.c, &x, &mr), 0);
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), 0);
	w[0] = (uintptr_t)mem + 7 * pg;
	assert_int_equal(reg_list(F.c, &x, NULL), -EFAULT);
	/* only the MR's own bytes are checked: not a page past its length */
	w[0] = (uintptr_t)mem;
	x.n = 2;
	x.fbo = 0;
	x.length = (uint64_t)pg;
	w[1] = (uintptr_t)mem + pg;
	assert_int_equal(reg_list(F.c, &x, NULL), -EFAULT);
	w[0] = (uintptr_t)mem + pg;
	w[1] = (uintptr_t)mem;
	assert_int_equal(reg_list(F.c, &x, &mr), 0);
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), 0);
	x.length = (uint64_t)pg + 1;
	assert_int_equal(reg_list(F.c, &x, NULL), -EFAULT);
	/* a block past the end of the address space, in block mode */
	put_list(w, true);
	w[6] = ~0ull - 100;
	w[7] = 50;
	x = good;
	x.length = 1000 + 3 + (uint64_t)pg + 50 - 7;
	assert_int_equal(reg_list(F.c, &x, NULL), -EFAULT);
	x.length++;
	assert_int_equal(reg_list(F.c, &x, NULL), -EINVAL);

	/* every field */
	put_list(w, true);
	assert_int_equal(reg_list(F.c, &good, &mr), 0);
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), 0);
#define LBAD(field, val, err)                                                  \
	do {                                                                   \
		x = good;                                                      \
		x.field = val;                                                 \
		assert_int_equal(reg_list(F.c, &x, NULL), err);                \
	} while (0)
	LBAD(pd, 0, -EINVAL);
	LBAD(pd, F.opd->handle, -EINVAL);
	LBAD(pd, h, -EINVAL);
	LBAD(list, 0, -EINVAL);
	LBAD(list, ho, -EINVAL);
	LBAD(list, F.pd->handle, -EINVAL);
	LBAD(list, ~0ull, -EINVAL);
	LBAD(list, h2, -EINVAL);           /* 2 entries only */
	LBAD(n, 0, -EINVAL);
	LBAD(n, 9, -EINVAL);
	LBAD(n, ~0u, -EINVAL);
	LBAD(fbo, ~0u, -EINVAL);
	LBAD(fbo, 8, -EINVAL);
	LBAD(length, 0, -EINVAL);
	LBAD(length, good.length + 1, -EINVAL);
	LBAD(length, ~0ull, -EINVAL);
	LBAD(iova, ~0ull, -EINVAL);
	LBAD(access, RW, -EINVAL);
	LBAD(access, LW | (1u << 29), -EINVAL);
	LBAD(rsvd, 1, -EINVAL);
	LBAD(flags, SV_REG_BLOCKS | SV_REG_TYPE1, -EINVAL);
	LBAD(flags, 0xffff, -EINVAL);
	LBAD(flags, 0, -EINVAL);           /* the blocks are not pages */
	x = good; x.flags = 0; x.shift = 12; x.fbo = 0;
	x.length = 4096;
	assert_int_equal(reg_list(F.c, &x, NULL), -EINVAL);
#undef LBAD
	/* the page shift means nothing to a block list */
	x = good;
	x.shift = 200;
	assert_int_equal(reg_list(F.c, &x, &mr), 0);
	assert_int_equal(cmd_handle(F.c, sv_cmd_dereg_mr, mr->handle), 0);
	assert_int_equal(sv_dev.total[SV_OBJ_MR], 0);
	assert_int_equal(sv_dev.mr_blocks, 0);
	munmap(mem, (size_t)pg * 7);
}

/* ---- teardown with everything live ---- */

static void test_teardown_all(void **state)
{
	static char buf[4096];
	struct sv_mr *mr = reg_mr(F.pd, buf, sizeof(buf), LW | MWB | RW);
	struct sv_mr *fr = alloc_fr(F.pd, 16);
	uint64_t h, *w = alloc_pl(F.c, 16, &h);
	const struct fr_args fa = { .list = h, .length = 4096, .n = 1,
				    .access = LW | MWB, .shift = 12 };

	(void)state;
	w[0] = 0x1000;
	assert_int_equal(fast_reg(&F.qp, fr, 1, &fa), IBV_WC_SUCCESS);
	for (uint32_t t = SV_MW_TYPE_1; t <= SV_MW_TYPE_2B; t++) {
		struct sv_mw *a = alloc_mw(F.pd, t), *b = alloc_mw(F.pd, t);
		uint16_t fl = t == SV_MW_TYPE_1 ? SV_REG_TYPE1 : 0;

		assert_int_equal(bind_mw(&F.qp, a, 1, mr->key, (uintptr_t)buf, 64,
				      RW, fl), IBV_WC_SUCCESS);
		assert_int_equal(bind_mw(&F.qp, b, 1, fr->key, 0x100, 64, RR, fl),
				 IBV_WC_SUCCESS);
	}
	assert_int_equal(mr->mw_bound, 3);
	assert_int_equal(fr->mw_bound, 3);
	(void)alloc_pl(F.c2, 3, &h);
	(void)alloc_fr(F.opd, 3);
	(void)alloc_mw(F.opd, SV_MW_TYPE_2A);
	assert_int_equal(sv_dev.total[SV_OBJ_MW], 7);
	/* the fixture's teardown frees it all and checks nothing is left */
}

/* ---- 10^6 random keys ---- */

static void test_random_keys(void **state)
{
	enum { NMR = 24, NMW = 36 };
	static char buf[4096];
	uint32_t good[NMR + NMW], dead[NMR + NMW];
	unsigned int ngood = 0, ndead = 0, i, j;
	uint64_t h, *w = alloc_pl(F.c, 1, &h);
	struct sv_mr *mrs[NMR];
	struct sv_map m;

	(void)state;
	w[0] = 0x100000;
	/* MRs: regular (zero-based), fast-register valid and invalid; all
	 * zero-based with every right, so that [0, 64) of any good key
	 * resolves */
	for (i = 0; i < NMR; i++) {
		const struct fr_args fa = { .list = h, .length = 4096, .n = 1,
					    .access = LW | ALL_REMOTE | MWB | ZB,
					    .shift = 12 };

		switch (i % 3) {
		case 0:
			assert_int_equal(reg_mr_x(F.pd, buf, sizeof(buf), 0,
						  LW | ALL_REMOTE | MWB | ZB,
						  &mrs[i]), 0);
			break;
		case 1:
			mrs[i] = alloc_fr(F.pd, 1);
			assert_int_equal(fast_reg(&F.qp, mrs[i], i, &fa),
					 IBV_WC_SUCCESS);
			break;
		default:
			mrs[i] = alloc_fr(F.pd, 1);   /* never registered */
			break;
		}
		if (i % 3 == 2)
			dead[ndead++] = mrs[i]->key;
		else
			good[ngood++] = mrs[i]->key;
	}
	/* MWs of each type, bound (zero-based, all remote rights, over a
	 * valid MR) or not; some bound then invalidated */
	for (i = 0; i < NMW; i++) {
		uint32_t t = SV_MW_TYPE_1 + i % 3;
		struct sv_mw *mw = alloc_mw(F.pd, t);
		uint16_t fl = t == SV_MW_TYPE_1 ? SV_REG_TYPE1 : 0;
		struct sv_mr *mr = mrs[(i * 5) % NMR];

		if (mr->invalid)
			mr = mrs[0];
		switch ((i / 3) % 3) {
		case 0:
			dead[ndead++] = mw->key;       /* unbound, free */
			break;
		case 1:
			assert_int_equal(bind_mw(&F.qp, mw, i * 7, mr->key, 0, 64,
					      ALL_REMOTE | ZB, fl),
					 IBV_WC_SUCCESS);
			good[ngood++] = mw->key;
			break;
		default:
			assert_int_equal(bind_mw(&F.qp, mw, i * 7, mr->key, 0, 64,
					      ALL_REMOTE | ZB, fl),
					 IBV_WC_SUCCESS);
			if (t == SV_MW_TYPE_1)
				assert_int_equal(bind_mw(&F.qp, mw, i * 7 + 1, 0,
						      0, 0, 0, fl),
						 IBV_WC_SUCCESS);
			else
				assert_int_equal(sv_mm_local_inv(&F.qp, mw->key),
						 IBV_WC_SUCCESS);
			dead[ndead++] = mw->key;
			break;
		}
	}
	/* the good keys work (so a miss below means something), the dead
	 * ones do not */
	for (i = 0; i < ngood; i++) {
		assert_true(rkey_ok(good[i], &F.qp, 0, 64, RW, &m));
		assert_true(rkey_ok(good[i], &F.qp, 0, 64, RA, &m));
	}
	for (i = 0; i < ndead; i++) {
		assert_false(rkey_ok(dead[i], &F.qp, 0, 1, RR, NULL));
		assert_false(lkey_ok(dead[i], F.pd, 0, 1, false));
	}
	rnd_state = 0x600dd1ce;
	for (i = 0; i < 1000000; i++) {
		uint32_t v = (uint32_t)rnd();

		if (i & 1) /* small indices: real slots, random consumer keys */
			v = SV_KEY_MAKE(SV_KEY_INDEX(v) %
					(sv_dev.keys.nslots + 4), v);
		for (j = 0; j < ngood; j++)
			if (v == good[j])
				break;
		if (j < ngood)
			continue;
		if (rkey_ok(v, &F.qp, 0, 1, RR, NULL) ||
		    lkey_ok(v, F.pd, 0, 1, false))
			fail_msg("random key %#x resolves", v);
	}
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_page_list_cmds),
		T(test_alloc_mr_cmd),
		T(test_fast_reg_pages),
		T(test_fast_reg_merge),
		T(test_fast_reg_blocks),
		T(test_fast_reg_refusals),
		T(test_lkey_rkey_plain),
		T(test_invalidate),
		T(test_mw_cmds),
		T(test_bind_refusals),
		T(test_mw_access),
		T(test_mw_over_fast_reg),
		T(test_reg_mr_list),
		T(test_teardown_all),
		T(test_random_keys),
	};

	sv_log_level = SV_LOG_ERR;
	return cmocka_run_group_tests(tests, NULL, NULL);
#undef T
}
