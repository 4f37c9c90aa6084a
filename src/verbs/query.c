// SPDX-License-Identifier: MIT
/* Queries: device, port, GID table, P_Key table. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "abi/sv_ib.h"
#include "abi/sv_tm.h"
#include "verbs/sv_verbs.h"

#undef ibv_query_port

static void fill_device_attr(const struct sv_dev_attr *a,
			     struct ibv_device_attr *o)
{
	memset(o, 0, sizeof(*o));
	memcpy(o->fw_ver, a->fw_ver, sizeof(o->fw_ver));
	o->fw_ver[sizeof(o->fw_ver) - 1] = 0;
	o->node_guid = a->node_guid;
	o->sys_image_guid = a->sys_image_guid;
	o->max_mr_size = a->max_mr_size;
	o->page_size_cap = a->page_size_cap;
	o->vendor_id = a->vendor_id;
	o->vendor_part_id = a->vendor_part_id;
	o->hw_ver = a->hw_ver;
	o->max_qp = (int)a->max_qp;
	o->max_qp_wr = (int)a->max_qp_wr;
	o->device_cap_flags = (unsigned int)a->device_cap_flags;
	o->max_sge = (int)a->max_sge;
	o->max_sge_rd = (int)a->max_sge_rd;
	o->max_cq = (int)a->max_cq;
	o->max_cqe = (int)a->max_cqe;
	o->max_mr = (int)a->max_mr;
	o->max_pd = (int)a->max_pd;
	o->max_qp_rd_atom = (int)a->max_qp_rd_atom;
	o->max_res_rd_atom = (int)a->max_res_rd_atom;
	o->max_qp_init_rd_atom = (int)a->max_qp_init_rd_atom;
	o->atomic_cap = (enum ibv_atomic_cap)a->atomic_cap;
	o->max_mw = (int)a->max_mw;
	o->max_mcast_grp = (int)a->max_mcast_grp;
	o->max_mcast_qp_attach = (int)a->max_mcast_qp_attach;
	o->max_total_mcast_qp_attach = (int)a->max_total_mcast_qp_attach;
	o->max_ah = (int)a->max_ah;
	o->max_srq = (int)a->max_srq;
	o->max_srq_wr = (int)a->max_srq_wr;
	o->max_srq_sge = (int)a->max_srq_sge;
	o->max_pkeys = a->max_pkeys;
	o->local_ca_ack_delay = a->local_ca_ack_delay;
	o->phys_port_cnt = a->phys_port_cnt;
}

SV_EXPORT int ibv_query_device(struct ibv_context *context,
			       struct ibv_device_attr *attr)
{
	if (!context || !attr)
		return EINVAL;
	fill_device_attr(&to_sv_ctx(context)->attr, attr);
	return 0;
}

int sv_query_device_ex(struct ibv_context *context,
		       const struct ibv_query_device_ex_input *input,
		       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	const struct sv_dev_attr *a = &to_sv_ctx(context)->attr;
	struct ibv_device_attr_ex ex;

	if (input && input->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	memset(&ex, 0, sizeof(ex));
	fill_device_attr(a, &ex.orig_attr);
	ex.completion_timestamp_mask = a->completion_timestamp_mask;
	ex.hca_core_clock = a->hca_core_clock;
	ex.device_cap_flags_ex = a->device_cap_flags;
	ex.phys_port_cnt_ex = a->phys_port_cnt;
	ex.max_dm_size = a->max_dm_size;
	ex.odp_caps.general_caps = a->odp_general;
	ex.odp_caps.per_transport_caps.rc_odp_caps = a->odp_rc;
	ex.odp_caps.per_transport_caps.uc_odp_caps = a->odp_uc;
	ex.odp_caps.per_transport_caps.ud_odp_caps = a->odp_ud;
	ex.xrc_odp_caps = a->odp_xrc;
	/* tag matching: RC QPs into an IBV_SRQT_TM SRQ, on this host
	 * (docs/DESIGN.md "Tag matching"); the limits are the device's
	 * (src/abi/sv_tm.h) */
	ex.tm_caps.max_rndv_hdr_size = SV_TM_MAX_RNDV_HDR;
	ex.tm_caps.max_num_tags = SV_TM_MAX_TAGS;
	ex.tm_caps.flags = IBV_TM_CAP_RC;
	ex.tm_caps.max_ops = SV_TM_MAX_OPS;
	ex.tm_caps.max_sge = SV_TM_MAX_SGE;
	/* an older caller's struct is shorter: give it what fits */
	memcpy(attr, &ex, attr_size < sizeof(ex) ? attr_size : sizeof(ex));
	if (attr_size > sizeof(ex))
		memset((char *)attr + sizeof(ex), 0, attr_size - sizeof(ex));
	return 0;
}

/* include/softverbs/softverbs.h (seed 000) */
SV_EXPORT int ibv_exp_query_device(struct ibv_context *context,
				   struct ibv_exp_device_attr *attr)
{
	const struct sv_dev_attr *a;
	uint32_t asked;

	if (!context || !attr)
		return EINVAL;
	a = &to_sv_ctx(context)->attr;
	/* fill what is asked and known, nothing else; say which those were */
	asked = attr->comp_mask;
	attr->comp_mask = 0;
	if (asked & IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS) {
		attr->max_resource_domains = a->max_resource_domains;
		attr->comp_mask |= IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS;
	}
	if (asked & IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS) {
		attr->exp_device_cap_flags = a->exp_cap_flags;
		attr->comp_mask |= IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS;
	}
	if (asked & IBV_EXP_DEVICE_ATTR_MAX_FAST_REG_PAGE_LIST_LEN) {
		attr->max_fast_reg_page_list_len =
			a->max_fast_reg_page_list_len;
		attr->comp_mask |=
			IBV_EXP_DEVICE_ATTR_MAX_FAST_REG_PAGE_LIST_LEN;
	}
	if (asked & IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS) {
		/* 8-byte operands, carried in the WR, native byte order */
		bool has = (a->exp_cap_flags & SV_EXP_CAP_MASKED_ATOMICS) != 0;

		memset(&attr->masked_atomic, 0, sizeof(attr->masked_atomic));
		if (has) {
			attr->masked_atomic.max_fa_bit_boundary = 64;
			attr->masked_atomic.log_max_atomic_inline = 3;
			attr->masked_atomic.masked_log_atomic_arg_sizes =
				1u << 3;
		}
		attr->comp_mask |= IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS;
	}
	return 0;
}

static int query_port(struct ibv_context *context, uint8_t port_num,
		      struct ibv_port_attr *o, size_t len)
{
	struct sv_context *ctx = to_sv_ctx(context);
	struct ibv_port_attr p;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_QUERY_PORT);
	cmd.u.query_port.port_num = port_num;
	ret = sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
	if (ret)
		return -ret;
	memset(&p, 0, sizeof(p));
	p.state = (enum ibv_port_state)rsp.u.port.state;
	p.max_mtu = (enum ibv_mtu)rsp.u.port.max_mtu;
	p.active_mtu = (enum ibv_mtu)rsp.u.port.active_mtu;
	p.gid_tbl_len = (int)rsp.u.port.gid_tbl_len;
	p.port_cap_flags = rsp.u.port.port_cap_flags;
	p.max_msg_sz = rsp.u.port.max_msg_sz;
	p.bad_pkey_cntr = rsp.u.port.bad_pkey_cntr;
	p.qkey_viol_cntr = rsp.u.port.qkey_viol_cntr;
	p.pkey_tbl_len = rsp.u.port.pkey_tbl_len;
	p.lid = rsp.u.port.lid;
	p.sm_lid = rsp.u.port.sm_lid;
	p.lmc = rsp.u.port.lmc;
	p.max_vl_num = rsp.u.port.max_vl_num;
	p.sm_sl = rsp.u.port.sm_sl;
	p.subnet_timeout = rsp.u.port.subnet_timeout;
	p.init_type_reply = rsp.u.port.init_type_reply;
	p.active_width = rsp.u.port.active_width;
	p.active_speed = rsp.u.port.active_speed;
	p.phys_state = rsp.u.port.phys_state;
	p.link_layer = rsp.u.port.link_layer;
	p.flags = rsp.u.port.flags;
	p.port_cap_flags2 = rsp.u.port.port_cap_flags2;
	memcpy(o, &p, len < sizeof(p) ? len : sizeof(p));
	return 0;
}

int sv_query_port(struct ibv_context *context, uint8_t port_num,
		  struct ibv_port_attr *attr, size_t attr_len)
{
	return query_port(context, port_num, attr, attr_len);
}

/* The exported symbol takes rdma-core's older, shorter port struct, which
 * ends at link_layer and flags. */
SV_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			     struct _compat_ibv_port_attr *attr)
{
	return query_port(context, port_num, (struct ibv_port_attr *)attr,
			  offsetof(struct ibv_port_attr, flags) + 1);
}

static int query_gid(struct ibv_context *context, uint32_t port,
		     uint32_t index, struct sv_rsp_gid *out)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_QUERY_GID);
	cmd.u.query_gid.port_num = port;
	cmd.u.query_gid.index = index;
	ret = sv_conn_call(&to_sv_ctx(context)->conn, &cmd, -1, &rsp, NULL);
	if (!ret)
		*out = rsp.u.gid;
	return ret;
}

SV_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num,
			    int index, union ibv_gid *gid)
{
	struct sv_rsp_gid g;
	int ret;

	if (index < 0) {
		errno = EINVAL;
		return -1;
	}
	ret = query_gid(context, port_num, (uint32_t)index, &g);
	if (ret) {
		errno = -ret;
		return -1;
	}
	memcpy(gid->raw, g.gid, sizeof(gid->raw));
	return 0;
}

static void fill_gid_entry(struct ibv_gid_entry *e, const struct sv_rsp_gid *g,
			   uint32_t port, uint32_t index, size_t entry_size)
{
	struct ibv_gid_entry t;

	memset(&t, 0, sizeof(t));
	memcpy(t.gid.raw, g->gid, sizeof(t.gid.raw));
	t.gid_index = index;
	t.port_num = port;
	t.gid_type = g->gid_type;
	t.ndev_ifindex = g->ndev_ifindex;
	memcpy(e, &t, entry_size < sizeof(t) ? entry_size : sizeof(t));
}

SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
				uint32_t gid_index, struct ibv_gid_entry *entry,
				uint32_t flags, size_t entry_size)
{
	struct sv_rsp_gid g;
	int ret;

	if (flags || entry_size < offsetof(struct ibv_gid_entry, ndev_ifindex))
		return EINVAL;
	ret = query_gid(context, port_num, gid_index, &g);
	if (ret)
		return -ret;
	if (!g.valid)
		return ENODATA;
	fill_gid_entry(entry, &g, port_num, gid_index, entry_size);
	return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
				       struct ibv_gid_entry *entries,
				       size_t max_entries, uint32_t flags,
				       size_t entry_size)
{
	size_t n = 0;

	if (flags || entry_size < offsetof(struct ibv_gid_entry, ndev_ifindex))
		return -EINVAL;
	for (uint32_t i = 0; i < SV_GID_TBL_LEN; i++) {
		struct sv_rsp_gid g;
		int ret = query_gid(context, 1, i, &g);

		if (ret)
			return ret;
		if (!g.valid)
			continue;
		if (n == max_entries)
			return -EINVAL;
		fill_gid_entry((struct ibv_gid_entry *)((char *)entries +
							n * entry_size),
			       &g, 1, i, entry_size);
		n++;
	}
	return (ssize_t)n;
}

/* rdma-core's private call (ibv_devinfo uses it): its own numbering, where
 * 0 is IB/RoCE v1 and 1 is RoCE v2. */
SV_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				 unsigned int index,
				 enum ibv_gid_type_sysfs *type)
{
	struct sv_rsp_gid g;
	int ret = query_gid(context, port_num, index, &g);

	if (ret) {
		errno = -ret;
		return -1;
	}
	*type = g.gid_type == IBV_GID_TYPE_ROCE_V2 ?
		IBV_GID_TYPE_SYSFS_ROCE_V2 : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

SV_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num,
			     int index, __be16 *pkey)
{
	(void)context;
	if (port_num != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(SV_PKEY_DEFAULT);
	return 0;
}

SV_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
				 __be16 pkey)
{
	(void)context;
	if (port_num != 1 || be16toh(pkey) != SV_PKEY_DEFAULT) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* rdma-core 45's names (44's header has none; its man page asks flags 0) */
#ifndef IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS
#define IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS (1u << 0)
#endif
#ifndef IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG
#define IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG (1u << 0)
#endif
#ifndef IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES
#define IBV_QUERY_QP_DATA_IN_ORDER_ALIGNED_128_BYTES (1u << 1)
#endif

/*
 * Whether the data of one WQE becomes visible to the CPU of the receiving
 * side in order, so that it may poll the last byte instead of the CQ. On
 * this device: never guaranteed, for any opcode or transport, so the
 * answer is 0 (flags 0: "not in order"; RETURN_CAPS: no capability bit,
 * neither WHOLE_MSG nor ALIGNED_128_BYTES). Why: every byte reaches the
 * target through process_vm_writev (same host, and the RoCEv2 responder
 * after it took the packets in PSN order), which the kernel does with
 * copy_to_user, i.e. x86 fast-string stores (rep movsb) that the SDM lets
 * become visible out of order (vol. 3, 9.2.4 "Fast-String Operation and
 * Out-of-Order Stores"), and in pieces: per SGE and per iovec, a large
 * same-host message in chunks, a RoCEv2 message a batch of packets at a
 * time. An RDMA READ lands the same way on the requester. So a reader
 * must wait for the completion. Unknown flags: 0, as rdma-core answers.
 */
SV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp,
					 enum ibv_wr_opcode op, uint32_t flags)
{
	/* the same for every opcode, transport and QP (see above) */
	const int caps = 0;

	(void)qp;
	(void)op;
	if (flags & ~IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS)
		return 0;
	if (flags & IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS)
		return caps;
	return !!(caps & IBV_QUERY_QP_DATA_IN_ORDER_WHOLE_MSG);
}

