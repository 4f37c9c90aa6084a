/* SPDX-License-Identifier: MIT */
/*
 * Inside the rdma_cm ids and connections: what id.c, bind.c, resolve.c,
 * listen.c and conn.c call of each other. The rest of the daemon (ucma.c,
 * wire.c, attr.c, mcast.c, main.c) uses cm.h only.
 *
 *   id.c       the id table, comm ids, deadlines, events, destroying
 *   bind.c     ports and BIND, the listener a REQ is for
 *   resolve.c  RESOLVE_ADDR, RESOLVE_ROUTE
 *   listen.c   LISTEN and the REQs that come to a listener
 *   conn.c     the connection state machine: messages, retries, timers,
 *              CONNECT, ACCEPT, REJECT, DISCONNECT, NOTIFY
 */
#ifndef SV_DEVICE_CM_INT_H
#define SV_DEVICE_CM_INT_H

#include "device/cm/cm.h"

/* id.c */
uint32_t sv_cm_rand32(void);
/* id's deadline ms from now (0: none), counted for the timers. */
void sv_cm_set_deadline(struct sv_cm_id *id, uint32_t ms);
bool sv_cm_timers_armed(void);                   /* some id has a deadline */
struct sv_cm_id *sv_cm_id_at(uint32_t handle);   /* NULL: a free slot */
struct sv_cm_id *sv_cm_by_comm(uint32_t comm);   /* NULL: none (any more) */
/* An id's last breath: its slot and memory. */
void sv_cm_id_free(struct sv_cm_id *id);

/* bind.c */
void sv_cm_unbind(struct sv_cm_id *id);          /* its port, if it has one */
/* Can id take port next to those bound (kernel cma_check_port)? 0 or
 * -EADDRNOTAVAIL, -EADDRINUSE. */
int sv_cm_check_port(const struct sv_cm_id *id, uint16_t port, bool reuse);
/* The listener a REQ is for: the best match on its port; *reason says why
 * none. */
struct sv_cm_id *sv_cm_find_listener(const struct sv_cm_msg *m,
				     uint8_t *reason);

/* listen.c */
void sv_cm_recv_req(const struct sv_cm_msg *m);  /* a REQ or SIDR_REQ */
uint64_t sv_cm_parked_next(void);   /* the held REQs' next deadline, 0 none */
void sv_cm_parked_expire(uint64_t now_ms);

/* conn.c */
extern const char *const sv_cm_msg_names[];
/* Send m to the other end: a MAD on QP1, or queued for sv_cm_flush. */
void sv_cm_send(const struct sv_cm_msg *m);
void sv_cm_msg_init(struct sv_cm_msg *m, enum sv_cm_msg_type type,
		    const struct sv_cm_id *from);
void sv_cm_send_simple(const struct sv_cm_id *from, enum sv_cm_msg_type type);
/* An event's private data (zeros up to room), and its connection fields. */
void sv_cm_ev_pdata(uint8_t *dst, uint8_t *dst_len, const struct sv_cm_msg *m,
		    unsigned int room);
void sv_cm_ev_conn(struct sv_cm_event *e, const struct sv_cm_id *id,
		   const struct sv_cm_msg *m, unsigned int room);
/* An id being destroyed: what its connection says to the peer, then
 * (its file and port gone) whether it lives on as a ghost. */
void sv_cm_conn_leave(struct sv_cm_id *id);
bool sv_cm_conn_linger(struct sv_cm_id *id);

#endif
