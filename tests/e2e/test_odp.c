// SPDX-License-Identifier: MIT
/*
 * On-demand paging (issue 23, Deliver 1) through the verbs: two contexts
 * of one process (two clients of the device), RC and UC QPs between them.
 *
 *  - the capabilities: ODP and implicit ODP, every transport's bits;
 *  - an ODP MR over a range with a hole in it (no access) registers (a
 *    plain one does not); a WRITE into its mapped part lands; a WRITE into the hole
 *    completes with IBV_WC_REM_ACCESS_ERR and writes nothing past it; once
 *    the hole is mapped, the same WRITE lands (memory that appears after
 *    registration); a SEND whose local piece lies in a hole completes with
 *    IBV_WC_LOC_PROT_ERR;
 *  - a page unmapped after registration: the WRITE into it fails the same
 *    way, the neighbours keep what they had;
 *  - implicit ODP (address 0, length SIZE_MAX): WRITE, READ, FETCH_ADD and
 *    SEND into malloc'd memory of the peer through the one key, and a
 *    WRITE to an address that is not mapped fails cleanly;
 *  - UC WRITE and SEND between ODP MRs; UD SEND from ODP memory into an
 *    ODP receive, on the QP and through an SRQ; UC SEND into an SRQ;
 *  - ibv_advise_mr: prefetch and prefetch-write, with and without FLUSH, on
 *    explicit and implicit MRs; refused: a key that is not an ODP MR of
 *    the PD (ENOENT), a range past the MR (EFAULT), a hole with FLUSH
 *    (EFAULT), unknown flags and no SGE (EINVAL), an unknown advice
 *    (EOPNOTSUPP).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define CHECK VU_CHECK

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |           \
		 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define ODP (ACC_ALL | IBV_ACCESS_ON_DEMAND)

static long pg;
static struct ibv_context *ca, *cb;   /* a: the initiator, b: the target */
static struct ibv_pd *pa, *pb;

/* A fresh connected pair of type t: a's endpoint and b's. */
static void pair(struct vu_ep *a, struct vu_ep *b, enum ibv_qp_type t)
{
	struct vu_qp_caps caps = { .send_wr = 8, .recv_wr = 8, .cqe = 32 };
	struct vu_conn c = vu_conn_default();

	CHECK(!vu_ep_create(a, ca, pa, t, &caps) &&
	      !vu_ep_create(b, cb, pb, t, &caps), "endpoints");
	c.retry_cnt = 1;
	CHECK(!vu_connect_pair(a->qp, b->qp, &c), "connect");
}

static void unpair(struct vu_ep *a, struct vu_ep *b)
{
	vu_ep_destroy(a);
	vu_ep_destroy(b);
}

static void post(struct vu_ep *e, enum ibv_wr_opcode op, uint32_t lkey,
		 uint64_t laddr, uint32_t len, uint64_t raddr, uint32_t rkey,
		 uint64_t add)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	CHECK(!ibv_post_send(e->qp, &wr, &bad), "ibv_post_send %s",
	      vu_opcode_str(op));
}

static void recv_on(struct vu_ep *e, uint32_t lkey, uint64_t addr,
		    uint32_t len)
{
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = 99, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	CHECK(!ibv_post_recv(e->qp, &wr, &bad), "ibv_post_recv");
}

static void wc_is(struct ibv_cq *cq, enum ibv_wc_status want, const char *what)
{
	struct ibv_wc wc;

	CHECK(vu_poll(cq, &wc, 1, VU_WAIT_MS) == 1, "%s: no completion", what);
	CHECK(wc.status == want, "%s: %s, not %s", what,
	      ibv_wc_status_str(wc.status), ibv_wc_status_str(want));
}

static void all_are(const uint8_t *p, size_t n, uint8_t v, const char *what)
{
	for (size_t i = 0; i < n; i++)
		CHECK(p[i] == v, "%s: byte %zu is %#x, not %#x", what, i, p[i],
		      v);
}

static void caps(void)
{
	struct ibv_device_attr_ex x;
	const uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
			    IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
			    IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;

	CHECK(!ibv_query_device_ex(ca, NULL, &x), "ibv_query_device_ex");
	CHECK(x.odp_caps.general_caps ==
		      (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT),
	      "general_caps %#llx",
	      (unsigned long long)x.odp_caps.general_caps);
	CHECK(x.odp_caps.per_transport_caps.rc_odp_caps == rc, "rc caps %#x",
	      x.odp_caps.per_transport_caps.rc_odp_caps);
	CHECK(x.odp_caps.per_transport_caps.uc_odp_caps ==
		      (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		       IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV),
	      "uc caps %#x", x.odp_caps.per_transport_caps.uc_odp_caps);
	CHECK(x.odp_caps.per_transport_caps.ud_odp_caps ==
		      (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		       IBV_ODP_SUPPORT_SRQ_RECV),
	      "ud caps %#x", x.odp_caps.per_transport_caps.ud_odp_caps);
	/* XRC: what rdma-core's test_odp_xrc_traffic uses */
	CHECK(x.xrc_odp_caps == (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_SRQ_RECV),
	      "xrc caps %#x", x.xrc_odp_caps);
}

/* Explicit ODP over 4 pages whose middle two are a hole (no access: an
 * unmapped hole would not stay one, the library's own mappings may land
 * in it). */
static void explicit_holes(void)
{
	uint8_t *t, *src;
	struct ibv_mr *mt, *ms, *plain;
	struct vu_ep a, b, a2, b2;

	t = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	src = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(t != MAP_FAILED && src != MAP_FAILED, "memory");
	memset(t, 0x11, 4 * pg);
	memset(src, 0x5a, 4 * pg);
	CHECK(!mprotect(t + pg, 2 * pg, PROT_NONE), "mprotect");
	errno = 0;
	plain = ibv_reg_mr(pb, t, 4 * pg, ACC_ALL);
	CHECK(!plain, "a plain MR over a hole registered");
	mt = ibv_reg_mr(pb, t, 4 * pg, ODP);
	CHECK(mt, "an ODP MR over a hole: %s", strerror(errno));
	ms = ibv_reg_mr(pa, src, 4 * pg, ODP);
	CHECK(ms, "ibv_reg_mr ODP: %s", strerror(errno));

	/* the mapped part */
	pair(&a, &b, IBV_QPT_RC);
	post(&a, IBV_WR_RDMA_WRITE, ms->lkey, (uintptr_t)src, (uint32_t)pg,
	     (uintptr_t)t, mt->rkey, 0);
	wc_is(a.scq, IBV_WC_SUCCESS, "WRITE into the mapped page");
	all_are(t, pg, 0x5a, "the mapped page");
	/* from the mapped page into the hole: fails (what landed before
	 * the hole is undefined, as for any failed WRITE); nothing past it */
	post(&a, IBV_WR_RDMA_WRITE, ms->lkey, (uintptr_t)src, 256,
	     (uintptr_t)t + pg - 128, mt->rkey, 0);
	wc_is(a.scq, IBV_WC_REM_ACCESS_ERR, "WRITE into the hole");
	all_are(t + 3 * pg, pg, 0x11, "the page after the hole");
	unpair(&a, &b);

	/* memory that appears after registration */
	CHECK(mmap(t + pg, 2 * pg, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == t + pg,
	      "map the hole");
	pair(&a, &b, IBV_QPT_RC);
	post(&a, IBV_WR_RDMA_WRITE, ms->lkey, (uintptr_t)src, (uint32_t)pg,
	     (uintptr_t)t + 2 * pg - 128, mt->rkey, 0);
	wc_is(a.scq, IBV_WC_SUCCESS, "WRITE into the hole, mapped since");
	all_are(t + 2 * pg - 128, pg, 0x5a, "the pages mapped since");
	unpair(&a, &b);

	/* a page unmapped after registration, and a local piece unmapped
	 * (the QPs made, and a SEND run, first: nothing maps between munmap
	 * and post, not even what a first SEND maps of its peer) */
	pair(&a, &b, IBV_QPT_RC);
	pair(&a2, &b2, IBV_QPT_RC);
	recv_on(&b2, mt->lkey, (uintptr_t)t, (uint32_t)pg);
	post(&a2, IBV_WR_SEND, ms->lkey, (uintptr_t)src, 64, 0, 0, 0);
	wc_is(a2.scq, IBV_WC_SUCCESS, "a SEND before the munmap");
	wc_is(b2.rcq, IBV_WC_SUCCESS, "its receive");
	recv_on(&b2, mt->lkey, (uintptr_t)t, (uint32_t)pg);
	CHECK(!munmap(t + 3 * pg, pg) && !munmap(src + pg, pg), "munmap");
	post(&a, IBV_WR_RDMA_WRITE, ms->lkey, (uintptr_t)src, 64,
	     (uintptr_t)t + 3 * pg, mt->rkey, 0);
	post(&a2, IBV_WR_SEND, ms->lkey, (uintptr_t)src + pg, 64, 0, 0, 0);
	wc_is(a.scq, IBV_WC_REM_ACCESS_ERR, "WRITE into a page unmapped since");
	wc_is(a2.scq, IBV_WC_LOC_PROT_ERR, "SEND from a page unmapped since");
	all_are(t + 2 * pg - 128, pg, 0x5a, "the bytes before it");
	unpair(&a, &b);
	unpair(&a2, &b2);
	CHECK(!mprotect(t + 2 * pg, pg, PROT_NONE), "mprotect");

	/* ibv_advise_mr */
	{
		struct ibv_sge ok = { (uintptr_t)t, (uint32_t)pg, mt->lkey };
		struct ibv_sge hole = { (uintptr_t)t + 2 * pg, (uint32_t)pg,
					mt->lkey };
		struct ibv_sge past = { (uintptr_t)t + 3 * pg, 2 * (uint32_t)pg,
					mt->lkey };
		struct ibv_mr *pm = ibv_reg_mr(pb, t, (size_t)pg, ACC_ALL);
		struct ibv_sge notodp = { (uintptr_t)t, 64, 0 };
		struct ibv_sge foreign = { (uintptr_t)src, 64, ms->lkey };

		CHECK(pm, "a plain MR");
		notodp.lkey = pm->lkey;
		CHECK(!ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH,
				     IBV_ADVISE_MR_FLAG_FLUSH, &ok, 1),
		      "prefetch, flush");
		CHECK(!ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				     IBV_ADVISE_MR_FLAG_FLUSH, &ok, 1),
		      "prefetch-write, flush");
		CHECK(!ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0,
				     &ok, 1), "prefetch-write");
		CHECK(!ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
				     IBV_ADVISE_MR_FLAG_FLUSH, &hole, 1),
		      "no-fault prefetch of a hole");
		CHECK(!ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH, 0,
				     &hole, 1), "prefetch of a hole, no flush");
		CHECK(ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH,
				    IBV_ADVISE_MR_FLAG_FLUSH, &hole, 1) ==
			      EFAULT, "prefetch of a hole, flush");
		CHECK(ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &past,
				    1) == EFAULT, "a range past the MR");
		CHECK(ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH, 0,
				    &notodp, 1) == ENOENT, "a plain MR");
		CHECK(ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH, 0,
				    &foreign, 1) == ENOENT,
		      "another context's MR");
		CHECK(ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, &ok,
				    1) == EINVAL, "unknown flags");
		CHECK(ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &ok,
				    0) == EINVAL, "no SGE");
		CHECK(ibv_advise_mr(pb, (enum ibv_advise_mr_advice)7, 0, &ok,
				    1) == EOPNOTSUPP, "unknown advice");
		CHECK(!ibv_dereg_mr(pm), "ibv_dereg_mr");
	}
	CHECK(!ibv_dereg_mr(mt) && !ibv_dereg_mr(ms), "ibv_dereg_mr");
	munmap(t, 3 * pg);
	munmap(src, 4 * pg);
	printf("PASS: odp: holes, pages mapped and unmapped after "
	       "registration, ibv_advise_mr\n");
}

/* Implicit ODP on b: every address of b through one key. */
static void implicit(void)
{
	uint64_t *word = aligned_alloc(8, 64), *res = aligned_alloc(8, 64);
	uint8_t *tb = malloc(8192), *sa = malloc(8192), *gone;
	struct ibv_mr *imp, *ms;
	struct vu_ep a, b;

	CHECK(word && res && tb && sa, "memory");
	memset(tb, 0, 8192);
	memset(sa, 0x6b, 8192);
	*word = 40;
	imp = ibv_reg_mr(pb, NULL, SIZE_MAX, ODP);
	CHECK(imp, "implicit ODP MR: %s", strerror(errno));
	CHECK(imp->length == SIZE_MAX && !imp->addr, "implicit MR's fields");
	ms = ibv_reg_mr(pa, sa, 8192, ODP);
	CHECK(ms, "ibv_reg_mr");
	{
		struct ibv_sge s = { (uintptr_t)tb, 8192, imp->lkey };

		CHECK(!ibv_advise_mr(pb, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				     IBV_ADVISE_MR_FLAG_FLUSH, &s, 1),
		      "prefetch through the implicit MR");
	}
	pair(&a, &b, IBV_QPT_RC);
	post(&a, IBV_WR_RDMA_WRITE, ms->lkey, (uintptr_t)sa, 8192,
	     (uintptr_t)tb, imp->rkey, 0);
	wc_is(a.scq, IBV_WC_SUCCESS, "WRITE through the implicit MR");
	all_are(tb, 8192, 0x6b, "the implicit WRITE");
	memset(tb, 0x3c, 4096);
	post(&a, IBV_WR_RDMA_READ, ms->lkey, (uintptr_t)sa, 4096,
	     (uintptr_t)tb, imp->rkey, 0);
	wc_is(a.scq, IBV_WC_SUCCESS, "READ through the implicit MR");
	all_are(sa, 4096, 0x3c, "the implicit READ");
	post(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, ms->lkey, (uintptr_t)sa, 8,
	     (uintptr_t)word, imp->rkey, 2);
	wc_is(a.scq, IBV_WC_SUCCESS, "FETCH_ADD through the implicit MR");
	CHECK(*word == 42, "the word is %llu", (unsigned long long)*word);
	recv_on(&b, imp->lkey, (uintptr_t)res, 64);
	post(&a, IBV_WR_SEND, ms->lkey, (uintptr_t)sa, 64, 0, 0, 0);
	wc_is(a.scq, IBV_WC_SUCCESS, "SEND");
	wc_is(b.rcq, IBV_WC_SUCCESS, "a receive through the implicit MR");
	/* what the FETCH_ADD returned into sa, then what the READ put */
	CHECK(res[0] == 40, "received %llu", (unsigned long long)res[0]);
	all_are((uint8_t *)res + 8, 56, 0x3c, "the received bytes");
	unpair(&a, &b);

	pair(&a, &b, IBV_QPT_RC);
	gone = mmap(NULL, pg, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(gone != MAP_FAILED && !munmap(gone, pg), "a hole");
	post(&a, IBV_WR_RDMA_WRITE, ms->lkey, (uintptr_t)sa, 64,
	     (uintptr_t)gone, imp->rkey, 0);
	wc_is(a.scq, IBV_WC_REM_ACCESS_ERR, "WRITE to an unmapped address");
	unpair(&a, &b);
	CHECK(!ibv_dereg_mr(imp) && !ibv_dereg_mr(ms), "ibv_dereg_mr");
	free(word);
	free(res);
	free(tb);
	free(sa);
	printf("PASS: odp: implicit MR: WRITE, READ, FETCH_ADD, receive, an "
	       "unmapped address\n");
}

/* A SEND of type t from a's ODP memory into b's, the receive posted on
 * b's QP or (srq) on an SRQ of b's; UD receives carry the GRH first. */
static void send_into(enum ibv_qp_type t, bool srq)
{
	uint8_t *s = malloc(4096), *r = malloc(4096);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct vu_qp_caps caps = { .send_wr = 8, .recv_wr = 8, .cqe = 32 };
	struct vu_conn c = vu_conn_default();
	struct ibv_srq *q = NULL;
	struct ibv_mr *ms, *mr;
	struct ibv_ah *ah = NULL;
	struct vu_ep a, b;
	uint32_t grh = t == IBV_QPT_UD ? 40 : 0;
	const char *what = t == IBV_QPT_UD ? (srq ? "UD into an SRQ" : "UD") :
					     "UC into an SRQ";

	CHECK(s && r, "memory");
	memset(s, 0x4e, 4096);
	memset(r, 0, 4096);
	ms = ibv_reg_mr(pa, s, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_ON_DEMAND);
	mr = ibv_reg_mr(pb, r, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_ON_DEMAND);
	CHECK(ms && mr, "ibv_reg_mr ODP");
	if (srq) {
		q = ibv_create_srq(pb, &sa);
		CHECK(q, "ibv_create_srq");
	}
	CHECK(!vu_ep_create(&a, ca, pa, t, &caps), "endpoint");
	caps.srq = q;
	CHECK(!vu_ep_create(&b, cb, pb, t, &caps), "endpoint");
	CHECK(!vu_connect_pair(a.qp, b.qp, &c), "connect");
	{
		struct ibv_sge g = { (uintptr_t)r, 1024 + grh, mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 5, .sg_list = &g,
					  .num_sge = 1 }, *bad;

		CHECK(!(srq ? ibv_post_srq_recv(q, &rw, &bad) :
			      ibv_post_recv(b.qp, &rw, &bad)),
		      "%s: post receive", what);
	}
	{
		struct ibv_sge g = { (uintptr_t)s, 1024, ms->lkey };
		struct ibv_send_wr sw = { .wr_id = 6, .sg_list = &g,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		union ibv_gid gid;

		if (t == IBV_QPT_UD) {
			CHECK(!vu_gid(cb, &gid), "gid");
			ah = vu_ah(pa, &gid);
			CHECK(ah, "ibv_create_ah");
			sw.wr.ud.ah = ah;
			sw.wr.ud.remote_qpn = b.qp->qp_num;
			sw.wr.ud.remote_qkey = c.qkey;
		}
		CHECK(!ibv_post_send(a.qp, &sw, &bad), "%s: post send", what);
	}
	wc_is(a.scq, IBV_WC_SUCCESS, what);
	wc_is(b.rcq, IBV_WC_SUCCESS, what);
	all_are(r + grh, 1024, 0x4e, what);
	if (ah)
		ibv_destroy_ah(ah);
	unpair(&a, &b);
	if (q)
		ibv_destroy_srq(q);
	CHECK(!ibv_dereg_mr(ms) && !ibv_dereg_mr(mr), "ibv_dereg_mr");
	free(s);
	free(r);
	printf("PASS: odp: %s\n", what);
}

/* UC WRITE and SEND between ODP MRs. */
static void uc(void)
{
	uint8_t *s = malloc(4096), *t = malloc(4096);
	struct ibv_mr *ms, *mt;
	struct vu_ep a, b;

	CHECK(s && t, "memory");
	memset(s, 0x27, 4096);
	memset(t, 0, 4096);
	ms = ibv_reg_mr(pa, s, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_ON_DEMAND);
	mt = ibv_reg_mr(pb, t, 4096, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE |
					     IBV_ACCESS_ON_DEMAND);
	CHECK(ms && mt, "ibv_reg_mr ODP");
	pair(&a, &b, IBV_QPT_UC);
	post(&a, IBV_WR_RDMA_WRITE, ms->lkey, (uintptr_t)s, 2048,
	     (uintptr_t)t, mt->rkey, 0);
	wc_is(a.scq, IBV_WC_SUCCESS, "UC WRITE");
	recv_on(&b, mt->lkey, (uintptr_t)t + 2048, 2048);
	post(&a, IBV_WR_SEND, ms->lkey, (uintptr_t)s, 2048, 0, 0, 0);
	wc_is(a.scq, IBV_WC_SUCCESS, "UC SEND");
	wc_is(b.rcq, IBV_WC_SUCCESS, "UC receive");
	all_are(t, 4096, 0x27, "UC WRITE and SEND");
	unpair(&a, &b);
	CHECK(!ibv_dereg_mr(ms) && !ibv_dereg_mr(mt), "ibv_dereg_mr");
	free(s);
	free(t);
	printf("PASS: odp: UC WRITE and SEND\n");
}

int main(void)
{
	pg = sysconf(_SC_PAGESIZE);
	ca = vu_open();
	cb = vu_open();
	CHECK(ca && cb, "no sv0");
	pa = ibv_alloc_pd(ca);
	pb = ibv_alloc_pd(cb);
	CHECK(pa && pb, "ibv_alloc_pd");
	caps();
	explicit_holes();
	implicit();
	uc();
	send_into(IBV_QPT_UD, false);
	send_into(IBV_QPT_UD, true);
	send_into(IBV_QPT_UC, true);
	ibv_dealloc_pd(pa);
	ibv_dealloc_pd(pb);
	ibv_close_device(ca);
	ibv_close_device(cb);
	return 0;
}
