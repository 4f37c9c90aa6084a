// SPDX-License-Identifier: MIT
/* The direct path's tests' hooks (direct_hooks.h). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "direct_hooks.h"

int stop_in_copy;

ssize_t process_vm_writev(pid_t pid, const struct iovec *liov,
			  unsigned long liovcnt, const struct iovec *riov,
			  unsigned long riovcnt, unsigned long flags)
{
	if (__atomic_exchange_n(&stop_in_copy, 0, __ATOMIC_RELAXED))
		raise(SIGSTOP);
	return syscall(SYS_process_vm_writev, pid, liov, liovcnt, riov,
		       riovcnt, flags);
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
