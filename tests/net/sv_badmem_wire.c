// SPDX-License-Identifier: MIT
/*
 * A WRITE whose local memory cannot be read, among good ones posted with it
 * in one list, across the wire (RoCEv2). The requester reads the payloads
 * of one step's WQEs in one copy (src/device/roce/req.c, struct batch);
 * when that copy fails, the WQEs before the bad one must still go out and
 * complete, the bad one completes with IBV_WC_LOC_PROT_ERR, those after it
 * are flushed, and not one byte of the bad one or a later one may land.
 *
 * Each round, on a fresh QP pair (RC or UC): the client registers two
 * pages, unmaps the second (and keeps its addresses with a PROT_NONE
 * page of nothing), and posts N WRITEs (all signaled) into the
 * server's MR, WQE `bad` from the unmapped page (or straddling the two)
 * and the rest from good memory. It checks every completion, then a WRITE
 * on a second RC QP (a marker that follows the round's packets on the
 * wire) and asks the server to check its memory: the WRITEs before `bad`
 * there, every byte after them still zero.
 *
 *   sv_badmem_wire server PORT
 *   sv_badmem_wire client HOST PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vu.h"

#define BUF   (1u << 20)
#define WAIT  20000

struct hello {
	uint32_t qpn, marker_qpn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

/* A round, as the client tells it to the server. */
struct round {
	uint32_t type;             /* IBV_QPT_RC or IBV_QPT_UC; 0: the end */
	uint32_t n, len, bad;      /* WRITE i of len bytes at i * len */
	uint32_t straddle;         /* bad's bytes begin in the mapped page */
};

static const struct round rounds[] = {
	{ IBV_QPT_RC, 16, 64, 5, 0 },
	{ IBV_QPT_UC, 16, 64, 5, 0 },
	{ IBV_QPT_RC, 40, 64, 33, 1 },
	{ IBV_QPT_UC, 40, 64, 33, 1 },
	{ IBV_QPT_RC, 8, 3000, 3, 1 },      /* 3 packets each at MTU 1024 */
	{ IBV_QPT_UC, 8, 3000, 3, 0 },
	{ IBV_QPT_RC, 12, 100, 0, 0 },      /* the first one bad */
	{ IBV_QPT_UC, 12, 100, 11, 1 },     /* the last one bad */
};

static void die(const char *what)
{
	fprintf(stderr, "sv_badmem_wire: %s\n", what);
	exit(1);
}

static void put(int fd, const void *p, size_t n)
{
	if (vu_xfer(fd, (void *)p, n, true))
		die("tcp write");
}

static void get(int fd, void *p, size_t n)
{
	if (vu_xfer(fd, p, n, false))
		die("tcp read");
}

static uint8_t pat(uint32_t r, uint32_t i)
{
	return (uint8_t)(1 + (r * 131u + i * 7u + (i >> 8)) % 255u);
}

static struct ibv_qp *mkqp(struct ibv_pd *pd, struct ibv_cq *cq,
			   enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = t,
		.cap = { .max_send_wr = 64, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (!qp)
		die("create qp");
	return qp;
}

static void connect_qp(struct ibv_qp *qp, uint32_t qpn, const uint8_t *gid)
{
	struct vu_conn c = vu_conn_default();
	struct vu_addr peer = { .qpn = qpn, .psn = c.sq_psn };

	memcpy(peer.gid.raw, gid, 16);
	if (vu_connect(qp, &peer, &c))
		die("connect qp");
}

static void hello(struct ibv_context *ctx, struct hello *me)
{
	union ibv_gid g;

	if (vu_gid(ctx, &g))
		die("gid");
	memcpy(me->gid, g.raw, 16);
}

static int tcp(const char *host, const char *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd, ls, one = 1;

	sa.sin_port = htons((uint16_t)atoi(port));
	if (host) {
		for (int i = 0; i < 100; i++) {
			fd = socket(AF_INET, SOCK_STREAM, 0);
			if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
				die("address");
			if (fd >= 0 && !connect(fd, (struct sockaddr *)&sa,
						sizeof(sa)))
				return fd;
			close(fd);
			vu_sleep_ms(100);
		}
		die("connect");
	}
	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(ls, 1))
		die("listen");
	fd = accept(ls, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(ls);
	return fd;
}

static int server(const char *port)
{
	struct ibv_context *ctx = vu_open();
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *marker;
	struct hello me, peer;
	struct round r;
	uint8_t *b;
	int fd;

	if (!ctx)
		die("no device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	b = calloc(1, BUF);
	if (!pd || !cq || !b)
		die("resources");
	mr = ibv_reg_mr(pd, b, BUF, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("reg mr");
	marker = mkqp(pd, cq, IBV_QPT_RC);
	fd = tcp(NULL, port);
	hello(ctx, &me);
	me.marker_qpn = marker->qp_num;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)b;
	for (uint32_t k = 0;; k++) {
		struct ibv_qp *qp;
		uint32_t ok = 1;

		get(fd, &r, sizeof(r));
		if (!r.type)
			break;
		memset(b, 0, BUF);
		qp = mkqp(pd, cq, (enum ibv_qp_type)r.type);
		me.qpn = qp->qp_num;
		put(fd, &me, sizeof(me));
		get(fd, &peer, sizeof(peer));
		connect_qp(qp, peer.qpn, peer.gid);
		if (!k)
			connect_qp(marker, peer.marker_qpn, peer.gid);
		put(fd, &ok, sizeof(ok));
		/* the client's completions and its marker are in */
		get(fd, &ok, sizeof(ok));
		for (uint32_t i = 0; i < r.n * r.len && ok; i++) {
			uint32_t w = i / r.len;
			uint8_t want = w < r.bad ? pat(k, i) : 0;

			if (b[i] != want) {
				fprintf(stderr, "sv_badmem_wire: round %u (%s, "
					"bad WRITE %u of %u): byte %u (WRITE %u)"
					" is 0x%02x, not 0x%02x\n", k,
					r.type == IBV_QPT_RC ? "RC" : "UC",
					r.bad, r.n, i, w, b[i], want);
				ok = 0;
			}
		}
		put(fd, &ok, sizeof(ok));
		if (!ok)
			return 1;
		if (ibv_destroy_qp(qp))
			die("destroy qp");
	}
	printf("PASS: server\n");
	return 0;
}

/* WRITE id from p into the server at off, on qp. */
static void post_write(struct ibv_qp *qp, uint64_t id, void *p, uint32_t len,
		       uint32_t lkey, const struct hello *srv, uint64_t off,
		       struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	*sge = (struct ibv_sge){ (uintptr_t)p, len, lkey };
	*wr = (struct ibv_send_wr){
		.wr_id = id, .sg_list = sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { srv->addr + off, srv->rkey },
	};
	(void)qp;
}

static int client(const char *host, const char *port)
{
	struct ibv_context *ctx = vu_open();
	long pg = sysconf(_SC_PAGESIZE);
	struct ibv_send_wr wr[64], *badwr;
	struct ibv_sge sge[64];
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *good_mr, *mark_mr;
	struct ibv_qp *marker;
	struct hello me, srv;
	uint8_t *good, *mark;
	uint32_t ok;
	int fd;

	if (!ctx)
		die("no device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	good = calloc(1, BUF);
	mark = calloc(1, 64);
	if (!pd || !cq || !good || !mark)
		die("resources");
	good_mr = ibv_reg_mr(pd, good, BUF, IBV_ACCESS_LOCAL_WRITE);
	mark_mr = ibv_reg_mr(pd, mark, 64, IBV_ACCESS_LOCAL_WRITE);
	if (!good_mr || !mark_mr)
		die("reg mr");
	marker = mkqp(pd, cq, IBV_QPT_RC);
	fd = tcp(host, port);
	hello(ctx, &me);
	me.marker_qpn = marker->qp_num;
	for (uint32_t k = 0; k < sizeof(rounds) / sizeof(rounds[0]); k++) {
		const struct round *r = &rounds[k];
		uint8_t *two;
		struct ibv_mr *bad_mr;
		struct ibv_qp *qp;
		struct ibv_wc wc;
		uint32_t from;

		put(fd, r, sizeof(*r));
		/* two pages registered, the second unmapped after */
		two = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (two == MAP_FAILED)
			die("mmap");
		memset(two, 0xee, 2 * (size_t)pg);
		bad_mr = ibv_reg_mr(pd, two, 2 * (size_t)pg,
				    IBV_ACCESS_LOCAL_WRITE);
		if (!bad_mr || munmap(two + pg, (size_t)pg))
			die("reg mr / munmap");
		/* the hole kept a hole: an inaccessible page of nothing, so
		 * that no allocation of ours (the QP's below, the sanitizer's)
		 * lands there and makes it readable again */
		if (mmap(two + pg, (size_t)pg, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
			 0) != two + pg)
			die("reserve the hole");
		qp = mkqp(pd, cq, (enum ibv_qp_type)r->type);
		me.qpn = qp->qp_num;
		get(fd, &srv, sizeof(srv));
		put(fd, &me, sizeof(me));
		connect_qp(qp, srv.qpn, srv.gid);
		if (!k)
			connect_qp(marker, srv.marker_qpn, srv.gid);
		get(fd, &ok, sizeof(ok));

		for (uint32_t i = 0; i < r->n * r->len; i++)
			good[i] = pat(k, i);
		for (uint32_t i = 0; i < r->n; i++) {
			uint8_t *p = good + (size_t)i * r->len;
			uint32_t lkey = good_mr->lkey;

			if (i == r->bad) {
				p = two + pg - (r->straddle ? r->len / 2 : 0);
				lkey = bad_mr->lkey;
			}
			post_write(qp, i, p, r->len, lkey, &srv,
				   (uint64_t)i * r->len, &wr[i], &sge[i]);
			wr[i].next = i + 1 < r->n ? &wr[i + 1] : NULL;
		}
		if (ibv_post_send(qp, wr, &badwr))
			die("post send");
		for (uint32_t i = 0; i < r->n; i++) {
			enum ibv_wc_status want =
				i < r->bad ? IBV_WC_SUCCESS :
				i == r->bad ? IBV_WC_LOC_PROT_ERR :
					      IBV_WC_WR_FLUSH_ERR;

			if (vu_poll(cq, &wc, 1, WAIT) != 1)
				die("no completion");
			if (wc.wr_id != i || wc.status != want) {
				fprintf(stderr, "sv_badmem_wire: round %u (%s):"
					" completion %u is wr_id %llu %s, not "
					"%s\n", k,
					r->type == IBV_QPT_RC ? "RC" : "UC", i,
					(unsigned long long)wc.wr_id,
					ibv_wc_status_str(wc.status),
					ibv_wc_status_str(want));
				return 1;
			}
		}
		/* the marker: on the wire after the round's packets */
		from = BUF - 64;
		post_write(marker, 1000 + k, mark, 64, mark_mr->lkey, &srv,
			   from, &wr[0], &sge[0]);
		wr[0].next = NULL;
		if (ibv_post_send(marker, wr, &badwr))
			die("post marker");
		if (vu_poll(cq, &wc, 1, WAIT) != 1 || wc.status != IBV_WC_SUCCESS)
			die("marker");
		put(fd, &ok, sizeof(ok));
		get(fd, &ok, sizeof(ok));
		if (!ok)
			die("the server found bytes it should not have");
		printf("round %u: %s, %u WRITEs of %u B, WRITE %u unreadable%s: "
		       "%u done, 1 LOC_PROT_ERR, %u flushed, nothing after "
		       "it landed\n", k, r->type == IBV_QPT_RC ? "RC" : "UC",
		       r->n, r->len, r->bad,
		       r->straddle ? " (from its middle on)" : "",
		       r->bad, r->n - r->bad - 1);
		if (ibv_destroy_qp(qp) || ibv_dereg_mr(bad_mr))
			die("destroy");
		munmap(two, (size_t)pg);
	}
	{
		struct round end = { 0, 0, 0, 0, 0 };

		put(fd, &end, sizeof(end));
	}
	printf("PASS: client\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	fprintf(stderr, "usage: sv_badmem_wire server PORT | client HOST PORT\n");
	return 2;
}
