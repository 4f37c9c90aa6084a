// SPDX-License-Identifier: MIT
/*
 * The post path makes no system call but the doorbell's futex wake.
 *
 * A connected RC pair on sv0; a thread installs a seccomp filter on itself
 * that lets futex (the doorbell), the clocks (the test's own bounded waits;
 * vDSO calls that some hosts turn into system calls) and rt_sigreturn
 * through and traps every other system call into a SIGSYS handler, which
 * records its number and makes it fail with ENOSYS. The thread then runs
 * thousands of ibv_post_send (SEND and RDMA WRITE, inline and not, signaled
 * and not), ibv_post_recv and ibv_poll_cq calls and checks every completion.
 * Not one system call may be trapped.
 *
 * A seccomp filter cannot be removed, so the thread never returns: it parks
 * on a futex and the process exits from the main thread.
 *
 * This is the ring's path: the direct path (docs/DESIGN.md) makes one
 * process_vm_writev or process_vm_readv for each WRITE or READ it runs
 * instead of the daemon, so the test turns it off (SOFTVERBS_DIRECT=0).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vu.h"

#if defined(__x86_64__)
#define ARCH_NR AUDIT_ARCH_X86_64
#define SET_RET(uc, v) ((uc)->uc_mcontext.gregs[REG_RAX] = (v))
#elif defined(__aarch64__)
#define ARCH_NR AUDIT_ARCH_AARCH64
#define SET_RET(uc, v) ((uc)->uc_mcontext.regs[0] = (uint64_t)(v))
#else
#error "test_nosyscall knows x86_64 and aarch64 only"
#endif

#define ROUNDS 5000
#define SLOTS  64
#define MSG    256

static struct ibv_context *ctx;
static struct vu_ep A, B;
static struct ibv_mr *mra, *mrb;
static uint8_t *bufa, *bufb;

static volatile sig_atomic_t trapped;
static volatile int trapped_nr[16];
static uint32_t done;        /* 1: the loop finished; 2: it failed */
static char failure[256];

static void on_sigsys(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;

	(void)sig;
	if (trapped < (int)VU_ARRAY_SIZE(trapped_nr))
		trapped_nr[trapped] = si->si_syscall;
	trapped = trapped + 1;
	SET_RET(uc, -ENOSYS);
}

static int install_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH_NR, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_futex, 4, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clock_gettime, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_gettimeofday, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { (unsigned short)VU_ARRAY_SIZE(f), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	/* this thread only: no SECCOMP_FILTER_FLAG_TSYNC */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
		return -errno;
	return 0;
}

#define FAIL(...)                                                            \
	do {                                                                 \
		snprintf(failure, sizeof(failure), __VA_ARGS__);             \
		return -1;                                                   \
	} while (0)

static int post_recv(unsigned int slot)
{
	struct ibv_sge sge = { (uintptr_t)(bufb + (size_t)slot * MSG), MSG,
			       mrb->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(B.qp, &wr, &bad);
}

/* Poll cq until n successful completions (bounded by a clock). */
static int reap(struct ibv_cq *cq, int n, bool repost)
{
	struct ibv_wc wc[8];
	long end = vu_now_ms() + VU_WAIT_MS;
	int got = 0;

	while (got < n) {
		int k = ibv_poll_cq(cq, n - got < 8 ? n - got : 8, wc);

		if (k < 0)
			FAIL("ibv_poll_cq: %d", k);
		for (int i = 0; i < k; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				FAIL("completion: %s",
				     ibv_wc_status_str(wc[i].status));
			if (repost && post_recv((unsigned int)wc[i].wr_id))
				FAIL("ibv_post_recv failed");
		}
		got += k;
		if (!k && vu_now_ms() > end)
			FAIL("%d of %d completions", got, n);
	}
	return 0;
}

static int loop(void)
{
	for (unsigned int i = 0; i < ROUNDS; i++) {
		bool in = i & 1, sig = i % 4 == 0;
		struct ibv_sge s1 = { (uintptr_t)(bufa + (i % SLOTS) * MSG),
				      in ? 48 : MSG, mra->lkey };
		struct ibv_sge s2 = { (uintptr_t)(bufa + ((i + 1) % SLOTS) * MSG),
				      in ? 32 : MSG, mra->lkey };
		struct ibv_send_wr w2 = {
			.wr_id = 2ull * i + 1, .sg_list = &s2, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = (in ? IBV_SEND_INLINE : 0) |
				      (sig ? IBV_SEND_SIGNALED : 0),
			.wr.rdma = { (uintptr_t)(bufb + ((i + 7) % SLOTS) * MSG),
				     mrb->rkey },
		};
		struct ibv_send_wr w1 = {
			.wr_id = 2ull * i, .sg_list = &s1, .num_sge = 1,
			.opcode = IBV_WR_SEND, .next = &w2,
			.send_flags = IBV_SEND_SIGNALED |
				      (in ? IBV_SEND_INLINE : 0),
		};
		struct ibv_send_wr *bad;
		int ret = ibv_post_send(A.qp, &w1, &bad);

		if (ret)
			FAIL("ibv_post_send: %s", strerror(ret));
		if (reap(A.scq, sig ? 2 : 1, false) ||
		    reap(B.rcq, 1, true))
			return -1;
	}
	return 0;
}

static void *worker(void *arg)
{
	int ret;

	(void)arg;
	ret = install_filter();
	if (ret) {
		snprintf(failure, sizeof(failure), "seccomp: %s",
			 strerror(-ret));
		__atomic_store_n(&done, 2, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&done, loop() ? 2 : 1, __ATOMIC_RELEASE);
	}
	/* park for good: futex is let through */
	for (;;)
		syscall(SYS_futex, &done, FUTEX_WAIT, done, NULL, NULL, 0);
	return NULL;
}

int main(void)
{
	struct vu_qp_caps caps = { .send_wr = 64, .recv_wr = SLOTS,
				   .send_sge = 1, .recv_sge = 1,
				   .inline_data = 64, .cqe = 256 };
	struct vu_conn c = vu_conn_default();
	struct sigaction sa;
	pthread_t t;
	long end;

	setenv("SOFTVERBS_DIRECT", "0", 1);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	if (sigaction(SIGSYS, &sa, NULL))
		return 1;
	ctx = vu_open();
	if (!ctx)
		return 1;
	bufa = calloc(SLOTS, MSG);
	bufb = calloc(SLOTS, MSG);
	if (!bufa || !bufb || vu_ep_create(&A, ctx, NULL, IBV_QPT_RC, &caps) ||
	    vu_ep_create(&B, ctx, A.pd, IBV_QPT_RC, &caps))
		return 1;
	mra = ibv_reg_mr(A.pd, bufa, SLOTS * MSG, IBV_ACCESS_LOCAL_WRITE);
	mrb = ibv_reg_mr(A.pd, bufb, SLOTS * MSG,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mra || !mrb || vu_connect_pair(A.qp, B.qp, &c)) {
		fprintf(stderr, "test_nosyscall: setup failed\n");
		return 1;
	}
	for (unsigned int i = 0; i < SLOTS; i++)
		if (post_recv(i))
			return 1;
	if (pthread_create(&t, NULL, worker, NULL))
		return 1;
	for (end = vu_now_ms() + 4 * VU_WAIT_MS;
	     !__atomic_load_n(&done, __ATOMIC_ACQUIRE);)
		if (vu_now_ms() > end) {
			fprintf(stderr, "test_nosyscall: the loop hangs\n");
			return 1;
		}
		else
			vu_sleep_ms(5);
	if (done != 1) {
		fprintf(stderr, "FAIL: %s\n", failure);
		return 1;
	}
	if (trapped) {
		fprintf(stderr, "FAIL: the post/poll path made %d system "
			"call(s) besides futex; the first:", (int)trapped);
		for (int i = 0; i < trapped && i < 16; i++)
			fprintf(stderr, " %d", trapped_nr[i]);
		fprintf(stderr, "\n");
		return 1;
	}
	printf("PASS: %u rounds (%u posts, %u polled completions) with no "
	       "system call but futex\n", ROUNDS, 2 * ROUNDS,
	       ROUNDS * 2 + ROUNDS / 4);
	/* the worker is parked and touches nothing: free what it used */
	vu_ep_destroy(&B);
	ibv_dereg_mr(mra);
	ibv_dereg_mr(mrb);
	vu_ep_destroy(&A);
	ibv_close_device(ctx);
	free(bufa);
	free(bufb);
	return 0;
}
