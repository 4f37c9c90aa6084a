/* SPDX-License-Identifier: MIT */
/*
 * The control protocol between libibverbs.so.1 (softverbs) and softverbsd.
 *
 * One definition, included by both sides. Every message on the control
 * socket (AF_UNIX, SOCK_SEQPACKET) is exactly one struct sv_cmd (client to
 * daemon) or one struct sv_rsp (daemon to client): fixed size, fixed-width
 * fields, no pointers that the other side follows. File descriptors (memfds,
 * event sockets) travel beside a message as SCM_RIGHTS, at most one each way.
 *
 * Everything in a command is untrusted input to the daemon: it checks the
 * size, magic and version (sv_cmd_check), then each handler checks its own
 * fields. A response's status is 0 or a negative errno.
 */
#ifndef SV_ABI_CMD_H
#define SV_ABI_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "abi/sv_qp.h"

#define SV_PROTO_MAGIC   0x31435653u /* "SVC1" little-endian */
#define SV_PROTO_VERSION 16u

/* Object types of the per-client tables, ordered by dependency: an object
 * may depend only on objects of lower types, so teardown goes high to low. */
enum sv_obj_type {
	SV_OBJ_NONE = 0,
	SV_OBJ_DOMAIN,    /* resource domain: a doorbell page and its engine */
	SV_OBJ_CHANNEL,   /* completion channel */
	SV_OBJ_PAGE_LIST, /* fast-register page list (shared memory) */
	SV_OBJ_DM,        /* device memory (shared memory); below MR: an MR
			   * over it goes first */
	SV_OBJ_PD,
	SV_OBJ_XRCD,
	SV_OBJ_CQ,
	SV_OBJ_MR,
	SV_OBJ_SRQ,
	SV_OBJ_QP,
	SV_OBJ_MW,
	SV_OBJ_AH,
	SV_OBJ_TYPE_MAX
};

#define SV_OBJ_NAMES_INIT                                                    \
	{ [SV_OBJ_NONE] = "none", [SV_OBJ_DOMAIN] = "domain",                \
	  [SV_OBJ_CHANNEL] = "channel", [SV_OBJ_PAGE_LIST] = "page_list",    \
	  [SV_OBJ_DM] = "dm",                                                \
	  [SV_OBJ_PD] = "pd", [SV_OBJ_XRCD] = "xrcd", [SV_OBJ_CQ] = "cq",     \
	  [SV_OBJ_MR] = "mr", [SV_OBJ_SRQ] = "srq", [SV_OBJ_QP] = "qp",       \
	  [SV_OBJ_MW] = "mw", [SV_OBJ_AH] = "ah" }

/* X-macro: every command, its number and its name. */
#define SV_CMD_LIST(X)                                                       \
	X(HELLO, 1)                                                          \
	X(QUERY_DEVICE, 2)                                                   \
	X(QUERY_PORT, 3)                                                     \
	X(QUERY_GID, 4)                                                      \
	X(OPEN_CONTEXT, 5)                                                   \
	X(ALLOC_PD, 6)                                                       \
	X(DEALLOC_PD, 7)                                                     \
	X(REG_MR, 8)                                                         \
	X(REREG_MR, 9)                                                       \
	X(DEREG_MR, 10)                                                      \
	X(CREATE_CHANNEL, 11)                                                \
	X(DESTROY_CHANNEL, 12)                                               \
	X(CREATE_CQ, 13)                                                     \
	X(RESIZE_CQ, 14)                                                     \
	X(DESTROY_CQ, 15)                                                    \
	X(STAT, 16)                                                          \
	X(CREATE_QP, 17)                                                     \
	X(MODIFY_QP, 18)                                                     \
	X(QUERY_QP, 19)                                                      \
	X(DESTROY_QP, 20)                                                    \
	X(CREATE_SRQ, 21)                                                    \
	X(MODIFY_SRQ, 22)                                                    \
	X(QUERY_SRQ, 23)                                                     \
	X(DESTROY_SRQ, 24)                                                   \
	X(CREATE_AH, 25)                                                     \
	X(DESTROY_AH, 26)                                                    \
	X(CREATE_DOMAIN, 27)                                                 \
	X(DESTROY_DOMAIN, 28)                                                \
	X(ALLOC_MR, 29)                                                      \
	X(ALLOC_PAGE_LIST, 30)                                               \
	X(FREE_PAGE_LIST, 31)                                                \
	X(REG_MR_LIST, 32)                                                   \
	X(ALLOC_MW, 33)                                                      \
	X(DEALLOC_MW, 34)                                                    \
	X(STAT_WIRE, 35)                                                     \
	X(ATTACH_MCAST, 36)                                                  \
	X(DETACH_MCAST, 37)                                                  \
	X(OPEN_XRCD, 38)                                                     \
	X(CLOSE_XRCD, 39)                                                    \
	X(OPEN_QP, 40)                                                       \
	X(NOTIFY_CQ, 41)                                                     \
	X(OPEN_DIRECT, 42)                                                   \
	X(MR_FILE, 43)                                                       \
	X(ALLOC_DM, 44)                                                      \
	X(FREE_DM, 45)                                                       \
	X(ADVISE_MR, 46)                                                     \
	X(CONTEXT_TOKEN, 47)                                                 \
	X(IMPORT_CONTEXT, 48)                                                \
	X(IMPORT_OBJ, 49)                                                    \
	X(STAT_QP, 50)                                                       \
	X(INJECT, 51)                                                        \
	X(WHY, 52)                                                           \
	X(CAPTURE, 53)                                                       \
	X(REPLY_CHANNEL, 54)                                                  \
	X(DIRECT_EST, 55)                                                    \
	X(DIRECT_RECV, 56)                                                   \
	X(DIRECT_NOTIFY, 57)

enum sv_cmd_op {
#define SV_X(name, num) SV_CMD_##name = num,
	SV_CMD_LIST(SV_X)
#undef SV_X
	SV_CMD_MAX
};

const char *sv_cmd_name(unsigned int op);

/* ---- limits that size the messages ---- */
#define SV_GID_TBL_LEN      16
#define SV_STAT_PAGE        5   /* clients per STAT response (80 + 5 * 72 <= 496) */
#define SV_DEV_NAME_MAX     32

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
 * (struct sv_direct_srq) (struct sv_rsp_direct_recv says where). From then
 * on the device lets the peer's receive queue be taken by that sender
 * too.
 */
#define SV_DRECV_RQ  0u
#define SV_DRECV_CQ  1u
#define SV_DRECV_SRQ 2u

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

#define SV_CMD_SIZE 256
struct sv_cmd {
	struct sv_cmd_hdr hdr;
	union {
		struct sv_cmd_hello hello;
		struct sv_cmd_query_port query_port;
		struct sv_cmd_query_gid query_gid;
		struct sv_cmd_open_context open_context;
		struct sv_cmd_handle handle;    /* DEALLOC_PD, DEREG_MR, ... */
		struct sv_cmd_reg_mr reg_mr;
		struct sv_cmd_rereg_mr rereg_mr;
		struct sv_cmd_create_cq create_cq;
		struct sv_cmd_resize_cq resize_cq;
		struct sv_cmd_notify_cq notify_cq;
		struct sv_cmd_mr_file mr_file;
		struct sv_cmd_direct_est direct_est;
		struct sv_cmd_direct_recv direct_recv;
		struct sv_cmd_direct_notify direct_notify;
		struct sv_cmd_open_direct open_direct;
		struct sv_cmd_stat stat;
		struct sv_cmd_create_qp create_qp;
		struct sv_cmd_modify_qp modify_qp;
		struct sv_cmd_query_qp query_qp;
		struct sv_cmd_create_srq create_srq;
		struct sv_cmd_modify_srq modify_srq;
		struct sv_cmd_create_ah create_ah;
		struct sv_cmd_create_domain create_domain;
		struct sv_cmd_alloc_mr alloc_mr;
		struct sv_cmd_alloc_page_list alloc_page_list;
		struct sv_cmd_reg_mr_list reg_mr_list;
		struct sv_cmd_alloc_dm alloc_dm;
		struct sv_cmd_advise_mr advise_mr;
		struct sv_cmd_import_obj import_obj;
		struct sv_cmd_inject inject;
		struct sv_cmd_capture capture;
		struct sv_cmd_alloc_mw alloc_mw;
		struct sv_cmd_mcast mcast;
		struct sv_cmd_open_xrcd open_xrcd;
		struct sv_cmd_open_qp open_qp;
		uint8_t raw[SV_CMD_SIZE - sizeof(struct sv_cmd_hdr)];
	} u;
};

/* ---- response payloads (daemon to client) ---- */

struct sv_rsp_hello {
	uint32_t abi;
	uint32_t daemon_pid;
	uint64_t client_id;    /* the daemon's number for this connection */
	char dev_name[SV_DEV_NAME_MAX];
	uint64_t node_guid;    /* big-endian, as ibv_get_device_guid returns */
	uint32_t dev_index;
	uint32_t uverbs;       /* N of /dev/infiniband/uverbsN (the device view) */
	uint32_t owner_uid;    /* the daemon's uid; with status -EACCES: the
				* device is that uid's, the caller is refused */
	uint32_t rsvd;
};

/* The device's attributes, in host byte order except the GUIDs. */
struct sv_dev_attr {
	char fw_ver[64];
	uint64_t node_guid;        /* big-endian */
	uint64_t sys_image_guid;   /* big-endian */
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint64_t device_cap_flags; /* ibv_device_attr_ex.device_cap_flags_ex */
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	uint32_t max_qp;
	uint32_t max_qp_wr;
	uint32_t max_sge;
	uint32_t max_sge_rd;
	uint32_t max_cq;
	uint32_t max_cqe;
	uint32_t max_mr;
	uint32_t max_pd;
	uint32_t max_qp_rd_atom;
	uint32_t max_res_rd_atom;
	uint32_t max_qp_init_rd_atom;
	uint32_t atomic_cap;       /* enum ibv_atomic_cap */
	uint32_t max_mw;
	uint32_t max_mcast_grp;
	uint32_t max_mcast_qp_attach;
	uint32_t max_total_mcast_qp_attach;
	uint32_t max_ah;
	uint32_t max_srq;
	uint32_t max_srq_wr;
	uint32_t max_srq_sge;
	uint32_t max_inline_data;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
	uint32_t max_comp_vectors;
	uint64_t hca_core_clock;   /* kHz */
	uint64_t completion_timestamp_mask;
	uint32_t max_resource_domains; /* doorbell pages a domain can own */
	uint32_t max_fast_reg_page_list_len; /* entries of a page / block list */
	uint64_t exp_cap_flags;    /* SV_EXP_CAP_*: what device_cap_flags
				    * has no bit for */
	uint64_t max_dm_size;      /* device memory, bytes (ALLOC_DM) */
	/* on-demand paging: enum ibv_odp_general_caps, and per transport
	 * enum ibv_odp_transport_cap_bits */
	uint32_t odp_general;
	uint32_t odp_rc, odp_uc, odp_ud, odp_xrc;
};

/* sv_dev_attr.exp_cap_flags (the same bits as softverbs.h's
 * IBV_EXP_DEVICE_*) */
#define SV_EXP_CAP_FAST_REG_USER  (1ull << 0) /* fast register from user space */
#define SV_EXP_CAP_BLOCK_LIST     (1ull << 1) /* block-list MRs */
#define SV_EXP_CAP_ZERO_BASED_MR  (1ull << 2) /* zero-based MRs */
#define SV_EXP_CAP_ZERO_BASED_MW  (1ull << 3) /* zero-based windows */
#define SV_EXP_CAP_READ_WITH_INV  (1ull << 4) /* RDMA read with invalidate */
#define SV_EXP_CAP_SEND_WITH_INV  (1ull << 5) /* send with invalidate */
#define SV_EXP_CAP_MASKED_ATOMICS (1ull << 6) /* masked CAS and FAA */

struct sv_port_attr {
	uint32_t state;            /* enum ibv_port_state */
	uint32_t max_mtu;          /* enum ibv_mtu */
	uint32_t active_mtu;
	uint32_t gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
	uint16_t port_cap_flags2;
	uint16_t rsvd;
	uint32_t active_speed_ex;
	uint32_t rsvd2;
};

struct sv_rsp_gid {
	uint8_t gid[16];
	uint32_t gid_type;         /* enum ibv_gid_type (IBV_GID_TYPE_*) */
	uint32_t valid;            /* 0: an empty entry */
	uint32_t ndev_ifindex;
	uint32_t rsvd;
};

struct sv_rsp_obj {
	uint64_t handle;
};

struct sv_rsp_mr {
	uint64_t handle;
	uint32_t lkey;
	uint32_t rkey;
};

/* A CQ's ring memfd comes with this response: the ring is ring_bytes at
 * ring_offset (a multiple of 4096) of it. The memfd is one of the client's
 * ring pools, which holds other rings of the same client's too
 * (docs/DESIGN.md "Memory"). */
struct sv_rsp_cq {
	uint64_t handle;
	uint32_t cqe;              /* usable entries (>= asked) */
	uint32_t ring_entries;     /* slots in the ring, a power of two */
	uint64_t ring_bytes;       /* size of the ring to map */
	uint64_t ring_offset;      /* where it lies in the memfd */
};

/* OPEN_CONTEXT: the doorbell memfd (db_pages pages of SV_DB_PAGE_BYTES, one
 * struct sv_doorbell at the head of each) comes with the response. */
struct sv_rsp_open_context {
	uint32_t db_pages;
	uint32_t rsvd;
	uint64_t db_bytes;
};

/* OPEN_DIRECT (after OPEN_CONTEXT): the part asked for (src/abi/sv_direct.h:
 * the device's tables, or the guards of the caller's uid) comes with the
 * response as a memfd of `bytes`, or
 * the command fails with EOPNOTSUPP where the daemon offers no direct path
 * (softverbsd --no-direct). */
struct sv_rsp_open_direct {
	uint64_t bytes;
};

/* DIRECT_RECV: where the part lies in the memfd that comes with it (a
 * ring header at offset, bytes long with its slots), and, for the receive
 * ring, its geometry (the device's copies) and the peer's pid. */
struct sv_rsp_direct_recv {
	uint64_t offset;
	uint64_t bytes;
	uint32_t entries;
	uint32_t stride;
	uint32_t max_sge;
	int32_t pid;
	uint32_t srqn;             /* the peer's SRQ (its number); 0: none */
	uint32_t srq_tag;          /* part SV_DRECV_SRQ: the tag its word
				    * has while this ring is the SRQ's */
};

/* MR_FILE: the file offset of the MR's byte addr (the key entry's), and
 * the MR's length. */
struct sv_rsp_mr_file {
	uint64_t offset;
	uint64_t length;
};

/* A QP's ring memfd comes with this response: its rings are ring_bytes at
 * ring_offset (a multiple of 4096) of it, the send ring at sq_offset of
 * those, the receive ring at rq_offset (0 entries when the QP uses an
 * SRQ). */
struct sv_rsp_qp {
	uint64_t handle;
	uint32_t qpn;
	uint32_t db_index;         /* the doorbell page of the QP's engine */
	struct sv_wire_qp_cap cap; /* what the QP really holds (>= asked) */
	uint32_t sq_entries;
	uint32_t sq_stride;
	uint32_t rq_entries;
	uint32_t rq_stride;
	uint64_t sq_offset;
	uint64_t rq_offset;
	uint64_t ring_bytes;
	uint64_t ring_offset;      /* of the rings in the memfd */
};

struct sv_rsp_query_qp {
	struct sv_wire_qp_attr attr;
	struct sv_wire_qp_cap cap;
	uint32_t qp_type;
	uint32_t sq_sig_all;
};

/* An SRQ's ring memfd comes with this response: ring_bytes at ring_offset
 * (a multiple of 4096) of it. */
struct sv_rsp_srq {
	uint64_t handle;
	uint32_t srqn;
	uint32_t db_index;
	uint32_t max_wr;           /* usable entries (>= asked) */
	uint32_t max_sge;
	uint32_t entries;
	uint32_t stride;
	uint64_t ring_bytes;       /* the ring header is at its start */
	/* a tag-matching SRQ's ops ring (src/abi/sv_tm.h), in the same
	 * mapping: its header's offset and its slots; 0 for other SRQs */
	uint64_t tm_ops_offset;
	uint32_t tm_ops_entries;
	uint32_t rsvd;
	uint64_t ring_offset;      /* of the mapping in the memfd */
};

struct sv_rsp_domain {
	uint64_t handle;
	uint32_t db_index;         /* its doorbell page */
	uint32_t dedicated;        /* 1: no other domain used the page when it
				    * was created (with SV_DOMAIN_DEDICATED:
				    * none ever will while it lives) */
};

/* A page list's memfd comes with this response. */
struct sv_rsp_page_list {
	uint64_t handle;
	uint64_t bytes;            /* size of the memfd to map */
	uint32_t max_entries;
	uint32_t rsvd;
};

struct sv_rsp_advise {
	uint64_t va;               /* the range's first byte in the client */
};

/* A DM's memfd comes with this response. */
struct sv_rsp_dm {
	uint64_t handle;
	uint64_t bytes;            /* size of the memfd to map */
};

struct sv_rsp_import {
	uint64_t handle;           /* the whole handle */
	uint64_t length;           /* MR, DM: as registered, as allocated */
	uint64_t bytes;            /* DM: the size of the memfd to map */
	uint64_t iova;             /* MR */
	uint32_t lkey, rkey;       /* MR */
	uint32_t access;           /* MR */
	uint32_t rsvd;
};

struct sv_rsp_inject {
	uint64_t done[SV_INJ_KIND_MAX];   /* faults injected, by kind */
	uint32_t armed;                   /* faults still armed */
	uint32_t rsvd;
};

struct sv_rsp_query_srq {
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
	uint32_t rsvd;
};

struct sv_stat_client {
	uint64_t client_id;
	uint32_t pid;
	uint32_t uid;
	uint32_t count[SV_OBJ_TYPE_MAX];
};

struct sv_rsp_stat {
	uint32_t nclients;         /* clients connected in all */
	uint32_t nlisted;          /* entries filled in this page */
	uint32_t total[SV_OBJ_TYPE_MAX]; /* objects of every client */
	uint32_t keys_live;        /* lkeys/rkeys in the device key table */
	uint32_t daemon_pid;
	uint64_t refused;          /* commands refused since start */
	struct sv_stat_client client[SV_STAT_PAGE];
};

/*
 * Why a received RoCEv2 packet was dropped (docs/ROCE.md "Drops"): one
 * counter each in struct sv_rsp_stat_wire, whose rx_drop is their sum.
 * X(NAME, name, what `softverbs stat` calls it).
 */
#define SV_RX_DROP_REASONS(X)                                                 \
	X(ICRC, icrc, "bad ICRC")                                             \
	X(MALFORMED, malformed, "malformed")                                  \
	X(OPCODE, opcode, "unknown opcode")                                   \
	X(PKEY, pkey, "bad P_Key")                                            \
	X(QPN, qpn, "unknown QPN")                                            \
	X(PEER, peer, "not from the QP's peer")                               \
	X(STATE, state, "QP state or type")                                   \
	X(PSN, psn, "PSN out of window")                                      \
	X(QKEY, qkey, "bad Q_Key")                                            \
	X(NORES, nores, "no resources")

enum sv_rx_drop {
#define SV_RX_DROP_ENUM(N, n, s) SV_RX_DROP_##N,
	SV_RX_DROP_REASONS(SV_RX_DROP_ENUM)
#undef SV_RX_DROP_ENUM
	SV_RX_DROP_MAX
};

/*
 * STAT_QP (struct sv_cmd_stat: first is a QPN table slot to start from):
 * the QPs of every client, SV_STAT_QP_PAGE at a time, in slot order; next
 * is the slot to ask for next, 0 when the table has been walked. Counters
 * count since the QP was made; ring counts are what the device has taken
 * (cons) and what the client says it posted (prod, the client's to write).
 */
#define SV_STAT_QP_PAGE 6         /* 16 + 6 * 72 <= 496 */
struct sv_stat_qp {
	uint64_t client_id;
	uint32_t pid;
	uint32_t qpn;
	uint8_t type;              /* enum ibv_qp_type */
	uint8_t state;             /* enum ibv_qp_state */
	uint8_t wire;              /* 1: its peer is across RoCEv2 */
	uint8_t srq;               /* 1: receives through an SRQ */
	uint32_t dest_qpn;
	uint32_t sq_entries, sq_used;
	uint32_t rq_entries, rq_used;
	uint64_t sends;            /* send WQEs completed (signaled or not) */
	uint64_t recvs;            /* receive completions */
	uint64_t errors;           /* error completions, flushes not counted */
	uint64_t retrans;          /* RoCEv2 packets sent again */
};

struct sv_rsp_stat_qp {
	uint32_t nlisted;
	uint32_t next;
	uint32_t nqps;             /* QPs on the device in all */
	uint32_t rsvd;
	struct sv_stat_qp qp[SV_STAT_QP_PAGE];
};

/*
 * WHY (struct sv_cmd_stat: first is the number of the first record to
 * give; softverbs why): the device's last SV_WHY_RING refusals and error
 * completions, each with the reason the device had, oldest first, three
 * at a time. Records are numbered from the daemon's start; next is the
 * number to ask for next (== total when all are given), oldest the
 * number of the oldest still kept.
 */
#define SV_WHY_RING 256
#define SV_WHY_PAGE 3
#define SV_WHY_LEN 96
enum { SV_WHY_CMD = 1, SV_WHY_CQE = 2 };
struct sv_why_rec {
	uint64_t time_ns;          /* CLOCK_REALTIME */
	uint64_t client_id;
	uint64_t wr_id;            /* CQE */
	uint32_t pid;
	uint32_t qpn;              /* CQE */
	uint32_t kind;             /* SV_WHY_* */
	uint32_t op;               /* CMD: enum sv_cmd_op; CQE: enum ibv_wc_opcode */
	int32_t status;            /* CMD: -errno; CQE: enum ibv_wc_status */
	uint32_t rsvd;
	char why[SV_WHY_LEN];      /* NUL-terminated */
};

struct sv_rsp_why {
	uint64_t total;            /* records made since start */
	uint64_t oldest;
	uint64_t next;
	uint32_t nlisted;
	uint32_t rsvd;
	struct sv_why_rec rec[SV_WHY_PAGE];
};

/* STAT_WIRE (takes struct sv_cmd_stat, all zero): the RoCEv2 port's
 * counters since the daemon started. */
struct sv_rsp_stat_wire {
	uint32_t running;          /* 1: the device has a RoCEv2 port */
	uint32_t port;             /* its UDP port */
	uint64_t tx_pkts, rx_pkts;
	uint64_t rx_drop;          /* every packet dropped: the sum of
				    * rx_drop_why */
	uint64_t rx_bad_icrc;      /* = rx_drop_why[SV_RX_DROP_ICRC] */
	uint64_t retransmits;      /* packets sent again */
	uint64_t timeouts;         /* retransmission timer expiries */
	uint64_t naks_sent, naks_rcvd;
	uint64_t rnr_naks_sent, rnr_naks_rcvd;
	uint64_t dup_reqs;         /* duplicate requests answered again */
	uint64_t retry_exceeded;
	uint64_t tx_drop_full;     /* the socket was full: dropped */
	uint64_t inj_drop, inj_dup, inj_reorder, inj_corrupt; /* injector */
	uint64_t inj_delay;        /* packets held back (wire delay=US) */
	uint32_t gso, gro;         /* 1: UDP GSO / GRO in use */
	uint64_t tx_gso, rx_gro;   /* datagrams of several packets */
	uint64_t tx_bytes, rx_bytes; /* RoCEv2 datagrams' bytes */
	uint64_t lo_msgs, lo_bytes;  /* messages between QPs of this device */
	/* rdma_cm (docs/DESIGN.md "rdma_cm"): open files and ids now, and
	 * since start: ids created, REQs sent, accepts, REJs, DREQs,
	 * connections established */
	uint32_t cm_files, cm_ids;
	uint64_t cm_ids_created, cm_connects, cm_accepts, cm_rejects;
	uint64_t cm_disconnects, cm_established;
	/* CM MADs on QP1 (across hosts): sent, received, sent again,
	 * requests given up after every retry, dropped (malformed, forged,
	 * for no id, or no room) */
	uint64_t cm_mad_sent, cm_mad_rcvd, cm_mad_retries, cm_mad_timeouts;
	uint64_t cm_mad_dropped;
	uint64_t rx_drop_why[SV_RX_DROP_MAX]; /* by enum sv_rx_drop */
	/* of lo_msgs and lo_bytes: those the initiating process ran itself
	 * (the direct path, src/abi/sv_direct.h) */
	uint64_t direct_msgs, direct_bytes;
	uint64_t direct_mapped;    /* of direct_msgs: plain copies between
				    * mapped memfds */
	/* WRs of the direct path's operations sent to the daemon instead,
	 * by reason (enum sv_direct_refusal, src/abi/sv_direct.h) */
	uint64_t direct_refused[6];
};

struct sv_rsp_hdr {
	uint32_t magic;
	uint16_t op;               /* the command's op */
	uint16_t version;
	uint32_t seq;              /* the command's seq */
	int32_t status;            /* 0 or -errno */
};

#define SV_RSP_SIZE 512
struct sv_rsp {
	struct sv_rsp_hdr hdr;
	union {
		struct sv_rsp_hello hello;
		struct sv_dev_attr dev;
		struct sv_port_attr port;
		struct sv_rsp_gid gid;
		struct sv_rsp_obj obj;
		struct sv_rsp_mr mr;
		struct sv_rsp_cq cq;
		struct sv_rsp_stat stat;
		struct sv_rsp_stat_wire stat_wire;
		struct sv_rsp_stat_qp stat_qp;
		struct sv_rsp_why why;
		struct sv_rsp_open_context open_context;
		struct sv_rsp_open_direct open_direct;
		struct sv_rsp_mr_file mr_file;
		struct sv_rsp_direct_recv direct_recv;
		struct sv_rsp_qp qp;
		struct sv_rsp_query_qp query_qp;
		struct sv_rsp_srq srq;
		struct sv_rsp_query_srq query_srq;
		struct sv_rsp_domain domain;
		struct sv_rsp_page_list page_list;
		struct sv_rsp_dm dm;
		struct sv_rsp_import import;
		struct sv_rsp_inject inject;
		struct sv_rsp_capture capture;
		struct sv_rsp_advise advise;
		uint8_t raw[SV_RSP_SIZE - sizeof(struct sv_rsp_hdr)];
	} u;
};

_Static_assert(sizeof(struct sv_cmd_hdr) == 16, "cmd hdr");
_Static_assert(sizeof(struct sv_cmd) == SV_CMD_SIZE, "cmd size");
_Static_assert(sizeof(struct sv_rsp_hdr) == 16, "rsp hdr");
_Static_assert(sizeof(struct sv_rsp) == SV_RSP_SIZE, "rsp size");
_Static_assert(sizeof(struct sv_dev_attr) <= sizeof(((struct sv_rsp *)0)->u.raw), "dev attr fits");
_Static_assert(sizeof(struct sv_rsp_stat) <= sizeof(((struct sv_rsp *)0)->u.raw), "stat fits");
_Static_assert(sizeof(struct sv_rsp_stat_wire) <= sizeof(((struct sv_rsp *)0)->u.raw), "stat_wire fits");
_Static_assert(sizeof(struct sv_rsp_stat_qp) <= sizeof(((struct sv_rsp *)0)->u.raw), "stat_qp fits");
_Static_assert(sizeof(struct sv_rsp_why) <= sizeof(((struct sv_rsp *)0)->u.raw), "why fits");
_Static_assert(sizeof(struct sv_cmd_modify_qp) <= sizeof(((struct sv_cmd *)0)->u.raw), "modify_qp fits");
_Static_assert(offsetof(struct sv_cmd, u) == 16, "cmd payload offset");
_Static_assert(offsetof(struct sv_rsp, u) == 16, "rsp payload offset");

/*
 * Events the daemon sends on a context's async socket and on a completion
 * channel's socket: one fixed-size message each.
 */
struct sv_event {
	uint32_t magic;            /* SV_PROTO_MAGIC */
	uint32_t type;             /* enum ibv_event_type; for channels 0 */
	uint64_t cookie;           /* the library's object pointer (cq, qp, srq) */
	uint64_t handle;           /* the object's handle */
	uint32_t port_num;         /* port events */
	uint32_t rsvd;
};
_Static_assert(sizeof(struct sv_event) == 32, "event size");

/* Outcome of checking a received message before any handler sees it. */
enum sv_cmd_verdict {
	SV_CMD_OK = 0,
	SV_CMD_SHORT,          /* fewer bytes than a struct sv_cmd */
	SV_CMD_LONG,           /* more bytes (the socket truncated it) */
	SV_CMD_BAD_MAGIC,
	SV_CMD_BAD_VERSION,
	SV_CMD_BAD_OP,
};

/* Check a message of n bytes (n may exceed the buffer if the socket said
 * MSG_TRUNC). Reads only the header, only when n covers it. */
enum sv_cmd_verdict sv_cmd_check(const struct sv_cmd *cmd, size_t n);
const char *sv_cmd_verdict_str(enum sv_cmd_verdict v);

/* Fill the header of a command / of the response to cmd. */
void sv_cmd_init(struct sv_cmd *cmd, unsigned int op);
void sv_rsp_init(struct sv_rsp *rsp, const struct sv_cmd *cmd, int status);

#endif
