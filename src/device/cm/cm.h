/* SPDX-License-Identifier: MIT */
/*
 * The connection manager (docs/DESIGN.md, "rdma_cm"): the kernel's rdma_cm
 * ids and their states (id.c: the table; bind.c: ports; resolve.c:
 * addresses and routes; listen.c: listeners and the REQs that come to them;
 * conn.c: the connection state machine; cm_int.h: what they share), the
 * ucma command set that Debian's librdmacm writes to
 * /dev/infiniband/rdma_cm (ucma.c), and the addresses of this host
 * (addr.c). Everything here runs on the control thread.
 *
 * Two ids connect by CM messages (REQ, REP, RTU, REJ, DREQ, DREP, SIDR_REQ,
 * SIDR_REP, MRA) with the IBTA's meaning. When both ends live on this
 * daemon, sv_cm_send() (conn.c) hands a message to the other end
 * directly; otherwise wire.c carries it as a CM MAD on QP1, under the same
 * states.
 */
#ifndef SV_DEVICE_CM_H
#define SV_DEVICE_CM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <rdma/rdma_user_cm.h>

#include "device/cm/mad.h"

#define SV_CM_MAX_IDS        4096  /* device-wide; librdmacm wants < 65536 */
#define SV_CM_MAX_EVENTS     8192  /* queued on one file */
#define SV_CM_MAX_BACKLOG    1024  /* the kernel's default max_backlog */
#define SV_CM_TIMEWAIT_MS    500   /* DREP to TIMEWAIT_EXIT */
#define SV_CM_DREQ_TIMEOUT_MS 2000 /* DREQ unanswered: DISCONNECTED anyway */
#define SV_CM_HOP_LIMIT      64    /* routes and AHs: IPv4's TTL, IPv6's hops */
#define SV_CM_PACKET_LIFE_TIME 16  /* the kernel's CMA_IBOE_PACKET_LIFETIME */
#define SV_CM_ACK_TIMEOUT    18    /* 4.096 us << 18: about 1 s */
#define SV_CM_REQ_GRACE_MS   250   /* a REQ for no listener waits that long */
#define SV_CM_MAX_PARKED     64    /* REQs waiting so; more are refused */

/* Private data room of each message (IBTA), and what the CMA header of an
 * IP port space (36 bytes) leaves the user. */
#define SV_CM_REQ_PDATA      92
#define SV_CM_REP_PDATA      196
#define SV_CM_REJ_PDATA      148
#define SV_CM_SIDR_REQ_PDATA 216
#define SV_CM_SIDR_REP_PDATA 136
#define SV_CM_HDR            36

/* REJ reasons (SV_CM_REJ_*) and SIDR_REP statuses (SV_CM_SIDR_*) are
 * mad.h's. */

/* The event numbers of the ucma ABI (rdma-core's enum rdma_cm_event_type,
 * whose header clashes with the kernel's rdma_user_cm.h). */
enum sv_cm_event_type {
	SV_EV_ADDR_RESOLVED, SV_EV_ADDR_ERROR, SV_EV_ROUTE_RESOLVED,
	SV_EV_ROUTE_ERROR, SV_EV_CONNECT_REQUEST, SV_EV_CONNECT_RESPONSE,
	SV_EV_CONNECT_ERROR, SV_EV_UNREACHABLE, SV_EV_REJECTED, SV_EV_ESTABLISHED,
	SV_EV_DISCONNECTED, SV_EV_DEVICE_REMOVAL, SV_EV_MULTICAST_JOIN,
	SV_EV_MULTICAST_ERROR, SV_EV_ADDR_CHANGE, SV_EV_TIMEWAIT_EXIT,
};

#define SV_CM_UDP_QKEY       0x01234567u

/* rdma_cm's states of an id (the kernel's enum rdma_cm_state). */
#define SV_CM_STATES(X) X(IDLE) X(ADDR_QUERY) X(ADDR_RESOLVED) \
	X(ROUTE_QUERY) X(ROUTE_RESOLVED) X(CONNECT) X(DISCONNECT) \
	X(ADDR_BOUND) X(LISTEN)
#define SV_CM_ENUM(s) CM_##s,
enum sv_cm_state { SV_CM_STATES(SV_CM_ENUM) };

/* The communication state of a connection (IBTA 12.9.6). */
#define SV_CM_CONNS(X) X(NONE) X(REQ_SENT) X(REQ_RCVD) X(REP_SENT) \
	X(REP_RCVD) X(ESTABLISHED) X(DREQ_SENT) X(DREQ_RCVD) X(TIMEWAIT) \
	X(SIDR_REQ_SENT) X(SIDR_REQ_RCVD)
#define SV_CONN_ENUM(s) CONN_##s,
enum sv_cm_conn { SV_CM_CONNS(SV_CONN_ENUM) };

#define SV_CM_MSGS(X) X(REQ) X(REP) X(RTU) X(REJ) X(DREQ) X(DREP) \
	X(SIDR_REQ) X(SIDR_REP) X(MRA)
#define SV_MSG_ENUM(s) CM_MSG_##s,
enum sv_cm_msg_type { SV_CM_MSGS(SV_MSG_ENUM) };

/* One CM message, as the wire codec will carry it. Comm ids name the
 * ends; the service (port space, port) and the CMA header's addresses
 * travel in REQ and SIDR_REQ. */
struct sv_cm_msg {
	enum sv_cm_msg_type type;
	uint32_t local_comm, remote_comm;
	uint16_t ps;
	struct sockaddr_storage src, dst;  /* REQ, SIDR_REQ: sender's, target's */
	uint32_t qpn, psn, qkey;
	uint8_t resp_res, init_depth, retry, rnr_retry, flow_control, srq;
	uint8_t mtu, reason;               /* REJ reason, SIDR_REP status */
	uint8_t about;                     /* REJ, MRA: the message it answers
					    * (0 REQ, 1 REP, 2 other) */
	uint8_t service_timeout;           /* MRA */
	uint8_t pdata_len;
	uint8_t pdata[SV_CM_REP_PDATA + 24];
	/* Across hosts (wire.c): a CM MAD on QP1 between the GIDs sgid (the
	 * sender's) and dgid; tid is the MAD's transaction ID. Not wire: the
	 * other end is on this daemon. */
	bool wire;
	uint8_t sgid[16], dgid[16];
	uint64_t tid;
};

struct sv_cm_file;

struct sv_cm_id {
	uint32_t handle;           /* what librdmacm calls the id */
	uint32_t comm;             /* handle | generation << 16: the CM's id */
	uint32_t nl_id;            /* never 0, unique among live ids (RDMA
				    * netlink's CM_IDN) */
	struct sv_cm_file *file;
	struct sv_cm_id *file_next;
	uint64_t uid;
	uint16_t ps;
	uint8_t qp_type;           /* IBV_QPT_RC, _UD, _XRC_SEND or _XRC_RECV */
	enum sv_cm_state state;
	enum sv_cm_conn conn;
	bool hidden;               /* a new id whose CONNECT_REQUEST is queued */
	bool bound;                /* holds a port (in the bind list) */
	bool has_dev;              /* the address is on sv0 */
	struct sockaddr_storage src, dst;
	struct sv_cm_id *port_next;
	bool reuseaddr, afonly, afonly_set, tos_set, timeout_set;
	uint8_t tos, ack_timeout;
	uint32_t backlog, pending; /* LISTEN: CONNECT_REQUESTs not fetched */
	uint32_t events_reported;
	/* the connection, from this end */
	uint32_t remote_comm;
	uint32_t qpn, psn, rqpn, rpsn, qkey;
	uint8_t resp_res, init_depth, retry, rnr_retry, flow_control, srq, mtu;
	uint64_t deadline_ms;      /* TIMEWAIT_EXIT or the DREQ's timeout; 0 */
	/* a peer on another host: the GIDs of the two ends (lgid is
	 * sv0's gid[sgid_index]), the transaction ID of our MADs, and the
	 * message sent again until it is answered (REQ, REP, DREQ,
	 * SIDR_REQ; NULL: none) */
	bool wire;
	uint8_t lgid[16], rgid[16];
	uint8_t sgid_index;
	uint64_t tid;
	struct sv_cm_msg *rtx;
	uint8_t rtx_left;
};

struct sv_cm_event {
	struct sv_cm_event *next;
	struct sv_cm_id *id;       /* counted in its events_reported */
	struct sv_cm_id *child;    /* CONNECT_REQUEST: the new id */
	struct rdma_ucm_event_resp resp;
};

struct sv_cm_file {
	struct sv_cm_file *next, *prev;
	int sock, efd;
	uint64_t token;
	pid_t pid;
	uid_t uid;
	bool dead;
	struct sv_cm_id *ids;
	struct sv_cm_event *evq, **evq_tail, *last;  /* last: just fetched */
	uint32_t nev;
	void *tag;                 /* the daemon loop's epoll tag */
};

struct sv_cm_stats {
	uint32_t live;             /* ids now */
	uint64_t ids, files, connects, accepts, rejects, disconnects, established;
	/* CM MADs on the wire: sent, received and taken, sent again
	 * (retries), dropped (malformed, forged, for no id, inbox full),
	 * requests that ran out of retries */
	uint64_t mad_sent, mad_rcvd, mad_retries, mad_dropped, mad_timeouts;
};

/* The CM's timing on the wire (softverbsd --cm-timeout, --cm-retries):
 * the response timeout we ask of peers (a 5-bit exponent, 4.096 us << t;
 * the kernel's 20, about 4.3 s) and the retries of an unanswered REQ,
 * REP, DREQ or SIDR_REQ (the kernel's 15). */
struct sv_cm_cfg {
	uint8_t response_timeout;
	uint8_t max_retries;
};
extern struct sv_cm_cfg sv_cm_cfg;
extern struct sv_cm_stats sv_cm_stats;

extern const char *const sv_cm_state_names[];
extern const char *const sv_cm_conn_names[];

/* id.c: ids */
int sv_cm_id_new(struct sv_cm_file *f, uint64_t uid, uint16_t ps, uint8_t qp_type,
		 struct sv_cm_id **out);
/* The file's id named by handle: -ENOENT, -EINVAL (another file's). */
int sv_cm_id_get(struct sv_cm_file *f, uint32_t handle, struct sv_cm_id **out);
/* Destroy, as DESTROY_ID or a closing file: the peer hears of it. */
void sv_cm_id_destroy(struct sv_cm_id *id);
void sv_cm_file_destroy_ids(struct sv_cm_file *f);
int sv_cm_migrate(struct sv_cm_id *id, struct sv_cm_file *to);

/* the verbs of rdma_cm, each with the kernel's errno: bind.c (bind),
 * resolve.c (resolve_*), listen.c (listen), conn.c (connect ... notify),
 * attr.c (set_option, init_qp_attr, route) */
int sv_cm_bind(struct sv_cm_id *id, const struct sockaddr *sa);
int sv_cm_resolve_addr(struct sv_cm_id *id, const struct sockaddr *src,
		       const struct sockaddr *dst);
int sv_cm_resolve_route(struct sv_cm_id *id);
int sv_cm_listen(struct sv_cm_id *id, uint32_t backlog);
int sv_cm_connect(struct sv_cm_id *id, const struct rdma_ucm_conn_param *p);
int sv_cm_accept(struct sv_cm_id *id, const struct rdma_ucm_conn_param *p,
		 uint64_t uid);
int sv_cm_reject(struct sv_cm_id *id, uint8_t reason, const uint8_t *pdata,
		 uint8_t len);
int sv_cm_disconnect(struct sv_cm_id *id);
int sv_cm_notify(struct sv_cm_id *id, uint32_t event);
int sv_cm_set_option(struct sv_cm_id *id, uint32_t level, uint32_t name,
		     const void *val, uint32_t len);
int sv_cm_init_qp_attr(struct sv_cm_id *id, uint32_t qp_state,
		       struct ib_uverbs_qp_attr *a);
void sv_cm_route(const struct sv_cm_id *id, struct rdma_ucm_query_route_resp *r);
/* conn.c: deliver the messages sv_cm_send queued (after every command
 * and timer). */
void sv_cm_flush(void);
/* A message from the other end (this daemon's queue, or the wire). */
void sv_cm_recv(const struct sv_cm_msg *m);

/* wire.c: CM MADs on QP1 between daemons and with kernel CMs */
/* Send m (m->wire) as a MAD: 0 or -errno (the message is lost then, as
 * on a wire; retries cover it). */
int sv_cm_wire_send(const struct sv_cm_msg *m);
/* QP1's inbox is readable: decode and serve what came. */
void sv_cm_wire_input(void);
/* The index of gid in sv0's GID table, or -1. */
int sv_cm_gid_index(const uint8_t gid[16]);
/* conn.c: timers: the next deadline (ms, CLOCK_MONOTONIC; 0 none), and
 * run those due. */
uint64_t sv_cm_next_deadline(void);
void sv_cm_run_timers(uint64_t now_ms);
uint64_t sv_cm_now_ms(void);

/* ucma.c: the files (one per open of /dev/infiniband/rdma_cm) */
int sv_cm_start(const char *sock_path);   /* the listening socket, or -errno */
int sv_cm_listen_fd(void);
int sv_cm_timer_fd(void);
struct sv_cm_file *sv_cm_file_accept(void);  /* NULL: none or refused */
/* Serve the file's commands; false when it has gone (close it). */
bool sv_cm_file_input(struct sv_cm_file *f);
void sv_cm_file_close(struct sv_cm_file *f); /* its ids destroyed, fds closed */
void sv_cm_file_free(struct sv_cm_file *f);
void sv_cm_on_timer(void);
void sv_cm_on_wire(void);   /* sv_roce_gsi_fd() is readable */
void sv_cm_stop(void);
uint32_t sv_cm_nfiles(void);
/* The files' list head (RDMA netlink walks their ids). */
struct sv_cm_file *sv_cm_files(void);
struct sv_rsp_stat_wire;
void sv_cm_stat_fill(struct sv_rsp_stat_wire *w);  /* softverbs stat */

/* id.c: a new event of id (NULL: out of memory, logged; or the id is a
 * ghost, with no file to tell), and one queued on its file */
struct sv_cm_event *sv_cm_ev_new(struct sv_cm_id *id, uint32_t type, int32_t status);
void sv_cm_ev_post(struct sv_cm_id *id, uint32_t type, int32_t status);

/* ucma.c: events of a file */
void sv_cm_event_queue(struct sv_cm_file *f, struct sv_cm_event *e);
void sv_cm_events_drop(struct sv_cm_file *f, struct sv_cm_id *id);
void sv_cm_events_move(struct sv_cm_file *from, struct sv_cm_file *to,
		       struct sv_cm_id *id);

/* addr.c */
socklen_t sv_cm_addr_size(const struct sockaddr *sa);
bool sv_cm_addr_any(const struct sockaddr *sa);
bool sv_cm_addr_loopback(const struct sockaddr *sa);
uint16_t sv_cm_port(const struct sockaddr *sa);        /* host order */
void sv_cm_set_port(struct sockaddr *sa, uint16_t port);
/* Same address (not port; an IPv4-mapped IPv6 address equals its IPv4). */
bool sv_cm_addr_eq(const struct sockaddr *a, const struct sockaddr *b);
/* Is sa an address of this host? (127/8, ::1, an interface's) */
bool sv_cm_addr_local(const struct sockaddr *sa);
/* Is sa this daemon's (the same-host path)? One of sv0's GIDs, or any
 * address of this host when the daemon was not told what to serve; with
 * --ip/--netdev another local address is another daemon's (loopback
 * stays ours unless we serve a loopback address). */
bool sv_cm_addr_mine(const struct sockaddr *sa);
/* The GID of sv0 that stands for a local address. */
void sv_cm_gid(const struct sockaddr *sa, uint8_t gid[16]);
/* The GID form of an address (IPv4 as ::ffff:a.b.c.d), and back (port 0;
 * IPv4-mapped GIDs as AF_INET). */
void sv_cm_addr_to_gid(const struct sockaddr *sa, uint8_t gid[16]);
void sv_cm_gid_to_addr(const uint8_t gid[16], struct sockaddr_storage *ss);
/* The source address this host routes dst from (a connected UDP
 * socket's name; port 0): 0 or -errno (-ENETUNREACH, ...). */
int sv_cm_route_src(const struct sockaddr *dst, struct sockaddr_storage *src);
const char *sv_cm_addr_str(const struct sockaddr *sa, char *buf, size_t len);

/* ==== multicast (mcast.c): JOIN_IP_MCAST, JOIN_MCAST, LEAVE_MCAST ====
 * The groups ids joined, by a handle of their own (device-wide, the lowest
 * free, as the kernel's); their events carry that handle and the join's
 * uid, and count in the id's events_reported and the multicast's. */
#define SV_CM_MAX_MCAST      4096  /* joins device-wide */
#define SV_CM_ENOTSUPP       524   /* the kernel's ENOTSUPP, seen as is */

bool sv_cm_mc_addr(const struct sockaddr *sa);         /* a multicast address */
/* Resolve to a multicast destination (bound id, dst set): the source the
 * route gives, ADDR_RESOLVED or ADDR_ERROR queued; 0. */
int sv_cm_mc_resolve(struct sv_cm_id *id);
/* Join addr on the file's id handle (the command's own checks done): the
 * multicast's handle in *out and MULTICAST_JOIN queued, or -errno. */
int sv_cm_mc_join(struct sv_cm_file *f, uint32_t handle, uint64_t uid,
		  const struct sockaddr *addr, uint16_t join_flags, uint32_t *out);
/* Leave: -ENOENT (no such handle), -EINVAL (another file's); its unread
 * events dropped. */
int sv_cm_mc_leave(struct sv_cm_file *f, uint32_t handle, uint32_t *events_reported);
void sv_cm_mc_id_destroy(struct sv_cm_id *id);        /* leaves its groups */
/* An event was fetched (+1) or put back (-1): a multicast's counts it. */
void sv_cm_mc_reported(const struct sv_cm_event *e, int delta);
/* ucma.c: drop the unread events of a multicast */
void sv_cm_events_drop_mc(struct sv_cm_file *f, uint32_t handle);

#endif
