/* SPDX-License-Identifier: MIT */
/*
 * What the direct path's tests (test_direct.c, test_direct_send.c,
 * test_direct_srq.c) share:
 * a copy that stops its whole process, whether the path is on, and what
 * softverbs stat says it ran.
 *
 * The library's copies go through process_vm_writev/readv, which
 * direct_hooks.c defines in the test executable (its definitions come
 * first for the libraries it loads). Armed (stop_in_copy = 1), the next
 * copy stops the process (SIGSTOP) where the library calls the kernel:
 * inside its guard, after every check, before the kernel reads the iovecs.
 * A debugger, a Ctrl-Z or the cgroup freezer could stop a writer there.
 */
#ifndef SV_TESTS_DIRECT_HOOKS_H
#define SV_TESTS_DIRECT_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

extern int stop_in_copy;
/* Armed, the next process_vm_writev stops its process once the kernel
 * copied: a SEND's message landed, its completion not yet published. */
extern int stop_after_copy;

/* The direct path is on in this process (SOFTVERBS_DIRECT is not 0). */
bool direct_on(void);

/* The messages processes ran directly since the daemon started (softverbs
 * stat), and (mapped, unless NULL) how many of them were plain copies
 * between mapped memfds; a cmocka failure when stat says nothing of it. */
uint64_t direct_counts(uint64_t *mapped);
uint64_t direct_msgs(void);
/* Every WR that ran since before said so: at least want went direct
 * when the direct path is on, none when it is off (a cmocka failure
 * otherwise). */
void expect_direct(uint64_t before, uint64_t want);

/* How long a test waits for a completion or an event before it fails
 * (never a figure it measures) */
#define WC_WAIT_MS 10000

/* The next completion of cq (a cmocka failure after WC_WAIT_MS). */
struct ibv_wc wait_wc(struct ibv_cq *cq);

#endif
