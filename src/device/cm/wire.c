// SPDX-License-Identifier: MIT
/*
 * The CM's messages across hosts (docs/DESIGN.md, "rdma_cm"): a struct
 * sv_cm_msg becomes a CM MAD (mad.c's codec) in a UD datagram from QP1 to
 * QP1 (roce/dev.c), filled as Linux's kernel CM fills it, and a MAD that
 * arrives becomes a message for conn.c. The RDMA CM's header (the IP
 * addresses and the active side's port) leads the private data of REQ and
 * SIDR_REQ; the service ID names the port space and the port.
 *
 * Runs on the control thread. A MAD that does not decode, or that is not
 * a message we take part in, is dropped and counted.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "device/cm/cm.h"
#include "device/cm/mad.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

#define RATE_100G 16             /* the port's 4X EDR (enum ibv_rate) */
#define LOCAL_ACK_TIMEOUT 17     /* packet life 16 and our ACK delay 15 */
#define TARGET_ACK_DELAY 15      /* the device's local_ca_ack_delay */

int sv_cm_gid_index(const uint8_t gid[16])
{
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++)
		if (sv_dev.gid[i].valid && !memcmp(sv_dev.gid[i].gid, gid, 16))
			return (int)i;
	return -1;
}

static uint64_t ca_guid(void)
{
	return be64toh(sv_dev.attr.node_guid);
}

/* The REQ's path, as the kernel fills it for RoCE: permissive LIDs, the
 * two GIDs, a routed hop limit (so not subnet local). */
static void path_fill(struct sv_cm_path *p, const struct sv_cm_msg *m)
{
	p->local_lid = p->remote_lid = 0xffff;
	memcpy(p->local_gid, m->sgid, 16);
	memcpy(p->remote_gid, m->dgid, 16);
	p->packet_rate = RATE_100G;
	p->hop_limit = SV_CM_HOP_LIMIT;
	p->local_ack_timeout = LOCAL_ACK_TIMEOUT;
}

/* The RDMA CM header and the consumer's data after it. */
static int cma_fill(uint8_t *priv, const struct sv_cm_msg *m, unsigned int room)
{
	struct sv_cma_hdr h;
	int ret;

	memset(&h, 0, sizeof(h));
	h.version = SV_CMA_VERSION;
	h.ip_version = m->src.ss_family == AF_INET6 &&
		       m->dst.ss_family == AF_INET6 ? 6 : 4;
	h.src_port = sv_cm_port((const void *)&m->src);
	sv_cm_addr_to_gid((const void *)&m->src, h.src);
	sv_cm_addr_to_gid((const void *)&m->dst, h.dst);
	if (h.ip_version == 6 && (!memcmp(h.src, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) ||
				  !memcmp(h.dst, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)))
		h.ip_version = 4;    /* an IPv4-mapped pair is IPv4 */
	ret = sv_cma_hdr_build(priv, &h);
	if (ret)
		return ret;
	memcpy(priv + SV_CMA_HDR_BYTES, m->pdata,
	       m->pdata_len < room - SV_CMA_HDR_BYTES ? m->pdata_len :
	       room - SV_CMA_HDR_BYTES);
	return 0;
}

static void pdata_take(struct sv_cm_msg *m, const uint8_t *p, unsigned int n)
{
	if (n > sizeof(m->pdata))
		n = sizeof(m->pdata);
	memcpy(m->pdata, p, n);
	m->pdata_len = (uint8_t)n;
}

static void pdata_put(uint8_t *dst, unsigned int room, const struct sv_cm_msg *m)
{
	memcpy(dst, m->pdata, m->pdata_len < room ? m->pdata_len : room);
}

/* ---- sending ---- */

static int to_mad(const struct sv_cm_msg *m, struct sv_cm_mad *d)
{
	uint16_t port = sv_cm_port((const void *)&m->dst);

	switch (m->type) {
	case CM_MSG_REQ: {
		struct sv_cm_req *r = &d->req;

		sv_cm_mad_init(d, SV_CM_ATTR_REQ, m->tid);
		r->local_comm_id = m->local_comm;
		r->service_id = sv_cm_service_id(m->ps, port);
		r->local_ca_guid = ca_guid();
		r->local_qpn = m->qpn & SV_QPN_MASK;
		r->responder_resources = m->resp_res;
		r->initiator_depth = m->init_depth;
		r->remote_cm_response_timeout = sv_cm_cfg.response_timeout;
		r->transport_service_type = SV_CM_TRANSPORT_RC;
		r->end_to_end_flow_control = m->flow_control;
		r->starting_psn = m->psn & SV_PSN_MASK;
		r->local_cm_response_timeout = sv_cm_cfg.response_timeout;
		r->retry_count = m->retry & 7;
		r->pkey = SV_PKEY_DEFAULT;
		r->path_mtu = m->mtu;
		r->rnr_retry_count = m->rnr_retry & 7;
		r->max_cm_retries = sv_cm_cfg.max_retries & 15;
		r->srq = m->srq;
		path_fill(&r->primary, m);
		return cma_fill(r->private_data, m, SV_CM_REQ_PRIV);
	}
	case CM_MSG_SIDR_REQ: {
		struct sv_cm_sidr_req *r = &d->sidr_req;

		sv_cm_mad_init(d, SV_CM_ATTR_SIDR_REQ, m->tid);
		r->request_id = m->local_comm;
		r->pkey = SV_PKEY_DEFAULT;
		r->service_id = sv_cm_service_id(m->ps, port);
		return cma_fill(r->private_data, m, SV_CM_SIDR_REQ_PRIV);
	}
	case CM_MSG_REP: {
		struct sv_cm_rep *r = &d->rep;

		sv_cm_mad_init(d, SV_CM_ATTR_REP, m->tid);
		r->local_comm_id = m->local_comm;
		r->remote_comm_id = m->remote_comm;
		r->local_qpn = m->qpn & SV_QPN_MASK;
		r->starting_psn = m->psn & SV_PSN_MASK;
		r->responder_resources = m->resp_res;
		r->initiator_depth = m->init_depth;
		r->target_ack_delay = TARGET_ACK_DELAY;
		r->end_to_end_flow_control = m->flow_control;
		r->rnr_retry_count = m->rnr_retry & 7;
		r->srq = m->srq;
		r->local_ca_guid = ca_guid();
		pdata_put(r->private_data, SV_CM_REP_PRIV, m);
		return 0;
	}
	case CM_MSG_RTU:
		sv_cm_mad_init(d, SV_CM_ATTR_RTU, m->tid);
		d->rtu.local_comm_id = m->local_comm;
		d->rtu.remote_comm_id = m->remote_comm;
		return 0;
	case CM_MSG_REJ:
		sv_cm_mad_init(d, SV_CM_ATTR_REJ, m->tid);
		d->rej.local_comm_id = m->local_comm;
		d->rej.remote_comm_id = m->remote_comm;
		d->rej.message_rejected = m->about;
		d->rej.reason = m->reason;
		pdata_put(d->rej.private_data, SV_CM_REJ_PRIV, m);
		return 0;
	case CM_MSG_MRA:
		sv_cm_mad_init(d, SV_CM_ATTR_MRA, m->tid);
		d->mra.local_comm_id = m->local_comm;
		d->mra.remote_comm_id = m->remote_comm;
		d->mra.message_mraed = m->about;
		d->mra.service_timeout = m->service_timeout & 31;
		return 0;
	case CM_MSG_DREQ:
		sv_cm_mad_init(d, SV_CM_ATTR_DREQ, m->tid);
		d->dreq.local_comm_id = m->local_comm;
		d->dreq.remote_comm_id = m->remote_comm;
		d->dreq.remote_qpn_eecn = m->qpn & SV_QPN_MASK;
		return 0;
	case CM_MSG_DREP:
		sv_cm_mad_init(d, SV_CM_ATTR_DREP, m->tid);
		d->drep.local_comm_id = m->local_comm;
		d->drep.remote_comm_id = m->remote_comm;
		return 0;
	case CM_MSG_SIDR_REP: {
		struct sv_cm_sidr_rep *r = &d->sidr_rep;

		sv_cm_mad_init(d, SV_CM_ATTR_SIDR_REP, m->tid);
		r->request_id = m->remote_comm;
		r->status = m->reason;
		r->qpn = m->qpn & SV_QPN_MASK;
		r->service_id = sv_cm_service_id(m->ps,
						 sv_cm_port((const void *)&m->src));
		r->qkey = m->qkey;
		pdata_put(r->private_data, SV_CM_SIDR_REP_PRIV, m);
		return 0;
	}
	}
	return -EINVAL;
}

int sv_cm_wire_send(const struct sv_cm_msg *m)
{
	uint8_t buf[SV_MAD_BYTES];
	struct sv_cm_mad d;
	int ret;

	ret = to_mad(m, &d);
	if (!ret)
		ret = sv_cm_encode(&d, buf);
	if (ret) {
		sv_log(SV_LOG_WARN, "cm: cannot encode a CM message (%d): %s", m->type,
		       ret < 0 && -ret < SV_CM_E_COUNT ? sv_cm_strerror(ret) :
		       "bad address");
		return -EINVAL;
	}
	ret = sv_roce_gsi_send(m->sgid, m->dgid, buf, sizeof(buf));
	if (ret) {
		sv_log(SV_LOG_INFO, "cm: a CM MAD is lost: %s", strerror(-ret));
		return ret;
	}
	sv_cm_stats.mad_sent++;
	return 0;
}

/* ---- receiving ---- */

/* The addresses of a REQ's or SIDR_REQ's RDMA CM header: false if none. */
static bool cma_take(struct sv_cm_msg *m, const uint8_t *priv, unsigned int room,
		     uint64_t sid)
{
	struct sv_cma_hdr h;
	uint16_t port;

	if (!sv_cm_service_id_split(sid, &m->ps, &port) ||
	    sv_cma_hdr_parse(priv, room, &h))
		return false;
	sv_cm_gid_to_addr(h.src, &m->src);
	sv_cm_gid_to_addr(h.dst, &m->dst);
	sv_cm_set_port((struct sockaddr *)&m->src, h.src_port);
	sv_cm_set_port((struct sockaddr *)&m->dst, port);
	pdata_take(m, priv + SV_CMA_HDR_BYTES, room - SV_CMA_HDR_BYTES);
	return true;
}

/* 0, or why the MAD is not a message here */
static const char *from_mad(const struct sv_cm_mad *d, struct sv_cm_msg *m)
{
	switch (d->attr_id) {
	case SV_CM_ATTR_REQ: {
		const struct sv_cm_req *r = &d->req;

		m->type = CM_MSG_REQ;
		m->local_comm = r->local_comm_id;
		m->qpn = r->local_qpn;
		m->psn = r->starting_psn;
		m->mtu = r->path_mtu;
		m->resp_res = r->responder_resources;
		m->init_depth = r->initiator_depth;
		m->retry = r->retry_count;
		m->rnr_retry = r->rnr_retry_count;
		m->flow_control = r->end_to_end_flow_control;
		m->srq = r->srq;
		if (!cma_take(m, r->private_data, SV_CM_REQ_PRIV, r->service_id)) {
			/* not an RDMA CM service: nobody listens for it */
			m->ps = 0;
		}
		/* RC, and XRC (the extended type); UC and RD are not ours */
		if (r->transport_service_type == SV_CM_TRANSPORT_UC ||
		    r->transport_service_type == SV_CM_TRANSPORT_RD)
			m->reason = SV_CM_REJ_INVALID_TRANSPORT_TYPE;
		return NULL;
	}
	case SV_CM_ATTR_SIDR_REQ:
		m->type = CM_MSG_SIDR_REQ;
		m->local_comm = d->sidr_req.request_id;
		if (!cma_take(m, d->sidr_req.private_data, SV_CM_SIDR_REQ_PRIV,
			      d->sidr_req.service_id))
			m->ps = 0;
		return NULL;
	case SV_CM_ATTR_REP: {
		const struct sv_cm_rep *r = &d->rep;

		m->type = CM_MSG_REP;
		m->local_comm = r->local_comm_id;
		m->remote_comm = r->remote_comm_id;
		m->qpn = r->local_qpn;
		m->psn = r->starting_psn;
		m->resp_res = r->responder_resources;
		m->init_depth = r->initiator_depth;
		m->rnr_retry = r->rnr_retry_count;
		m->flow_control = r->end_to_end_flow_control;
		m->srq = r->srq;
		pdata_take(m, r->private_data, SV_CM_REP_PRIV);
		return NULL;
	}
	case SV_CM_ATTR_RTU:
		m->type = CM_MSG_RTU;
		m->local_comm = d->rtu.local_comm_id;
		m->remote_comm = d->rtu.remote_comm_id;
		return NULL;
	case SV_CM_ATTR_REJ:
		m->type = CM_MSG_REJ;
		m->local_comm = d->rej.local_comm_id;
		m->remote_comm = d->rej.remote_comm_id;
		m->about = d->rej.message_rejected;
		m->reason = d->rej.reason > 255 ? 255 : (uint8_t)d->rej.reason;
		pdata_take(m, d->rej.private_data, SV_CM_REJ_PRIV);
		return NULL;
	case SV_CM_ATTR_MRA:
		m->type = CM_MSG_MRA;
		m->local_comm = d->mra.local_comm_id;
		m->remote_comm = d->mra.remote_comm_id;
		m->about = d->mra.message_mraed;
		m->service_timeout = d->mra.service_timeout;
		return NULL;
	case SV_CM_ATTR_DREQ:
		m->type = CM_MSG_DREQ;
		m->local_comm = d->dreq.local_comm_id;
		m->remote_comm = d->dreq.remote_comm_id;
		m->qpn = d->dreq.remote_qpn_eecn;
		return NULL;
	case SV_CM_ATTR_DREP:
		m->type = CM_MSG_DREP;
		m->local_comm = d->drep.local_comm_id;
		m->remote_comm = d->drep.remote_comm_id;
		return NULL;
	case SV_CM_ATTR_SIDR_REP: {
		const struct sv_cm_sidr_rep *r = &d->sidr_rep;

		m->type = CM_MSG_SIDR_REP;
		m->remote_comm = r->request_id;
		m->reason = r->status;
		m->qpn = r->qpn;
		m->qkey = r->qkey;
		pdata_take(m, r->private_data, SV_CM_SIDR_REP_PRIV);
		return NULL;
	}
	default:
		/* ClassPortInfo, LAP, APR: no alternate paths, no redirection */
		return "an attribute this CM does not serve";
	}
}

static void rx_one(const struct sv_gsi_pkt *pk)
{
	const uint8_t *mad;
	struct sv_roce_pkt p;
	struct sv_cm_mad d;
	struct sv_cm_msg m;
	const char *why = NULL;
	int ret;

	/* the ICRC was checked when the packet came in */
	ret = sv_cm_dgram_parse(pk->buf, pk->len, NULL, &p, &mad);
	if (ret)
		why = "not a MAD datagram to QP1";
	else if ((ret = sv_cm_decode(mad, SV_MAD_BYTES, 0, &d)))
		why = sv_cm_strerror(ret);
	else if (d.method != SV_MAD_METHOD_SEND)
		why = "not a Send";
	if (!why) {
		memset(&m, 0, sizeof(m));
		why = from_mad(&d, &m);
	}
	if (why) {
		sv_cm_stats.mad_dropped++;
		sv_log(SV_LOG_DEBUG, "cm: a MAD on QP1 dropped: %s", why);
		return;
	}
	sv_cm_stats.mad_rcvd++;
	m.wire = true;
	m.tid = d.tid;
	memcpy(m.sgid, pk->ip.src, 16);
	memcpy(m.dgid, pk->ip.dst, 16);
	sv_cm_recv(&m);
}

void sv_cm_wire_input(void)
{
	static struct sv_gsi_pkt pk[16];
	unsigned int n = sv_roce_gsi_recv(pk, 16);

	/* one batch at a time: the inbox's fd stays readable for the rest */
	for (unsigned int i = 0; i < n; i++)
		rx_one(&pk[i]);
	sv_cm_flush();
}
