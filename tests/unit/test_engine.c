// SPDX-License-Identifier: MIT
/*
 * Unit tests of WQE execution (src/device/exec/exec.c, exec/wq.c, loop/req.c,
 * loop/resp.c) and CQE production (sv_cq_push in src/device/ctl/cq.c),
 * without a daemon: the pure helpers, the memory copier (on this process's
 * own memory, through process_vm_* on our own pid), and whole WQEs run
 * against QPs, CQs and MRs built here by hand.
 * Time is whatever the test puts in struct sv_exec, never the clock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <infiniband/verbs.h>

#include "device/exec/engine.h"
#include "device/exec/exec_int.h"
#include "device/exec/transport.h"
#include "device/sv_dev.h"

/* ---- what exec/exec.c and ctl/cq.c need from the rest of the daemon ---- */

struct sv_device sv_dev;

#define MAXQ 8
static struct sv_qp *qtab[MAXQ];

struct sv_qp *sv_qp_lookup(uint32_t qpn)
{
	for (int i = 0; i < MAXQ; i++)
		if (qtab[i] && qtab[i]->qpn == qpn)
			return qtab[i];
	return NULL;
}

/* XRC targets are not made here: no XRC SRQ is ever found */
bool sv_xrc_bind(struct sv_qp *t, uint32_t srqn)
{
	(void)t;
	(void)srqn;
	return false;
}

void sv_engine_kick(struct sv_engine *e)
{
	(void)e;
}

/* The device lock, as loop/resp.c drops it around a large copy (msg_copy):
 * counted, and a hook that plays what other threads may do meanwhile. */
static uint32_t copy_seq;
static int unlocks, relocks;
static void (*while_unlocked)(void);

void sv_dev_unlock(void)
{
	unlocks++;
	assert_true(copy_seq & 1);      /* quiesce would see the copy */
	if (while_unlocked)
		while_unlocked();
}

void sv_dev_lock(bool ctl)
{
	assert_false(ctl);
	relocks++;
	assert_true(copy_seq & 1);      /* still odd until the lock is back */
}

#define MAXEV 32
static struct {
	uint32_t type;
	uint64_t cookie;
} evs[MAXEV];
static int nev;

void sv_async_event(struct sv_client *c, uint32_t type, uint64_t cookie,
		    uint64_t handle)
{
	(void)c;
	(void)handle;
	if (nev < MAXEV) {
		evs[nev].type = type;
		evs[nev].cookie = cookie;
	}
	nev++;
}

int sv_client_add_obj(struct sv_req *r, unsigned int type, void *obj,
		      uint64_t *handle)
{
	(void)r; (void)type; (void)obj; (void)handle;
	return -ENOSYS;
}

int sv_req_charge(struct sv_req *r, uint64_t bytes)
{
	(void)r; (void)bytes;
	return 0;
}

void sv_client_uncharge(struct sv_client *c, uint64_t bytes)
{
	(void)c; (void)bytes;
}

void sv_client_del_obj(struct sv_client *c, unsigned int type,
		       uint64_t handle)
{
	(void)c; (void)type; (void)handle;
}

void *sv_req_obj(struct sv_req *r, uint64_t handle, unsigned int type)
{
	(void)r; (void)handle; (void)type;
	return NULL;
}

static bool has_event(uint32_t type, uint64_t cookie)
{
	for (int i = 0; i < nev && i < MAXEV; i++)
		if (evs[i].type == type && evs[i].cookie == cookie)
			return true;
	return false;
}

/* ---- pure helpers ---- */

static void test_rnr_table(void **state)
{
	(void)state;
	assert_int_equal(sv_rnr_timer_ns(0), 655360000ull);
	assert_int_equal(sv_rnr_timer_ns(1), 10000ull);
	assert_int_equal(sv_rnr_timer_ns(5), 60000ull);
	assert_int_equal(sv_rnr_timer_ns(7), 120000ull);
	assert_int_equal(sv_rnr_timer_ns(12), 640000ull);
	assert_int_equal(sv_rnr_timer_ns(14), 1280000ull);
	assert_int_equal(sv_rnr_timer_ns(18), 5120000ull);
	assert_int_equal(sv_rnr_timer_ns(24), 40960000ull);
	assert_int_equal(sv_rnr_timer_ns(31), 491520000ull);
	/* strictly increasing from 1 to 31 */
	for (int i = 2; i < 32; i++)
		assert_true(sv_rnr_timer_ns((uint8_t)i) >
			    sv_rnr_timer_ns((uint8_t)(i - 1)));
}

static void test_timeouts_mtu(void **state)
{
	(void)state;
	assert_int_equal(sv_ack_timeout_ns(0), UINT64_MAX);
	assert_int_equal(sv_ack_timeout_ns(1), 8192ull);
	assert_int_equal(sv_ack_timeout_ns(14), 4096ull << 14);
	assert_int_equal(sv_ack_timeout_ns(31), 4096ull << 31);
	assert_int_equal(sv_mtu_bytes(IBV_MTU_256), 256);
	assert_int_equal(sv_mtu_bytes(IBV_MTU_1024), 1024);
	assert_int_equal(sv_mtu_bytes(IBV_MTU_4096), 4096);
	assert_int_equal(sv_mtu_bytes(0), 0);
	assert_int_equal(sv_mtu_bytes(6), 0);
}

static void test_range(void **state)
{
	(void)state;
	assert_true(sv_range_ok(1000, 100, 1000, 100));
	assert_true(sv_range_ok(1000, 100, 1050, 50));
	assert_true(sv_range_ok(1000, 100, 1100, 0));
	assert_false(sv_range_ok(1000, 100, 1050, 51));
	assert_false(sv_range_ok(1000, 100, 999, 1));
	assert_false(sv_range_ok(1000, 100, 1101, 0));
	assert_false(sv_range_ok(1000, 100, 1000, 101));
	/* no overflow anywhere */
	assert_false(sv_range_ok(1000, 100, UINT64_MAX, 2));
	assert_false(sv_range_ok(1000, 100, 1001, UINT64_MAX));
	assert_true(sv_range_ok(0, UINT64_MAX, UINT64_MAX - 1, 1));
	assert_false(sv_range_ok(UINT64_MAX - 10, 10, UINT64_MAX - 5, 6));
}

static void test_csum(void **state)
{
	/* a classic example header: checksum 0xb861 */
	uint8_t h[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00,
			  0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01,
			  0xc0, 0xa8, 0x00, 0xc7 };

	(void)state;
	assert_int_equal(sv_ip_csum(h, 20), 0xb861);
	h[10] = 0xb8;
	h[11] = 0x61;
	assert_int_equal(sv_ip_csum(h, 20), 0);
	assert_int_equal(sv_ip_csum("\x01", 1), (uint16_t)~0x0100);
}

static void test_grh_v4(void **state)
{
	uint8_t sgid[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 };
	uint8_t dgid[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 2 };
	uint8_t g[40], zero[20] = { 0 };

	(void)state;
	assert_true(sv_gid_is_v4(sgid));
	sv_grh_build(g, sgid, dgid, 0x28, 0x12345, 0, 100, false);
	assert_memory_equal(g, zero, 20);
	assert_int_equal(g[20], 0x45);
	assert_int_equal(g[21], 0x28);
	/* 20 IP + 8 UDP + 12 BTH + 8 DETH + 100 + 4 ICRC */
	assert_int_equal(g[22] << 8 | g[23], 152);
	assert_int_equal(g[24] | g[25], 0);      /* id */
	assert_int_equal(g[26], 0x40);           /* DF */
	assert_int_equal(g[28], 64);             /* ttl default */
	assert_int_equal(g[29], 17);
	assert_memory_equal(g + 32, sgid + 12, 4);
	assert_memory_equal(g + 36, dgid + 12, 4);
	assert_int_equal(sv_ip_csum(g + 20, 20), 0);
	/* with imm and a hop limit */
	sv_grh_build(g, sgid, dgid, 0, 0, 7, 100, true);
	assert_int_equal(g[22] << 8 | g[23], 156);
	assert_int_equal(g[28], 7);
	assert_int_equal(sv_ip_csum(g + 20, 20), 0);
}

static void test_grh_v6(void **state)
{
	uint8_t sgid[16] = { 0xfe, 0x80, [15] = 1 };
	uint8_t dgid[16] = { 0xfe, 0x80, [15] = 2 };
	uint8_t g[40];

	(void)state;
	assert_false(sv_gid_is_v4(sgid));
	sv_grh_build(g, sgid, dgid, 0xab, 0xfedcb, 9, 10, false);
	assert_int_equal(g[0] >> 4, 6);
	assert_int_equal((g[0] & 0xf) << 4 | g[1] >> 4, 0xab);
	assert_int_equal((uint32_t)(g[1] & 0xf) << 16 | g[2] << 8 | g[3],
			 0xfedcb);
	assert_int_equal(g[4] << 8 | g[5], 8 + 12 + 8 + 10 + 4);
	assert_int_equal(g[6], 17);
	assert_int_equal(g[7], 9);
	assert_memory_equal(g + 8, sgid, 16);
	assert_memory_equal(g + 24, dgid, 16);
}

static void test_iov_walk(void **state)
{
	char a[10], b[1], c[20];
	struct iovec v[4] = { { a, 10 }, { b, 0 }, { c, 20 }, { b, 1 } };
	struct iovec out[4];
	struct sv_iov_cur cur = { 0, 0 };
	unsigned int k;

	(void)state;
	assert_int_equal(sv_iov_take(v, 4, &cur, 15, out, 4, &k), 15);
	assert_int_equal(k, 2);
	assert_ptr_equal(out[0].iov_base, a);
	assert_int_equal(out[0].iov_len, 10);
	assert_ptr_equal(out[1].iov_base, c);
	assert_int_equal(out[1].iov_len, 5);
	/* at most outmax pieces */
	assert_int_equal(sv_iov_take(v, 4, &cur, 100, out, 1, &k), 15);
	assert_int_equal(k, 1);
	assert_ptr_equal(out[0].iov_base, c + 5);
	assert_int_equal(sv_iov_take(v, 4, &cur, 100, out, 4, &k), 1);
	assert_ptr_equal(out[0].iov_base, b);
	assert_int_equal(sv_iov_take(v, 4, &cur, 100, out, 4, &k), 0);
	assert_int_equal(k, 0);

	cur = (struct sv_iov_cur){ 0, 0 };
	assert_true(sv_iov_seek(v, 4, &cur, 12));
	assert_int_equal(cur.idx, 2);
	assert_int_equal(cur.off, 2);
	assert_true(sv_iov_seek(v, 4, &cur, 19));
	assert_false(sv_iov_seek(v, 4, &cur, 2));
}

/* Every op of every transport is set (a default stub where it has none):
 * the dispatcher calls them without testing for NULL. */
static void test_transport_ops(void **state)
{
	const struct sv_transport *tr[] = {
		&sv_loop_transport, &sv_roce_transport,
	};

	(void)state;
	for (unsigned int i = 0; i < sizeof(tr) / sizeof(tr[0]); i++) {
		assert_non_null(tr[i]->name);
		assert_non_null(tr[i]->ready);
		assert_non_null(tr[i]->step);
		assert_non_null(tr[i]->sq_owes);
		assert_non_null(tr[i]->flush_pending);
		assert_non_null(tr[i]->flush);
		assert_non_null(tr[i]->srq_gone);
		assert_non_null(tr[i]->ud_send);
	}
	/* the stubs say so */
	assert_int_equal(sv_loop_transport.flush(NULL), -EOPNOTSUPP);
	assert_int_equal(sv_loop_transport.ud_send(NULL, NULL, NULL, 0, 0,
						   false, 0, false, NULL, 0),
			 -EOPNOTSUPP);
	/* the same-host transport is every QP's but a wire QP's */
	{
		struct sv_qp qp;

		memset(&qp, 0, sizeof(qp));
		assert_ptr_equal(sv_transport_of(&qp), &sv_loop_transport);
	}
}

/* The outcome table: every outcome has its row, and a NAK brings the
 * requester on the wire the status the same outcome gives it on this
 * host (roce/comp.c's sv_nak_status against loop/resp.c's answer). */
static void test_outcome_table(void **state)
{
	(void)state;
	for (unsigned int o = 0; o < SV_OUTCOME_MAX; o++) {
		const struct sv_outcome_info *oi = sv_outcome(o);

		assert_non_null(oi->name);
		if (SV_AETH_KIND(oi->aeth) == SV_AETH_KIND_NAK)
			assert_int_equal(sv_nak_status(oi->aeth), oi->status);
		/* an event only where the QP goes to ERR */
		if (oi->event)
			assert_true(oi->qp_err);
	}
	assert_int_equal(sv_outcome(SV_OUTCOME_OK)->status, IBV_WC_SUCCESS);
	assert_int_equal(sv_outcome(SV_OUTCOME_NOACK)->aeth, SV_AETH_NONE);
	/* NAK codes nobody sends */
	assert_int_equal(sv_nak_status(0x64), IBV_WC_REM_OP_ERR);
	assert_int_equal(sv_nak_status(0x7f), IBV_WC_REM_OP_ERR);
}

static void test_mem_copy(void **state)
{
	static char bounce[7];     /* tiny: many chunks */
	char src1[13], src2[50], dst1[30], dst2[40];
	struct iovec sv[2] = { { src1, 13 }, { src2, 50 } };
	struct iovec dv[2] = { { dst1, 30 }, { dst2, 40 } };
	struct sv_mem s = { 0, sv, 2 }, d = { 0, dv, 2 };
	char flat_s[63], flat_d[70];

	(void)state;
	for (int i = 0; i < 13; i++)
		src1[i] = (char)i;
	for (int i = 0; i < 50; i++)
		src2[i] = (char)(13 + i);
	memset(dst1, 0x77, sizeof(dst1));
	memset(dst2, 0x77, sizeof(dst2));
	/* local to local, with offsets */
	assert_int_equal(sv_mem_copy(&d, 5, &s, 3, 58, bounce, sizeof(bounce)),
			 SV_COPY_OK);
	memcpy(flat_s, src1, 13);
	memcpy(flat_s + 13, src2, 50);
	memcpy(flat_d, dst1, 30);
	memcpy(flat_d + 30, dst2, 40);
	assert_memory_equal(flat_d + 5, flat_s + 3, 58);
	assert_int_equal((unsigned char)flat_d[4], 0x77);
	assert_int_equal((unsigned char)flat_d[63], 0x77);
	/* through process_vm_* on our own pid */
	memset(dst1, 0, sizeof(dst1));
	memset(dst2, 0, sizeof(dst2));
	s.pid = d.pid = getpid();
	assert_int_equal(sv_mem_copy(&d, 0, &s, 0, 63, bounce, sizeof(bounce)),
			 SV_COPY_OK);
	memcpy(flat_d, dst1, 30);
	memcpy(flat_d + 30, dst2, 40);
	assert_memory_equal(flat_d, flat_s, 63);
	/* lists too short */
	assert_int_equal(sv_mem_copy(&d, 0, &s, 1, 63, bounce, sizeof(bounce)),
			 SV_COPY_SRC_FAULT);
	assert_int_equal(sv_mem_copy(&d, 10, &s, 0, 63, bounce, sizeof(bounce)),
			 SV_COPY_DST_FAULT);
	assert_int_equal(sv_mem_copy(&d, 71, &s, 0, 0, bounce, sizeof(bounce)),
			 SV_COPY_OK);
	/* unmapped memory on either side is a fault, not a crash */
	{
		struct iovec bad = { (void *)(uintptr_t)0x10, 8 };
		struct sv_mem bm = { getpid(), &bad, 1 };

		assert_int_equal(sv_mem_copy(&d, 0, &bm, 0, 8, bounce,
					     sizeof(bounce)), SV_COPY_SRC_FAULT);
		assert_int_equal(sv_mem_copy(&bm, 0, &s, 0, 8, bounce,
					     sizeof(bounce)), SV_COPY_DST_FAULT);
	}
}

/* ---- whole WQEs on hand-built objects ---- */

#define ENT 8

struct fix {
	struct sv_client cl;
	struct sv_pd pd;
	struct sv_cq scq, rcq;
	struct sv_qp a, b;         /* a sends to b */
	struct sv_srq srq;
	char abuf[4096], bbuf[4096];
	struct sv_mr amr, bmr;
	struct sv_exec x;
	char bounce[64];
};

static struct fix *F;

static void *ring(size_t bytes)
{
	void *p = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);

	assert_non_null(p);
	memset(p, 0, bytes);
	return p;
}

static void mk_cq(struct sv_cq *cq, uint64_t cookie)
{
	cq->owner = &F->cl;
	cq->cookie = cookie;
	cq->entries = ENT;
	cq->cqe = ENT - 1;
	cq->ring_bytes = sv_cq_ring_bytes(ENT);
	cq->ring = ring(cq->ring_bytes);
	((struct sv_cq_ring *)cq->ring)->entries = ENT;
}

static void mk_wq(struct sv_wq *wq, uint32_t stride, uint32_t max_sge,
		  uint32_t max_inline)
{
	wq->entries = ENT;
	wq->stride = stride;
	wq->max_sge = max_sge;
	wq->max_inline = max_inline;
	wq->cons = 0;
	wq->hdr = ring(sv_wq_ring_bytes(ENT, stride));
	wq->hdr->entries = ENT;
}

static void mk_qp(struct sv_qp *qp, uint32_t type, uint32_t qpn)
{
	qp->owner = &F->cl;
	qp->cookie = 0x1000 + qpn;
	qp->qpn = qpn;
	qp->type = type;
	qp->state = IBV_QPS_RTS;
	qp->pd = &F->pd;
	qp->send_cq = &F->scq;
	qp->recv_cq = &F->rcq;
	mk_wq(&qp->sq, sv_send_stride(4, 64), 4, 64);
	mk_wq(&qp->rq, sv_recv_stride(4), 4, 0);
	qp->attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC;
	qp->attr.retry_cnt = 2;
	qp->attr.rnr_retry = 1;
	qp->attr.timeout = 14;
	qp->attr.min_rnr_timer = 12;
	qp->attr.qkey = 0x11111111;
}

static void mk_mr(struct sv_mr *mr, void *buf, size_t len, uint32_t access)
{
	mr->owner = &F->cl;
	mr->pd = &F->pd;
	mr->addr = (uintptr_t)buf;
	mr->iova = 0x100000;       /* not the address: translation is tested */
	mr->length = len;
	mr->access = access;
	assert_int_equal(sv_keytab_alloc(&sv_dev.keys, mr, &mr->key), 0);
}

static uint64_t va(struct sv_mr *mr, const void *p)
{
	return mr->iova + (uint64_t)((uintptr_t)p - mr->addr);
}

static int fix_setup(void **state)
{
	(void)state;
	F = calloc(1, sizeof(*F));
	if (!F || sv_keytab_init(&sv_dev.keys, 100))
		return -1;
	sv_dev.port.active_mtu = IBV_MTU_1024;
	sv_dev.gid[0].gid[10] = sv_dev.gid[0].gid[11] = 0xff;
	sv_dev.gid[0].gid[12] = 10;
	sv_dev.gid[0].gid[15] = 1;
	F->cl.pid = getpid();
	F->cl.pidfd = -1;          /* target_gone(): kill(pid, 0) */
	F->cl.async_fd = -1;
	if (sv_objtab_init(&F->cl.objs, 100))
		return -1;
	F->pd.owner = &F->cl;
	mk_cq(&F->scq, 0xc1);
	mk_cq(&F->rcq, 0xc2);
	mk_qp(&F->a, IBV_QPT_RC, 0x100);
	mk_qp(&F->b, IBV_QPT_RC, 0x200);
	F->a.attr.dest_qp_num = 0x200;
	F->b.attr.dest_qp_num = 0x100;
	qtab[0] = &F->a;
	qtab[1] = &F->b;
	mk_mr(&F->amr, F->abuf, sizeof(F->abuf), IBV_ACCESS_LOCAL_WRITE |
	      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
	      IBV_ACCESS_REMOTE_ATOMIC);
	mk_mr(&F->bmr, F->bbuf, sizeof(F->bbuf), IBV_ACCESS_LOCAL_WRITE |
	      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
	      IBV_ACCESS_REMOTE_ATOMIC);
	F->x.bounce = F->bounce;
	F->x.bounce_bytes = sizeof(F->bounce);
	F->x.now = 1000000;
	nev = 0;
	return 0;
}

static void free_qp(struct sv_qp *qp)
{
	free(qp->sq.hdr);
	free(qp->rq.hdr);
}

static int fix_teardown(void **state)
{
	(void)state;
	free_qp(&F->a);
	free_qp(&F->b);
	free(F->srq.rq.hdr);
	free(F->scq.ring);
	free(F->rcq.ring);
	sv_objtab_fini(&F->cl.objs);
	sv_keytab_fini(&sv_dev.keys);
	memset(qtab, 0, sizeof(qtab));
	free(F);
	F = NULL;
	return 0;
}

/* Post a send WQE with SGEs on qp. */
static struct sv_send_wqe *post_send(struct sv_qp *qp, uint32_t op,
				     uint32_t flags, uint64_t wr_id,
				     const struct sv_wqe_sge *sge, uint32_t n)
{
	struct sv_wq *wq = &qp->sq;
	uint32_t prod = wq->hdr->prod;
	uint8_t *slot = sv_wq_slot(wq->hdr, wq->entries, wq->stride, prod);
	struct sv_send_wqe *w = (struct sv_send_wqe *)slot;

	memset(slot, 0, wq->stride);
	w->wr_id = wr_id;
	w->opcode = op;
	w->flags = flags;
	w->num_sge = n;
	if (n)
		memcpy(slot + SV_SEND_WQE_HDR, sge, n * sizeof(*sge));
	__atomic_store_n(&wq->hdr->prod, prod + 1, __ATOMIC_RELEASE);
	return w;
}

static void post_recv_wq(struct sv_wq *wq, uint64_t wr_id,
			 const struct sv_wqe_sge *sge, uint32_t n)
{
	uint32_t prod = wq->hdr->prod;
	uint8_t *slot = sv_wq_slot(wq->hdr, wq->entries, wq->stride, prod);
	struct sv_recv_wqe *w = (struct sv_recv_wqe *)slot;

	w->wr_id = wr_id;
	w->num_sge = n;
	memcpy(slot + SV_RECV_WQE_HDR, sge, n * sizeof(*sge));
	__atomic_store_n(&wq->hdr->prod, prod + 1, __ATOMIC_RELEASE);
}

/* Take the next CQE of cq, or fail. */
static struct sv_cqe poll1(struct sv_cq *cq)
{
	struct sv_cq_ring *r = cq->ring;
	struct sv_cqe e;

	assert_int_not_equal(r->prod, r->cons);
	e = *sv_cq_slot(cq->ring, cq->entries, r->cons);
	r->cons++;
	return e;
}

static bool cq_empty(struct sv_cq *cq)
{
	struct sv_cq_ring *r = cq->ring;

	return r->prod == r->cons;
}

static struct sv_wqe_sge asge(const void *p, uint32_t len)
{
	return (struct sv_wqe_sge){ va(&F->amr, p), len, F->amr.key };
}

static struct sv_wqe_sge bsge(const void *p, uint32_t len)
{
	return (struct sv_wqe_sge){ va(&F->bmr, p), len, F->bmr.key };
}

static void test_rc_send(void **state)
{
	struct sv_wqe_sge s[2] = { asge(F->abuf, 5), asge(F->abuf + 100, 6) };
	struct sv_wqe_sge r[2] = { bsge(F->bbuf, 4), bsge(F->bbuf + 200, 100) };
	struct sv_send_wqe *w;
	struct sv_cqe e;

	(void)state;
	memcpy(F->abuf, "hello", 5);
	memcpy(F->abuf + 100, " world", 6);
	post_recv_wq(&F->b.rq, 77, r, 2);
	w = post_send(&F->a, IBV_WR_SEND_WITH_IMM,
		      IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 55, s, 2);
	w->imm = 0x12345678;
	F->b.state = IBV_QPS_RTR;
	assert_true(sv_exec_ready(&F->a, F->x.now, NULL));
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_memory_equal(F->bbuf, "hell", 4);
	assert_memory_equal(F->bbuf + 200, "o world", 7);
	e = poll1(&F->rcq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(e.wr_id, 77);
	assert_int_equal(e.opcode, IBV_WC_RECV);
	assert_int_equal(e.byte_len, 11);
	assert_int_equal(e.qp_num, 0x200);
	assert_int_equal(e.src_qp, 0x100);
	assert_int_equal(e.imm_data, 0x12345678);
	assert_int_equal(e.wc_flags, IBV_WC_WITH_IMM);
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(e.wr_id, 55);
	assert_int_equal(e.opcode, IBV_WC_SEND);
	assert_int_equal(F->a.sq.hdr->cons, 1);
	assert_int_equal(F->b.rq.hdr->cons, 1);
	assert_true(has_event(IBV_EVENT_COMM_EST, F->b.cookie));
	assert_false(sv_exec_ready(&F->a, F->x.now, NULL));
	/* unsignaled success: no CQE; inline data */
	{
		uint8_t *slot;

		post_recv_wq(&F->b.rq, 78, r + 1, 1);
		w = post_send(&F->a, IBV_WR_SEND, IBV_SEND_INLINE, 56, NULL, 0);
		slot = (uint8_t *)w;
		w->num_sge = 3;
		memcpy(slot + SV_SEND_WQE_HDR, "abc", 3);
		assert_true(sv_exec_step(&F->x, &F->a));
		assert_memory_equal(F->bbuf + 200, "abc", 3);
		e = poll1(&F->rcq);
		assert_int_equal(e.byte_len, 3);
		assert_int_equal(e.wc_flags, 0);
		assert_true(cq_empty(&F->scq));
	}
}

static void test_rc_rnr(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 8);
	uint64_t timer = UINT64_MAX;
	struct sv_cqe e;

	(void)state;
	post_send(&F->a, IBV_WR_SEND, 0, 1, &s, 1);
	post_send(&F->a, IBV_WR_SEND, 0, 2, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));      /* RNR, retry 1 left */
	assert_true(cq_empty(&F->scq));
	assert_int_equal(F->a.wait_until_ns, F->x.now + sv_rnr_timer_ns(12));
	assert_false(sv_exec_ready(&F->a, F->x.now, &timer));
	assert_int_equal(timer, F->a.wait_until_ns);
	assert_false(sv_exec_step(&F->x, &F->a));     /* not due */
	F->x.now = F->a.wait_until_ns;
	/* rnr_retry 1: the second RNR NAK is the end */
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.wr_id, 1);
	assert_int_equal(e.status, IBV_WC_RNR_RETRY_EXC_ERR);
	assert_int_equal(F->a.state, IBV_QPS_ERR);
	assert_int_equal(F->a.sq.hdr->qp_state, IBV_QPS_ERR);
	/* the one behind it is flushed, unsignaled or not */
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.wr_id, 2);
	assert_int_equal(e.status, IBV_WC_WR_FLUSH_ERR);
	assert_false(sv_exec_step(&F->x, &F->a));
	/* a receive posted in ERR is flushed */
	post_recv_wq(&F->a.rq, 9, &s, 1);
	assert_true(sv_exec_ready(&F->a, F->x.now, NULL));
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->rcq);
	assert_int_equal(e.wr_id, 9);
	assert_int_equal(e.status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(e.opcode, IBV_WC_RECV);
	/* the receiver's queue was never touched */
	assert_int_equal(F->b.rq.hdr->cons, 0);
}

static void test_rc_rnr_forever_then_recv(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 8), r = bsge(F->bbuf, 8);
	struct sv_cqe e;

	(void)state;
	F->a.attr.rnr_retry = 7;
	post_send(&F->a, IBV_WR_SEND, IBV_SEND_SIGNALED, 1, &s, 1);
	for (int i = 0; i < 20; i++) {
		assert_true(sv_exec_step(&F->x, &F->a));
		F->x.now = F->a.wait_until_ns;
	}
	assert_true(cq_empty(&F->scq));
	post_recv_wq(&F->b.rq, 5, &r, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_false(F->a.head_started);
}

static void test_rc_no_target(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 8);
	struct sv_cqe e;

	(void)state;
	qtab[1] = NULL;        /* the peer is gone */
	post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 3, &s, 1);
	for (int i = 0; i < 3; i++) {         /* first try + retry_cnt 2 */
		assert_true(sv_exec_step(&F->x, &F->a));
		assert_true(cq_empty(&F->scq));
		assert_int_equal(F->a.wait_until_ns,
				 F->x.now + sv_ack_timeout_ns(14));
		F->x.now = F->a.wait_until_ns;
	}
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_RETRY_EXC_ERR);
	assert_int_equal(e.opcode, IBV_WC_RDMA_WRITE);
	assert_int_equal(F->a.state, IBV_QPS_ERR);
	/* a target in ERR does not answer either; timeout 0 waits forever */
	qtab[1] = &F->b;
	F->b.state = IBV_QPS_ERR;
	F->a.state = IBV_QPS_RTS;
	F->a.attr.timeout = 0;
	post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 4, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(F->a.wait_until_ns, UINT64_MAX);
	F->x.now = UINT64_MAX - 1;
	assert_false(sv_exec_ready(&F->a, F->x.now, NULL));
	assert_false(sv_exec_step(&F->x, &F->a));
}

static void test_rdma(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 16), r8 = asge(F->abuf + 64, 8);
	struct sv_send_wqe *w;
	struct sv_cqe e;
	uint64_t v;

	(void)state;
	/* write */
	memcpy(F->abuf, "0123456789abcdef", 16);
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 1, &s, 1);
	w->remote_addr = va(&F->bmr, F->bbuf + 1000);
	w->rkey = F->bmr.key;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_memory_equal(F->bbuf + 1000, "0123456789abcdef", 16);
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_true(cq_empty(&F->rcq));
	/* read */
	memcpy(F->bbuf + 2000, "ABCDEFGHIJKLMNOP", 16);
	w = post_send(&F->a, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, 2, &s, 1);
	w->remote_addr = va(&F->bmr, F->bbuf + 2000);
	w->rkey = F->bmr.key;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_memory_equal(F->abuf, "ABCDEFGHIJKLMNOP", 16);
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(e.opcode, IBV_WC_RDMA_READ);
	assert_int_equal(e.byte_len, 16);
	/* compare and swap: hit, then miss */
	v = 5;
	memcpy(F->bbuf + 64, &v, 8);
	w = post_send(&F->a, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_SEND_SIGNALED, 3,
		      &r8, 1);
	w->remote_addr = va(&F->bmr, F->bbuf + 64);
	w->rkey = F->bmr.key;
	w->atomic.compare_add = 5;
	w->atomic.swap = 9;
	assert_true(sv_exec_step(&F->x, &F->a));
	memcpy(&v, F->bbuf + 64, 8);
	assert_int_equal(v, 9);
	memcpy(&v, F->abuf + 64, 8);
	assert_int_equal(v, 5);
	e = poll1(&F->scq);
	assert_int_equal(e.opcode, IBV_WC_COMP_SWAP);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	w = post_send(&F->a, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_SEND_SIGNALED, 4,
		      &r8, 1);
	w->remote_addr = va(&F->bmr, F->bbuf + 64);
	w->rkey = F->bmr.key;
	w->atomic.compare_add = 5;
	w->atomic.swap = 1;
	assert_true(sv_exec_step(&F->x, &F->a));
	memcpy(&v, F->bbuf + 64, 8);
	assert_int_equal(v, 9);
	memcpy(&v, F->abuf + 64, 8);
	assert_int_equal(v, 9);
	poll1(&F->scq);
	/* fetch and add */
	w = post_send(&F->a, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_SEND_SIGNALED, 5,
		      &r8, 1);
	w->remote_addr = va(&F->bmr, F->bbuf + 64);
	w->rkey = F->bmr.key;
	w->atomic.compare_add = 100;
	assert_true(sv_exec_step(&F->x, &F->a));
	memcpy(&v, F->bbuf + 64, 8);
	assert_int_equal(v, 109);
	memcpy(&v, F->abuf + 64, 8);
	assert_int_equal(v, 9);
	e = poll1(&F->scq);
	assert_int_equal(e.opcode, IBV_WC_FETCH_ADD);
	/* write with imm consumes a receive, byte_len the write's */
	{
		struct sv_wqe_sge r = bsge(F->bbuf, 1);

		post_recv_wq(&F->b.rq, 66, &r, 1);
		w = post_send(&F->a, IBV_WR_RDMA_WRITE_WITH_IMM, 0, 6, &s, 1);
		w->remote_addr = va(&F->bmr, F->bbuf + 3000);
		w->rkey = F->bmr.key;
		w->imm = 0xabcd;
		assert_true(sv_exec_step(&F->x, &F->a));
		e = poll1(&F->rcq);
		assert_int_equal(e.wr_id, 66);
		assert_int_equal(e.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
		assert_int_equal(e.byte_len, 16);
		assert_int_equal(e.imm_data, 0xabcd);
		assert_true(cq_empty(&F->scq));
	}
	assert_int_equal(F->a.state, IBV_QPS_RTS);
	assert_int_equal(F->b.state, IBV_QPS_RTS);
}

static void test_rdma_errors(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 16);
	struct sv_send_wqe *w;
	struct sv_cqe e;

	(void)state;
	/* bad rkey: REM_ACCESS_ERR, responder to ERR with an access event */
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, 0, 1, &s, 1);
	w->remote_addr = va(&F->bmr, F->bbuf + 4090);   /* past the end */
	w->rkey = F->bmr.key;
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(F->a.state, IBV_QPS_ERR);
	assert_int_equal(F->b.state, IBV_QPS_ERR);
	assert_true(has_event(IBV_EVENT_QP_ACCESS_ERR, F->b.cookie));
	/* the QP's access flags: REM_INV_REQ_ERR */
	F->a.state = F->b.state = IBV_QPS_RTS;
	F->b.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	w = post_send(&F->a, IBV_WR_RDMA_READ, 0, 2, &s, 1);
	w->remote_addr = va(&F->bmr, F->bbuf);
	w->rkey = F->bmr.key;
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_REM_INV_REQ_ERR);
	assert_true(has_event(IBV_EVENT_QP_REQ_ERR, F->b.cookie));
	/* a bad lkey is a local protection error */
	F->a.state = F->b.state = IBV_QPS_RTS;
	s.lkey ^= 0x100;
	post_send(&F->a, IBV_WR_SEND, 0, 3, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_LOC_PROT_ERR);
	/* a READ sink without local write */
	F->a.state = IBV_QPS_RTS;
	F->amr.access &= ~IBV_ACCESS_LOCAL_WRITE;
	s = asge(F->abuf, 16);
	post_send(&F->a, IBV_WR_RDMA_READ, 0, 4, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_LOC_PROT_ERR);
	/* misaligned atomic; wrong-size atomic SGE */
	F->a.state = IBV_QPS_RTS;
	F->amr.access |= IBV_ACCESS_LOCAL_WRITE;
	F->b.attr.qp_access_flags = IBV_ACCESS_REMOTE_ATOMIC;
	s = asge(F->abuf, 8);
	w = post_send(&F->a, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 5, &s, 1);
	w->remote_addr = va(&F->bmr, F->bbuf + 4);
	w->rkey = F->bmr.key;
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_REM_INV_REQ_ERR);
	F->a.state = F->b.state = IBV_QPS_RTS;
	s = asge(F->abuf, 4);
	w = post_send(&F->a, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 6, &s, 1);
	w->remote_addr = va(&F->bmr, F->bbuf);
	w->rkey = F->bmr.key;
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_LOC_LEN_ERR);
	/* opcodes the QP type does not have; too many SGEs */
	F->a.state = IBV_QPS_RTS;
	post_send(&F->a, IBV_WR_LOCAL_INV, 0, 7, NULL, 0);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_LOC_QP_OP_ERR);
	F->a.state = IBV_QPS_RTS;
	w = post_send(&F->a, IBV_WR_SEND, 0, 8, NULL, 0);
	w->num_sge = 5;
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_LOC_QP_OP_ERR);
}

static void test_recv_errors(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 16), r = bsge(F->bbuf, 8);
	struct sv_cqe e;

	(void)state;
	/* too small a buffer: LOC_LEN_ERR there, REM_INV_REQ_ERR here */
	post_recv_wq(&F->b.rq, 1, &r, 1);
	post_send(&F->a, IBV_WR_SEND, 0, 2, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->rcq);
	assert_int_equal(e.status, IBV_WC_LOC_LEN_ERR);
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_REM_INV_REQ_ERR);
	assert_int_equal(F->a.state, IBV_QPS_ERR);
	assert_int_equal(F->b.state, IBV_QPS_ERR);
	/* a receive buffer without local write: LOC_PROT_ERR / REM_OP_ERR */
	F->a.state = F->b.state = IBV_QPS_RTS;
	F->bmr.access &= ~IBV_ACCESS_LOCAL_WRITE;
	r = bsge(F->bbuf, 100);
	post_recv_wq(&F->b.rq, 3, &r, 1);
	post_send(&F->a, IBV_WR_SEND, 0, 4, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->rcq);
	assert_int_equal(e.status, IBV_WC_LOC_PROT_ERR);
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_REM_OP_ERR);
}

static void test_uc(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 16), r = bsge(F->bbuf, 8);
	struct sv_send_wqe *w;
	struct sv_cqe e;

	(void)state;
	F->a.type = F->b.type = IBV_QPT_UC;
	/* no receive WQE: dropped, the sender succeeds */
	post_send(&F->a, IBV_WR_SEND, IBV_SEND_SIGNALED, 1, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	/* a bad rkey: dropped, nobody goes to ERR */
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 2, &s, 1);
	w->rkey = F->bmr.key + 1;
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(F->b.state, IBV_QPS_RTS);
	/* too small: the receive completes in error; sender fine */
	post_recv_wq(&F->b.rq, 3, &r, 1);
	post_send(&F->a, IBV_WR_SEND, IBV_SEND_SIGNALED, 4, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->rcq);
	assert_int_equal(e.status, IBV_WC_LOC_LEN_ERR);
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(F->a.state, IBV_QPS_RTS);
	/* a local error: SQE, then flushes */
	s.lkey = 0;
	post_send(&F->a, IBV_WR_SEND, 0, 5, &s, 1);
	post_send(&F->a, IBV_WR_SEND, 0, 6, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_LOC_PROT_ERR);
	assert_int_equal(F->a.state, IBV_QPS_SQE);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(e.wr_id, 6);
}

static void test_ud(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 10), r = bsge(F->bbuf, 100);
	struct sv_ah ah = { .owner = &F->cl, .pd = &F->pd };
	uint64_t ahh;
	struct sv_send_wqe *w;
	struct sv_cqe e;

	(void)state;
	F->a.type = F->b.type = IBV_QPT_UD;
	ah.attr.dgid[10] = ah.attr.dgid[11] = 0xff;
	ah.attr.dgid[12] = 10;
	ah.attr.dgid[15] = 2;
	ah.attr.is_global = 1;
	ah.attr.sl = 3;
	assert_int_equal(sv_objtab_insert(&F->cl.objs, SV_OBJ_AH, &ah, &ahh),
			 0);
	memcpy(F->abuf, "datagram!!", 10);
	post_recv_wq(&F->b.rq, 1, &r, 1);
	w = post_send(&F->a, IBV_WR_SEND, IBV_SEND_SIGNALED, 2, &s, 1);
	w->remote_qpn = 0x200;
	w->ud.ah = ahh;
	w->ud.remote_qkey = 0x80000000;  /* the sender's own qkey */
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->rcq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(e.byte_len, 50);
	assert_int_equal(e.wc_flags, IBV_WC_GRH);
	assert_int_equal(e.src_qp, 0x100);
	/* RoCE carries no SL: sl is the network header type (IPv4) */
	assert_int_equal(e.sl, SV_WC_SL_ROCEV2_IPV4);
	assert_memory_equal(F->bbuf + 40, "datagram!!", 10);
	assert_int_equal((uint8_t)F->bbuf[20], 0x45);
	assert_int_equal(sv_ip_csum(F->bbuf + 20, 20), 0);
	assert_int_equal((uint8_t)F->bbuf[35], 1);   /* saddr 10.0.0.1 */
	assert_int_equal((uint8_t)F->bbuf[39], 2);   /* daddr 10.0.0.2 */
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	/* a wrong qkey: silently dropped */
	post_recv_wq(&F->b.rq, 3, &r, 1);
	w = post_send(&F->a, IBV_WR_SEND, IBV_SEND_SIGNALED, 4, &s, 1);
	w->remote_qpn = 0x200;
	w->ud.ah = ahh;
	w->ud.remote_qkey = 0x1234;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_true(cq_empty(&F->rcq));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	/* bigger than the MTU: LOC_LEN_ERR, SQE */
	s = asge(F->abuf, 1025);
	w = post_send(&F->a, IBV_WR_SEND, 0, 5, &s, 1);
	w->remote_qpn = 0x200;
	w->ud.ah = ahh;
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_LOC_LEN_ERR);
	assert_int_equal(F->a.state, IBV_QPS_SQE);
	/* a bad AH handle */
	F->a.state = IBV_QPS_RTS;
	s = asge(F->abuf, 10);
	w = post_send(&F->a, IBV_WR_SEND, 0, 6, &s, 1);
	w->ud.ah = ahh + 1;
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_LOC_QP_OP_ERR);
	sv_objtab_remove(&F->cl.objs, ahh, SV_OBJ_AH);
}

static void test_srq(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 4), r = bsge(F->bbuf, 64);
	struct sv_cqe e;

	(void)state;
	F->srq.owner = &F->cl;
	F->srq.cookie = 0x5;
	F->srq.pd = &F->pd;
	mk_wq(&F->srq.rq, sv_recv_stride(4), 4, 0);
	F->srq.limit = 2;
	F->srq.rq.hdr->srq_limit = 2;
	F->b.srq = &F->srq;
	post_recv_wq(&F->srq.rq, 1, &r, 1);
	post_recv_wq(&F->srq.rq, 2, &r, 1);
	post_send(&F->a, IBV_WR_SEND, 0, 3, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->rcq);
	assert_int_equal(e.wr_id, 1);
	assert_true(has_event(IBV_EVENT_SRQ_LIMIT_REACHED, 0x5));
	assert_int_equal(F->srq.limit, 0);
	assert_int_equal(F->srq.rq.hdr->srq_limit, 0);
	/* ERR: the SRQ is not flushed; LAST_WQE_REACHED once */
	F->b.state = IBV_QPS_ERR;
	assert_true(sv_exec_step(&F->x, &F->b));
	assert_true(has_event(IBV_EVENT_QP_LAST_WQE_REACHED, F->b.cookie));
	assert_false(sv_exec_step(&F->x, &F->b));
	assert_int_equal(F->srq.rq.cons, 1);
	/* a corrupt SRQ ring */
	F->b.state = IBV_QPS_RTS;
	F->srq.rq.hdr->prod = 1000;
	post_send(&F->a, IBV_WR_SEND, 0, 4, &s, 1);
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_true(F->srq.in_error);
	assert_true(has_event(IBV_EVENT_SRQ_ERR, 0x5));
	assert_int_equal(F->b.state, IBV_QPS_ERR);
	assert_true(cq_empty(&F->scq));       /* waiting for the timeout */
	F->b.srq = NULL;
}

static void test_corrupt_and_overrun(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 4);
	struct sv_cq_ring *cr = F->scq.ring;

	(void)state;
	F->a.sq.hdr->prod = 100;
	assert_true(sv_exec_ready(&F->a, F->x.now, NULL));
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(F->a.state, IBV_QPS_ERR);
	assert_true(has_event(IBV_EVENT_QP_FATAL, F->a.cookie));
	/* ERR with a corrupt ring: nothing to flush, nothing to spin on */
	assert_false(sv_exec_ready(&F->a, F->x.now, NULL));
	assert_false(sv_exec_step(&F->x, &F->a));
	/* a full CQ: CQ_ERR, and the QP is fatal */
	F->a.sq.hdr->prod = 0;
	F->a.state = IBV_QPS_RTS;
	nev = 0;
	F->scq.prod = ENT;          /* the device's own counter: the ring is full */
	F->b.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 1, &s, 0);
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(cr->overflow, 1);
	assert_true(has_event(IBV_EVENT_CQ_ERR, 0xc1));
	assert_true(has_event(IBV_EVENT_QP_FATAL, F->a.cookie));
	assert_int_equal(F->a.state, IBV_QPS_ERR);
}

static void test_sqd(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 4);

	(void)state;
	F->a.state = IBV_QPS_SQD;
	F->a.attr.en_sqd_async_notify = 1;
	post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 1, &s, 0);
	assert_true(sv_exec_step(&F->x, &F->a));      /* drained */
	assert_true(has_event(IBV_EVENT_SQ_DRAINED, F->a.cookie));
	assert_false(sv_exec_step(&F->x, &F->a));     /* nothing new starts */
	assert_true(cq_empty(&F->scq));
	F->a.state = IBV_QPS_RTS;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_false(cq_empty(&F->scq));
}

static void test_sqd_drain_point(void **state)
{
	struct sv_wqe_sge s = asge(F->abuf, 4);
	struct sv_cqe e;

	(void)state;
	post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 1, &s, 0);
	post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 2, &s, 0);
	F->a.state = IBV_QPS_SQD;
	F->a.attr.en_sqd_async_notify = 1;
	F->a.sq_drained_sent = false;
	sv_exec_enter_sqd(&F->a);
	/* posted after the drain began: waits */
	post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 3, &s, 0);
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_false(has_event(IBV_EVENT_SQ_DRAINED, F->a.cookie));
	assert_true(sv_exec_step(&F->x, &F->a));      /* drained */
	assert_true(has_event(IBV_EVENT_SQ_DRAINED, F->a.cookie));
	assert_false(sv_exec_ready(&F->a, F->x.now, NULL));
	assert_false(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.wr_id, 1);
	e = poll1(&F->scq);
	assert_int_equal(e.wr_id, 2);
	assert_true(cq_empty(&F->scq));
	F->a.state = IBV_QPS_RTS;
	assert_true(sv_exec_step(&F->x, &F->a));
	e = poll1(&F->scq);
	assert_int_equal(e.wr_id, 3);
}

static void test_cq_arm(void **state)
{
	struct sv_channel ch = { .owner = &F->cl };
	struct sv_cq_ring *cr = F->rcq.ring;
	struct sv_cqe e = { .status = IBV_WC_SUCCESS };
	struct sv_event ev;
	int sp[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
	ch.fd = sp[1];
	F->rcq.channel = &ch;
	F->rcq.handle = 42;
	/* not armed: no event */
	assert_int_equal(sv_cq_push(&F->rcq, &e, false), 0);
	assert_int_equal(recv(sp[0], &ev, sizeof(ev), MSG_DONTWAIT), -1);
	/* armed for solicited: an unsolicited success does not fire */
	cr->arm_flags = SV_CQ_ARM_SOLICITED;
	cr->arm_sn = 1;
	assert_int_equal(sv_cq_push(&F->rcq, &e, false), 0);
	assert_int_equal(recv(sp[0], &ev, sizeof(ev), MSG_DONTWAIT), -1);
	assert_int_equal(sv_cq_push(&F->rcq, &e, true), 0);
	assert_int_equal(recv(sp[0], &ev, sizeof(ev), MSG_DONTWAIT),
			 sizeof(ev));
	assert_int_equal(ev.magic, SV_PROTO_MAGIC);
	assert_int_equal(ev.type, 0);
	assert_int_equal(ev.cookie, 0xc2);
	assert_int_equal(ev.handle, 42);
	/* once per arm */
	assert_int_equal(sv_cq_push(&F->rcq, &e, true), 0);
	assert_int_equal(recv(sp[0], &ev, sizeof(ev), MSG_DONTWAIT), -1);
	/* next: any completion */
	cr->arm_flags = SV_CQ_ARM_NEXT;
	cr->arm_sn = 2;
	assert_int_equal(sv_cq_push(&F->rcq, &e, false), 0);
	assert_int_equal(recv(sp[0], &ev, sizeof(ev), MSG_DONTWAIT),
			 sizeof(ev));
	assert_int_equal(cr->events, 2);
	/* full: ENOSPC (ring has ENT slots; 5 are in it) */
	for (int i = 0; i < ENT - 5; i++)
		assert_int_equal(sv_cq_push(&F->rcq, &e, false), 0);
	assert_int_equal(sv_cq_push(&F->rcq, &e, false), -ENOSPC);
	assert_true(has_event(IBV_EVENT_CQ_ERR, 0xc2));
	/* a nonsense consumer counter is clamped: still full */
	cr->cons = cr->prod + 3;
	assert_int_equal(sv_cq_push(&F->rcq, &e, false), -ENOSPC);
	cr->cons = cr->prod;
	assert_int_equal(sv_cq_push(&F->rcq, &e, false), 0);
	F->rcq.channel = NULL;
	close(sp[0]);
	close(sp[1]);
}

/* ---- large messages: copied without the device lock ---- */

#define BIG (SV_UNLOCKED_COPY * 2)
static char big_a[BIG], big_b[BIG];
static struct sv_mr big_amr, big_bmr;

static void big_setup(void)
{
	mk_mr(&big_amr, big_a, sizeof(big_a), IBV_ACCESS_LOCAL_WRITE |
	      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	mk_mr(&big_bmr, big_b, sizeof(big_b), IBV_ACCESS_LOCAL_WRITE |
	      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	for (size_t i = 0; i < BIG; i++)
		big_a[i] = (char)(i * 7 + 1);
	memset(big_b, 0, sizeof(big_b));
	copy_seq = 0;
	unlocks = relocks = 0;
	while_unlocked = NULL;
	F->x.copy_seq = &copy_seq;
}

static struct sv_wqe_sge big_sge(struct sv_mr *mr, uint32_t len)
{
	return (struct sv_wqe_sge){ mr->iova, len, mr->key };
}

static void test_unlocked_write(void **state)
{
	struct sv_wqe_sge s;
	struct sv_send_wqe *w;
	struct sv_cqe e;

	(void)state;
	big_setup();
	s = big_sge(&big_amr, BIG);
	/* below the threshold: under the lock */
	s.length = SV_UNLOCKED_COPY - 1;
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 1, &s, 1);
	w->remote_addr = big_bmr.iova;
	w->rkey = big_bmr.key;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(unlocks, 0);
	assert_int_equal(poll1(&F->scq).status, IBV_WC_SUCCESS);
	/* at it and above: unlocked, and the lock back before the CQE */
	s.length = BIG;
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 2, &s, 1);
	w->remote_addr = big_bmr.iova;
	w->rkey = big_bmr.key;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(unlocks, 1);
	assert_int_equal(relocks, 1);
	assert_int_equal(copy_seq, 2);
	assert_memory_equal(big_a, big_b, BIG);
	e = poll1(&F->scq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(e.wr_id, 2);
	/* READ too */
	memset(big_a, 0, sizeof(big_a));
	w = post_send(&F->a, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, 3, &s, 1);
	w->remote_addr = big_bmr.iova;
	w->rkey = big_bmr.key;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(unlocks, 2);
	assert_memory_equal(big_a, big_b, BIG);
	assert_int_equal(poll1(&F->scq).status, IBV_WC_SUCCESS);
}

static void bump_requester(void)
{
	F->a.state_gen++;
	/* meanwhile, nobody else may fill or flush b's receive WQE */
	assert_true(F->b.rx_busy);
}

static void kill_responder(void)
{
	F->b.dead = true;
}

static void test_unlocked_changes(void **state)
{
	struct sv_wqe_sge s, r;
	uint64_t timer = UINT64_MAX;
	struct sv_cqe e;

	(void)state;
	big_setup();
	s = big_sge(&big_amr, BIG);
	r = big_sge(&big_bmr, BIG);
	F->b.state = IBV_QPS_RTR;
	post_recv_wq(&F->b.rq, 70, &r, 1);
	/* the requester changes state during the copy: no completion on
	 * either side, both WQEs stay where they were */
	post_send(&F->a, IBV_WR_SEND, IBV_SEND_SIGNALED, 7, &s, 1);
	while_unlocked = bump_requester;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(unlocks, 1);
	assert_true(cq_empty(&F->scq));
	assert_true(cq_empty(&F->rcq));
	assert_int_equal(F->a.sq.hdr->cons, 0);
	assert_int_equal(F->b.rq.hdr->cons, 0);
	assert_false(F->b.rx_busy);
	/* another engine fills b's receive queue: wait, take nothing */
	while_unlocked = NULL;
	F->b.rx_busy = true;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(unlocks, 1);
	assert_true(cq_empty(&F->scq));
	assert_int_equal(F->b.rq.hdr->cons, 0);
	/* ... and b's own flush leaves that WQE alone meanwhile */
	F->b.state = IBV_QPS_ERR;
	assert_false(sv_exec_ready(&F->b, F->x.now, NULL));
	assert_false(sv_exec_step(&F->x, &F->b));
	assert_int_equal(F->b.rq.hdr->cons, 0);
	F->b.state = IBV_QPS_RTR;
	F->b.rx_busy = false;
	/* the responder is destroyed during the copy: no answer, the
	 * requester waits for its transport timer, b's WQE is not taken */
	while_unlocked = kill_responder;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(unlocks, 2);
	assert_true(cq_empty(&F->scq));
	assert_true(cq_empty(&F->rcq));
	assert_int_equal(F->b.rq.hdr->cons, 0);
	assert_false(sv_exec_ready(&F->a, F->x.now, &timer));
	assert_int_equal(timer, F->x.now + sv_ack_timeout_ns(F->a.attr.timeout));
	/* all well: delivered */
	F->b.dead = false;
	while_unlocked = NULL;
	F->x.now = timer;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(unlocks, 3);
	assert_memory_equal(big_a, big_b, BIG);
	e = poll1(&F->rcq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(e.byte_len, BIG);
	assert_int_equal(poll1(&F->scq).status, IBV_WC_SUCCESS);
	assert_int_equal(copy_seq, 6);
}

/* ---- memory-management extensions (with the real exec/mm.c, keymap.c) ---- */

#define FR_MAX 512

/* A fast-register MR as ALLOC_MR makes it: invalid, room for max runs. */
struct frmr {
	struct sv_mr mr;
	struct sv_mr_block blocks[FR_MAX + 1];
};

/* A page list as ALLOC_PAGE_LIST makes it, in the client's memory. */
struct plist {
	struct sv_page_list pl;
	uint64_t w[2 * FR_MAX];
};

static void mk_frmr(struct frmr *f)
{
	memset(f, 0, sizeof(*f));
	f->mr.owner = &F->cl;
	f->mr.pd = &F->pd;
	f->mr.kind = SV_MR_FAST_REG;
	f->mr.invalid = true;
	f->mr.max_blocks = FR_MAX;
	f->mr.blocks = f->blocks;
	assert_int_equal(sv_keytab_alloc(&sv_dev.keys, &f->mr, &f->mr.key), 0);
}

static void mk_plist(struct plist *p)
{
	memset(p, 0, sizeof(*p));
	p->pl.owner = &F->cl;
	p->pl.map = p->w;
	p->pl.bytes = sizeof(p->w);
	p->pl.max_entries = FR_MAX;
	assert_int_equal(sv_objtab_insert(&F->cl.objs, SV_OBJ_PAGE_LIST,
					  &p->pl, &p->pl.handle), 0);
}

static void mk_mw(struct sv_mw *mw, uint32_t type)
{
	memset(mw, 0, sizeof(*mw));
	mw->owner = &F->cl;
	mw->pd = &F->pd;
	mw->type = type;
	assert_int_equal(sv_keytab_alloc_kind(&sv_dev.keys, mw, SV_KEY_MW,
					      &mw->key), 0);
}

/* Post a header-only WQE (FAST_REG_MR, BIND_MW, LOCAL_INV) on qp. */
static struct sv_send_wqe *post_hdr(struct sv_qp *qp, uint32_t op,
				    uint32_t flags, uint64_t wr_id,
				    const struct sv_wqe_reg *reg, uint32_t n)
{
	struct sv_send_wqe *w = post_send(qp, op, IBV_SEND_SIGNALED | flags,
					  wr_id, NULL, 0);

	if (reg)
		w->reg = *reg;
	w->num_sge = n;
	return w;
}

/* Run qp's head WQE; its CQE must have this status and opcode. */
static struct sv_cqe run1(struct sv_qp *qp, uint32_t status, uint32_t opcode)
{
	struct sv_cqe e;

	assert_true(sv_exec_step(&F->x, qp));
	e = poll1(qp->send_cq);
	assert_int_equal(e.status, status);
	assert_int_equal(e.opcode, opcode);
	return e;
}

static void rts(void)
{
	F->a.state = F->b.state = IBV_QPS_RTS;
}

static uint32_t next_key(uint32_t key)
{
	return (key & ~0xffu) | ((key + 1) & 0xff);
}

/* Blocks of BLK bytes every STRIDE bytes of scat: no two are adjacent. */
#define BLK 37
#define STRIDE 64
static char scat[FR_MAX * STRIDE];

/* Where byte o of a block-list MR over scat (first byte fbo) lies. */
static char *scat_at(uint32_t fbo, uint64_t o)
{
	return scat + (fbo + o) / BLK * STRIDE + (fbo + o) % BLK;
}

/* FAST_REG f over n blocks of scat: the new key. */
static uint32_t reg_blocks(struct sv_qp *qp, struct frmr *f, struct plist *p,
			   uint32_t n, uint32_t fbo, uint64_t len,
			   uint32_t access)
{
	struct sv_wqe_reg reg = {
		.iova = 0x7000000, .key = next_key(f->mr.key),
		.access = access, .length = len, .list = p->pl.handle,
		.fbo = fbo, .flags = SV_REG_BLOCKS,
	};

	for (uint32_t i = 0; i < n; i++) {
		p->w[2 * i] = (uintptr_t)(scat + (size_t)i * STRIDE);
		p->w[2 * i + 1] = BLK;
	}
	/* n entries: far more than the ring's max_sge, and fine */
	post_hdr(qp, SV_WR_FAST_REG_MR, 0, 0xf0, &reg, n);
	run1(qp, IBV_WC_SUCCESS, 8);   /* IBV_EXP_WC_FAST_REG_MR */
	assert_false(f->mr.invalid);
	assert_int_equal(f->mr.key, reg.key);
	return reg.key;
}

#define RW_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		   IBV_ACCESS_REMOTE_READ)

/* FAST_REG f over the first n blocks of scat, from their first byte, with
 * every access: the key. */
static uint32_t reg_n(struct sv_qp *qp, struct frmr *f, struct plist *p,
		      uint32_t n)
{
	return reg_blocks(qp, f, p, n, 0, (uint64_t)n * BLK, RW_ACCESS);
}

/* A new fast-register MR and page list, registered by qp over n blocks. */
static uint32_t new_frmr(struct sv_qp *qp, struct frmr *f, struct plist *p,
			 uint32_t n)
{
	mk_frmr(f);
	mk_plist(p);
	return reg_n(qp, f, p, n);
}

static void test_fast_reg_blocks(void **state)
{
	static struct frmr f;
	static struct plist p;
	const uint32_t n = 100, fbo = 5;
	const uint64_t len = (uint64_t)n * BLK - fbo;     /* 3695 */
	struct sv_wqe_sge s = asge(F->abuf, (uint32_t)len), r;
	struct sv_send_wqe *w;
	uint32_t key;

	(void)state;
	mk_frmr(&f);
	mk_plist(&p);
	memset(scat, 0x77, sizeof(scat));
	key = reg_blocks(&F->b, &f, &p, n, fbo, len, RW_ACCESS);
	assert_int_equal(f.mr.iova, 0x7000000);
	/* an RDMA WRITE over 100 blocks (more than one window of iovecs) */
	for (uint64_t i = 0; i < len; i++)
		F->abuf[i] = (char)(i * 13 + 7);
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 1, &s, 1);
	w->remote_addr = 0x7000000;
	w->rkey = key;
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	for (uint64_t i = 0; i < len; i++)
		assert_int_equal(*scat_at(fbo, i), (char)(i * 13 + 7));
	/* nothing between the blocks, nothing before fbo */
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = BLK; j < STRIDE; j++)
			assert_int_equal((unsigned char)scat[i * STRIDE + j],
					 0x77);
	for (uint32_t j = 0; j < fbo; j++)
		assert_int_equal((unsigned char)scat[j], 0x77);
	/* an RDMA READ of a part of it, from an offset */
	memset(F->abuf, 0, sizeof(F->abuf));
	s.length = 2000;
	w = post_send(&F->a, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, 2, &s, 1);
	w->remote_addr = 0x7000000 + 333;
	w->rkey = key;
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	for (uint64_t i = 0; i < 2000; i++)
		assert_int_equal(F->abuf[i], *scat_at(fbo, 333 + i));
	/* as the local side: b SENDs from it (lkey == rkey) to a */
	r = asge(F->abuf + 100, 3000);
	memset(F->abuf, 0, sizeof(F->abuf));
	post_recv_wq(&F->a.rq, 3, &r, 1);
	s = (struct sv_wqe_sge){ 0x7000000 + 10, 3000, key };
	post_send(&F->b, IBV_WR_SEND, IBV_SEND_SIGNALED, 4, &s, 1);
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(poll1(&F->rcq).byte_len, 3000);
	for (uint64_t i = 0; i < 3000; i++)
		assert_int_equal(F->abuf[100 + i], *scat_at(fbo, 10 + i));
	/* outside the MR: a remote access error */
	s = asge(F->abuf, 8);
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 5, &s, 1);
	w->remote_addr = 0x7000000 + len - 7;
	w->rkey = key;
	run1(&F->a, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	assert_int_equal(F->b.state, IBV_QPS_ERR);
}

static void test_fast_reg_pages(void **state)
{
	static struct frmr f;
	static struct plist p;
	static char pages[4 * 4096] __attribute__((aligned(4096)));
	struct sv_wqe_sge s = asge(F->abuf, 4096);
	struct sv_wqe_reg reg = {
		.length = 4096, .access = RW_ACCESS | IBV_ACCESS_ZERO_BASED,
		.fbo = 100, .page_shift = 12, .iova = 0x1234,
	};
	struct sv_send_wqe *w;

	(void)state;
	mk_frmr(&f);
	mk_plist(&p);
	/* pages 2 and 0, in that order: byte o at page[(100 + o) >> 12] */
	p.w[0] = (uintptr_t)(pages + 2 * 4096);
	p.w[1] = (uintptr_t)pages;
	reg.list = p.pl.handle;
	reg.key = next_key(f.mr.key);
	post_hdr(&F->b, SV_WR_FAST_REG_MR, IBV_SEND_FENCE, 1, &reg, 2);
	run1(&F->b, IBV_WC_SUCCESS, 8);
	assert_int_equal(f.mr.iova, 0);          /* zero-based */
	for (int i = 0; i < 4096; i++)
		F->abuf[i] = (char)(i ^ 0x5a);
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 2, &s, 1);
	w->remote_addr = 0;
	w->rkey = reg.key;
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(pages + 2 * 4096 + 100, F->abuf, 4096 - 100);
	assert_memory_equal(pages, F->abuf + 4096 - 100, 100);
	/* the old key no longer works */
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 3, &s, 1);
	w->remote_addr = 0;
	w->rkey = f.mr.key - 1;
	run1(&F->a, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
}

static void test_fast_reg_errors(void **state)
{
	static struct frmr f;
	static struct plist p;
	struct sv_wqe_reg reg = {
		.length = 100, .access = RW_ACCESS, .flags = SV_REG_BLOCKS,
	};
	struct sv_cqe e;

	(void)state;
	mk_frmr(&f);
	mk_plist(&p);
	p.w[0] = (uintptr_t)scat;
	p.w[1] = 4096;
	reg.list = p.pl.handle;
	/* a regular MR cannot be fast-registered: LOC_QP_OP_ERR, RC to ERR */
	reg.key = next_key(F->bmr.key);
	post_hdr(&F->a, SV_WR_FAST_REG_MR, 0, 1, &reg, 1);
	post_hdr(&F->a, SV_WR_FAST_REG_MR, 0, 2, &reg, 1);
	e = run1(&F->a, IBV_WC_LOC_QP_OP_ERR, 8);
	assert_int_equal(e.wr_id, 1);
	assert_int_equal(F->a.state, IBV_QPS_ERR);
	assert_int_equal(F->bmr.key, reg.key - 1);
	/* the one behind it is flushed, with its own opcode */
	e = run1(&F->a, IBV_WC_WR_FLUSH_ERR, 8);
	assert_int_equal(e.wr_id, 2);
	rts();
	/* not a page list of the QP's client */
	reg.key = next_key(f.mr.key);
	reg.list = p.pl.handle + 1;
	post_hdr(&F->a, SV_WR_FAST_REG_MR, 0, 3, &reg, 1);
	run1(&F->a, IBV_WC_LOC_QP_OP_ERR, 8);
	assert_true(f.mr.invalid);
	rts();
	/* length beyond the list */
	reg.list = p.pl.handle;
	reg.length = 4097;
	post_hdr(&F->a, SV_WR_FAST_REG_MR, 0, 4, &reg, 1);
	run1(&F->a, IBV_WC_LOC_QP_OP_ERR, 8);
	rts();
	/* UD QPs fast-register too; an error there is SQE */
	F->a.type = IBV_QPT_UD;
	reg.length = 4096;
	post_hdr(&F->a, SV_WR_FAST_REG_MR, 0, 5, &reg, 1);
	run1(&F->a, IBV_WC_SUCCESS, 8);
	assert_false(f.mr.invalid);
	/* valid already: refused */
	reg.key = next_key(reg.key);
	post_hdr(&F->a, SV_WR_FAST_REG_MR, 0, 6, &reg, 1);
	run1(&F->a, IBV_WC_LOC_QP_OP_ERR, 8);
	assert_int_equal(F->a.state, IBV_QPS_SQE);
	assert_int_equal(f.mr.key, reg.key - 1);
}

static void test_local_inv(void **state)
{
	static struct frmr f;
	static struct plist p;
	struct sv_wqe_sge s = asge(F->abuf, 8);
	struct sv_send_wqe *w;
	uint32_t key;

	(void)state;
	key = new_frmr(&F->b, &f, &p, 4);
	/* the fence flag is accepted: execution is in order anyway */
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, IBV_SEND_FENCE, 1, NULL, 0);
	w->imm = key;
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	assert_true(f.mr.invalid);
	/* the key grants nothing now */
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 2, &s, 1);
	w->remote_addr = 0x7000000;
	w->rkey = key;
	run1(&F->a, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	rts();
	/* invalid already */
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 3, NULL, 0);
	w->imm = key;
	run1(&F->b, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOCAL_INV);
	assert_int_equal(F->b.state, IBV_QPS_ERR);
	rts();
	/* a regular MR cannot be invalidated; nor can a stranger's key */
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 4, NULL, 0);
	w->imm = F->bmr.key;
	run1(&F->b, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOCAL_INV);
	rts();
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 5, NULL, 0);
	w->imm = 0xdead00;
	run1(&F->b, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOCAL_INV);
	rts();
	/* UC: the error puts the QP in SQE */
	F->b.type = IBV_QPT_UC;
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 6, NULL, 0);
	w->imm = key;
	run1(&F->b, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOCAL_INV);
	assert_int_equal(F->b.state, IBV_QPS_SQE);
	/* an unsignaled success leaves no CQE */
	F->b.state = IBV_QPS_RTS;
	key = reg_n(&F->b, &f, &p, 4);
	w = post_send(&F->b, IBV_WR_LOCAL_INV, 0, 7, NULL, 0);
	w->imm = key;
	assert_true(sv_exec_step(&F->x, &F->b));
	assert_true(cq_empty(&F->scq));
	assert_true(f.mr.invalid);
}

static void test_bind_mw(void **state)
{
	static struct sv_mw mw, mw1;
	struct sv_wqe_sge s = asge(F->abuf, 16);
	struct sv_wqe_reg reg = {
		.iova = va(&F->bmr, F->bbuf + 1000), .length = 100,
		.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	struct sv_send_wqe *w;

	(void)state;
	mk_mw(&mw, SV_MW_TYPE_2A);
	reg.key = next_key(mw.key);
	reg.list = F->bmr.key;
	/* the MR has no IBV_ACCESS_MW_BIND */
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 1, &reg, 0);
	run1(&F->b, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
	assert_false(mw.bound);
	assert_int_equal(F->b.state, IBV_QPS_ERR);
	rts();
	F->bmr.access |= IBV_ACCESS_MW_BIND;
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 2, &reg, 0);
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	assert_true(mw.bound);
	/* a writes through the window: b is the QP it is bound to */
	memcpy(F->abuf, "window-bytes-ok!", 16);
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 3, &s, 1);
	w->remote_addr = reg.iova + 84;
	w->rkey = reg.key;
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_memory_equal(F->bbuf + 1084, "window-bytes-ok!", 16);
	/* past the window's end (still inside the MR) */
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 4, &s, 1);
	w->remote_addr = reg.iova + 85;
	w->rkey = reg.key;
	run1(&F->a, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	rts();
	/* a type 2 window is bound once: the next bind is refused */
	reg.key = next_key(reg.key);
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 5, &reg, 0);
	run1(&F->b, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
	rts();
	/* LOCAL_INV frees it; the old rkey is dead */
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 6, NULL, 0);
	w->imm = reg.key - 1;
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	assert_false(mw.bound);
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 7, &s, 1);
	w->remote_addr = reg.iova;
	w->rkey = reg.key - 1;
	run1(&F->a, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	rts();
	/* zero-based: the window's addresses start at 0 */
	reg.access |= IBV_ACCESS_ZERO_BASED;
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 8, &reg, 0);
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	w = post_send(&F->a, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, 9, &s, 1);
	w->remote_addr = 84;
	w->rkey = reg.key;
	memset(F->abuf, 0, 16);
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_memory_equal(F->abuf, "window-bytes-ok!", 16);
	/* a type 1 window through the send queue without SV_REG_TYPE1 */
	mk_mw(&mw1, SV_MW_TYPE_1);
	reg.key = next_key(mw1.key);
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 10, &reg, 0);
	run1(&F->b, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
	rts();
	/* ... and with it (ibv_bind_mw), then unbound (length 0) */
	reg.flags = SV_REG_TYPE1;
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 11, &reg, 0);
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	assert_true(mw1.bound);
	reg.key = next_key(reg.key);
	reg.length = 0;
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 12, &reg, 0);
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	assert_false(mw1.bound);
	/* type 1 windows are not invalidated by LOCAL_INV */
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 13, NULL, 0);
	w->imm = reg.key;
	run1(&F->b, IBV_WC_MW_BIND_ERR, IBV_WC_LOCAL_INV);
	rts();
	/* not on UD */
	F->b.type = IBV_QPT_UD;
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 14, &reg, 0);
	run1(&F->b, IBV_WC_LOC_QP_OP_ERR, IBV_WC_BIND_MW);
}

/* b owns a fast-register MR over 4 blocks: its key. */
static uint32_t b_frmr(struct frmr *f, struct plist *p)
{
	return new_frmr(&F->b, f, p, 4);
}

static void test_send_with_inv(void **state)
{
	static struct frmr f;
	static struct plist p;
	struct sv_wqe_sge s = asge(F->abuf, 10), r = bsge(F->bbuf, 64);
	struct sv_send_wqe *w;
	struct sv_cqe e;
	uint32_t key;

	(void)state;
	key = b_frmr(&f, &p);
	memcpy(F->abuf, "invalidate", 10);
	post_recv_wq(&F->b.rq, 1, &r, 1);
	w = post_send(&F->a, IBV_WR_SEND_WITH_INV, IBV_SEND_SIGNALED, 2, &s,
		      1);
	w->imm = key;
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_SEND);
	e = poll1(&F->rcq);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(e.opcode, IBV_WC_RECV);
	assert_int_equal(e.wc_flags, IBV_WC_WITH_INV);
	assert_int_equal(e.imm_data, key);        /* host order */
	assert_int_equal(e.byte_len, 10);
	assert_memory_equal(F->bbuf, "invalidate", 10);
	assert_true(f.mr.invalid);
	/* again: the key cannot be invalidated now. Nothing lands, the
	 * receive completes in error, the requester sees REM_OP_ERR */
	memset(F->bbuf, 0x77, 64);
	post_recv_wq(&F->b.rq, 3, &r, 1);
	w = post_send(&F->a, IBV_WR_SEND_WITH_INV, IBV_SEND_SIGNALED, 4, &s,
		      1);
	w->imm = key;
	run1(&F->a, IBV_WC_REM_OP_ERR, IBV_WC_SEND);
	e = poll1(&F->rcq);
	assert_int_equal(e.wr_id, 3);
	assert_int_equal(e.status, IBV_WC_LOC_PROT_ERR);
	for (int i = 0; i < 64; i++)
		assert_int_equal((unsigned char)F->bbuf[i], 0x77);
	assert_int_equal(F->a.state, IBV_QPS_ERR);
	assert_int_equal(F->b.state, IBV_QPS_ERR);
	rts();
	/* a regular MR's key: the same */
	post_recv_wq(&F->b.rq, 5, &r, 1);
	w = post_send(&F->a, IBV_WR_SEND_WITH_INV, IBV_SEND_SIGNALED, 6, &s,
		      1);
	w->imm = F->bmr.key;
	run1(&F->a, IBV_WC_REM_OP_ERR, IBV_WC_SEND);
	assert_int_equal(poll1(&F->rcq).status, IBV_WC_LOC_PROT_ERR);
	for (int i = 0; i < 64; i++)
		assert_int_equal((unsigned char)F->bbuf[i], 0x77);
	rts();
	/* RC only */
	F->a.type = F->b.type = IBV_QPT_UC;
	post_send(&F->a, IBV_WR_SEND_WITH_INV, IBV_SEND_SIGNALED, 7, &s, 1);
	run1(&F->a, IBV_WC_LOC_QP_OP_ERR, IBV_WC_SEND);
	assert_true(cq_empty(&F->rcq));
}

/* a fast-register MR over the first blocks of scat, as a's READ sink */
static struct frmr *sink_mr;

static void sink_valid(void)
{
	/* the data is landing: not invalidated yet */
	assert_false(sink_mr->mr.invalid);
	assert_true(cq_empty(&F->scq));
}

static void test_read_inv(void **state)
{
	static struct frmr f;
	static struct plist p;
	struct sv_wqe_sge s;
	struct sv_send_wqe *w;
	uint32_t key;

	(void)state;
	key = new_frmr(&F->a, &f, &p, 10);
	memset(scat, 0, sizeof(scat));
	for (int i = 0; i < 300; i++)
		F->bbuf[i] = (char)(i + 1);
	s = (struct sv_wqe_sge){ 0x7000000, 300, key };
	w = post_send(&F->a, SV_WR_RDMA_READ_INV, IBV_SEND_SIGNALED, 1, &s, 1);
	w->remote_addr = va(&F->bmr, F->bbuf);
	w->rkey = F->bmr.key;
	w->imm = key;
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	for (int i = 0; i < 300; i++)
		assert_int_equal(*scat_at(0, (uint64_t)i), (char)(i + 1));
	assert_true(f.mr.invalid);
	/* a key it may not invalidate: the data lands, then the error */
	s = asge(F->abuf, 20);
	w = post_send(&F->a, SV_WR_RDMA_READ_INV, IBV_SEND_SIGNALED, 2, &s, 1);
	w->remote_addr = va(&F->bmr, F->bbuf);
	w->rkey = F->bmr.key;
	w->imm = F->amr.key;
	run1(&F->a, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RDMA_READ);
	assert_memory_equal(F->abuf, F->bbuf, 20);
	assert_int_equal(F->a.state, IBV_QPS_ERR);
	rts();
	/* zero bytes: still the invalidation */
	key = reg_n(&F->a, &f, &p, 10);
	w = post_send(&F->a, SV_WR_RDMA_READ_INV, IBV_SEND_SIGNALED, 3, NULL,
		      0);
	w->imm = key;
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_true(f.mr.invalid);
	/* RC only */
	F->a.type = F->b.type = IBV_QPT_UC;
	post_send(&F->a, SV_WR_RDMA_READ_INV, IBV_SEND_SIGNALED, 4, NULL, 0);
	run1(&F->a, IBV_WC_LOC_QP_OP_ERR, IBV_WC_RDMA_READ);
}

/* ---- large messages over block lists, and the fence ---- */

/* Large messages, and a fast-register MR of FR_MAX blocks (zeroed) made by
 * qp: its key. */
static uint32_t big_frmr(struct sv_qp *qp, struct frmr *f, struct plist *p)
{
	uint32_t key;

	big_setup();
	key = new_frmr(qp, f, p, FR_MAX);
	memset(scat, 0, sizeof(scat));
	return key;
}

static void test_read_inv_unlocked(void **state)
{
	static struct frmr f;
	static struct plist p;
	const uint32_t n = FR_MAX;
	const uint64_t len = (uint64_t)n * BLK;        /* > 16 KiB */
	struct sv_wqe_sge s;
	struct sv_send_wqe *w;
	uint32_t key;

	(void)state;
	key = big_frmr(&F->a, &f, &p);
	sink_mr = &f;
	while_unlocked = sink_valid;
	s = (struct sv_wqe_sge){ 0x7000000, (uint32_t)len, key };
	w = post_send(&F->a, SV_WR_RDMA_READ_INV, IBV_SEND_SIGNALED, 1, &s, 1);
	w->remote_addr = big_bmr.iova;
	w->rkey = big_bmr.key;
	w->imm = key;
	for (size_t i = 0; i < BIG; i++)
		big_b[i] = (char)(i * 3 + 1);
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	/* a window of 64 blocks at a time, each without the lock */
	assert_int_equal(unlocks, (n + 63) / 64);
	assert_int_equal(relocks, unlocks);
	for (uint64_t i = 0; i < len; i++)
		assert_int_equal(*scat_at(0, i), (char)(i * 3 + 1));
	assert_true(f.mr.invalid);
}

static struct frmr *gone_mr;
static int windows_seen;

static void invalidate_meanwhile(void)
{
	/* another engine invalidates the MR during the first window */
	if (++windows_seen == 1)
		gone_mr->mr.invalid = true;
}

static void test_unlocked_grant_ends(void **state)
{
	static struct frmr f;
	static struct plist p;
	const uint32_t n = FR_MAX;
	const uint64_t len = (uint64_t)n * BLK;
	struct sv_wqe_sge s;
	struct sv_send_wqe *w;
	uint32_t key;

	(void)state;
	key = big_frmr(&F->b, &f, &p);
	gone_mr = &f;
	windows_seen = 0;
	while_unlocked = invalidate_meanwhile;
	s = big_sge(&big_amr, (uint32_t)len);
	w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, 1, &s, 1);
	w->remote_addr = 0x7000000;
	w->rkey = key;
	run1(&F->a, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	assert_int_equal(unlocks, 1);
	assert_int_equal(F->b.state, IBV_QPS_ERR);
	/* the first window landed, nothing after it */
	for (uint64_t i = 0; i < 64 * BLK; i++)
		assert_int_equal(*scat_at(0, i), big_a[i]);
	for (uint64_t i = 64 * BLK; i < len; i++)
		assert_int_equal(*scat_at(0, i), 0);
}

/* Another engine, in the middle of an unlocked copy (copy_seq odd). */
static struct sv_engine other;
static bool fencing;
static struct frmr *fence_mr;
static void (*meanwhile)(void);

static void copy_ends(void)
{
	/* the fence waits: our QP's state changed already, no CQE yet */
	assert_true(fencing);
	assert_true(fence_mr->mr.invalid);
	assert_true(cq_empty(&F->scq));
	if (meanwhile)
		meanwhile();
	other.copy_seq++;               /* its copy ends */
}

static void fence_setup(struct frmr *f, struct plist *p, uint32_t *key)
{
	big_setup();
	*key = new_frmr(&F->b, f, p, 4);
	other.copy_seq = 7;
	fencing = false;
	sv_dev.engine[1] = &other;
	F->x.fencing = &fencing;
	fence_mr = f;
	meanwhile = NULL;
	while_unlocked = copy_ends;
}

static void destroy_b(void)
{
	F->b.dead = true;
}

static void b_to_sqd(void)
{
	F->b.state = IBV_QPS_SQD;
	F->b.state_gen++;
}

static void b_to_err(void)
{
	F->b.state = IBV_QPS_ERR;
	F->b.state_gen++;
}

static void test_fence(void **state)
{
	static struct frmr f;
	static struct plist p;
	struct sv_send_wqe *w;
	struct sv_cqe e;
	uint32_t key;

	(void)state;
	fence_setup(&f, &p, &key);
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 1, NULL, 0);
	w->imm = key;
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	assert_int_equal(unlocks, 1);
	assert_int_equal(relocks, 1);
	assert_int_equal(copy_seq, 2);     /* odd while it waited */
	assert_false(fencing);
	/* an engine that waits in a fence itself is not waited for */
	other.copy_seq = 9;
	other.fencing = true;
	key = reg_n(&F->b, &f, &p, 4);
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 2, NULL, 0);
	w->imm = key;
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	assert_int_equal(unlocks, 1);
	other.fencing = false;
	/* nor one that copies nothing; nor FAST_REG (it needs an invalid MR) */
	other.copy_seq = 10;
	key = reg_n(&F->b, &f, &p, 4);
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 3, NULL, 0);
	w->imm = key;
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	assert_int_equal(unlocks, 1);
	other.copy_seq = 11;
	key = reg_n(&F->b, &f, &p, 4);
	assert_int_equal(unlocks, 1);
	/* the QP is destroyed meanwhile: no completion, the WQE stays */
	meanwhile = destroy_b;
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 4, NULL, 0);
	w->imm = key;
	assert_true(sv_exec_step(&F->x, &F->b));
	assert_int_equal(unlocks, 2);
	assert_true(cq_empty(&F->scq));
	assert_int_equal(F->b.sq.hdr->cons, F->b.sq.hdr->prod - 1);
	assert_true(f.mr.invalid);
	F->b.dead = false;
	/* ... moved to ERR meanwhile: flushed afterwards */
	F->b.sq.cons++;                   /* (forget the WQE above) */
	F->b.sq.hdr->cons++;
	F->b.head_started = false;
	meanwhile = b_to_err;
	other.copy_seq++;
	key = reg_n(&F->b, &f, &p, 4);
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 5, NULL, 0);
	w->imm = key;
	assert_true(sv_exec_step(&F->x, &F->b));
	assert_true(cq_empty(&F->scq));
	e = run1(&F->b, IBV_WC_WR_FLUSH_ERR, IBV_WC_LOCAL_INV);
	assert_int_equal(e.wr_id, 5);
	/* ... moved to SQD meanwhile: the WQE in flight completes */
	F->b.state = IBV_QPS_RTS;
	meanwhile = b_to_sqd;
	other.copy_seq++;
	key = reg_n(&F->b, &f, &p, 4);
	w = post_hdr(&F->b, IBV_WR_LOCAL_INV, 0, 6, NULL, 0);
	w->imm = key;
	e = run1(&F->b, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	assert_int_equal(e.wr_id, 6);
	assert_int_equal(unlocks, 4);
	sv_dev.engine[1] = NULL;
}

static void test_fence_bind_read_inv(void **state)
{
	static struct frmr f;
	static struct plist p;
	static struct sv_mw mw1, mw2;
	struct sv_wqe_reg reg = {
		.iova = va(&F->bmr, F->bbuf), .length = 100,
		.access = IBV_ACCESS_REMOTE_WRITE, .flags = SV_REG_TYPE1,
	};
	struct sv_wqe_sge s;
	struct sv_send_wqe *w;
	uint32_t key;

	(void)state;
	fence_setup(&f, &p, &key);
	F->bmr.access |= IBV_ACCESS_MW_BIND;
	reg.list = F->bmr.key;
	/* a type 1 bind ends the window's old binding: fenced */
	mk_mw(&mw1, SV_MW_TYPE_1);
	reg.key = next_key(mw1.key);
	fence_mr->mr.invalid = true;  /* (what copy_ends checks) */
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 1, &reg, 0);
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	assert_int_equal(unlocks, 1);
	/* a type 2 bind needs a free window: not fenced */
	mk_mw(&mw2, SV_MW_TYPE_2B);
	reg.key = next_key(mw2.key);
	reg.flags = 0;
	other.copy_seq++;
	post_hdr(&F->b, IBV_WR_BIND_MW, 0, 2, &reg, 0);
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	assert_int_equal(unlocks, 1);
	/* RDMA_READ_INV: the invalidation is fenced */
	key = reg_n(&F->b, &f, &p, 4);
	s = (struct sv_wqe_sge){ 0x7000000, 8, key };
	w = post_send(&F->b, SV_WR_RDMA_READ_INV, IBV_SEND_SIGNALED, 3, &s, 1);
	w->remote_addr = va(&F->amr, F->abuf);
	w->rkey = F->amr.key;
	w->imm = key;
	run1(&F->b, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_int_equal(unlocks, 2);
	sv_dev.engine[1] = NULL;
}

static void recv_waits(void)
{
	/* the data is there and the key invalid, but the receive WQE stays
	 * the responder's own until the fence is over */
	assert_true(F->b.rx_busy);
	assert_true(cq_empty(&F->rcq));
	assert_memory_equal(F->bbuf, "fenced", 6);
}

static void test_fence_send_with_inv(void **state)
{
	static struct frmr f;
	static struct plist p;
	struct sv_wqe_sge s = asge(F->abuf, 6), r = bsge(F->bbuf, 64);
	struct sv_send_wqe *w;
	struct sv_cqe e;
	uint32_t key;

	(void)state;
	fence_setup(&f, &p, &key);
	meanwhile = recv_waits;
	memcpy(F->abuf, "fenced", 6);
	post_recv_wq(&F->b.rq, 1, &r, 1);
	w = post_send(&F->a, IBV_WR_SEND_WITH_INV, IBV_SEND_SIGNALED, 2, &s,
		      1);
	w->imm = key;
	run1(&F->a, IBV_WC_SUCCESS, IBV_WC_SEND);
	assert_int_equal(unlocks, 1);
	assert_false(F->b.rx_busy);
	e = poll1(&F->rcq);
	assert_int_equal(e.wc_flags, IBV_WC_WITH_INV);
	assert_int_equal(e.imm_data, key);
	/* the responder is destroyed meanwhile: no answer, WQE not taken */
	key = reg_n(&F->b, &f, &p, 4);
	meanwhile = destroy_b;
	other.copy_seq++;
	post_recv_wq(&F->b.rq, 3, &r, 1);
	w = post_send(&F->a, IBV_WR_SEND_WITH_INV, IBV_SEND_SIGNALED, 4, &s,
		      1);
	w->imm = key;
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_true(cq_empty(&F->scq));
	assert_true(cq_empty(&F->rcq));
	assert_int_equal(F->b.rq.hdr->cons, 1);
	F->b.dead = false;
	sv_dev.engine[1] = NULL;
}

/* ---- the send ring's mailbox (LOW_LATENCY QPs, src/abi/sv_qp.h) ---- */

/* Copy the header and SV_WQ_MB_BODY bytes of body of w (a slot) into qp's
 * mailbox as the library does, naming WQE seq - 1 (seq: mb_seq). */
static void mailbox_put(struct sv_qp *qp, const struct sv_send_wqe *w,
			uint32_t seq)
{
	struct sv_wq_ring *hdr = qp->sq.hdr;

	hdr->mb_seq = 0;
	memcpy(hdr->mb, w, SV_WQ_MB_BYTES);
	__atomic_store_n(&hdr->mb_seq, seq, __ATOMIC_RELEASE);
}

/* An RDMA WRITE of 8 bytes from abuf + src to bbuf + dst, wr_id id, in a
 * slot-shaped buffer (header + one SGE). */
static void write_wqe(uint8_t out[SV_WQ_MB_BYTES], uint64_t id, size_t src,
		      size_t dst)
{
	struct sv_send_wqe *w = (struct sv_send_wqe *)out;
	struct sv_wqe_sge s = asge(F->abuf + src, 8);

	memset(out, 0, SV_WQ_MB_BYTES);
	w->wr_id = id;
	w->opcode = IBV_WR_RDMA_WRITE;
	w->flags = IBV_SEND_SIGNALED;
	w->num_sge = 1;
	w->remote_addr = va(&F->bmr, F->bbuf + dst);
	w->rkey = F->bmr.key;
	memcpy(out + SV_SEND_WQE_HDR, &s, sizeof(s));
}

/* Post WQE `slot` to a's ring, with `mb` in its mailbox under seq; run it. */
static struct sv_cqe mailbox_run(const uint8_t slot[SV_WQ_MB_BYTES],
				 const uint8_t mb[SV_WQ_MB_BYTES], uint32_t seq)
{
	struct sv_wq *wq = &F->a.sq;
	uint32_t prod = wq->hdr->prod;
	uint8_t *p = sv_wq_slot(wq->hdr, wq->entries, wq->stride, prod);

	memset(p, 0, wq->stride);
	memcpy(p, slot, SV_WQ_MB_BYTES);
	mailbox_put(&F->a, (const struct sv_send_wqe *)mb, seq);
	__atomic_store_n(&wq->hdr->prod, prod + 1, __ATOMIC_RELEASE);
	assert_true(sv_exec_ready(&F->a, F->x.now, NULL));
	assert_true(sv_exec_step(&F->x, &F->a));
	assert_int_equal(wq->hdr->cons, prod + 1);
	return poll1(&F->scq);
}

/* A mailbox that holds the head WQE (mb_seq == cons + 1) is what runs, even
 * when the slot says otherwise; any other mb_seq leaves the slot in charge. */
static void test_mailbox(void **state)
{
	uint8_t slot[SV_WQ_MB_BYTES], mb[SV_WQ_MB_BYTES];
	struct sv_wq *wq = &F->a.sq;
	struct sv_cqe e;

	(void)state;
	memcpy(F->abuf, "slot-src", 8);
	memcpy(F->abuf + 8, "mbox-src", 8);
	write_wqe(slot, 0x51, 0, 100);
	write_wqe(mb, 0x3b, 8, 200);
	/* same seq: the mailbox's WQE (its wr_id, its SGE, its address) */
	e = mailbox_run(slot, mb, wq->cons + 1);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(e.wr_id, 0x3b);
	assert_int_equal(e.byte_len, 8);
	assert_memory_equal(F->bbuf + 200, "mbox-src", 8);
	assert_memory_equal(F->bbuf + 100, "\0\0\0\0\0\0\0\0", 8);
	/* the mailbox names another WQE (the last one, the next one, none):
	 * the slot's */
	for (int k = 0; k < 3; k++) {
		uint32_t seq = k == 0 ? wq->cons : k == 1 ? wq->cons + 2 : 0;

		memset(F->bbuf, 0, 300);
		e = mailbox_run(slot, mb, seq);
		assert_int_equal(e.status, IBV_WC_SUCCESS);
		assert_int_equal(e.wr_id, 0x51);
		assert_memory_equal(F->bbuf + 100, "slot-src", 8);
		assert_memory_equal(F->bbuf + 200, "\0\0\0\0\0\0\0\0", 8);
	}
	/* the WQE numbered 0xffffffff: its mb_seq is 0, "none": the slot */
	wq->cons = 0xffffffffu;
	wq->hdr->cons = wq->hdr->prod = 0xffffffffu;
	memset(F->bbuf, 0, 300);
	e = mailbox_run(slot, mb, 0);
	assert_int_equal(e.wr_id, 0x51);
	assert_memory_equal(F->bbuf + 100, "slot-src", 8);
	assert_int_equal(wq->cons, 0);
	/* and the next one, number 0 (mb_seq 1), from the mailbox again */
	memset(F->bbuf, 0, 300);
	e = mailbox_run(slot, mb, 1);
	assert_int_equal(e.wr_id, 0x3b);
	assert_memory_equal(F->bbuf + 200, "mbox-src", 8);
	assert_false(sv_exec_ready(&F->a, F->x.now, NULL));
}

/* Inline data from the mailbox; a mailbox whose header needs more body than
 * its SV_WQ_MB_BODY bytes is refused like a malformed slot, although the
 * slot (and the QP's limits) would take it. */
static void test_mailbox_malformed(void **state)
{
	uint8_t slot[SV_WQ_MB_BYTES], mb[SV_WQ_MB_BYTES];
	struct sv_send_wqe *m = (struct sv_send_wqe *)mb;
	struct sv_wq *wq = &F->a.sq;
	struct sv_cqe e;

	(void)state;
	memcpy(F->abuf, "slot-src", 8);
	write_wqe(slot, 0x51, 0, 100);
	/* 16 inline bytes: the mailbox's whole body */
	write_wqe(mb, 0x16, 8, 200);
	m->flags |= IBV_SEND_INLINE;
	m->num_sge = SV_WQ_MB_BODY;
	memcpy(mb + SV_SEND_WQE_HDR, "inline-16-bytes!", SV_WQ_MB_BODY);
	e = mailbox_run(slot, mb, wq->cons + 1);
	assert_int_equal(e.status, IBV_WC_SUCCESS);
	assert_int_equal(e.wr_id, 0x16);
	assert_int_equal(e.byte_len, SV_WQ_MB_BODY);
	assert_memory_equal(F->bbuf + 200, "inline-16-bytes!", SV_WQ_MB_BODY);
	/* 17 inline bytes (max_inline is 64): refused; RC: the QP errs */
	m->num_sge = SV_WQ_MB_BODY + 1;
	e = mailbox_run(slot, mb, wq->cons + 1);
	assert_int_equal(e.status, IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(e.wr_id, 0x16);
	assert_int_equal(F->a.state, IBV_QPS_ERR);
	/* two SGEs (max_sge is 4): refused too */
	F->a.state = IBV_QPS_RTS;
	write_wqe(mb, 0x22, 8, 200);
	m->num_sge = 2;
	e = mailbox_run(slot, mb, wq->cons + 1);
	assert_int_equal(e.status, IBV_WC_LOC_QP_OP_ERR);
	assert_int_equal(e.wr_id, 0x22);
	/* the same header in the slot, where it fits, runs (from the slot) */
	F->a.state = IBV_QPS_RTS;
	{
		struct sv_wqe_sge two[2] = { asge(F->abuf, 4),
					     asge(F->abuf + 4, 4) };
		struct sv_send_wqe *w;

		w = post_send(&F->a, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED,
			      0x23, two, 2);
		w->remote_addr = va(&F->bmr, F->bbuf + 300);
		w->rkey = F->bmr.key;
		assert_true(sv_exec_step(&F->x, &F->a));
		e = poll1(&F->scq);
		assert_int_equal(e.status, IBV_WC_SUCCESS);
		assert_int_equal(e.wr_id, 0x23);
		assert_memory_equal(F->bbuf + 300, "slot-src", 8);
	}
	/* a garbage opcode in the mailbox: refused as in a slot */
	write_wqe(mb, 0x24, 8, 200);
	m->opcode = 0x7f;
	e = mailbox_run(slot, mb, wq->cons + 1);
	assert_int_equal(e.status, IBV_WC_LOC_QP_OP_ERR);
}

#define FT(fn) cmocka_unit_test_setup_teardown(fn, fix_setup, fix_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rnr_table),
		cmocka_unit_test(test_timeouts_mtu),
		cmocka_unit_test(test_range),
		cmocka_unit_test(test_csum),
		cmocka_unit_test(test_grh_v4),
		cmocka_unit_test(test_grh_v6),
		cmocka_unit_test(test_iov_walk),
		cmocka_unit_test(test_mem_copy),
		cmocka_unit_test(test_transport_ops),
		cmocka_unit_test(test_outcome_table),
		FT(test_rc_send),
		FT(test_rc_rnr),
		FT(test_rc_rnr_forever_then_recv),
		FT(test_rc_no_target),
		FT(test_rdma),
		FT(test_rdma_errors),
		FT(test_recv_errors),
		FT(test_uc),
		FT(test_ud),
		FT(test_srq),
		FT(test_corrupt_and_overrun),
		FT(test_sqd),
		FT(test_sqd_drain_point),
		FT(test_cq_arm),
		FT(test_unlocked_write),
		FT(test_unlocked_changes),
		FT(test_fast_reg_blocks),
		FT(test_fast_reg_pages),
		FT(test_fast_reg_errors),
		FT(test_local_inv),
		FT(test_bind_mw),
		FT(test_send_with_inv),
		FT(test_read_inv),
		FT(test_read_inv_unlocked),
		FT(test_unlocked_grant_ends),
		FT(test_fence),
		FT(test_fence_bind_read_inv),
		FT(test_fence_send_with_inv),
		FT(test_mailbox),
		FT(test_mailbox_malformed),
	};

	/* a fence that never ends would hang: make it a failure */
	alarm(300);

	return cmocka_run_group_tests(tests, NULL, NULL);
}
