/* SPDX-License-Identifier: MIT */
/*
 * softverbs: extensions to the verbs API (resource domains, memory-management
 * extensions, masked atomics). Empty until those issues land; applications
 * include <infiniband/verbs.h> for everything standard.
 */
#ifndef SOFTVERBS_SOFTVERBS_H
#define SOFTVERBS_SOFTVERBS_H

#include <infiniband/verbs.h>

#endif
