/* SPDX-License-Identifier: MIT */
/*
 * The counters of alloc_count.so, the malloc interposer of test_noalloc:
 * one struct per process, in a shared file $SV_ALLOC_COUNT_DIR/alloc.PID
 * (4 KiB, so another process can map it) and through sv_alloc_counts() in
 * the process itself.
 */
#ifndef SV_TESTS_ALLOC_COUNT_H
#define SV_TESTS_ALLOC_COUNT_H

#include <stdint.h>

#define SV_ALLOC_MAGIC 0x41564f43u /* "COVA" */

struct sv_alloc_counts {
	uint32_t magic;
	uint32_t pid;
	uint64_t malloc;           /* malloc, valloc, pvalloc */
	uint64_t calloc;
	uint64_t realloc;          /* realloc, reallocarray */
	uint64_t memalign;         /* posix_memalign, aligned_alloc, memalign */
	uint64_t free;             /* free of a non-NULL pointer */
};

/* The calling process's counters (always valid). */
const volatile struct sv_alloc_counts *sv_alloc_counts(void);

static inline uint64_t sv_alloc_total(const volatile struct sv_alloc_counts *c)
{
	return c->malloc + c->calloc + c->realloc + c->memalign + c->free;
}

#endif
