// SPDX-License-Identifier: MIT
/*
 * The direct path (docs/DESIGN.md "The direct path"): an RDMA WRITE or READ
 * between two QPs of this host runs in the process that posts it. What it
 * must keep of the daemon path, checked at its edges:
 *
 *  - the bytes and completions of WRITE and READ (one SGE, several, inline,
 *    0 to 1 MiB), and that they did go direct (`softverbs stat`);
 *  - order: completions in posting order when direct and daemon-path WRs
 *    mix (SEND, WRITE, READ, a fenced WRITE), also when a completion of
 *    the daemon's is still unpolled;
 *  - revocation by another process while this one writes: after
 *    ibv_dereg_mr, or ibv_rereg_mr to other memory, returns, the old
 *    memory never changes again; the writer gets the daemon path's error
 *    (the old range is no longer the key's);
 *  - a peer that takes its QP's remote write right away gets nothing more;
 *  - a peer process that is killed mid-transfer: errors, no crash;
 *  - a process that scribbles on its guard word (never clears it): a
 *    revocation still completes (the daemon fences a guard of no thread);
 *  - a writer stopped (SIGSTOP) inside its guard, after every check and
 *    just before the kernel reads its iovecs, for longer than any wait: a
 *    dereg or rereg of the target returns, the target reuses its buffer,
 *    the writer resumes, and nothing lands; its WR completes in error. A
 *    READ stopped the same way takes nothing written after the dereg;
 *  - a forged WQE in the initiator's own ring (a key of another PD): the
 *    daemon refuses it as ever, nothing is written.
 *
 * The suite runs this twice: with the direct path, and with
 * SOFTVERBS_DIRECT=0, where every check holds the same and no WR went
 * direct. Run under tests/e2e/isolated.sh (a daemon of its own); argv[1] is
 * the softverbs command (for `softverbs stat`).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <infiniband/verbs.h>

#include "abi/sv_direct.h"
#include "abi/sv_qp.h"
#include "direct_hooks.h"
#include "vu.h"

#define LEN        (1u << 20)
/* The revocation tests' messages: long copies, so that a revocation
 * finds one under way */
#define BIG        (16u << 20)

static const char *sv_cmd_path;

/* WRs of the direct path's opcodes sent to the daemon instead, for reason
 * name (softverbs stat's "sent to the daemon instead" line). */
static uint64_t refused_count(const char *name)
{
	char cmd[512], line[512], key[64];
	unsigned long long n = 0;
	bool found = false;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s stat 2>&1", sv_cmd_path);
	snprintf(key, sizeof(key), " %s ", name);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		const char *p;

		if (!strstr(line, "sent to the daemon instead:") ||
		    !(p = strstr(line, key)))
			continue;
		found = sscanf(p + strlen(key), "%llu", &n) == 1;
	}
	pclose(f);
	if (!found)
		fail_msg("softverbs stat counts no refusal \"%s\"", name);
	return n;
}

/* A buffer in a memfd mapped shared, sealed against shrinking when
 * sealed (memory the direct path may map): the fd stays open. */
static uint8_t *memfd_buf(size_t len, bool sealed, int *fd)
{
	void *p;

	*fd = memfd_create("test-direct", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(*fd >= 0);
	assert_int_equal(ftruncate(*fd, (off_t)len), 0);
	if (sealed)
		assert_int_equal(fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK |
				       F_SEAL_GROW), 0);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	assert_true(p != MAP_FAILED);
	return p;
}

static uint32_t pat(uint64_t i, uint32_t seed)
{
	return (uint32_t)(i * 2654435761u) ^ seed;
}

static void fill(void *p, size_t len, uint32_t seed)
{
	uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)pat(i, seed);
}

static void make_wr(struct ibv_send_wr *wr, struct ibv_sge *sge,
		    uint64_t id, enum ibv_wr_opcode op, void *addr,
		    uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	memset(wr, 0, sizeof(*wr));
	sge->addr = (uintptr_t)addr;
	sge->length = len;
	sge->lkey = lkey;
	wr->wr_id = id;
	wr->opcode = op;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
}

static void post_ok(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ibv_post_send(qp, wr, &bad);

	if (ret)
		fail_msg("ibv_post_send: %s", strerror(ret));
}

static void expect_ok(struct ibv_cq *cq, uint64_t id, enum ibv_wc_opcode op)
{
	struct ibv_wc wc = wait_wc(cq);

	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id || wc.opcode != op)
		fail_msg("completion: wr_id %" PRIu64 " (want %" PRIu64
			 "), %s, opcode %d (want %d)", wc.wr_id, id,
			 ibv_wc_status_str(wc.status), wc.opcode, op);
}

/* ---- one process, two QPs ---- */

struct pair {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct vu_ep a, b;
	uint8_t *abuf, *bbuf;
	struct ibv_mr *amr, *bmr;
	int afd, bfd;              /* memfd buffers (pair_make_mem), or -1 */
	/* a's send CQ on a completion channel (pair_make_at), or NULL */
	struct ibv_comp_channel *ch;
	struct ibv_cq *ch_cq;
};

static void pair_make_at(struct pair *p, int memfd,
			 enum ibv_qp_state b_stop, bool channel);

static void pair_make(struct pair *p)
{
	pair_make_at(p, 0, IBV_QPS_RTS, false);
}

static void pair_make_mem(struct pair *p, int memfd)
{
	pair_make_at(p, memfd, IBV_QPS_RTS, false);
}

/* memfd: 0 anonymous buffers, 1 sealed memfds, 2 unsealed memfds; b_stop:
 * the state b is left in (a goes to RTS); channel: a's send CQ has a
 * completion channel (p->ch) */
static void pair_make_at(struct pair *p, int memfd, enum ibv_qp_state b_stop,
			 bool channel)
{
	struct vu_qp_caps caps = { .send_wr = 64, .recv_wr = 64,
				   .send_sge = 4, .inline_data = 64 };
	struct vu_qp_caps acaps = caps;
	struct vu_conn c = vu_conn_default();
	struct vu_addr aa, ba;
	unsigned int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ;

	memset(p, 0, sizeof(*p));
	p->ctx = vu_open();
	assert_non_null(p->ctx);
	p->pd = ibv_alloc_pd(p->ctx);
	assert_non_null(p->pd);
	if (channel) {
		p->ch = ibv_create_comp_channel(p->ctx);
		assert_non_null(p->ch);
		p->ch_cq = ibv_create_cq(p->ctx, 256, NULL, p->ch, 0);
		assert_non_null(p->ch_cq);
		acaps.scq = p->ch_cq;
	}
	assert_int_equal(vu_ep_create(&p->a, p->ctx, p->pd, IBV_QPT_RC,
				      &acaps), 0);
	assert_int_equal(vu_ep_create(&p->b, p->ctx, p->pd, IBV_QPT_RC, &caps),
			 0);
	aa = vu_addr_of(p->a.qp, c.sq_psn);
	ba = vu_addr_of(p->b.qp, c.sq_psn);
	assert_int_equal(vu_connect(p->a.qp, &ba, &c), 0);
	c.stop_at = b_stop;
	assert_int_equal(vu_connect(p->b.qp, &aa, &c), 0);
	p->afd = p->bfd = -1;
	if (memfd) {
		p->abuf = memfd_buf(LEN, memfd == 1, &p->afd);
		p->bbuf = memfd_buf(LEN, memfd == 1, &p->bfd);
	} else {
		p->abuf = calloc(1, LEN);
		p->bbuf = calloc(1, LEN);
	}
	assert_non_null(p->abuf);
	assert_non_null(p->bbuf);
	p->amr = ibv_reg_mr(p->pd, p->abuf, LEN, acc);
	p->bmr = ibv_reg_mr(p->pd, p->bbuf, LEN, acc);
	assert_non_null(p->amr);
	assert_non_null(p->bmr);
}

static void pair_free(struct pair *p)
{
	if (p->amr)
		ibv_dereg_mr(p->amr);
	if (p->bmr)
		ibv_dereg_mr(p->bmr);
	vu_ep_destroy(&p->a);
	vu_ep_destroy(&p->b);
	if (p->ch_cq)
		assert_int_equal(ibv_destroy_cq(p->ch_cq), 0);
	if (p->ch)
		assert_int_equal(ibv_destroy_comp_channel(p->ch), 0);
	ibv_dealloc_pd(p->pd);
	ibv_close_device(p->ctx);
	if (p->afd >= 0) {
		munmap(p->abuf, LEN);
		munmap(p->bbuf, LEN);
		close(p->afd);
		close(p->bfd);
	} else {
		free(p->abuf);
		free(p->bbuf);
	}
}

/* WRITE and READ of every size, inline, several SGEs: the bytes, the
 * completions, and the path they took; buffers as memfd says
 * (pair_make_mem): between sealed memfds the copies are plain ones. */
static void write_read(int memfd)
{
	static const uint32_t sizes[] = { 0, 1, 8, 100, 4096, 65536, LEN };
	struct ibv_send_wr wr;
	struct ibv_sge sge[3];
	struct pair p;
	uint64_t before, n = 0, id = 1, m0, m1;

	pair_make_mem(&p, memfd);
	before = direct_counts(&m0);
	for (unsigned int i = 0; i < VU_ARRAY_SIZE(sizes); i++) {
		uint32_t len = sizes[i];

		fill(p.abuf, len, 10 + i);
		memset(p.bbuf, 0, LEN);
		make_wr(&wr, sge, id, IBV_WR_RDMA_WRITE, p.abuf, len,
			p.amr->lkey, (uintptr_t)p.bbuf, p.bmr->rkey);
		post_ok(p.a.qp, &wr);
		expect_ok(p.a.scq, id++, IBV_WC_RDMA_WRITE);
		assert_memory_equal(p.abuf, p.bbuf, len);
		if (len + 8 <= LEN)
			for (uint32_t k = len; k < len + 8; k++)
				assert_int_equal(p.bbuf[k], 0);
		/* and back, into the other half of ours */
		fill(p.bbuf, len, 20 + i);
		memset(p.abuf, 0, LEN);
		make_wr(&wr, sge, id, IBV_WR_RDMA_READ, p.abuf, len,
			p.amr->lkey, (uintptr_t)p.bbuf, p.bmr->rkey);
		post_ok(p.a.qp, &wr);
		expect_ok(p.a.scq, id++, IBV_WC_RDMA_READ);
		assert_memory_equal(p.abuf, p.bbuf, len);
		n += 2;
	}
	/* inline: the bytes are taken at the post */
	fill(p.abuf, 48, 7);
	make_wr(&wr, sge, id, IBV_WR_RDMA_WRITE, p.abuf, 48, 0,
		(uintptr_t)p.bbuf + 1000, p.bmr->rkey);
	wr.send_flags |= IBV_SEND_INLINE;
	post_ok(p.a.qp, &wr);
	memset(p.abuf, 0xee, 48);
	expect_ok(p.a.scq, id++, IBV_WC_RDMA_WRITE);
	fill(p.abuf, 48, 7);
	assert_memory_equal(p.abuf, p.bbuf + 1000, 48);
	/* three SGEs gathered into one range */
	fill(p.abuf, 3 * 4096, 9);
	make_wr(&wr, sge, id, IBV_WR_RDMA_WRITE, p.abuf + 8192, 4096,
		p.amr->lkey, (uintptr_t)p.bbuf + 50000, p.bmr->rkey);
	sge[1] = sge[0];
	sge[1].addr = (uintptr_t)p.abuf;
	sge[2] = sge[0];
	sge[2].addr = (uintptr_t)p.abuf + 4096;
	wr.num_sge = 3;
	post_ok(p.a.qp, &wr);
	expect_ok(p.a.scq, id++, IBV_WC_RDMA_WRITE);
	assert_memory_equal(p.bbuf + 50000, p.abuf + 8192, 4096);
	assert_memory_equal(p.bbuf + 54096, p.abuf, 8192);
	n += 2;
	/* unsignaled ones, then one signaled: one completion */
	for (int k = 0; k < 10; k++) {
		make_wr(&wr, sge, id + (uint64_t)k, IBV_WR_RDMA_WRITE,
			p.abuf + 64 * k, 64, p.amr->lkey,
			(uintptr_t)p.bbuf + 64 * k, p.bmr->rkey);
		if (k < 9)
			wr.send_flags = 0;
		post_ok(p.a.qp, &wr);
	}
	expect_ok(p.a.scq, id + 9, IBV_WC_RDMA_WRITE);
	assert_memory_equal(p.bbuf, p.abuf, 640);
	n += 10;
	expect_direct(before, n);
	direct_counts(&m1);
	if (memfd == 1 && direct_on()) {
		/* the first WRs map the memfds, the rest copy through them */
		if (m1 - m0 < n - 4)
			fail_msg("%" PRIu64 " of %" PRIu64 " WRs between sealed "
				 "memfds were plain copies", m1 - m0, n);
	} else if (m1 != m0) {
		fail_msg("%" PRIu64 " plain copies without sealed memfds or "
			 "the direct path", m1 - m0);
	}
	pair_free(&p);
}

static void test_write_read(void **state)
{
	(void)state;
	write_read(0);
}

static void test_write_read_memfd(void **state)
{
	(void)state;
	write_read(1);
}

/* An unsealed memfd could shrink under a mapping: copied by the kernel */
static void test_write_read_memfd_unsealed(void **state)
{
	(void)state;
	write_read(2);
}

/* Completions come in posting order when direct and daemon-path WRs mix:
 * SENDs go through the daemon, so every WRITE or READ after one waits
 * until its completion has been polled. */
static void test_order(void **state)
{
	struct ibv_send_wr wr[8];
	struct ibv_sge sge[8];
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge rsge;
	struct ibv_wc wc[8];
	struct pair p;
	int got = 0;

	(void)state;
	pair_make(&p);
	for (int round = 0; round < 20; round++) {
		/* receives for the SENDs */
		for (int k = 0; k < 2; k++) {
			rsge.addr = (uintptr_t)p.bbuf + LEN / 2;
			rsge.length = 4096;
			rsge.lkey = p.bmr->lkey;
			memset(&rwr, 0, sizeof(rwr));
			rwr.sg_list = &rsge;
			rwr.num_sge = 1;
			assert_int_equal(ibv_post_recv(p.b.qp, &rwr, &rbad), 0);
		}
		/* a list: SEND, WRITE, READ, fenced WRITE */
		make_wr(&wr[0], &sge[0], 1, IBV_WR_SEND, p.abuf, 64,
			p.amr->lkey, 0, 0);
		make_wr(&wr[1], &sge[1], 2, IBV_WR_RDMA_WRITE, p.abuf, 4096,
			p.amr->lkey, (uintptr_t)p.bbuf, p.bmr->rkey);
		make_wr(&wr[2], &sge[2], 3, IBV_WR_RDMA_READ, p.abuf + 8192,
			4096, p.amr->lkey, (uintptr_t)p.bbuf, p.bmr->rkey);
		make_wr(&wr[3], &sge[3], 4, IBV_WR_RDMA_WRITE, p.abuf + 8192,
			4096, p.amr->lkey, (uintptr_t)p.bbuf + 4096,
			p.bmr->rkey);
		wr[3].send_flags |= IBV_SEND_FENCE;
		for (int k = 0; k < 3; k++)
			wr[k].next = &wr[k + 1];
		fill(p.abuf, 4096, (uint32_t)round);
		post_ok(p.a.qp, &wr[0]);
		/* one at a time: WRITE, SEND, WRITE, READ */
		make_wr(&wr[4], &sge[4], 5, IBV_WR_RDMA_WRITE, p.abuf, 64,
			p.amr->lkey, (uintptr_t)p.bbuf + 9000, p.bmr->rkey);
		make_wr(&wr[5], &sge[5], 6, IBV_WR_SEND, p.abuf, 64,
			p.amr->lkey, 0, 0);
		make_wr(&wr[6], &sge[6], 7, IBV_WR_RDMA_WRITE, p.abuf, 64,
			p.amr->lkey, (uintptr_t)p.bbuf + 9100, p.bmr->rkey);
		make_wr(&wr[7], &sge[7], 8, IBV_WR_RDMA_READ, p.abuf + 20000,
			64, p.amr->lkey, (uintptr_t)p.bbuf + 9100,
			p.bmr->rkey);
		for (int k = 4; k < 8; k++)
			post_ok(p.a.qp, &wr[k]);
		got = vu_poll(p.a.scq, wc, 8, WC_WAIT_MS);
		assert_int_equal(got, 8);
		for (int k = 0; k < 8; k++) {
			if (wc[k].status != IBV_WC_SUCCESS ||
			    wc[k].wr_id != (uint64_t)k + 1)
				fail_msg("round %d: completion %d is wr %" PRIu64
					 " (%s)", round, k, wc[k].wr_id,
					 ibv_wc_status_str(wc[k].status));
		}
		/* the READ saw the WRITE before it; the fenced WRITE wrote
		 * what the READ brought */
		assert_memory_equal(p.abuf + 8192, p.abuf, 4096);
		assert_memory_equal(p.bbuf + 4096, p.abuf, 4096);
		assert_memory_equal(p.abuf + 20000, p.abuf, 64);
		assert_int_equal(vu_poll(p.b.rcq, wc, 2, WC_WAIT_MS), 2);
	}
	pair_free(&p);
}

/* The completions of daemon and direct WRs come in posting order with no
 * poll between them: a SEND (the daemon's) whose completion stays unpolled,
 * then WRITEs, which go direct once the daemon has finished the SEND (the
 * poster waits a bounded time for it, and the completions are merged by
 * their stamps). Before, every WRITE behind an unpolled daemon completion
 * went to the daemon too. */
static void test_order_unpolled(void **state)
{
	enum { ROUNDS = 8, WRITES = 32 };
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge rsge;
	struct ibv_wc wc[WRITES + 1];
	struct pair p;
	uint64_t before, got;

	(void)state;
	pair_make(&p);
	before = direct_msgs();
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t base = (uint64_t)round * 100;

		rsge.addr = (uintptr_t)p.bbuf + LEN / 2;
		rsge.length = 4096;
		rsge.lkey = p.bmr->lkey;
		memset(&rwr, 0, sizeof(rwr));
		rwr.sg_list = &rsge;
		rwr.num_sge = 1;
		assert_int_equal(ibv_post_recv(p.b.qp, &rwr, &rbad), 0);
		make_wr(&wr, &sge, base, IBV_WR_SEND, p.abuf, 64, p.amr->lkey,
			0, 0);
		post_ok(p.a.qp, &wr);
		/* the daemon delivered it (its completion at the sender
		 * follows, unpolled) */
		assert_int_equal(vu_poll(p.b.rcq, wc, 1, WC_WAIT_MS), 1);
		assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
		fill(p.abuf, 4096, (uint32_t)round);
		for (int k = 0; k < WRITES; k++) {
			make_wr(&wr, &sge, base + 1 + (uint64_t)k,
				IBV_WR_RDMA_WRITE, p.abuf + 64 * k, 64,
				p.amr->lkey, (uintptr_t)p.bbuf + 64 * k,
				p.bmr->rkey);
			post_ok(p.a.qp, &wr);
		}
		assert_int_equal(vu_poll(p.a.scq, wc, WRITES + 1, WC_WAIT_MS),
				 WRITES + 1);
		for (int k = 0; k <= WRITES; k++)
			if (wc[k].status != IBV_WC_SUCCESS ||
			    wc[k].wr_id != base + (uint64_t)k)
				fail_msg("round %d: completion %d is wr %" PRIu64
					 " (%s), want %" PRIu64, round, k,
					 wc[k].wr_id,
					 ibv_wc_status_str(wc[k].status),
					 base + (uint64_t)k);
		assert_memory_equal(p.bbuf, p.abuf, 64 * WRITES);
	}
	got = direct_msgs() - before;
	/* most WRITEs went direct (a wait that ran out under load sends a
	 * few to the daemon); none when the direct path is off */
	if (direct_on() ? got < ROUNDS * WRITES / 2 : got != 0)
		fail_msg("%" PRIu64 " of %d WRITEs went direct", got,
			 ROUNDS * WRITES);
	pair_free(&p);
}

/* A peer left in RTR (as perftest's server leaves its QP): the first WRITE
 * establishes it (IBV_EVENT_COMM_EST there, as a NIC's first packet does)
 * and goes direct, as every WRITE after it. */
static void test_peer_rtr(void **state)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_async_event ev;
	struct pair p;
	uint64_t before;

	(void)state;
	pair_make_at(&p, 0, IBV_QPS_RTR, false);
	assert_int_equal(vu_qp_state(p.b.qp), IBV_QPS_RTR);
	before = direct_msgs();
	fill(p.abuf, 16 * 4096, 7);
	for (int k = 0; k < 16; k++) {
		make_wr(&wr, &sge, (uint64_t)k, IBV_WR_RDMA_WRITE,
			p.abuf + 4096 * k, 4096, p.amr->lkey,
			(uintptr_t)p.bbuf + 4096 * k, p.bmr->rkey);
		post_ok(p.a.qp, &wr);
		expect_ok(p.a.scq, (uint64_t)k, IBV_WC_RDMA_WRITE);
	}
	expect_direct(before, 16);
	assert_memory_equal(p.bbuf, p.abuf, 16 * 4096);
	/* established, and still in RTR: it was not moved */
	assert_int_equal(vu_async_event(p.ctx, &ev, WC_WAIT_MS), 0);
	assert_int_equal(ev.event_type, IBV_EVENT_COMM_EST);
	assert_ptr_equal(ev.element.qp, p.b.qp);
	assert_int_equal(vu_qp_state(p.b.qp), IBV_QPS_RTR);
	pair_free(&p);
}

/* The next completion event of p's channel: it is a's send CQ's. */
static void expect_event(struct pair *p)
{
	struct ibv_cq *cq = NULL;
	void *cq_ctx = NULL;

	if (!vu_fd_readable(p->ch->fd, WC_WAIT_MS))
		fail_msg("no completion event within %d ms", WC_WAIT_MS);
	assert_int_equal(ibv_get_cq_event(p->ch, &cq, &cq_ctx), 0);
	assert_ptr_equal(cq, p->a.scq);
	ibv_ack_cq_events(cq, 1);
}

/*
 * A CQ with a completion channel takes direct completions too (UCX makes
 * every CQ with one), and its arm fires for them as for the daemon's:
 * armed before the WRITE (the poster fires it); re-armed before the poll
 * of the completion that woke it (perftest -e), no second event for it;
 * a WRITE completed while the re-arm stood, an event; a completion that
 * came while not armed fires the arm at once (UCX's poll, arm, sleep).
 */
static void test_channel_events(void **state)
{
	enum { ROUNDS = 8 };
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct pair p;
	uint64_t before;

	(void)state;
	pair_make_at(&p, 0, IBV_QPS_RTS, true);
	before = direct_msgs();
	fill(p.abuf, 4096, 3);
	for (int k = 0; k < ROUNDS; k++) {
		uint64_t id = (uint64_t)k * 10;

		assert_int_equal(ibv_req_notify_cq(p.a.scq, 0), 0);
		make_wr(&wr, &sge, id, IBV_WR_RDMA_WRITE, p.abuf, 4096,
			p.amr->lkey, (uintptr_t)p.bbuf, p.bmr->rkey);
		post_ok(p.a.qp, &wr);
		expect_event(&p);
		assert_int_equal(ibv_req_notify_cq(p.a.scq, 0), 0);
		expect_ok(p.a.scq, id, IBV_WC_RDMA_WRITE);
		if (vu_fd_readable(p.ch->fd, 0))
			fail_msg("round %d: a second event for one completion",
				 k);
		/* the re-arm stands: the next completion fires it */
		make_wr(&wr, &sge, id + 1, IBV_WR_RDMA_WRITE, p.abuf, 4096,
			p.amr->lkey, (uintptr_t)p.bbuf + 4096, p.bmr->rkey);
		post_ok(p.a.qp, &wr);
		expect_event(&p);
		expect_ok(p.a.scq, id + 1, IBV_WC_RDMA_WRITE);
		/* not armed when it completes; the arm after it fires */
		make_wr(&wr, &sge, id + 2, IBV_WR_RDMA_WRITE, p.abuf, 4096,
			p.amr->lkey, (uintptr_t)p.bbuf + 8192, p.bmr->rkey);
		post_ok(p.a.qp, &wr);
		assert_int_equal(ibv_req_notify_cq(p.a.scq, 0), 0);
		expect_event(&p);
		expect_ok(p.a.scq, id + 2, IBV_WC_RDMA_WRITE);
	}
	assert_memory_equal(p.bbuf + 8192, p.abuf, 4096);
	expect_direct(before, 3 * ROUNDS);
	pair_free(&p);
}

/* A WR the direct path sends to the daemon is counted with its reason: a
 * WRITE with a key the peer's table does not hold ("check"), which the
 * daemon then fails as ever. */
static void test_refusal_counted(void **state)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct pair p;
	uint64_t before, direct;

	(void)state;
	pair_make(&p);
	before = refused_count("check");
	direct = direct_msgs();
	make_wr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, p.abuf, 64, p.amr->lkey,
		(uintptr_t)p.bbuf, p.bmr->rkey ^ 0x80);
	post_ok(p.a.qp, &wr);
	wc = wait_wc(p.a.scq);
	assert_int_equal(wc.wr_id, 1);
	assert_int_equal(wc.status, IBV_WC_REM_ACCESS_ERR);
	assert_int_equal(refused_count("check") - before, direct_on() ? 1 : 0);
	assert_int_equal(direct_msgs(), direct);
	pair_free(&p);
}

/* Lists: 48 WRITEs of 64 bytes (one system call for a batch), a READ, a
 * WRITE with a bad rkey in the middle, more after it: the ones before run,
 * the bad one fails as from the daemon, the rest are flushed; every
 * completion in order. */
static void test_list(void **state)
{
	struct ibv_send_wr wr[64];
	struct ibv_sge sge[64];
	struct ibv_wc wc[64];
	struct pair p;
	uint64_t before;
	int n = 0, got;

	(void)state;
	pair_make(&p);
	fill(p.abuf, LEN, 77);
	before = direct_msgs();
	for (int k = 0; k < 48; k++, n++)
		make_wr(&wr[n], &sge[n], (uint64_t)n, IBV_WR_RDMA_WRITE,
			p.abuf + 64 * k, 64, p.amr->lkey,
			(uintptr_t)p.bbuf + 128 * k, p.bmr->rkey);
	make_wr(&wr[n], &sge[n], (uint64_t)n, IBV_WR_RDMA_READ,
		p.abuf + 65536, 4096, p.amr->lkey, (uintptr_t)p.bbuf,
		p.bmr->rkey);
	n++;
	for (int k = 0; k < n; k++) {
		wr[k].next = &wr[k + 1];
		if (k % 5)
			wr[k].send_flags = 0;
	}
	wr[n - 1].send_flags = IBV_SEND_SIGNALED;
	wr[n - 1].next = NULL;
	post_ok(p.a.qp, &wr[0]);
	got = vu_poll(p.a.scq, wc, 11, WC_WAIT_MS);
	assert_int_equal(got, 11);
	for (int k = 0; k < got; k++) {
		assert_int_equal(wc[k].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[k].wr_id, k < 10 ? 5u * (unsigned)k : 48u);
	}
	for (int k = 0; k < 48; k++)
		assert_memory_equal(p.bbuf + 128 * k, p.abuf + 64 * k, 64);
	assert_memory_equal(p.abuf + 65536, p.bbuf, 4096);
	expect_direct(before, (uint64_t)n);
	/* now a bad key after 20 good WRITEs, and 10 more behind it */
	n = 0;
	for (int k = 0; k < 31; k++, n++)
		make_wr(&wr[n], &sge[n], 100u + (uint64_t)k, IBV_WR_RDMA_WRITE,
			p.abuf, 64, p.amr->lkey,
			(uintptr_t)p.bbuf + 200000 + 64 * k,
			k == 20 ? p.bmr->rkey ^ 0x100 : p.bmr->rkey);
	for (int k = 0; k < n - 1; k++)
		wr[k].next = &wr[k + 1];
	memset(p.bbuf + 200000, 0, 64 * 31);
	post_ok(p.a.qp, &wr[0]);
	got = vu_poll(p.a.scq, wc, 31, WC_WAIT_MS);
	assert_int_equal(got, 31);
	for (int k = 0; k < 31; k++) {
		enum ibv_wc_status want = k < 20 ? IBV_WC_SUCCESS :
					  k == 20 ? IBV_WC_REM_ACCESS_ERR :
					  IBV_WC_WR_FLUSH_ERR;

		assert_int_equal(wc[k].wr_id, 100u + (unsigned)k);
		if (wc[k].status != want)
			fail_msg("WR %d: %s, not %s", k,
				 ibv_wc_status_str(wc[k].status),
				 ibv_wc_status_str(want));
	}
	for (int k = 0; k < 31; k++) {
		static const uint8_t zero[64];

		if (k < 20)
			assert_memory_equal(p.bbuf + 200000 + 64 * k, p.abuf,
					    64);
		else
			assert_memory_equal(p.bbuf + 200000 + 64 * k, zero,
					    64);
	}
	pair_free(&p);
}

/* The responder's QP loses its remote write right: what comes after the
 * modify is refused (REM_INV_REQ, as from the daemon) and writes nothing. */
static void test_qp_access_revoked(void **state)
{
	struct ibv_qp_attr a;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct pair p;

	(void)state;
	pair_make(&p);
	fill(p.abuf, 4096, 3);
	make_wr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, p.abuf, 4096, p.amr->lkey,
		(uintptr_t)p.bbuf, p.bmr->rkey);
	post_ok(p.a.qp, &wr);
	expect_ok(p.a.scq, 1, IBV_WC_RDMA_WRITE);
	memset(&a, 0, sizeof(a));
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	assert_int_equal(ibv_modify_qp(p.b.qp, &a, IBV_QP_ACCESS_FLAGS), 0);
	memset(p.bbuf, 0, 8192);
	make_wr(&wr, &sge, 2, IBV_WR_RDMA_WRITE, p.abuf, 4096, p.amr->lkey,
		(uintptr_t)p.bbuf, p.bmr->rkey);
	post_ok(p.a.qp, &wr);
	wc = wait_wc(p.a.scq);
	assert_int_equal(wc.wr_id, 2);
	if (wc.status != IBV_WC_REM_INV_REQ_ERR)
		fail_msg("a write to a QP without the right: %s",
			 ibv_wc_status_str(wc.status));
	for (int i = 0; i < 8192; i++)
		assert_int_equal(p.bbuf[i], 0);
	pair_free(&p);
}

/* Find this process's mapping of the direct path's guards (the memfd
 * "softverbs-guards" of its uid) and the tables' header (the memfd
 * "softverbs-direct"): NULL when the process has none. */
static struct sv_direct_guard *find_guards(const struct sv_direct_hdr **hdr)
{
	char line[512];
	void *ro = NULL, *rw = NULL;
	FILE *f = fopen("/proc/self/maps", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) != 3)
			continue;
		if (strstr(line, "softverbs-guards") && perms[1] == 'w')
			rw = (void *)s;
		else if (strstr(line, "softverbs-direct") && perms[1] != 'w')
			ro = (void *)s;
	}
	fclose(f);
	if (!ro || !rw)
		return NULL;
	*hdr = ro;
	return rw;
}

/* A guard held for ever by no thread (a scribbler): a revocation fences it
 * and completes, and the QP works on. */
static void test_guard_scribbled(void **state)
{
	const struct sv_direct_hdr *hdr = NULL;
	struct sv_direct_guard *g;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_mr *extra;
	struct pair p;

	(void)state;
	pair_make(&p);
	g = find_guards(&hdr);
	if (!direct_on()) {
		/* the switch: no tables in this process at all */
		assert_null(g);
		pair_free(&p);
		return;
	}
	assert_non_null(g);
	assert_int_equal(hdr->magic, SV_DIRECT_MAGIC);
	g += p.a.qp->qp_num & (hdr->qp_slots - 1);
	/* an epoch older than any revocation to come, of no thread, never
	 * cleared */
	__atomic_store_n(&g->tid, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&g->epoch, 1, __ATOMIC_SEQ_CST);
	extra = ibv_reg_mr(p.pd, p.abuf, 4096, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(extra);
	assert_int_equal(ibv_dereg_mr(extra), 0);
	/* a scribbled thread id (a thread of no process of ours) is fenced
	 * the same way */
	__atomic_store_n(&g->tid, 0x7ffffff0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&g->epoch, 1, __ATOMIC_SEQ_CST);
	extra = ibv_reg_mr(p.pd, p.abuf, 4096, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(extra);
	assert_int_equal(ibv_dereg_mr(extra), 0);
	/* the QP works on */
	fill(p.abuf, 4096, 5);
	make_wr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, p.abuf, 4096, p.amr->lkey,
		(uintptr_t)p.bbuf, p.bmr->rkey);
	post_ok(p.a.qp, &wr);
	expect_ok(p.a.scq, 1, IBV_WC_RDMA_WRITE);
	assert_memory_equal(p.abuf, p.bbuf, 4096);
	__atomic_store_n(&g->epoch, 0, __ATOMIC_SEQ_CST);
	pair_free(&p);
}

/* A WQE written straight into the ring (the library's checks passed by)
 * with the rkey of an MR of another PD: the daemon refuses it as ever, and
 * the QP that erred goes direct no more. */
static void test_forged_wqe(void **state)
{
	struct ibv_pd *pd2;
	struct ibv_mr *other;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct pair p;
	uint8_t *victim;

	(void)state;
	pair_make(&p);
	pd2 = ibv_alloc_pd(p.ctx);
	assert_non_null(pd2);
	victim = calloc(1, 4096);
	assert_non_null(victim);
	other = ibv_reg_mr(pd2, victim, 4096, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(other);
	fill(p.abuf, 4096, 1);
	/* the library takes it (it cannot tell a key's PD) */
	make_wr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, p.abuf, 4096, p.amr->lkey,
		(uintptr_t)victim, other->rkey);
	post_ok(p.a.qp, &wr);
	wc = wait_wc(p.a.scq);
	if (wc.status != IBV_WC_REM_ACCESS_ERR)
		fail_msg("a key of another PD: %s",
			 ibv_wc_status_str(wc.status));
	for (int i = 0; i < 4096; i++)
		assert_int_equal(victim[i], 0);
	/* and after it, in ERR, a right key is flushed, not run */
	make_wr(&wr, &sge, 2, IBV_WR_RDMA_WRITE, p.abuf, 4096, p.amr->lkey,
		(uintptr_t)p.bbuf, p.bmr->rkey);
	post_ok(p.a.qp, &wr);
	wc = wait_wc(p.a.scq);
	assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(p.bbuf[i], 0);
	ibv_dereg_mr(other);
	ibv_dealloc_pd(pd2);
	free(victim);
	pair_free(&p);
}

/* ---- two processes ---- */

/* The two-process tests' buffers: sealed memfds on both sides (the
 * writer's copies are then plain ones through its mappings) or anonymous
 * memory. */
static bool two_memfd;

/* What the target tells the writer. */
struct target_info {
	struct vu_addr addr;
	uint64_t buf;
	uint32_t rkey;
};

struct target {
	struct vu_ep ep;
	uint8_t *buf, *buf2;
	struct ibv_mr *mr;
};

/* The target's half: an RC QP and a buffer for remote write, connected to
 * the writer whose address comes over fd. */
static void target_make(struct target *t, int fd)
{
	struct vu_qp_caps caps = { .send_wr = 16, .recv_wr = 16 };
	struct vu_conn c = vu_conn_default();
	struct target_info me;
	struct vu_addr peer;

	memset(t, 0, sizeof(*t));
	if (vu_ep_create(&t->ep, NULL, NULL, IBV_QPT_RC, &caps))
		_exit(10);
	if (two_memfd) {
		/* sealed memfds: the writer copies through its mappings */
		int fd1, fd2;

		t->buf = memfd_buf(BIG, true, &fd1);
		t->buf2 = memfd_buf(BIG, true, &fd2);
	} else {
		t->buf = mmap(NULL, BIG, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		t->buf2 = mmap(NULL, BIG, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (t->buf == MAP_FAILED || t->buf2 == MAP_FAILED)
		_exit(11);
	t->mr = ibv_reg_mr(t->ep.pd, t->buf, BIG, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!t->mr)
		_exit(12);
	me.addr = vu_addr_of(t->ep.qp, c.sq_psn);
	me.buf = (uintptr_t)t->buf;
	me.rkey = t->mr->rkey;
	if (vu_xfer(fd, &me, sizeof(me), true) ||
	    vu_xfer(fd, &peer, sizeof(peer), false) ||
	    vu_connect(t->ep.qp, &peer, &c))
		_exit(13);
}

/* The writer's half. */
static void writer_make(struct vu_ep *ep, int fd, struct target_info *t,
			uint8_t **buf, struct ibv_mr **mr)
{
	struct vu_qp_caps caps = { .send_wr = 64, .recv_wr = 16 };
	struct vu_conn c = vu_conn_default();
	struct vu_addr me;

	assert_int_equal(vu_ep_create(ep, NULL, NULL, IBV_QPT_RC, &caps), 0);
	if (two_memfd) {
		int fd;

		*buf = memfd_buf(BIG, true, &fd);
	} else {
		*buf = calloc(1, BIG);
	}
	assert_non_null(*buf);
	*mr = ibv_reg_mr(ep->pd, *buf, BIG, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(*mr);
	assert_int_equal(vu_xfer(fd, t, sizeof(*t), false), 0);
	me = vu_addr_of(ep->qp, c.sq_psn);
	assert_int_equal(vu_xfer(fd, &me, sizeof(me), true), 0);
	/* short timeouts: a vanished peer errs in well under a second */
	c.timeout = 12;
	c.retry_cnt = 3;
	assert_int_equal(vu_connect(ep->qp, &t->addr, &c), 0);
}

/* The writer: WRITEs of BIG non-zero bytes over the target's whole MR, a
 * completion every other one, until one fails; 0 (none failed within 15 s)
 * or the status of the first error. After 8 WRs it says "go" on ctl. */
static int write_until_error(struct vu_ep *ep, uint8_t *buf,
			     struct ibv_mr *mr, const struct target_info *t,
			     int ctl)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc[4];
	long end = vu_now_ms() + 15000;
	uint64_t i = 0, posted = 0, done = 0;

	memset(buf, 0xa5, BIG);
	while (vu_now_ms() < end) {
		while (posted - done < 4) {
			make_wr(&wr, &sge, i, IBV_WR_RDMA_WRITE, buf, BIG,
				mr->lkey, t->buf, t->rkey);
			if (i % 2 != 1)
				wr.send_flags = 0;
			post_ok(ep->qp, &wr);
			i++;
			posted++;
			if (i == 8 && ctl >= 0) {
				/* writes flow: the target may revoke. A
				 * target killed already (test_peer_killed's
				 * killer may be first) makes it EPIPE, not
				 * SIGPIPE; the others' waitpid sees a
				 * target that died too soon. */
				char go = 'g';
				ssize_t r = send(ctl, &go, 1, MSG_NOSIGNAL);

				assert_true(r == 1 || (r < 0 && errno == EPIPE));
			}
		}
		int n = ibv_poll_cq(ep->scq, 4, wc);

		assert_true(n >= 0);
		for (int k = 0; k < n; k++) {
			if (wc[k].status != IBV_WC_SUCCESS)
				return (int)wc[k].status;
			done += 2;
		}
		if (!n)
			usleep(100);
	}
	return 0;
}

enum { REVOKE_DEREG, REVOKE_REREG };

/* The target process: revokes its MR while writes flow, clears the old
 * memory at once, then watches it for a while. Exits 0 when nothing was
 * written there after the revocation returned. */
static void target_revoke(int fd, int how)
{
	struct target t;
	char go;
	long end;

	target_make(&t, fd);
	if (vu_xfer(fd, &go, 1, false))
		_exit(20);
	if (how == REVOKE_DEREG) {
		if (ibv_dereg_mr(t.mr))
			_exit(21);
	} else if (ibv_rereg_mr(t.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
				t.buf2, BIG, IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_REMOTE_WRITE)) {
		_exit(22);
	}
	/* a copy still under way would write over this */
	memset(t.buf, 0, BIG);
	end = vu_now_ms() + 300;
	while (vu_now_ms() < end)
		usleep(10000);
	for (size_t k = 0; k < BIG; k++)
		if (t.buf[k])
			_exit(30);      /* a write after the revocation */
	_exit(0);
}

static void run_revoke(int how)
{
	struct target_info ti;
	struct vu_ep ep;
	struct ibv_mr *mr;
	uint8_t *buf;
	int sv[2], st, status;
	pid_t pid;
	uint64_t before;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		target_revoke(sv[1], how);
	}
	close(sv[1]);
	writer_make(&ep, sv[0], &ti, &buf, &mr);
	before = direct_msgs();
	st = write_until_error(&ep, buf, mr, &ti, sv[0]);
	/* the key no longer grants that range: the daemon path's answer */
	if (st != IBV_WC_REM_ACCESS_ERR)
		fail_msg("writes to a revoked range ended with %s",
			 st ? ibv_wc_status_str((enum ibv_wc_status)st) :
			 "no error");
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail_msg("the target says %d (30: its memory changed after "
			 "the revocation returned)",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	expect_direct(before, 8);
	ibv_dereg_mr(mr);
	if (two_memfd)
		munmap(buf, BIG);
	else
		free(buf);
	vu_ep_destroy(&ep);
	close(sv[0]);
}

static void test_dereg_while_writing(void **state)
{
	(void)state;
	run_revoke(REVOKE_DEREG);
}

static void test_rereg_while_writing(void **state)
{
	(void)state;
	run_revoke(REVOKE_REREG);
}

/* The same between sealed memfds, where the writer copies with memcpy
 * through its own mappings of the target's memory: the revocation still
 * ends every copy before it returns. */
static void test_dereg_while_writing_memfd(void **state)
{
	(void)state;
	two_memfd = true;
	run_revoke(REVOKE_DEREG);
	two_memfd = false;
}

static void test_rereg_while_writing_memfd(void **state)
{
	(void)state;
	two_memfd = true;
	run_revoke(REVOKE_REREG);
	two_memfd = false;
}

/*
 * A writer stopped inside its guard (stop_in_copy) while the target revokes
 * (how: REVOKE_DEREG, REVOKE_REREG) or a reader stopped the same way while
 * the target deregisters and then writes new bytes (read): the revocation
 * returns although the copy's thread is stopped, the target reuses its
 * memory, the stopped process goes on long after the daemon's old bound
 * of a second, and nothing moves; its WR completes with the daemon's
 * answer for a revoked key. The stopped process is a child; this process
 * is the target.
 */
#define STOPPED_LEN (64u << 10)

static void stopped_child(int fd, bool read)
{
	struct target_info ti;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct vu_ep ep;
	struct ibv_mr *mr;
	uint8_t *buf;
	char done;

	writer_make(&ep, fd, &ti, &buf, &mr);
	/* the target's QP is established: the WR may go direct */
	if (vu_xfer(fd, &done, 1, false))
		_exit(39);
	memset(buf, read ? 0 : 0xa5, STOPPED_LEN);
	make_wr(&wr, &sge, 1, read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
		buf, STOPPED_LEN, mr->lkey, ti.buf, ti.rkey);
	__atomic_store_n(&stop_in_copy, 1, __ATOMIC_RELAXED);
	if (ibv_post_send(ep.qp, &wr, &bad))
		_exit(40);
	if (vu_poll(ep.scq, &wc, 1, WC_WAIT_MS) != 1)
		_exit(41);
	if (__atomic_load_n(&stop_in_copy, __ATOMIC_RELAXED))
		_exit(42);         /* it never reached a copy of its own */
	if (wc.status != IBV_WC_REM_ACCESS_ERR)
		_exit(43);         /* it went through after all */
	/* a READ took nothing of what the target wrote after its dereg
	 * (0x5a) */
	for (uint32_t k = 0; read && k < STOPPED_LEN; k++)
		if (buf[k])
			_exit(44);
	if (vu_xfer(fd, &done, 1, true))
		_exit(45);
	_exit(0);
}

static void run_stopped(int how, bool read)
{
	struct target t;
	int sv[2], status;
	pid_t pid;
	char done = 'd';

	if (!direct_on())
		return;            /* nothing of the test's copies is ours */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[1]);
		stopped_child(sv[0], read);
	}
	close(sv[0]);
	target_make(&t, sv[1]);
	memset(t.buf, 0x11, STOPPED_LEN);
	assert_int_equal(vu_xfer(sv[1], &done, 1, true), 0);
	/* the child stops in its copy */
	assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
	if (!WIFSTOPPED(status))
		fail_msg("the child never stopped in a copy (status %#x)",
			 status);
	if (how == REVOKE_DEREG)
		assert_int_equal(ibv_dereg_mr(t.mr), 0);
	else
		assert_int_equal(ibv_rereg_mr(t.mr,
					      IBV_REREG_MR_CHANGE_TRANSLATION,
					      NULL, t.buf2, BIG,
					      IBV_ACCESS_LOCAL_WRITE |
					      IBV_ACCESS_REMOTE_WRITE), 0);
	/* the memory is the target's again: it writes what a READ must not
	 * take, or what a WRITE must not overwrite */
	memset(t.buf, read ? 0x5a : 0, STOPPED_LEN);
	/* stopped past any bound a revocation might once have waited */
	vu_sleep_ms(1200);
	assert_int_equal(kill(pid, SIGCONT), 0);
	/* it says done once its WR has completed */
	if (vu_xfer(sv[1], &done, 1, false))
		done = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail_msg("the stopped process says %d (43: its WR succeeded "
			 "after the revocation; 44: its READ took bytes "
			 "written after it)",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	assert_int_equal(done, 'd');
	for (uint32_t k = 0; k < STOPPED_LEN; k++)
		if (t.buf[k] != (read ? 0x5a : 0))
			fail_msg("byte %u of the reused buffer changed after "
				 "the revocation returned", k);
	if (how == REVOKE_REREG)
		ibv_dereg_mr(t.mr);
	vu_ep_destroy(&t.ep);
	munmap(t.buf, BIG);
	munmap(t.buf2, BIG);
	close(sv[1]);
}

static void test_dereg_stopped_writer(void **state)
{
	(void)state;
	run_stopped(REVOKE_DEREG, false);
}

static void test_rereg_stopped_writer(void **state)
{
	(void)state;
	run_stopped(REVOKE_REREG, false);
}

static void test_dereg_stopped_reader(void **state)
{
	(void)state;
	run_stopped(REVOKE_DEREG, true);
}

/* The target process is killed in the middle of 1 MiB writes: the writer
 * gets an error completion (the daemon path's, for a vanished peer) and
 * flushes, and does not crash. */
static void test_peer_killed(void **state)
{
	struct target_info ti;
	struct vu_ep ep;
	struct ibv_mr *mr;
	uint8_t *buf;
	int sv[2], st;
	pid_t pid, killer;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct target t;
		char go;

		close(sv[0]);
		target_make(&t, sv[1]);
		/* wait to be killed */
		vu_xfer(sv[1], &go, 1, false);
		pause();
		_exit(0);
	}
	close(sv[1]);
	writer_make(&ep, sv[0], &ti, &buf, &mr);
	/* the target reads the writer's "go" (after 64 WRs) and waits; a
	 * second child kills it a moment later, while the writes flow */
	killer = fork();
	assert_true(killer >= 0);
	if (killer == 0) {
		usleep(200000);
		kill(pid, SIGKILL);
		_exit(0);
	}
	st = write_until_error(&ep, buf, mr, &ti, sv[0]);
	assert_int_equal(waitpid(killer, NULL, 0), killer);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	if (st == 0)
		fail_msg("writes to a killed process never failed");
	print_message("writes to a killed peer ended with %s\n",
		      ibv_wc_status_str((enum ibv_wc_status)st));
	ibv_dereg_mr(mr);
	free(buf);
	vu_ep_destroy(&ep);
	close(sv[0]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_read),
		cmocka_unit_test(test_write_read_memfd),
		cmocka_unit_test(test_write_read_memfd_unsealed),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_order_unpolled),
		cmocka_unit_test(test_peer_rtr),
		cmocka_unit_test(test_refusal_counted),
		cmocka_unit_test(test_channel_events),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_qp_access_revoked),
		cmocka_unit_test(test_guard_scribbled),
		cmocka_unit_test(test_forged_wqe),
		cmocka_unit_test(test_dereg_while_writing),
		cmocka_unit_test(test_rereg_while_writing),
		cmocka_unit_test(test_dereg_while_writing_memfd),
		cmocka_unit_test(test_rereg_while_writing_memfd),
		cmocka_unit_test(test_peer_killed),
		cmocka_unit_test(test_dereg_stopped_writer),
		cmocka_unit_test(test_rereg_stopped_writer),
		cmocka_unit_test(test_dereg_stopped_reader),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s SOFTVERBS_COMMAND\n", argv[0]);
		return 2;
	}
	sv_cmd_path = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (getenv("SV_TEST_FILTER"))
		cmocka_set_test_filter(getenv("SV_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
