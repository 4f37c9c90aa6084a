/* SPDX-License-Identifier: MIT */
/*
 * rdma-core's private provider interface (IBVERBS_PRIVATE_<N>), each with
 * the prototype of the rdma-core that added it, 44 to the newest Debian
 * ships (verbs/rdma_private.h, its "since" column).
 *
 * softverbs never loads providers, but Debian's libmlx5, libefa, libmana
 * and librdmacm import this node and are loaded with BIND_NOW by perftest,
 * pyverbs, UCX and libfabric, so every symbol must resolve. libmlx5/libefa
 * register their driver from a constructor: that is accepted and ignored.
 * The helpers that mean something without a kernel (verbs_init_cq,
 * verbs_open_device, __verbs_log, __ioctl_final_num_attrs) do what
 * rdma-core's do; every command fails with EOPNOTSUPP, as for a device
 * without the feature. ibv_query_gid_type and the sysfs readers live with
 * the queries (query.c) and discovery (device.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "verbs/sv_verbs.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define SV_INT(name, ...) int name(__VA_ARGS__) { return EOPNOTSUPP; }

/* a provider's say that destroy may follow a disassociation: this device
 * is never disassociated, so nothing reads it (rdma-core 65's node has its
 * own copy, verbs/rdma65.c) */
bool verbs_allow_disassociate_destroy = false;

void verbs_register_driver(const struct verbs_device_ops *ops)
{
}

void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id)
{
	errno = EOPNOTSUPP;
	return NULL;
}

void verbs_uninit_context(struct verbs_context *context)
{
}

void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops)
{
}

/* What a provider's create_cq does to the core fields of its CQ. */
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context)
{
	cq->context = context;
	cq->channel = channel;
	if (channel) {
		pthread_mutex_lock(&context->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&context->mutex);
	}
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
}

/* ibv_open_device with provider data, which our device takes none of. */
struct ibv_context *verbs_open_device(struct ibv_device *device,
				      void *private_data)
{
	return ibv_open_device(device);
}

/* rdma-core's debug log: VERBS_LOG_LEVEL and VERBS_LOG_FILE (else stderr). */
static uint32_t log_level;
static FILE *log_fp;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_init(void)
{
	const char *lvl = getenv("VERBS_LOG_LEVEL");
	const char *file = getenv("VERBS_LOG_FILE");

	log_fp = stderr;
	if (lvl)
		log_level = (uint32_t)strtoul(lvl, NULL, 0);
	if (log_level && file && getuid() == geteuid())
		log_fp = fopen(file, "ae") ?: stderr;
}

void __verbs_log(struct verbs_context *ctx, uint32_t level, char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	pthread_once(&log_once, log_init);
	if (level <= log_level && log_level) {
		va_start(ap, fmt);
		vfprintf(log_fp, fmt, ap);
		va_end(ap);
	}
	errno = saved;
}

/* The attributes a command's linked buffers hold, plus num_attrs: what a
 * provider sizes its final buffer by. */
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
				     struct ibv_command_buffer *link)
{
	for (; link; link = link->next)
		num_attrs += (unsigned int)(link->next_attr - link->hdr.attrs);
	return num_attrs;
}

SV_INT(execute_ioctl, struct ibv_context *context,
       struct ibv_command_buffer *cmd)

/* Commands, through the kernel that this device has none of. */
SV_INT(ibv_cmd_get_context, struct verbs_context *context,
       struct ibv_get_context *cmd, size_t cmd_size,
       struct ib_uverbs_get_context_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_query_context, struct ibv_context *ctx,
       struct ibv_command_buffer *driver)
SV_INT(ibv_cmd_query_device_any, struct ibv_context *context,
       const struct ibv_query_device_ex_input *input,
       struct ibv_device_attr_ex *attr, size_t attr_size,
       struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size)
SV_INT(ibv_cmd_query_port, struct ibv_context *context, uint8_t port_num,
       struct ibv_port_attr *port_attr, struct ibv_query_port *cmd,
       size_t cmd_size)
SV_INT(ibv_cmd_alloc_pd, struct ibv_context *context, struct ibv_pd *pd,
       struct ibv_alloc_pd *cmd, size_t cmd_size,
       struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_dealloc_pd, struct ibv_pd *pd)
SV_INT(ibv_cmd_open_xrcd, struct ibv_context *context, struct verbs_xrcd *xrcd,
       int vxrcd_size, struct ibv_xrcd_init_attr *attr,
       struct ibv_open_xrcd *cmd, size_t cmd_size,
       struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_close_xrcd, struct verbs_xrcd *xrcd)
SV_INT(ibv_cmd_reg_mr, struct ibv_pd *pd, void *addr, size_t length,
       uint64_t hca_va, int access, struct verbs_mr *vmr,
       struct ibv_reg_mr *cmd, size_t cmd_size,
       struct ib_uverbs_reg_mr_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_rereg_mr, struct verbs_mr *vmr, uint32_t flags, void *addr,
       size_t length, uint64_t hca_va, int access, struct ibv_pd *pd,
       struct ibv_rereg_mr *cmd, size_t cmd_sz,
       struct ib_uverbs_rereg_mr_resp *resp, size_t resp_sz)
SV_INT(ibv_cmd_dereg_mr, struct verbs_mr *vmr)
SV_INT(ibv_cmd_query_mr, struct ibv_pd *pd, struct verbs_mr *vmr,
       uint32_t mr_handle)
SV_INT(ibv_cmd_advise_mr, struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
       uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
SV_INT(ibv_cmd_reg_dmabuf_mr, struct ibv_pd *pd, uint64_t offset,
       size_t length, uint64_t iova, int fd, int access, struct verbs_mr *vmr)
SV_INT(ibv_cmd_alloc_mw, struct ibv_pd *pd, enum ibv_mw_type type,
       struct ibv_mw *mw, struct ibv_alloc_mw *cmd, size_t cmd_size,
       struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_dealloc_mw, struct ibv_mw *mw)
SV_INT(ibv_cmd_alloc_dm, struct ibv_context *ctx,
       const struct ibv_alloc_dm_attr *dm_attr, struct verbs_dm *dm,
       struct ibv_command_buffer *link)
SV_INT(ibv_cmd_free_dm, struct verbs_dm *dm)
SV_INT(ibv_cmd_reg_dm_mr, struct ibv_pd *pd, struct verbs_dm *dm,
       uint64_t offset, size_t length, unsigned int access,
       struct verbs_mr *vmr, struct ibv_command_buffer *link)
SV_INT(ibv_cmd_create_cq, struct ibv_context *context, int cqe,
       struct ibv_comp_channel *channel, int comp_vector, struct ibv_cq *cq,
       struct ibv_create_cq *cmd, size_t cmd_size,
       struct ib_uverbs_create_cq_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_create_cq_ex, struct ibv_context *context,
       const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq,
       struct ibv_create_cq_ex *cmd, size_t cmd_size,
       struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size,
       uint32_t cmd_flags)
/* rdma-core 56: ibv_cmd_create_cq_ex with the provider's attributes linked */
SV_INT(ibv_cmd_create_cq_ex2, struct ibv_context *context,
       const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq,
       struct ibv_create_cq_ex *cmd, size_t cmd_size,
       struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size,
       uint32_t cmd_flags, struct ibv_command_buffer *driver)
SV_INT(ibv_cmd_poll_cq, struct ibv_cq *cq, int ne, struct ibv_wc *wc)
SV_INT(ibv_cmd_req_notify_cq, struct ibv_cq *cq, int solicited_only)
SV_INT(ibv_cmd_resize_cq, struct ibv_cq *cq, int cqe,
       struct ibv_resize_cq *cmd, size_t cmd_size,
       struct ib_uverbs_resize_cq_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_destroy_cq, struct ibv_cq *cq)
SV_INT(ibv_cmd_modify_cq, struct ibv_cq *cq, struct ibv_modify_cq_attr *attr,
       struct ibv_modify_cq *cmd, size_t cmd_size)
SV_INT(ibv_cmd_create_srq, struct ibv_pd *pd, struct ibv_srq *srq,
       struct ibv_srq_init_attr *attr, struct ibv_create_srq *cmd,
       size_t cmd_size, struct ib_uverbs_create_srq_resp *resp,
       size_t resp_size)
SV_INT(ibv_cmd_create_srq_ex, struct ibv_context *context,
       struct verbs_srq *srq, struct ibv_srq_init_attr_ex *attr_ex,
       struct ibv_create_xsrq *cmd, size_t cmd_size,
       struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_modify_srq, struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
       int srq_attr_mask, struct ibv_modify_srq *cmd, size_t cmd_size)
SV_INT(ibv_cmd_query_srq, struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
       struct ibv_query_srq *cmd, size_t cmd_size)
SV_INT(ibv_cmd_destroy_srq, struct ibv_srq *srq)
SV_INT(ibv_cmd_create_qp, struct ibv_pd *pd, struct ibv_qp *qp,
       struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
       size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
       size_t resp_size)
SV_INT(ibv_cmd_create_qp_ex, struct ibv_context *context, struct verbs_qp *qp,
       struct ibv_qp_init_attr_ex *attr_ex, struct ibv_create_qp *cmd,
       size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
       size_t resp_size)
SV_INT(ibv_cmd_create_qp_ex2, struct ibv_context *context, struct verbs_qp *qp,
       struct ibv_qp_init_attr_ex *qp_attr, struct ibv_create_qp_ex *cmd,
       size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp,
       size_t resp_size)
SV_INT(ibv_cmd_open_qp, struct ibv_context *context, struct verbs_qp *qp,
       int vqp_sz, struct ibv_qp_open_attr *attr, struct ibv_open_qp *cmd,
       size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
       size_t resp_size)
SV_INT(ibv_cmd_query_qp, struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
       int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
       struct ibv_query_qp *cmd, size_t cmd_size)
SV_INT(ibv_cmd_modify_qp, struct ibv_qp *qp, struct ibv_qp_attr *attr,
       int attr_mask, struct ibv_modify_qp *cmd, size_t cmd_size)
SV_INT(ibv_cmd_modify_qp_ex, struct ibv_qp *qp, struct ibv_qp_attr *attr,
       int attr_mask, struct ibv_modify_qp_ex *cmd, size_t cmd_size,
       struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_destroy_qp, struct ibv_qp *qp)
SV_INT(ibv_cmd_create_ah, struct ibv_pd *pd, struct ibv_ah *ah,
       struct ibv_ah_attr *attr, struct ib_uverbs_create_ah_resp *resp,
       size_t resp_size)
SV_INT(ibv_cmd_destroy_ah, struct ibv_ah *ah)
SV_INT(ibv_cmd_attach_mcast, struct ibv_qp *qp, const union ibv_gid *gid,
       uint16_t lid)
SV_INT(ibv_cmd_detach_mcast, struct ibv_qp *qp, const union ibv_gid *gid,
       uint16_t lid)
SV_INT(ibv_cmd_create_flow, struct ibv_qp *qp, struct ibv_flow *flow_id,
       struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size)
SV_INT(ibv_cmd_destroy_flow, struct ibv_flow *flow_id)
SV_INT(ibv_cmd_create_flow_action_esp, struct ibv_context *ctx,
       struct ibv_flow_action_esp_attr *attr,
       struct verbs_flow_action *flow_action,
       struct ibv_command_buffer *driver)
SV_INT(ibv_cmd_modify_flow_action_esp, struct verbs_flow_action *flow_action,
       struct ibv_flow_action_esp_attr *attr,
       struct ibv_command_buffer *driver)
SV_INT(ibv_cmd_destroy_flow_action, struct verbs_flow_action *action)
SV_INT(ibv_cmd_create_wq, struct ibv_context *context,
       struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq,
       struct ibv_create_wq *cmd, size_t cmd_size,
       struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_modify_wq, struct ibv_wq *wq, struct ibv_wq_attr *attr,
       struct ibv_modify_wq *cmd, size_t cmd_size)
SV_INT(ibv_cmd_destroy_wq, struct ibv_wq *wq)
SV_INT(ibv_cmd_create_rwq_ind_table, struct ibv_context *context,
       struct ibv_rwq_ind_table_init_attr *init_attr,
       struct ibv_rwq_ind_table *rwq_ind_table,
       struct ib_uverbs_ex_create_rwq_ind_table_resp *resp, size_t resp_size)
SV_INT(ibv_cmd_destroy_rwq_ind_table, struct ibv_rwq_ind_table *rwq_ind_table)
SV_INT(ibv_cmd_create_counters, struct ibv_context *context,
       struct ibv_counters_init_attr *init_attr,
       struct verbs_counters *vcounters, struct ibv_command_buffer *link)
SV_INT(ibv_cmd_destroy_counters, struct verbs_counters *vcounters)
SV_INT(ibv_cmd_read_counters, struct verbs_counters *vcounters,
       uint64_t *counters_value, uint32_t ncounters, uint32_t flags,
       struct ibv_command_buffer *link)

/* A post that fails names the first WR as not posted. */
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	*bad_wr = wr;
	return EOPNOTSUPP;
}

int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	*bad_wr = wr;
	return EOPNOTSUPP;
}

int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr)
{
	*bad_wr = wr;
	return EOPNOTSUPP;
}
