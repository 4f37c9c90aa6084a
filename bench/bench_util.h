/* SPDX-License-Identifier: MIT */
/*
 * What bench's verbs programs (sv_regcost, sv_mm_cycle) share: a monotonic
 * clock in seconds and the median of a set of samples.
 */
#ifndef SV_BENCH_UTIL_H
#define SV_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0, n) (sorted in place; n > 0). */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
