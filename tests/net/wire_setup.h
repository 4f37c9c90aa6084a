// SPDX-License-Identifier: MIT
/*
 * The setup the wire programs of tests/net share (sv_badmem_wire,
 * sv_rereg_wire, sv_keyguess, sv_xrc_wire): opening the device with a PD
 * and a CQ, creating a QP, the TCP connection that carries the QP
 * information, and connecting an RC or UC QP to its peer up to RTS. Every
 * function exits 1 with "<wire_prog>: <what>" when it cannot do its part.
 */
#ifndef SV_TESTS_NET_WIRE_SETUP_H
#define SV_TESTS_NET_WIRE_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/* The program's name in messages; each program sets it first thing. */
extern const char *wire_prog;

/* Print "<wire_prog>: what" and exit 1. */
void wire_die(const char *what) __attribute__((noreturn));

/* All n bytes to or from the TCP peer ("tcp write", "tcp read"). */
void wire_put(int fd, const void *p, size_t n);
void wire_get(int fd, void *p, size_t n);
/* Write n bytes of out, then read n bytes into in. */
void wire_swap(int fd, const void *out, void *in, size_t n);

/* A TCP socket listening on port of every IPv4 address ("listen"). */
int wire_listen(const char *port);
/* The first connection on ls, which is closed then ("accept"). */
int wire_accept(int ls);
/* A TCP connection to host:port, tried `tries` times 100 ms apart
 * ("getaddrinfo", "connect"). */
int wire_connect(const char *host, const char *port, int tries);

/* The device, a PD and a CQ of cqe entries ("no device", "resources"). */
struct wire_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};
void wire_open(struct wire_dev *d, int cqe);

/* This port's GID 0, the one the peer addresses ("gid"). */
void wire_gid(struct ibv_context *ctx, uint8_t gid[16]);

/* An RC or UC QP on cq for both queues, with one SGE each way
 * ("create qp"). */
struct ibv_qp *wire_qp(struct ibv_pd *pd, struct ibv_cq *cq,
		       enum ibv_qp_type type, uint32_t max_send_wr,
		       uint32_t max_recv_wr);

/* qp from RESET to RTS towards the peer's QP qpn at gid, with
 * vu_conn_default() ("connect qp"). */
void wire_rts(struct ibv_qp *qp, uint32_t qpn, const uint8_t gid[16]);

/* The path to a peer QP in an RTR attribute: MTU 1024, global, hop limit
 * 64, port 1. */
void wire_path(struct ibv_qp_attr *a, uint32_t qpn, const uint8_t gid[16]);

#endif
