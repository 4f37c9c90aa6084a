// SPDX-License-Identifier: MIT
/*
 * Device memory (issue 23, Deliver 2) through the verbs, on one host or
 * across two:
 *
 *   test_dm                    the API's edges, then both sides here,
 *                              through 127.0.0.1
 *   test_dm server PORT        the side whose DM is the target
 *   test_dm client HOST PORT   the side that posts
 *
 * The edges: max_dm_size reported; allocations refused (length 0, more
 * than max_dm_size, an unknown comp_mask, an alignment no offset has);
 * the device's DM used up and given back; fresh DM reads zero; copies in
 * and out, at the bounds and past them (EFAULT, nothing written), at
 * offsets and lengths that are not multiples of 4 (EINVAL, as mlx5);
 * ibv_reg_dm_mr refused without IBV_ACCESS_ZERO_BASED, past the DM's end,
 * with another context's PD; an empty one taken (as mlx5 takes it); a DM with an MR over it is busy; rereg of a
 * DM MR refused; five forked children and their parent allocate and copy
 * on the one context they share, at once; the DM of a process that exits
 * without freeing it is given back.
 *
 * The traffic, each side with a DM MR and a malloc'd MR, every byte
 * checked: WRITE from DM into the peer's DM; READ of the peer's DM into
 * malloc'd memory and into DM; SEND from DM into a receive posted on the
 * peer's DM; WRITE from malloc'd memory into DM; FETCH_ADD and CMP_SWAP on
 * a word of the peer's DM, results into DM; a WRITE past the peer's DM MR
 * fails with IBV_WC_REM_ACCESS_ERR and writes nothing. The server checks
 * its DM at the end through ibv_memcpy_from_dm.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define CHECK VU_CHECK

#define DM_LEN  (256u << 10)  /* each side's DM */
#define PIECE   (32u << 10)   /* one transfer: several packets on the wire */
#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |           \
		 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* Where things lie in the server's DM (zero-based offsets). */
enum {
	S_WRITE = 0,            /* WRITE from the client's DM */
	S_SEND = 1 * PIECE,     /* SEND from the client's DM */
	S_WMAL = 2 * PIECE,     /* WRITE from the client's malloc'd memory */
	S_READ = 3 * PIECE,     /* the server's pattern, READ by the client */
	S_ATOM = 4 * PIECE,     /* the atomics' word */
	S_TAIL = 5 * PIECE,     /* untouched: must stay zero */
};

/* What the server tells the client. */
struct target {
	struct vu_addr qp;
	uint32_t rkey;
	uint32_t mr_len;
};

#define pat vu_pat
#define fill vu_fill
#define expect vu_expect

static struct ibv_dm *dm_alloc(struct ibv_context *ctx, size_t len)
{
	struct ibv_alloc_dm_attr a = { .length = len };

	return ibv_alloc_dm(ctx, &a);
}

/* ---------------- the API's edges ---------------- */

/* n rounds of alloc, copy in, copy out, free on ctx: 0, or exit 1. */
static void dm_rounds(struct ibv_context *ctx, unsigned int tag, int n)
{
	uint8_t in[256], out[256];

	fill(in, tag, sizeof(in));
	for (int i = 0; i < n; i++) {
		struct ibv_dm *dm = dm_alloc(ctx, 64 << 10);

		CHECK(dm, "round %d: ibv_alloc_dm: %s", i, strerror(errno));
		CHECK(!ibv_memcpy_to_dm(dm, 4096, in, sizeof(in)) &&
		      !ibv_memcpy_from_dm(out, dm, 4096, sizeof(out)) &&
		      !memcmp(in, out, sizeof(in)), "round %d: copies", i);
		CHECK(!ibv_free_dm(dm), "round %d: ibv_free_dm", i);
	}
}

/* A context inherited by fork is shared, as the kernel's uverbs file is:
 * children and parent allocate on it at once (rdma-core's
 * test_multi_process_alloc_dm does the same). */
static void forked_users(struct ibv_context *ctx)
{
	pid_t kid[5];

	fflush(stdout);
	for (unsigned int i = 0; i < VU_ARRAY_SIZE(kid); i++) {
		kid[i] = fork();
		CHECK(kid[i] >= 0, "fork");
		if (!kid[i]) {
			dm_rounds(ctx, i + 10, 40);
			_exit(0);
		}
	}
	dm_rounds(ctx, 9, 40);
	for (unsigned int i = 0; i < VU_ARRAY_SIZE(kid); i++) {
		int st;

		CHECK(waitpid(kid[i], &st, 0) == kid[i] && WIFEXITED(st) &&
		      !WEXITSTATUS(st), "child %u sharing the context failed",
		      i);
	}
}

static void edges(void)
{
	struct ibv_context *ctx = vu_open(), *ctx2 = vu_open();
	struct ibv_device_attr_ex dx;
	struct ibv_alloc_dm_attr a;
	struct ibv_dm *dm, *many[64];
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *mr, *mr2;
	uint8_t buf[4096], back[4096];
	unsigned int n = 0, used;
	uint64_t max, got = 0;

	CHECK(ctx && ctx2, "no sv0");
	CHECK(!ibv_query_device_ex(ctx, NULL, &dx), "ibv_query_device_ex");
	max = dx.max_dm_size;
	CHECK(max >= DM_LEN * 2, "max_dm_size %llu", (unsigned long long)max);
	pd = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx2);
	CHECK(pd && pd2, "ibv_alloc_pd");

	/* refused allocations */
	memset(&a, 0, sizeof(a));
	errno = 0;
	CHECK(!ibv_alloc_dm(ctx, &a) && errno == EINVAL, "length 0: %s",
	      strerror(errno));
	a.length = max + 1;
	errno = 0;
	CHECK(!ibv_alloc_dm(ctx, &a) && errno == EINVAL,
	      "more than max_dm_size: %s", strerror(errno));
	a.length = 4096;
	a.comp_mask = 1;
	errno = 0;
	CHECK(!ibv_alloc_dm(ctx, &a) && errno == EINVAL,
	      "unknown comp_mask: %s", strerror(errno));
	a.comp_mask = 0;
	a.log_align_req = 64;
	errno = 0;
	CHECK(!ibv_alloc_dm(ctx, &a) && errno == EINVAL, "alignment 2^64: %s",
	      strerror(errno));
	a.log_align_req = 12;
	dm = ibv_alloc_dm(ctx, &a);
	CHECK(dm, "4 KiB aligned to 4 KiB: %s", strerror(errno));
	CHECK(dm->context == ctx, "dm->context");
	CHECK(!ibv_free_dm(dm), "ibv_free_dm");

	/* the device's DM used up, then given back */
	while (n < VU_ARRAY_SIZE(many)) {
		size_t len = (size_t)(max / 8);

		many[n] = dm_alloc(ctx, len);
		if (!many[n]) {
			CHECK(errno == ENOMEM, "used up: %s", strerror(errno));
			break;
		}
		got += len;
		n++;
	}
	CHECK(n < VU_ARRAY_SIZE(many) && got <= max && got + max / 8 > max,
	      "%u allocations of max / 8 before ENOMEM", n);
	used = n;
	errno = 0;
	CHECK(!dm_alloc(ctx2, 4096) && errno == ENOMEM,
	      "another context, DM used up: %s", strerror(errno));
	while (n)
		CHECK(!ibv_free_dm(many[--n]), "ibv_free_dm");

	/* copies: fresh DM reads zero; in and out; bounds */
	dm = dm_alloc(ctx, DM_LEN);
	CHECK(dm, "ibv_alloc_dm: %s", strerror(errno));
	for (size_t off = 0; off < DM_LEN; off += sizeof(back)) {
		CHECK(!ibv_memcpy_from_dm(back, dm, off, sizeof(back)),
		      "ibv_memcpy_from_dm");
		for (size_t i = 0; i < sizeof(back); i++)
			CHECK(!back[i], "fresh DM: byte %zu is %#x", off + i,
			      back[i]);
	}
	fill(buf, 1, sizeof(buf));
	CHECK(!ibv_memcpy_to_dm(dm, 100, buf, sizeof(buf)), "ibv_memcpy_to_dm");
	CHECK(!ibv_memcpy_to_dm(dm, DM_LEN - 8, buf, 8), "to the last 8 bytes");
	CHECK(ibv_memcpy_to_dm(dm, DM_LEN - 4, buf, 8) == EFAULT,
	      "past the end: taken");
	CHECK(ibv_memcpy_to_dm(dm, UINT64_MAX - 3, buf, 8) == EFAULT,
	      "an offset that wraps: taken");
	CHECK(ibv_memcpy_from_dm(back, dm, DM_LEN, 4) == EFAULT,
	      "from past the end");
	/* DM is reached in 4-byte words, as mlx5's is */
	CHECK(ibv_memcpy_to_dm(dm, 2, buf, 8) == EINVAL, "offset 2: taken");
	CHECK(ibv_memcpy_to_dm(dm, 0, buf, 6) == EINVAL, "length 6: taken");
	CHECK(ibv_memcpy_from_dm(back, dm, 1, 4) == EINVAL, "from offset 1");
	memset(back, 0, sizeof(back));
	CHECK(!ibv_memcpy_from_dm(back, dm, 100, sizeof(back)), "back");
	expect(back, 1, sizeof(back), "copied in and out");
	CHECK(!ibv_memcpy_from_dm(back, dm, DM_LEN - 8, 8) &&
	      !memcmp(back, buf, 8), "the last 8 bytes");
	CHECK(!ibv_memcpy_from_dm(back, dm, 100 + sizeof(buf), 8) &&
	      !back[0] && !back[7], "a byte past the copy was written");

	/* MRs over it */
	errno = 0;
	CHECK(!ibv_reg_dm_mr(pd, dm, 0, 4096, ACC_ALL) && errno == EINVAL,
	      "without IBV_ACCESS_ZERO_BASED: %s", strerror(errno));
	errno = 0;
	CHECK(!ibv_reg_dm_mr(pd, dm, DM_LEN - 4096, 8192,
			     ACC_ALL | IBV_ACCESS_ZERO_BASED) &&
	      errno == EINVAL, "past the DM's end: %s", strerror(errno));
	errno = 0;
	CHECK(!ibv_reg_dm_mr(pd2, dm, 0, 4096,
			     ACC_ALL | IBV_ACCESS_ZERO_BASED) &&
	      errno == EINVAL, "another context's PD: %s", strerror(errno));
	mr = ibv_reg_dm_mr(pd, dm, 64, 0, ACC_ALL | IBV_ACCESS_ZERO_BASED);
	CHECK(mr && !mr->length, "an empty DM MR (mlx5 takes it): %s",
	      strerror(errno));
	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	mr = ibv_reg_dm_mr(pd, dm, 4096, 8192, ACC_ALL | IBV_ACCESS_ZERO_BASED);
	CHECK(mr, "ibv_reg_dm_mr: %s", strerror(errno));
	CHECK(!mr->addr && mr->length == 8192 && mr->pd == pd &&
	      mr->context == ctx, "the MR's fields");
	mr2 = ibv_reg_dm_mr(pd, dm, 0, DM_LEN,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED);
	CHECK(mr2 && mr2->lkey != mr->lkey, "a second MR over it: %s",
	      strerror(errno));
	CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED),
	      "rereg of a DM MR: taken");
	CHECK(ibv_free_dm(dm) == EBUSY, "a DM with MRs over it is not busy");
	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	CHECK(ibv_free_dm(dm) == EBUSY, "a DM with an MR over it is not busy");
	CHECK(!ibv_dereg_mr(mr2), "ibv_dereg_mr");
	CHECK(!ibv_free_dm(dm), "ibv_free_dm after its MRs");

	forked_users(ctx);

	/* DM a process leaves behind goes with it: a child takes all of it
	 * and exits without a word; then all of it can be had again (the
	 * device sees the child go on its own time: bounded retries) */
	{
		pid_t kid;
		int st;
		long t0;

		fflush(stdout);
		kid = fork();
		CHECK(kid >= 0, "fork");
		if (!kid) {
			struct ibv_context *c = vu_open();

			if (!c || !dm_alloc(c, (size_t)max))
				_exit(1);
			_exit(0);       /* nothing freed, nothing closed */
		}
		CHECK(waitpid(kid, &st, 0) == kid && WIFEXITED(st) &&
		      !WEXITSTATUS(st), "the child could not take all DM");
		for (t0 = vu_now_ms();; vu_sleep_ms(10)) {
			dm = dm_alloc(ctx2, (size_t)max);
			if (dm || errno != ENOMEM ||
			    vu_now_ms() - t0 > VU_WAIT_MS)
				break;
		}
		CHECK(dm, "the DM of a process that exited was not given back: "
			  "%s", strerror(errno));
		CHECK(!ibv_free_dm(dm), "ibv_free_dm");
	}
	ibv_dealloc_pd(pd);
	ibv_dealloc_pd(pd2);
	ibv_close_device(ctx);
	ibv_close_device(ctx2);
	printf("PASS: device memory: the API's edges (max_dm_size %llu, %u "
	       "allocations of max / 8)\n", (unsigned long long)max, used);
	fflush(stdout);
}

/* ---------------- the traffic ---------------- */

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct vu_ep ep;
	struct ibv_dm *dm;
	struct ibv_mr *dmr;        /* over all of dm */
	struct ibv_mr *mmr;        /* over mem */
	uint8_t *mem;
};

static void side_up(struct side *s)
{
	struct vu_qp_caps caps = { .send_wr = 16, .recv_wr = 16, .cqe = 64 };

	s->ctx = vu_open();
	CHECK(s->ctx, "no sv0");
	s->pd = ibv_alloc_pd(s->ctx);
	CHECK(s->pd, "ibv_alloc_pd");
	s->dm = dm_alloc(s->ctx, DM_LEN);
	CHECK(s->dm, "ibv_alloc_dm: %s", strerror(errno));
	s->dmr = ibv_reg_dm_mr(s->pd, s->dm, 0, DM_LEN,
			       ACC_ALL | IBV_ACCESS_ZERO_BASED);
	CHECK(s->dmr, "ibv_reg_dm_mr: %s", strerror(errno));
	s->mem = aligned_alloc(4096, DM_LEN);
	CHECK(s->mem, "memory");
	memset(s->mem, 0, DM_LEN);
	s->mmr = ibv_reg_mr(s->pd, s->mem, DM_LEN, ACC_ALL);
	CHECK(s->mmr, "ibv_reg_mr");
	CHECK(!vu_ep_create(&s->ep, s->ctx, s->pd, IBV_QPT_RC, &caps),
	      "endpoint");
}

static void side_down(struct side *s)
{
	vu_ep_destroy(&s->ep);
	CHECK(!ibv_dereg_mr(s->dmr) && !ibv_dereg_mr(s->mmr), "ibv_dereg_mr");
	CHECK(!ibv_free_dm(s->dm), "ibv_free_dm");
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	free(s->mem);
}

static void one_wc(struct side *s, struct ibv_cq *cq, uint64_t id,
		   enum ibv_wc_status want, const char *what)
{
	struct ibv_wc wc;

	CHECK(vu_poll(cq, &wc, 1, VU_WAIT_MS) == 1, "%s: no completion", what);
	CHECK(wc.wr_id == id && wc.status == want, "%s: wr_id %llu, %s", what,
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	(void)s;
}

/* One WR of op: local piece (lkey, laddr, len), remote (raddr, rkey). */
static void post(struct side *s, enum ibv_wr_opcode op, uint64_t id,
		 uint32_t lkey, uint64_t laddr, uint32_t len, uint64_t raddr,
		 uint32_t rkey, uint64_t add, uint64_t swap)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	CHECK(!ibv_post_send(s->ep.qp, &wr, &bad), "ibv_post_send %s",
	      vu_opcode_str(op));
}

static int server(int ls)
{
	struct vu_conn c = vu_conn_default();
	struct side s;
	struct target t;
	struct vu_addr peer;
	uint8_t *back;
	int fd;
	char go;

	side_up(&s);
	/* the pattern the client reads, and the atomics' word */
	back = malloc(DM_LEN);
	CHECK(back, "memory");
	fill(back, 4, PIECE);
	CHECK(!ibv_memcpy_to_dm(s.dm, S_READ, back, PIECE), "to DM");
	{
		uint64_t w = 1000;

		CHECK(!ibv_memcpy_to_dm(s.dm, S_ATOM, &w, 8), "to DM");
	}
	fd = accept(ls, NULL, NULL);
	CHECK(fd >= 0, "accept");
	close(ls);
	vu_xfer_all(fd, &peer, sizeof(peer), false);
	t.qp = vu_addr_of(s.ep.qp, c.sq_psn);
	t.rkey = s.dmr->rkey;
	t.mr_len = DM_LEN;
	CHECK(!vu_connect(s.ep.qp, &peer, &c), "connect");
	/* the client's SEND lands in DM */
	{
		struct ibv_sge sge = { .addr = S_SEND, .length = PIECE,
				       .lkey = s.dmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge,
					  .num_sge = 1 },
				   *bad;

		CHECK(!ibv_post_recv(s.ep.qp, &wr, &bad), "ibv_post_recv");
	}
	vu_xfer_all(fd, &t, sizeof(t), true);
	/* the client's SEND */
	{
		struct ibv_wc wc;

		CHECK(vu_poll(s.ep.rcq, &wc, 1, VU_WAIT_MS) == 1 &&
		      wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 &&
		      wc.byte_len == PIECE, "the SEND into DM: %s",
		      ibv_wc_status_str(wc.status));
	}
	vu_xfer_all(fd, &go, 1, false);           /* the client is done */
	CHECK(!ibv_memcpy_from_dm(back, s.dm, 0, DM_LEN), "from DM");
	expect(back + S_WRITE, 1, PIECE, "server: the WRITE from DM");
	expect(back + S_SEND, 2, PIECE, "server: the SEND from DM");
	expect(back + S_WMAL, 3, PIECE, "server: the WRITE from memory");
	expect(back + S_READ, 4, PIECE, "server: its own pattern");
	{
		uint64_t w;

		memcpy(&w, back + S_ATOM, 8);
		CHECK(w == 77, "server: the atomics' word is %llu, not 77",
		      (unsigned long long)w);
	}
	for (size_t i = S_ATOM + 8; i < DM_LEN; i++)
		CHECK(!back[i], "server: byte %zu of its DM written (%#x)", i,
		      back[i]);
	go = 1;
	vu_xfer_all(fd, &go, 1, true);
	close(fd);
	side_down(&s);
	free(back);
	printf("server: its DM holds what the client wrote and sent\n");
	return 0;
}

static void client(const char *host, int port)
{
	struct vu_conn c = vu_conn_default();
	struct side s;
	struct target t;
	struct vu_addr me;
	uint8_t *back;
	uint64_t w;
	int fd;
	char go = 1;

	side_up(&s);
	back = malloc(PIECE);
	CHECK(back, "memory");
	fd = vu_tcp_connect(host, port);
	me = vu_addr_of(s.ep.qp, c.sq_psn);
	vu_xfer_all(fd, &me, sizeof(me), true);
	vu_xfer_all(fd, &t, sizeof(t), false);
	CHECK(!vu_connect(s.ep.qp, &t.qp, &c), "connect");

	/* WRITE from DM into the peer's DM */
	fill(back, 1, PIECE);
	CHECK(!ibv_memcpy_to_dm(s.dm, 0, back, PIECE), "to DM");
	post(&s, IBV_WR_RDMA_WRITE, 1, s.dmr->lkey, 0, PIECE, S_WRITE, t.rkey,
	     0, 0);
	one_wc(&s, s.ep.scq, 1, IBV_WC_SUCCESS, "WRITE DM -> DM");
	/* READ it back into malloc'd memory */
	post(&s, IBV_WR_RDMA_READ, 2, s.mmr->lkey, (uintptr_t)s.mem, PIECE,
	     S_WRITE, t.rkey, 0, 0);
	one_wc(&s, s.ep.scq, 2, IBV_WC_SUCCESS, "READ DM -> memory");
	expect(s.mem, 1, PIECE, "client: READ of the WRITE");
	/* SEND from DM into the receive the peer posted on its DM */
	fill(back, 2, PIECE);
	CHECK(!ibv_memcpy_to_dm(s.dm, PIECE, back, PIECE), "to DM");
	post(&s, IBV_WR_SEND, 3, s.dmr->lkey, PIECE, PIECE, 0, 0, 0, 0);
	one_wc(&s, s.ep.scq, 3, IBV_WC_SUCCESS, "SEND DM -> DM");
	/* WRITE from malloc'd memory into DM */
	fill(s.mem, 3, PIECE);
	post(&s, IBV_WR_RDMA_WRITE, 4, s.mmr->lkey, (uintptr_t)s.mem, PIECE,
	     S_WMAL, t.rkey, 0, 0);
	one_wc(&s, s.ep.scq, 4, IBV_WC_SUCCESS, "WRITE memory -> DM");
	/* READ the peer's pattern into DM */
	post(&s, IBV_WR_RDMA_READ, 5, s.dmr->lkey, 2 * PIECE, PIECE, S_READ,
	     t.rkey, 0, 0);
	one_wc(&s, s.ep.scq, 5, IBV_WC_SUCCESS, "READ DM -> DM");
	memset(back, 0, PIECE);
	CHECK(!ibv_memcpy_from_dm(back, s.dm, 2 * PIECE, PIECE), "from DM");
	expect(back, 4, PIECE, "client: READ into DM");
	/* atomics on a word of the peer's DM, results into DM */
	post(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, 6, s.dmr->lkey, 3 * PIECE, 8,
	     S_ATOM, t.rkey, 23, 0);
	one_wc(&s, s.ep.scq, 6, IBV_WC_SUCCESS, "FETCH_ADD on DM");
	CHECK(!ibv_memcpy_from_dm(&w, s.dm, 3 * PIECE, 8) && w == 1000,
	      "FETCH_ADD returned %llu, not 1000", (unsigned long long)w);
	post(&s, IBV_WR_ATOMIC_CMP_AND_SWP, 7, s.dmr->lkey, 3 * PIECE + 8, 8,
	     S_ATOM, t.rkey, 1023, 77);
	one_wc(&s, s.ep.scq, 7, IBV_WC_SUCCESS, "CMP_SWAP on DM");
	CHECK(!ibv_memcpy_from_dm(&w, s.dm, 3 * PIECE + 8, 8) && w == 1023,
	      "CMP_SWAP returned %llu, not 1023", (unsigned long long)w);
	/* a WRITE past the peer's DM MR: refused, nothing written */
	post(&s, IBV_WR_RDMA_WRITE, 8, s.dmr->lkey, 0, 64, t.mr_len - 32,
	     t.rkey, 0, 0);
	one_wc(&s, s.ep.scq, 8, IBV_WC_REM_ACCESS_ERR, "WRITE past the DM MR");

	vu_xfer_all(fd, &go, 1, true);
	vu_xfer_all(fd, &go, 1, false);           /* the server checked its DM */
	close(fd);
	side_down(&s);
	free(back);
	printf("PASS: device memory: WRITE, READ, SEND and atomics to, from "
	       "and between DM MRs\n");
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(vu_tcp_listen(atoi(argv[2]), 1));
	if (argc == 4 && !strcmp(argv[1], "client")) {
		client(argv[2], atoi(argv[3]));
		return 0;
	}
	if (argc == 1) {
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		int ls, st;
		pid_t srv;

		edges();
		ls = vu_tcp_listen(0, 1);
		CHECK(!getsockname(ls, (struct sockaddr *)&a, &al), "port");
		srv = fork();
		CHECK(srv >= 0, "fork");
		if (!srv)
			exit(server(ls));
		close(ls);
		client("127.0.0.1", ntohs(a.sin_port));
		CHECK(waitpid(srv, &st, 0) == srv && WIFEXITED(st) &&
		      !WEXITSTATUS(st), "the server failed");
		return 0;
	}
	fprintf(stderr, "usage: test_dm [server PORT | client HOST PORT]\n");
	return 2;
}
