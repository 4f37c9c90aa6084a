/* SPDX-License-Identifier: MIT */
/*
 * The library's fast-path lock: a test-and-set spinlock on one int, inline,
 * so that post and poll call nothing on their way (their cost is counted in
 * instructions, bench/budgets.sh). 0 free, 1 held. Used by the CQ, send,
 * receive and SRQ locks; objects that are single-threaded skip it. In
 * src/abi beside the ring layouts it guards: it needs nothing of the
 * library's (docs/DESIGN.md "The tree").
 */
#ifndef SV_ABI_LOCK_H
#define SV_ABI_LOCK_H

#include "abi/sv_cpu.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

static inline void sv_spin_init(int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELAXED);
}

/* Contended: spin on plain loads (no cache-line ping-pong), then retry. */
static __attribute__((noinline, cold, unused)) void sv_spin_wait(int *l)
{
	do {
		while (__atomic_load_n(l, __ATOMIC_RELAXED))
			sv_cpu_relax();
	} while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE));
}

static inline void sv_spin_lock(int *l)
{
	/* acquire: pairs with the release in sv_spin_unlock */
	if (unlikely(__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE)))
		sv_spin_wait(l);
}

static inline void sv_spin_unlock(int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

#endif
