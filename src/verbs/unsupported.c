// SPDX-License-Identifier: MIT
/*
 * Every op and verb the device does not implement yet, as a typed stub that
 * fails with EOPNOTSUPP the way its verb reports errors: a pointer verb
 * returns NULL with errno set, an int verb returns the errno, a post verb also
 * names the first WR not posted. The context's tables hold no NULLs.
 */
#include <errno.h>
#include <string.h>

#include "verbs/sv_verbs.h"

/* stubs ignore their arguments by design */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define NOSUP_PTR(name, rtype, ...)                                          \
	static rtype *name(__VA_ARGS__)                                      \
	{                                                                    \
		errno = EOPNOTSUPP;                                          \
		return NULL;                                                 \
	}
#define NOSUP_INT(name, ...)                                                 \
	static int name(__VA_ARGS__)                                         \
	{                                                                    \
		return EOPNOTSUPP;                                           \
	}

/* ---- struct ibv_context_ops ---- */

static void *nosup_compat(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

NOSUP_INT(nosup_compat_query_device, struct ibv_context *c,
	  struct ibv_device_attr *a)
NOSUP_INT(nosup_compat_query_port, struct ibv_context *c, uint8_t p,
	  struct _compat_ibv_port_attr *a)

static int nosup_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad)
{
	(void)srq;
	*bad = wr;
	return EOPNOTSUPP;
}

static int nosup_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad)
{
	(void)qp;
	*bad = wr;
	return EOPNOTSUPP;
}

static int nosup_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad)
{
	(void)qp;
	*bad = wr;
	return EOPNOTSUPP;
}

static int nosup_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	(void)cq;
	(void)n;
	(void)wc;
	return -1; /* poll_cq's error value */
}

NOSUP_INT(nosup_req_notify_cq, struct ibv_cq *cq, int s)

/* ---- struct verbs_context ---- */

NOSUP_INT(nosup_query_port, struct ibv_context *c, uint8_t p,
	  struct ibv_port_attr *a, size_t l)
NOSUP_INT(nosup_advise_mr, struct ibv_pd *pd, enum ibv_advise_mr_advice a,
	  uint32_t f, struct ibv_sge *s, uint32_t n)
NOSUP_PTR(nosup_alloc_null_mr, struct ibv_mr, struct ibv_pd *pd)
NOSUP_INT(nosup_read_counters, struct ibv_counters *c, uint64_t *v,
	  uint32_t n, uint32_t f)
NOSUP_INT(nosup_attach_counters_point_flow, struct ibv_counters *c,
	  struct ibv_counter_attach_attr *a, struct ibv_flow *f)
NOSUP_PTR(nosup_create_counters, struct ibv_counters, struct ibv_context *c,
	  struct ibv_counters_init_attr *a)
NOSUP_INT(nosup_destroy_counters, struct ibv_counters *c)
NOSUP_PTR(nosup_reg_dm_mr, struct ibv_mr, struct ibv_pd *pd,
	  struct ibv_dm *dm, uint64_t off, size_t len, unsigned int acc)
NOSUP_PTR(nosup_alloc_dm, struct ibv_dm, struct ibv_context *c,
	  struct ibv_alloc_dm_attr *a)
NOSUP_INT(nosup_free_dm, struct ibv_dm *dm)
NOSUP_INT(nosup_modify_flow_action_esp, struct ibv_flow_action *a,
	  struct ibv_flow_action_esp_attr *e)
NOSUP_INT(nosup_destroy_flow_action, struct ibv_flow_action *a)
NOSUP_PTR(nosup_create_flow_action_esp, struct ibv_flow_action,
	  struct ibv_context *c, struct ibv_flow_action_esp_attr *e)
NOSUP_INT(nosup_modify_qp_rate_limit, struct ibv_qp *qp,
	  struct ibv_qp_rate_limit_attr *a)
NOSUP_PTR(nosup_alloc_parent_domain, struct ibv_pd, struct ibv_context *c,
	  struct ibv_parent_domain_init_attr *a)
NOSUP_INT(nosup_dealloc_td, struct ibv_td *td)
NOSUP_PTR(nosup_alloc_td, struct ibv_td, struct ibv_context *c,
	  struct ibv_td_init_attr *a)
NOSUP_INT(nosup_modify_cq, struct ibv_cq *cq, struct ibv_modify_cq_attr *a)
NOSUP_INT(nosup_post_srq_ops, struct ibv_srq *srq, struct ibv_ops_wr *op,
	  struct ibv_ops_wr **bad)
NOSUP_INT(nosup_destroy_rwq_ind_table, struct ibv_rwq_ind_table *t)
NOSUP_PTR(nosup_create_rwq_ind_table, struct ibv_rwq_ind_table,
	  struct ibv_context *c, struct ibv_rwq_ind_table_init_attr *a)
NOSUP_INT(nosup_destroy_wq, struct ibv_wq *wq)
NOSUP_INT(nosup_modify_wq, struct ibv_wq *wq, struct ibv_wq_attr *a)
NOSUP_PTR(nosup_create_wq, struct ibv_wq, struct ibv_context *c,
	  struct ibv_wq_init_attr *a)
NOSUP_INT(nosup_query_rt_values, struct ibv_context *c,
	  struct ibv_values_ex *v)
NOSUP_PTR(nosup_create_cq_ex, struct ibv_cq_ex, struct ibv_context *c,
	  struct ibv_cq_init_attr_ex *a)
NOSUP_INT(nosup_query_device_ex, struct ibv_context *c,
	  const struct ibv_query_device_ex_input *i,
	  struct ibv_device_attr_ex *a, size_t s)
NOSUP_INT(nosup_destroy_flow, struct ibv_flow *f)
NOSUP_PTR(nosup_create_flow, struct ibv_flow, struct ibv_qp *qp,
	  struct ibv_flow_attr *a)
NOSUP_PTR(nosup_open_qp, struct ibv_qp, struct ibv_context *c,
	  struct ibv_qp_open_attr *a)
NOSUP_PTR(nosup_create_qp_ex, struct ibv_qp, struct ibv_context *c,
	  struct ibv_qp_init_attr_ex *a)
NOSUP_INT(nosup_get_srq_num, struct ibv_srq *srq, uint32_t *n)
NOSUP_PTR(nosup_create_srq_ex, struct ibv_srq, struct ibv_context *c,
	  struct ibv_srq_init_attr_ex *a)
NOSUP_PTR(nosup_open_xrcd, struct ibv_xrcd, struct ibv_context *c,
	  struct ibv_xrcd_init_attr *a)
NOSUP_INT(nosup_close_xrcd, struct ibv_xrcd *x)

static void nosup_placeholder(void)
{
}

void sv_fill_unsupported_ops(struct verbs_context *v)
{
	struct ibv_context_ops *o = &v->context.ops;

	o->_compat_query_device = nosup_compat_query_device;
	o->_compat_query_port = nosup_compat_query_port;
	o->_compat_alloc_pd = nosup_compat;
	o->_compat_dealloc_pd = nosup_compat;
	o->_compat_reg_mr = nosup_compat;
	o->_compat_rereg_mr = nosup_compat;
	o->_compat_dereg_mr = nosup_compat;
	o->_compat_create_cq = nosup_compat;
	o->poll_cq = nosup_poll_cq;
	o->req_notify_cq = nosup_req_notify_cq;
	o->_compat_cq_event = nosup_compat;
	o->_compat_resize_cq = nosup_compat;
	o->_compat_destroy_cq = nosup_compat;
	o->_compat_create_srq = nosup_compat;
	o->_compat_modify_srq = nosup_compat;
	o->_compat_query_srq = nosup_compat;
	o->_compat_destroy_srq = nosup_compat;
	o->post_srq_recv = nosup_post_srq_recv;
	o->_compat_create_qp = nosup_compat;
	o->_compat_query_qp = nosup_compat;
	o->_compat_modify_qp = nosup_compat;
	o->_compat_destroy_qp = nosup_compat;
	o->post_send = nosup_post_send;
	o->post_recv = nosup_post_recv;
	o->_compat_create_ah = nosup_compat;
	o->_compat_destroy_ah = nosup_compat;
	o->_compat_attach_mcast = nosup_compat;
	o->_compat_detach_mcast = nosup_compat;
	o->_compat_async_event = nosup_compat;

	v->query_port = nosup_query_port;
	v->advise_mr = nosup_advise_mr;
	v->alloc_null_mr = nosup_alloc_null_mr;
	v->read_counters = nosup_read_counters;
	v->attach_counters_point_flow = nosup_attach_counters_point_flow;
	v->create_counters = nosup_create_counters;
	v->destroy_counters = nosup_destroy_counters;
	v->reg_dm_mr = nosup_reg_dm_mr;
	v->alloc_dm = nosup_alloc_dm;
	v->free_dm = nosup_free_dm;
	v->modify_flow_action_esp = nosup_modify_flow_action_esp;
	v->destroy_flow_action = nosup_destroy_flow_action;
	v->create_flow_action_esp = nosup_create_flow_action_esp;
	v->modify_qp_rate_limit = nosup_modify_qp_rate_limit;
	v->alloc_parent_domain = nosup_alloc_parent_domain;
	v->dealloc_td = nosup_dealloc_td;
	v->alloc_td = nosup_alloc_td;
	v->modify_cq = nosup_modify_cq;
	v->post_srq_ops = nosup_post_srq_ops;
	v->destroy_rwq_ind_table = nosup_destroy_rwq_ind_table;
	v->create_rwq_ind_table = nosup_create_rwq_ind_table;
	v->destroy_wq = nosup_destroy_wq;
	v->modify_wq = nosup_modify_wq;
	v->create_wq = nosup_create_wq;
	v->query_rt_values = nosup_query_rt_values;
	v->create_cq_ex = nosup_create_cq_ex;
	v->priv = NULL;
	v->query_device_ex = nosup_query_device_ex;
	v->ibv_destroy_flow = nosup_destroy_flow;
	v->ABI_placeholder2 = nosup_placeholder;
	v->ibv_create_flow = nosup_create_flow;
	v->ABI_placeholder1 = nosup_placeholder;
	v->open_qp = nosup_open_qp;
	v->create_qp_ex = nosup_create_qp_ex;
	v->get_srq_num = nosup_get_srq_num;
	v->create_srq_ex = nosup_create_srq_ex;
	v->open_xrcd = nosup_open_xrcd;
	v->close_xrcd = nosup_close_xrcd;
}

/* ---- exported verbs that the data-path and later issues implement ---- */

#define NOSUP_EXPORT_PTR(name, rtype, ...)                                   \
	SV_EXPORT rtype *name(__VA_ARGS__)                                   \
	{                                                                    \
		errno = EOPNOTSUPP;                                          \
		return NULL;                                                 \
	}
#define NOSUP_EXPORT_INT(name, ...)                                          \
	SV_EXPORT int name(__VA_ARGS__)                                      \
	{                                                                    \
		return EOPNOTSUPP;                                           \
	}
#define NOSUP_EXPORT_VOID(name, ...)                                         \
	SV_EXPORT void name(__VA_ARGS__)                                     \
	{                                                                    \
	}

NOSUP_EXPORT_INT(ibv_resolve_eth_l2_from_gid, struct ibv_context *c,
		 struct ibv_ah_attr *a, uint8_t mac[ETHERNET_LL_SIZE],
		 uint16_t *vid)
NOSUP_EXPORT_INT(ibv_query_ece, struct ibv_qp *qp, struct ibv_ece *e)
NOSUP_EXPORT_INT(ibv_set_ece, struct ibv_qp *qp, struct ibv_ece *e)
NOSUP_EXPORT_PTR(ibv_reg_dmabuf_mr, struct ibv_mr, struct ibv_pd *pd,
		 uint64_t off, size_t len, uint64_t iova, int fd, int acc)
