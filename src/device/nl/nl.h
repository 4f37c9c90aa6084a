/* SPDX-License-Identifier: MIT */
/*
 * RDMA netlink (docs/DESIGN.md, "RDMA netlink"): the daemon answers the
 * NETLINK_RDMA sockets of programs under the preload (abi/sv_nl.h) with the
 * kernel's messages (<rdma/rdma_netlink.h>), so that iproute2's `rdma` and
 * whatever else speaks RDMA netlink see sv0 as they see a kernel device.
 *
 * nl.c is the socket: connections, the kernel's rules for a request
 * (netlink_rcv_skb: lengths, NLM_F_REQUEST, acks and errors), dumps that
 * continue as the program reads, and the message builder. nldev.c is the
 * RDMA_NL_NLDEV client: one function per command, as the kernel's nldev.c.
 * Everything runs on the daemon's main thread.
 */
#ifndef SV_DEVICE_NL_H
#define SV_DEVICE_NL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>

/* ---- the daemon loop's view (evloop.c) ---- */

struct sv_nl_conn;

int sv_nl_start(const char *sock_path);   /* 0 or -errno */
void sv_nl_stop(void);
int sv_nl_listen_fd(void);
uint32_t sv_nl_nconns(void);
/* A connection that waits to be accepted, or NULL. */
struct sv_nl_conn *sv_nl_accept(void);
/* Its two descriptors: requests in (EPOLLIN), answers out (EPOLLOUT while
 * sv_nl_wants_out). */
int sv_nl_req_fd(const struct sv_nl_conn *c);
int sv_nl_out_fd(const struct sv_nl_conn *c);
void **sv_nl_tags(struct sv_nl_conn *c);  /* two slots for the loop's tags */
/* The requests that wait, or the answers that could not be written yet:
 * false when the connection has gone (close it). */
bool sv_nl_input(struct sv_nl_conn *c);
bool sv_nl_output(struct sv_nl_conn *c);
bool sv_nl_wants_out(const struct sv_nl_conn *c);
void sv_nl_close(struct sv_nl_conn *c);

/* ---- messages (nl.c) ---- */

/* A datagram being built: the messages of one record. */
struct sv_nlb {
	uint8_t *buf;
	size_t cap, len;
	bool full;                 /* a put did not fit */
};

/* The request a command answers. */
struct sv_nl_ctx {
	const struct nlmsghdr *nlh;
	const struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];
	uint32_t portid;
	pid_t pid;                 /* the asking process */
	bool net_admin;            /* it had CAP_NET_ADMIN when it connected
				    * (the kernel's netlink_capable: the
				    * socket opener's credentials) */
	const char *why;           /* an error's reason (NETLINK_EXT_ACK) */
};

/* A message of type RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd) answering ctx:
 * its offset in b, or -1 when it does not fit. */
long sv_nlb_msg(struct sv_nlb *b, const struct sv_nl_ctx *ctx, uint32_t cmd,
		uint16_t flags);
void sv_nlb_msg_end(struct sv_nlb *b, long at);
void sv_nlb_put(struct sv_nlb *b, uint16_t type, const void *v, size_t len);
void sv_nlb_u8(struct sv_nlb *b, uint16_t type, uint8_t v);
void sv_nlb_u32(struct sv_nlb *b, uint16_t type, uint32_t v);
void sv_nlb_u64(struct sv_nlb *b, uint16_t type, uint64_t v);
void sv_nlb_str(struct sv_nlb *b, uint16_t type, const char *s);
long sv_nlb_nest(struct sv_nlb *b, uint16_t type);
void sv_nlb_nest_end(struct sv_nlb *b, long at);

/* An attribute of the request, checked as the kernel's nldev_policy: a
 * u32 that is there and 4 bytes long (0), -ENOENT where it is absent,
 * -EINVAL where it is malformed. */
int sv_nl_attr_u32(const struct sv_nl_ctx *ctx, int type, uint32_t *v);

/* ---- the NLDEV commands (nldev.c) ---- */

/* doit: answer into b (one message; the ack follows from nl.c): 0 or
 * -errno. dump: messages into b from *cursor on: 0 when all are out, 1
 * when b is full and more follow, or -errno. */
struct sv_nl_op {
	int (*doit)(struct sv_nl_ctx *ctx, struct sv_nlb *b);
	int (*dump)(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);
};
const struct sv_nl_op *sv_nldev_op(unsigned int cmd);
/* Shared by nldev.c, res.c and stat.c: the device (index 0, else EINVAL)
 * and the port (1 .. phys_port_cnt, else EINVAL) a request names. */
int sv_nldev_dev_of(struct sv_nl_ctx *ctx);
int sv_nldev_port_of(struct sv_nl_ctx *ctx, uint32_t *port);
void sv_nldev_handle(struct sv_nlb *b);

/* ---- the per-object resources (res.c) and statistics (stat.c) ---- */

int sv_nl_res_qp_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);
int sv_nl_res_qp_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);
int sv_nl_res_cm_id_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);
int sv_nl_res_cm_id_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);
int sv_nl_res_cq_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);
int sv_nl_res_cq_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);
int sv_nl_res_mr_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);
int sv_nl_res_mr_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);
int sv_nl_res_pd_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);
int sv_nl_res_pd_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);
int sv_nl_res_ctx_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);
int sv_nl_res_ctx_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);
int sv_nl_res_srq_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);
int sv_nl_res_srq_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);
/* STAT_GET with RES_MR: the MRs with their MRN only (fill_stat_mr_entry) */
int sv_nl_res_mr_stat_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);
int sv_nl_res_mr_stat_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);

int sv_nl_stat_get_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);
int sv_nl_stat_get_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor);
int sv_nl_stat_status_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b);

#endif
