/* SPDX-License-Identifier: MIT */
/*
 * softverbs: extensions to the verbs API. Applications include
 * <infiniband/verbs.h> for everything standard and this header for:
 *
 *  - resource domains, in two forms: as objects
 *    (ibv_exp_create_res_domain, thread and message models, passed to
 *    ibv_exp_create_cq / ibv_exp_create_qp) and as indexes
 *    (max_resource_domains from ibv_exp_query_device, a domain index at QP
 *    creation). Upstream's thread domains (ibv_alloc_td,
 *    ibv_alloc_parent_domain) need nothing from here.
 *  - the memory-management extensions that upstream verbs have no name
 *    for: fast-register MRs and their page lists, the
 *    fast-register work request (in ibv_exp_post_send and as an ibv_wr_*
 *    style call), RDMA read with invalidate, block-list registration, type
 *    2A windows. Memory windows, local invalidate, send with invalidate,
 *    ibv_inc_rkey and zero-based MRs (IBV_ACCESS_ZERO_BASED,
 *    ibv_reg_mr_iova) are the standard verbs.
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

/* ---------------- resource domains ---------------- */

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
	/* a domain index in [0, max_resource_domains), in place of a
	 * domain object */
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

/* ---------------- device query ---------------- */

enum ibv_exp_device_attr_comp_mask {
	IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS = 1 << 0,
	IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS = 1 << 1,
	IBV_EXP_DEVICE_ATTR_MAX_FAST_REG_PAGE_LIST_LEN = 1 << 2,
	IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS = 1 << 3,
	IBV_EXP_DEVICE_ATTR_RESERVED = 1 << 4,
};

/* ibv_exp_device_attr.exp_device_cap_flags: the memory-management
 * capabilities device_cap_flags has no bit for (it has
 * IBV_DEVICE_MEM_MGT_EXTENSIONS, IBV_DEVICE_MEM_WINDOW and
 * IBV_DEVICE_MEM_WINDOW_TYPE_2A / _2B). */
enum ibv_exp_device_cap_flags {
	IBV_EXP_DEVICE_FAST_REG_USER = 1 << 0,  /* fast register from here */
	IBV_EXP_DEVICE_BLOCK_LIST = 1 << 1,     /* block-list MRs */
	IBV_EXP_DEVICE_ZERO_BASED_MR = 1 << 2,  /* zero-based MRs */
	IBV_EXP_DEVICE_ZERO_BASED_MW = 1 << 3,  /* zero-based windows */
	IBV_EXP_DEVICE_READ_WITH_INV = 1 << 4,  /* RDMA read with invalidate */
	IBV_EXP_DEVICE_SEND_WITH_INV = 1 << 5,  /* send with invalidate */
	IBV_EXP_DEVICE_MASKED_ATOMICS = 1 << 6, /* masked CAS and FAA */
};

/* What the masked atomics take (IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS). */
struct ibv_exp_masked_atomic_params {
	/* the widest field of a masked fetch-and-add, in bits */
	uint32_t max_fa_bit_boundary;
	/* log2 of the largest operand carried in the work request itself */
	uint32_t log_max_atomic_inline;
	/* bit n set: operands of 2^n bytes (softverbs: 8 bytes, bit 3) */
	uint64_t masked_log_atomic_arg_sizes;
	/* the same, for operands in network byte order (softverbs: none;
	 * operands are in the target's native byte order) */
	uint64_t masked_log_atomic_arg_sizes_network_endianness;
};

struct ibv_exp_device_attr {
	/* in: the fields asked for; out: those filled in (a field whose bit
	 * is not asked for is not written) */
	uint32_t comp_mask;
	/* domain indices are [0, max_resource_domains); also the number of
	 * doorbell pages the device can dedicate to domains */
	uint32_t max_resource_domains;
	/* with _EXP_CAP_FLAGS: enum ibv_exp_device_cap_flags */
	uint64_t exp_device_cap_flags;
	/* with _MAX_FAST_REG_PAGE_LIST_LEN: entries of a page / block list */
	uint32_t max_fast_reg_page_list_len;
	uint32_t reserved;
	/* with _MASKED_ATOMICS (0s when the device has none) */
	struct ibv_exp_masked_atomic_params masked_atomic;
};

/* 0 or an errno value. */
int ibv_exp_query_device(struct ibv_context *context,
			 struct ibv_exp_device_attr *attr);

/* ---------------- memory-management extensions ---------------- */

/*
 * A fast-register MR: keys but no memory, invalid until a fast-register
 * work request makes it valid over a page list; local invalidate (or a
 * peer's send with invalidate) makes it invalid again, and it may then be
 * fast-registered anew (with a new 8-bit key). ibv_dereg_mr frees it. NULL
 * with errno set (EINVAL: max_page_list_len not in
 * [1, max_fast_reg_page_list_len]).
 */
struct ibv_mr *ibv_exp_alloc_fast_reg_mr(struct ibv_pd *pd,
					 int max_page_list_len);

/* One block of a block list: any address, any length (> 0). */
struct ibv_exp_mem_block {
	uint64_t addr;
	uint64_t length;
};

/*
 * A page list: max_page_list_len entries in memory the device reads
 * directly (shared with it). A fast registration in page mode reads
 * page_list[0 .. page_list_len), page addresses aligned to the page size;
 * in block mode (IBV_EXP_FAST_REG_BLOCK_LIST) it reads
 * blocks[0 .. page_list_len) (the same memory). The device reads the list
 * when it executes the work request: keep it unchanged until that
 * completes, then reuse it. One list per fast registration in flight.
 */
struct ibv_exp_fast_reg_page_list {
	struct ibv_context *context;
	uint64_t *page_list;
	struct ibv_exp_mem_block *blocks;
	unsigned int max_page_list_len;
};

/* NULL with errno set. */
struct ibv_exp_fast_reg_page_list *
ibv_exp_alloc_fast_reg_page_list(struct ibv_context *context,
				 int max_page_list_len);
/* 0 or an errno value. */
int ibv_exp_free_fast_reg_page_list(struct ibv_exp_fast_reg_page_list *pl);

/* The key of a fast-register MR with a new consumer key (its low 8 bits). */
static inline uint32_t ibv_exp_update_fast_reg_key(uint32_t key,
						   uint8_t newkey)
{
	return (key & 0xffffff00u) | newkey;
}

/*
 * Register a valid MR over a list of blocks of any size and alignment, in
 * the order given: the MR's bytes are block 0's, then block 1's, ...
 * Addressed from iova, or from 0 with IBV_ACCESS_ZERO_BASED. NULL with
 * errno set.
 */
struct ibv_mr *ibv_exp_reg_mr_blocks(struct ibv_pd *pd,
				     const struct ibv_exp_mem_block *blocks,
				     int nblocks, uint64_t iova,
				     unsigned int access);

/* Type 2A memory windows (associated with a QP only): pass this to
 * ibv_alloc_mw. IBV_MW_TYPE_2 windows are type 2B (QP and PD). mw->type
 * reads IBV_MW_TYPE_2 for both. The value lies far outside upstream's
 * enum (1 and 2), so that a type upstream does not name (3, say) is
 * refused with EINVAL as on every provider, and a future upstream type
 * cannot collide with it. */
#define IBV_EXP_MW_TYPE_2A ((enum ibv_mw_type)0x102a)

/* The work requests of ibv_exp_post_send: the standard ones (same values)
 * and the two upstream has no opcode for. */
enum ibv_exp_wr_opcode {
	IBV_EXP_WR_RDMA_WRITE = IBV_WR_RDMA_WRITE,
	IBV_EXP_WR_RDMA_WRITE_WITH_IMM = IBV_WR_RDMA_WRITE_WITH_IMM,
	IBV_EXP_WR_SEND = IBV_WR_SEND,
	IBV_EXP_WR_SEND_WITH_IMM = IBV_WR_SEND_WITH_IMM,
	IBV_EXP_WR_RDMA_READ = IBV_WR_RDMA_READ,
	IBV_EXP_WR_ATOMIC_CMP_AND_SWP = IBV_WR_ATOMIC_CMP_AND_SWP,
	IBV_EXP_WR_ATOMIC_FETCH_AND_ADD = IBV_WR_ATOMIC_FETCH_AND_ADD,
	IBV_EXP_WR_LOCAL_INV = IBV_WR_LOCAL_INV,
	IBV_EXP_WR_BIND_MW = IBV_WR_BIND_MW,
	IBV_EXP_WR_SEND_WITH_INV = IBV_WR_SEND_WITH_INV,
	/* make wr.fast_reg.mr valid over wr.fast_reg.page_list */
	IBV_EXP_WR_FAST_REG_MR = 12,
	/* RDMA_READ, then invalidate the local key invalidate_rkey once the
	 * data has landed */
	IBV_EXP_WR_RDMA_READ_WITH_INV = 13,
	/* masked atomics on RC QPs (wr ext_op.masked_atomics) */
	IBV_EXP_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP = 14,
	IBV_EXP_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD = 15,
};

/*
 * Masked atomics, on one naturally aligned 8-byte word of the target (in
 * its native byte order, as the standard atomics), atomic with respect to
 * every other atomic of the device (IBV_ATOMIC_HCA). The WR's one SGE of 8
 * bytes receives the word's original value, as for the standard atomics.
 *
 * Masked compare and swap: the compare succeeds when the bits of
 * compare_mask agree, ((orig ^ compare_val) & compare_mask) == 0; then the
 * bits of swap_mask are replaced,
 *     new = (orig & ~swap_mask) | (swap_val & swap_mask).
 * compare_mask 0 always swaps; both masks all-ones is the standard CAS.
 *
 * Masked fetch and add: the word is a row of independent counters. Bit i of
 * field_boundary set means bit i is the top bit of a field: the carry out of
 * it is dropped instead of going into bit i + 1 (bit 63 always ends a
 * field). Each field becomes (field + the add value's same bits) modulo its
 * width. field_boundary 0 is the standard 64-bit fetch and add; 0x80808080
 * 80808080 makes eight byte-wide counters.
 */
struct ibv_exp_cmp_swap {
	uint64_t compare_mask;
	uint64_t compare_val;
	uint64_t swap_val;
	uint64_t swap_mask;
};

struct ibv_exp_fetch_add {
	uint64_t add_val;
	uint64_t field_boundary;
};

/* The completion opcodes of the masked atomics. */
#define IBV_EXP_WC_MASKED_COMP_SWAP ((enum ibv_wc_opcode)9)
#define IBV_EXP_WC_MASKED_FETCH_ADD ((enum ibv_wc_opcode)10)

/* The completion opcode of a fast registration. */
#define IBV_EXP_WC_FAST_REG_MR ((enum ibv_wc_opcode)8)

/* wr.fast_reg.flags */
enum ibv_exp_fast_reg_flags {
	/* the list holds blocks (page_list->blocks), not pages */
	IBV_EXP_FAST_REG_BLOCK_LIST = 1 << 0,
};

/*
 * A send work request of ibv_exp_post_send. Up to and including bind_mw
 * it is laid out as struct ibv_send_wr (the standard opcodes read the same
 * fields); fast_reg follows.
 */
struct ibv_exp_send_wr {
	uint64_t wr_id;
	struct ibv_exp_send_wr *next;
	struct ibv_sge *sg_list;
	int num_sge;
	enum ibv_exp_wr_opcode exp_opcode;
	unsigned int exp_send_flags;       /* enum ibv_send_flags */
	union {
		__be32 imm_data;
		/* SEND_WITH_INV, LOCAL_INV: the key to invalidate;
		 * RDMA_READ_WITH_INV: the local key (of the READ's sink) */
		uint32_t invalidate_rkey;
	};
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct ibv_ah *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
	} wr;
	union {
		struct {
			uint32_t remote_srqn;
		} xrc;
	} qp_type;
	union {
		struct {
			struct ibv_mw *mw;
			uint32_t rkey;
			struct ibv_mw_bind_info bind_info;
		} bind_mw;
		struct {
			void *hdr;
			uint16_t hdr_sz;
			uint16_t mss;
		} tso;
	};
	/* IBV_EXP_WR_FAST_REG_MR */
	struct {
		uint64_t iova_start;       /* ignored with IBV_ACCESS_ZERO_BASED */
		struct ibv_mr *mr;         /* from ibv_exp_alloc_fast_reg_mr */
		struct ibv_exp_fast_reg_page_list *page_list;
		unsigned int page_size;    /* a power of two >= 4096 (pages) */
		unsigned int page_list_len; /* entries used */
		unsigned int first_byte_offset; /* into the first page/block */
		uint64_t length;
		int access_flags;          /* enum ibv_access_flags */
		uint8_t key;               /* the new 8-bit consumer key */
		uint32_t flags;            /* enum ibv_exp_fast_reg_flags */
	} fast_reg;
	/* IBV_EXP_WR_EXT_MASKED_ATOMIC_* (the operands, above) */
	union {
		struct {
			uint32_t log_arg_sz;   /* log2 of the operand size: 3 */
			uint64_t remote_addr;  /* 8-byte aligned */
			uint32_t rkey;
			union {
				struct {
					union {
						struct ibv_exp_cmp_swap
							cmp_swap;
						struct ibv_exp_fetch_add
							fetch_add;
					} op;
				} inline_data;
			} wr_data;
		} masked_atomics;
	} ext_op;
};

/*
 * ibv_post_send for struct ibv_exp_send_wr: standard and extended work
 * requests in one list, executed in order. A FAST_REG_MR sets the MR's
 * lkey and rkey to their new key (ibv_exp_update_fast_reg_key) when it is
 * posted. 0, or an errno value and *bad_wr.
 */
int ibv_exp_post_send(struct ibv_qp *qp, struct ibv_exp_send_wr *wr,
		      struct ibv_exp_send_wr **bad_wr);

/* The fast registration of ibv_exp_wr_fast_reg_mr: the fields of
 * ibv_exp_send_wr.fast_reg but the MR and key. */
struct ibv_exp_fast_reg_attr {
	struct ibv_exp_fast_reg_page_list *page_list;
	unsigned int page_size;
	unsigned int page_list_len;
	unsigned int first_byte_offset;
	uint64_t length;
	uint64_t iova_start;
	int access_flags;
	uint32_t flags;                    /* enum ibv_exp_fast_reg_flags */
};

/*
 * ibv_wr_* style, between ibv_wr_start and ibv_wr_complete of a QP created
 * with ibv_create_qp_ex: a fast registration of mr with the new consumer
 * key (ex->wr_id, ex->wr_flags as for any builder), and an RDMA read that
 * invalidates invalidate_lkey once its data has landed (then
 * ibv_wr_set_sge*). Errors show in ibv_wr_complete.
 */
void ibv_exp_wr_fast_reg_mr(struct ibv_qp_ex *qp, struct ibv_mr *mr,
			    uint8_t key,
			    const struct ibv_exp_fast_reg_attr *attr);
void ibv_exp_wr_rdma_read_inv(struct ibv_qp_ex *qp, uint32_t rkey,
			      uint64_t remote_addr, uint32_t invalidate_lkey);
/* The masked atomics (8-byte operands), then one ibv_wr_set_sge of 8
 * bytes for the original value. */
void ibv_exp_wr_masked_cmp_swp(struct ibv_qp_ex *qp, uint32_t rkey,
			       uint64_t remote_addr,
			       const struct ibv_exp_cmp_swap *op);
void ibv_exp_wr_masked_fetch_add(struct ibv_qp_ex *qp, uint32_t rkey,
				 uint64_t remote_addr,
				 const struct ibv_exp_fetch_add *op);

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
