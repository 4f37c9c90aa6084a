/* SPDX-License-Identifier: MIT */
/*
 * softverbs: extensions to the verbs API. Applications include
 * <infiniband/verbs.h> for everything standard and this header for:
 *
 *  - resource domains, in the experimental form of seed 001
 *    (ibv_exp_create_res_domain, thread and message models, passed to
 *    ibv_exp_create_cq / ibv_exp_create_qp) and the index form of seed 000
 *    (max_resource_domains from ibv_exp_query_device, a domain index at QP
 *    creation). Upstream's thread domains (ibv_alloc_td,
 *    ibv_alloc_parent_domain) need nothing from here.
 *
 * The functions are exported by softverbs' libibverbs.so.1 (version node
 * SOFTVERBS_1.0): link with -libverbs against softverbs' build, or run the
 * program under `softverbs run`. docs/RESOURCE-DOMAINS.md says which model to
 * pick and what each one costs.
 */
#ifndef SOFTVERBS_SOFTVERBS_H
#define SOFTVERBS_SOFTVERBS_H

#include <stdint.h>

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------- resource domains (seed 001) ---------------- */

/* Who calls the objects of a domain. */
enum ibv_exp_thread_model {
	/* any thread, at any time: post and poll take a lock */
	IBV_EXP_THREAD_SAFE = 0,
	/* the application serialises its calls: no lock */
	IBV_EXP_THREAD_UNSAFE = 1,
	/* one thread for every object of the domain, for their lifetime: no
	 * lock */
	IBV_EXP_THREAD_SINGLE = 2,
};

/* What the domain's objects are tuned for. */
enum ibv_exp_msg_model {
	/* the device's default (a doorbell page of its own if one is free) */
	IBV_EXP_MSG_DEFAULT = 0,
	/* a hint: the domain's engine keeps polling its doorbell page longer
	 * before it sleeps */
	IBV_EXP_MSG_LOW_LATENCY = 1,
	/* a hint: the domain's engine drains work queues in batches */
	IBV_EXP_MSG_HIGH_BW = 2,
	/* LOW_LATENCY or nothing: creating the domain fails (ENOMEM) when no
	 * doorbell page can be dedicated to it */
	IBV_EXP_MSG_FORCE_LOW_LATENCY = 3,
};

enum ibv_exp_res_domain_init_attr_comp_mask {
	IBV_EXP_RES_DOMAIN_THREAD_MODEL = 1 << 0,
	IBV_EXP_RES_DOMAIN_MSG_MODEL = 1 << 1,
	IBV_EXP_RES_DOMAIN_RESERVED = 1 << 2,
};

struct ibv_exp_res_domain_init_attr {
	uint32_t comp_mask;        /* IBV_EXP_RES_DOMAIN_*; unset: SAFE, DEFAULT */
	enum ibv_exp_thread_model thread_model;
	enum ibv_exp_msg_model msg_model;
};

struct ibv_exp_res_domain {
	struct ibv_context *context;
};

struct ibv_exp_destroy_res_domain_attr {
	uint32_t comp_mask;        /* must be 0 */
};

/* NULL with errno set on failure: EINVAL for a bad attribute, ENOMEM when
 * FORCE_LOW_LATENCY cannot get a page of its own. */
struct ibv_exp_res_domain *
ibv_exp_create_res_domain(struct ibv_context *context,
			  struct ibv_exp_res_domain_init_attr *attr);

/* 0, or an errno value: EBUSY while a CQ or QP still uses the domain. attr
 * may be NULL. */
int ibv_exp_destroy_res_domain(struct ibv_context *context,
			       struct ibv_exp_res_domain *res_dom,
			       struct ibv_exp_destroy_res_domain_attr *attr);

/* ---------------- CQs and QPs in a domain ---------------- */

enum ibv_exp_cq_init_attr_mask {
	IBV_EXP_CQ_INIT_ATTR_FLAGS = 1 << 0,
	IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN = 1 << 1,
	IBV_EXP_CQ_INIT_ATTR_RESERVED = 1 << 2,
};

struct ibv_exp_cq_init_attr {
	uint32_t comp_mask;        /* IBV_EXP_CQ_INIT_ATTR_* */
	uint32_t flags;            /* with _FLAGS: enum ibv_create_cq_attr_flags */
	struct ibv_exp_res_domain *res_domain; /* with _RES_DOMAIN */
};

/* ibv_create_cq with attributes; attr may be NULL. */
struct ibv_cq *ibv_exp_create_cq(struct ibv_context *context, int cqe,
				 void *cq_context,
				 struct ibv_comp_channel *channel,
				 int comp_vector,
				 struct ibv_exp_cq_init_attr *attr);

enum ibv_exp_qp_init_attr_comp_mask {
	IBV_EXP_QP_INIT_ATTR_PD = 1 << 0,
	IBV_EXP_QP_INIT_ATTR_XRCD = 1 << 1,        /* not offered: EINVAL */
	IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS = 1 << 2,
	IBV_EXP_QP_INIT_ATTR_RES_DOMAIN = 1 << 7,
	/* seed 000: a domain index in [0, max_resource_domains) */
	IBV_EXP_QP_INIT_ATTR_RES_DOMAIN_INDEX = 1 << 16,
	IBV_EXP_QP_INIT_ATTR_RESERVED = 1 << 17,
};

struct ibv_exp_qp_init_attr {
	void *qp_context;
	struct ibv_cq *send_cq;
	struct ibv_cq *recv_cq;
	struct ibv_srq *srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;
	uint32_t comp_mask;        /* IBV_EXP_QP_INIT_ATTR_*; _PD is required */
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd;
	uint32_t exp_create_flags; /* with _CREATE_FLAGS: enum ibv_qp_create_flags */
	uint32_t resource_domain;  /* with _RES_DOMAIN_INDEX */
	struct ibv_exp_res_domain *res_domain; /* with _RES_DOMAIN */
};

/* ibv_create_qp with attributes (and a domain): NULL with errno set;
 * EINVAL for an index out of range or both kinds of domain at once. */
struct ibv_qp *ibv_exp_create_qp(struct ibv_context *context,
				 struct ibv_exp_qp_init_attr *attr);

/* ---------------- parent-domain allocators ---------------- */

/*
 * The resource_type that the allocator callbacks of a parent domain
 * (IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) are called with: softverbs' tag
 * ("SV") in the high 32 bits, as providers put their driver id there, and
 * what the memory is for in the low ones. softverbs asks only for ring
 * memory, in whole pages aligned to the page size, and maps the ring's
 * shared memory over the block it gets:
 *   SV_RES_TYPE_QP  a QP's send and receive rings (one block per QP)
 *   SV_RES_TYPE_CQ  a CQ's ring (one block per CQ; a new one at resize)
 * alloc() may return IBV_ALLOCATOR_USE_DEFAULT (softverbs maps the ring
 * itself) or NULL (the create fails with ENOMEM).
 */
#define SV_RES_TYPE_QP (((uint64_t)0x5356 << 32) | 1)
#define SV_RES_TYPE_CQ (((uint64_t)0x5356 << 32) | 2)

/* ---------------- device query (seed 000) ---------------- */

enum ibv_exp_device_attr_comp_mask {
	IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS = 1 << 0,
	IBV_EXP_DEVICE_ATTR_RESERVED = 1 << 1,
};

struct ibv_exp_device_attr {
	/* in: the fields asked for; out: those filled in */
	uint32_t comp_mask;
	/* domain indices are [0, max_resource_domains); also the number of
	 * doorbell pages the device can dedicate to domains */
	uint32_t max_resource_domains;
};

/* 0 or an errno value. */
int ibv_exp_query_device(struct ibv_context *context,
			 struct ibv_exp_device_attr *attr);

/* ---------------- softverbs' own: what a domain got ---------------- */

struct sv_res_domain_info {
	uint32_t db_index;         /* the doorbell page (and engine) it uses */
	/* 1: no other domain used that page when this one was created; a
	 * FORCE_LOW_LATENCY domain keeps it so for its whole life (others,
	 * created once every page is taken, may come to share theirs) */
	uint32_t dedicated;
	enum ibv_exp_thread_model thread_model;
	enum ibv_exp_msg_model msg_model;
};

/* Which doorbell page a domain got: for tests and benchmarks. 0 or an
 * errno value. */
int sv_query_res_domain(struct ibv_exp_res_domain *res_dom,
			struct sv_res_domain_info *info);

/* The doorbell page (and engine) a QP uses, whatever API put it there: 0
 * is the default page that objects without a domain share. 0 or an errno
 * value. */
int sv_query_qp_db(struct ibv_qp *qp, uint32_t *db_index);

#ifdef __cplusplus
}
#endif

#endif
