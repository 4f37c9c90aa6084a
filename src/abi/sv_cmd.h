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
#include "abi/sv_cmd_args.h"

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
#include "abi/sv_rsp_args.h"

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
