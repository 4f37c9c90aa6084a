// SPDX-License-Identifier: MIT
/*
 * The connection state machine (docs/DESIGN.md, "rdma_cm").
 *
 * An id has the kernel's rdma_cm state (IDLE, ADDR_BOUND, ADDR_QUERY ...
 * LISTEN, CONNECT, DISCONNECT) and, once it takes part in a connection, the
 * IBTA's communication state (REQ_SENT, REQ_RCVD, REP_SENT, REP_RCVD,
 * ESTABLISHED, DREQ_SENT, DREQ_RCVD, TIMEWAIT; SIDR for UD). The two ends
 * of a connection speak only through CM messages: sv_cm_send() either
 * queues one for sv_cm_flush() to hand to sv_cm_recv() (the other end is on
 * this daemon), or puts it on the wire as a CM MAD on QP1 (wire.c: another
 * host, or another daemon), whose answers come back to sv_cm_recv() the
 * same way. On the wire, REQ, REP, DREQ and SIDR_REQ are sent again until
 * answered (the kernel's timeouts and retries), a duplicate REQ is
 * answered with an MRA or the REP again (listen.c), a duplicate REP with
 * the RTU.
 *
 * Errors are the kernel's (drivers/infiniband/core/cma.c, cm.c and
 * ucma.c): the same errno for the same misuse, the same events with the
 * same status.
 *
 * Owns the queue of messages between ends on this daemon, the retries and
 * the timers. Calls id.c (the table, deadlines, events), listen.c (REQs),
 * wire.c (MADs) and ucma.c (queueing events); called by ucma.c (the verbs,
 * the timer), wire.c (messages from the wire), listen.c and id.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "device/cm/cm.h"
#include "device/cm/cm_int.h"
#include "device/sv_dev.h"

#define SV_STR(s) #s,
const char *const sv_cm_msg_names[] = { SV_CM_MSGS(SV_STR) };
#undef SV_STR

struct sv_cm_cfg sv_cm_cfg = { .response_timeout = 20, .max_retries = 15 };

/* The event's private data: what came, then zeros up to the room the
 * message has for the user (the kernel reports the whole room). */
void sv_cm_ev_pdata(uint8_t *dst, uint8_t *dst_len, const struct sv_cm_msg *m,
		     unsigned int room)
{
	memcpy(dst, m->pdata, m->pdata_len < room ? m->pdata_len : room);
	*dst_len = (uint8_t)room;
}

void sv_cm_ev_conn(struct sv_cm_event *e, const struct sv_cm_id *id,
		    const struct sv_cm_msg *m, unsigned int room)
{
	struct rdma_ucm_conn_param *c = &e->resp.param.conn;

	c->qp_num = m->qpn;
	c->srq = m->srq;
	c->responder_resources = id->resp_res;
	c->initiator_depth = id->init_depth;
	c->flow_control = m->flow_control;
	c->retry_count = m->retry;
	c->rnr_retry_count = m->rnr_retry;
	sv_cm_ev_pdata(c->private_data, &c->private_data_len, m, room);
}

/* ---- the CM messages ---- */

struct msgq {
	struct msgq *next;
	struct sv_cm_msg m;
};
static struct msgq *mq_head, **mq_tail = &mq_head;

/* Send a CM message to the other end: a MAD on QP1 (another host or
 * daemon), or, when the other end is on this daemon, handed to it once
 * the current command is done. */
void sv_cm_send(const struct sv_cm_msg *m)
{
	struct msgq *q;

	if (m->wire) {
		(void)sv_cm_wire_send(m);   /* a loss is a loss: retries cover it */
		return;
	}
	q = malloc(sizeof(*q));

	if (!q) {
		sv_log(SV_LOG_WARN, "cm: %s lost: out of memory", sv_cm_msg_names[m->type]);
		return;
	}
	q->next = NULL;
	q->m = *m;
	*mq_tail = q;
	mq_tail = &q->next;
}

void sv_cm_msg_init(struct sv_cm_msg *m, enum sv_cm_msg_type type,
		     const struct sv_cm_id *from)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->local_comm = from->comm;
	m->remote_comm = from->remote_comm;
	m->wire = from->wire;
	memcpy(m->sgid, from->lgid, 16);
	memcpy(m->dgid, from->rgid, 16);
	m->tid = from->tid;
	if (type == CM_MSG_DREQ)
		m->qpn = from->rqpn;
}

/* ---- retries on the wire ---- */

static uint32_t t_ms(uint8_t t)     /* 4.096 us << t, in ms (at least 1) */
{
	uint64_t ms = (4096ull << (t & 31)) / 1000000;

	return ms ? (uint32_t)ms : 1;
}

/* How long an answer may take (the kernel's cm timeout_ms): twice the
 * packet life time and the response timeout we asked for. */
static uint32_t rtx_ms(void)
{
	return 2 * t_ms(SV_CM_PACKET_LIFE_TIME) + t_ms(sv_cm_cfg.response_timeout);
}

/* m (just sent by id) goes out again until answered. */
static void rtx_arm(struct sv_cm_id *id, const struct sv_cm_msg *m)
{
	if (!m->wire)
		return;
	if (!id->rtx)
		id->rtx = malloc(sizeof(*id->rtx));
	if (!id->rtx)
		return;      /* no retries: one try, as a lost MAD */
	*id->rtx = *m;
	id->rtx_left = sv_cm_cfg.max_retries;
	sv_cm_set_deadline(id, rtx_ms());
}

/* The answer came: no more retries. */
static void rtx_stop(struct sv_cm_id *id)
{
	if (!id->rtx)
		return;
	free(id->rtx);
	id->rtx = NULL;
	sv_cm_set_deadline(id, 0);
}

static void send_rej(const struct sv_cm_id *from, uint8_t reason,
		     const uint8_t *pdata, uint8_t len)
{
	struct sv_cm_msg m;

	sv_cm_msg_init(&m, CM_MSG_REJ, from);
	m.reason = reason;
	/* what is rejected: the REQ (passive end), the REP (active end
	 * after it), or neither (a REQ given up on) */
	m.about = from->conn == CONN_REQ_RCVD || from->conn == CONN_REP_SENT ? 0 :
		  from->conn == CONN_REP_RCVD ? 1 : 2;
	m.pdata_len = len;
	if (len)
		memcpy(m.pdata, pdata, len);
	sv_cm_send(&m);
	sv_cm_stats.rejects++;
}

void sv_cm_send_simple(const struct sv_cm_id *from, enum sv_cm_msg_type type)
{
	struct sv_cm_msg m;

	sv_cm_msg_init(&m, type, from);
	sv_cm_send(&m);
}

static void recv_rep(struct sv_cm_id *id, const struct sv_cm_msg *m)
{
	struct sv_cm_event *e;

	if (id->wire && m->local_comm == id->remote_comm &&
	    (id->conn == CONN_ESTABLISHED || id->conn == CONN_DREQ_SENT)) {
		/* our RTU was lost: again (kernel cm_dup_rep_handler) */
		if (id->conn == CONN_ESTABLISHED)
			sv_cm_send_simple(id, CM_MSG_RTU);
		return;
	}
	if (id->conn != CONN_REQ_SENT)
		return;
	rtx_stop(id);
	id->remote_comm = m->local_comm;
	id->rqpn = m->qpn;
	id->rpsn = m->psn;
	id->mtu = m->mtu && m->mtu < id->mtu ? m->mtu : id->mtu;
	id->resp_res = m->init_depth;
	id->init_depth = m->resp_res;
	id->rnr_retry = m->rnr_retry;
	id->conn = CONN_REP_RCVD;
	e = sv_cm_ev_new(id, SV_EV_CONNECT_RESPONSE, 0);
	if (!e)
		return;
	sv_cm_ev_conn(e, id, m, SV_CM_REP_PDATA);
	sv_cm_event_queue(id->file, e);
}

static void enter_timewait(struct sv_cm_id *id)
{
	id->conn = CONN_TIMEWAIT;
	sv_cm_set_deadline(id, SV_CM_TIMEWAIT_MS);
}

static void disconnected(struct sv_cm_id *id, int status)
{
	if (id->state != CM_CONNECT)
		return;
	id->state = CM_DISCONNECT;
	sv_cm_ev_post(id, SV_EV_DISCONNECTED, status);
}

static void recv_dreq(struct sv_cm_id *id)
{
	switch (id->conn) {
	case CONN_REP_SENT:
	case CONN_ESTABLISHED:
		rtx_stop(id);
		id->conn = CONN_DREQ_RCVD;
		disconnected(id, 0);
		break;
	case CONN_DREQ_SENT:   /* both ends at once: answer, and we are done */
		sv_cm_send_simple(id, CM_MSG_DREP);
		rtx_stop(id);
		sv_cm_set_deadline(id, 0);
		enter_timewait(id);
		disconnected(id, 0);
		break;
	case CONN_TIMEWAIT:    /* our DREP was lost: again */
		sv_cm_send_simple(id, CM_MSG_DREP);
		break;
	default:
		break;
	}
}

static void recv_sidr_rep(struct sv_cm_id *id, const struct sv_cm_msg *m)
{
	struct sv_cm_event *e;
	struct rdma_ucm_ud_param *u;

	if (id->conn != CONN_SIDR_REQ_SENT)
		return;
	rtx_stop(id);
	id->conn = CONN_NONE;
	if (m->reason) {
		sv_cm_ev_post(id, SV_EV_UNREACHABLE, m->reason);
		return;
	}
	e = sv_cm_ev_new(id, SV_EV_ESTABLISHED, 0);
	if (!e)
		return;
	u = &e->resp.param.ud;
	u->qp_num = m->qpn;
	u->qkey = m->qkey;
	if (id->wire)
		memcpy(u->ah_attr.grh.dgid, id->rgid, 16);
	else
		sv_cm_gid((const void *)&id->dst, u->ah_attr.grh.dgid);
	u->ah_attr.grh.sgid_index = id->sgid_index;
	u->ah_attr.grh.hop_limit = SV_CM_HOP_LIMIT;
	u->ah_attr.grh.traffic_class = id->tos;
	u->ah_attr.is_global = 1;
	u->ah_attr.port_num = 1;
	sv_cm_ev_pdata(u->private_data, &u->private_data_len, m, SV_CM_SIDR_REP_PDATA);
	sv_cm_event_queue(id->file, e);
}

/* The id a message (other than a REQ) is for; NULL: drop it, as a MAD for
 * no one is dropped. */
static bool from_peer(const struct sv_cm_id *id, const struct sv_cm_msg *m)
{
	/* a wire message only for a wire id, and only from its peer's GID */
	return id->wire == m->wire && (!m->wire || !memcmp(id->rgid, m->sgid, 16));
}

static struct sv_cm_id *target(const struct sv_cm_msg *m)
{
	struct sv_cm_id *id;

	if (m->remote_comm) {
		id = sv_cm_by_comm(m->remote_comm);
		if (!id || !from_peer(id, m))
			return NULL;
		/* a REP or SIDR_REP answers a REQ: the sender is new to us */
		if (id->remote_comm && id->remote_comm != m->local_comm)
			return NULL;
		return id;
	}
	/* a REJ from an end that never answered: the id that knows it */
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++)
		if ((id = sv_cm_id_at(i)) && id->remote_comm == m->local_comm &&
		    from_peer(id, m))
			return id;
	return NULL;
}

void sv_cm_recv(const struct sv_cm_msg *m)
{
	struct sv_cm_id *id;

	if (m->type == CM_MSG_REQ || m->type == CM_MSG_SIDR_REQ) {
		sv_cm_recv_req(m);
		return;
	}
	id = target(m);
	if (!id) {
		if (m->wire)
			sv_cm_stats.mad_dropped++;
		sv_log(SV_LOG_DEBUG, "cm: %s for comm id 0x%x: no such id, dropped",
		       sv_cm_msg_names[m->type], m->remote_comm);
		return;
	}
	switch (m->type) {
	case CM_MSG_REP:
		recv_rep(id, m);
		break;
	case CM_MSG_RTU:
		if (id->conn == CONN_REP_SENT) {
			rtx_stop(id);
			id->conn = CONN_ESTABLISHED;
			sv_cm_stats.established++;
			sv_cm_ev_post(id, SV_EV_ESTABLISHED, 0);
		}
		break;
	case CM_MSG_REJ:
		if (id->conn == CONN_REQ_SENT || id->conn == CONN_REP_RCVD ||
		    id->conn == CONN_REQ_RCVD || id->conn == CONN_REP_SENT) {
			struct sv_cm_event *e;

			rtx_stop(id);
			id->conn = CONN_NONE;
			e = sv_cm_ev_new(id, SV_EV_REJECTED, m->reason);
			if (e) {
				sv_cm_ev_pdata(e->resp.param.conn.private_data,
					 &e->resp.param.conn.private_data_len, m,
					 SV_CM_REJ_PDATA);
				sv_cm_event_queue(id->file, e);
			}
		}
		break;
	case CM_MSG_DREQ:
		recv_dreq(id);
		break;
	case CM_MSG_DREP:
		if (id->conn == CONN_DREQ_SENT) {
			rtx_stop(id);
			sv_cm_set_deadline(id, 0);
			enter_timewait(id);
			disconnected(id, 0);
		}
		break;
	case CM_MSG_SIDR_REP:
		recv_sidr_rep(id, m);
		break;
	case CM_MSG_MRA:
		/* the other end needs time: wait its service timeout, then
		 * go on retrying (kernel cm_mra_handler) */
		if (id->rtx && ((id->conn == CONN_REQ_SENT && m->about == 0) ||
				(id->conn == CONN_REP_SENT && m->about == 1)))
			sv_cm_set_deadline(id, 2 * t_ms(SV_CM_PACKET_LIFE_TIME) +
				     t_ms(m->service_timeout));
		break;
	default:
		break;
	}
}

void sv_cm_flush(void)
{
	while (mq_head) {
		struct msgq *q = mq_head;

		mq_head = q->next;
		if (!mq_head)
			mq_tail = &mq_head;
		sv_cm_recv(&q->m);
		free(q);
	}
}

/* ---- timers ---- */

uint64_t sv_cm_next_deadline(void)
{
	uint64_t next = sv_cm_parked_next();

	if (!sv_cm_timers_armed())
		return next;
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++) {
		struct sv_cm_id *id = sv_cm_id_at(i);

		if (id && id->deadline_ms && (!next || id->deadline_ms < next))
			next = id->deadline_ms;
	}
	return next;
}

/* A message on the wire was not answered in time: again, or give up as
 * the kernel does (cm_process_send_error, cma_ib_handler). */
static void rtx_fire(struct sv_cm_id *id)
{
	char a[64];

	if (id->rtx_left) {
		id->rtx_left--;
		sv_cm_stats.mad_retries++;
		sv_cm_send(id->rtx);
		sv_cm_set_deadline(id, rtx_ms());
		return;
	}
	free(id->rtx);
	id->rtx = NULL;
	sv_cm_stats.mad_timeouts++;
	sv_log(SV_LOG_INFO, "cm: id %u: %s: %s unanswered after %u retries",
	       id->handle, sv_cm_addr_str((const void *)&id->dst, a, sizeof(a)),
	       sv_cm_conn_names[id->conn], sv_cm_cfg.max_retries);
	switch (id->conn) {
	case CONN_REQ_SENT:
	case CONN_REP_SENT:
		send_rej(id, SV_CM_REJ_TIMEOUT, NULL, 0);
		id->conn = CONN_NONE;
		sv_cm_ev_post(id, SV_EV_UNREACHABLE, -ETIMEDOUT);
		break;
	case CONN_SIDR_REQ_SENT:
		id->conn = CONN_NONE;
		sv_cm_ev_post(id, SV_EV_UNREACHABLE, -ETIMEDOUT);
		break;
	case CONN_DREQ_SENT:
		enter_timewait(id);
		disconnected(id, -ETIMEDOUT);
		break;
	default:
		break;
	}
}

void sv_cm_run_timers(uint64_t now)
{
	sv_cm_parked_expire(now);
	if (!sv_cm_timers_armed())
		return;
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++) {
		struct sv_cm_id *id = sv_cm_id_at(i);

		if (!id || !id->deadline_ms || id->deadline_ms > now)
			continue;
		sv_cm_set_deadline(id, 0);
		if (id->rtx) {
			rtx_fire(id);
			continue;
		}
		if (id->conn == CONN_DREQ_SENT) {
			/* no DREP: the connection is gone all the same */
			enter_timewait(id);
			disconnected(id, 0);
		} else if (id->conn == CONN_TIMEWAIT) {
			id->conn = CONN_NONE;
			if (!id->file) {
				sv_cm_id_free(id);
				continue;
			}
			sv_cm_ev_post(id, SV_EV_TIMEWAIT_EXIT, 0);
		}
	}
}

/* ---- an id destroyed ---- */

/* What the connection says as its id goes (DESTROY_ID, a closing file):
 * the REJ, DREQ, DREP or SIDR_REP its state calls for. */
void sv_cm_conn_leave(struct sv_cm_id *id)
{
	switch (id->conn) {
	case CONN_REQ_SENT:
		send_rej(id, SV_CM_REJ_TIMEOUT, NULL, 0);
		break;
	case CONN_REQ_RCVD:
	case CONN_REP_SENT:
	case CONN_REP_RCVD:
		send_rej(id, SV_CM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case CONN_ESTABLISHED:
		if (id->wire) {
			struct sv_cm_msg m;

			sv_cm_msg_init(&m, CM_MSG_DREQ, id);
			sv_cm_send(&m);
			id->conn = CONN_DREQ_SENT;
			rtx_arm(id, &m);
		} else {
			sv_cm_send_simple(id, CM_MSG_DREQ);
		}
		sv_cm_stats.disconnects++;
		break;
	case CONN_DREQ_RCVD:
		sv_cm_send_simple(id, CM_MSG_DREP);
		if (id->wire)
			enter_timewait(id);
		break;
	case CONN_SIDR_REQ_RCVD: {
		struct sv_cm_msg m;

		sv_cm_msg_init(&m, CM_MSG_SIDR_REP, id);
		m.reason = SV_CM_SIDR_REJECT;
		sv_cm_send(&m);
		break;
	}
	default:
		break;
	}
}

/* After sv_cm_conn_leave, with its file and port gone: true when the id
 * lives on as a ghost, false when it can go now. */
bool sv_cm_conn_linger(struct sv_cm_id *id)
{
	if (id->wire && (id->conn == CONN_DREQ_SENT || id->conn == CONN_TIMEWAIT)) {
		/* A ghost, as the kernel's cm_id outlives its rdma_cm id: it
		 * sends the DREQ again until the DREP comes, and answers a
		 * DREQ sent again with the DREP, until its time-wait ends;
		 * then it goes (sv_cm_id_free). Its port is free already. */
		id->file = NULL;
		id->state = CM_DISCONNECT;
		if (!id->deadline_ms)
			enter_timewait(id);
		return true;
	}
	return false;
}

/* ---- the verbs of rdma_cm that connect and disconnect ---- */

int sv_cm_connect(struct sv_cm_id *id, const struct rdma_ucm_conn_param *p)
{
	bool ud = id->qp_type == IBV_QPT_UD;
	unsigned int room = (ud ? SV_CM_SIDR_REQ_PDATA : SV_CM_REQ_PDATA) - SV_CM_HDR;
	struct sv_cm_msg m;

	if (!p->valid || id->state != CM_ROUTE_RESOLVED || p->private_data_len > room)
		return -EINVAL;
	id->state = CM_CONNECT;
	id->qpn = p->qp_num & SV_QPN_MASK;
	id->srq = p->srq;
	id->resp_res = p->responder_resources;
	id->init_depth = p->initiator_depth;
	id->retry = p->retry_count & 7;
	id->rnr_retry = p->rnr_retry_count & 7;
	id->flow_control = p->flow_control;
	sv_cm_msg_init(&m, ud ? CM_MSG_SIDR_REQ : CM_MSG_REQ, id);
	m.ps = id->ps;
	m.src = id->src;
	m.dst = id->dst;
	m.qpn = id->qpn;
	m.psn = id->psn;
	m.mtu = id->mtu;
	m.resp_res = id->resp_res;
	m.init_depth = id->init_depth;
	m.retry = id->retry;
	m.rnr_retry = id->rnr_retry;
	m.flow_control = id->flow_control;
	m.srq = id->srq;
	m.pdata_len = p->private_data_len;
	memcpy(m.pdata, p->private_data, p->private_data_len);
	id->conn = ud ? CONN_SIDR_REQ_SENT : CONN_REQ_SENT;
	sv_cm_stats.connects++;
	sv_cm_send(&m);
	rtx_arm(id, &m);
	return 0;
}

int sv_cm_accept(struct sv_cm_id *id, const struct rdma_ucm_conn_param *p,
		 uint64_t uid)
{
	struct sv_cm_msg m;

	if (id->state != CM_CONNECT)
		return -EINVAL;
	if (!p) {
		/* the active end's RTU (librdmacm's ACCEPT after its RTS) */
		if (id->conn != CONN_REP_RCVD)
			return -EINVAL;
		sv_cm_send_simple(id, CM_MSG_RTU);
		id->conn = CONN_ESTABLISHED;
		sv_cm_stats.established++;
		return 0;
	}
	if (id->qp_type == IBV_QPT_UD) {
		if (id->conn != CONN_SIDR_REQ_RCVD ||
		    p->private_data_len > SV_CM_SIDR_REP_PDATA ||
		    (p->qkey && p->qkey != id->qkey))
			return -EINVAL;
		sv_cm_msg_init(&m, CM_MSG_SIDR_REP, id);
		m.qpn = p->qp_num & SV_QPN_MASK;
		m.qkey = id->qkey;
		m.ps = id->ps;
		m.src = id->src;
		id->conn = CONN_NONE;
	} else {
		if (id->conn != CONN_REQ_RCVD || p->private_data_len > SV_CM_REP_PDATA)
			return -EINVAL;
		id->qpn = p->qp_num & SV_QPN_MASK;
		id->srq = p->srq;
		id->resp_res = p->responder_resources;
		id->init_depth = p->initiator_depth;
		id->flow_control = p->flow_control;
		id->rnr_retry = p->rnr_retry_count & 7;
		sv_cm_msg_init(&m, CM_MSG_REP, id);
		m.qpn = id->qpn;
		m.psn = id->psn;
		m.mtu = id->mtu;
		m.resp_res = id->resp_res;
		m.init_depth = id->init_depth;
		m.rnr_retry = id->rnr_retry;
		m.flow_control = id->flow_control;
		m.srq = id->srq;
		id->conn = CONN_REP_SENT;
	}
	m.pdata_len = p->private_data_len;
	memcpy(m.pdata, p->private_data, p->private_data_len);
	id->uid = uid;
	sv_cm_stats.accepts++;
	sv_cm_send(&m);
	if (m.type == CM_MSG_REP)
		rtx_arm(id, &m);
	return 0;
}

int sv_cm_reject(struct sv_cm_id *id, uint8_t reason, const uint8_t *pdata,
		 uint8_t len)
{
	if (!reason)
		reason = SV_CM_REJ_CONSUMER_DEFINED;
	if (reason != SV_CM_REJ_CONSUMER_DEFINED && reason != SV_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED)
		return -EINVAL;
	if (id->conn == CONN_SIDR_REQ_RCVD) {
		struct sv_cm_msg m;

		if (len > SV_CM_SIDR_REP_PDATA)
			return -EINVAL;
		sv_cm_msg_init(&m, CM_MSG_SIDR_REP, id);
		m.reason = SV_CM_SIDR_REJECT;
		m.ps = id->ps;
		m.src = id->src;
		m.pdata_len = len;
		memcpy(m.pdata, pdata, len);
		sv_cm_send(&m);
		id->conn = CONN_NONE;
		sv_cm_stats.rejects++;
		return 0;
	}
	if ((id->conn != CONN_REQ_RCVD && id->conn != CONN_REP_RCVD) ||
	    len > SV_CM_REJ_PDATA)
		return -EINVAL;
	send_rej(id, reason, pdata, len);
	id->conn = CONN_NONE;
	return 0;
}

int sv_cm_disconnect(struct sv_cm_id *id)
{
	if (id->state != CM_CONNECT && id->state != CM_DISCONNECT)
		return -EINVAL;
	if (id->conn == CONN_ESTABLISHED) {
		struct sv_cm_msg m;

		sv_cm_msg_init(&m, CM_MSG_DREQ, id);
		sv_cm_send(&m);
		id->conn = CONN_DREQ_SENT;
		if (id->wire)
			rtx_arm(id, &m);
		else
			sv_cm_set_deadline(id, SV_CM_DREQ_TIMEOUT_MS);
		sv_cm_stats.disconnects++;
	} else if (id->conn == CONN_DREQ_RCVD) {
		sv_cm_send_simple(id, CM_MSG_DREP);
		enter_timewait(id);
	}
	/* elsewhere the kernel's DREQ and DREP both fail, and it says 0 */
	return 0;
}

int sv_cm_notify(struct sv_cm_id *id, uint32_t event)
{
	if (id->state != CM_CONNECT && id->state != CM_DISCONNECT)
		return -EINVAL;
	switch (event) {
	case IBV_EVENT_COMM_EST:
		/* the first message arrived before the RTU: established */
		if (id->conn == CONN_ESTABLISHED)
			return -EISCONN;
		if (id->conn != CONN_REP_SENT)
			return -EINVAL;
		id->conn = CONN_ESTABLISHED;
		sv_cm_stats.established++;
		sv_cm_ev_post(id, SV_EV_ESTABLISHED, 0);
		return 0;
	case IBV_EVENT_PATH_MIG:
		return id->conn == CONN_ESTABLISHED ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}
