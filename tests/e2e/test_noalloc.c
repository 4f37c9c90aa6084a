// SPDX-License-Identifier: MIT
/*
 * The post path never allocates: a connected RC pair, then a loop of 10000
 * rounds of posts (SEND and RDMA WRITE, inline and not, signaled and not)
 * and polls, with every malloc/calloc/realloc/posix_memalign/aligned_alloc/
 * free counted by alloc_count.so in this process (the library) and in the
 * daemon it starts (which inherits LD_PRELOAD through the auto-start).
 * Both counts must not move across the loop.
 *
 * The test re-executes itself with LD_PRELOAD=alloc_count.so and
 * SV_ALLOC_COUNT_DIR set when they are not. Under ASan, whose own allocator
 * must come first, no interposer can count: there the same loop runs with
 * its completions checked under the sanitizers, and the counting is the
 * plain build's.
 *
 * Run under tests/e2e/isolated.sh (a daemon of its own, started by us).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "alloc_count.h"
#include "vu.h"

#define ROUNDS 10000
#define WARMUP 200
#define MSG    256
#define SLOTS  64

static const volatile struct sv_alloc_counts *self_counts, *daemon_counts;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "test_noalloc: " __VA_ARGS__);        \
			fprintf(stderr, "\n");                                \
			exit(1);                                              \
		}                                                             \
	} while (0)

static void reexec(char **argv)
{
	const char *dir = getenv("SV_TEST_DIR");
	const char *old = getenv("LD_PRELOAD");
	char pre[8192];

	CHECK(dir && *dir, "SV_TEST_DIR is not set (run through "
	      "tests/e2e/isolated.sh)");
	CHECK(!getenv("SV_NOALLOC_REEXEC"), "%s did not load (LD_PRELOAD)",
	      SV_ALLOC_SO);
	setenv("SV_NOALLOC_REEXEC", "1", 1);
	snprintf(pre, sizeof(pre), "%s%s%s", SV_ALLOC_SO,
		 old && *old ? ":" : "", old && *old ? old : "");
	setenv("LD_PRELOAD", pre, 1);
	setenv("SV_ALLOC_COUNT_DIR", dir, 1);
	execv("/proc/self/exe", argv);
	perror("execv /proc/self/exe");
	exit(1);
}

static const volatile struct sv_alloc_counts *map_counts(pid_t pid)
{
	char path[4096];
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/alloc.%d",
		 getenv("SV_ALLOC_COUNT_DIR"), (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void side_open(struct side *s)
{
	struct ibv_qp_init_attr ia;

	s->ctx = vu_open();
	CHECK(s->ctx, "cannot open sv0");
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 1024, NULL, NULL, 0);
	s->buf = calloc(SLOTS, MSG);
	CHECK(s->pd && s->cq && s->buf, "PD/CQ");
	s->mr = ibv_reg_mr(s->pd, s->buf, SLOTS * MSG, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	CHECK(s->mr, "ibv_reg_mr: %s", strerror(errno));
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 64;
	ia.cap.max_recv_wr = SLOTS;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 64;
	s->qp = ibv_create_qp(s->pd, &ia);
	CHECK(s->qp, "ibv_create_qp: %s", strerror(errno));
}

static void side_close(struct side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	free(s->buf);
}

static struct side A, B;

static void post_recv(unsigned int slot)
{
	struct ibv_sge sge = { (uintptr_t)(B.buf + (size_t)slot * MSG), MSG,
			       B.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;
	int ret = ibv_post_recv(B.qp, &wr, &bad);

	CHECK(!ret, "ibv_post_recv: %s", strerror(ret));
}

/* Wait (bounded) for n completions on cq, all successful. */
static void reap(struct ibv_cq *cq, int n, const char *what)
{
	struct ibv_wc wc[8];
	long end = vu_now_ms() + VU_WAIT_MS;
	int got = 0, k, i;

	while (got < n) {
		k = ibv_poll_cq(cq, n - got < 8 ? n - got : 8, wc);
		CHECK(k >= 0, "ibv_poll_cq: %d", k);
		for (i = 0; i < k; i++) {
			CHECK(wc[i].status == IBV_WC_SUCCESS, "%s: %s", what,
			      ibv_wc_status_str(wc[i].status));
			if (cq == B.cq)
				post_recv((unsigned int)wc[i].wr_id);
		}
		got += k;
		CHECK(k || vu_now_ms() < end, "%s: %d of %d completions", what,
		      got, n);
	}
}

/* One round: a SEND and an RDMA WRITE, inline on odd rounds; the WRITE
 * signaled on rounds divisible by 4 only (so unsignaled WQEs are retired by
 * the next signaled completion). */
static void round_trip(unsigned int i)
{
	struct ibv_sge s1 = { (uintptr_t)(A.buf + (i % SLOTS) * MSG),
			      i & 1 ? 48 : MSG, A.mr->lkey };
	struct ibv_sge s2 = { (uintptr_t)(A.buf + ((i + 1) % SLOTS) * MSG),
			      i & 1 ? 32 : MSG, A.mr->lkey };
	struct ibv_send_wr w2 = {
		.wr_id = 2ull * i + 1, .sg_list = &s2, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = (i & 1 ? IBV_SEND_INLINE : 0) |
			      (i % 4 == 0 ? IBV_SEND_SIGNALED : 0),
		.wr.rdma = { (uintptr_t)(B.buf + ((i + 7) % SLOTS) * MSG),
			     B.mr->rkey },
	};
	struct ibv_send_wr w1 = {
		.wr_id = 2ull * i, .sg_list = &s1, .num_sge = 1,
		.opcode = IBV_WR_SEND, .next = &w2,
		.send_flags = IBV_SEND_SIGNALED |
			      (i & 1 ? IBV_SEND_INLINE : 0),
	};
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(A.qp, &w1, &bad);

	CHECK(!ret, "ibv_post_send: %s", strerror(ret));
	reap(A.cq, i % 4 == 0 ? 2 : 1, "send");
	reap(B.cq, 1, "receive");
}

static void snapshot(uint64_t *self, uint64_t *dmn)
{
	*self = sv_alloc_total(self_counts);
	*dmn = sv_alloc_total(daemon_counts);
}

static void show(const char *who, const volatile struct sv_alloc_counts *c)
{
	fprintf(stderr, "  %s (pid %u): malloc %" PRIu64 ", calloc %" PRIu64
		", realloc %" PRIu64 ", memalign %" PRIu64 ", free %" PRIu64
		"\n", who, c->pid, c->malloc, c->calloc, c->realloc,
		c->memalign, c->free);
}

#ifdef SV_SANITIZED
static const bool sanitized = true;
#else
static const bool sanitized = false;
#endif

/* Under ASan: the loop alone, its completions checked. */
static int run_sanitized(void)
{
	struct vu_conn c = vu_conn_default();
	unsigned int i;

	side_open(&A);
	side_open(&B);
	CHECK(vu_connect_pair(A.qp, B.qp, &c) == 0, "connect");
	for (i = 0; i < SLOTS; i++)
		post_recv(i);
	for (i = 0; i < WARMUP + ROUNDS; i++)
		round_trip(i);
	side_close(&A);
	side_close(&B);
	printf("PASS: %u rounds of posts and polls under ASan+UBSan (the "
	       "allocations are counted in the plain build)\n",
	       WARMUP + ROUNDS);
	return 0;
}

int main(int argc, char **argv)
{
	const volatile struct sv_alloc_counts *(*get)(void);
	struct vu_conn c = vu_conn_default();
	uint64_t s0, d0, s1, d1;
	pid_t dpid;
	unsigned int i;

	(void)argc;
	if (sanitized)
		return run_sanitized();
	get = (const volatile struct sv_alloc_counts *(*)(void))
		dlsym(RTLD_DEFAULT, "sv_alloc_counts");
	if (!get || !getenv("SV_ALLOC_COUNT_DIR"))
		reexec(argv);
	self_counts = get();
	CHECK(self_counts->magic == SV_ALLOC_MAGIC, "interposer not counting");

	side_open(&A);
	side_open(&B);
	dpid = vu_daemon_pid();
	CHECK(dpid > 0, "no daemon pid in $SV_TEST_DIR/control.lock");
	daemon_counts = map_counts(dpid);
	CHECK(daemon_counts && daemon_counts->magic == SV_ALLOC_MAGIC &&
	      daemon_counts->pid == (uint32_t)dpid,
	      "the daemon (pid %d) does not count its allocations: was it "
	      "started by this test, with LD_PRELOAD?", (int)dpid);
	CHECK(vu_connect_pair(A.qp, B.qp, &c) == 0, "connect");
	for (i = 0; i < SLOTS; i++)
		post_recv(i);

	/* first rounds: whatever is made once, lazily, is made now */
	for (i = 0; i < WARMUP; i++)
		round_trip(i);
	snapshot(&s0, &d0);
	for (i = WARMUP; i < WARMUP + ROUNDS; i++)
		round_trip(i);
	snapshot(&s1, &d1);

	printf("test_noalloc: %u rounds (%u posts, %u polled completions): "
	       "%" PRIu64 " allocator calls here, %" PRIu64 " in the daemon "
	       "(%" PRIu64 " and %" PRIu64 " before the loop)\n", ROUNDS,
	       3 * ROUNDS, ROUNDS * 2 + ROUNDS / 4, s1 - s0, d1 - d0, s0, d0);
	if (s1 != s0 || d1 != d0) {
		show("library", self_counts);
		show("daemon", daemon_counts);
		CHECK(0, "the post path allocated: %" PRIu64 " calls in the "
		      "library, %" PRIu64 " in the daemon", s1 - s0, d1 - d0);
	}
	side_close(&A);
	side_close(&B);
	printf("PASS: no allocation on the post/poll path, library and "
	       "daemon\n");
	return 0;
}
