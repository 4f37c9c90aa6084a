/* SPDX-License-Identifier: MIT */
/*
 * rdma-core's private provider interface, the IBVERBS_PRIVATE_<N> node
 * that Debian's librdmacm, libmlx5, libefa, libmana, libfabric and UCX
 * import: the exact prototype of every function in it, the sysfs helpers
 * and the handful of layouts our definitions read.
 *
 * rdma-core keeps these in libibverbs/driver.h and cmd_ioctl.h, which
 * Debian does not install. This header is our reference list of those
 * facts; every definition in src/verbs/ is compiled against it (and
 * tests/abi/check_prototypes.sh checks that nothing we export lacks a
 * declaration here or in the public headers), so a stub with another
 * signature no longer builds.
 *
 * Struct types the prototypes only point to stay incomplete.
 *
 * Which rdma-core added each entry, from 44 (Debian 12) to the newest
 * Debian has (sid); tests/distros/run.sh relocates every consumer of
 * those releases against our build:
 *
 *   since  symbol (IBVERBS_PRIVATE_34 unless named)
 *   44     every declaration not marked below (the node as Debian 12 has it)
 *   56     ibv_cmd_create_cq_ex2 (libmlx5 56 creates its CQs with it)
 *   56     ibv_wr_opcode_str (node IBVERBS_PRIVATE_34, though verbs.h of 56
 *          declares it; Debian 12's does not, so it is declared here)
 *   65     node IBVERBS_PRIVATE_65 (sid): node 34's functions again,
 *          four with changed prototypes (ibv_cmd_get_context,
 *          ibv_cmd_create_cq_ex, _ex2, ibv_cmd_create_qp_ex2), and the
 *          commands at the end of this file; public IBVERBS_1.15 ... 1.18
 *
 * The layouts below, the parts our definitions read, are the same in 44,
 * 56 and 65 (ibv_command_buffer up to hdr, verbs_sysfs_dev up to ibdev_path);
 * verbs_context_ops is never read (verbs_set_ops ignores it). A program
 * built against a newer verbs.h sees our verbs_context's sz, and takes
 * the ops past it as missing (verbs_get_ctx_op), so nothing reads past it.
 */
#ifndef SV_RDMA_PRIVATE_H
#define SV_RDMA_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#ifndef SV_PRIVATE_NUM
#error "SV_PRIVATE_NUM: the number of rdma-core's IBVERBS_PRIVATE_ node"
#endif

/* rdma-core's own objects and command buffers (kern-abi.h, driver.h). */
struct verbs_device_ops;
struct verbs_context_ops;
struct verbs_xrcd;
struct verbs_srq;
struct verbs_qp;
struct verbs_cq;
struct verbs_mr;
struct verbs_dm;
struct verbs_counters;
struct verbs_flow_action;
struct ibv_get_context;
struct ibv_query_port;
struct ibv_alloc_pd;
struct ibv_open_xrcd;
struct ibv_reg_mr;
struct ibv_rereg_mr;
struct ibv_alloc_mw;
struct ibv_create_cq;
struct ibv_create_cq_ex;
struct ibv_resize_cq;
struct ibv_modify_cq;
struct ibv_create_srq;
struct ibv_create_xsrq;
struct ibv_modify_srq;
struct ibv_query_srq;
struct ibv_create_qp;
struct ibv_create_qp_ex;
struct ibv_open_qp;
struct ibv_query_qp;
struct ibv_modify_qp;
struct ibv_modify_qp_ex;
struct ibv_create_wq;
struct ibv_modify_wq;

/* What ibv_query_gid_type reports (the words of sysfs' gid_attrs/types). */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

/*
 * The head of an ioctl command buffer: a linked list of attribute blocks,
 * each frame's attributes running from hdr.attrs to next_attr.
 */
struct ibv_command_buffer {
	struct ibv_command_buffer *next;
	struct ib_uverbs_attr *next_attr;
	struct ib_uverbs_attr *last_attr;
	uint8_t uhw_in_idx;
	uint8_t uhw_out_idx;
	uint8_t uhw_in_headroom_dwords;
	uint8_t uhw_out_headroom_dwords;
	uint8_t buffer_error : 1;
	uint8_t fallback_require_ex : 1;
	uint8_t fallback_ioctl_only : 1;
	struct ib_uverbs_ioctl_hdr hdr;
};

/* The leading fields of a device found in sysfs, up to the paths that
 * ibv_read_ibdev_sysfs_file reads under. */
struct sv_list_node {
	struct sv_list_node *next, *prev;
};

struct verbs_sysfs_dev {
	struct sv_list_node entry;
	void *provider_data;
	const void *match;
	unsigned int flags;
	char sysfs_name[IBV_SYSFS_NAME_MAX];
	dev_t sysfs_cdev;
	char ibdev_name[IBV_SYSFS_NAME_MAX];
	char ibdev_path[IBV_SYSFS_PATH_MAX];
	/* modalias, node GUID, driver id ... follow; never read here */
};

_Static_assert(offsetof(struct ibv_command_buffer, hdr) == 32,
	       "rdma-core's ibv_command_buffer layout");
_Static_assert(offsetof(struct verbs_sysfs_dev, ibdev_path) == 176,
	       "rdma-core's verbs_sysfs_dev layout");

#define SV_PCAT_(a, b) a##b
#define SV_PCAT(a, b) SV_PCAT_(a, b)
#define verbs_register_driver SV_PCAT(verbs_register_driver_, SV_PRIVATE_NUM)

extern bool verbs_allow_disassociate_destroy;

/* Providers */
void verbs_register_driver(const struct verbs_device_ops *ops);
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id);
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops);
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context);
struct ibv_context *verbs_open_device(struct ibv_device *device,
				      void *private_data);
void __verbs_log(struct verbs_context *ctx, uint32_t level, char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ioctl commands */
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
				     struct ibv_command_buffer *link);
int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd);

/* Device and context */
int ibv_cmd_get_context(struct verbs_context *context,
			struct ibv_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
int ibv_cmd_query_context(struct ibv_context *ctx,
			  struct ibv_command_buffer *driver);
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr,
		       struct ibv_query_port *cmd, size_t cmd_size);

/* PDs, XRC domains, MRs, MWs, device memory */
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct ibv_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);
int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd,
		      int vxrcd_size, struct ibv_xrcd_init_attr *attr,
		      struct ibv_open_xrcd *cmd, size_t cmd_size,
		      struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size);
int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd);
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
		   uint64_t hca_va, int access, struct verbs_mr *vmr,
		   struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);
int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr,
		     size_t length, uint64_t hca_va, int access,
		     struct ibv_pd *pd, struct ibv_rereg_mr *cmd,
		     size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp,
		     size_t resp_sz);
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);
int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr,
		     uint32_t mr_handle);
int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		      uint32_t flags, struct ibv_sge *sg_list,
		      uint32_t num_sge);
int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
			  uint64_t iova, int fd, int access,
			  struct verbs_mr *vmr);
int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
		     struct ibv_mw *mw, struct ibv_alloc_mw *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
		     size_t resp_size);
int ibv_cmd_dealloc_mw(struct ibv_mw *mw);
int ibv_cmd_alloc_dm(struct ibv_context *ctx,
		     const struct ibv_alloc_dm_attr *dm_attr,
		     struct verbs_dm *dm, struct ibv_command_buffer *link);
int ibv_cmd_free_dm(struct verbs_dm *dm);
int ibv_cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm,
		      uint64_t offset, size_t length, unsigned int access,
		      struct verbs_mr *vmr, struct ibv_command_buffer *link);

/* CQs */
int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size);
int ibv_cmd_create_cq_ex(struct ibv_context *context,
			 const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp,
			 size_t resp_size, uint32_t cmd_flags);
/* since 56 */
int ibv_cmd_create_cq_ex2(struct ibv_context *context,
			  const struct ibv_cq_init_attr_ex *cq_attr,
			  struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			  size_t cmd_size,
			  struct ib_uverbs_ex_create_cq_resp *resp,
			  size_t resp_size, uint32_t cmd_flags,
			  struct ibv_command_buffer *driver);
int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
		      size_t resp_size);
int ibv_cmd_destroy_cq(struct ibv_cq *cq);
int ibv_cmd_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr,
		      struct ibv_modify_cq *cmd, size_t cmd_size);

/* SRQs */
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp,
		       size_t resp_size);
int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
			  struct ibv_srq_init_attr_ex *attr_ex,
			  struct ibv_create_xsrq *cmd, size_t cmd_size,
			  struct ib_uverbs_create_srq_resp *resp,
			  size_t resp_size);
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size);
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(struct ibv_srq *srq);

/* QPs */
int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
		      struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
		      size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
		      size_t resp_size);
int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
			 struct ibv_qp_init_attr_ex *attr_ex,
			 struct ibv_create_qp *cmd, size_t cmd_size,
			 struct ib_uverbs_create_qp_resp *resp,
			 size_t resp_size);
int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
			  struct ibv_qp_init_attr_ex *qp_attr,
			  struct ibv_create_qp_ex *cmd, size_t cmd_size,
			  struct ib_uverbs_ex_create_qp_resp *resp,
			  size_t resp_size);
int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp,
		    int vqp_sz, struct ibv_qp_open_attr *attr,
		    struct ibv_open_qp *cmd, size_t cmd_size,
		    struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
		     int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
		     struct ibv_query_qp *cmd, size_t cmd_size);
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_modify_qp *cmd,
		      size_t cmd_size);
int ibv_cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask, struct ibv_modify_qp_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_modify_qp_resp *resp,
			 size_t resp_size);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);
int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr);

/* AHs and multicast */
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
		      struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size);
int ibv_cmd_destroy_ah(struct ibv_ah *ah);
int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);
int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);

/* Flows, WQs, indirection tables, counters */
int ibv_cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id,
			struct ibv_flow_attr *flow_attr, void *ucmd,
			size_t ucmd_size);
int ibv_cmd_destroy_flow(struct ibv_flow *flow_id);
int ibv_cmd_create_flow_action_esp(struct ibv_context *ctx,
				   struct ibv_flow_action_esp_attr *attr,
				   struct verbs_flow_action *flow_action,
				   struct ibv_command_buffer *driver);
int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action *flow_action,
				   struct ibv_flow_action_esp_attr *attr,
				   struct ibv_command_buffer *driver);
int ibv_cmd_destroy_flow_action(struct verbs_flow_action *action);
int ibv_cmd_create_wq(struct ibv_context *context,
		      struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq,
		      struct ibv_create_wq *cmd, size_t cmd_size,
		      struct ib_uverbs_ex_create_wq_resp *resp,
		      size_t resp_size);
int ibv_cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr,
		      struct ibv_modify_wq *cmd, size_t cmd_size);
int ibv_cmd_destroy_wq(struct ibv_wq *wq);
int ibv_cmd_create_rwq_ind_table(struct ibv_context *context,
				 struct ibv_rwq_ind_table_init_attr *init_attr,
				 struct ibv_rwq_ind_table *rwq_ind_table,
				 struct ib_uverbs_ex_create_rwq_ind_table_resp *resp,
				 size_t resp_size);
int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table);
int ibv_cmd_create_counters(struct ibv_context *context,
			    struct ibv_counters_init_attr *init_attr,
			    struct verbs_counters *vcounters,
			    struct ibv_command_buffer *link);
int ibv_cmd_destroy_counters(struct verbs_counters *vcounters);
int ibv_cmd_read_counters(struct verbs_counters *vcounters,
			  uint64_t *counters_value, uint32_t ncounters,
			  uint32_t flags, struct ibv_command_buffer *link);

/* sysfs helpers and GID types (IBVERBS_1.0 and the private node) */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
			      struct verbs_sysfs_dev *sysfs_dev,
			      const char *fnfmt, ...)
	__attribute__((format(printf, 4, 5)));
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type);

/* The name of a send opcode (since 56) */
const char *ibv_wr_opcode_str(enum ibv_wr_opcode opcode);

/* Fork protection of a range (IBVERBS_1.1, declared in driver.h) */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

/* The kernel-structure copies librdmacm uses (IBVERBS_1.0, marshall.h) */
struct ib_user_path_rec;
struct ibv_sa_path_rec;
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
				struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
				struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
				 struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
			       struct ibv_sa_path_rec *src);

/*
 * rdma-core 65 (Debian sid): public IBVERBS_1.15 ... 1.18, and its private
 * node IBVERBS_PRIVATE_65, which our library also exports (verbs/rdma65.c):
 * every function of node 34 again, four with 65's changed prototypes (the
 * sv_p65_* names below, bound to the rdma-core names at node 65), and the
 * commands 65 added. Debian 12's verbs.h declares none of it.
 */
struct ibv_dmah;
struct ibv_dmah_init_attr;
struct ibv_comp_cntr;
struct ibv_comp_cntr_caps;
struct ibv_comp_cntr_init_attr;
struct ibv_qp_attach_comp_cntr_attr;
struct ibv_dmabuf_heap;
struct ibv_fd_arr;
struct verbs_dmah;
struct verbs_create_cq_prov_attr;

/* what ibv_alloc_buf hands out (verbs.h of 65) */
struct ibv_buf {
	void *addr;
	size_t size;
	struct ibv_pd *pd;
	int dmabuf_fd;
};

/* ibv_reg_mr_ex's request (verbs.h of 65) */
enum ibv_mr_init_attr_mask {
	IBV_REG_MR_MASK_IOVA = 1 << 0,
	IBV_REG_MR_MASK_ADDR = 1 << 1,
	IBV_REG_MR_MASK_FD = 1 << 2,
	IBV_REG_MR_MASK_FD_OFFSET = 1 << 3,
	IBV_REG_MR_MASK_DMAH = 1 << 4,
	IBV_REG_MR_MASK_BUF = 1 << 5,
};

struct ibv_mr_init_attr {
	size_t length;
	int access;
	uint64_t comp_mask;
	uint64_t iova;
	void *addr;
	int fd;
	uint64_t fd_offset;
	struct ibv_dmah *dmah;
	struct ibv_buf *buf;
};

_Static_assert(sizeof(struct ibv_buf) == 32, "rdma-core 65's ibv_buf");
_Static_assert(offsetof(struct ibv_mr_init_attr, buf) == 64,
	       "rdma-core 65's ibv_mr_init_attr");

/* IBVERBS_1.15 (65) */
struct ibv_dmah *ibv_alloc_dmah(struct ibv_context *context,
				struct ibv_dmah_init_attr *attr);
int ibv_dealloc_dmah(struct ibv_dmah *dmah);
struct ibv_mr *ibv_reg_mr_ex(struct ibv_pd *pd,
			     struct ibv_mr_init_attr *mr_init_attr);
/* IBVERBS_1.16 (65) */
int ibv_dm_export_dmabuf_fd(struct ibv_dm *dm);
int ibv_query_port_speed(struct ibv_context *context, uint32_t port_num,
			 uint64_t *port_speed);
/* IBVERBS_1.17 (65) */
void *ibv_alloc_buf(struct ibv_pd *pd, size_t size, struct ibv_buf **buf);
void ibv_free_buf(struct ibv_buf *buf);
struct ibv_mr *ibv_reg_buf_mr(struct ibv_pd *pd, struct ibv_buf *buf,
			      void *addr, size_t length, int access);
/* IBVERBS_1.18 (65) */
int _ibv_query_comp_cntr_caps(struct ibv_context *context,
			      struct ibv_comp_cntr_caps *caps,
			      size_t caps_size);
struct ibv_comp_cntr *ibv_create_comp_cntr(struct ibv_context *context,
					   struct ibv_comp_cntr_init_attr *cc_attr);
int ibv_destroy_comp_cntr(struct ibv_comp_cntr *comp_cntr);
int ibv_export_buf_dmabuf_fd(struct ibv_buf *buf);
int ibv_inc_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t amount);
int ibv_inc_err_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t amount);
int ibv_qp_attach_comp_cntr(struct ibv_qp *qp, struct ibv_comp_cntr *comp_cntr,
			    struct ibv_qp_attach_comp_cntr_attr *attr);
int ibv_read_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t *value);
int ibv_read_err_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t *value);
int ibv_set_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t value);
int ibv_set_err_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t value);

/* IBVERBS_PRIVATE_65 only (since 65) */
int ibv_cmd_query_port_speed(struct ibv_context *context, uint32_t port_num,
			     uint64_t *speed);
int ibv_cmd_reg_mr_ex(struct ibv_pd *pd, struct verbs_mr *vmr,
		      struct ibv_mr_init_attr *mr_init_attr);
int ibv_cmd_export_dmabuf_fd(struct ibv_context *ctx, off_t pg_off);
int ibv_cmd_alloc_dmah(struct ibv_context *ctx, struct verbs_dmah *st,
		       struct ibv_dmah_init_attr *attr);
int ibv_cmd_free_dmah(struct verbs_dmah *dmah);
int ibv_cmd_query_comp_cntr_caps(struct ibv_context *context,
				 struct ibv_comp_cntr_caps *caps,
				 size_t caps_size);
int ibv_cmd_create_comp_cntr(struct ibv_context *context,
			     struct ibv_comp_cntr *comp_cntr,
			     struct ibv_command_buffer *link);
int ibv_cmd_destroy_comp_cntr(struct ibv_comp_cntr *comp_cntr);
int ibv_cmd_inc_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t amount);
int ibv_cmd_inc_err_comp_cntr(struct ibv_comp_cntr *comp_cntr,
			      uint64_t amount);
int ibv_cmd_read_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t *value);
int ibv_cmd_read_err_comp_cntr(struct ibv_comp_cntr *comp_cntr,
			       uint64_t *value);
int ibv_cmd_set_comp_cntr(struct ibv_comp_cntr *comp_cntr, uint64_t value);
int ibv_cmd_set_err_comp_cntr(struct ibv_comp_cntr *comp_cntr,
			      uint64_t value);
int ibv_cmd_qp_attach_comp_cntr(struct ibv_qp *qp,
				struct ibv_comp_cntr *comp_cntr,
				struct ibv_qp_attach_comp_cntr_attr *attr);
struct ibv_dmabuf_heap *ibv_dmabuf_heap_cc_shared_init(void);
void ibv_dmabuf_heap_destroy(struct ibv_dmabuf_heap *heap);
void *ibv_dmabuf_heap_alloc(struct ibv_dmabuf_heap *heap, size_t size,
			    int *dmabuf_fd);
void ibv_dmabuf_heap_free(void *buf, size_t size, int dmabuf_fd);

/* Node 34's functions whose prototype 65 changed, as 65 has them: bound
 * to name@IBVERBS_PRIVATE_65 (verbs/rdma65.c) */
int sv_p65_ibv_cmd_get_context(struct verbs_context *context,
			       struct ibv_get_context *cmd, size_t cmd_size,
			       struct ibv_fd_arr *fd_arr,
			       struct ib_uverbs_get_context_resp *resp,
			       size_t resp_size);
int sv_p65_ibv_cmd_create_cq_ex(struct ibv_context *context,
				const struct ibv_cq_init_attr_ex *cq_attr,
				struct verbs_create_cq_prov_attr *prov_attr,
				struct verbs_cq *cq,
				struct ibv_create_cq_ex *cmd, size_t cmd_size,
				struct ib_uverbs_ex_create_cq_resp *resp,
				size_t resp_size, uint32_t cmd_flags);
int sv_p65_ibv_cmd_create_cq_ex2(struct ibv_context *context,
				 const struct ibv_cq_init_attr_ex *cq_attr,
				 struct verbs_create_cq_prov_attr *prov_attr,
				 struct verbs_cq *cq,
				 struct ibv_create_cq_ex *cmd, size_t cmd_size,
				 struct ib_uverbs_ex_create_cq_resp *resp,
				 size_t resp_size, uint32_t cmd_flags,
				 struct ibv_command_buffer *driver);
int sv_p65_ibv_cmd_create_qp_ex2(struct ibv_context *context,
				 struct verbs_qp *qp,
				 struct ibv_qp_init_attr_ex *qp_attr,
				 struct ibv_create_qp_ex *cmd, size_t cmd_size,
				 struct ib_uverbs_ex_create_qp_resp *resp,
				 size_t resp_size,
				 struct ibv_command_buffer *driver);

#endif /* SV_RDMA_PRIVATE_H */
