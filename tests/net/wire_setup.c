// SPDX-License-Identifier: MIT
/* The wire programs' shared setup: see wire_setup.h. */
#define _GNU_SOURCE
#include "wire_setup.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vu.h"

const char *wire_prog = "wire";

void wire_die(const char *what)
{
	fprintf(stderr, "%s: %s\n", wire_prog, what);
	exit(1);
}

void wire_put(int fd, const void *p, size_t n)
{
	if (vu_xfer(fd, (void *)p, n, true))
		wire_die("tcp write");
}

void wire_get(int fd, void *p, size_t n)
{
	if (vu_xfer(fd, p, n, false))
		wire_die("tcp read");
}

void wire_swap(int fd, const void *out, void *in, size_t n)
{
	wire_put(fd, out, n);
	wire_get(fd, in, n);
}

int wire_listen(const char *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	sa.sin_port = htons((uint16_t)atoi(port));
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(ls, 1))
		wire_die("listen");
	return ls;
}

int wire_accept(int ls)
{
	int fd = accept(ls, NULL, NULL);

	if (fd < 0)
		wire_die("accept");
	close(ls);
	return fd;
}

int wire_connect(const char *host, const char *port, int tries)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM }, *res;
	int fd = -1;

	if (getaddrinfo(host, port, &hints, &res))
		wire_die("getaddrinfo");
	for (int t = 0; t < tries && fd < 0; t++) {
		if (t)
			vu_sleep_ms(100);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen)) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0)
		wire_die("connect");
	return fd;
}

void wire_open(struct wire_dev *d, int cqe)
{
	d->ctx = vu_open();
	if (!d->ctx)
		wire_die("no device");
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (!d->pd || !d->cq)
		wire_die("resources");
}

void wire_gid(struct ibv_context *ctx, uint8_t gid[16])
{
	union ibv_gid g;

	if (vu_gid(ctx, &g))
		wire_die("gid");
	memcpy(gid, g.raw, 16);
}

struct ibv_qp *wire_qp(struct ibv_pd *pd, struct ibv_cq *cq,
		       enum ibv_qp_type type, uint32_t max_send_wr,
		       uint32_t max_recv_wr)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = type,
		.cap = { .max_send_wr = max_send_wr,
			 .max_recv_wr = max_recv_wr,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (!qp)
		wire_die("create qp");
	return qp;
}

void wire_rts(struct ibv_qp *qp, uint32_t qpn, const uint8_t gid[16])
{
	struct vu_conn c = vu_conn_default();
	struct vu_addr peer = { .qpn = qpn, .psn = c.sq_psn };

	memcpy(peer.gid.raw, gid, 16);
	if (vu_connect(qp, &peer, &c))
		wire_die("connect qp");
}

void wire_path(struct ibv_qp_attr *a, uint32_t qpn, const uint8_t gid[16])
{
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = qpn;
	a->ah_attr.is_global = 1;
	memcpy(a->ah_attr.grh.dgid.raw, gid, 16);
	a->ah_attr.grh.hop_limit = 64;
	a->ah_attr.port_num = 1;
}
