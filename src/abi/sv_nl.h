/* SPDX-License-Identifier: MIT */
/*
 * RDMA netlink in user space (docs/DESIGN.md, "RDMA netlink"): what the
 * preload and the daemon say to each other for a program's
 * socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA).
 *
 * The preload connects a SOCK_SEQPACKET socket to SV_NL_SOCK_NAME beside the
 * control socket (the request socket, kept hidden in the program) and makes
 * a socket pair: one end is the program's netlink descriptor, the other
 * travels to the daemon with the hello (SCM_RIGHTS). The daemon answers the
 * hello on the request socket, and from then on:
 *  - each datagram the program sends is one struct sv_nl_req on the request
 *    socket: the netlink bytes as written, with the sender's port id and
 *    socket options;
 *  - the daemon writes the answers (netlink datagrams, as the kernel would
 *    queue them on the socket: one record each) to the program's end, then
 *    one struct sv_nl_done on the request socket. The preload's send waits
 *    for it, so that, as with the kernel, the answer is there when send()
 *    returns. A dump too large for the socket's buffer continues as the
 *    program reads, as the kernel's does.
 * Nothing the preload sends is trusted: the daemon parses each request with
 * the kernel's rules (lengths, flags, attribute sizes) and answers a bad one
 * with the kernel's NLMSG_ERROR.
 */
#ifndef SV_NL_H
#define SV_NL_H

#include <stdint.h>

#define SV_NL_SOCK_NAME "rdma_nl"    /* beside the control socket */
#define SV_NL_MAGIC     0x4c4e5653u   /* "SVNL" */
#define SV_NL_VERSION   1u

/* Largest request datagram taken (the kernel's limit is the socket's send
 * buffer; nldev requests are a few dozen bytes). */
#define SV_NL_MAX_REQ   16384u

/* Both ways: the preload's carries its end of the pair. */
struct sv_nl_hello {
	uint32_t magic;
	uint32_t version;
};

/* socket options that change what the daemon writes (SOL_NETLINK) */
#define SV_NL_F_CAP_ACK  (1u << 0)  /* NETLINK_CAP_ACK: no payload echoed */
#define SV_NL_F_EXT_ACK  (1u << 1)  /* NETLINK_EXT_ACK: error message TLV */

struct sv_nl_req {
	uint32_t magic;
	uint32_t portid;              /* the sending socket's (nlmsg_pid) */
	uint32_t flags;               /* SV_NL_F_* */
	uint32_t len;                 /* of data */
	uint8_t data[];
};
#define SV_NL_REQ_HDR ((uint32_t)sizeof(struct sv_nl_req))

struct sv_nl_done {
	uint32_t magic;
	int32_t ret;                  /* 0, or -errno for send() */
};

#endif
