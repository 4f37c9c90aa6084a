// SPDX-License-Identifier: MIT
/*
 * The memory-management extensions (issue 6, seeds 002 and 004), end to
 * end, every byte checked:
 *  - fast register over scattered pages (and 16 KiB pages): remote WRITE
 *    and READ land in exactly the right bytes of the right pages, the gap
 *    pages untouched; refused before registration, after invalidation and
 *    with the old key after re-registration; 64 pipelined registrations,
 *    each with its own page list, posted as one list; the fast-register
 *    errors (IBV_WC_LOC_QP_OP_ERR); a page the process cannot access
 *    registers and fails at access;
 *  - both post forms: ibv_exp_post_send with fast registrations among
 *    standard WRs, and ibv_exp_wr_fast_reg_mr in an ibv_qp_ex session;
 *  - local invalidate after an RDMA READ into the same MR: fenced, it
 *    completes after the data landed; unfenced, never a torn READ; an
 *    invalidate on one engine waits for the WRITEs another engine is
 *    copying through the old grant;
 *  - send with invalidate and read with invalidate, and their CQEs;
 *  - memory windows of type 1, 2A and 2B: bind, access inside, outside,
 *    through the wrong QP or PD, invalidation, zero-based windows,
 *    windows dying with their MR's grant, ibv_inc_rkey cycles past the
 *    8-bit wrap, the bind errors;
 *  - block-list MRs of odd block sizes and alignments, registered directly
 *    and by fast register;
 *  - zero-based MRs (ibv_reg_mr_iova with IOVA 0, IBV_ACCESS_ZERO_BASED,
 *    fast register);
 *  - the operations per QP type (UD, UC);
 *  - the capabilities; random keys against live MRs and windows of every
 *    kind and state, 2000 draws through the verbs (the 10^6 draws against
 *    the key table are tests/unit's).
 *
 * Two contexts of this process (two clients of the daemon): A is the
 * requester, B owns the memory the tests register. Each side has a 4 MiB
 * buffer registered once (regular MR, every right, MW_BIND on B's) and a
 * shadow copy holding what every byte must be; after every operation the
 * whole buffer is compared with its shadow. A remote access error puts
 * both QPs of a connection in the error state: the helpers take them to
 * RESET and reconnect them.
 *
 * Run under tests/e2e/isolated.sh (a daemon of its own).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <softverbs/softverbs.h>

#include "vu.h"

#define PAGE        4096u
#define BUF_PAGES   1024u
#define BUF_LEN     ((size_t)BUF_PAGES * PAGE)   /* each side: 4 MiB */
#define MAX_SEG     264
#define WATCHDOG_S  100

/* A's buffer: sources of WRITEs and SENDs, sinks of READs, receives, pages
 * for A's own fast-register MRs */
#define A_SRC       0u
#define A_DST       (1u << 20 | 7u)
#define A_RECV      (3u << 20 | 11u)
#define A_FR_PAGE   512u          /* pages 512.. 767 */
/* B's buffer: receives, windows, blocks; pages for fast-register MRs */
#define B_RECV      (1u << 20 | 5u)
#define B_WIN       (2u << 20)
#define B_BLOCKS    (3u << 20 | 3u)

#define RW          (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | \
		     IBV_ACCESS_REMOTE_WRITE)
#define ALL_REMOTE  (RW | IBV_ACCESS_REMOTE_ATOMIC)

/* One side: a context, a PD, a buffer, its regular MR and its shadow. */
struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t *buf, *shadow;
	struct ibv_mr *mr;
};

/* A connection: a on A (A's PD), b on B (the PD it was made with). xa, xb:
 * their ibv_qp_ex, when made by ibv_create_qp_ex. */
struct link {
	const char *name;
	struct vu_ep a, b;
	struct ibv_qp_ex *xa, *xb;
};

/* How the bytes of an MR or window lie in a side's buffer: segments
 * (pages, blocks, or one range), the MR's bytes starting fbo bytes into
 * the first; addressed from iova. */
struct layout {
	struct side *side;
	unsigned int n;
	size_t off[MAX_SEG];
	uint64_t len[MAX_SEG];
	uint64_t fbo, length, iova;
};

static struct side A = { .name = "A" }, B = { .name = "B" };
static struct ibv_pd *pd_b2;       /* another PD of B */
/* L1, L2: B's QP in B's PD; L3: B's QP in pd_b2 */
static struct link L1 = { .name = "L1" }, L2 = { .name = "L2" },
		   L3 = { .name = "L3" };
static struct vu_conn conn;
static uint64_t next_id = 1000;
static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static int max_fr_list;

/* ---------------------------------------------------------------- util */

static void watchdog_fired(int sig)
{
	static const char m[] = "test_mm: watchdog: a test did not finish in "
				"time\n";

	(void)sig;
	if (write(STDERR_FILENO, m, sizeof(m) - 1) < 0)
		_exit(2);
	_exit(1);
}

static uint64_t rnd(void)
{
	uint64_t x = rnd_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rnd_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

static void fill_rnd(uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v = rnd();

		memcpy(p + i, &v, 8);
	}
	for (; i < len; i++)
		p[i] = (uint8_t)rnd();
}

/* Fresh random bytes at s->buf[off, off + len) (and in the shadow). */
static void fresh(struct side *s, size_t off, size_t len)
{
	fill_rnd(s->buf + off, len);
	memcpy(s->shadow + off, s->buf + off, len);
}

static void shuffle(size_t *v, unsigned int n)
{
	for (unsigned int i = n; i > 1; i--) {
		unsigned int j = (unsigned int)(rnd() % i);
		size_t t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

/* Every byte of the side's buffer is what its shadow says. */
static void side_check(const struct side *s, const char *what)
{
	size_t first = SIZE_MAX, last = 0, n = 0;

	if (!memcmp(s->buf, s->shadow, BUF_LEN))
		return;
	for (size_t i = 0; i < BUF_LEN; i++)
		if (s->buf[i] != s->shadow[i]) {
			if (first == SIZE_MAX)
				first = i;
			last = i;
			n++;
		}
	fail_msg("%s: %zu bytes of %s's buffer are wrong, from offset %zu "
		 "(page %zu) to %zu (page %zu); first: 0x%02x, wanted 0x%02x",
		 what, n, s->name, first, first / PAGE, last, last / PAGE,
		 s->buf[first], s->shadow[first]);
}

static void check_both(const char *what)
{
	side_check(&A, what);
	side_check(&B, what);
}

static uint64_t addr_of(const struct side *s, size_t off)
{
	return (uint64_t)(uintptr_t)(s->buf + off);
}

static const char *st_str(enum ibv_wc_status st)
{
	return ibv_wc_status_str(st);
}

/* ------------------------------------------------------------- layouts */

static void lay_range(struct layout *L, struct side *s, size_t off,
		      uint64_t len, uint64_t iova)
{
	memset(L, 0, sizeof(*L));
	L->side = s;
	L->n = 1;
	L->off[0] = off;
	L->len[0] = len;
	L->length = len;
	L->iova = iova;
}

/* n pages of psize at the page offsets given, the MR's bytes from fbo,
 * length of them. */
static void lay_pages(struct layout *L, struct side *s, const size_t *offs,
		      unsigned int n, uint64_t psize, uint64_t fbo,
		      uint64_t length, uint64_t iova)
{
	assert_true(n <= MAX_SEG);
	memset(L, 0, sizeof(*L));
	L->side = s;
	L->n = n;
	for (unsigned int i = 0; i < n; i++) {
		L->off[i] = offs[i];
		L->len[i] = psize;
	}
	L->fbo = fbo;
	L->length = length;
	L->iova = iova;
}

/* Copy the MR's bytes [o, o + len) from (store: into) the shadow, or from
 * the real buffer (real). */
static void lay_copy_at(const struct layout *L, uint64_t o, uint8_t *data,
			uint64_t len, bool store, bool real)
{
	uint64_t x = L->fbo + o;
	unsigned int i = 0;

	assert_true(o + len <= L->length);
	while (len) {
		uint64_t k;
		uint8_t *p;

		assert_true(i < L->n);
		if (x >= L->len[i]) {
			x -= L->len[i++];
			continue;
		}
		k = L->len[i] - x < len ? L->len[i] - x : len;
		p = (real ? L->side->buf : L->side->shadow) + L->off[i] + x;
		if (store)
			memcpy(p, data, k);
		else
			memcpy(data, p, k);
		data += k;
		len -= k;
		x = 0;
		i++;
	}
}

static void lay_copy(const struct layout *L, uint64_t o, uint8_t *data,
		     uint64_t len, bool store)
{
	lay_copy_at(L, o, data, len, store, false);
}

/* The MR's bytes [o, o + len) hold new content in the real buffer (as
 * `want` says) or still the old (the shadow): 1 new, 0 old, -1 neither. */
static int lay_old_or_new(const struct layout *L, uint64_t o,
			  const uint8_t *want, uint64_t len)
{
	uint64_t x = L->fbo + o;
	unsigned int i = 0;
	bool is_new = true, is_old = true;

	while (len) {
		uint64_t k;
		size_t at;

		if (x >= L->len[i]) {
			x -= L->len[i++];
			continue;
		}
		k = L->len[i] - x < len ? L->len[i] - x : len;
		at = L->off[i] + x;
		if (memcmp(L->side->buf + at, want, k))
			is_new = false;
		if (memcmp(L->side->buf + at, L->side->shadow + at, k))
			is_old = false;
		want += k;
		len -= k;
		x = 0;
		i++;
	}
	return is_new ? 1 : is_old ? 0 : -1;
}

/* ---------------------------------------------------- completions, QPs */

static struct ibv_wc wait_wc(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	if (vu_poll(cq, &wc, 1, VU_WAIT_MS) != 1)
		fail_msg("%s: no completion within %d ms", what, VU_WAIT_MS);
	return wc;
}

/* The next completion of cq is wr_id with status st (and, on success,
 * opcode op unless op < 0). */
static struct ibv_wc expect_wc(struct ibv_cq *cq, uint64_t wr_id,
			       enum ibv_wc_status st, int op,
			       const char *what)
{
	struct ibv_wc wc = wait_wc(cq, what);

	if (wc.wr_id != wr_id || wc.status != st ||
	    (st == IBV_WC_SUCCESS && op >= 0 && (int)wc.opcode != op))
		fail_msg("%s: completion wr_id %" PRIu64 " %s opcode %d; "
			 "wanted wr_id %" PRIu64 " %s opcode %d", what,
			 wc.wr_id, st_str(wc.status), wc.opcode, wr_id,
			 st_str(st), op);
	return wc;
}

static void expect_no_wc(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(cq, 1, &wc);

	if (n != 0)
		fail_msg("%s: unexpected completion (n %d, wr_id %" PRIu64
			 ", %s)", what, n, wc.wr_id, st_str(wc.status));
}

static void drain_cq(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];

	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
}

static void drain_events(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	while (vu_async_event(ctx, &ev, 0) == 0)
		;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	int s = vu_qp_state(qp);

	assert_true(s >= 0);
	return (enum ibv_qp_state)s;
}

static void wait_state(struct ibv_qp *qp, enum ibv_qp_state want,
		       const char *what)
{
	long end = vu_now_ms() + VU_WAIT_MS;
	enum ibv_qp_state s;

	while ((s = qp_state(qp)) != want) {
		if (vu_now_ms() > end)
			fail_msg("%s: QP %u in state %d, wanted %d", what,
				 qp->qp_num, s, want);
		vu_sleep_ms(1);
	}
}

static struct ibv_qp *make_qp(struct vu_ep *ep, struct ibv_pd *pd, bool ex,
			      enum ibv_qp_type type)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = ep->scq, .recv_cq = ep->rcq, .qp_type = type,
		.cap = { .max_send_wr = 256, .max_recv_wr = 64,
			 .max_send_sge = 2, .max_recv_sge = 2 },
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};

	if (ex) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = IBV_QP_EX_WITH_SEND |
				    IBV_QP_EX_WITH_RDMA_WRITE |
				    IBV_QP_EX_WITH_RDMA_READ |
				    IBV_QP_EX_WITH_LOCAL_INV |
				    IBV_QP_EX_WITH_BIND_MW |
				    IBV_QP_EX_WITH_SEND_WITH_INV;
	}
	return ibv_create_qp_ex(pd->context, &ia);
}

/* An endpoint on side s in pd (a QP of its own CQs). 0 or -1. */
static int ep_make(struct vu_ep *ep, struct side *s, struct ibv_pd *pd,
		   bool ex, enum ibv_qp_type type)
{
	memset(ep, 0, sizeof(*ep));
	ep->ctx = s->ctx;
	ep->pd = pd;
	ep->scq = ibv_create_cq(s->ctx, 1024, NULL, NULL, 0);
	ep->rcq = ibv_create_cq(s->ctx, 1024, NULL, NULL, 0);
	ep->own_scq = ep->own_rcq = true;
	if (!ep->scq || !ep->rcq)
		return -1;
	ep->qp = make_qp(ep, pd, ex, type);
	if (!ep->qp) {
		fprintf(stderr, "test_mm: ibv_create_qp_ex%s: %s\n",
			ex ? " (send_ops_flags)" : "", strerror(errno));
		return -1;
	}
	return 0;
}

static int link_open(struct link *l, struct ibv_pd *bpd, bool ex)
{
	if (ep_make(&l->a, &A, A.pd, ex, IBV_QPT_RC) ||
	    ep_make(&l->b, &B, bpd, ex, IBV_QPT_RC))
		return -1;
	if (ex) {
		l->xa = ibv_qp_to_qp_ex(l->a.qp);
		l->xb = ibv_qp_to_qp_ex(l->b.qp);
		if (!l->xa || !l->xb)
			return -1;
	}
	return vu_connect_pair(l->a.qp, l->b.qp, &conn) ? -1 : 0;
}

static void link_close(struct link *l)
{
	vu_ep_destroy(&l->a);
	vu_ep_destroy(&l->b);
	l->xa = l->xb = NULL;
}

/* Both QPs to RESET, their CQs and the async events drained, connected
 * again. */
static void link_recover(struct link *l)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	assert_int_equal(ibv_modify_qp(l->a.qp, &a, IBV_QP_STATE), 0);
	assert_int_equal(ibv_modify_qp(l->b.qp, &a, IBV_QP_STATE), 0);
	drain_cq(l->a.scq);
	drain_cq(l->a.rcq);
	drain_cq(l->b.scq);
	drain_cq(l->b.rcq);
	drain_events(A.ctx);
	drain_events(B.ctx);
	assert_int_equal(vu_connect_pair(l->a.qp, l->b.qp, &conn), 0);
}

/* After an error completion on one of l's QPs: a remote access error
 * leaves the responder (b) in ERR as well; then both are reconnected. */
static void after_error(struct link *l, enum ibv_wc_status st,
			const char *what)
{
	if (st == IBV_WC_REM_ACCESS_ERR)
		wait_state(l->b.qp, IBV_QPS_ERR, what);
	link_recover(l);
}

/* A post (fn) that must succeed: ret its return, bad_id the wr_id of its
 * bad WR. */
static void posted(const char *fn, int ret, uint64_t bad_id)
{
	if (ret)
		fail_msg("%s: %s (wr_id %" PRIu64 ")", fn, strerror(ret),
			 bad_id);
}

static void post_send_ok(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;

	posted("ibv_post_send", ibv_post_send(qp, wr, &bad),
	       bad ? bad->wr_id : 0);
}

static void exp_post_ok(struct ibv_qp *qp, struct ibv_exp_send_wr *wr)
{
	struct ibv_exp_send_wr *bad = NULL;

	posted("ibv_exp_post_send", ibv_exp_post_send(qp, wr, &bad),
	       bad ? bad->wr_id : 0);
}

static void post_recv(struct ibv_qp *qp, uint64_t id, struct side *s,
		      size_t off, uint32_t len, uint32_t lkey, uint64_t addr)
{
	struct ibv_sge sge = { addr ? addr : addr_of(s, off), len, lkey };
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	assert_int_equal(ibv_post_recv(qp, &wr, &bad), 0);
}

/* A signaled WR of opcode op with one SGE {addr, len, lkey}, towards
 * raddr/rkey (RDMA operations; 0 for the others). */
static void wr_one(struct ibv_send_wr *wr, struct ibv_sge *sge, uint64_t id,
		   enum ibv_wr_opcode op, uint64_t addr, uint32_t len,
		   uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	*sge = (struct ibv_sge){ addr, len, lkey };
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = op;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
}

/* The same for ibv_exp_post_send; no SGE when sge is NULL. */
static void exp_wr_one(struct ibv_exp_send_wr *wr, struct ibv_sge *sge,
		       uint64_t id, enum ibv_exp_wr_opcode op, uint64_t addr,
		       uint32_t len, uint32_t lkey, uint64_t raddr,
		       uint32_t rkey)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = id;
	wr->exp_opcode = op;
	wr->exp_send_flags = IBV_SEND_SIGNALED;
	if (sge) {
		*sge = (struct ibv_sge){ addr, len, lkey };
		wr->sg_list = sge;
		wr->num_sge = 1;
	}
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
}

/* A signaled LOCAL_INV of key (flags: more send flags). */
static void inv_wr(struct ibv_send_wr *wr, uint64_t id, uint32_t key,
		   unsigned int flags)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = id;
	wr->opcode = IBV_WR_LOCAL_INV;
	wr->send_flags = IBV_SEND_SIGNALED | flags;
	wr->invalidate_rkey = key;
}

static void bind_info_set(struct ibv_mw_bind_info *bi, struct ibv_mr *mr,
			  uint64_t addr, uint64_t len, unsigned int access)
{
	memset(bi, 0, sizeof(*bi));
	bi->mr = mr;
	bi->addr = addr;
	bi->length = len;
	bi->mw_access_flags = access;
}

/* A signaled BIND_MW of mw (type 2) with rkey over [addr, addr + len) of
 * mr. */
static void bind_wr(struct ibv_send_wr *wr, uint64_t id, struct ibv_mw *mw,
		    uint32_t rkey, struct ibv_mr *mr, uint64_t addr,
		    uint64_t len, unsigned int access)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = id;
	wr->opcode = IBV_WR_BIND_MW;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	bind_info_set(&wr->bind_mw.bind_info, mr, addr, len, access);
}

/* A WR that must fail: refused at post (ret, the post's return: EINVAL),
 * or posted (ret 0) and completed on ep, one of l's QPs, with st; then l
 * is recovered. ret. */
static int post_refused(struct link *l, struct vu_ep *ep, int ret,
			uint64_t id, enum ibv_wc_status st, const char *what)
{
	if (ret) {
		assert_int_equal(ret, EINVAL);
		return ret;
	}
	expect_wc(ep->scq, id, st, -1, what);
	after_error(l, st, what);
	return 0;
}

/* --------------------------------------------------------- remote ops */

/* One signaled RDMA WRITE or READ from l->a, between A's buffer at a_off
 * and raddr/rkey: its completion status (the link recovered after an
 * error). */
static enum ibv_wc_status rdma(struct link *l, enum ibv_wr_opcode op,
			       size_t a_off, uint32_t len, uint64_t raddr,
			       uint32_t rkey)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr;
	struct ibv_wc wc;
	char what[128];

	wr_one(&wr, &sge, ++next_id, op, addr_of(&A, a_off), len, A.mr->lkey,
	       raddr, rkey);
	snprintf(what, sizeof(what), "%s %s %u bytes at 0x%" PRIx64
		 " key 0x%08x", l->name, vu_opcode_str(op), len, raddr, rkey);
	post_send_ok(l->a.qp, &wr);
	wc = wait_wc(l->a.scq, what);
	if (wc.wr_id != wr.wr_id)
		fail_msg("%s: completion of wr_id %" PRIu64, what, wc.wr_id);
	if (wc.status == IBV_WC_SUCCESS)
		assert_int_equal(wc.opcode, op == IBV_WR_RDMA_READ ?
				 IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE);
	else
		after_error(l, wc.status, what);
	return wc.status;
}

/* A WRITE of fresh bytes from A through L (key rkey) at MR offset o:
 * they land exactly there, nothing else changes; a READ of the MR's bytes
 * [o, o + len) into A: they are what they must be. */
static void rdma_ok(struct link *l, enum ibv_wr_opcode op,
		    const struct layout *L, uint32_t rkey, uint64_t o,
		    uint32_t len, const char *what)
{
	const bool rd = op == IBV_WR_RDMA_READ;
	const size_t a_off = rd ? A_DST : A_SRC;
	enum ibv_wc_status st;
	char w[160];

	fresh(&A, a_off, len);
	st = rdma(l, op, a_off, len, L->iova + o, rkey);
	snprintf(w, sizeof(w), "%s: %s of %u bytes at offset %" PRIu64
		 " (of %" PRIu64 ") through %s", what, rd ? "READ" : "WRITE",
		 len, o, L->length, l->name);
	if (st != IBV_WC_SUCCESS)
		fail_msg("%s: %s", w, st_str(st));
	lay_copy(L, o, A.shadow + a_off, len, !rd);
	check_both(w);
}

static void write_ok(struct link *l, const struct layout *L, uint32_t rkey,
		     uint64_t o, uint32_t len, const char *what)
{
	rdma_ok(l, IBV_WR_RDMA_WRITE, L, rkey, o, len, what);
}

static void read_ok(struct link *l, const struct layout *L, uint32_t rkey,
		    uint64_t o, uint32_t len, const char *what)
{
	rdma_ok(l, IBV_WR_RDMA_READ, L, rkey, o, len, what);
}

/* A signaled RDMA op on ep (one of l's QPs) between the local bytes
 * [laddr, laddr + len) of lkey and the peer's regular MR at poff, which
 * lkey cannot serve: the local protection error, l recovered, not a byte
 * moved. */
static void local_prot_err(struct link *l, struct vu_ep *ep,
			   enum ibv_wr_opcode op, uint64_t laddr, uint32_t len,
			   uint32_t lkey, size_t poff, const char *what)
{
	struct side *peer = ep == &l->a ? &B : &A;
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	wr_one(&wr, &sge, ++next_id, op, laddr, len, lkey,
	       addr_of(peer, poff), peer->mr->rkey);
	post_send_ok(ep->qp, &wr);
	expect_wc(ep->scq, wr.wr_id, IBV_WC_LOC_PROT_ERR, -1, what);
	after_error(l, IBV_WC_LOC_PROT_ERR, what);
	check_both(what);
}

/* A SEND of n fresh bytes from L1's A QP into a receive of rlen bytes on
 * L1's B QP through lkey at offset o of L: they land there. */
static void send_into(const struct layout *L, uint32_t lkey, uint64_t o,
		      uint32_t rlen, uint32_t n, const char *what)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;

	post_recv(L1.b.qp, ++next_id, &B, 0, rlen, lkey, L->iova + o);
	fresh(&A, A_SRC, n);
	wr_one(&wr, &sge, ++next_id, IBV_WR_SEND, addr_of(&A, A_SRC), n,
	       A.mr->lkey, 0, 0);
	post_send_ok(L1.a.qp, &wr);
	expect_wc(L1.a.scq, wr.wr_id, IBV_WC_SUCCESS, IBV_WC_SEND, what);
	wc = expect_wc(L1.b.rcq, wr.wr_id - 1, IBV_WC_SUCCESS, IBV_WC_RECV,
		       what);
	assert_int_equal(wc.byte_len, n);
	lay_copy(L, o, A.shadow + A_SRC, n, true);
	check_both(what);
}

/* A WRITE and a READ at raddr/rkey are both refused with the remote access
 * error; no byte changes on either side. */
static void refused(struct link *l, uint64_t raddr, uint32_t rkey,
		    uint32_t len, const char *what)
{
	static const enum ibv_wr_opcode ops[2] = { IBV_WR_RDMA_WRITE,
						   IBV_WR_RDMA_READ };

	for (int k = 0; k < 2; k++) {
		enum ibv_wc_status st;

		fresh(&A, k ? A_DST : A_SRC, len);
		st = rdma(l, ops[k], k ? A_DST : A_SRC, len, raddr, rkey);
		if (st != IBV_WC_REM_ACCESS_ERR)
			fail_msg("%s: %s of %u bytes at 0x%" PRIx64 " key "
				 "0x%08x through %s: %s, wanted the remote "
				 "access error", what, vu_opcode_str(ops[k]),
				 len, raddr, rkey, l->name, st_str(st));
		check_both(what);
	}
}

/* ---------------------------------------------------- fast registration */

/* A page list of n entries on side s (a list is its context's). */
static struct ibv_exp_fast_reg_page_list *pl_on(struct side *s, int n)
{
	struct ibv_exp_fast_reg_page_list *pl =
		ibv_exp_alloc_fast_reg_page_list(s->ctx, n);

	if (!pl)
		fail_msg("ibv_exp_alloc_fast_reg_page_list(%d): %s", n,
			 strerror(errno));
	assert_non_null(pl->page_list);
	assert_true(pl->max_page_list_len >= (unsigned int)n);
	assert_ptr_equal(pl->context, s->ctx);
	return pl;
}

static struct ibv_exp_fast_reg_page_list *pl_new(int n)
{
	return pl_on(&B, n);
}

static struct ibv_mr *frmr_new(struct ibv_pd *pd, int n)
{
	struct ibv_mr *mr = ibv_exp_alloc_fast_reg_mr(pd, n);

	if (!mr)
		fail_msg("ibv_exp_alloc_fast_reg_mr(%d): %s", n,
			 strerror(errno));
	assert_int_equal(mr->lkey, mr->rkey);
	return mr;
}

static void frmr_free(struct ibv_mr *mr,
		      struct ibv_exp_fast_reg_page_list *pl)
{
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_exp_free_fast_reg_page_list(pl), 0);
}

static void pl_fill(struct ibv_exp_fast_reg_page_list *pl,
		    const struct layout *L, bool blocks)
{
	assert_true(L->n <= pl->max_page_list_len);
	for (unsigned int i = 0; i < L->n; i++) {
		if (blocks) {
			pl->blocks[i].addr = addr_of(L->side, L->off[i]);
			pl->blocks[i].length = L->len[i];
		} else {
			pl->page_list[i] = addr_of(L->side, L->off[i]);
		}
	}
}

/* A fast-register WR for mr over L (page list pl, filled here). */
static void fr_wr(struct ibv_exp_send_wr *wr, uint64_t id, struct ibv_mr *mr,
		  struct ibv_exp_fast_reg_page_list *pl,
		  const struct layout *L, unsigned int psize, int access,
		  uint8_t key, uint32_t flags)
{
	pl_fill(pl, L, flags & IBV_EXP_FAST_REG_BLOCK_LIST);
	exp_wr_one(wr, NULL, id, IBV_EXP_WR_FAST_REG_MR, 0, 0, 0, 0, 0);
	wr->fast_reg = (__typeof__(wr->fast_reg)){
		.mr = mr, .key = key, .page_list = pl, .page_size = psize,
		.page_list_len = L->n,
		.first_byte_offset = (unsigned int)L->fbo,
		.length = L->length, .iova_start = L->iova,
		.access_flags = access, .flags = flags,
	};
}

/* Post the fast-register WR wr on ep's QP (ibv_exp_post_send): the MR's
 * keys are the new at once, the completion is a success of opcode
 * FAST_REG_MR. The new key. */
static uint32_t fast_reg_post(struct vu_ep *ep, struct ibv_exp_send_wr *wr,
			      const char *what)
{
	struct ibv_mr *mr = wr->fast_reg.mr;
	uint32_t want = ibv_exp_update_fast_reg_key(mr->rkey,
						    wr->fast_reg.key);

	exp_post_ok(ep->qp, wr);
	assert_int_equal(mr->lkey, want);
	assert_int_equal(mr->rkey, want);
	expect_wc(ep->scq, wr->wr_id, IBV_WC_SUCCESS, IBV_EXP_WC_FAST_REG_MR,
		  what);
	return want;
}

/* Fast-register mr over L on ep's QP (one WR): the new key. */
static uint32_t fast_reg(struct vu_ep *ep, struct ibv_mr *mr,
			 struct ibv_exp_fast_reg_page_list *pl,
			 const struct layout *L, unsigned int psize,
			 int access, uint8_t key, uint32_t flags)
{
	struct ibv_exp_send_wr wr;

	fr_wr(&wr, ++next_id, mr, pl, L, psize, access, key, flags);
	return fast_reg_post(ep, &wr, "fast register");
}

/* A signaled LOCAL_INV of key on ep's QP (ibv_post_send): its status. */
static enum ibv_wc_status local_inv(struct vu_ep *ep, uint32_t key,
				    unsigned int flags)
{
	struct ibv_send_wr wr;
	struct ibv_wc wc;

	inv_wr(&wr, ++next_id, key, flags);
	post_send_ok(ep->qp, &wr);
	wc = wait_wc(ep->scq, "local invalidate");
	assert_int_equal(wc.wr_id, wr.wr_id);
	if (wc.status == IBV_WC_SUCCESS)
		assert_int_equal(wc.opcode, IBV_WC_LOCAL_INV);
	return wc.status;
}

static void local_inv_ok(struct vu_ep *ep, uint32_t key)
{
	enum ibv_wc_status st = local_inv(ep, key, 0);

	if (st != IBV_WC_SUCCESS)
		fail_msg("LOCAL_INV of 0x%08x: %s", key, st_str(st));
}

/* A LOCAL_INV of key on ep (one of l's QPs) fails: with want, or with any
 * error when want is -1; then l is recovered. */
static void local_inv_fails(struct link *l, struct vu_ep *ep, uint32_t key,
			    int want, const char *what)
{
	enum ibv_wc_status st = local_inv(ep, key, 0);

	if (want < 0 ? st == IBV_WC_SUCCESS : (int)st != want)
		fail_msg("%s: %s", what, st_str(st));
	after_error(l, st, what);
}

/* n distinct random pages among [first, first + count) of the buffer (page
 * offsets in bytes), in random order; every other page when odd. */
static void pick_pages(size_t *offs, unsigned int n, unsigned int first,
		       unsigned int count, bool odd)
{
	size_t pool[BUF_PAGES];
	unsigned int m = 0;

	for (unsigned int p = first; p < first + count; p++)
		if (!odd || (p & 1))
			pool[m++] = (size_t)p * PAGE;
	assert_true(m >= n);
	shuffle(pool, m);
	memcpy(offs, pool, n * sizeof(*offs));
}

/* --------------------------------------------------------------- setup */

static int side_open(struct side *s, int extra_access)
{
	s->ctx = vu_open();
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	s->shadow = malloc(BUF_LEN);
	if (!s->pd || s->buf == MAP_FAILED || !s->shadow)
		return -1;
	fill_rnd(s->buf, BUF_LEN);
	memcpy(s->shadow, s->buf, BUF_LEN);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_LEN, ALL_REMOTE | extra_access);
	if (!s->mr) {
		fprintf(stderr, "test_mm: ibv_reg_mr: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int group_setup(void **state)
{
	struct ibv_exp_device_attr da;

	(void)state;
	signal(SIGALRM, watchdog_fired);
	alarm(WATCHDOG_S);
	conn = vu_conn_default();
	if (side_open(&A, 0) || side_open(&B, IBV_ACCESS_MW_BIND))
		return -1;
	pd_b2 = ibv_alloc_pd(B.ctx);
	if (!pd_b2)
		return -1;
	if (link_open(&L1, B.pd, false) || link_open(&L2, B.pd, false) ||
	    link_open(&L3, pd_b2, false))
		return -1;
	memset(&da, 0, sizeof(da));
	da.comp_mask = IBV_EXP_DEVICE_ATTR_MAX_FAST_REG_PAGE_LIST_LEN;
	if (ibv_exp_query_device(A.ctx, &da) == 0 &&
	    (da.comp_mask & IBV_EXP_DEVICE_ATTR_MAX_FAST_REG_PAGE_LIST_LEN))
		max_fr_list = (int)da.max_fast_reg_page_list_len;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	link_close(&L1);
	link_close(&L2);
	link_close(&L3);
	if (pd_b2)
		ibv_dealloc_pd(pd_b2);
	for (struct side *s = &A; s; s = s == &A ? &B : NULL) {
		if (s->mr)
			ibv_dereg_mr(s->mr);
		if (s->pd)
			ibv_dealloc_pd(s->pd);
		if (s->ctx)
			ibv_close_device(s->ctx);
		if (s->buf && s->buf != MAP_FAILED)
			munmap(s->buf, BUF_LEN);
		free(s->shadow);
	}
	return 0;
}

/* Each test starts with the links connected and the buffers as their
 * shadows say (a test that failed may have left them otherwise). */
static int test_setup(void **state)
{
	struct link *ls[3] = { &L1, &L2, &L3 };

	(void)state;
	alarm(WATCHDOG_S);
	for (int i = 0; i < 3; i++)
		if (qp_state(ls[i]->a.qp) != IBV_QPS_RTS ||
		    qp_state(ls[i]->b.qp) != IBV_QPS_RTS)
			link_recover(ls[i]);
	memcpy(A.shadow, A.buf, BUF_LEN);
	memcpy(B.shadow, B.buf, BUF_LEN);
	return 0;
}

/* -------------------------------------------------------- capabilities */

static void test_caps(void **state)
{
	struct ibv_device_attr attr;
	struct ibv_exp_device_attr da;
	const uint64_t all = IBV_EXP_DEVICE_FAST_REG_USER |
			     IBV_EXP_DEVICE_BLOCK_LIST |
			     IBV_EXP_DEVICE_ZERO_BASED_MR |
			     IBV_EXP_DEVICE_ZERO_BASED_MW |
			     IBV_EXP_DEVICE_READ_WITH_INV |
			     IBV_EXP_DEVICE_SEND_WITH_INV;
	const unsigned int bits[4] = { IBV_DEVICE_MEM_MGT_EXTENSIONS,
				       IBV_DEVICE_MEM_WINDOW,
				       IBV_DEVICE_MEM_WINDOW_TYPE_2A,
				       IBV_DEVICE_MEM_WINDOW_TYPE_2B };
	struct ibv_mr *mr;

	(void)state;
	assert_int_equal(ibv_query_device(A.ctx, &attr), 0);
	for (int i = 0; i < 4; i++)
		if (!(attr.device_cap_flags & bits[i]))
			fail_msg("device_cap_flags 0x%x lacks 0x%x",
				 attr.device_cap_flags, bits[i]);
	assert_true(attr.max_mw > 0);

	/* the extension query: both new fields */
	memset(&da, 0, sizeof(da));
	da.comp_mask = IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS |
		       IBV_EXP_DEVICE_ATTR_MAX_FAST_REG_PAGE_LIST_LEN;
	assert_int_equal(ibv_exp_query_device(A.ctx, &da), 0);
	assert_int_equal(da.comp_mask,
			 IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS |
			 IBV_EXP_DEVICE_ATTR_MAX_FAST_REG_PAGE_LIST_LEN);
	assert_int_equal(da.exp_device_cap_flags & all, all);
	assert_true(da.max_fast_reg_page_list_len >= 64);
	/* one field asked for: only that one written */
	memset(&da, 0xab, sizeof(da));
	da.comp_mask = IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS;
	assert_int_equal(ibv_exp_query_device(A.ctx, &da), 0);
	assert_int_equal(da.comp_mask, IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS);
	assert_int_equal(da.exp_device_cap_flags & all, all);
	assert_int_equal(da.max_fast_reg_page_list_len, 0xabababab);

	/* the limit is the limit: the longest list there is, and no longer */
	mr = ibv_exp_alloc_fast_reg_mr(B.pd, max_fr_list);
	assert_non_null(mr);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	errno = 0;
	assert_null(ibv_exp_alloc_fast_reg_mr(B.pd, max_fr_list + 1));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ibv_exp_alloc_fast_reg_mr(B.pd, 0));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ibv_exp_alloc_fast_reg_page_list(B.ctx, max_fr_list + 1));
	assert_int_not_equal(errno, 0);
	errno = 0;
	assert_null(ibv_exp_alloc_fast_reg_page_list(B.ctx, 0));
	assert_int_not_equal(errno, 0);
}

/* ------------------------------------------------- fast register: pages */

/*
 * A fast-register MR over every other page of B's buffer in shuffled
 * order: refused before registration; WRITE and READ through it land in
 * exactly the right bytes of the right pages; refused after local
 * invalidate; registered again over the same pages in another order with a
 * new key: the old key is refused, the new one lands by the new order.
 */
static void test_fastreg_pages(void **state)
{
	enum { N = 16 };
	const int access = RW;
	struct ibv_exp_fast_reg_page_list *pl = pl_new(N);
	struct ibv_mr *mr = frmr_new(B.pd, N);
	size_t offs[N];
	struct layout L;
	uint32_t k0 = mr->rkey, k1, k2;
	uint64_t len;

	(void)state;
	pick_pages(offs, N, 0, 2 * N, true);
	len = (uint64_t)N * PAGE - 123 - 77;
	lay_pages(&L, &B, offs, N, PAGE, 123, len, 0x10000000000ull + 0x777);

	/* before registration: the key exists, it grants nothing */
	refused(&L1, L.iova, k0, 64, "before registration");
	refused(&L1, L.iova + 5000, k0, 4096, "before registration");

	k1 = fast_reg(&L1.b, mr, pl, &L, PAGE, access, (uint8_t)(k0 + 1), 0);
	assert_int_not_equal(k1, k0);
	write_ok(&L1, &L, k1, 0, (uint32_t)len, "fast reg, all of it");
	write_ok(&L1, &L, k1, 4000, 9000, "fast reg, across 3 pages");
	write_ok(&L1, &L, k1, PAGE - 123, 1, "fast reg, first byte of page 1");
	write_ok(&L1, &L, k1, len - 1, 1, "fast reg, the last byte");
	read_ok(&L1, &L, k1, 0, (uint32_t)len, "fast reg, all of it");
	read_ok(&L1, &L, k1, 3 * PAGE + 11, 2 * PAGE + 7, "fast reg, middle");
	/* through another QP of the PD too: an MR is the PD's */
	write_ok(&L2, &L, k1, 77, 5 * PAGE, "fast reg, another QP");
	/* outside the MR, the old key, another PD's QP */
	refused(&L1, L.iova + len - 8, k1, 16, "past the end");
	refused(&L1, L.iova - 1, k1, 8, "before the start");
	refused(&L1, L.iova, k0, 8, "the key before registration");
	refused(&L3, L.iova, k1, 8, "a QP of another PD");

	/* invalidated: refused, every byte as it was */
	local_inv_ok(&L1.b, k1);
	refused(&L1, L.iova, k1, 64, "after invalidation");
	refused(&L1, L.iova + 3 * PAGE, k1, 4 * PAGE, "after invalidation");

	/* again, the pages in another order, a new key: the old key dead */
	shuffle(offs, N);
	lay_pages(&L, &B, offs, N, PAGE, 0, (uint64_t)N * PAGE,
		  0x20000000000ull);
	k2 = fast_reg(&L1.b, mr, pl, &L, PAGE, access, (uint8_t)(k1 + 0x35),
		      0);
	assert_int_not_equal(k2, k1);
	refused(&L1, L.iova, k1, 64, "the old key after re-registration");
	write_ok(&L1, &L, k2, 0, N * PAGE, "re-registered, all of it");
	read_ok(&L1, &L, k2, PAGE - 3, 9, "re-registered, across a page");

	/* a fast register of a valid MR is an error; the MR stays as it is */
	{
		struct ibv_exp_send_wr wr;

		fr_wr(&wr, ++next_id, mr, pl, &L, PAGE, access,
		      (uint8_t)(k2 + 1), 0);
		exp_post_ok(L1.b.qp, &wr);
		expect_wc(L1.b.scq, wr.wr_id, IBV_WC_LOC_QP_OP_ERR, -1,
			  "fast register of a valid MR");
		after_error(&L1, IBV_WC_LOC_QP_OP_ERR, "fr of a valid MR");
		write_ok(&L1, &L, k2, 100, 100, "still registered");
	}
	local_inv_ok(&L1.b, k2);
	refused(&L1, L.iova, k2, 8, "invalidated again");
	frmr_free(mr, pl);
}

/* 16 KiB pages: a page's 4 KiB quarters land in order. */
static void test_fastreg_big_pages(void **state)
{
	enum { N = 4, PS = 16384 };
	struct ibv_exp_fast_reg_page_list *pl = pl_new(N);
	struct ibv_mr *mr = frmr_new(B.pd, N);
	size_t offs[N], base;
	struct layout L;
	uint32_t k;

	(void)state;
	/* 16 KiB-aligned pages inside B's buffer */
	base = (PS - (addr_of(&B, 0) & (PS - 1))) & (PS - 1);
	for (int i = 0; i < N; i++)
		offs[i] = base + (size_t)(7 - 2 * i) * PS;
	lay_pages(&L, &B, offs, N, PS, 5000, (uint64_t)N * PS - 5000 - 3,
		  0x30000000000ull);
	k = fast_reg(&L1.b, mr, pl, &L, PS, RW, 9, 0);
	write_ok(&L1, &L, k, 0, (uint32_t)L.length, "16 KiB pages");
	read_ok(&L1, &L, k, PS - 5000 - 2, 4, "16 KiB pages, a boundary");
	local_inv_ok(&L1.b, k);
	refused(&L1, L.iova, k, 8, "16 KiB pages, invalidated");
	frmr_free(mr, pl);
}

/*
 * Fast registration does not look at the memory map: an MR over a page the
 * process cannot access registers, and the accesses that touch that page
 * fail (the remote access error for a peer, a local protection error for
 * the owner's own WR); the other page works; nothing crashes.
 */
static void test_fastreg_no_access(void **state)
{
	struct ibv_exp_fast_reg_page_list *pl = pl_new(2);
	struct ibv_mr *mr = frmr_new(B.pd, 2);
	uint8_t *mem = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t shadow[2 * PAGE];
	struct side R = { .name = "R", .buf = mem, .shadow = shadow };
	const size_t offs[2] = { 0, PAGE };
	struct layout L;
	uint32_t k;

	(void)state;
	assert_true(mem != MAP_FAILED);
	memset(mem, 0x5a, 2 * PAGE);
	memcpy(shadow, mem, 2 * PAGE);
	assert_int_equal(mprotect(mem + PAGE, PAGE, PROT_NONE), 0);
	lay_pages(&L, &R, offs, 2, PAGE, 0, 2 * PAGE, 0x13000000000ull);
	k = fast_reg(&L1.b, mr, pl, &L, PAGE, RW, (uint8_t)(mr->rkey + 1), 0);
	write_ok(&L1, &L, k, 10, 100, "the accessible page");
	read_ok(&L1, &L, k, 0, PAGE, "the accessible page");
	assert_memory_equal(mem, shadow, PAGE);
	refused(&L1, L.iova + PAGE + 5, k, 8, "a page without access");
	refused(&L1, L.iova + PAGE, k, PAGE, "a page without access");
	/* B's own WRITE from the page without access */
	local_prot_err(&L1, &L1.b, IBV_WR_RDMA_WRITE, L.iova + PAGE, 8, k,
		       A_DST, "a source page without access");
	assert_memory_equal(mem, shadow, PAGE);
	local_inv_ok(&L1.b, k);
	frmr_free(mr, pl);
	munmap(mem, 2 * PAGE);
}

/*
 * The fast-register errors: each completes with IBV_WC_LOC_QP_OP_ERR (or
 * is refused at post), and the MR stays invalid.
 */
static void test_fastreg_errors(void **state)
{
	enum { N = 4 };
	struct ibv_exp_fast_reg_page_list *pl = pl_new(8);
	struct ibv_mr *mr = frmr_new(B.pd, N);
	struct ibv_mr *other = frmr_new(pd_b2, N);
	size_t offs[8];
	struct layout L;
	const char *what[6] = { "a page not aligned", "fbo past a page",
				"length past the pages", "more pages than the MR",
				"an MR of another PD", "page size 1000" };

	(void)state;
	pick_pages(offs, 8, 64, 64, false);
	for (int c = 0; c < 6; c++) {
		struct ibv_exp_send_wr wr, *bad = NULL;
		unsigned int psize = PAGE;
		struct ibv_mr *m = mr;
		uint32_t before = m->rkey;
		int ret;

		lay_pages(&L, &B, offs, N, PAGE, 0, N * PAGE, 0x1000);
		switch (c) {
		case 0: L.off[2] += 8; break;
		case 1: L.fbo = PAGE; L.length = PAGE; break;
		case 2: L.fbo = 1; break;
		case 3: L.n = N + 1; L.length = (N + 1) * PAGE; break;
		case 4: m = other; before = m->rkey; break;
		case 5: psize = 1000; L.length = 1000; break;
		}
		fr_wr(&wr, ++next_id, m, pl, &L, psize, RW,
		      (uint8_t)(before + 1), 0);
		ret = ibv_exp_post_send(L1.b.qp, &wr, &bad);
		if (post_refused(&L1, &L1.b, ret, wr.wr_id,
				 IBV_WC_LOC_QP_OP_ERR, what[c])) {
			/* refused at post: nothing was posted */
			assert_ptr_equal(bad, &wr);
			print_message("(%s: refused at post)\n", what[c]);
		}
		/* neither the old nor the new key grants anything */
		refused(&L1, 0x1000, before, 8, what[c]);
		refused(&L1, 0x1000, ibv_exp_update_fast_reg_key(
				before, (uint8_t)(before + 1)), 8, what[c]);
	}
	/* LOCAL_INV of what cannot be invalidated: a regular MR, an invalid
	 * fast-register MR, a key that names nothing */
	{
		uint32_t keys[3] = { B.mr->rkey, mr->rkey, B.mr->rkey ^ 0x80 };
		const char *kw[3] = { "LOCAL_INV of a regular MR",
				      "LOCAL_INV of an invalid MR",
				      "LOCAL_INV of nothing" };

		for (int i = 0; i < 3; i++)
			local_inv_fails(&L1, &L1.b, keys[i],
					IBV_WC_LOC_QP_OP_ERR, kw[i]);
		/* the regular MR still works */
		struct layout R;

		lay_range(&R, &B, 0, BUF_LEN, addr_of(&B, 0));
		write_ok(&L1, &R, B.mr->rkey, 12345, 100, "regular MR after");
	}
	assert_int_equal(ibv_dereg_mr(mr), 0);
	frmr_free(other, pl);
}

/*
 * 64 fast registrations posted as one list, each MR over its own page
 * list (1 to 4 scattered pages, odd offsets and lengths); all complete in
 * order; then every MR is written and read through; then all invalidated
 * as one list.
 */
static void test_fastreg_pipelined(void **state)
{
	enum { M = 64, MAXP = 4 };
	struct ibv_exp_fast_reg_page_list *pl[M];
	struct ibv_exp_send_wr wr[M];
	struct ibv_send_wr iw[M];
	struct ibv_mr *mr[M];
	struct layout L[M];
	uint32_t key[M];
	size_t pages[M * MAXP];
	unsigned int used = 0;

	(void)state;
	pick_pages(pages, M * MAXP, 256, 512, false);
	for (int i = 0; i < M; i++) {
		unsigned int n = 1 + (unsigned int)i % MAXP;
		uint64_t fbo = (uint64_t)(i * 37) % PAGE;
		uint64_t len = (uint64_t)n * PAGE - fbo - (uint64_t)(i * 13) % 100;

		pl[i] = pl_new(MAXP);
		mr[i] = frmr_new(B.pd, MAXP);
		lay_pages(&L[i], &B, pages + used, n, PAGE, fbo, len,
			  0x4000000000ull + (uint64_t)i * 0x100000 + (uint64_t)i);
		used += n;
		fr_wr(&wr[i], (uint64_t)i, mr[i], pl[i], &L[i], PAGE, RW,
		      (uint8_t)(mr[i]->rkey + 1 + i), 0);
		key[i] = ibv_exp_update_fast_reg_key(mr[i]->rkey,
						     (uint8_t)(mr[i]->rkey + 1 + i));
		wr[i].next = i + 1 < M ? &wr[i + 1] : NULL;
	}
	exp_post_ok(L1.b.qp, &wr[0]);
	for (int i = 0; i < M; i++) {
		assert_int_equal(mr[i]->rkey, key[i]);
		expect_wc(L1.b.scq, (uint64_t)i, IBV_WC_SUCCESS,
			  IBV_EXP_WC_FAST_REG_MR, "pipelined fast register");
	}
	for (int i = 0; i < M; i++) {
		write_ok(&L1, &L[i], key[i], 0, (uint32_t)L[i].length,
			 "pipelined, all of it");
		if (L[i].length > PAGE)
			read_ok(&L1, &L[i], key[i], PAGE - L[i].fbo - 3, 10,
				"pipelined, a page boundary");
		else
			read_ok(&L1, &L[i], key[i], 1, (uint32_t)L[i].length - 1,
				"pipelined");
	}
	/* all invalidated, one list, in order */
	for (int i = 0; i < M; i++) {
		inv_wr(&iw[i], (uint64_t)(100 + i), key[i], 0);
		iw[i].next = i + 1 < M ? &iw[i + 1] : NULL;
	}
	post_send_ok(L1.b.qp, &iw[0]);
	for (int i = 0; i < M; i++)
		expect_wc(L1.b.scq, (uint64_t)(100 + i), IBV_WC_SUCCESS,
			  IBV_WC_LOCAL_INV, "pipelined invalidate");
	for (int i = 0; i < M; i += 21)
		refused(&L1, L[i].iova, key[i], 8, "pipelined, invalidated");
	for (int i = 0; i < M; i++)
		frmr_free(mr[i], pl[i]);
}

/*
 * ibv_exp_post_send: fast registrations among standard WRs in one list,
 * executed in order: a WRITE whose source is the MR registered just
 * before it, a SEND, a READ whose sink is the next fast-registered MR, a
 * LOCAL_INV of the first.
 */
static void test_exp_post_interleaved(void **state)
{
	struct ibv_exp_fast_reg_page_list *pl1 = pl_new(4), *pl2 = pl_new(4);
	struct ibv_mr *mr1 = frmr_new(B.pd, 4), *mr2 = frmr_new(B.pd, 4);
	struct ibv_exp_send_wr w[6];
	struct ibv_sge s1, s2, s4;
	struct layout La, Lb, R;
	size_t offs[7];
	uint32_t k1, k2;
	const int ops[6] = { IBV_EXP_WC_FAST_REG_MR, IBV_WC_RDMA_WRITE,
			     IBV_WC_SEND, IBV_EXP_WC_FAST_REG_MR,
			     IBV_WC_RDMA_READ, IBV_WC_LOCAL_INV };
	struct ibv_wc wc;

	(void)state;
	pick_pages(offs, 7, 128, 64, true);
	lay_pages(&La, &B, offs, 4, PAGE, 10, 4 * PAGE - 50, 0x5000000000ull);
	lay_pages(&Lb, &B, offs + 4, 3, PAGE, 0, 3 * PAGE, 0x6000000003ull);
	k1 = ibv_exp_update_fast_reg_key(mr1->rkey, (uint8_t)(mr1->rkey + 7));
	k2 = ibv_exp_update_fast_reg_key(mr2->rkey, (uint8_t)(mr2->rkey + 9));
	fresh(&A, A_SRC, 7000);
	post_recv(L1.a.qp, 77, &A, A_RECV, 512, A.mr->lkey, 0);

	fr_wr(&w[0], 0, mr1, pl1, &La, PAGE, RW, (uint8_t)k1, 0);
	exp_wr_one(&w[1], &s1, 1, IBV_EXP_WR_RDMA_WRITE, La.iova + 100, 6000,
		   k1, addr_of(&A, A_DST), A.mr->rkey);
	exp_wr_one(&w[2], &s2, 2, IBV_EXP_WR_SEND, addr_of(&B, B_RECV + 999),
		   300, B.mr->lkey, 0, 0);
	fr_wr(&w[3], 3, mr2, pl2, &Lb, PAGE, RW, (uint8_t)k2, 0);
	exp_wr_one(&w[4], &s4, 4, IBV_EXP_WR_RDMA_READ, Lb.iova + 5, 7000, k2,
		   addr_of(&A, A_SRC), A.mr->rkey);
	exp_wr_one(&w[5], NULL, 5, IBV_EXP_WR_LOCAL_INV, 0, 0, 0, 0, 0);
	w[5].invalidate_rkey = k1;
	for (int i = 0; i < 5; i++)
		w[i].next = &w[i + 1];
	exp_post_ok(L1.b.qp, &w[0]);
	assert_int_equal(mr1->rkey, k1);
	assert_int_equal(mr2->lkey, k2);
	for (int i = 0; i < 6; i++)
		expect_wc(L1.b.scq, (uint64_t)i, IBV_WC_SUCCESS, ops[i],
			  "exp list, in order");
	expect_no_wc(L1.b.scq, "exp list: six completions");
	wc = expect_wc(L1.a.rcq, 77, IBV_WC_SUCCESS, IBV_WC_RECV, "exp SEND");
	assert_int_equal(wc.byte_len, 300);
	/* what landed: A got mr1's bytes and the SEND, B's mr2 A's bytes */
	lay_copy(&La, 100, A.shadow + A_DST, 6000, false);
	memcpy(A.shadow + A_RECV, B.shadow + B_RECV + 999, 300);
	lay_copy(&Lb, 5, A.shadow + A_SRC, 7000, true);
	check_both("exp list");
	/* mr1 was invalidated by the list, mr2 is valid */
	refused(&L1, La.iova, k1, 8, "invalidated in the list");
	write_ok(&L1, &Lb, k2, 0, 3 * PAGE, "registered in the list");
	local_inv_ok(&L1.b, k2);
	/* the regular MR in the same list form */
	lay_range(&R, &B, 0, BUF_LEN, addr_of(&B, 0));
	read_ok(&L1, &R, B.mr->rkey, 4242, 77, "regular MR");
	frmr_free(mr1, pl1);
	frmr_free(mr2, pl2);
}

/* ------------------------------------------------------- ibv_qp_ex form */

/* The next WR of an ibv_qp_ex session: wr_id id, signaled. */
static void xwr(struct ibv_qp_ex *x, uint64_t id)
{
	x->wr_id = id;
	x->wr_flags = IBV_SEND_SIGNALED;
}

static void fr_attr(struct ibv_exp_fast_reg_attr *a,
		    struct ibv_exp_fast_reg_page_list *pl,
		    const struct layout *L, unsigned int psize, int access,
		    uint32_t flags)
{
	pl_fill(pl, L, flags & IBV_EXP_FAST_REG_BLOCK_LIST);
	*a = (struct ibv_exp_fast_reg_attr){
		.page_list = pl, .page_size = psize, .page_list_len = L->n,
		.first_byte_offset = (unsigned int)L->fbo,
		.length = L->length, .iova_start = L->iova,
		.access_flags = access, .flags = flags,
	};
}

/*
 * An ibv_qp_ex session on B: fast register, a WRITE from the new MR, a
 * second fast register, a local invalidate of the first; then on A a fast
 * register of A's own MR and an RDMA read with invalidate into it
 * (ibv_exp_wr_rdma_read_inv), a send with invalidate (ibv_wr_send_inv) of
 * B's second MR, and a type 2 window bound and invalidated by
 * ibv_wr_bind_mw / ibv_wr_local_inv.
 */
static void test_qp_ex_session(void **state)
{
	struct link X = { .name = "LX" };
	struct ibv_exp_fast_reg_page_list *pl1 = pl_new(4), *pl2 = pl_new(4);
	struct ibv_exp_fast_reg_page_list *pl3 = pl_on(&A, 4);
	struct ibv_mr *mr1 = frmr_new(B.pd, 4), *mr2 = frmr_new(B.pd, 4);
	struct ibv_mr *mr3 = frmr_new(A.pd, 4);
	struct ibv_exp_fast_reg_attr fa;
	struct layout La, Lb, Lc, W;
	struct ibv_mw *mw;
	struct ibv_mw_bind_info bi;
	size_t offs[7], aoffs[3];
	uint32_t k1, k2, k3, wk;
	struct ibv_wc wc;

	(void)state;
	if (link_open(&X, B.pd, true))
		fail_msg("a connection of ibv_qp_ex QPs: %s", strerror(errno));
	pick_pages(offs, 7, 600, 64, true);
	pick_pages(aoffs, 3, A_FR_PAGE, 64, true);
	lay_pages(&La, &B, offs, 4, PAGE, 1, 4 * PAGE - 2, 0x7000000000ull);
	lay_pages(&Lb, &B, offs + 4, 3, PAGE, 99, 2 * PAGE, 0x7100000000ull);
	lay_pages(&Lc, &A, aoffs, 3, PAGE, 7, 3 * PAGE - 7, 0x7200000000ull);
	k1 = ibv_exp_update_fast_reg_key(mr1->rkey, (uint8_t)(mr1->rkey + 3));
	k2 = ibv_exp_update_fast_reg_key(mr2->rkey, (uint8_t)(mr2->rkey + 4));
	k3 = ibv_exp_update_fast_reg_key(mr3->rkey, (uint8_t)(mr3->rkey + 5));

	ibv_wr_start(X.xb);
	xwr(X.xb, 1);
	fr_attr(&fa, pl1, &La, PAGE, RW, 0);
	ibv_exp_wr_fast_reg_mr(X.xb, mr1, (uint8_t)k1, &fa);
	xwr(X.xb, 2);
	ibv_wr_rdma_write(X.xb, A.mr->rkey, addr_of(&A, A_DST));
	ibv_wr_set_sge(X.xb, k1, La.iova + 3, 4 * PAGE - 10);
	xwr(X.xb, 3);
	fr_attr(&fa, pl2, &Lb, PAGE, RW, 0);
	ibv_exp_wr_fast_reg_mr(X.xb, mr2, (uint8_t)k2, &fa);
	xwr(X.xb, 4);
	ibv_wr_local_inv(X.xb, k1);
	assert_int_equal(ibv_wr_complete(X.xb), 0);
	assert_int_equal(mr1->rkey, k1);
	assert_int_equal(mr2->rkey, k2);
	expect_wc(X.b.scq, 1, IBV_WC_SUCCESS, IBV_EXP_WC_FAST_REG_MR, "ex 1");
	expect_wc(X.b.scq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, "ex 2");
	expect_wc(X.b.scq, 3, IBV_WC_SUCCESS, IBV_EXP_WC_FAST_REG_MR, "ex 3");
	expect_wc(X.b.scq, 4, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, "ex 4");
	lay_copy(&La, 3, A.shadow + A_DST, 4 * PAGE - 10, false);
	check_both("ibv_qp_ex session on B");
	refused(&X, La.iova, k1, 8, "ex: invalidated in the session");
	write_ok(&X, &Lb, k2, 0, 2 * PAGE, "ex: registered in the session");

	/* A: fast register its own MR, read into it with invalidate */
	ibv_wr_start(X.xa);
	xwr(X.xa, 5);
	fr_attr(&fa, pl3, &Lc, PAGE, IBV_ACCESS_LOCAL_WRITE, 0);
	ibv_exp_wr_fast_reg_mr(X.xa, mr3, (uint8_t)k3, &fa);
	xwr(X.xa, 6);
	ibv_exp_wr_rdma_read_inv(X.xa, B.mr->rkey, addr_of(&B, 333), k3);
	ibv_wr_set_sge(X.xa, k3, Lc.iova + 2, 2 * PAGE + 1);
	assert_int_equal(ibv_wr_complete(X.xa), 0);
	expect_wc(X.a.scq, 5, IBV_WC_SUCCESS, IBV_EXP_WC_FAST_REG_MR, "ex 5");
	expect_wc(X.a.scq, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, "ex 6");
	lay_copy(&Lc, 2, B.shadow + 333, 2 * PAGE + 1, true);
	check_both("ex: read with invalidate");
	/* the sink's key is dead: a WRITE from it is a local error */
	local_prot_err(&X, &X.a, IBV_WR_RDMA_WRITE, Lc.iova, 8, k3, 0,
		       "ex: the invalidated sink as a source");

	/* send with invalidate of mr2 */
	post_recv(X.b.qp, 8, &B, B_RECV, 256, B.mr->lkey, 0);
	fresh(&A, A_SRC, 200);
	ibv_wr_start(X.xa);
	xwr(X.xa, 9);
	ibv_wr_send_inv(X.xa, k2);
	ibv_wr_set_sge(X.xa, A.mr->lkey, addr_of(&A, A_SRC), 200);
	assert_int_equal(ibv_wr_complete(X.xa), 0);
	expect_wc(X.a.scq, 9, IBV_WC_SUCCESS, IBV_WC_SEND, "ex send_inv");
	wc = expect_wc(X.b.rcq, 8, IBV_WC_SUCCESS, IBV_WC_RECV,
		       "ex send_inv, receiver");
	assert_true(wc.wc_flags & IBV_WC_WITH_INV);
	assert_int_equal(wc.invalidated_rkey, k2);
	assert_int_equal(wc.byte_len, 200);
	memcpy(B.shadow + B_RECV, A.shadow + A_SRC, 200);
	check_both("ex send_inv");
	refused(&X, Lb.iova, k2, 8, "ex: invalidated by send_inv");

	/* a type 2 window: ibv_wr_bind_mw, used, ibv_wr_local_inv */
	mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	assert_non_null(mw);
	wk = ibv_inc_rkey(mw->rkey);
	bind_info_set(&bi, B.mr, addr_of(&B, B_WIN + 3), 3 * PAGE,
		      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	ibv_wr_start(X.xb);
	xwr(X.xb, 10);
	ibv_wr_bind_mw(X.xb, mw, wk, &bi);
	assert_int_equal(ibv_wr_complete(X.xb), 0);
	assert_int_equal(mw->rkey, wk);
	expect_wc(X.b.scq, 10, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "ex bind");
	lay_range(&W, &B, B_WIN + 3, 3 * PAGE, bi.addr);
	write_ok(&X, &W, wk, 0, 3 * PAGE, "ex: window");
	refused(&X, W.iova + 3 * PAGE - 1, wk, 2, "ex: past the window");
	ibv_wr_start(X.xb);
	xwr(X.xb, 11);
	ibv_wr_local_inv(X.xb, wk);
	assert_int_equal(ibv_wr_complete(X.xb), 0);
	expect_wc(X.b.scq, 11, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, "ex inv mw");
	refused(&X, W.iova, wk, 8, "ex: window invalidated");

	assert_int_equal(ibv_dealloc_mw(mw), 0);
	link_close(&X);
	frmr_free(mr1, pl1);
	frmr_free(mr2, pl2);
	frmr_free(mr3, pl3);
}

/* ------------------------------------------------------------ fencing */

/* A READ from B's regular MR at b_off into A's fast-register MR (L) at
 * MR offset o (a WR to post). */
static void read_into(struct ibv_send_wr *wr, struct ibv_sge *sge,
		      uint64_t id, const struct layout *L, uint32_t lkey,
		      uint64_t o, uint32_t len, size_t b_off)
{
	wr_one(wr, sge, id, IBV_WR_RDMA_READ, L->iova + o, len, lkey,
	       addr_of(&B, b_off), B.mr->rkey);
}

/*
 * A READ into a fast-register MR of A's, then a fenced LOCAL_INV of that
 * MR in the same list: the invalidate completes after the READ, and when
 * its completion is there every byte of the READ has landed (a large
 * READ: the device copies it with its lock dropped). Then the key is dead.
 */
static void test_fence_local_inv(void **state)
{
	enum { N = 64 };
	struct ibv_exp_fast_reg_page_list *pl = pl_on(&A, N);
	struct ibv_mr *mr = frmr_new(A.pd, N);
	const uint32_t lens[3] = { 100, N * PAGE - 160, 20000 };
	size_t offs[N];
	struct layout L;

	(void)state;
	pick_pages(offs, N, A_FR_PAGE, 2 * N, true);
	lay_pages(&L, &A, offs, N, PAGE, 100, N * PAGE - 160,
		  0x8000000000ull);
	for (int r = 0; r < 3; r++) {
		struct ibv_send_wr wr[2];
		struct ibv_sge sge;
		struct ibv_wc wc[2];
		uint32_t k;
		int n;

		fresh(&B, 5000, lens[r]);
		k = fast_reg(&L1.a, mr, pl, &L, PAGE, IBV_ACCESS_LOCAL_WRITE,
			     (uint8_t)(mr->rkey + 1), 0);
		read_into(&wr[0], &sge, 1, &L, k, 60, lens[r] - 60 > L.length - 60
			  ? (uint32_t)(L.length - 60) : lens[r] - 60, 5000);
		inv_wr(&wr[1], 2, k, IBV_SEND_FENCE);
		wr[0].next = &wr[1];
		post_send_ok(L1.a.qp, &wr[0]);
		/* wait for the invalidate's completion; the READ's is before */
		n = vu_poll(L1.a.scq, wc, 2, VU_WAIT_MS);
		assert_int_equal(n, 2);
		assert_int_equal(wc[0].wr_id, 1);
		assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[0].opcode, IBV_WC_RDMA_READ);
		assert_int_equal(wc[1].wr_id, 2);
		assert_int_equal(wc[1].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[1].opcode, IBV_WC_LOCAL_INV);
		expect_no_wc(L1.a.scq, "fenced invalidate: two completions");
		lay_copy(&L, 60, B.shadow + 5000, sge.length, true);
		check_both("fenced invalidate after a READ");
		/* the key is dead: a READ into it is a local error */
		local_prot_err(&L1, &L1.a, IBV_WR_RDMA_READ, L.iova, 8, k, 0,
			       "a READ into the invalidated MR");
	}
	frmr_free(mr, pl);
}

/*
 * Unfenced: READs into two halves of the MR and a LOCAL_INV behind them,
 * several rounds. The invalidate may race the READs, but each READ's bytes
 * are all new (it succeeded) or all old (it failed), and nothing outside
 * them changes.
 */
static void test_unfenced_local_inv(void **state)
{
	enum { N = 32 };
	struct ibv_exp_fast_reg_page_list *pl = pl_on(&A, N);
	struct ibv_mr *mr = frmr_new(A.pd, N);
	size_t offs[N];
	struct layout L;

	(void)state;
	pick_pages(offs, N, A_FR_PAGE, 2 * N, true);
	lay_pages(&L, &A, offs, N, PAGE, 0, N * PAGE, 0x9000000000ull);
	for (int r = 0; r < 8; r++) {
		struct ibv_send_wr wr[3];
		struct ibv_sge sge[2];
		struct ibv_wc wc[3];
		const uint64_t half = L.length / 2;
		bool inv_done = false;
		uint32_t k;
		int n;

		fresh(&B, 0, L.length);
		k = fast_reg(&L1.a, mr, pl, &L, PAGE, IBV_ACCESS_LOCAL_WRITE,
			     (uint8_t)(mr->rkey + 1), 0);
		read_into(&wr[0], &sge[0], 1, &L, k, 0, (uint32_t)half, 0);
		read_into(&wr[1], &sge[1], 2, &L, k, half,
			  (uint32_t)(L.length - half), half);
		inv_wr(&wr[2], 3, k, 0);
		wr[0].next = &wr[1];
		wr[1].next = &wr[2];
		post_send_ok(L1.a.qp, &wr[0]);
		n = vu_poll(L1.a.scq, wc, 3, VU_WAIT_MS);
		assert_int_equal(n, 3);
		for (int i = 0; i < 2; i++) {
			uint64_t o = i ? half : 0, len = i ? L.length - half : half;
			int what;

			assert_int_equal(wc[i].wr_id, (uint64_t)(i + 1));
			what = lay_old_or_new(&L, o, B.shadow + o, len);
			if (what < 0)
				fail_msg("round %d: READ %d left its bytes torn "
					 "(%s)", r, i, st_str(wc[i].status));
			if (wc[i].status == IBV_WC_SUCCESS && what != 1)
				fail_msg("round %d: READ %d succeeded but its "
					 "bytes are old", r, i);
			if (wc[i].status != IBV_WC_SUCCESS && what != 0)
				fail_msg("round %d: READ %d failed (%s) but "
					 "its bytes landed", r, i,
					 st_str(wc[i].status));
			if (what == 1)
				lay_copy(&L, o, B.shadow + o, len, true);
		}
		assert_int_equal(wc[2].wr_id, 3);
		inv_done = wc[2].status == IBV_WC_SUCCESS;
		if (wc[0].status != IBV_WC_SUCCESS ||
		    wc[1].status != IBV_WC_SUCCESS || !inv_done) {
			print_message("(round %d: %s, %s, %s)\n", r,
				      st_str(wc[0].status),
				      st_str(wc[1].status),
				      st_str(wc[2].status));
			after_error(&L1, IBV_WC_LOC_PROT_ERR, "unfenced");
			if (!inv_done)
				local_inv(&L1.a, k, 0);
		}
		check_both("unfenced invalidate after READs");
	}
	frmr_free(mr, pl);
}

/* ---------------------------------------------- send / read with inv. */

/* A SEND_WITH_INV from l->a of len fresh bytes naming key, B's receive at
 * B_RECV: the requester's status (the receive checked as the case says). */
static enum ibv_wc_status send_inv(struct link *l, uint32_t key,
				   uint32_t len, const char *what)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;

	post_recv(l->b.qp, 50, &B, B_RECV, 4096, B.mr->lkey, 0);
	fresh(&A, A_SRC, len);
	wr_one(&wr, &sge, 51, IBV_WR_SEND_WITH_INV, addr_of(&A, A_SRC), len,
	       A.mr->lkey, 0, 0);
	wr.invalidate_rkey = key;
	post_send_ok(l->a.qp, &wr);
	wc = wait_wc(l->a.scq, what);
	assert_int_equal(wc.wr_id, 51);
	if (wc.status == IBV_WC_SUCCESS) {
		assert_int_equal(wc.opcode, IBV_WC_SEND);
		wc = expect_wc(l->b.rcq, 50, IBV_WC_SUCCESS, IBV_WC_RECV, what);
		if (!(wc.wc_flags & IBV_WC_WITH_INV))
			fail_msg("%s: the receive has no IBV_WC_WITH_INV "
				 "(wc_flags 0x%x)", what, wc.wc_flags);
		assert_int_equal(wc.invalidated_rkey, key);
		assert_int_equal(wc.byte_len, len);
		memcpy(B.shadow + B_RECV, A.shadow + A_SRC, len);
		check_both(what);
		return IBV_WC_SUCCESS;
	}
	/* refused: the receive completes with the protection error, nothing
	 * lands */
	if (wc.status != IBV_WC_REM_OP_ERR)
		fail_msg("%s: requester %s, wanted the remote operation "
			 "error", what, st_str(wc.status));
	expect_wc(l->b.rcq, 50, IBV_WC_LOC_PROT_ERR, -1, what);
	after_error(l, IBV_WC_REM_OP_ERR, what);
	check_both(what);
	return IBV_WC_REM_OP_ERR;
}

/*
 * Send with invalidate: the responder invalidates a fast-register MR and
 * says so in the receive's completion (IBV_WC_WITH_INV, the key); the key
 * is dead afterwards. A key that cannot be invalidated (a regular MR, an
 * invalid MR, a stale key, an MR of another PD): the requester gets the
 * remote operation error, the receive the protection error, nothing lands.
 */
static void test_send_with_inv(void **state)
{
	struct ibv_exp_fast_reg_page_list *pl = pl_new(4);
	struct ibv_mr *mr = frmr_new(B.pd, 4);
	struct ibv_mr *other = frmr_new(pd_b2, 4);
	size_t offs[4];
	struct layout L;
	uint32_t k, ko;

	(void)state;
	pick_pages(offs, 4, 700, 32, true);
	lay_pages(&L, &B, offs, 4, PAGE, 17, 3 * PAGE, 0xa000000000ull);
	for (int r = 0; r < 3; r++) {
		uint32_t len = r == 0 ? 1 : r == 1 ? 100 : 4096;

		k = fast_reg(&L1.b, mr, pl, &L, PAGE, RW,
			     (uint8_t)(mr->rkey + 1), 0);
		write_ok(&L1, &L, k, 0, 3 * PAGE, "before send_inv");
		assert_int_equal(send_inv(&L1, k, len, "send with invalidate"),
				 IBV_WC_SUCCESS);
		refused(&L1, L.iova, k, 8, "after send with invalidate");
		/* the same key again: invalid already */
		assert_int_equal(send_inv(&L1, k, 10, "send_inv of a dead key"),
				 IBV_WC_REM_OP_ERR);
	}
	assert_int_equal(send_inv(&L1, B.mr->rkey, 10,
				  "send_inv of a regular MR"),
			 IBV_WC_REM_OP_ERR);
	assert_int_equal(send_inv(&L1, B.mr->rkey ^ 0x100, 10,
				  "send_inv of nothing"), IBV_WC_REM_OP_ERR);
	/* an MR of another PD than the responder QP's */
	ko = fast_reg(&L3.b, other, pl, &L, PAGE, RW,
		      (uint8_t)(other->rkey + 1), 0);
	assert_int_equal(send_inv(&L1, ko, 10, "send_inv of another PD's MR"),
			 IBV_WC_REM_OP_ERR);
	write_ok(&L3, &L, ko, 0, 100, "the other PD's MR is still valid");
	local_inv_ok(&L3.b, ko);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	frmr_free(other, pl);
}

/*
 * RDMA read with invalidate (ibv_exp_post_send, IBV_EXP_WR_RDMA_READ_WITH_
 * INV): the data lands in A's fast-register MR, the completion is an RDMA
 * READ, then the local key is dead: a WRITE from it and a READ into it are
 * local protection errors.
 */
static void test_read_with_inv(void **state)
{
	enum { N = 8 };
	struct ibv_exp_fast_reg_page_list *pl = pl_on(&A, N);
	struct ibv_mr *mr = frmr_new(A.pd, N);
	size_t offs[N];
	struct layout L;

	(void)state;
	pick_pages(offs, N, A_FR_PAGE + 128, 2 * N, true);
	lay_pages(&L, &A, offs, N, PAGE, 300, N * PAGE - 600, 0xb000000000ull);
	for (int r = 0; r < 4; r++) {
		struct ibv_exp_send_wr wr;
		struct ibv_sge sge;
		uint32_t len = r == 0 ? 1 : (uint32_t)L.length - (uint32_t)r * 3;
		uint64_t o = (uint64_t)r;
		uint32_t k;

		fresh(&B, 10000 + (size_t)r, len);
		k = fast_reg(&L1.a, mr, pl, &L, PAGE, IBV_ACCESS_LOCAL_WRITE,
			     (uint8_t)(mr->rkey + 1), 0);
		exp_wr_one(&wr, &sge, 60, IBV_EXP_WR_RDMA_READ_WITH_INV,
			   L.iova + o, len, k, addr_of(&B, 10000 + (size_t)r),
			   B.mr->rkey);
		wr.invalidate_rkey = k;
		exp_post_ok(L1.a.qp, &wr);
		expect_wc(L1.a.scq, 60, IBV_WC_SUCCESS, IBV_WC_RDMA_READ,
			  "read with invalidate");
		lay_copy(&L, o, B.shadow + 10000 + r, len, true);
		check_both("read with invalidate");
		/* dead: as a source and as a sink */
		for (int s = 0; s < 2; s++)
			local_prot_err(&L1, &L1.a, s ? IBV_WR_RDMA_READ :
				       IBV_WR_RDMA_WRITE, L.iova, 16, k, 0,
				       "the key read with invalidate");
	}
	/* read with invalidate of a regular MR's key: the READ may land but
	 * the invalidate is an error (the MR stays valid) */
	{
		struct ibv_exp_send_wr wr;
		struct ibv_sge sge;
		struct ibv_wc wc;

		exp_wr_one(&wr, &sge, 62, IBV_EXP_WR_RDMA_READ_WITH_INV,
			   addr_of(&A, A_DST), 64, A.mr->lkey, addr_of(&B, 64),
			   B.mr->rkey);
		wr.invalidate_rkey = A.mr->lkey;
		exp_post_ok(L1.a.qp, &wr);
		wc = wait_wc(L1.a.scq, "read_inv of a regular MR");
		assert_int_equal(wc.wr_id, 62);
		if (wc.status == IBV_WC_SUCCESS)
			fail_msg("read with invalidate of a regular MR's key "
				 "succeeded");
		after_error(&L1, wc.status, "read_inv of a regular MR");
		/* the READ may have landed: take what is there */
		if (memcmp(A.buf + A_DST, A.shadow + A_DST, 64))
			memcpy(A.shadow + A_DST, B.shadow + 64, 64);
		check_both("read_inv of a regular MR");
		fresh(&B, 0, 64);
		assert_int_equal(rdma(&L1, IBV_WR_RDMA_READ, A_DST, 64,
				      addr_of(&B, 0), B.mr->rkey),
				 IBV_WC_SUCCESS);
		memcpy(A.shadow + A_DST, B.shadow, 64);
		check_both("the regular MR still valid");
	}
	frmr_free(mr, pl);
}

/* ------------------------------------------------------ memory windows */

static bool mw_is_type1(const struct ibv_mw *mw)
{
	return mw->type == IBV_MW_TYPE_1;
}

/* Bind mw to [addr, addr + len) of mr with access, on ep's QP: type 1 by
 * ibv_bind_mw, type 2 by IBV_WR_BIND_MW with ibv_inc_rkey of its key.
 * The completion status (the new key in mw->rkey on success). */
static enum ibv_wc_status mw_bind(struct vu_ep *ep, struct ibv_mw *mw,
				  struct ibv_mr *mr, uint64_t addr,
				  uint64_t len, unsigned int access)
{
	uint32_t old = mw->rkey, want = ibv_inc_rkey(mw->rkey);
	uint64_t id = ++next_id;
	struct ibv_wc wc;

	if (mw_is_type1(mw)) {
		struct ibv_mw_bind b = { .wr_id = id,
					 .send_flags = IBV_SEND_SIGNALED };

		bind_info_set(&b.bind_info, mr, addr, len, access);
		assert_int_equal(ibv_bind_mw(ep->qp, mw, &b), 0);
	} else {
		struct ibv_send_wr wr;

		bind_wr(&wr, id, mw, want, mr, addr, len, access);
		post_send_ok(ep->qp, &wr);
	}
	if (mw->rkey != want)
		fail_msg("bind: mw->rkey 0x%08x after the post, wanted 0x%08x "
			 "(was 0x%08x)", mw->rkey, want, old);
	wc = wait_wc(ep->scq, "bind");
	assert_int_equal(wc.wr_id, id);
	if (wc.status == IBV_WC_SUCCESS)
		assert_int_equal(wc.opcode, IBV_WC_BIND_MW);
	return wc.status;
}

static void mw_bind_ok(struct vu_ep *ep, struct ibv_mw *mw, struct ibv_mr *mr,
		       uint64_t addr, uint64_t len, unsigned int access)
{
	enum ibv_wc_status st = mw_bind(ep, mw, mr, addr, len, access);

	if (st != IBV_WC_SUCCESS)
		fail_msg("bind of a type %s window: %s",
			 mw_is_type1(mw) ? "1" : "2", st_str(st));
}

/* Type 1: unbind (length 0); type 2: LOCAL_INV on ep's QP. */
static void mw_invalidate(struct vu_ep *ep, struct ibv_mw *mw)
{
	if (mw_is_type1(mw))
		mw_bind_ok(ep, mw, NULL, 0, 0, 0);
	else
		local_inv_ok(ep, mw->rkey);
}

/* An MR or window addressed from 0 (L, key k): WRITEs and a READ from 0
 * work; past its end and at its virtual address vaddr refused. */
static void zero_based_ok(const struct layout *L, uint32_t k,
			  uint64_t vaddr, const char *what)
{
	char w[128];

	write_ok(&L1, L, k, 0, (uint32_t)L->length, what);
	write_ok(&L1, L, k, 5, 1, what);
	read_ok(&L1, L, k, PAGE - 2, 4, what);
	snprintf(w, sizeof(w), "%s: past its end", what);
	refused(&L1, L->length - 1, k, 2, w);
	snprintf(w, sizeof(w), "%s: at its virtual address", what);
	refused(&L1, vaddr, k, 8, w);
}

/* Every window type. */
static const enum ibv_mw_type mw_types[3] = { IBV_MW_TYPE_1,
					      IBV_EXP_MW_TYPE_2A,
					      IBV_MW_TYPE_2 };

static const char *mw_name(enum ibv_mw_type t)
{
	return t == IBV_MW_TYPE_1 ? "type 1" :
	       t == IBV_EXP_MW_TYPE_2A ? "type 2A" : "type 2B";
}

/*
 * One type: allocated (the key grants nothing), bound on L1's B QP;
 * access inside through L1; outside, beyond its rights, refused; through
 * L2 (another QP of the PD: type 1 yes, 2A and 2B no) and L3 (a QP of
 * another PD: no); rebound (type 1 directly, type 2 after invalidation):
 * the old key refused; invalidated (type 1: unbind; type 2: LOCAL_INV and
 * SEND_WITH_INV); ibv_dereg_mr of the MR while bound is EBUSY; dealloc of
 * a bound window is fine and its key dies.
 */
static void mw_case(enum ibv_mw_type type)
{
	const bool t1 = type == IBV_MW_TYPE_1;
	struct ibv_mw *mw = ibv_alloc_mw(B.pd, type);
	const unsigned int rw = IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_WRITE;
	const size_t woff = B_WIN + 5 * PAGE + 33;
	const uint64_t wlen = 3 * PAGE + 100;
	struct layout W;
	uint32_t k0, k1, k2;
	char what[96];

	if (!mw)
		fail_msg("ibv_alloc_mw(%s): %s", mw_name(type),
			 strerror(errno));
	snprintf(what, sizeof(what), "%s window", mw_name(type));
	assert_int_equal(mw->type, t1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
	assert_ptr_equal(mw->pd, B.pd);
	k0 = mw->rkey;
	lay_range(&W, &B, woff, wlen, addr_of(&B, woff));
	refused(&L1, W.iova, k0, 8, "a window never bound");

	mw_bind_ok(&L1.b, mw, B.mr, W.iova, wlen, rw);
	k1 = mw->rkey;
	assert_int_equal(k1 >> 8, k0 >> 8);
	write_ok(&L1, &W, k1, 0, (uint32_t)wlen, what);
	write_ok(&L1, &W, k1, PAGE - 40, 100, what);
	read_ok(&L1, &W, k1, 0, (uint32_t)wlen, what);
	read_ok(&L1, &W, k1, wlen - 1, 1, what);
	refused(&L1, W.iova - 1, k1, 2, "one byte before the window");
	refused(&L1, W.iova + wlen - 1, k1, 2, "one byte past the window");
	refused(&L1, W.iova + wlen, k1, 8, "right after the window");
	refused(&L1, W.iova, k0, 8, "the key before the bind");
	/* another QP of the same PD */
	if (t1) {
		write_ok(&L2, &W, k1, 7, 1000, "type 1, another QP of the PD");
		read_ok(&L2, &W, k1, 0, 64, "type 1, another QP of the PD");
	} else {
		refused(&L2, W.iova, k1, 8, "type 2, another QP of the PD");
	}
	/* a QP of another PD */
	refused(&L3, W.iova, k1, 8, "a QP of another PD");
	/* the MR cannot go while the window is bound to it */
	{
		struct ibv_mr *mr = ibv_reg_mr(B.pd, B.buf + B_WIN, 16 * PAGE,
					       RW | IBV_ACCESS_MW_BIND);
		struct layout Wm;
		uint32_t km;
		struct ibv_mw *m2 = ibv_alloc_mw(B.pd, type);

		assert_non_null(mr);
		assert_non_null(m2);
		mw_bind_ok(&L1.b, m2, mr, addr_of(&B, B_WIN + 100), 200, rw);
		km = m2->rkey;
		lay_range(&Wm, &B, B_WIN + 100, 200, addr_of(&B, B_WIN + 100));
		write_ok(&L1, &Wm, km, 0, 200, "second window");
		assert_int_equal(ibv_dereg_mr(mr), EBUSY);
		write_ok(&L1, &Wm, km, 10, 20, "second window after EBUSY");
		/* dealloc while bound: fine, the key dies, the MR is free */
		assert_int_equal(ibv_dealloc_mw(m2), 0);
		refused(&L1, Wm.iova, km, 8, "a deallocated window");
		assert_int_equal(ibv_dereg_mr(mr), 0);
	}

	/* read-only: writes refused. type 1 rebinds in place, type 2 needs
	 * the invalidate first */
	if (!t1)
		mw_invalidate(&L1.b, mw);
	mw_bind_ok(&L1.b, mw, B.mr, W.iova, wlen, IBV_ACCESS_REMOTE_READ);
	k2 = mw->rkey;
	assert_int_not_equal(k2, k1);
	refused(&L1, W.iova, k1, 8, "the key of the previous bind");
	read_ok(&L1, &W, k2, 3, 300, "read-only window");
	{
		enum ibv_wc_status st;

		fresh(&A, A_SRC, 8);
		st = rdma(&L1, IBV_WR_RDMA_WRITE, A_SRC, 8, W.iova, k2);
		assert_int_equal(st, IBV_WC_REM_ACCESS_ERR);
		check_both("a WRITE to a read-only window");
	}

	/* invalidation */
	if (t1) {
		mw_invalidate(&L1.b, mw);
		refused(&L1, W.iova, k2, 8, "type 1, unbound");
		refused(&L1, W.iova, mw->rkey, 8, "type 1, the unbound key");
		/* LOCAL_INV and SEND_WITH_INV do not apply to type 1 */
		mw_bind_ok(&L1.b, mw, B.mr, W.iova, wlen, rw);
		local_inv_fails(&L1, &L1.b, mw->rkey, IBV_WC_MW_BIND_ERR,
				"LOCAL_INV of a type 1 window");
		assert_int_equal(send_inv(&L1, mw->rkey, 8,
					  "send_inv of a type 1 window"),
				 IBV_WC_REM_OP_ERR);
		write_ok(&L1, &W, mw->rkey, 0, 16, "type 1 still bound");
	} else {
		mw_invalidate(&L1.b, mw);
		refused(&L1, W.iova, k2, 8, "type 2, invalidated");
		mw_bind_ok(&L1.b, mw, B.mr, W.iova, wlen, rw);
		write_ok(&L1, &W, mw->rkey, 0, 16, "type 2 bound again");
		/* LOCAL_INV from another QP than the window's: refused */
		local_inv_fails(&L2, &L2.b, mw->rkey, -1,
				"LOCAL_INV of a type 2 window from another QP");
		write_ok(&L1, &W, mw->rkey, 0, 16, "type 2 still bound");
		/* SEND_WITH_INV through another QP: refused */
		assert_int_equal(send_inv(&L2, mw->rkey, 8,
					  "send_inv through another QP"),
				 IBV_WC_REM_OP_ERR);
		write_ok(&L1, &W, mw->rkey, 0, 16, "type 2 still bound");
		/* SEND_WITH_INV through its QP */
		k2 = mw->rkey;
		assert_int_equal(send_inv(&L1, k2, 64, "send_inv of a window"),
				 IBV_WC_SUCCESS);
		refused(&L1, W.iova, k2, 8, "type 2 after send_inv");
		/* free again: it binds */
		mw_bind_ok(&L1.b, mw, B.mr, W.iova, wlen, rw);
		write_ok(&L1, &W, mw->rkey, 0, 16, "type 2 bound once more");
	}
	k2 = mw->rkey;
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	refused(&L1, W.iova, k2, 8, "a deallocated window");
}

static void test_mw_type1(void **state)
{
	(void)state;
	mw_case(IBV_MW_TYPE_1);
}

static void test_mw_type2a(void **state)
{
	(void)state;
	mw_case(IBV_EXP_MW_TYPE_2A);
}

static void test_mw_type2b(void **state)
{
	(void)state;
	mw_case(IBV_MW_TYPE_2);
}

/*
 * Zero-based windows of every type: remote addresses from 0, on a regular
 * MR and on a fast-registered one; the window's own addresses outside
 * [0, length) are refused, so is the address it would have without
 * ZERO_BASED.
 */
static void test_mw_zero_based(void **state)
{
	const unsigned int acc = IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_ZERO_BASED;
	struct ibv_exp_fast_reg_page_list *pl = pl_new(4);
	struct ibv_mr *fr = frmr_new(B.pd, 4);
	size_t offs[4];
	struct layout F;
	uint32_t kf;

	(void)state;
	pick_pages(offs, 4, 900, 16, true);
	lay_pages(&F, &B, offs, 4, PAGE, 0, 4 * PAGE, 0xc000000000ull);
	kf = fast_reg(&L1.b, fr, pl, &F, PAGE, RW | IBV_ACCESS_MW_BIND,
		      (uint8_t)(fr->rkey + 1), 0);
	for (int t = 0; t < 3; t++) {
		struct ibv_mw *mw = ibv_alloc_mw(B.pd, mw_types[t]);
		struct layout W;
		size_t woff = B_WIN + (size_t)t * 8 * PAGE + 1001;
		const uint64_t wlen = 2 * PAGE + 5;

		assert_non_null(mw);
		/* on the regular MR */
		mw_bind_ok(&L1.b, mw, B.mr, addr_of(&B, woff), wlen, acc);
		lay_range(&W, &B, woff, wlen, 0);
		zero_based_ok(&W, mw->rkey, addr_of(&B, woff),
			      mw_name(mw_types[t]));
		mw_invalidate(&L1.b, mw);
		/* on the fast-registered MR: window bytes [x, x + len) of the
		 * MR's, addressed from 0 */
		mw_bind_ok(&L1.b, mw, fr, F.iova + PAGE - 7, PAGE + 20, acc);
		{
			struct layout Fw = F;

			Fw.fbo = PAGE - 7;
			Fw.length = PAGE + 20;
			Fw.iova = 0;
			write_ok(&L1, &Fw, mw->rkey, 0, PAGE + 20,
				 "zero-based window on a fast-reg MR");
			read_ok(&L1, &Fw, mw->rkey, 6, 2,
				"zero-based window on a fast-reg MR");
			refused(&L1, PAGE + 19, mw->rkey, 2,
				"past a zero-based window on a fast-reg MR");
		}
		mw_invalidate(&L1.b, mw);
		assert_int_equal(ibv_dealloc_mw(mw), 0);
	}
	local_inv_ok(&L1.b, kf);
	frmr_free(fr, pl);
}

/*
 * A window lives on its MR's grant: windows of every type bound to a
 * fast-registered MR die when the MR is invalidated and stay dead when it
 * is registered again (with a new key); the window can still be unbound or
 * invalidated, then deallocated.
 */
static void test_mw_dies_with_mr(void **state)
{
	struct ibv_exp_fast_reg_page_list *pl = pl_new(4);
	struct ibv_mr *fr = frmr_new(B.pd, 4);
	size_t offs[4];
	struct layout F, W;

	(void)state;
	pick_pages(offs, 4, 920, 16, true);
	lay_pages(&F, &B, offs, 4, PAGE, 3, 4 * PAGE - 3, 0x12000000000ull);
	for (int t = 0; t < 3; t++) {
		struct ibv_mw *mw = ibv_alloc_mw(B.pd, mw_types[t]);
		uint32_t k, k2, wk;

		assert_non_null(mw);
		k = fast_reg(&L1.b, fr, pl, &F, PAGE, RW | IBV_ACCESS_MW_BIND,
			     (uint8_t)(fr->rkey + 1), 0);
		mw_bind_ok(&L1.b, mw, fr, F.iova + 100, 2 * PAGE,
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
		wk = mw->rkey;
		W = F;
		W.fbo = F.fbo + 100;
		W.length = 2 * PAGE;
		W.iova = F.iova + 100;
		write_ok(&L1, &W, wk, 0, 2 * PAGE, mw_name(mw_types[t]));
		local_inv_ok(&L1.b, k);
		refused(&L1, W.iova, wk, 8, "a window on an invalidated MR");
		k2 = fast_reg(&L1.b, fr, pl, &F, PAGE, RW | IBV_ACCESS_MW_BIND,
			      (uint8_t)(fr->rkey + 1), 0);
		refused(&L1, W.iova, wk, 8, "a window on a re-registered MR");
		write_ok(&L1, &F, k2, 0, 64, "the MR registered again");
		mw_invalidate(&L1.b, mw);
		local_inv_ok(&L1.b, k2);
		assert_int_equal(ibv_dealloc_mw(mw), 0);
	}
	frmr_free(fr, pl);
}

/*
 * ibv_inc_rkey cycles: bind, use, invalidate, 300 times per type, so that
 * the 8-bit key wraps: the index never changes, every consumer key is
 * seen, the key of the previous bind and an invalidated key are refused
 * (checked every 20 rounds and around the wrap).
 */
static void test_mw_inc_rkey(void **state)
{

	(void)state;
	for (int t = 0; t < 3; t++) {
		struct ibv_mw *mw = ibv_alloc_mw(B.pd, mw_types[t]);
		const size_t woff = B_WIN + 40 * PAGE + (size_t)t * 64;
		uint8_t seen[256];
		uint32_t prev = 0, idx;
		struct layout W;

		assert_non_null(mw);
		memset(seen, 0, sizeof(seen));
		idx = mw->rkey >> 8;
		lay_range(&W, &B, woff, 64, addr_of(&B, woff));
		for (int i = 0; i < 300; i++) {
			uint32_t k;
			bool sample = i % 20 == 0 || (i >= 250 && i < 262);

			mw_bind_ok(&L1.b, mw, B.mr, W.iova, 64,
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ);
			k = mw->rkey;
			assert_int_equal(k >> 8, idx);
			seen[k & 0xff] = 1;
			if (sample && i > 0 && prev != k)
				refused(&L1, W.iova, prev, 8,
					"inc_rkey: the previous key");
			write_ok(&L1, &W, k, (uint64_t)(i % 56), 8,
				 "inc_rkey cycle");
			mw_invalidate(&L1.b, mw);
			if (sample)
				refused(&L1, W.iova, k, 8,
					"inc_rkey: invalidated");
			prev = mw_is_type1(mw) ? mw->rkey : k;
		}
		for (int c = 0; c < 256; c++)
			if (!seen[c] && !mw_is_type1(mw))
				fail_msg("%s: consumer key 0x%02x never used in "
					 "300 binds", mw_name(mw_types[t]), c);
		assert_int_equal(ibv_dealloc_mw(mw), 0);
	}
}

/*
 * The bind errors (IBV_WC_MW_BIND_ERR): an MR without MW_BIND, a range
 * outside the MR, remote write on an MR without local write, a type 2
 * rkey of another index, a type 2 window bound already, a QP of another
 * PD, type 1 through ibv_post_send. The window stays as it was.
 */
static void test_mw_bind_errors(void **state)
{
	struct ibv_mr *nobind = ibv_reg_mr(B.pd, B.buf + B_WIN, 8 * PAGE, RW);
	struct ibv_mr *ro = ibv_reg_mr(B.pd, B.buf + B_WIN, 8 * PAGE,
				       IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_MW_BIND);
	struct ibv_mr *ok = ibv_reg_mr(B.pd, B.buf + B_WIN, 8 * PAGE,
				       RW | IBV_ACCESS_MW_BIND);
	const unsigned int rw = IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_WRITE;
	const uint64_t base = addr_of(&B, B_WIN);
	struct layout W;

	(void)state;
	assert_non_null(nobind);
	assert_non_null(ro);
	assert_non_null(ok);
	for (int t = 0; t < 2; t++) {
		struct ibv_mw *mw = ibv_alloc_mw(B.pd, t ? IBV_MW_TYPE_2 :
						 IBV_MW_TYPE_1);

		assert_non_null(mw);
		for (int c = 0; c < 4; c++) {
			static const char *const cw[4] = {
				"an MR without MW_BIND", "past the MR's end",
				"before the MR", "write on an MR without "
				"local write" };
			struct ibv_mr *m = c == 0 ? nobind : c == 3 ? ro : ok;
			uint64_t a = c == 2 ? base - 1 : base + (c == 1 ? 100 : 0);
			uint32_t before = mw->rkey;
			enum ibv_wc_status st = mw_bind(&L1.b, mw, m, a,
							8 * PAGE, rw);

			if (st != IBV_WC_MW_BIND_ERR)
				fail_msg("bind (%s) %s: %s", t ? "2" : "1",
					 cw[c], st_str(st));
			after_error(&L1, st, cw[c]);
			refused(&L1, base, mw->rkey, 8, cw[c]);
			refused(&L1, base, before, 8, cw[c]);
		}
		assert_int_equal(ibv_dealloc_mw(mw), 0);
	}
	/* type 2: another index in the key; bound already; a QP of another
	 * PD */
	{
		struct ibv_mw *mw = ibv_alloc_mw(B.pd, IBV_EXP_MW_TYPE_2A);
		struct ibv_mw *mx = ibv_alloc_mw(B.pd, IBV_EXP_MW_TYPE_2A);
		struct ibv_send_wr wr, *bad = NULL;
		uint32_t good;
		int ret;

		assert_non_null(mw);
		assert_non_null(mx);
		/* mw's index, not mx's: refused at post, or by the device */
		bind_wr(&wr, 90, mx, mw->rkey, ok, base, PAGE, rw);
		ret = ibv_post_send(L1.b.qp, &wr, &bad);
		post_refused(&L1, &L1.b, ret, 90, IBV_WC_MW_BIND_ERR,
			     "a type 2 key of another index");
		refused(&L1, base, wr.bind_mw.rkey, 8, "other index");
		assert_int_equal(ibv_dealloc_mw(mx), 0);

		mw_bind_ok(&L1.b, mw, ok, base, PAGE, rw);
		good = mw->rkey;
		lay_range(&W, &B, B_WIN, PAGE, base);
		write_ok(&L1, &W, good, 0, 64, "type 2A bound");
		if (mw_bind(&L1.b, mw, ok, base, 2 * PAGE, rw) !=
		    IBV_WC_MW_BIND_ERR)
			fail_msg("a bound type 2 window bound again");
		after_error(&L1, IBV_WC_MW_BIND_ERR, "bound again");
		write_ok(&L1, &W, good, 0, 64, "type 2A still bound");
		local_inv_ok(&L1.b, good);
		/* bound through a QP of another PD than the window's */
		if (mw_bind(&L3.b, mw, ok, base, PAGE, rw) !=
		    IBV_WC_MW_BIND_ERR)
			fail_msg("a type 2 window bound through a QP of "
				 "another PD");
		after_error(&L3, IBV_WC_MW_BIND_ERR, "other PD's QP");
		refused(&L3, base, mw->rkey, 8, "other PD's QP");
		refused(&L1, base, mw->rkey, 8, "other PD's QP");
		assert_int_equal(ibv_dealloc_mw(mw), 0);
	}
	/* type 1 through ibv_post_send: refused at post or by the device */
	{
		struct ibv_mw *mw = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
		struct ibv_send_wr wr, *bad = NULL;
		int ret;

		assert_non_null(mw);
		bind_wr(&wr, 91, mw, ibv_inc_rkey(mw->rkey), ok, base, PAGE,
			rw);
		ret = ibv_post_send(L1.b.qp, &wr, &bad);
		post_refused(&L1, &L1.b, ret, 91, IBV_WC_MW_BIND_ERR,
			     "type 1 through ibv_post_send");
		refused(&L1, base, wr.bind_mw.rkey, 8, "type 1 via post_send");
		assert_int_equal(ibv_dealloc_mw(mw), 0);
	}
	assert_int_equal(ibv_dereg_mr(nobind), 0);
	assert_int_equal(ibv_dereg_mr(ro), 0);
	assert_int_equal(ibv_dereg_mr(ok), 0);
}

/*
 * The end of a grant waits for the copies in flight on other engines: A's
 * QP (in a resource domain of its own: another engine thread than B's
 * QPs) streams 1 MiB WRITEs, which the device copies with its lock
 * dropped, into a fast-registered MR (even rounds) or a type 2A window
 * (odd rounds), while B's QP invalidates it after r of them completed.
 * Once the invalidate's completion is there no byte of the region changes
 * any more; the region holds the bytes of the last WRITE that succeeded
 * (or its old bytes), but for a prefix of the first WRITE refused (a
 * WRITE refused part-way may have placed the bytes it copied while the
 * grant held, as a NIC places the packets before the one refused); behind
 * the first WRITE refused none succeeds; nothing outside the region
 * changes; the key is dead. (A WRITE refused once the invalidate took
 * effect puts B's QP in ERR; the invalidate, not complete yet, then
 * completes flushed.)
 */
static void test_inv_vs_copy(void **state)
{
	enum { K = 24, SZ = 1 << 20, ROUNDS = 16, NP = SZ / PAGE };
	const size_t src[2] = { A_SRC, 2u << 20 };   /* two 1 MiB sources */
	struct ibv_exp_res_domain_init_attr ra = {
		.comp_mask = IBV_EXP_RES_DOMAIN_THREAD_MODEL |
			     IBV_EXP_RES_DOMAIN_MSG_MODEL,
		.thread_model = IBV_EXP_THREAD_SAFE,
		.msg_model = IBV_EXP_MSG_DEFAULT,
	};
	struct ibv_exp_res_domain *rd = ibv_exp_create_res_domain(A.ctx, &ra);
	struct ibv_exp_cq_init_attr ca = {
		.comp_mask = IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN,
		.res_domain = rd,
	};
	struct ibv_exp_qp_init_attr qa;
	struct ibv_exp_fast_reg_page_list *pl = pl_new(NP);
	struct ibv_mr *mr = frmr_new(B.pd, NP);
	struct ibv_mw *mw = ibv_alloc_mw(B.pd, IBV_EXP_MW_TYPE_2A);
	struct link D = { .name = "LD" };
	uint8_t *snap = malloc(SZ), *now = malloc(SZ), tail[PAGE];
	uint32_t dba = 0, dbb = 0;
	size_t offs[NP];
	int torn = 0, flushed = 0, partial = 0;

	(void)state;
	assert_non_null(rd);
	assert_non_null(mw);
	assert_non_null(snap);
	assert_non_null(now);
	D.a.ctx = A.ctx;
	D.a.pd = A.pd;
	D.a.scq = ibv_exp_create_cq(A.ctx, 1024, NULL, NULL, 0, &ca);
	D.a.rcq = ibv_exp_create_cq(A.ctx, 1024, NULL, NULL, 0, &ca);
	D.a.own_scq = D.a.own_rcq = true;
	assert_non_null(D.a.scq);
	assert_non_null(D.a.rcq);
	qa = (struct ibv_exp_qp_init_attr){
		.send_cq = D.a.scq, .recv_cq = D.a.rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_EXP_QP_INIT_ATTR_PD |
			     IBV_EXP_QP_INIT_ATTR_RES_DOMAIN,
		.pd = A.pd, .res_domain = rd,
	};
	D.a.qp = ibv_exp_create_qp(A.ctx, &qa);
	assert_non_null(D.a.qp);
	assert_int_equal(ep_make(&D.b, &B, B.pd, false, IBV_QPT_RC), 0);
	assert_int_equal(vu_connect_pair(D.a.qp, D.b.qp, &conn), 0);
	/* two engines: A's QP has a doorbell page of its own */
	assert_int_equal(sv_query_qp_db(D.a.qp, &dba), 0);
	assert_int_equal(sv_query_qp_db(D.b.qp, &dbb), 0);
	assert_int_not_equal(dba, dbb);

	pick_pages(offs, NP, 0, 2 * NP, true);
	for (int r = 0; r < ROUNDS; r++) {
		struct ibv_send_wr wr[K];
		struct ibv_sge sge[K];
		struct ibv_wc wc;
		struct layout L;
		enum ibv_wc_status st[K], inv_st;
		uint32_t key;
		int got = 0, last_ok = -1, first_bad = K;
		const int before = r % K;   /* WRITEs done before the post */

		if (r % 2 == 0) {
			lay_pages(&L, &B, offs, NP, PAGE, 0, SZ,
				  0x11000000000ull);
			key = fast_reg(&D.b, mr, pl, &L, PAGE, RW,
				       (uint8_t)(mr->rkey + 1), 0);
		} else {
			lay_range(&L, &B, B_WIN, SZ, addr_of(&B, B_WIN));
			mw_bind_ok(&D.b, mw, B.mr, L.iova, SZ,
				   IBV_ACCESS_REMOTE_WRITE);
			key = mw->rkey;
		}
		fresh(&A, src[0], SZ);
		fresh(&A, src[1], SZ);
		for (int i = 0; i < K; i++) {
			wr_one(&wr[i], &sge[i], (uint64_t)i, IBV_WR_RDMA_WRITE,
			       addr_of(&A, src[i % 2]), SZ, A.mr->lkey, L.iova,
			       key);
			wr[i].next = i + 1 < K ? &wr[i + 1] : NULL;
		}
		post_send_ok(D.a.qp, &wr[0]);
		for (; got < before; got++) {
			wc = wait_wc(D.a.scq, "WRITEs before the invalidate");
			assert_int_equal(wc.wr_id, (uint64_t)got);
			st[got] = wc.status;
		}
		/* a WRITE refused after the invalidate took effect puts B's
		 * QP in ERR: the invalidate, not complete yet, is flushed */
		inv_st = local_inv(&D.b, key, 0);
		if (inv_st != IBV_WC_SUCCESS) {
			if (inv_st != IBV_WC_WR_FLUSH_ERR)
				fail_msg("round %d: LOCAL_INV: %s", r,
					 st_str(inv_st));
			wait_state(D.b.qp, IBV_QPS_ERR, "flushed LOCAL_INV");
			flushed++;
		}
		/* from now on the region does not change: its last page
		 * first (a copy still running would write it last) */
		lay_copy_at(&L, SZ - PAGE, tail, PAGE, false, true);
		lay_copy_at(&L, 0, snap, SZ, false, true);
		for (; got < K; got++) {
			wc = wait_wc(D.a.scq, "WRITEs around the invalidate");
			assert_int_equal(wc.wr_id, (uint64_t)got);
			st[got] = wc.status;
		}
		lay_copy_at(&L, 0, now, SZ, false, true);
		if (memcmp(snap, now, SZ) || memcmp(tail, now + SZ - PAGE, PAGE))
			fail_msg("round %d: the region changed after the "
				 "invalidate completed", r);
		for (int i = 0; i < K; i++) {
			if (st[i] == IBV_WC_SUCCESS) {
				if (first_bad < i)
					fail_msg("round %d: WRITE %d succeeded "
						 "after WRITE %d failed (%s)", r,
						 i, first_bad,
						 st_str(st[first_bad]));
				last_ok = i;
			} else if (first_bad == K) {
				first_bad = i;
				if (st[i] != IBV_WC_REM_ACCESS_ERR)
					fail_msg("round %d: WRITE %d: %s", r, i,
						 st_str(st[i]));
			} else if (st[i] != IBV_WC_WR_FLUSH_ERR) {
				fail_msg("round %d: WRITE %d behind the failed "
					 "one: %s", r, i, st_str(st[i]));
			}
		}
		/* the region: a prefix of the refused WRITE's bytes (those
		 * copied while the grant held), then the bytes of the last
		 * WRITE that succeeded, or the old ones */
		{
			uint8_t *base = malloc(SZ);
			size_t p = 0;

			assert_non_null(base);
			if (last_ok >= 0)
				memcpy(base, A.shadow + src[last_ok % 2], SZ);
			else
				lay_copy(&L, 0, base, SZ, false);
			if (first_bad < K) {
				const uint8_t *bad = A.shadow + src[first_bad % 2];

				while (p < SZ && now[p] == bad[p])
					p++;
			}
			if (memcmp(now + p, base + p, SZ - p)) {
				char map[NP + 1];

				for (int g = 0; g < NP; g++) {
					size_t o = (size_t)g * PAGE;

					map[g] = !memcmp(now + o, base + o, PAGE) ?
						 'b' : first_bad < K &&
						 !memcmp(now + o, A.shadow +
							 src[first_bad % 2] + o,
							 PAGE) ? 'x' : '?';
				}
				map[NP] = 0;
				free(base);
				fail_msg("round %d: WRITEs 0..%d succeeded, %d "
					 "refused (%s), LOCAL_INV %s; the region "
					 "per page (b: the last success's or "
					 "old, x: the refused one's, ?: neither)"
					 ": %s", r, last_ok, first_bad,
					 first_bad < K ? st_str(st[first_bad]) :
					 "-", st_str(inv_st), map);
			}
			free(base);
			if (p)
				partial++;
			lay_copy(&L, 0, now, SZ, true);
		}
		check_both("WRITEs racing an invalidate");
		if (first_bad < K)
			torn++;
		else if (inv_st != IBV_WC_SUCCESS)
			fail_msg("round %d: LOCAL_INV flushed, no WRITE "
				 "refused", r);
		if (first_bad < K)
			after_error(&D, IBV_WC_REM_ACCESS_ERR, "inv vs copy");
		refused(&D, L.iova, key, 8, "after the race");
	}
	print_message("(%d of %d rounds saw WRITEs refused, %d LOCAL_INVs "
		      "flushed, %d refused WRITEs placed a part)\n", torn,
		      ROUNDS, flushed, partial);
	link_close(&D);
	assert_int_equal(ibv_exp_destroy_res_domain(A.ctx, rd, NULL), 0);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	frmr_free(mr, pl);
	free(snap);
	free(now);
}

/* --------------------------------------------------------- block lists */

/* Blocks of the sizes given at odd offsets from B_BLOCKS, gaps between. */
static void lay_blocks(struct layout *L, const uint64_t *sizes,
		       unsigned int n, uint64_t fbo, uint64_t tail,
		       uint64_t iova, size_t start)
{
	size_t at = start;
	uint64_t sum = 0;

	memset(L, 0, sizeof(*L));
	L->side = &B;
	L->n = n;
	for (unsigned int i = 0; i < n; i++) {
		L->off[i] = at;
		L->len[i] = sizes[i];
		sum += sizes[i];
		at += sizes[i] + 5 + 2 * i;     /* odd gaps, odd offsets */
	}
	L->fbo = fbo;
	L->length = sum - fbo - tail;
	L->iova = iova;
}

/* WRITE, READ and SEND (a receive through the MR's lkey) across the block
 * boundaries of L (key k). */
static void blocks_exercise(const struct layout *L, uint32_t k,
			    const char *what)
{
	const uint64_t len = L->length;
	uint64_t b0 = L->len[0] - L->fbo;   /* first boundary */

	write_ok(&L1, L, k, 0, (uint32_t)len, what);
	write_ok(&L1, L, k, 0, 5, what);
	write_ok(&L1, L, k, b0 - 1, 2, what);
	write_ok(&L1, L, k, b0, (uint32_t)(len - b0), what);
	write_ok(&L1, L, k, len - 20, 20, what);
	write_ok(&L1, L, k, len / 2 - 4097, 8193, what);
	read_ok(&L1, L, k, 0, (uint32_t)len, what);
	read_ok(&L1, L, k, 1, (uint32_t)len - 2, what);
	read_ok(&L1, L, k, b0 - 1, 3, what);
	refused(&L1, L->iova + len - 1, k, 2, "past the last block");
	refused(&L1, L->iova - 1, k, 2, "before the first block");
	/* a receive through the MR: the message lands across blocks */
	send_into(L, k, 3, (uint32_t)len - 3,
		  (uint32_t)len - 3 < 9000 ? (uint32_t)len - 3 : 9000,
		  "SEND into a block-list MR");
	/* and out of it: a WRITE from B through the MR's lkey */
	{
		struct ibv_send_wr wr;
		struct ibv_sge sge;

		wr_one(&wr, &sge, 72, IBV_WR_RDMA_WRITE, L->iova + 1,
		       (uint32_t)len - 1, k, addr_of(&A, A_DST), A.mr->rkey);
		post_send_ok(L1.b.qp, &wr);
		expect_wc(L1.b.scq, 72, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
		lay_copy(L, 1, A.shadow + A_DST, len - 1, false);
		check_both("WRITE from a block-list MR");
	}
}

static const uint64_t odd_blocks[] = { 1, 3, 4097, 13, 1, 700, 8191, 5, 2,
				       4096, 77 };

/*
 * ibv_exp_reg_mr_blocks: blocks of 1, 3, 4097, 13, ... bytes at odd
 * offsets with gaps between; addressed from an odd IOVA and zero-based;
 * blocks the process has not mapped, empty blocks, no blocks: refused.
 */
static void test_blocks_reg(void **state)
{
	const unsigned int n = VU_ARRAY_SIZE(odd_blocks);
	struct ibv_exp_mem_block blk[VU_ARRAY_SIZE(odd_blocks)];
	struct layout L;
	struct ibv_mr *mr;
	uint32_t k;

	(void)state;
	for (int z = 0; z < 2; z++) {
		lay_blocks(&L, odd_blocks, n, 0, 0,
			   z ? 0 : 0x3000000001ull, B_BLOCKS);
		for (unsigned int i = 0; i < n; i++) {
			blk[i].addr = addr_of(&B, L.off[i]);
			blk[i].length = L.len[i];
		}
		mr = ibv_exp_reg_mr_blocks(B.pd, blk, (int)n,
					   z ? 0x123456 : L.iova,
					   RW | (z ? IBV_ACCESS_ZERO_BASED : 0));
		if (!mr)
			fail_msg("ibv_exp_reg_mr_blocks: %s", strerror(errno));
		assert_int_equal(mr->lkey, mr->rkey);
		assert_int_equal(mr->length, L.length);
		blocks_exercise(&L, mr->rkey, z ? "block-list MR, zero-based" :
						  "block-list MR");
		if (z)
			refused(&L1, 0x123456, mr->rkey, 8,
				"a zero-based block MR at the IOVA given");
		/* a regular MR: invalidate is an error */
		local_inv_fails(&L1, &L1.b, mr->rkey, IBV_WC_LOC_QP_OP_ERR,
				"LOCAL_INV of a block-list MR");
		write_ok(&L1, &L, mr->rkey, 0, 8, "still valid");
		k = mr->rkey;
		assert_int_equal(ibv_dereg_mr(mr), 0);
		refused(&L1, L.iova, k, 8, "deregistered block MR");
	}
	/* refused: a block of memory the process cannot read (a page with
	 * no access: unlike a hole, nothing else can be mapped there
	 * meanwhile), an empty block, no blocks */
	{
		uint8_t *hole = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		assert_true(hole != MAP_FAILED);
		assert_int_equal(mprotect(hole + PAGE, PAGE, PROT_NONE), 0);
		blk[1].addr = (uint64_t)(uintptr_t)(hole + PAGE + 5);
		blk[1].length = 10;
		errno = 0;
		assert_null(ibv_exp_reg_mr_blocks(B.pd, blk, (int)n, 0, RW));
		assert_int_not_equal(errno, 0);
		blk[1].addr = (uint64_t)(uintptr_t)(hole + 100);
		blk[1].length = 2 * PAGE;       /* across the hole */
		errno = 0;
		assert_null(ibv_exp_reg_mr_blocks(B.pd, blk, (int)n, 0, RW));
		assert_int_not_equal(errno, 0);
		munmap(hole, 3 * PAGE);
		blk[1].addr = addr_of(&B, B_BLOCKS);
		blk[1].length = 0;
		errno = 0;
		assert_null(ibv_exp_reg_mr_blocks(B.pd, blk, (int)n, 0, RW));
		assert_int_not_equal(errno, 0);
		errno = 0;
		assert_null(ibv_exp_reg_mr_blocks(B.pd, blk, 0, 0, RW));
		assert_int_not_equal(errno, 0);
	}
	check_both("block-list MRs");
}

/* Fast register in block mode (IBV_EXP_FAST_REG_BLOCK_LIST): the same
 * checks, the MR starting 2 bytes into its first block; invalidated. */
static void test_blocks_fastreg(void **state)
{
	static const uint64_t sizes[] = { 3, 1, 4097, 13, 9000, 1, 2, 333 };
	const unsigned int n = VU_ARRAY_SIZE(sizes);
	struct ibv_exp_fast_reg_page_list *pl = pl_new((int)n);
	struct ibv_mr *mr = frmr_new(B.pd, (int)n);
	struct layout L;
	uint32_t k;

	(void)state;
	for (int z = 0; z < 2; z++) {
		lay_blocks(&L, sizes, n, 2, 4, z ? 0 : 0xd000000005ull,
			   B_BLOCKS + 40001);
		{
			struct ibv_exp_send_wr wr;

			fr_wr(&wr, ++next_id, mr, pl, &L, 0,
			      RW | (z ? IBV_ACCESS_ZERO_BASED : 0),
			      (uint8_t)(mr->rkey + 1),
			      IBV_EXP_FAST_REG_BLOCK_LIST);
			if (z)
				wr.fast_reg.iova_start = 0xd000000005ull;
			k = fast_reg_post(&L1.b, &wr, "fast reg, blocks");
		}
		blocks_exercise(&L, k, z ? "fast-reg blocks, zero-based" :
					   "fast-reg blocks");
		if (z)
			refused(&L1, 0xd000000005ull, k, 8,
				"zero-based: the iova_start is ignored");
		local_inv_ok(&L1.b, k);
		refused(&L1, L.iova, k, 8, "fast-reg blocks, invalidated");
	}
	/* an empty block, or a length past the blocks: an error */
	for (int c = 0; c < 2; c++) {
		struct ibv_exp_send_wr wr, *bad = NULL;
		int ret;

		lay_blocks(&L, sizes, n, 0, 0, 0x1000, B_BLOCKS);
		if (c == 0)
			L.len[3] = 0;
		fr_wr(&wr, ++next_id, mr, pl, &L, 0, RW,
		      (uint8_t)(mr->rkey + 1), IBV_EXP_FAST_REG_BLOCK_LIST);
		if (c == 1)
			wr.fast_reg.length = L.length + 1;
		ret = ibv_exp_post_send(L1.b.qp, &wr, &bad);
		post_refused(&L1, &L1.b, ret, wr.wr_id, IBV_WC_LOC_QP_OP_ERR,
			     "bad block list");
		refused(&L1, 0x1000, ibv_exp_update_fast_reg_key(
				mr->rkey, (uint8_t)(mr->rkey + 1)), 8,
			"a bad block list");
	}
	frmr_free(mr, pl);
}

/* ---------------------------------------------------------- zero-based */

/*
 * Zero-based MRs: ibv_reg_mr_iova with IOVA 0, ibv_reg_mr with
 * IBV_ACCESS_ZERO_BASED, fast register with IBV_ACCESS_ZERO_BASED (its
 * iova_start ignored). Addresses from 0; the virtual address refused.
 */
static void test_zero_based_mr(void **state)
{
	const size_t off = 2 * 1024 * 1024 + 12345;
	const uint64_t len = 3 * PAGE + 5;
	struct layout L;
	struct ibv_mr *mr;

	(void)state;
	for (int c = 0; c < 2; c++) {
		if (c == 0)
			mr = ibv_reg_mr_iova(B.pd, B.buf + off, len, 0, RW);
		else
			mr = ibv_reg_mr(B.pd, B.buf + off, len,
					RW | IBV_ACCESS_ZERO_BASED);
		if (!mr)
			fail_msg("%s: %s", c ? "ibv_reg_mr(ZERO_BASED)" :
			      "ibv_reg_mr_iova(0)", strerror(errno));
		lay_range(&L, &B, off, len, 0);
		zero_based_ok(&L, mr->rkey, addr_of(&B, off),
			      c ? "ibv_reg_mr(ZERO_BASED)" : "ibv_reg_mr_iova(0)");
		/* its lkey works from 0 too: a receive at MR address 1 */
		send_into(&L, mr->lkey, 1, 100, 100,
			  "SEND into a zero-based MR");
		assert_int_equal(ibv_dereg_mr(mr), 0);
	}
	/* fast register, zero-based, iova_start ignored */
	{
		struct ibv_exp_fast_reg_page_list *pl = pl_new(4);
		struct ibv_mr *fr = frmr_new(B.pd, 4);
		struct ibv_exp_send_wr wr;
		size_t offs[4];
		uint32_t k;

		pick_pages(offs, 4, 960, 32, true);
		lay_pages(&L, &B, offs, 4, PAGE, 9, 4 * PAGE - 20, 0);
		fr_wr(&wr, ++next_id, fr, pl, &L, PAGE,
		      RW | IBV_ACCESS_ZERO_BASED, (uint8_t)(fr->rkey + 1), 0);
		wr.fast_reg.iova_start = 0x777000;
		k = fast_reg_post(&L1.b, &wr, "zero-based fast reg");
		write_ok(&L1, &L, k, 0, (uint32_t)L.length,
			 "zero-based fast reg");
		read_ok(&L1, &L, k, PAGE - 10, 2, "zero-based fast reg");
		refused(&L1, 0x777000, k, 8, "the iova_start ignored");
		refused(&L1, L.length - 1, k, 2, "past a zero-based fast reg");
		local_inv_ok(&L1.b, k);
		refused(&L1, 0, k, 8, "zero-based fast reg, invalidated");
		assert_int_equal(ibv_dereg_mr(fr), 0);
		assert_int_equal(ibv_exp_free_fast_reg_page_list(pl), 0);
	}
}

/* --------------------------------------------------- other QP types */

/* A signaled WR on qp: EINVAL at post, or an error completion (then the
 * QP is taken through RESET again by the caller). true if refused. */
static bool refused_op(struct vu_ep *ep, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;
	int ret = ibv_post_send(ep->qp, wr, &bad);

	if (ret)
		return ret == EINVAL;
	wc = wait_wc(ep->scq, "an opcode the QP type has not");
	return wc.status != IBV_WC_SUCCESS;
}

/*
 * The operations per QP type. UD: FAST_REG_MR and LOCAL_INV (local
 * operations) work, the MR is used through an RC connection of the PD;
 * BIND_MW is refused. UC: binds of type 1 and 2 windows work and the
 * window takes UC WRITEs; after the window's invalidation a WRITE is
 * dropped (UC: the sender succeeds, nothing lands); SEND_WITH_INV is
 * refused.
 */
static void test_other_qp_types(void **state)
{
	struct ibv_exp_fast_reg_page_list *pl = pl_new(2);
	struct ibv_mr *mr = frmr_new(B.pd, 2);
	struct ibv_mw *mw2 = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	struct ibv_mw *mw1 = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	struct link U = { .name = "LU" };
	struct ibv_send_wr wr;
	struct vu_ep ud;
	size_t offs[2];
	struct layout L, W;
	uint32_t k;

	(void)state;
	assert_non_null(mw2);
	assert_non_null(mw1);
	/* UD */
	assert_int_equal(ep_make(&ud, &B, B.pd, false, IBV_QPT_UD), 0);
	assert_int_equal(vu_connect(ud.qp, NULL, &conn), 0);
	pick_pages(offs, 2, 980, 16, false);
	lay_pages(&L, &B, offs, 2, PAGE, 1, PAGE, 0xe000000000ull);
	k = fast_reg(&ud, mr, pl, &L, PAGE, RW, (uint8_t)(mr->rkey + 1), 0);
	write_ok(&L1, &L, k, 0, PAGE, "fast-registered on a UD QP");
	local_inv_ok(&ud, k);
	refused(&L1, L.iova, k, 8, "invalidated on a UD QP");
	bind_wr(&wr, 96, mw2, ibv_inc_rkey(mw2->rkey), B.mr, addr_of(&B, B_WIN),
		PAGE, IBV_ACCESS_REMOTE_WRITE);
	assert_true(refused_op(&ud, &wr));
	refused(&L1, addr_of(&B, B_WIN), wr.bind_mw.rkey, 8,
		"a bind posted on UD");
	vu_ep_destroy(&ud);

	/* UC */
	assert_int_equal(ep_make(&U.a, &A, A.pd, false, IBV_QPT_UC), 0);
	assert_int_equal(ep_make(&U.b, &B, B.pd, false, IBV_QPT_UC), 0);
	assert_int_equal(vu_connect_pair(U.a.qp, U.b.qp, &conn), 0);
	lay_range(&W, &B, B_WIN + 7, 2 * PAGE, addr_of(&B, B_WIN + 7));
	mw_bind_ok(&U.b, mw2, B.mr, W.iova, 2 * PAGE,
		   IBV_ACCESS_REMOTE_WRITE);
	write_ok(&U, &W, mw2->rkey, 0, 2 * PAGE, "type 2 window on UC");
	local_inv_ok(&U.b, mw2->rkey);
	fresh(&A, A_SRC, 64);
	assert_int_equal(rdma(&U, IBV_WR_RDMA_WRITE, A_SRC, 64, W.iova,
			      mw2->rkey), IBV_WC_SUCCESS);
	check_both("UC WRITE through an invalidated window: dropped");
	mw_bind_ok(&U.b, mw1, B.mr, W.iova, 2 * PAGE, IBV_ACCESS_REMOTE_WRITE);
	write_ok(&U, &W, mw1->rkey, 5, 100, "type 1 window on UC");
	mw_invalidate(&U.b, mw1);
	assert_int_equal(rdma(&U, IBV_WR_RDMA_WRITE, A_SRC, 64, W.iova,
			      mw1->rkey), IBV_WC_SUCCESS);
	check_both("UC WRITE through an unbound window: dropped");
	/* send with invalidate is RC only */
	{
		struct ibv_sge sge;

		wr_one(&wr, &sge, 97, IBV_WR_SEND_WITH_INV, addr_of(&A, A_SRC),
		       8, A.mr->lkey, 0, 0);
		wr.invalidate_rkey = B.mr->rkey;
		post_recv(U.b.qp, 98, &B, B_RECV, 64, B.mr->lkey, 0);
		assert_true(refused_op(&U.a, &wr));
		check_both("SEND_WITH_INV on UC");
	}
	link_close(&U);
	assert_int_equal(ibv_dealloc_mw(mw1), 0);
	assert_int_equal(ibv_dealloc_mw(mw2), 0);
	frmr_free(mr, pl);
}

/* ---------------------------------------------------------- random keys */

/*
 * Random keys against a device with live MRs and windows of every kind
 * and state (regular, zero-based, fast-registered valid, invalid and
 * invalidated, windows bound and unbound of every type): 2000 draws, a
 * WRITE or a READ each, at an address one of the live objects covers, with
 * a key none of them has (uniformly random, or a live index with another
 * consumer key): every one is refused and no byte changes. The live keys
 * still work afterwards.
 */
static void test_random_keys(void **state)
{
	enum { DRAWS = 2000, NOBJ = 6 };
	struct ibv_exp_fast_reg_page_list *pl = pl_new(4);
	struct ibv_mr *fr_valid = frmr_new(B.pd, 4);
	struct ibv_mr *fr_never = frmr_new(B.pd, 4);
	struct ibv_mr *fr_inv = frmr_new(B.pd, 4);
	struct ibv_mr *zb = ibv_reg_mr_iova(B.pd, B.buf + 100, 2 * PAGE, 0, RW);
	struct ibv_mw *w1 = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw *w1u = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw *w2a = ibv_alloc_mw(B.pd, IBV_EXP_MW_TYPE_2A);
	struct ibv_mw *w2b = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	struct ibv_mw *w2f = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	const unsigned int rw = IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_WRITE;
	struct layout Lo[NOBJ];
	uint32_t live[NOBJ], idx[NOBJ + 4];
	size_t offs[4];
	uint32_t kinv;
	long t0 = vu_now_ms();
	int nuniform = 0;

	(void)state;
	assert_non_null(zb);
	assert_non_null(w1);
	assert_non_null(w1u);
	assert_non_null(w2a);
	assert_non_null(w2b);
	assert_non_null(w2f);
	pick_pages(offs, 4, 200, 40, true);
	lay_pages(&Lo[0], &B, offs, 4, PAGE, 0, 4 * PAGE, 0xf000000000ull);
	live[0] = fast_reg(&L1.b, fr_valid, pl, &Lo[0], PAGE,
			   RW | IBV_ACCESS_MW_BIND,
			   (uint8_t)(fr_valid->rkey + 1), 0);
	kinv = fast_reg(&L1.b, fr_inv, pl, &Lo[0], PAGE, RW,
			(uint8_t)(fr_inv->rkey + 1), 0);
	local_inv_ok(&L1.b, kinv);
	lay_range(&Lo[1], &B, 0, BUF_LEN, addr_of(&B, 0));
	live[1] = B.mr->rkey;
	lay_range(&Lo[2], &B, 100, 2 * PAGE, 0);
	live[2] = zb->rkey;
	mw_bind_ok(&L1.b, w1, B.mr, addr_of(&B, B_WIN), PAGE, rw);
	lay_range(&Lo[3], &B, B_WIN, PAGE, addr_of(&B, B_WIN));
	live[3] = w1->rkey;
	mw_bind_ok(&L1.b, w2a, B.mr, addr_of(&B, B_WIN + PAGE), PAGE,
		   rw | IBV_ACCESS_ZERO_BASED);
	lay_range(&Lo[4], &B, B_WIN + PAGE, PAGE, 0);
	live[4] = w2a->rkey;
	mw_bind_ok(&L1.b, w2b, fr_valid, Lo[0].iova + 10, 2 * PAGE, rw);
	Lo[5] = Lo[0];
	Lo[5].fbo = 10;
	Lo[5].length = 2 * PAGE;
	Lo[5].iova = Lo[0].iova + 10;
	live[5] = w2b->rkey;
	/* the indices of an unbound type 1 and a never-bound type 2 window,
	 * of never-registered and invalidated MRs: their keys are dead */
	for (int i = 0; i < NOBJ; i++)
		idx[i] = live[i] >> 8;
	idx[NOBJ] = fr_never->rkey >> 8;
	idx[NOBJ + 1] = w1u->rkey >> 8;
	idx[NOBJ + 2] = w2f->rkey >> 8;
	idx[NOBJ + 3] = kinv >> 8;

	for (int d = 0; d < DRAWS; d++) {
		const struct layout *L = &Lo[rnd() % NOBJ];
		uint32_t key, len = 1 + (uint32_t)(rnd() % 64);
		uint64_t o = rnd() % (L->length - len + 1);
		bool is_live;
		enum ibv_wc_status st;
		enum ibv_wr_opcode op = d & 1 ? IBV_WR_RDMA_WRITE :
					IBV_WR_RDMA_READ;

		do {
			if (rnd() % 4 == 0) {
				key = (uint32_t)rnd();
				nuniform++;
			} else {
				/* a live or dead index, another key byte */
				key = idx[rnd() % (NOBJ + 4)] << 8 |
				      (uint32_t)(rnd() & 0xff);
			}
			is_live = false;
			for (int i = 0; i < NOBJ; i++)
				if (key == live[i])
					is_live = true;
		} while (is_live);
		fresh(&A, d & 1 ? A_SRC : A_DST, len);
		st = rdma(&L1, op, d & 1 ? A_SRC : A_DST, len, L->iova + o, key);
		if (st != IBV_WC_REM_ACCESS_ERR)
			fail_msg("draw %d: %s of %u bytes at 0x%" PRIx64 " with "
				 "key 0x%08x: %s", d, vu_opcode_str(op), len,
				 L->iova + o, key, st_str(st));
		if (memcmp(A.buf + A_DST, A.shadow + A_DST, 64))
			fail_msg("draw %d: a refused READ wrote A's buffer", d);
		if (d % 250 == 0)
			check_both("random keys");
	}
	check_both("random keys");
	print_message("(%d random-key draws (%d uniform) refused in %ld ms)\n",
		      DRAWS, nuniform, vu_now_ms() - t0);
	/* the live keys still work */
	for (int i = 0; i < NOBJ; i++) {
		write_ok(&L1, &Lo[i], live[i], 0, 32, "a live key after");
		read_ok(&L1, &Lo[i], live[i], 1, 31, "a live key after");
	}
	mw_invalidate(&L1.b, w1);
	local_inv_ok(&L1.b, w2a->rkey);
	local_inv_ok(&L1.b, w2b->rkey);
	local_inv_ok(&L1.b, live[0]);
	assert_int_equal(ibv_dealloc_mw(w1), 0);
	assert_int_equal(ibv_dealloc_mw(w1u), 0);
	assert_int_equal(ibv_dealloc_mw(w2a), 0);
	assert_int_equal(ibv_dealloc_mw(w2b), 0);
	assert_int_equal(ibv_dealloc_mw(w2f), 0);
	assert_int_equal(ibv_dereg_mr(zb), 0);
	assert_int_equal(ibv_dereg_mr(fr_valid), 0);
	assert_int_equal(ibv_dereg_mr(fr_never), 0);
	frmr_free(fr_inv, pl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_caps, test_setup),
		cmocka_unit_test_setup(test_fastreg_pages, test_setup),
		cmocka_unit_test_setup(test_fastreg_big_pages, test_setup),
		cmocka_unit_test_setup(test_fastreg_errors, test_setup),
		cmocka_unit_test_setup(test_fastreg_no_access, test_setup),
		cmocka_unit_test_setup(test_fastreg_pipelined, test_setup),
		cmocka_unit_test_setup(test_exp_post_interleaved, test_setup),
		cmocka_unit_test_setup(test_qp_ex_session, test_setup),
		cmocka_unit_test_setup(test_fence_local_inv, test_setup),
		cmocka_unit_test_setup(test_unfenced_local_inv, test_setup),
		cmocka_unit_test_setup(test_inv_vs_copy, test_setup),
		cmocka_unit_test_setup(test_send_with_inv, test_setup),
		cmocka_unit_test_setup(test_read_with_inv, test_setup),
		cmocka_unit_test_setup(test_mw_type1, test_setup),
		cmocka_unit_test_setup(test_mw_type2a, test_setup),
		cmocka_unit_test_setup(test_mw_type2b, test_setup),
		cmocka_unit_test_setup(test_mw_zero_based, test_setup),
		cmocka_unit_test_setup(test_mw_dies_with_mr, test_setup),
		cmocka_unit_test_setup(test_mw_inc_rkey, test_setup),
		cmocka_unit_test_setup(test_mw_bind_errors, test_setup),
		cmocka_unit_test_setup(test_blocks_reg, test_setup),
		cmocka_unit_test_setup(test_blocks_fastreg, test_setup),
		cmocka_unit_test_setup(test_zero_based_mr, test_setup),
		cmocka_unit_test_setup(test_other_qp_types, test_setup),
		cmocka_unit_test_setup(test_random_keys, test_setup),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
