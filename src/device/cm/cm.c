// SPDX-License-Identifier: MIT
/*
 * rdma_cm ids and the connection state machine (docs/DESIGN.md, "rdma_cm").
 *
 * An id has the kernel's rdma_cm state (IDLE, ADDR_BOUND, ADDR_QUERY ...
 * LISTEN, CONNECT, DISCONNECT) and, once it takes part in a connection, the
 * IBTA's communication state (REQ_SENT, REQ_RCVD, REP_SENT, REP_RCVD,
 * ESTABLISHED, DREQ_SENT, DREQ_RCVD, TIMEWAIT; SIDR for UD). The two ends
 * of a connection speak only through CM messages: cm_send() either queues
 * one for sv_cm_flush() to hand to sv_cm_recv() (the other end is on this
 * daemon), or puts it on the wire as a CM MAD on QP1 (wire.c: another
 * host, or another daemon), whose answers come back to sv_cm_recv() the
 * same way. On the wire, REQ, REP, DREQ and SIDR_REQ are sent again until
 * answered (the kernel's timeouts and retries), a duplicate REQ is
 * answered with an MRA or the REP again, a duplicate REP with the RTU.
 *
 * Errors are the kernel's (drivers/infiniband/core/cma.c, cm.c and
 * ucma.c): the same errno for the same misuse, the same events with the
 * same status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "device/cm/cm.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

#define SV_STR(s) #s,
const char *const sv_cm_state_names[] = { SV_CM_STATES(SV_STR) };
const char *const sv_cm_conn_names[] = { SV_CM_CONNS(SV_STR) };
static const char *const msg_names[] = { SV_CM_MSGS(SV_STR) };
#undef SV_STR

struct sv_cm_stats sv_cm_stats;
struct sv_cm_cfg sv_cm_cfg = { .response_timeout = 20, .max_retries = 15 };

static struct sv_cm_id *ids[SV_CM_MAX_IDS];
static uint16_t id_gen[SV_CM_MAX_IDS];
static uint16_t gen_base;          /* random: comm ids differ per start */
static uint32_t tid_hi;            /* random: our MADs' transaction IDs */
static uint32_t id_cursor;
static uint32_t nl_last;           /* the last id's nl_id */
static uint32_t ntimers;           /* ids with a deadline */
static struct sv_cm_id *bound;     /* every id holding a port */

#define PORT_LO 32768              /* the kernel's ip_local_port_range */
#define PORT_HI 60999

uint64_t sv_cm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint32_t rand32(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)random();
	return v;
}

static void set_deadline(struct sv_cm_id *id, uint32_t ms)
{
	if (!id->deadline_ms && ms)
		ntimers++;
	if (id->deadline_ms && !ms)
		ntimers--;
	id->deadline_ms = ms ? sv_cm_now_ms() + ms : 0;
}

/* ---- ids ---- */

int sv_cm_id_new(struct sv_cm_file *f, uint64_t uid, uint16_t ps, uint8_t qp_type,
		 struct sv_cm_id **out)
{
	struct sv_cm_id *id;
	uint32_t h = SV_CM_MAX_IDS;

	/* the next free handle after the last one given: a handle is not
	 * reused at once, so a late message finds no one rather than a
	 * stranger (the comm id's generation catches the rest) */
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++) {
		uint32_t c = (id_cursor + i) % SV_CM_MAX_IDS;

		if (!ids[c]) {
			h = c;
			break;
		}
	}
	if (h == SV_CM_MAX_IDS)
		return -ENOMEM;
	id = calloc(1, sizeof(*id));
	if (!id)
		return -ENOMEM;
	if (!gen_base) {
		gen_base = (uint16_t)(rand32() | 1);
		tid_hi = rand32();
	}
	id_cursor = h + 1;
	id->handle = h;
	id->comm = h | (uint32_t)(uint16_t)(++id_gen[h] + gen_base) << 16;
	if (!id->comm)  /* 0 means "no id" in a message */
		id->comm = h | (uint32_t)(uint16_t)(++id_gen[h] + gen_base) << 16;
	id->tid = (uint64_t)tid_hi << 32 | id->comm;
	id->nl_id = ++nl_last ? nl_last : ++nl_last;
	id->file = f;
	id->uid = uid;
	id->ps = ps;
	id->qp_type = qp_type;
	id->psn = rand32() & SV_PSN_MASK;
	id->qkey = SV_CM_UDP_QKEY;
	id->mtu = sv_dev.port.active_mtu;
	id->file_next = f->ids;
	f->ids = id;
	ids[h] = id;
	sv_cm_stats.ids++;
	sv_cm_stats.live++;
	*out = id;
	return 0;
}

int sv_cm_id_get(struct sv_cm_file *f, uint32_t handle, struct sv_cm_id **out)
{
	struct sv_cm_id *id = handle < SV_CM_MAX_IDS ? ids[handle] : NULL;

	if (!id || id->hidden || !id->file)
		return -ENOENT;
	if (id->file != f)
		return -EINVAL;
	*out = id;
	return 0;
}

static struct sv_cm_id *by_comm(uint32_t comm)
{
	struct sv_cm_id *id = ids[(comm & 0xffff) % SV_CM_MAX_IDS];

	return id && id->comm == comm ? id : NULL;
}

static void file_unlink(struct sv_cm_id *id)
{
	for (struct sv_cm_id **p = &id->file->ids; *p; p = &(*p)->file_next)
		if (*p == id) {
			*p = id->file_next;
			break;
		}
}

static void unbind(struct sv_cm_id *id)
{
	if (!id->bound)
		return;
	for (struct sv_cm_id **p = &bound; *p; p = &(*p)->port_next)
		if (*p == id) {
			*p = id->port_next;
			break;
		}
	id->bound = false;
}

int sv_cm_migrate(struct sv_cm_id *id, struct sv_cm_file *to)
{
	if (id->file == to)
		return 0;
	sv_cm_events_move(id->file, to, id);
	file_unlink(id);
	id->file = to;
	id->file_next = to->ids;
	to->ids = id;
	return 0;
}

/* ---- events ---- */

struct sv_cm_event *sv_cm_ev_new(struct sv_cm_id *id, uint32_t type, int32_t status)
{
	struct sv_cm_event *e;

	if (!id->file)
		return NULL;   /* a ghost (below): nobody to tell */
	e = calloc(1, sizeof(*e));
	if (!e) {
		sv_log(SV_LOG_WARN, "cm: id %u: event %u lost: out of memory",
		       id->handle, type);
		return NULL;
	}
	e->id = id;
	e->resp.uid = id->uid;
	e->resp.id = id->handle;
	e->resp.event = type;
	e->resp.status = (uint32_t)status;
	return e;
}

void sv_cm_ev_post(struct sv_cm_id *id, uint32_t type, int32_t status)
{
	struct sv_cm_event *e = sv_cm_ev_new(id, type, status);

	if (e)
		sv_cm_event_queue(id->file, e);
}

/* The event's private data: what came, then zeros up to the room the
 * message has for the user (the kernel reports the whole room). */
static void ev_pdata(uint8_t *dst, uint8_t *dst_len, const struct sv_cm_msg *m,
		     unsigned int room)
{
	memcpy(dst, m->pdata, m->pdata_len < room ? m->pdata_len : room);
	*dst_len = (uint8_t)room;
}

static void ev_conn(struct sv_cm_event *e, const struct sv_cm_id *id,
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
	ev_pdata(c->private_data, &c->private_data_len, m, room);
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
static void cm_send(const struct sv_cm_msg *m)
{
	struct msgq *q;

	if (m->wire) {
		(void)sv_cm_wire_send(m);   /* a loss is a loss: retries cover it */
		return;
	}
	q = malloc(sizeof(*q));

	if (!q) {
		sv_log(SV_LOG_WARN, "cm: %s lost: out of memory", msg_names[m->type]);
		return;
	}
	q->next = NULL;
	q->m = *m;
	*mq_tail = q;
	mq_tail = &q->next;
}

static void msg_init(struct sv_cm_msg *m, enum sv_cm_msg_type type,
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
	set_deadline(id, rtx_ms());
}

/* The answer came: no more retries. */
static void rtx_stop(struct sv_cm_id *id)
{
	if (!id->rtx)
		return;
	free(id->rtx);
	id->rtx = NULL;
	set_deadline(id, 0);
}

static void send_rej(const struct sv_cm_id *from, uint8_t reason,
		     const uint8_t *pdata, uint8_t len)
{
	struct sv_cm_msg m;

	msg_init(&m, CM_MSG_REJ, from);
	m.reason = reason;
	/* what is rejected: the REQ (passive end), the REP (active end
	 * after it), or neither (a REQ given up on) */
	m.about = from->conn == CONN_REQ_RCVD || from->conn == CONN_REP_SENT ? 0 :
		  from->conn == CONN_REP_RCVD ? 1 : 2;
	m.pdata_len = len;
	if (len)
		memcpy(m.pdata, pdata, len);
	cm_send(&m);
	sv_cm_stats.rejects++;
}

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
	cm_send(&m);
	sv_cm_stats.rejects++;
}

static void send_simple(const struct sv_cm_id *from, enum sv_cm_msg_type type)
{
	struct sv_cm_msg m;

	msg_init(&m, type, from);
	cm_send(&m);
}

/* Do the families of two bound addresses meet (kernel cma_check_port)? */
static bool families_meet(const struct sv_cm_id *a, const struct sv_cm_id *b)
{
	return !(a->afonly && b->afonly && a->src.ss_family != b->src.ss_family);
}

/* The listener a REQ is for: the best match on its port; *reason says why
 * none (no one on the port: an invalid service; no address matches: the
 * consumer's refusal, as cma's handler refuses it). */
static struct sv_cm_id *find_listener(const struct sv_cm_msg *m, uint8_t *reason)
{
	const struct sockaddr *dst = (const void *)&m->dst;
	uint16_t port = sv_cm_port(dst);
	struct sv_cm_id *wild = NULL;

	*reason = SV_CM_REJ_INVALID_SERVICE_ID;
	for (struct sv_cm_id *l = bound; l; l = l->port_next) {
		const struct sockaddr *src = (const void *)&l->src;

		if (l->ps != m->ps || sv_cm_port(src) != port || l->state != CM_LISTEN)
			continue;
		*reason = SV_CM_REJ_CONSUMER_DEFINED;
		if (sv_cm_addr_eq(src, dst))
			return l;
		if (sv_cm_addr_any(src) && !wild &&
		    (src->sa_family == dst->sa_family ||
		     (src->sa_family == AF_INET6 && !l->afonly)))
			wild = l;
	}
	return wild;
}

/* The id that took the wire REQ m before (its sender's comm id and GID). */
static struct sv_cm_id *req_taken(const struct sv_cm_msg *m)
{
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++) {
		struct sv_cm_id *id = ids[i];

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
		cm_send(id->rtx);
		sv_cm_stats.mad_retries++;
	} else if (id->conn == CONN_REQ_RCVD) {
		msg_init(&a, CM_MSG_MRA, id);
		a.about = 0;
		a.service_timeout = sv_cm_cfg.response_timeout;
		cm_send(&a);
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
	       msg_names[m->type], sv_cm_port((const void *)&m->dst));
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

static void recv_req(const struct sv_cm_msg *m)
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
	l = find_listener(m, &reason);
	if (!l && reason == SV_CM_REJ_INVALID_SERVICE_ID && may_park && m->ps &&
	    park_req(m))
		return;
	if (!l || l->pending >= l->backlog || (l->qp_type == IBV_QPT_UD) != ud) {
		sv_log(SV_LOG_INFO, "cm: %s for %s refused: %s", msg_names[m->type],
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
		ev_pdata(e->resp.param.ud.private_data,
			 &e->resp.param.ud.private_data_len, m,
			 SV_CM_SIDR_REQ_PDATA - SV_CM_HDR);
	else
		ev_conn(e, c, m, SV_CM_REQ_PDATA - SV_CM_HDR);
	l->pending++;
	sv_cm_event_queue(l->file, e);
}

static void recv_rep(struct sv_cm_id *id, const struct sv_cm_msg *m)
{
	struct sv_cm_event *e;

	if (id->wire && m->local_comm == id->remote_comm &&
	    (id->conn == CONN_ESTABLISHED || id->conn == CONN_DREQ_SENT)) {
		/* our RTU was lost: again (kernel cm_dup_rep_handler) */
		if (id->conn == CONN_ESTABLISHED)
			send_simple(id, CM_MSG_RTU);
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
	ev_conn(e, id, m, SV_CM_REP_PDATA);
	sv_cm_event_queue(id->file, e);
}

static void enter_timewait(struct sv_cm_id *id)
{
	id->conn = CONN_TIMEWAIT;
	set_deadline(id, SV_CM_TIMEWAIT_MS);
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
		send_simple(id, CM_MSG_DREP);
		rtx_stop(id);
		set_deadline(id, 0);
		enter_timewait(id);
		disconnected(id, 0);
		break;
	case CONN_TIMEWAIT:    /* our DREP was lost: again */
		send_simple(id, CM_MSG_DREP);
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
	ev_pdata(u->private_data, &u->private_data_len, m, SV_CM_SIDR_REP_PDATA);
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
		id = by_comm(m->remote_comm);
		if (!id || !from_peer(id, m))
			return NULL;
		/* a REP or SIDR_REP answers a REQ: the sender is new to us */
		if (id->remote_comm && id->remote_comm != m->local_comm)
			return NULL;
		return id;
	}
	/* a REJ from an end that never answered: the id that knows it */
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++)
		if (ids[i] && ids[i]->remote_comm == m->local_comm &&
		    from_peer(ids[i], m))
			return ids[i];
	return NULL;
}

void sv_cm_recv(const struct sv_cm_msg *m)
{
	struct sv_cm_id *id;

	if (m->type == CM_MSG_REQ || m->type == CM_MSG_SIDR_REQ) {
		recv_req(m);
		return;
	}
	id = target(m);
	if (!id) {
		if (m->wire)
			sv_cm_stats.mad_dropped++;
		sv_log(SV_LOG_DEBUG, "cm: %s for comm id 0x%x: no such id, dropped",
		       msg_names[m->type], m->remote_comm);
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
				ev_pdata(e->resp.param.conn.private_data,
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
			set_deadline(id, 0);
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
			set_deadline(id, 2 * t_ms(SV_CM_PACKET_LIFE_TIME) +
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
	uint64_t next = 0;

	for (struct parked *p = parked; p; p = p->next)
		if (!next || p->deadline_ms < next)
			next = p->deadline_ms;
	if (!ntimers)
		return next;
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++)
		if (ids[i] && ids[i]->deadline_ms &&
		    (!next || ids[i]->deadline_ms < next))
			next = ids[i]->deadline_ms;
	return next;
}

/* An id's last breath: its slot and memory. */
static void ghost_end(struct sv_cm_id *id)
{
	set_deadline(id, 0);
	free(id->rtx);
	ids[id->handle] = NULL;
	free(id);
}

/* A message on the wire was not answered in time: again, or give up as
 * the kernel does (cm_process_send_error, cma_ib_handler). */
static void rtx_fire(struct sv_cm_id *id)
{
	char a[64];

	if (id->rtx_left) {
		id->rtx_left--;
		sv_cm_stats.mad_retries++;
		cm_send(id->rtx);
		set_deadline(id, rtx_ms());
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
	if (parked)
		unpark(NULL, now);
	if (!ntimers)
		return;
	for (uint32_t i = 0; i < SV_CM_MAX_IDS; i++) {
		struct sv_cm_id *id = ids[i];

		if (!id || !id->deadline_ms || id->deadline_ms > now)
			continue;
		set_deadline(id, 0);
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
				ghost_end(id);
				continue;
			}
			sv_cm_ev_post(id, SV_EV_TIMEWAIT_EXIT, 0);
		}
	}
}

/* ---- destroying ---- */

void sv_cm_id_destroy(struct sv_cm_id *id)
{
	struct sv_cm_file *f = id->file;
	struct sv_cm_event **p;

	sv_cm_mc_id_destroy(id);
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

			msg_init(&m, CM_MSG_DREQ, id);
			cm_send(&m);
			id->conn = CONN_DREQ_SENT;
			rtx_arm(id, &m);
		} else {
			send_simple(id, CM_MSG_DREQ);
		}
		sv_cm_stats.disconnects++;
		break;
	case CONN_DREQ_RCVD:
		send_simple(id, CM_MSG_DREP);
		if (id->wire)
			enter_timewait(id);
		break;
	case CONN_SIDR_REQ_RCVD: {
		struct sv_cm_msg m;

		msg_init(&m, CM_MSG_SIDR_REP, id);
		m.reason = SV_CM_SIDR_REJECT;
		cm_send(&m);
		break;
	}
	default:
		break;
	}
	/* a listener's requests nobody fetched: their ids go too (and
	 * refuse their REQs) */
	for (p = &f->evq; *p;) {
		struct sv_cm_event *e = *p;

		if (e->id == id && e->child) {
			struct sv_cm_id *c = e->child;

			*p = e->next;
			f->nev--;
			free(e);
			if (f->last == e)
				f->last = NULL;
			sv_cm_id_destroy(c);
			p = &f->evq;   /* the queue may have changed */
			continue;
		}
		p = &(*p)->next;
	}
	sv_cm_events_drop(f, id);
	unbind(id);
	file_unlink(id);
	sv_cm_stats.live--;
	if (id->wire && (id->conn == CONN_DREQ_SENT || id->conn == CONN_TIMEWAIT)) {
		/* A ghost, as the kernel's cm_id outlives its rdma_cm id: it
		 * sends the DREQ again until the DREP comes, and answers a
		 * DREQ sent again with the DREP, until its time-wait ends;
		 * then it goes (ghost_end). Its port is free already. */
		id->file = NULL;
		id->state = CM_DISCONNECT;
		if (!id->deadline_ms)
			enter_timewait(id);
		return;
	}
	ghost_end(id);
}

void sv_cm_file_destroy_ids(struct sv_cm_file *f)
{
	while (f->ids)
		sv_cm_id_destroy(f->ids);
}

/* ---- binding ---- */

static int bindv6only(void)
{
	static int v = -1;

	if (v < 0) {
		FILE *fp = fopen("/proc/sys/net/ipv6/bindv6only", "re");

		v = 0;
		if (fp) {
			if (fscanf(fp, "%d", &v) != 1)
				v = 0;
			fclose(fp);
		}
	}
	return v;
}

/* Can id take its port next to those bound (kernel cma_check_port)? */
static int check_port(const struct sv_cm_id *id, uint16_t port, bool reuse)
{
	const struct sockaddr *a = (const void *)&id->src;

	for (struct sv_cm_id *b = bound; b; b = b->port_next) {
		const struct sockaddr *s = (const void *)&b->src;

		if (b == id || b->ps != id->ps || sv_cm_port(s) != port)
			continue;
		if (reuse && b->reuseaddr)
			continue;
		if (!families_meet(id, b))
			continue;
		if (sv_cm_addr_any(a) || sv_cm_addr_any(s))
			return -EADDRNOTAVAIL;
		if (sv_cm_addr_eq(a, s))
			return -EADDRINUSE;
	}
	return 0;
}

static bool port_free(uint16_t ps, uint16_t port)
{
	for (struct sv_cm_id *b = bound; b; b = b->port_next)
		if (b->ps == ps && sv_cm_port((const void *)&b->src) == port)
			return false;
	return true;
}

static int get_port(struct sv_cm_id *id, uid_t uid)
{
	struct sockaddr *a = (void *)&id->src;
	uint16_t port = sv_cm_port(a);
	int ret;

	if (!port) {
		uint32_t n = PORT_HI - PORT_LO + 1, start = rand32() % n;

		for (uint32_t i = 0; i < n && !port; i++) {
			uint16_t p = (uint16_t)(PORT_LO + (start + i) % n);

			if (port_free(id->ps, p))
				port = p;
		}
		if (!port)
			return -EADDRNOTAVAIL;
		sv_cm_set_port(a, port);
	} else {
		if (port < 1024 && uid != 0)
			return -EACCES;
		ret = check_port(id, port, id->reuseaddr);
		if (ret)
			return ret;
	}
	id->port_next = bound;
	bound = id;
	id->bound = true;
	return 0;
}

static bool linklocal_without_scope(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6 = (const void *)sa;

	return sa->sa_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) &&
	       !s6->sin6_scope_id;
}

int sv_cm_bind(struct sv_cm_id *id, const struct sockaddr *sa)
{
	socklen_t n = sv_cm_addr_size(sa);
	int ret;

	if (!n)
		return -EAFNOSUPPORT;
	if (id->state != CM_IDLE)
		return -EINVAL;
	if (linklocal_without_scope(sa))
		return -EINVAL;
	if (!sv_cm_addr_any(sa) && !sv_cm_addr_local(sa))
		return -EADDRNOTAVAIL;
	memset(&id->src, 0, sizeof(id->src));
	memcpy(&id->src, sa, n);
	if (!id->afonly_set)
		id->afonly = sa->sa_family == AF_INET ? true : bindv6only() != 0;
	ret = get_port(id, id->file->uid);
	if (ret) {
		memset(&id->src, 0, sizeof(id->src));
		return ret;
	}
	id->has_dev = !sv_cm_addr_any(sa);
	id->state = CM_ADDR_BOUND;
	return 0;
}

/* ---- the verbs of rdma_cm ---- */

/* A destination on another host: the source address the host's routing
 * picks (or the one bound), which must be one sv0 serves with a RoCEv2
 * port (the kernel's "no RDMA device on that interface" is ENODEV). */
static int resolve_remote(struct sv_cm_id *id)
{
	struct sockaddr *s = (void *)&id->src, *d = (void *)&id->dst;
	struct sockaddr_storage via;
	uint8_t gid[16], dg[16];
	int ret, k;

	sv_cm_addr_to_gid(d, dg);
	ret = sv_cm_route_src(d, &via);
	if (ret)
		return ret;
	if (!sv_cm_addr_any(s))
		sv_cm_addr_to_gid(s, gid);
	else
		sv_cm_addr_to_gid((const void *)&via, gid);
	k = sv_cm_gid_index(gid);
	if (k < 0 && sv_cm_addr_any(s) && sv_cm_addr_local(d)) {
		/* another daemon of this host: from our own address (the
		 * host routes its addresses from 127.0.0.1 or themselves) */
		for (unsigned int i = 0; i < SV_GID_TBL_LEN && k < 0; i++)
			if (sv_dev.gid[i].valid &&
			    sv_gid_is_v4(sv_dev.gid[i].gid) == sv_gid_is_v4(dg))
				k = (int)i;
		if (k >= 0) {
			memcpy(gid, sv_dev.gid[k].gid, 16);
			sv_cm_gid_to_addr(gid, &via);
		}
	}
	if (k < 0 || !sv_roce_running())
		return -ENODEV;
	if (sv_cm_addr_any(s)) {
		uint16_t port = sv_cm_port(s);
		uint32_t scope = s->sa_family == AF_INET6 ?
				 ((struct sockaddr_in6 *)s)->sin6_scope_id : 0;

		memcpy(s, &via, sv_cm_addr_size((const void *)&via));
		sv_cm_set_port(s, port);
		if (s->sa_family == AF_INET6 && scope)
			((struct sockaddr_in6 *)s)->sin6_scope_id = scope;
	}
	id->wire = true;
	id->has_dev = true;
	id->sgid_index = (uint8_t)k;
	memcpy(id->lgid, gid, 16);
	memcpy(id->rgid, dg, 16);
	return 0;
}

int sv_cm_resolve_addr(struct sv_cm_id *id, const struct sockaddr *src,
		       const struct sockaddr *dst)
{
	struct sockaddr *s = (void *)&id->src, *d = (void *)&id->dst;
	socklen_t n = sv_cm_addr_size(dst);
	char a[64];
	int ret;

	if (!n)
		return -EAFNOSUPPORT;
	if (id->state == CM_IDLE) {
		struct sockaddr_storage any;

		memset(&any, 0, sizeof(any));
		if (src && src->sa_family)
			memcpy(&any, src, sv_cm_addr_size(src));
		else {
			any.ss_family = dst->sa_family;
			if (dst->sa_family == AF_INET6)
				((struct sockaddr_in6 *)&any)->sin6_scope_id =
					((const struct sockaddr_in6 *)dst)->sin6_scope_id;
		}
		ret = sv_cm_bind(id, (struct sockaddr *)&any);
		if (ret)
			return ret;
	}
	if (id->src.ss_family != dst->sa_family)
		return -EINVAL;
	if (id->state != CM_ADDR_BOUND)
		return -EINVAL;
	memset(&id->dst, 0, sizeof(id->dst));
	memcpy(&id->dst, dst, n);
	if (sv_cm_addr_any(d)) {
		/* no destination: this host (cma_resolve_loopback) */
		if (d->sa_family == AF_INET)
			((struct sockaddr_in *)d)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else
			((struct sockaddr_in6 *)d)->sin6_addr = in6addr_loopback;
	}
	if (sv_cm_mc_addr(d))
		return sv_cm_mc_resolve(id);
	if (!sv_cm_addr_mine(d)) {
		ret = resolve_remote(id);
		if (ret) {
			sv_log(SV_LOG_INFO, "cm: id %u: resolve %s: %s", id->handle,
			       sv_cm_addr_str(d, a, sizeof(a)), strerror(-ret));
			sv_cm_ev_post(id, SV_EV_ADDR_ERROR, ret);
			return 0;
		}
		id->state = CM_ADDR_RESOLVED;
		sv_cm_ev_post(id, SV_EV_ADDR_RESOLVED, 0);
		return 0;
	}
	id->wire = false;
	if (sv_cm_addr_any(s)) {
		uint16_t port = sv_cm_port(s);

		memcpy(s, d, n);
		sv_cm_set_port(s, port);
	}
	id->has_dev = true;
	id->state = CM_ADDR_RESOLVED;
	sv_cm_ev_post(id, SV_EV_ADDR_RESOLVED, 0);
	return 0;
}

int sv_cm_resolve_route(struct sv_cm_id *id)
{
	if (id->state != CM_ADDR_RESOLVED)
		return -EINVAL;
	id->state = CM_ROUTE_RESOLVED;
	sv_cm_ev_post(id, SV_EV_ROUTE_RESOLVED, 0);
	return 0;
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
		ret = check_port(id, sv_cm_port((const void *)&id->src), false);
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
	msg_init(&m, ud ? CM_MSG_SIDR_REQ : CM_MSG_REQ, id);
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
	cm_send(&m);
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
		send_simple(id, CM_MSG_RTU);
		id->conn = CONN_ESTABLISHED;
		sv_cm_stats.established++;
		return 0;
	}
	if (id->qp_type == IBV_QPT_UD) {
		if (id->conn != CONN_SIDR_REQ_RCVD ||
		    p->private_data_len > SV_CM_SIDR_REP_PDATA ||
		    (p->qkey && p->qkey != id->qkey))
			return -EINVAL;
		msg_init(&m, CM_MSG_SIDR_REP, id);
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
		msg_init(&m, CM_MSG_REP, id);
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
	cm_send(&m);
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
		msg_init(&m, CM_MSG_SIDR_REP, id);
		m.reason = SV_CM_SIDR_REJECT;
		m.ps = id->ps;
		m.src = id->src;
		m.pdata_len = len;
		memcpy(m.pdata, pdata, len);
		cm_send(&m);
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

		msg_init(&m, CM_MSG_DREQ, id);
		cm_send(&m);
		id->conn = CONN_DREQ_SENT;
		if (id->wire)
			rtx_arm(id, &m);
		else
			set_deadline(id, SV_CM_DREQ_TIMEOUT_MS);
		sv_cm_stats.disconnects++;
	} else if (id->conn == CONN_DREQ_RCVD) {
		send_simple(id, CM_MSG_DREP);
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
