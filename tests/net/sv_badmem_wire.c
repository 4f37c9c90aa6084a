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
#include "wire_setup.h"

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

static uint8_t pat(uint32_t r, uint32_t i)
{
	return (uint8_t)(1 + (r * 131u + i * 7u + (i >> 8)) % 255u);
}

static int server(const char *port)
{
	struct wire_dev d;
	struct ibv_mr *mr;
	struct ibv_qp *marker;
	struct hello me, peer;
	struct round r;
	uint8_t *b;
	int fd;

	wire_open(&d, 256);
	b = calloc(1, BUF);
	if (!b)
		wire_die("resources");
	mr = ibv_reg_mr(d.pd, b, BUF, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		wire_die("reg mr");
	marker = wire_qp(d.pd, d.cq, IBV_QPT_RC, 64, 4);
	fd = wire_accept(wire_listen(port));
	wire_gid(d.ctx, me.gid);
	me.marker_qpn = marker->qp_num;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)b;
	for (uint32_t k = 0;; k++) {
		struct ibv_qp *qp;
		uint32_t ok = 1;

		wire_get(fd, &r, sizeof(r));
		if (!r.type)
			break;
		memset(b, 0, BUF);
		qp = wire_qp(d.pd, d.cq, (enum ibv_qp_type)r.type, 64, 4);
		me.qpn = qp->qp_num;
		wire_put(fd, &me, sizeof(me));
		wire_get(fd, &peer, sizeof(peer));
		wire_rts(qp, peer.qpn, peer.gid);
		if (!k)
			wire_rts(marker, peer.marker_qpn, peer.gid);
		wire_put(fd, &ok, sizeof(ok));
		/* the client's completions and its marker are in */
		wire_get(fd, &ok, sizeof(ok));
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
		wire_put(fd, &ok, sizeof(ok));
		if (!ok)
			return 1;
		if (ibv_destroy_qp(qp))
			wire_die("destroy qp");
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
	struct wire_dev d;
	long pg = sysconf(_SC_PAGESIZE);
	struct ibv_send_wr wr[64], *badwr;
	struct ibv_sge sge[64];
	struct ibv_mr *good_mr, *mark_mr;
	struct ibv_qp *marker;
	struct hello me, srv;
	uint8_t *good, *mark;
	uint32_t ok;
	int fd;

	wire_open(&d, 256);
	good = calloc(1, BUF);
	mark = calloc(1, 64);
	if (!good || !mark)
		wire_die("resources");
	good_mr = ibv_reg_mr(d.pd, good, BUF, IBV_ACCESS_LOCAL_WRITE);
	mark_mr = ibv_reg_mr(d.pd, mark, 64, IBV_ACCESS_LOCAL_WRITE);
	if (!good_mr || !mark_mr)
		wire_die("reg mr");
	marker = wire_qp(d.pd, d.cq, IBV_QPT_RC, 64, 4);
	fd = wire_connect(host, port, 100);
	wire_gid(d.ctx, me.gid);
	me.marker_qpn = marker->qp_num;
	for (uint32_t k = 0; k < sizeof(rounds) / sizeof(rounds[0]); k++) {
		const struct round *r = &rounds[k];
		uint8_t *two;
		struct ibv_mr *bad_mr;
		struct ibv_qp *qp;
		struct ibv_wc wc;
		uint32_t from;

		wire_put(fd, r, sizeof(*r));
		/* two pages registered, the second unmapped after */
		two = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (two == MAP_FAILED)
			wire_die("mmap");
		memset(two, 0xee, 2 * (size_t)pg);
		bad_mr = ibv_reg_mr(d.pd, two, 2 * (size_t)pg,
				    IBV_ACCESS_LOCAL_WRITE);
		if (!bad_mr || munmap(two + pg, (size_t)pg))
			wire_die("reg mr / munmap");
		/* the hole kept a hole: an inaccessible page of nothing, so
		 * that no allocation of ours (the QP's below, the sanitizer's)
		 * lands there and makes it readable again */
		if (mmap(two + pg, (size_t)pg, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
			 0) != two + pg)
			wire_die("reserve the hole");
		qp = wire_qp(d.pd, d.cq, (enum ibv_qp_type)r->type, 64, 4);
		me.qpn = qp->qp_num;
		wire_get(fd, &srv, sizeof(srv));
		wire_put(fd, &me, sizeof(me));
		wire_rts(qp, srv.qpn, srv.gid);
		if (!k)
			wire_rts(marker, srv.marker_qpn, srv.gid);
		wire_get(fd, &ok, sizeof(ok));

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
			wire_die("post send");
		for (uint32_t i = 0; i < r->n; i++) {
			enum ibv_wc_status want =
				i < r->bad ? IBV_WC_SUCCESS :
				i == r->bad ? IBV_WC_LOC_PROT_ERR :
					      IBV_WC_WR_FLUSH_ERR;

			if (vu_poll(d.cq, &wc, 1, WAIT) != 1)
				wire_die("no completion");
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
			wire_die("post marker");
		if (vu_poll(d.cq, &wc, 1, WAIT) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			wire_die("marker");
		wire_put(fd, &ok, sizeof(ok));
		wire_get(fd, &ok, sizeof(ok));
		if (!ok)
			wire_die("the server found bytes it should not have");
		printf("round %u: %s, %u WRITEs of %u B, WRITE %u unreadable%s: "
		       "%u done, 1 LOC_PROT_ERR, %u flushed, nothing after "
		       "it landed\n", k, r->type == IBV_QPT_RC ? "RC" : "UC",
		       r->n, r->len, r->bad,
		       r->straddle ? " (from its middle on)" : "",
		       r->bad, r->n - r->bad - 1);
		if (ibv_destroy_qp(qp) || ibv_dereg_mr(bad_mr))
			wire_die("destroy");
		munmap(two, (size_t)pg);
	}
	{
		struct round end = { 0, 0, 0, 0, 0 };

		wire_put(fd, &end, sizeof(end));
	}
	printf("PASS: client\n");
	return 0;
}

int main(int argc, char **argv)
{
	wire_prog = "sv_badmem_wire";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	fprintf(stderr, "usage: sv_badmem_wire server PORT | client HOST PORT\n");
	return 2;
}
