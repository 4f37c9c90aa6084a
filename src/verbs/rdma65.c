/* SPDX-License-Identifier: MIT */
/*
 * What rdma-core 65 (Debian sid) added to libibverbs.so.1, with 65's
 * prototypes (verbs/rdma_private.h, "since 65"):
 *
 *  - IBVERBS_1.15 ... 1.18. Host buffers (ibv_alloc_buf, ibv_free_buf,
 *    ibv_reg_buf_mr, ibv_export_buf_dmabuf_fd) and ibv_reg_mr_ex work as
 *    rdma-core's core does for a provider without those ops: page-aligned
 *    memory, and the registration translated into ibv_reg_mr_iova2 (or
 *    ibv_reg_dmabuf_mr for a file descriptor). DMA handles, completion
 *    counters, exporting device memory and the port speed query are ops
 *    the device does not have: EOPNOTSUPP, as rdma-core reports them.
 *  - IBVERBS_PRIVATE_65, 65's private node, next to node 34 (Debian 12 and
 *    13): each function of node 34 again at node 65, through a jump to the
 *    one definition; the four whose prototype 65 changed (ibv_cmd_get_context,
 *    ibv_cmd_create_cq_ex, ibv_cmd_create_cq_ex2, ibv_cmd_create_qp_ex2) as
 *    functions of their own with 65's prototype; the commands 65 added.
 *    Commands fail with EOPNOTSUPP, like node 34's (verbs/private.c); the
 *    DMA-buf heap helpers as rdma-core built without <linux/dma-heap.h>.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verbs/sv_verbs.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#if SV_PRIVATE_NUM != 34
#error "rdma65.c adds node 65 beside node 34: build against Debian 12's or 13's rdma-core"
#endif

/* ---- IBVERBS_1.15 ---- */

SV_EXPORT struct ibv_dmah *ibv_alloc_dmah(struct ibv_context *context,
					  struct ibv_dmah_init_attr *attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* (none was ever handed out) */
SV_EXPORT int ibv_dealloc_dmah(struct ibv_dmah *dmah)
{
	return EOPNOTSUPP;
}

/* A registration from a buffer of ibv_alloc_buf: the range must lie in
 * it, on the buffer's PD, by address. 0, or -1 with errno. */
static int mr_attr_from_buf(struct ibv_pd *pd, struct ibv_mr_init_attr *a)
{
	struct ibv_buf *buf = a->buf;
	uintptr_t base, addr;

	if (!buf || buf->pd != pd || !(a->comp_mask & IBV_REG_MR_MASK_ADDR) ||
	    (a->comp_mask & (IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET))) {
		errno = EINVAL;
		return -1;
	}
	base = (uintptr_t)buf->addr;
	addr = (uintptr_t)a->addr;
	if (addr < base || addr - base > buf->size ||
	    a->length > buf->size - (addr - base)) {
		errno = EINVAL;
		return -1;
	}
	a->comp_mask &= ~(uint64_t)IBV_REG_MR_MASK_BUF;
	if (buf->dmabuf_fd != -1) {
		/* a dma-buf backed buffer registers by its file */
		if (a->comp_mask & IBV_REG_MR_MASK_IOVA) {
			errno = EINVAL;
			return -1;
		}
		a->comp_mask &= ~(uint64_t)IBV_REG_MR_MASK_ADDR;
		a->comp_mask |= IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET |
				IBV_REG_MR_MASK_IOVA;
		a->fd = buf->dmabuf_fd;
		a->fd_offset = addr - base;
		a->iova = addr;
	}
	return 0;
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_ex(struct ibv_pd *pd,
				       struct ibv_mr_init_attr *mr_init_attr)
{
	const uint64_t legacy = IBV_REG_MR_MASK_IOVA | IBV_REG_MR_MASK_ADDR |
				IBV_REG_MR_MASK_FD | IBV_REG_MR_MASK_FD_OFFSET;
	struct ibv_mr_init_attr a = {
		.length = mr_init_attr->length,
		.access = mr_init_attr->access,
		.comp_mask = mr_init_attr->comp_mask,
	};
	struct ibv_mr *mr;

	if (a.comp_mask & IBV_REG_MR_MASK_IOVA)
		a.iova = mr_init_attr->iova;
	if (a.comp_mask & IBV_REG_MR_MASK_ADDR)
		a.addr = mr_init_attr->addr;
	if (a.comp_mask & IBV_REG_MR_MASK_FD)
		a.fd = mr_init_attr->fd;
	if (a.comp_mask & IBV_REG_MR_MASK_FD_OFFSET)
		a.fd_offset = mr_init_attr->fd_offset;
	if (a.comp_mask & IBV_REG_MR_MASK_DMAH)
		a.dmah = mr_init_attr->dmah;
	if (a.comp_mask & IBV_REG_MR_MASK_BUF) {
		a.buf = mr_init_attr->buf;
		if (mr_attr_from_buf(pd, &a))
			return NULL;
	}
	/* a DMA handle, or a mask bit this rdma-core does not know */
	if (a.comp_mask & ~legacy) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a.comp_mask & IBV_REG_MR_MASK_FD) {
		if ((a.comp_mask & IBV_REG_MR_MASK_ADDR) ||
		    !(a.comp_mask & IBV_REG_MR_MASK_FD_OFFSET) ||
		    !(a.comp_mask & IBV_REG_MR_MASK_IOVA)) {
			errno = EINVAL;
			return NULL;
		}
		return ibv_reg_dmabuf_mr(pd, a.fd_offset, a.length, a.iova,
					 a.fd, a.access);
	}
	if (!(a.comp_mask & IBV_REG_MR_MASK_ADDR) ||
	    (a.comp_mask & IBV_REG_MR_MASK_FD_OFFSET)) {
		errno = EINVAL;
		return NULL;
	}
	mr = ibv_reg_mr_iova2(pd, a.addr, a.length,
			      (a.comp_mask & IBV_REG_MR_MASK_IOVA) ?
				      a.iova : (uintptr_t)a.addr,
			      (unsigned int)a.access);
	return mr;
}

/* ---- IBVERBS_1.16 ---- */

SV_EXPORT int ibv_dm_export_dmabuf_fd(struct ibv_dm *dm)
{
	errno = EOPNOTSUPP;
	return -1;
}

SV_EXPORT int ibv_query_port_speed(struct ibv_context *context,
				   uint32_t port_num, uint64_t *port_speed)
{
	return EOPNOTSUPP;
}

/* ---- IBVERBS_1.17 ---- */

SV_EXPORT void *ibv_alloc_buf(struct ibv_pd *pd, size_t size,
			      struct ibv_buf **buf)
{
	struct ibv_buf *b = calloc(1, sizeof(*b));
	long page = sysconf(_SC_PAGESIZE);
	void *p;
	int ret;

	if (!b) {
		errno = ENOMEM;
		return NULL;
	}
	ret = posix_memalign(&p, page > 0 ? (size_t)page : 4096, size);
	if (ret) {
		free(b);
		errno = ret;
		return NULL;
	}
	b->addr = p;
	b->size = size;
	b->pd = pd;
	b->dmabuf_fd = -1;
	*buf = b;
	return p;
}

SV_EXPORT void ibv_free_buf(struct ibv_buf *buf)
{
	free(buf->addr);
	free(buf);
}

SV_EXPORT struct ibv_mr *ibv_reg_buf_mr(struct ibv_pd *pd, struct ibv_buf *buf,
					void *addr, size_t length, int access)
{
	struct ibv_mr_init_attr a = {
		.length = length,
		.access = access,
		.comp_mask = IBV_REG_MR_MASK_BUF | IBV_REG_MR_MASK_ADDR,
		.addr = addr,
		.buf = buf,
	};

	return ibv_reg_mr_ex(pd, &a);
}

/* ---- IBVERBS_1.18 ---- */

SV_EXPORT int _ibv_query_comp_cntr_caps(struct ibv_context *context,
					struct ibv_comp_cntr_caps *caps,
					size_t caps_size)
{
	memset(caps, 0, caps_size);
	return EOPNOTSUPP;
}

SV_EXPORT struct ibv_comp_cntr *
ibv_create_comp_cntr(struct ibv_context *context,
		     struct ibv_comp_cntr_init_attr *cc_attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SV_EXPORT int ibv_export_buf_dmabuf_fd(struct ibv_buf *buf)
{
	if (buf->dmabuf_fd < 0) {
		errno = ENODATA;
		return -1;
	}
	return fcntl(buf->dmabuf_fd, F_DUPFD_CLOEXEC, 0);
}

/* (no counter was ever handed out) */
#define SV_CNTR(name, ...)						\
	SV_EXPORT int name(__VA_ARGS__) { return EOPNOTSUPP; }

SV_CNTR(ibv_destroy_comp_cntr, struct ibv_comp_cntr *comp_cntr)
SV_CNTR(ibv_inc_comp_cntr, struct ibv_comp_cntr *comp_cntr, uint64_t amount)
SV_CNTR(ibv_inc_err_comp_cntr, struct ibv_comp_cntr *comp_cntr,
	uint64_t amount)
SV_CNTR(ibv_qp_attach_comp_cntr, struct ibv_qp *qp,
	struct ibv_comp_cntr *comp_cntr,
	struct ibv_qp_attach_comp_cntr_attr *attr)
SV_CNTR(ibv_read_comp_cntr, struct ibv_comp_cntr *comp_cntr, uint64_t *value)
SV_CNTR(ibv_read_err_comp_cntr, struct ibv_comp_cntr *comp_cntr,
	uint64_t *value)
SV_CNTR(ibv_set_comp_cntr, struct ibv_comp_cntr *comp_cntr, uint64_t value)
SV_CNTR(ibv_set_err_comp_cntr, struct ibv_comp_cntr *comp_cntr,
	uint64_t value)

/* ---- IBVERBS_PRIVATE_65: the commands 65 added ---- */

#define SV_CMD(name, ...) int name(__VA_ARGS__) { return EOPNOTSUPP; }

SV_CMD(ibv_cmd_query_port_speed, struct ibv_context *context,
       uint32_t port_num, uint64_t *speed)
SV_CMD(ibv_cmd_reg_mr_ex, struct ibv_pd *pd, struct verbs_mr *vmr,
       struct ibv_mr_init_attr *mr_init_attr)
SV_CMD(ibv_cmd_alloc_dmah, struct ibv_context *ctx, struct verbs_dmah *st,
       struct ibv_dmah_init_attr *attr)
SV_CMD(ibv_cmd_free_dmah, struct verbs_dmah *dmah)
SV_CMD(ibv_cmd_query_comp_cntr_caps, struct ibv_context *context,
       struct ibv_comp_cntr_caps *caps, size_t caps_size)
SV_CMD(ibv_cmd_create_comp_cntr, struct ibv_context *context,
       struct ibv_comp_cntr *comp_cntr, struct ibv_command_buffer *link)
SV_CMD(ibv_cmd_destroy_comp_cntr, struct ibv_comp_cntr *comp_cntr)
SV_CMD(ibv_cmd_inc_comp_cntr, struct ibv_comp_cntr *comp_cntr,
       uint64_t amount)
SV_CMD(ibv_cmd_inc_err_comp_cntr, struct ibv_comp_cntr *comp_cntr,
       uint64_t amount)
SV_CMD(ibv_cmd_read_comp_cntr, struct ibv_comp_cntr *comp_cntr,
       uint64_t *value)
SV_CMD(ibv_cmd_read_err_comp_cntr, struct ibv_comp_cntr *comp_cntr,
       uint64_t *value)
SV_CMD(ibv_cmd_set_comp_cntr, struct ibv_comp_cntr *comp_cntr, uint64_t value)
SV_CMD(ibv_cmd_set_err_comp_cntr, struct ibv_comp_cntr *comp_cntr,
       uint64_t value)
SV_CMD(ibv_cmd_qp_attach_comp_cntr, struct ibv_qp *qp,
       struct ibv_comp_cntr *comp_cntr,
       struct ibv_qp_attach_comp_cntr_attr *attr)

/* an mmap offset's dma-buf: there is no kernel object to export */
int ibv_cmd_export_dmabuf_fd(struct ibv_context *ctx, off_t pg_off)
{
	errno = EOPNOTSUPP;
	return -1;
}

/* rdma-core built without <linux/dma-heap.h> */
struct ibv_dmabuf_heap *ibv_dmabuf_heap_cc_shared_init(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_dmabuf_heap_destroy(struct ibv_dmabuf_heap *heap)
{
}

void *ibv_dmabuf_heap_alloc(struct ibv_dmabuf_heap *heap, size_t size,
			    int *dmabuf_fd)
{
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_dmabuf_heap_free(void *buf, size_t size, int dmabuf_fd)
{
}

/* ---- IBVERBS_PRIVATE_65: node 34's flag ----
 * Written by providers, read by nothing here (verbs/private.c); a copy of
 * its own, as GNU ld keeps one version of a name defined and .symver'd in
 * the same object. */
extern bool sv_p65_disassociate;
__asm__(".symver sv_p65_disassociate, "
	"verbs_allow_disassociate_destroy@IBVERBS_PRIVATE_65");
bool sv_p65_disassociate = false;

/* ---- IBVERBS_PRIVATE_65: node 34's functions 65 changed ---- */

#define SV_AT65(fn, name) __asm__(".symver " #fn ", " #name "@IBVERBS_PRIVATE_65")

SV_AT65(sv_p65_ibv_cmd_get_context, ibv_cmd_get_context);
__attribute__((used)) int
sv_p65_ibv_cmd_get_context(struct verbs_context *context,
			   struct ibv_get_context *cmd, size_t cmd_size,
			   struct ibv_fd_arr *fd_arr,
			   struct ib_uverbs_get_context_resp *resp,
			   size_t resp_size)
{
	return EOPNOTSUPP;
}

SV_AT65(sv_p65_ibv_cmd_create_cq_ex, ibv_cmd_create_cq_ex);
__attribute__((used)) int
sv_p65_ibv_cmd_create_cq_ex(struct ibv_context *context,
			    const struct ibv_cq_init_attr_ex *cq_attr,
			    struct verbs_create_cq_prov_attr *prov_attr,
			    struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			    size_t cmd_size,
			    struct ib_uverbs_ex_create_cq_resp *resp,
			    size_t resp_size, uint32_t cmd_flags)
{
	return EOPNOTSUPP;
}

SV_AT65(sv_p65_ibv_cmd_create_cq_ex2, ibv_cmd_create_cq_ex2);
__attribute__((used)) int
sv_p65_ibv_cmd_create_cq_ex2(struct ibv_context *context,
			     const struct ibv_cq_init_attr_ex *cq_attr,
			     struct verbs_create_cq_prov_attr *prov_attr,
			     struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			     size_t cmd_size,
			     struct ib_uverbs_ex_create_cq_resp *resp,
			     size_t resp_size, uint32_t cmd_flags,
			     struct ibv_command_buffer *driver)
{
	return EOPNOTSUPP;
}

SV_AT65(sv_p65_ibv_cmd_create_qp_ex2, ibv_cmd_create_qp_ex2);
__attribute__((used)) int
sv_p65_ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
			     struct ibv_qp_init_attr_ex *qp_attr,
			     struct ibv_create_qp_ex *cmd, size_t cmd_size,
			     struct ib_uverbs_ex_create_qp_resp *resp,
			     size_t resp_size, struct ibv_command_buffer *driver)
{
	return EOPNOTSUPP;
}

/*
 * ---- IBVERBS_PRIVATE_65: node 34's functions 65 kept as they were ----
 * Each name@IBVERBS_PRIVATE_65 is a jump to the one definition (node 34's
 * name): arguments, variadic ones too, pass through untouched. x86_64.
 */
#if !defined(__x86_64__)
#error "the node-65 jumps are written for x86_64"
#endif

#define SV_JMP65(name, target)						\
	__asm__(".text\n"						\
		".p2align 4\n"						\
		".globl sv_j65_" #name "\n"				\
		".type sv_j65_" #name ", @function\n"			\
		"sv_j65_" #name ":\n"					\
		"\tjmp " #target "@PLT\n"				\
		".size sv_j65_" #name ", .-sv_j65_" #name "\n"		\
		".symver sv_j65_" #name ", " #name "@IBVERBS_PRIVATE_65\n")
#define SV_SAME65(name) SV_JMP65(name, name)

SV_JMP65(verbs_register_driver_65, verbs_register_driver_34);
SV_SAME65(__ioctl_final_num_attrs);
SV_SAME65(__verbs_log);
SV_SAME65(_verbs_init_and_alloc_context);
SV_SAME65(execute_ioctl);
SV_SAME65(ibv_cmd_advise_mr);
SV_SAME65(ibv_cmd_alloc_dm);
SV_SAME65(ibv_cmd_alloc_mw);
SV_SAME65(ibv_cmd_alloc_pd);
SV_SAME65(ibv_cmd_attach_mcast);
SV_SAME65(ibv_cmd_close_xrcd);
SV_SAME65(ibv_cmd_create_ah);
SV_SAME65(ibv_cmd_create_counters);
SV_SAME65(ibv_cmd_create_cq);
SV_SAME65(ibv_cmd_create_flow);
SV_SAME65(ibv_cmd_create_flow_action_esp);
SV_SAME65(ibv_cmd_create_qp);
SV_SAME65(ibv_cmd_create_qp_ex);
SV_SAME65(ibv_cmd_create_rwq_ind_table);
SV_SAME65(ibv_cmd_create_srq);
SV_SAME65(ibv_cmd_create_srq_ex);
SV_SAME65(ibv_cmd_create_wq);
SV_SAME65(ibv_cmd_dealloc_mw);
SV_SAME65(ibv_cmd_dealloc_pd);
SV_SAME65(ibv_cmd_dereg_mr);
SV_SAME65(ibv_cmd_destroy_ah);
SV_SAME65(ibv_cmd_destroy_counters);
SV_SAME65(ibv_cmd_destroy_cq);
SV_SAME65(ibv_cmd_destroy_flow);
SV_SAME65(ibv_cmd_destroy_flow_action);
SV_SAME65(ibv_cmd_destroy_qp);
SV_SAME65(ibv_cmd_destroy_rwq_ind_table);
SV_SAME65(ibv_cmd_destroy_srq);
SV_SAME65(ibv_cmd_destroy_wq);
SV_SAME65(ibv_cmd_detach_mcast);
SV_SAME65(ibv_cmd_free_dm);
SV_SAME65(ibv_cmd_modify_cq);
SV_SAME65(ibv_cmd_modify_flow_action_esp);
SV_SAME65(ibv_cmd_modify_qp);
SV_SAME65(ibv_cmd_modify_qp_ex);
SV_SAME65(ibv_cmd_modify_srq);
SV_SAME65(ibv_cmd_modify_wq);
SV_SAME65(ibv_cmd_open_qp);
SV_SAME65(ibv_cmd_open_xrcd);
SV_SAME65(ibv_cmd_poll_cq);
SV_SAME65(ibv_cmd_post_recv);
SV_SAME65(ibv_cmd_post_send);
SV_SAME65(ibv_cmd_post_srq_recv);
SV_SAME65(ibv_cmd_query_context);
SV_SAME65(ibv_cmd_query_device_any);
SV_SAME65(ibv_cmd_query_mr);
SV_SAME65(ibv_cmd_query_port);
SV_SAME65(ibv_cmd_query_qp);
SV_SAME65(ibv_cmd_query_srq);
SV_SAME65(ibv_cmd_read_counters);
SV_SAME65(ibv_cmd_reg_dm_mr);
SV_SAME65(ibv_cmd_reg_dmabuf_mr);
SV_SAME65(ibv_cmd_reg_mr);
SV_SAME65(ibv_cmd_req_notify_cq);
SV_SAME65(ibv_cmd_rereg_mr);
SV_SAME65(ibv_cmd_resize_cq);
SV_SAME65(ibv_query_gid_type);
SV_SAME65(ibv_read_ibdev_sysfs_file);
SV_SAME65(ibv_wr_opcode_str);
SV_SAME65(verbs_init_cq);
SV_SAME65(verbs_open_device);
SV_SAME65(verbs_set_ops);
SV_SAME65(verbs_uninit_context);
