/* SPDX-License-Identifier: MIT */
/*
 * rdma-core's private provider interface (IBVERBS_PRIVATE_<N>).
 *
 * softverbs never loads providers, but Debian's libmlx5, libefa and
 * librdmacm import this node and are loaded with BIND_NOW by perftest and
 * pyverbs, so every symbol must resolve. libmlx5/libefa register their
 * driver from a constructor: that is accepted and ignored. Nothing else
 * here is reached; each stub fails with EOPNOTSUPP.
 * ibv_query_gid_type and ibv_read_ibdev_sysfs_file live elsewhere.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define SV_CAT_(a, b) a##b
#define SV_CAT(a, b) SV_CAT_(a, b)

#define SV_VOID(name, ...) void name(__VA_ARGS__) {}
#define SV_INT(name, ...) int name(__VA_ARGS__) { return EOPNOTSUPP; }
#define SV_PTR(name, ...) \
	void *name(__VA_ARGS__) { errno = EOPNOTSUPP; return NULL; }

bool verbs_allow_disassociate_destroy = false;

SV_VOID(SV_CAT(verbs_register_driver_, SV_PRIVATE_NUM), const void *ops)
SV_VOID(__verbs_log, void *ctx, uint32_t level, const char *fmt, ...)
SV_VOID(verbs_set_ops, void *vctx, const void *ops)
SV_VOID(verbs_uninit_context, void *vctx)
SV_VOID(verbs_init_cq, void *cq, void *ctx, void *channel, void *cq_context)

SV_PTR(_verbs_init_and_alloc_context, void *dev, int cmd_fd, size_t size,
       void *vctx, uint32_t driver_id)
SV_PTR(verbs_open_device, void *dev, void *private_data)

unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link)
{
	return num_attrs;
}

SV_INT(execute_ioctl, void *ctx, void *cmdb)

SV_INT(ibv_cmd_get_context, void *vctx, void *cmd, size_t cmd_size,
       void *resp, size_t resp_size)
SV_INT(ibv_cmd_query_context, void *ctx, void *cmdb)
SV_INT(ibv_cmd_query_device_any, void *ctx, const void *input, void *attr,
       size_t attr_size, void *resp, size_t *resp_size)
SV_INT(ibv_cmd_query_port, void *ctx, uint8_t port_num, void *port_attr,
       void *cmd, size_t cmd_size)

SV_INT(ibv_cmd_alloc_pd, void *ctx, void *pd, void *cmd, size_t cmd_size,
       void *resp, size_t resp_size)
SV_INT(ibv_cmd_dealloc_pd, void *pd)
SV_INT(ibv_cmd_open_xrcd, void *ctx, void *xrcd, int vxrcd_size, void *attr,
       void *cmd, size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_close_xrcd, void *xrcd)

SV_INT(ibv_cmd_reg_mr, void *pd, void *addr, size_t length, uint64_t hca_va,
       int access, void *vmr, void *cmd, size_t cmd_size, void *resp,
       size_t resp_size)
SV_INT(ibv_cmd_rereg_mr, void *vmr, uint32_t flags, void *addr, size_t length,
       uint64_t hca_va, int access, void *pd, void *cmd, size_t cmd_size,
       void *resp, size_t resp_size)
SV_INT(ibv_cmd_reg_dmabuf_mr, void *pd, uint64_t offset, size_t length,
       uint64_t iova, int fd, int access, void *vmr)
SV_INT(ibv_cmd_reg_dm_mr, void *pd, void *dm, uint64_t offset, size_t length,
       unsigned int access, void *vmr, void *link)
SV_INT(ibv_cmd_dereg_mr, void *vmr)
SV_INT(ibv_cmd_query_mr, void *pd, void *vmr, uint32_t mr_handle)
SV_INT(ibv_cmd_advise_mr, void *pd, int advice, uint32_t flags, void *sg_list,
       uint32_t num_sge)
SV_INT(ibv_cmd_alloc_mw, void *pd, int type, void *mw, void *cmd,
       size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_dealloc_mw, void *mw)
SV_INT(ibv_cmd_alloc_dm, void *ctx, const void *dm_attr, void *dm, void *link)
SV_INT(ibv_cmd_free_dm, void *dm)

SV_INT(ibv_cmd_create_cq, void *ctx, int cqe, void *channel, int comp_vector,
       void *cq, void *cmd, size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_create_cq_ex, void *ctx, const void *cq_attr, void *cq,
       void *cmd, size_t cmd_size, void *resp, size_t resp_size,
       uint32_t cmd_flags)
SV_INT(ibv_cmd_poll_cq, void *cq, int ne, void *wc)
SV_INT(ibv_cmd_req_notify_cq, void *cq, int solicited_only)
SV_INT(ibv_cmd_resize_cq, void *cq, int cqe, void *cmd, size_t cmd_size,
       void *resp, size_t resp_size)
SV_INT(ibv_cmd_modify_cq, void *cq, void *attr, void *cmd, size_t cmd_size)
SV_INT(ibv_cmd_destroy_cq, void *cq)

SV_INT(ibv_cmd_create_srq, void *pd, void *srq, void *attr, void *cmd,
       size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_create_srq_ex, void *ctx, void *srq, void *attr_ex, void *cmd,
       size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_modify_srq, void *srq, void *srq_attr, int srq_attr_mask,
       void *cmd, size_t cmd_size)
SV_INT(ibv_cmd_query_srq, void *srq, void *srq_attr, void *cmd,
       size_t cmd_size)
SV_INT(ibv_cmd_destroy_srq, void *srq)

SV_INT(ibv_cmd_create_qp, void *pd, void *qp, void *attr, void *cmd,
       size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_create_qp_ex, void *ctx, void *qp, void *attr_ex, void *cmd,
       size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_create_qp_ex2, void *ctx, void *qp, void *attr_ex, void *cmd,
       size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_open_qp, void *ctx, void *qp, int vqp_size, void *attr,
       void *cmd, size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_query_qp, void *qp, void *attr, int attr_mask, void *init_attr,
       void *cmd, size_t cmd_size)
SV_INT(ibv_cmd_modify_qp, void *qp, void *attr, int attr_mask, void *cmd,
       size_t cmd_size)
SV_INT(ibv_cmd_modify_qp_ex, void *qp, void *attr, int attr_mask, void *cmd,
       size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_destroy_qp, void *qp)

SV_INT(ibv_cmd_post_send, void *qp, void *wr, void **bad_wr)
SV_INT(ibv_cmd_post_recv, void *qp, void *wr, void **bad_wr)
SV_INT(ibv_cmd_post_srq_recv, void *srq, void *wr, void **bad_wr)

SV_INT(ibv_cmd_create_ah, void *pd, void *ah, void *attr, void *resp,
       size_t resp_size)
SV_INT(ibv_cmd_destroy_ah, void *ah)
SV_INT(ibv_cmd_attach_mcast, void *qp, const void *gid, uint16_t lid)
SV_INT(ibv_cmd_detach_mcast, void *qp, const void *gid, uint16_t lid)

SV_INT(ibv_cmd_create_flow, void *qp, void *flow, void *flow_attr, void *ucmd,
       size_t ucmd_size)
SV_INT(ibv_cmd_destroy_flow, void *flow)
SV_INT(ibv_cmd_create_flow_action_esp, void *ctx, void *attr, void *action,
       void *driver)
SV_INT(ibv_cmd_modify_flow_action_esp, void *action, void *attr, void *driver)
SV_INT(ibv_cmd_destroy_flow_action, void *action)

SV_INT(ibv_cmd_create_wq, void *ctx, void *init_attr, void *wq, void *cmd,
       size_t cmd_size, void *resp, size_t resp_size)
SV_INT(ibv_cmd_modify_wq, void *wq, void *attr, void *cmd, size_t cmd_size)
SV_INT(ibv_cmd_destroy_wq, void *wq)
SV_INT(ibv_cmd_create_rwq_ind_table, void *ctx, void *init_attr, void *table,
       void *resp, size_t resp_size)
SV_INT(ibv_cmd_destroy_rwq_ind_table, void *table)

SV_INT(ibv_cmd_create_counters, void *ctx, void *init_attr, void *vcounters,
       void *link)
SV_INT(ibv_cmd_destroy_counters, void *vcounters)
SV_INT(ibv_cmd_read_counters, void *vcounters, uint64_t *values,
       uint32_t ncounters, uint32_t flags, void *link)
