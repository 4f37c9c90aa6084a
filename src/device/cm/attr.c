// SPDX-License-Identifier: MIT
/*
 * What an rdma_cm id tells the rest (docs/DESIGN.md, "rdma_cm"): its
 * options (SET_OPTION), the attributes its QP takes at each state
 * (INIT_QP_ATTR, as the kernel's cma and ib_cm answer them), and its
 * route (QUERY_ROUTE). Reads the id; changes nothing but its options.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "device/cm/cm.h"
#include "device/sv_dev.h"

int sv_cm_set_option(struct sv_cm_id *id, uint32_t level, uint32_t name,
		     const void *val, uint32_t len)
{
	int v;

	if (level == RDMA_OPTION_IB)
		return name == RDMA_OPTION_IB_PATH ? -EINVAL : -ENOSYS;
	if (level != RDMA_OPTION_ID)
		return -ENOSYS;
	switch (name) {
	case RDMA_OPTION_ID_TOS:
		if (len != 1)
			return -EINVAL;
		id->tos = *(const uint8_t *)val;
		id->tos_set = true;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
		if (len != sizeof(int))
			return -EINVAL;
		memcpy(&v, val, sizeof(v));
		if ((v && id->state != CM_LISTEN) || id->state == CM_IDLE) {
			id->reuseaddr = v != 0;
			return 0;
		}
		return -EINVAL;
	case RDMA_OPTION_ID_AFONLY:
		if (len != sizeof(int))
			return -EINVAL;
		if (id->state != CM_IDLE && id->state != CM_ADDR_BOUND)
			return -EINVAL;
		memcpy(&v, val, sizeof(v));
		id->afonly = v != 0;
		id->afonly_set = true;
		return 0;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (len != 1)
			return -EINVAL;
		if (id->qp_type != IBV_QPT_RC)
			return -EINVAL;
		id->ack_timeout = *(const uint8_t *)val;
		id->timeout_set = true;
		return 0;
	default:
		return -ENOSYS;
	}
}

static void ah_attr(const struct sv_cm_id *id, struct ib_uverbs_ah_attr *ah)
{
	if (id->wire)
		memcpy(ah->grh.dgid, id->rgid, 16);
	else
		sv_cm_gid((const void *)&id->dst, ah->grh.dgid);
	ah->grh.sgid_index = id->sgid_index;
	ah->grh.hop_limit = SV_CM_HOP_LIMIT;
	ah->grh.traffic_class = id->tos;
	ah->is_global = 1;
	ah->port_num = 1;
}

int sv_cm_init_qp_attr(struct sv_cm_id *id, uint32_t qp_state,
		       struct ib_uverbs_qp_attr *a)
{
	bool cm = id->conn != CONN_NONE && id->conn != CONN_SIDR_REQ_SENT &&
		  id->conn != CONN_SIDR_REQ_RCVD;
	bool known;

	if (qp_state > IBV_QPS_ERR || !id->has_dev)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->qp_state = qp_state;
	if (!cm || id->qp_type == IBV_QPT_UD) {
		/* no connection yet (cma_ib_init_qp_attr) */
		a->qp_attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		a->port_num = 1;
		if (id->qp_type == IBV_QPT_UD) {
			a->qkey = id->qkey;
			a->qp_attr_mask |= IBV_QP_QKEY;
		} else {
			a->qp_attr_mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	}
	/* from the connection (ib_cm_init_qp_attr) */
	known = id->conn == CONN_REQ_RCVD || id->conn == CONN_REP_SENT ||
		id->conn == CONN_REP_RCVD || id->conn == CONN_ESTABLISHED;
	switch (qp_state) {
	case IBV_QPS_INIT:
		if (!known && id->conn != CONN_REQ_SENT)
			return -EINVAL;
		a->qp_attr_mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS |
				  IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (id->resp_res)
			a->qp_access_flags |= IBV_ACCESS_REMOTE_READ |
					      IBV_ACCESS_REMOTE_ATOMIC;
		a->port_num = 1;
		return 0;
	case IBV_QPS_RTR:
		if (!known)
			return -EINVAL;
		a->qp_attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		ah_attr(id, &a->ah_attr);
		a->path_mtu = id->mtu;
		a->dest_qp_num = id->rqpn;
		/* a message's starting PSN is what its sender will receive
		 * (the kernel's CM: rq_psn from our own REQ or REP, sq_psn
		 * from the other end's; seen on the wire with rxe) */
		a->rq_psn = id->psn;
		a->max_dest_rd_atomic = id->resp_res;
		return 0;
	case IBV_QPS_RTS:
		if (!known)
			return -EINVAL;
		a->qp_attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC;
		a->sq_psn = id->rpsn;
		a->timeout = id->timeout_set ? id->ack_timeout : SV_CM_ACK_TIMEOUT;
		a->retry_cnt = id->retry;
		a->rnr_retry = id->rnr_retry;
		a->max_rd_atomic = id->init_depth;
		return 0;
	default:
		return -EINVAL;
	}
}

static void copy_in6(struct sockaddr_in6 *dst, const struct sockaddr_storage *src)
{
	size_t n = sv_cm_addr_size((const void *)src);

	memset(dst, 0, sizeof(*dst));
	memcpy(dst, src, n < sizeof(*dst) ? n : sizeof(*dst));
}

void sv_cm_route(const struct sv_cm_id *id, struct rdma_ucm_query_route_resp *r)
{
	struct ib_user_path_rec *p = &r->ib_route[0];

	memset(r, 0, sizeof(*r));
	copy_in6(&r->src_addr, &id->src);
	copy_in6(&r->dst_addr, &id->dst);
	if (!id->has_dev)
		return;
	r->node_guid = sv_dev.attr.node_guid;
	r->port_num = 1;
	r->ibdev_index = 0;
	if (id->wire) {
		memcpy(p->sgid, id->lgid, 16);
		memcpy(p->dgid, id->rgid, 16);
	} else {
		sv_cm_gid((const void *)&id->src, p->sgid);
		if (id->dst.ss_family)
			sv_cm_gid((const void *)&id->dst, p->dgid);
	}
	p->pkey = htons(SV_PKEY_DEFAULT);
	if (id->state == CM_ROUTE_RESOLVED || id->state == CM_CONNECT ||
	    id->state == CM_DISCONNECT) {
		r->num_paths = 1;
		p->hop_limit = SV_CM_HOP_LIMIT;
		p->traffic_class = id->tos;
		p->reversible = 1;
		p->numb_path = 1;
		p->mtu_selector = 2;
		p->mtu = id->mtu;
		p->rate_selector = 2;
		p->rate = IBV_RATE_100_GBPS; /* 4X EDR, the port's */
		p->packet_life_time_selector = 2;
		p->packet_life_time = SV_CM_PACKET_LIFE_TIME;
	}
}
