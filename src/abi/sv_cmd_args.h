/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's command payloads (client to daemon) (src/abi/sv_cmd.h: the framing, the
 * op codes, and the unions that hold these). Included by sv_cmd.h only.
 */
#ifndef SV_ABI_CMD_ARGS_H
#define SV_ABI_CMD_ARGS_H

#ifndef SV_ABI_CMD_H
#error "include abi/sv_cmd.h"
#endif

/* ---- command payloads (client to daemon) ---- */

struct sv_cmd_hello {
	uint32_t abi;          /* SV_PROTO_VERSION */
	uint32_t flags;        /* SV_HELLO_* */
};
#define SV_HELLO_PROBE 1u      /* device list or stat: no objects expected */

struct sv_cmd_query_port {
	uint32_t port_num;
	uint32_t rsvd;
};

struct sv_cmd_query_gid {
	uint32_t port_num;
	uint32_t index;
};

/* OPEN_CONTEXT carries the client's end of its async event socket. */
struct sv_cmd_open_context {
	uint32_t rsvd[2];
};

struct sv_cmd_handle {
	uint64_t handle;
};

struct sv_cmd_reg_mr {
	uint64_t pd;
	uint64_t addr;
	uint64_t length;
	uint64_t iova;
	uint32_t access;       /* enum ibv_access_flags */
	uint32_t flags;        /* SV_REG_MR_* */
	uint64_t dm;           /* SV_REG_MR_DM: the DM's handle */
};
/* ibv_reg_dm_mr: [addr, addr + length) lies in the client's mapping of DM
 * dm (checked); zero-based; length 0 allowed, as mlx5 allows it */
#define SV_REG_MR_DM 1u

struct sv_cmd_rereg_mr {
	uint64_t mr;
	uint64_t pd;           /* with IBV_REREG_MR_CHANGE_PD */
	uint64_t addr;         /* with IBV_REREG_MR_CHANGE_TRANSLATION */
	uint64_t length;
	uint64_t iova;
	uint32_t flags;        /* enum ibv_rereg_mr_flags */
	uint32_t access;       /* with IBV_REREG_MR_CHANGE_ACCESS */
};

/*
 * Memory-management extensions (docs/MEMORY-EXTENSIONS.md).
 *
 * ALLOC_MR: a fast-register MR of pd for lists of up to max_entries pages
 * or blocks, invalid until a FAST_REG_MR work request makes it valid ->
 * struct sv_rsp_mr (lkey == rkey). DEREG_MR frees it.
 *
 * ALLOC_PAGE_LIST: a list of max_entries entries in shared memory: the
 * memfd (max_entries * 16 bytes, rounded up to a page) comes with struct
 * sv_rsp_page_list. Entries are uint64_t page addresses (page lists) or
 * struct sv_mem_block (block lists), as the work request or command that
 * uses the list says. The device reads the list when it executes the work
 * request (or command) and keeps a copy; the list may be reused once that
 * completes. FREE_PAGE_LIST (struct sv_cmd_handle) frees it.
 *
 * REG_MR_LIST: register a valid MR directly over the first n entries of a
 * page list (fbo, length, iova, access, page_shift and SV_REG_BLOCKS as in
 * struct sv_wqe_reg); every block is checked against the client's memory
 * map as REG_MR checks its range -> struct sv_rsp_mr.
 *
 * ALLOC_MW: a memory window of pd, type SV_MW_TYPE_* -> struct sv_rsp_mr
 * (rkey; lkey 0). Type 1 windows are valid (unbound) at once; type 2 ones
 * are free until bound. DEALLOC_MW (struct sv_cmd_handle) frees it, bound
 * or not. Binding goes through the send queue (IBV_WR_BIND_MW).
 */
struct sv_mem_block {
	uint64_t addr;
	uint64_t length;
};

#define SV_MAX_PAGE_LIST (1u << 16)    /* entries of a list / fast-reg MR */

struct sv_cmd_alloc_mr {
	uint64_t pd;
	uint32_t max_entries;  /* 1 .. SV_MAX_PAGE_LIST */
	uint32_t rsvd;
};

struct sv_cmd_alloc_page_list {
	uint32_t max_entries;  /* 1 .. SV_MAX_PAGE_LIST */
	uint32_t rsvd;
};

/*
 * ALLOC_DM: device memory of length bytes (1 .. max_dm_size; the device
 * holds at most max_dm_size in all): a memfd of length rounded up to a
 * page, zero-filled and sealed against shrinking and growing, comes with
 * struct sv_rsp_dm. The client maps it and keeps the descriptor (the
 * device finds an MR over the mapping by it, docs/DESIGN.md "Device
 * memory"). log_align is the verbs' log_align_req: every allocation starts
 * at offset 0 of its own file, so any alignment is met; only values a
 * 64-bit offset can have (< 64) are taken. FREE_DM (struct sv_cmd_handle)
 * gives it back.
 */
struct sv_cmd_alloc_dm {
	uint64_t length;
	uint32_t log_align;
	uint32_t rsvd;
};

/*
 * Importing (ibv_import_device, docs/DESIGN.md "Importing objects").
 * CONTEXT_TOKEN: no payload; the response carries the context's token, a
 * memfd of no size that the device made for it and knows by its inode: the
 * library's cmd_fd. IMPORT_CONTEXT (no payload) carries such a token: the
 * requesting connection, with no objects yet, then sees the objects of the
 * context the token is (beside its own) until that context goes.
 * IMPORT_OBJ names an object of the imported context by the 32 bits the
 * verbs hold (ibv_pd.handle, ibv_mr.handle, ibv_dm.handle): type is
 * SV_OBJ_PD, SV_OBJ_MR (then pd: the PD it must lie in) or SV_OBJ_DM (the
 * DM's memfd comes with the response). struct sv_rsp_import.
 */
struct sv_cmd_import_obj {
	uint32_t type;
	uint32_t handle;
	uint64_t pd;
};

/*
 * INJECT (softverbs inject; docs/DESIGN.md "Fault injection"), allowed on
 * a probe connection: one fault, applied at once or armed for the next
 * count occasions. The response says what every kind has done since the
 * daemon started (struct sv_rsp_inject).
 *   SV_INJ_CMD     the next count commands op (of process pid; 0: any)
 *                  fail with -err
 *   SV_INJ_RNR     the next count messages to QP qpn that need a receive
 *                  WQE get an RNR NAK, as if none were posted
 *   SV_INJ_ACCESS  the next count RDMA or atomic requests to QP qpn get a
 *                  remote access error
 *                  (RNR, ACCESS and LOSE with qpn 0: the next count to any
 *                  QP of process pid, or of the device with pid 0)
 *   SV_INJ_FATAL   QP qpn fails: ERR and IBV_EVENT_QP_FATAL (qpn 0: every
 *                  QP of process pid)
 *   SV_INJ_PORT    port 1 goes down (up 0) or up (up 1):
 *                  IBV_EVENT_PORT_ERR or IBV_EVENT_PORT_ACTIVE to every
 *                  context
 *   SV_INJ_WIRE    the RoCEv2 injector takes spec ("seed=N,drop=P,...")
 *   SV_INJ_CLEAR   every armed fault is disarmed, the wire's too
 *   SV_INJ_QUERY   nothing: the counts only
 */
enum sv_inj_kind {
	SV_INJ_CMD = 1,
	SV_INJ_RNR,
	SV_INJ_ACCESS,
	SV_INJ_FATAL,
	SV_INJ_PORT,
	SV_INJ_WIRE,
	SV_INJ_CLEAR,
	SV_INJ_QUERY,
	SV_INJ_LOSE,               /* same-host: the next count messages to
				    * qpn get no answer (the requester's
				    * timeout, its retries) */
	SV_INJ_KIND_MAX
};

struct sv_cmd_inject {
	uint32_t kind;             /* enum sv_inj_kind */
	uint32_t count;
	uint32_t qpn;
	uint32_t op;               /* SV_INJ_CMD: enum sv_cmd_op */
	int32_t err;               /* SV_INJ_CMD: a positive errno */
	uint32_t pid;
	uint32_t up;
	uint32_t rsvd;
	char spec[160];            /* SV_INJ_WIRE, NUL-terminated */
};

/*
 * CAPTURE (softverbs capture; docs/DESIGN.md "Capture"), allowed on a
 * probe connection, with a descriptor: the write end of a SOCK_SEQPACKET
 * socket pair. From then on every RoCEv2 packet the device sends or
 * receives, and every packet that a message between two QPs of this host
 * would have been on a wire (local), goes to it as a record: a struct
 * sv_cap_rec and the first caplen bytes of the UDP payload (at most
 * snaplen), padded to 8 bytes; a message holds one or more records (a
 * message's packets, a receive batch). Until the reader closes its end or
 * another CAPTURE takes its place. While a capture is on, no QP takes the
 * direct path (the device renders only what it carries). A message the
 * reader has no room for is counted (its packets), never waited for.
 * Without a descriptor: capture stops. struct sv_rsp_capture: what the
 * last capture sent and lost, in packets.
 */
struct sv_cmd_capture {
	uint32_t snaplen;          /* 0: whole packets */
	uint32_t rsvd;
};

struct sv_cap_rec {
	uint64_t time_ns;          /* CLOCK_REALTIME */
	uint32_t len;              /* the UDP payload's length */
	uint32_t caplen;           /* bytes of it that follow */
	uint8_t src[16], dst[16];  /* GID form (IPv4 as ::ffff:a.b.c.d) */
	uint16_t sport, dport;
	uint16_t ip_id;            /* IPv4 identification, as sent */
	uint8_t df;
	uint8_t dir;               /* SV_CAP_OUT or SV_CAP_IN */
	uint8_t local;             /* 1: between two QPs of this host, never
				    * on a wire: the packet a NIC would have
				    * sent (rendered by the device) */
	uint8_t rsvd[3];
	/* local: the QP that sent it and its process, and the QP it went
	 * to and its process (pid 0: none). RoCEv2 packets: 0 (the tool
	 * finds them) */
	uint32_t qpn;
	int32_t pid;
	uint32_t peer_qpn;
	int32_t peer_pid;
	uint32_t rsvd2;
};
enum { SV_CAP_OUT = 1, SV_CAP_IN = 2 };
_Static_assert(sizeof(struct sv_cap_rec) == 80, "capture record");

struct sv_rsp_capture {
	uint64_t sent, lost;       /* of the capture that ended */
};

/*
 * ADVISE_MR: is [addr, addr + length) of lkey's MR (the requesting
 * client's, on pd, registered with IBV_ACCESS_ON_DEMAND) one to prefetch?
 * -> struct sv_rsp_advise: where the range starts in the client's address
 * space (the library prefetches it there: the device pins nothing, so a
 * prefetch is the process faulting its own pages in). -ENOENT when lkey
 * names no such MR, -EFAULT when the range is not inside it.
 */
struct sv_cmd_advise_mr {
	uint64_t pd;
	uint64_t addr;
	uint64_t length;
	uint32_t lkey;
	uint32_t rsvd;
};

struct sv_cmd_reg_mr_list {
	uint64_t pd;
	uint64_t list;         /* a PAGE_LIST handle */
	uint64_t length;
	uint64_t iova;
	uint32_t nentries;
	uint32_t fbo;
	uint32_t access;       /* enum ibv_access_flags */
	uint8_t page_shift;
	uint8_t rsvd;
	uint16_t flags;        /* SV_REG_BLOCKS */
};

enum sv_mw_type {
	SV_MW_TYPE_1 = 1,      /* bound by ibv_bind_mw; checks the PD */
	SV_MW_TYPE_2A = 2,     /* bound by a work request; checks the QP */
	SV_MW_TYPE_2B = 3,     /* bound by a work request; checks QP and PD */
};

struct sv_cmd_alloc_mw {
	uint64_t pd;
	uint32_t type;         /* enum sv_mw_type */
	uint32_t rsvd;
};

/* CREATE_CHANNEL carries the client's end of the channel's event socket. */

struct sv_cmd_create_cq {
	uint64_t cookie;       /* returned in events: the library's ibv_cq * */
	uint64_t channel;      /* 0 or a CHANNEL handle */
	uint32_t cqe;          /* minimum entries asked for */
	uint32_t comp_vector;
	uint32_t flags;        /* enum ibv_create_cq_attr_flags */
	uint32_t rsvd;
};

struct sv_cmd_resize_cq {
	uint64_t cq;
	uint32_t cqe;
	uint32_t rsvd;
};

/*
 * NOTIFY_CQ: the library armed cq (arm_sn) and found completions in it
 * that it has not polled: the device sends the event now if they fire the
 * arm, as a NIC that compares the arm's consumer index with its producer
 * index does (mlx4, mlx5).
 */
struct sv_cmd_notify_cq {
	uint64_t cq;
	uint32_t arm_sn;
	uint32_t flags;            /* SV_NOTIFY_* */
};

/* sv_cmd_notify_cq.flags */
/* The library's private ring (the direct path) holds completions that no
 * event announced: they fire a NEXT arm as the ring's would. */
#define SV_NOTIFY_DIRECT 1u
/* ... and one of them is the completion of a solicited message (a SEND
 * that ran directly): it fires a SOLICITED arm too. DIRECT_NOTIFY takes
 * it as well. */
#define SV_NOTIFY_SOLICITED 2u

/* MR_FILE: the sealed memfd behind the MR whose key this is (one the
 * direct path's table flags SV_DKEY_FILE) comes with the response, for a
 * process of this host to map (src/abi/sv_direct.h); ENOENT for any other
 * key. */
struct sv_cmd_mr_file {
	uint32_t key;
	uint32_t rsvd;
};

/* DIRECT_EST: the caller's QP (RC or UC, in RTS) is about to write
 * directly into its peer on this host, which is in RTR and has taken no
 * message yet: the peer is established now (IBV_EVENT_COMM_EST), as a
 * first message would make it, and its entry in the direct path's table
 * says so before the response. */
struct sv_cmd_direct_est {
	uint64_t qp;
};

/*
 * DIRECT_RECV: the caller's QP (RC or UC, not on the wire) will SEND
 * directly to its peer, a QP of this host of the caller's uid connected
 * back to it with a receive queue of its own or a basic SRQ (sv_rq_xpub,
 * src/abi/sv_qp.h): part SV_DRECV_RQ gives a read-only descriptor of the
 * memfd that holds the peer's receive ring (for a peer on an SRQ: its send
 * ring, whose header holds its receive side), part SV_DRECV_CQ one of its
 * receive CQ's ring, part SV_DRECV_SRQ one of its SRQ's ring, whose WQEs
 * are then claimed through the SRQ's word in the uid's guard table
 * (struct sv_direct_srq) (struct sv_rsp_direct_recv says where), part
 * SV_DRECV_XSIDE a read-write one of the peer's completion side (struct
 * sv_xside, src/abi/sv_qp.h), only where any process of the uid could
 * write into the peer anyway (EPERM elsewhere). From then on the device
 * lets the peer's receive queue be taken by that sender too.
 */
#define SV_DRECV_RQ    0u
#define SV_DRECV_CQ    1u
#define SV_DRECV_SRQ   2u
#define SV_DRECV_XSIDE 3u

struct sv_cmd_direct_recv {
	uint64_t qp;
	uint32_t part;             /* SV_DRECV_* */
	uint32_t rsvd;
};

/*
 * DIRECT_NOTIFY: the caller's QP sent directly into its peer's receive
 * queue (completions up to xprod in its completion ring), and found the
 * peer's receive CQ armed with arm_sn: the device sends that arm's event
 * (a NEXT arm; a SOLICITED arm only with SV_NOTIFY_SOLICITED) unless it
 * fired or a later arm came, and says in the peer's receive ring which
 * completions an event announced (xannounced).
 */
struct sv_cmd_direct_notify {
	uint64_t qp;
	uint32_t arm_sn;
	uint32_t xprod;
	uint32_t flags;            /* SV_NOTIFY_SOLICITED, _SRQ_LIMIT */
	uint32_t rsvd;
};

/* DIRECT_NOTIFY: a direct SEND took the peer's SRQ below its armed
 * limit: the device raises IBV_EVENT_SRQ_LIMIT_REACHED if it finds the
 * same (and then arm_sn and xprod are not looked at) */
#define SV_NOTIFY_SRQ_LIMIT 4u

/* OPEN_DIRECT: which part (SV_DIRECT_PART_*, src/abi/sv_direct.h): the
 * device's tables, or the guard table of the caller's uid. */
struct sv_cmd_open_direct {
	uint32_t part;
	uint32_t rsvd;
};

/* CREATE_QP: the QP's ring memfd comes with the response. */
struct sv_cmd_create_qp {
	uint64_t cookie;       /* returned in events: the library's ibv_qp * */
	uint64_t pd;
	uint64_t send_cq;
	uint64_t recv_cq;
	uint64_t srq;          /* 0 or an SRQ handle */
	uint64_t send_ops_flags; /* ibv_create_qp_ex: enum ibv_qp_create_send_ops_flags */
	uint32_t qp_type;      /* enum ibv_qp_type */
	uint32_t sq_sig_all;
	uint32_t create_flags; /* enum ibv_qp_create_flags */
	uint32_t rsvd;
	struct sv_wire_qp_cap cap;
	uint32_t rsvd2;
	uint64_t domain;       /* 0 (the default pages) or a DOMAIN handle */
	uint64_t xrcd;         /* XRC_RECV: its XRCD handle (else 0) */
};

/*
 * XRC (docs/DESIGN.md "XRC").
 *
 * OPEN_XRCD: a handle on an XRC domain. Without SV_XRCD_SHARED a private
 * domain of its own. With it, the domain of a file, which comes with the
 * command (SCM_RIGHTS; not O_PATH: having it open is the right to share
 * its domain, as for the kernel): the daemon keys the domain by the file's
 * st_dev and st_ino, shared by every client that sends the same file;
 * SV_XRCD_CREATE makes it when none exists yet, else -ENOENT -> struct
 * sv_rsp_obj (SV_XRCD_EXCL: -EEXIST if it exists). CLOSE_XRCD (struct sv_cmd_handle): -EBUSY while SRQs or
 * XRC_RECV QPs made through this handle live.
 *
 * OPEN_QP: a handle on an existing XRC_RECV QP (by number) of the same
 * XRC domain, made by any client -> struct sv_rsp_qp (handle, qpn; no ring,
 * no memfd). MODIFY_QP, QUERY_QP and DESTROY_QP take it. The QP lives while
 * any handle on it does, its creator's or an opened one (DESTROY_QP or the
 * client's end drops one handle); its events go to each handle's client.
 */
#define SV_XRCD_SHARED 1u
#define SV_XRCD_CREATE 2u
#define SV_XRCD_EXCL   4u      /* -EEXIST when the file has a domain */

struct sv_cmd_open_xrcd {
	uint32_t flags;        /* SV_XRCD_* */
	uint32_t rsvd;
};

struct sv_cmd_open_qp {
	uint64_t cookie;       /* the library's ibv_qp * */
	uint64_t xrcd;         /* an XRCD handle of the caller */
	uint32_t qpn;
	uint32_t qp_type;      /* IBV_QPT_XRC_RECV */
};

/*
 * CREATE_DOMAIN: a resource domain, the daemon's side of all three APIs
 * (seed 000's index, seed 001's ibv_exp_res_domain, upstream's thread
 * domain). It gets a doorbell page and an engine of its own while the
 * device has one free, else it shares the least used domain page (unless
 * SV_DOMAIN_DEDICATED: then ENOMEM). A page claimed with SV_DOMAIN_DEDICATED
 * is never shared; when every page is, sharing falls back to the default
 * page 0. Thread models are the library's alone.
 */
enum sv_msg_model {
	SV_MSG_DEFAULT = 0,
	SV_MSG_LOW_LATENCY = 1,    /* the engine polls longer before it sleeps */
	SV_MSG_HIGH_BW = 2,        /* the engine drains rings in batches */
	SV_MSG_MAX
};
#define SV_DOMAIN_DEDICATED 1u /* a page of its own or nothing */

struct sv_cmd_create_domain {
	uint32_t msg_model;    /* enum sv_msg_model */
	uint32_t flags;        /* SV_DOMAIN_* */
};

struct sv_cmd_modify_qp {
	uint64_t qp;
	uint32_t attr_mask;    /* enum ibv_qp_attr_mask */
	uint32_t rsvd;
	struct sv_wire_qp_attr attr;
};

struct sv_cmd_query_qp {
	uint64_t qp;
	uint32_t attr_mask;
	uint32_t rsvd;
};

/* CREATE_SRQ: the SRQ's ring memfd comes with the response. */
struct sv_cmd_create_srq {
	uint64_t cookie;       /* the library's ibv_srq * */
	uint64_t pd;
	uint64_t cq;           /* XRC SRQs */
	uint64_t xrcd;         /* XRC SRQs */
	uint32_t srq_type;     /* enum ibv_srq_type */
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
	/* IBV_SRQT_TM (then cq is the SRQ's CQ): ibv_tm_cap; the memfd
	 * then holds its ops ring too (src/abi/sv_tm.h) */
	uint32_t max_num_tags;
	uint32_t max_ops;
};

struct sv_cmd_modify_srq {
	uint64_t srq;
	uint32_t attr_mask;    /* enum ibv_srq_attr_mask */
	uint32_t max_wr;
	uint32_t srq_limit;
	uint32_t rsvd;
};

struct sv_cmd_create_ah {
	uint64_t pd;
	struct sv_wire_ah attr;
};

/*
 * ATTACH_MCAST / DETACH_MCAST: a UD QP joins / leaves the multicast group
 * gid (RoCEv2: ::ffff:224.0.0.0/4 or ff00::/8). lid is ignored (Ethernet).
 * A QP attached twice stays attached once; detaching a group the QP is not
 * attached to is -EINVAL.
 */
struct sv_cmd_mcast {
	uint64_t qp;
	uint8_t gid[16];
	uint16_t lid;
	uint16_t rsvd;
	uint32_t rsvd2;
};

struct sv_cmd_stat {
	uint32_t first;        /* index of the first client to list */
	uint32_t rsvd;
};

/*
 * REPLY_CHANNEL, with a descriptor: one end of a SOCK_SEQPACKET socket pair,
 * by which a process that shares the connection since a fork (not the one
 * that opened it) gets its responses (docs/DESIGN.md "A context shared by
 * fork"): the other processes' responses never pass through it, so none of
 * them waits on it. Answered on that descriptor itself, whatever the
 * outcome (without a seqpacket socket: refused, EINVAL, on the connection);
 * rsp.u.obj.handle: the channel's number for sv_cmd_hdr.chan. Up to
 * SV_MAX_REPLY_CHANS a client (then ENOMEM); a channel whose other end is
 * closed everywhere is reused.
 */
#define SV_MAX_REPLY_CHANS 64

struct sv_cmd_hdr {
	uint32_t magic;        /* SV_PROTO_MAGIC */
	uint16_t op;           /* enum sv_cmd_op */
	uint16_t version;      /* SV_PROTO_VERSION */
	uint32_t seq;          /* echoed in the response */
	/* where the response goes: 0, the socket the command came on; else
	 * the client's reply channel of that number (REPLY_CHANNEL). A
	 * command that fails sv_cmd_check is answered on its socket, and so
	 * is one naming a channel the client does not have (EINVAL, not
	 * run). */
	uint32_t chan;
};

#endif /* SV_ABI_CMD_ARGS_H */
