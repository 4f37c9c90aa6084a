// SPDX-License-Identifier: MIT
/*
 * The passive side: LISTEN, and the REQs and SIDR_REQs that come to a
 * listener: a new hidden id and its CONNECT_REQUEST, a refusal (REJ or
 * SIDR_REP) when nobody takes it, an MRA or the REP again for a REQ sent
 * again, and REQs held a moment for a listener that is still to come.
 *
 * Owns the held REQs. Calls bind.c (the listener a REQ is for), id.c (the
 * new id, its event), conn.c (sending, the event's connection fields) and
 * ucma.c (queueing the event); called by conn.c (sv_cm_recv and the
 * timers) and ucma.c (LISTEN).
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

/* A REQ no id takes: the REJ goes back to its sender's comm id. */
static void reject_req(const struct sv_cm_msg *req, uint8_t reason)
{
	struct sv_cm_msg m;
	bool ud = req->type == CM_MSG_SIDR_REQ;

	memset(&m, 0, sizeof(m));
	m.type = ud ? CM_MSG_SIDR_REP : CM_MSG_REJ;
	m.remote_comm = req->local_comm;
	m.wire = req->wire;
	memcpy(m.sgid, req->dgid, 16);
	memcpy(m.dgid, req->sgid, 16);
	m.tid = req->tid;
	m.ps = req->ps;
	m.src = req->dst;
	m.reason = ud ? (reason == SV_CM_REJ_INVALID_SERVICE_ID ?
			 SV_CM_SIDR_UNSUPPORTED : SV_CM_SIDR_REJECT) : reason;
	sv_cm_send(&m);
	sv_cm_stats.rejects++;
}

/* The id that took the wire REQ m before (its sender's comm id and GID). */
static struct sv_cm_id *req_taken(const struct sv_cm_msg *m)
{
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++) {
		struct sv_cm_id *id = sv_cm_id_at(i);

		if (id && id->wire && id->remote_comm == m->local_comm &&
		    !memcmp(id->rgid, m->sgid, 16))
			return id;
	}
	return NULL;
}

/* A REQ again (our answer was lost, or the user is slow to accept): the
 * REP again, or an MRA that asks the sender to wait (kernel
 * cm_dup_req_handler). */
static void dup_req(struct sv_cm_id *id, const struct sv_cm_msg *m)
{
	struct sv_cm_msg a;

	if (m->type == CM_MSG_SIDR_REQ)
		return;      /* the SIDR_REP follows the accept */
	if (id->conn == CONN_REP_SENT && id->rtx) {
		sv_cm_send(id->rtx);
		sv_cm_stats.mad_retries++;
	} else if (id->conn == CONN_REQ_RCVD) {
		sv_cm_msg_init(&a, CM_MSG_MRA, id);
		a.about = 0;
		a.service_timeout = sv_cm_cfg.response_timeout;
		sv_cm_send(&a);
	}
}

/*
 * A REQ for a port nobody listens on waits a moment for its listener
 * before the REJ (reason 8) goes: programs that set up a second
 * connection at once (perftest's -R: its client's data REQ races its
 * server's second listen) see the REJ only if no listener comes within
 * SV_CM_REQ_GRACE_MS. The kernel's CM answers at once; its address and
 * route resolution (ARP, a work queue) give the listener that head start
 * instead, where ours answer from the daemon in microseconds.
 */
struct parked {
	struct parked *next;
	uint64_t deadline_ms;
	struct sv_cm_msg m;
};
static struct parked *parked;
static uint32_t nparked;

static bool same_req(const struct sv_cm_msg *a, const struct sv_cm_msg *b)
{
	return a->type == b->type && a->local_comm == b->local_comm &&
	       a->wire == b->wire && (!a->wire || !memcmp(a->sgid, b->sgid, 16));
}

/* Hold m; false: no room (or no memory), refuse it now. */
static bool park_req(const struct sv_cm_msg *m)
{
	struct parked *p;

	for (p = parked; p; p = p->next)
		if (same_req(&p->m, m))
			return true;    /* its retry: still waiting */
	if (nparked >= SV_CM_MAX_PARKED || !(p = malloc(sizeof(*p))))
		return false;
	p->m = *m;
	p->deadline_ms = sv_cm_now_ms() + SV_CM_REQ_GRACE_MS;
	sv_log(SV_LOG_INFO, "cm: %s for port %u held: nobody listens there yet",
	       sv_cm_msg_names[m->type], sv_cm_port((const void *)&m->dst));
	p->next = parked;
	parked = p;
	nparked++;
	return true;
}

static void recv_req_now(const struct sv_cm_msg *m, bool may_park);

/* A listener came (or the grace ended: now_ms, 0 for a listen): serve
 * the REQs held for its port space and port, or refuse the expired. */
static void unpark(const struct sv_cm_id *l, uint64_t now_ms)
{
	struct parked **pp = &parked;

	while (*pp) {
		struct parked *p = *pp;
		bool take = l ? p->m.ps == l->ps &&
				sv_cm_port((const void *)&p->m.dst) ==
				sv_cm_port((const void *)&l->src) :
			    p->deadline_ms <= now_ms;

		if (!take) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		nparked--;
		recv_req_now(&p->m, false);
		free(p);
		pp = &parked;   /* the list may have changed */
	}
}

void sv_cm_recv_req(const struct sv_cm_msg *m)
{
	recv_req_now(m, true);
}

static void recv_req_now(const struct sv_cm_msg *m, bool may_park)
{
	bool ud = m->type == CM_MSG_SIDR_REQ;
	struct sv_cm_id *l, *c;
	struct sv_cm_event *e;
	uint8_t reason;
	char a[64];

	if (m->wire && (c = req_taken(m))) {
		dup_req(c, m);
		return;
	}
	if (m->reason) {
		/* the codec's refusal: a transport we do not have */
		reject_req(m, m->reason);
		return;
	}
	l = sv_cm_find_listener(m, &reason);
	if (!l && reason == SV_CM_REJ_INVALID_SERVICE_ID && may_park && m->ps &&
	    park_req(m))
		return;
	if (!l || l->pending >= l->backlog || (l->qp_type == IBV_QPT_UD) != ud) {
		sv_log(SV_LOG_INFO, "cm: %s for %s refused: %s", sv_cm_msg_names[m->type],
		       sv_cm_addr_str((const void *)&m->dst, a, sizeof(a)),
		       !l ? (reason == SV_CM_REJ_INVALID_SERVICE_ID ?
			     "nobody listens on the port" : "no listener on the address") :
		       l->pending >= l->backlog ? "backlog full" : "transport differs");
		reject_req(m, l ? SV_CM_REJ_CONSUMER_DEFINED : reason);
		return;
	}
	if (sv_cm_id_new(l->file, 0, l->ps, l->qp_type, &c)) {
		reject_req(m, 3 /* no resources */);
		return;
	}
	e = sv_cm_ev_new(l, SV_EV_CONNECT_REQUEST, 0);
	if (!e) {
		sv_cm_id_destroy(c);
		return;
	}
	c->hidden = true;
	c->has_dev = true;
	if (m->wire) {
		int k = sv_cm_gid_index(m->dgid);

		c->wire = true;
		memcpy(c->lgid, m->dgid, 16);
		memcpy(c->rgid, m->sgid, 16);
		c->sgid_index = (uint8_t)(k < 0 ? 0 : k);
		c->tid = m->tid;   /* answers carry the request's ID */
	}
	c->state = CM_CONNECT;
	c->conn = ud ? CONN_SIDR_REQ_RCVD : CONN_REQ_RCVD;
	c->src = m->dst;
	c->dst = m->src;
	c->remote_comm = m->local_comm;
	c->rqpn = m->qpn;
	c->rpsn = m->psn;
	c->mtu = m->mtu && m->mtu < c->mtu ? m->mtu : c->mtu;
	/* the other end's initiator depth is our responder resources */
	c->resp_res = m->init_depth;
	c->init_depth = m->resp_res;
	c->retry = m->retry;
	c->rnr_retry = m->rnr_retry;
	c->flow_control = m->flow_control;
	c->tos = l->tos;
	c->tos_set = l->tos_set;
	e->child = c;
	e->resp.id = c->handle;
	if (ud)
		sv_cm_ev_pdata(e->resp.param.ud.private_data,
			 &e->resp.param.ud.private_data_len, m,
			 SV_CM_SIDR_REQ_PDATA - SV_CM_HDR);
	else
		sv_cm_ev_conn(e, c, m, SV_CM_REQ_PDATA - SV_CM_HDR);
	l->pending++;
	sv_cm_event_queue(l->file, e);
}

/* The earliest deadline of the REQs held (ms, CLOCK_MONOTONIC), 0 none. */
uint64_t sv_cm_parked_next(void)
{
	uint64_t next = 0;

	for (struct parked *p = parked; p; p = p->next)
		if (!next || p->deadline_ms < next)
			next = p->deadline_ms;
	return next;
}

/* Refuse the REQs whose grace has ended (or serve them, if a listener
 * came). */
void sv_cm_parked_expire(uint64_t now)
{
	if (parked)
		unpark(NULL, now);
}

int sv_cm_listen(struct sv_cm_id *id, uint32_t backlog)
{
	char a[64];
	int ret;

	if (id->state == CM_IDLE) {
		struct sockaddr_in any = { .sin_family = AF_INET };

		ret = sv_cm_bind(id, (struct sockaddr *)&any);
		if (ret)
			return ret;
	}
	if (id->state != CM_ADDR_BOUND)
		return -EINVAL;
	if (id->reuseaddr) {
		/* a listener holds its port alone (cma_bind_listen) */
		ret = sv_cm_check_port(id, sv_cm_port((const void *)&id->src), false);
		if (ret)
			return ret;
	}
	id->backlog = (int32_t)backlog > 0 && backlog < SV_CM_MAX_BACKLOG ?
		      backlog : SV_CM_MAX_BACKLOG;
	id->state = CM_LISTEN;
	sv_log(SV_LOG_INFO, "cm: id %u (pid %d) listens on %s, port space 0x%x",
	       id->handle, (int)id->file->pid,
	       sv_cm_addr_str((const void *)&id->src, a, sizeof(a)), id->ps);
	if (parked)
		unpark(id, 0);
	return 0;
}

