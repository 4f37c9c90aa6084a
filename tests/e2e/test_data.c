// SPDX-License-Identifier: MIT
/*
 * The data-path matrix: every operation x size x SGE count x inline, on RC,
 * UC and UD, checking every byte that must land, every byte around it that
 * must not change, and every field of the completions.
 *
 * Two contexts in this process (two clients of the daemon): A is the
 * requester, B the responder. Each side has one large buffer, registered
 * once with every right, filled with its own pseudo-random "pristine"
 * pattern. A case names the ranges it expects to change (with what); every
 * other byte of both buffers must still equal the pristine copy afterwards.
 * Local SGEs sit at odd offsets with gaps between them, remote ranges at odd
 * offsets; a receive has slack after the message that must stay untouched.
 *
 * Run under tests/e2e/isolated.sh (a daemon of its own).
 */
#define _GNU_SOURCE
#include <endian.h>
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

#include <infiniband/verbs.h>

#include "vu.h"

#define MIB         (1u << 20)
#define MAX_MSG     (16u * MIB)
#define BUF_LEN     (MAX_MSG + MIB)   /* room for gaps and guards */
#define LOCAL_BASE  4097u             /* first local SGE: odd */
#define LOCAL_GAP   61u               /* untouched bytes between SGEs */
#define RECV_BASE   8195u
#define RECV_GAP    29u
#define RECV_SLACK  17u               /* past the message: untouched */
#define REMOTE_OFF  (3u * 4096u + 5u) /* target of RDMA: odd */
#define ATOMIC_OFF  (5u * 4096u + 8u) /* 8-byte aligned */
#define IMM_RECV_OFF 1003u            /* the receive a WRITE_WITH_IMM eats */
#define UD_GRH      40u
#define MAX_SEGS    80
#define WATCHDOG_S  100

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf, *pristine;
};

struct transport {
	const char *name;
	enum ibv_qp_type type;
	struct ibv_qp *qa, *qb;
	struct ibv_ah *ah;         /* UD: A's way to B */
	uint32_t send_sge, recv_sge, max_inline;
	uint32_t send_wr, recv_wr;   /* what the QPs really hold */
};

/* A range of a buffer that a case changes: want NULL = any content. */
struct seg {
	size_t off, len;
	const uint8_t *want;
};

struct piece {
	size_t off, len;
};

static struct side A, B;
static struct transport T[3] = {
	{ .name = "RC", .type = IBV_QPT_RC },
	{ .name = "UC", .type = IBV_QPT_UC },
	{ .name = "UD", .type = IBV_QPT_UD },
};
static uint8_t *msg;                   /* the bytes that travel */
static unsigned int mtu;
static uint32_t dev_max_sge, dev_max_inline;
static char casename[160];
static unsigned int ncases;

static void watchdog_fired(int sig)
{
	static const char m[] = "test_data: watchdog: a test did not finish "
				"in time\n";

	(void)sig;
	fflush(stdout);
	if (write(STDERR_FILENO, m, sizeof(m) - 1) < 0)
		_exit(2);
	_exit(1);
}

static void fill_random(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		uint64_t v = x * 0x2545f4914f6cdd1dull;
		memcpy(p + i, &v, 8);
	}
	for (; i < len; i++)
		p[i] = (uint8_t)(i * 131u + seed);
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int side_open(struct side *s, uint64_t seed)
{
	s->ctx = vu_open();
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->buf = map(BUF_LEN);
	s->pristine = map(BUF_LEN);
	if (!s->pd || !s->cq || !s->buf || !s->pristine)
		return -1;
	fill_random(s->pristine, BUF_LEN, seed);
	memcpy(s->buf, s->pristine, BUF_LEN);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC);
	if (!s->mr) {
		perror("ibv_reg_mr");
		return -1;
	}
	return 0;
}

static void side_close(struct side *s)
{
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	if (s->buf)
		munmap(s->buf, BUF_LEN);
	if (s->pristine)
		munmap(s->pristine, BUF_LEN);
	memset(s, 0, sizeof(*s));
}

static struct ibv_qp *make_qp(struct side *s, enum ibv_qp_type type,
			      struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = type;
	ia.sq_sig_all = 0;
	ia.cap.max_send_wr = 64;
	ia.cap.max_recv_wr = 64;
	ia.cap.max_send_sge = dev_max_sge;
	ia.cap.max_recv_sge = dev_max_sge;
	ia.cap.max_inline_data = dev_max_inline;
	qp = ibv_create_qp(s->pd, &ia);
	if (!qp) {
		fprintf(stderr, "ibv_create_qp(%d): %s\n", type,
			strerror(errno));
		return NULL;
	}
	*cap = ia.cap;
	return qp;
}

static int transport_open(struct transport *t)
{
	struct vu_conn c = vu_conn_default();
	struct ibv_qp_cap ca, cb;
	union ibv_gid gid;
	int ret;

	t->qa = make_qp(&A, t->type, &ca);
	t->qb = make_qp(&B, t->type, &cb);
	if (!t->qa || !t->qb)
		return -1;
	/* what the QPs really hold is at least what was asked */
	if (ca.max_send_sge < dev_max_sge || cb.max_recv_sge < dev_max_sge ||
	    ca.max_inline_data < dev_max_inline || ca.max_send_wr < 64 ||
	    cb.max_recv_wr < 64) {
		fprintf(stderr, "%s: QP caps below what was asked\n", t->name);
		return -1;
	}
	t->send_sge = dev_max_sge;
	t->recv_sge = dev_max_sge;
	t->max_inline = dev_max_inline;
	t->send_wr = ca.max_send_wr;
	t->recv_wr = cb.max_recv_wr;
	ret = vu_connect_pair(t->qa, t->qb, &c);
	if (ret) {
		fprintf(stderr, "%s: connect: %s\n", t->name, strerror(ret));
		return -1;
	}
	if (t->type == IBV_QPT_UD) {
		if (vu_gid(B.ctx, &gid))
			return -1;
		t->ah = vu_ah(A.pd, &gid);
		if (!t->ah) {
			perror("ibv_create_ah");
			return -1;
		}
	}
	return 0;
}

static void transport_close(struct transport *t)
{
	if (t->ah)
		ibv_destroy_ah(t->ah);
	if (t->qa)
		ibv_destroy_qp(t->qa);
	if (t->qb)
		ibv_destroy_qp(t->qb);
	t->ah = NULL;
	t->qa = t->qb = NULL;
}

static int group_setup(void **state)
{
	struct ibv_device_attr da;

	(void)state;
	signal(SIGALRM, watchdog_fired);
	alarm(WATCHDOG_S);
	msg = map(MAX_MSG + 2 * UD_GRH);
	if (!msg || side_open(&A, 1) || side_open(&B, 2))
		return -1;
	memset(&da, 0, sizeof(da));
	if (ibv_query_device(A.ctx, &da))
		return -1;
	dev_max_sge = (uint32_t)da.max_sge;
	if ((uint32_t)da.max_sge_rd < dev_max_sge)
		dev_max_sge = (uint32_t)da.max_sge_rd;
	if (dev_max_sge > 32)
		dev_max_sge = 32;
	/* the inline size the device reports (ibv_query_device has none):
	 * ask for a QP with the most the ABI allows and see */
	dev_max_inline = 512;
	{
		struct ibv_qp_init_attr ia;
		struct ibv_qp *qp;

		for (;;) {
			memset(&ia, 0, sizeof(ia));
			ia.send_cq = A.cq;
			ia.recv_cq = A.cq;
			ia.qp_type = IBV_QPT_RC;
			ia.cap.max_send_wr = 1;
			ia.cap.max_recv_wr = 1;
			ia.cap.max_send_sge = 1;
			ia.cap.max_recv_sge = 1;
			ia.cap.max_inline_data = dev_max_inline;
			qp = ibv_create_qp(A.pd, &ia);
			if (qp) {
				ibv_destroy_qp(qp);
				break;
			}
			if (dev_max_inline <= 16) {
				dev_max_inline = 0;
				break;
			}
			dev_max_inline /= 2;
		}
	}
	mtu = vu_mtu_bytes(vu_active_mtu(A.ctx));
	print_message("device: max_sge %u, max_inline %u, mtu %u\n",
		      dev_max_sge, dev_max_inline, mtu);
	for (unsigned int i = 0; i < VU_ARRAY_SIZE(T); i++)
		if (transport_open(&T[i]))
			return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (unsigned int i = 0; i < VU_ARRAY_SIZE(T); i++)
		transport_close(&T[i]);
	side_close(&A);
	side_close(&B);
	if (msg)
		munmap(msg, MAX_MSG + 2 * UD_GRH);
	print_message("%u cases\n", ncases);
	return 0;
}

static int test_setup(void **state)
{
	(void)state;
	alarm(WATCHDOG_S);
	return 0;
}

/* ---- layouts and checks ---- */

/* Split len bytes into n pieces from base, gap bytes apart. */
static void split(size_t len, unsigned int n, size_t base, size_t gap,
		  struct piece *p)
{
	size_t off = base;

	for (unsigned int i = 0; i < n; i++) {
		p[i].off = off;
		p[i].len = len / n + (i < len % n);
		off += p[i].len + gap;
	}
}

static size_t gather(const uint8_t *buf, const struct piece *p,
		     unsigned int n, uint8_t *out)
{
	size_t at = 0;

	for (unsigned int i = 0; i < n; i++) {
		memcpy(out + at, buf + p[i].off, p[i].len);
		at += p[i].len;
	}
	return at;
}

/* The segments a message of len bytes (from m; the first skip bytes of any
 * content) lands in when scattered over pieces p. */
static unsigned int scatter_segs(const struct piece *p, unsigned int n,
				 const uint8_t *m, size_t len, size_t skip,
				 struct seg *s)
{
	unsigned int ns = 0;
	size_t at = 0;

	for (unsigned int i = 0; i < n && at < len; i++) {
		size_t take = p[i].len < len - at ? p[i].len : len - at;
		size_t off = p[i].off;

		if (at < skip) {
			size_t k = skip - at < take ? skip - at : take;

			s[ns++] = (struct seg){ off, k, NULL };
			off += k;
			at += k;
			take -= k;
		}
		if (take) {
			s[ns++] = (struct seg){ off, take, m + at };
			at += take;
		}
	}
	assert_true(ns <= MAX_SEGS);
	return ns;
}

static void report_diff(const char *what, const uint8_t *buf,
			const uint8_t *want, size_t off, size_t len)
{
	size_t i;

	for (i = 0; i < len && buf[off + i] == want[i]; i++)
		;
	fail_msg("%s: %s: byte %zu (0x%zx) is 0x%02x, expected 0x%02x",
		 casename, what, off + i, off + i, buf[off + i], want[i]);
}

/* Every byte of s: the segments hold what they must, the rest is pristine. */
static void check_side(const char *name, const struct side *s,
		       const struct seg *segs, unsigned int n)
{
	char what[64];
	size_t pos = 0;

	for (unsigned int i = 0; i <= n; i++) {
		size_t end = i < n ? segs[i].off : BUF_LEN;

		assert_true(end >= pos);
		if (memcmp(s->buf + pos, s->pristine + pos, end - pos)) {
			snprintf(what, sizeof(what), "%s: outside the target",
				 name);
			report_diff(what, s->buf, s->pristine + pos, pos,
				    end - pos);
		}
		if (i == n)
			break;
		if (segs[i].want &&
		    memcmp(s->buf + segs[i].off, segs[i].want, segs[i].len)) {
			snprintf(what, sizeof(what), "%s: in the target", name);
			report_diff(what, s->buf, segs[i].want, segs[i].off,
				    segs[i].len);
		}
		pos = segs[i].off + segs[i].len;
	}
}

static void restore(struct side *s, const struct seg *segs, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		memcpy(s->buf + segs[i].off, s->pristine + segs[i].off,
		       segs[i].len);
}

static void to_sges(const struct side *s, const struct piece *p,
		    unsigned int n, struct ibv_sge *sge)
{
	for (unsigned int i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)(s->buf + p[i].off);
		sge[i].length = (uint32_t)p[i].len;
		sge[i].lkey = s->mr->lkey;
	}
}

static void expect_nothing_more(void)
{
	struct ibv_wc wc;

	if (ibv_poll_cq(A.cq, 1, &wc) != 0)
		fail_msg("%s: an extra completion on A (wr_id %" PRIu64
			 ", status %s)", casename, wc.wr_id,
			 ibv_wc_status_str(wc.status));
	if (ibv_poll_cq(B.cq, 1, &wc) != 0)
		fail_msg("%s: an extra completion on B (wr_id %" PRIu64
			 ", status %s)", casename, wc.wr_id,
			 ibv_wc_status_str(wc.status));
}

static void wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, const char *who)
{
	memset(wc, 0, sizeof(*wc));
	if (vu_poll(cq, wc, 1, VU_WAIT_MS) != 1)
		fail_msg("%s: no %s completion within %d ms", casename, who,
			 VU_WAIT_MS);
	if (wc->status != IBV_WC_SUCCESS)
		fail_msg("%s: %s completion status %s (%d), vendor_err %u",
			 casename, who, ibv_wc_status_str(wc->status),
			 wc->status, wc->vendor_err);
}

static enum ibv_wc_opcode send_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM: return IBV_WC_SEND;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
	default: return (enum ibv_wc_opcode)-1;
	}
}

/* ---- one case ---- */

struct xcase {
	struct transport *t;
	enum ibv_wr_opcode op;
	size_t size;
	unsigned int nsge;
	bool inl;
};

static void run_case(const struct xcase *c)
{
	struct transport *t = c->t;
	struct piece lp[32], rp[33];
	struct seg asegs[MAX_SEGS], bsegs[MAX_SEGS];
	unsigned int na = 0, nb = 0, nrsge = c->nsge;
	struct ibv_sge sge[32], rsge[33];
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_wc wc;
	bool is_send = c->op == IBV_WR_SEND || c->op == IBV_WR_SEND_WITH_IMM;
	bool has_imm = c->op == IBV_WR_SEND_WITH_IMM ||
		       c->op == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool eats_recv = is_send || c->op == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool ud = t->type == IBV_QPT_UD;
	uint32_t imm = htobe32(0xc0de0000u | (ncases & 0xffff));
	uint64_t wr_id = 0x5eed000000000000ull | ncases;
	size_t grh = ud ? UD_GRH : 0;
	int ret;

	snprintf(casename, sizeof(casename), "%s %s size %zu, %u SGE%s%s",
		 t->name, vu_opcode_str(c->op), c->size, c->nsge,
		 c->nsge == 1 ? "" : "s", c->inl ? ", inline" : "");
	ncases++;
	assert_true(c->nsge >= 1 && c->nsge <= 32);

	/* the local side: where the message comes from (or goes to) */
	split(c->size, c->nsge, LOCAL_BASE, LOCAL_GAP, lp);
	to_sges(&A, lp, c->nsge, sge);

	/* the receive a SEND or a WRITE_WITH_IMM consumes */
	if (eats_recv) {
		if (is_send) {
			/* the message (after a UD GRH) over nsge pieces, the
			 * last one RECV_SLACK longer than needed */
			split(grh + c->size, nrsge, RECV_BASE, RECV_GAP, rp);
			rp[nrsge - 1].len += RECV_SLACK;
		} else {
			rp[0] = (struct piece){ IMM_RECV_OFF, 64 };
			nrsge = 1;
		}
		to_sges(&B, rp, nrsge, rsge);
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = wr_id ^ 0xffff;
		rwr.sg_list = rsge;
		rwr.num_sge = (int)nrsge;
		ret = ibv_post_recv(t->qb, &rwr, &rbad);
		if (ret)
			fail_msg("%s: ibv_post_recv: %s", casename,
				 strerror(ret));
	}

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = sge;
	wr.num_sge = (int)c->nsge;
	wr.opcode = c->op;
	wr.send_flags = IBV_SEND_SIGNALED | (c->inl ? IBV_SEND_INLINE : 0);
	if (has_imm)
		wr.imm_data = imm;
	switch (c->op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		wr.wr.rdma.remote_addr = (uintptr_t)(B.buf + REMOTE_OFF);
		wr.wr.rdma.rkey = B.mr->rkey;
		break;
	default:
		break;
	}
	if (ud) {
		wr.wr.ud.ah = t->ah;
		wr.wr.ud.remote_qpn = t->qb->qp_num;
		wr.wr.ud.remote_qkey = 0x11111111;
	}

	/* what travels */
	if (c->op == IBV_WR_RDMA_READ)
		memcpy(msg, B.pristine + REMOTE_OFF, c->size);
	else
		gather(A.pristine, lp, c->nsge, msg);

	ret = ibv_post_send(t->qa, &wr, &bad);
	if (ret)
		fail_msg("%s: ibv_post_send: %s", casename, strerror(ret));
	if (c->inl)	/* the buffers are ours again at once */
		for (unsigned int i = 0; i < c->nsge; i++)
			memset(A.buf + lp[i].off, 0xee, lp[i].len);

	/* the requester's completion */
	wait_wc(A.cq, &wc, "send");
	if (wc.wr_id != wr_id)
		fail_msg("%s: send wr_id %#" PRIx64 ", expected %#" PRIx64,
			 casename, wc.wr_id, wr_id);
	if (wc.opcode != send_wc_opcode(c->op))
		fail_msg("%s: send opcode %d, expected %d", casename,
			 wc.opcode, send_wc_opcode(c->op));
	if (wc.qp_num != t->qa->qp_num)
		fail_msg("%s: send qp_num %u, expected %u", casename,
			 wc.qp_num, t->qa->qp_num);
	if (c->op == IBV_WR_RDMA_READ && wc.byte_len != c->size)
		fail_msg("%s: read byte_len %u, expected %zu", casename,
			 wc.byte_len, c->size);

	/* the responder's */
	if (eats_recv) {
		wait_wc(B.cq, &wc, "receive");
		if (wc.wr_id != (wr_id ^ 0xffff))
			fail_msg("%s: receive wr_id %#" PRIx64, casename,
				 wc.wr_id);
		if (wc.opcode != (is_send ? IBV_WC_RECV :
				  IBV_WC_RECV_RDMA_WITH_IMM))
			fail_msg("%s: receive opcode %d", casename, wc.opcode);
		if (wc.byte_len != grh + c->size)
			fail_msg("%s: receive byte_len %u, expected %zu",
				 casename, wc.byte_len, grh + c->size);
		if (wc.qp_num != t->qb->qp_num)
			fail_msg("%s: receive qp_num %u, expected %u",
				 casename, wc.qp_num, t->qb->qp_num);
		if (!!(wc.wc_flags & IBV_WC_WITH_IMM) != has_imm)
			fail_msg("%s: receive wc_flags %#x", casename,
				 wc.wc_flags);
		if (has_imm && wc.imm_data != imm)
			fail_msg("%s: imm_data %#x, expected %#x", casename,
				 be32toh(wc.imm_data), be32toh(imm));
		if (!!(wc.wc_flags & IBV_WC_GRH) != ud)
			fail_msg("%s: receive wc_flags %#x (GRH %s expected)",
				 casename, wc.wc_flags, ud ? "" : "not");
		if (ud && wc.src_qp != t->qa->qp_num)
			fail_msg("%s: src_qp %u, expected %u", casename,
				 wc.src_qp, t->qa->qp_num);
	}

	/* the bytes: A's own */
	if (c->inl)
		for (unsigned int i = 0; i < c->nsge; i++)
			memcpy(A.buf + lp[i].off, A.pristine + lp[i].off,
			       lp[i].len);
	if (c->op == IBV_WR_RDMA_READ)
		na = scatter_segs(lp, c->nsge, msg, c->size, 0, asegs);
	check_side("A", &A, asegs, na);
	/* ... and B's */
	if (is_send) {
		if (grh) { /* the message after the GRH */
			memmove(msg + grh, msg, c->size);
			memset(msg, 0, grh);
		}
		nb = scatter_segs(rp, nrsge, msg, grh + c->size, grh, bsegs);
	} else if (c->op == IBV_WR_RDMA_WRITE ||
		   c->op == IBV_WR_RDMA_WRITE_WITH_IMM) {
		if (c->size)
			bsegs[nb++] = (struct seg){ REMOTE_OFF, c->size, msg };
	}
	check_side("B", &B, bsegs, nb);
	restore(&A, asegs, na);
	restore(&B, bsegs, nb);
	expect_nothing_more();
}

/* ---- the matrix ---- */

static const size_t sizes[] = {
	0, 1, 63, 64, 4095, 4096, 1u * MIB, 16u * MIB,
};

static void matrix(struct transport *t, enum ibv_wr_opcode op)
{
	unsigned int counts[3] = { 1, 2, t->send_sge };
	bool can_inline = op != IBV_WR_RDMA_READ;

	for (unsigned int si = 0; si < VU_ARRAY_SIZE(sizes); si++) {
		size_t size = sizes[si];

		if (t->type == IBV_QPT_UD && size > mtu)
			continue;
		for (unsigned int k = 0; k < 3; k++) {
			struct xcase c = { t, op, size, counts[k], false };

			run_case(&c);
			if (can_inline && size <= t->max_inline) {
				c.inl = true;
				run_case(&c);
			}
		}
	}
	/* every length the post fast path copies inline by hand (2..17) */
	for (size_t size = 2; can_inline && size <= 17 && size <= t->max_inline;
	     size++) {
		struct xcase c = { t, op, size, 1, true };

		run_case(&c);
		c.nsge = 2;
		run_case(&c);
	}
	if (t->type == IBV_QPT_UD) {
		/* the largest messages that fit one packet */
		for (unsigned int k = 0; k < 3; k++) {
			struct xcase c = { t, op, mtu, counts[k], false };

			run_case(&c);
			c.size = mtu - 1;
			run_case(&c);
		}
	}
}

#define OP_TEST(tp, idx, op)                                                  \
	static void test_##tp##_##op(void **state)                            \
	{                                                                     \
		(void)state;                                                  \
		matrix(&T[idx], IBV_WR_##op);                                 \
	}

OP_TEST(rc, 0, SEND)
OP_TEST(rc, 0, SEND_WITH_IMM)
OP_TEST(rc, 0, RDMA_WRITE)
OP_TEST(rc, 0, RDMA_WRITE_WITH_IMM)
OP_TEST(rc, 0, RDMA_READ)
OP_TEST(uc, 1, SEND)
OP_TEST(uc, 1, SEND_WITH_IMM)
OP_TEST(uc, 1, RDMA_WRITE)
OP_TEST(uc, 1, RDMA_WRITE_WITH_IMM)
OP_TEST(ud, 2, SEND)
OP_TEST(ud, 2, SEND_WITH_IMM)

/* ---- atomics: 8 bytes, one SGE ---- */

static void atomic_case(enum ibv_wr_opcode op, uint64_t compare_add,
			uint64_t swap, size_t local_off, size_t remote_off)
{
	struct transport *t = &T[0];
	uint64_t old, now = 0, wr_id = 0xa70000000000ull | ncases;
	struct seg asegs[1], bsegs[1];
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	uint8_t want_old[8], want_new[8];
	int ret;

	snprintf(casename, sizeof(casename), "RC %s %#" PRIx64 "/%#" PRIx64
		 " at +%zu", vu_opcode_str(op), compare_add, swap, remote_off);
	ncases++;
	memcpy(&old, B.pristine + remote_off, 8);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		now = old + compare_add;
	else
		now = old == compare_add ? swap : old;
	memcpy(want_old, &old, 8);
	memcpy(want_new, &now, 8);

	sge.addr = (uintptr_t)(A.buf + local_off);
	sge.length = 8;
	sge.lkey = A.mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = (uintptr_t)(B.buf + remote_off);
	wr.wr.atomic.rkey = B.mr->rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	ret = ibv_post_send(t->qa, &wr, &bad);
	if (ret)
		fail_msg("%s: ibv_post_send: %s", casename, strerror(ret));
	wait_wc(A.cq, &wc, "atomic");
	if (wc.wr_id != wr_id)
		fail_msg("%s: wr_id %#" PRIx64, casename, wc.wr_id);
	if (wc.opcode != send_wc_opcode(op))
		fail_msg("%s: opcode %d", casename, wc.opcode);
	if (wc.byte_len != 8)
		fail_msg("%s: byte_len %u, expected 8", casename, wc.byte_len);
	asegs[0] = (struct seg){ local_off, 8, want_old };
	bsegs[0] = (struct seg){ remote_off, 8, want_new };
	check_side("A", &A, asegs, 1);
	check_side("B", &B, bsegs, 1);
	restore(&A, asegs, 1);
	restore(&B, bsegs, 1);
	expect_nothing_more();
}

static void test_rc_atomics(void **state)
{
	uint64_t old;

	(void)state;
	memcpy(&old, B.pristine + ATOMIC_OFF, 8);
	/* local sinks at odd and aligned offsets, remote targets aligned */
	atomic_case(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, LOCAL_BASE, ATOMIC_OFF);
	atomic_case(IBV_WR_ATOMIC_FETCH_AND_ADD, 0x0123456789abcdefull, 0,
		    4096, ATOMIC_OFF + 8);
	atomic_case(IBV_WR_ATOMIC_FETCH_AND_ADD, ~0ull, 0, LOCAL_BASE,
		    ATOMIC_OFF + 4096);	/* wraps: subtracts 1 */
	atomic_case(IBV_WR_ATOMIC_FETCH_AND_ADD, 0, 0, LOCAL_BASE,
		    BUF_LEN - 8);	/* the MR's last 8 bytes */
	/* compare matches: swapped */
	atomic_case(IBV_WR_ATOMIC_CMP_AND_SWP, old, 0xfeedfacecafebeefull,
		    LOCAL_BASE, ATOMIC_OFF);
	/* compare does not: unchanged, the old value returned */
	atomic_case(IBV_WR_ATOMIC_CMP_AND_SWP, old + 1, 0xfeedfacecafebeefull,
		    LOCAL_BASE, ATOMIC_OFF);
	memcpy(&old, B.pristine, 8);
	atomic_case(IBV_WR_ATOMIC_CMP_AND_SWP, old, 0, 4096 + 8, 0);
}

/* Sequences of fetch-and-add on one word: each sees the one before. */
static void test_rc_atomic_sequence(void **state)
{
	struct transport *t = &T[0];
	struct ibv_send_wr wr[16], *bad;
	struct ibv_sge sge[16];
	struct ibv_wc wc[16];
	uint64_t base, got, final;
	int i, n;

	(void)state;
	snprintf(casename, sizeof(casename), "RC 16 chained FETCH_AND_ADD");
	memcpy(&base, B.pristine + ATOMIC_OFF, 8);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 16; i++) {
		sge[i].addr = (uintptr_t)(A.buf + 4096 + 8 * (size_t)i);
		sge[i].length = 8;
		sge[i].lkey = A.mr->lkey;
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.atomic.remote_addr = (uintptr_t)(B.buf + ATOMIC_OFF);
		wr[i].wr.atomic.rkey = B.mr->rkey;
		wr[i].wr.atomic.compare_add = 1ull << i;
		wr[i].next = i < 15 ? &wr[i + 1] : NULL;
	}
	assert_int_equal(ibv_post_send(t->qa, wr, &bad), 0);
	n = vu_poll(A.cq, wc, 16, VU_WAIT_MS);
	assert_int_equal(n, 16);
	for (i = 0; i < 16; i++) {
		assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[i].wr_id, i);
		memcpy(&got, A.buf + 4096 + 8 * (size_t)i, 8);
		assert_true(got == base + ((1ull << i) - 1));
	}
	memcpy(&final, B.buf + ATOMIC_OFF, 8);
	assert_true(final == base + 0xffff);
	memcpy(A.buf + 4096, A.pristine + 4096, 8 * 16);
	memcpy(B.buf + ATOMIC_OFF, B.pristine + ATOMIC_OFF, 8);
	check_side("A", &A, NULL, 0);
	check_side("B", &B, NULL, 0);
}

/*
 * One post of a chain mixing every RC operation, all signaled: completions
 * in posting order, with their opcodes; every byte as for one at a time.
 */
static void test_rc_chain(void **state)
{
	enum { N = 7 };
	static const enum ibv_wr_opcode ops[N] = {
		IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_SEND_WITH_IMM,
		IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND,
	};
	struct transport *t = &T[0];
	struct ibv_send_wr wr[N], *bad;
	struct ibv_recv_wr rwr[4], *rbad;
	struct ibv_sge sge[N], rsge[4];
	struct ibv_wc wc[N];
	struct seg asegs[2], bsegs[8];
	uint8_t old8[8], new8[8];
	unsigned int na = 0, nb = 0, nr = 0;
	uint64_t old;
	int i, n;

	(void)state;
	snprintf(casename, sizeof(casename), "RC mixed chain");
	memset(wr, 0, sizeof(wr));
	memset(rwr, 0, sizeof(rwr));
	for (i = 0; i < N; i++) {
		/* each WR its own 1000 bytes of A (atomics: 8) */
		size_t loff = 4096 + 2048 * (size_t)i + 1;
		size_t roff = 65536 + 2048 * (size_t)i + 3;

		sge[i].addr = (uintptr_t)(A.buf + loff);
		sge[i].length = 1000;
		sge[i].lkey = A.mr->lkey;
		wr[i].wr_id = 100 + (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = ops[i];
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].imm_data = htobe32(0xabc00000u + (uint32_t)i);
		wr[i].next = i < N - 1 ? &wr[i + 1] : NULL;
		switch (ops[i]) {
		case IBV_WR_SEND:
		case IBV_WR_SEND_WITH_IMM:
		case IBV_WR_RDMA_WRITE_WITH_IMM: {
			/* a receive of 1000 bytes at B roff (WRITE_WITH_IMM:
			 * unused) */
			rsge[nr].addr = (uintptr_t)(B.buf + roff + 1024 * 64);
			rsge[nr].length = 1000;
			rsge[nr].lkey = B.mr->lkey;
			rwr[nr].wr_id = 200 + (uint64_t)i;
			rwr[nr].sg_list = &rsge[nr];
			rwr[nr].num_sge = 1;
			rwr[nr].next = NULL;
			if (nr)
				rwr[nr - 1].next = &rwr[nr];
			if (ops[i] != IBV_WR_RDMA_WRITE_WITH_IMM)
				bsegs[nb++] = (struct seg){
					roff + 1024 * 64, 1000,
					A.pristine + loff };
			nr++;
			if (ops[i] != IBV_WR_RDMA_WRITE_WITH_IMM)
				break;
		}
			/* fall through */
		case IBV_WR_RDMA_WRITE:
			wr[i].wr.rdma.remote_addr = (uintptr_t)(B.buf + roff);
			wr[i].wr.rdma.rkey = B.mr->rkey;
			bsegs[nb++] = (struct seg){ roff, 1000,
						    A.pristine + loff };
			break;
		case IBV_WR_RDMA_READ:
			wr[i].wr.rdma.remote_addr = (uintptr_t)(B.buf + roff);
			wr[i].wr.rdma.rkey = B.mr->rkey;
			asegs[na++] = (struct seg){ loff, 1000,
						    B.pristine + roff };
			break;
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			sge[i].length = 8;
			wr[i].wr.atomic.remote_addr =
				(uintptr_t)(B.buf + ATOMIC_OFF);
			wr[i].wr.atomic.rkey = B.mr->rkey;
			wr[i].wr.atomic.compare_add = 5;
			memcpy(&old, B.pristine + ATOMIC_OFF, 8);
			memcpy(old8, &old, 8);
			old += 5;
			memcpy(new8, &old, 8);
			asegs[na++] = (struct seg){ loff, 8, old8 };
			break;
		default:
			break;
		}
	}
	/* the B segments in address order (receives sit 64 KiB up) */
	bsegs[nb++] = (struct seg){ ATOMIC_OFF, 8, new8 };
	for (unsigned int x = 0; x < nb; x++)
		for (unsigned int y = x + 1; y < nb; y++)
			if (bsegs[y].off < bsegs[x].off) {
				struct seg tmp = bsegs[x];

				bsegs[x] = bsegs[y];
				bsegs[y] = tmp;
			}
	assert_int_equal(ibv_post_recv(t->qb, rwr, &rbad), 0);
	assert_int_equal(ibv_post_send(t->qa, wr, &bad), 0);
	n = vu_poll(A.cq, wc, N, VU_WAIT_MS);
	assert_int_equal(n, N);
	for (i = 0; i < N; i++) {
		if (wc[i].status != IBV_WC_SUCCESS)
			fail_msg("WR %d: %s", i,
				 ibv_wc_status_str(wc[i].status));
		assert_int_equal(wc[i].wr_id, 100 + i);
		assert_int_equal(wc[i].opcode, send_wc_opcode(ops[i]));
	}
	n = vu_poll(B.cq, wc, (int)nr, VU_WAIT_MS);
	assert_int_equal(n, nr);
	for (i = 0; i < (int)nr; i++) {
		assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[i].wr_id, rwr[i].wr_id);
		assert_int_equal(wc[i].byte_len, 1000);
	}
	check_side("A", &A, asegs, na);
	check_side("B", &B, bsegs, nb);
	restore(&A, asegs, na);
	restore(&B, bsegs, nb);
	expect_nothing_more();
}

/*
 * More sends than the send queue holds, in one post, while the first waits
 * for a receive (RNR, retried forever): the post takes what fits and fails
 * with ENOMEM at the first WR that does not. Then receives trickle in (as
 * many as the receive queue holds at a time) and every send lands, in order.
 */
#define QF_MAX 192
static void test_rc_queue_full(void **state)
{
	struct transport *t = &T[0];
	static struct ibv_send_wr wr[QF_MAX];
	static struct ibv_recv_wr rwr[QF_MAX];
	static struct ibv_sge sge[QF_MAX], rsge[QF_MAX];
	struct ibv_send_wr *bad = NULL;
	struct ibv_recv_wr *rbad;
	struct ibv_wc wc[16];
	int total, i, n, ret, posted = 0, recvd = 0, sent = 0;
	long end;

	(void)state;
	snprintf(casename, sizeof(casename), "RC queue full");
	if (t->send_wr + 32 > QF_MAX || t->send_wr > 200)
		skip();
	total = (int)t->send_wr + 32;
	memset(wr, 0, sizeof(wr));
	memset(rwr, 0, sizeof(rwr));
	for (i = 0; i < total; i++) {
		sge[i].addr = (uintptr_t)(A.buf + 4096 + 64 * (size_t)i);
		sge[i].length = 64;
		sge[i].lkey = A.mr->lkey;
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < total - 1 ? &wr[i + 1] : NULL;
		rsge[i].addr = (uintptr_t)(B.buf + 65536 + 64 * (size_t)i);
		rsge[i].length = 64;
		rsge[i].lkey = B.mr->lkey;
		rwr[i].wr_id = (uint64_t)i;
		rwr[i].sg_list = &rsge[i];
		rwr[i].num_sge = 1;
	}
	ret = ibv_post_send(t->qa, wr, &bad);
	assert_int_equal(ret, ENOMEM);
	assert_non_null(bad);
	n = (int)(bad - wr);
	print_message("a %u-deep send queue took %d of %d WRs\n", t->send_wr,
		      n, total);
	assert_in_range(n, t->send_wr, total - 1);
	for (end = vu_now_ms() + VU_WAIT_MS; recvd < n || sent < n;) {
		int k;

		/* keep the receive queue as full as it may be */
		while (posted < n && posted - recvd < (int)t->recv_wr) {
			assert_int_equal(ibv_post_recv(t->qb, &rwr[posted],
						       &rbad), 0);
			posted++;
		}
		k = ibv_poll_cq(B.cq, 16, wc);
		assert_true(k >= 0);
		for (i = 0; i < k; i++, recvd++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				fail_msg("receive %d: %s", recvd,
					 ibv_wc_status_str(wc[i].status));
			assert_int_equal(wc[i].wr_id, recvd);
			assert_int_equal(wc[i].byte_len, 64);
		}
		k = ibv_poll_cq(A.cq, 16, wc);
		assert_true(k >= 0);
		for (i = 0; i < k; i++, sent++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				fail_msg("send %d: %s", sent,
					 ibv_wc_status_str(wc[i].status));
			assert_int_equal(wc[i].wr_id, sent);
		}
		if (vu_now_ms() > end)
			fail_msg("%d of %d sends, %d receives completed",
				 sent, n, recvd);
	}
	{
		struct seg bs = { 65536, 64 * (size_t)n, A.pristine + 4096 };

		check_side("A", &A, NULL, 0);
		check_side("B", &B, &bs, 1);
		restore(&B, &bs, 1);
	}
	expect_nothing_more();
}

int main(void)
{
#define T_(f) cmocka_unit_test_setup(f, test_setup)
	const struct CMUnitTest tests[] = {
		T_(test_rc_SEND),
		T_(test_rc_SEND_WITH_IMM),
		T_(test_rc_RDMA_WRITE),
		T_(test_rc_RDMA_WRITE_WITH_IMM),
		T_(test_rc_RDMA_READ),
		T_(test_rc_atomics),
		T_(test_rc_atomic_sequence),
		T_(test_rc_chain),
		T_(test_rc_queue_full),
		T_(test_uc_SEND),
		T_(test_uc_SEND_WITH_IMM),
		T_(test_uc_RDMA_WRITE),
		T_(test_uc_RDMA_WRITE_WITH_IMM),
		T_(test_ud_SEND),
		T_(test_ud_SEND_WITH_IMM),
	};

	/* SV_TEST_FILTER=pattern runs only the matching tests */
	if (getenv("SV_TEST_FILTER"))
		cmocka_set_test_filter(getenv("SV_TEST_FILTER"));
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
