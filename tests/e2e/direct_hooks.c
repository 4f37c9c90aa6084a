// SPDX-License-Identifier: MIT
/* The direct path's tests' hooks (direct_hooks.h). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <cmocka.h>

#include "direct_hooks.h"
#include "vu.h"

int stop_in_copy, stop_after_copy;

ssize_t process_vm_writev(pid_t pid, const struct iovec *liov,
			  unsigned long liovcnt, const struct iovec *riov,
			  unsigned long riovcnt, unsigned long flags)
{
	ssize_t n;

	if (__atomic_exchange_n(&stop_in_copy, 0, __ATOMIC_RELAXED))
		raise(SIGSTOP);
	n = syscall(SYS_process_vm_writev, pid, liov, liovcnt, riov, riovcnt,
		    flags);
	if (__atomic_exchange_n(&stop_after_copy, 0, __ATOMIC_RELAXED))
		raise(SIGSTOP);
	return n;
}

ssize_t process_vm_readv(pid_t pid, const struct iovec *liov,
			 unsigned long liovcnt, const struct iovec *riov,
			 unsigned long riovcnt, unsigned long flags)
{
	if (__atomic_exchange_n(&stop_in_copy, 0, __ATOMIC_RELAXED))
		raise(SIGSTOP);
	return syscall(SYS_process_vm_readv, pid, liov, liovcnt, riov,
		       riovcnt, flags);
}

bool direct_on(void)
{
	const char *e = getenv("SOFTVERBS_DIRECT");

	return !e || strcmp(e, "0");
}

uint64_t direct_counts(uint64_t *mapped)
{
	static char out[16384];
	unsigned long long n, m;
	const char *p;

	if (vu_softverbs(out, sizeof(out), "stat"))
		fail_msg("softverbs stat failed: %s", out);
	p = strstr(out, "(direct): ");
	if (!p || sscanf(p, "(direct): %llu messages, %*u bytes, %llu", &n,
			 &m) != 2)
		fail_msg("softverbs stat says nothing of the direct path");
	if (mapped)
		*mapped = m;
	return n;
}

uint64_t direct_msgs(void)
{
	return direct_counts(NULL);
}

void expect_direct(uint64_t before, uint64_t want)
{
	uint64_t got = direct_msgs() - before;

	if (direct_on()) {
		if (got < want)
			fail_msg("%" PRIu64 " of %" PRIu64 " WRs went direct",
				 got, want);
	} else if (got) {
		fail_msg("%" PRIu64 " WRs went direct with SOFTVERBS_DIRECT=0",
			 got);
	}
}

struct ibv_wc wait_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	if (vu_poll(cq, &wc, 1, WC_WAIT_MS) != 1)
		fail_msg("no completion within %d ms", WC_WAIT_MS);
	return wc;
}
