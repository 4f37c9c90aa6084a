// SPDX-License-Identifier: MIT
/*
 * Guessing rkeys from inside the PD (issue 21, 7). The server holds NMR MRs
 * (10,000), every one over the same buffer of canary cells with remote read
 * and write, and P RC QPs of that PD, connected to the client's. It tells
 * the client one live rkey (as a peer would know one) and the buffer's
 * address. The client, the attacker, fires RDMA WRITEs and READs of 8 bytes
 * at the buffer with keys it makes up:
 *   - near: every consumer key of the NEAR indices on each side of the
 *     known key's index (on sequential indices these are the other MRs);
 *   - random: uniformly random 32-bit keys.
 * A WRITE carries the key it uses, so a WRITE that lands leaves that key in
 * its cell. A refused key takes both QPs to the error state; after each
 * round (one WR per QP) both sides take those QPs back to RTS.
 *
 * With N live keys among 2^32, any made-up key is live with probability
 * N / 2^32 whatever the scheme: the client prints the expected number of
 * chance hits and fails if more than MAX_HITS keys were accepted. The server
 * fails if a cell holds anything but its canary or a live key (memory that
 * a refused key changed), or if the cells that changed are not exactly the
 * WRITEs the client saw succeed.
 *
 *   sv_keyguess server PORT [NMR]
 *   sv_keyguess client HOST PORT [RANDOM_DRAWS]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vu.h"
#include "wire_setup.h"

#define P         16                 /* QP pairs: WRs per round */
#define CELLS     8192u              /* 8-byte cells in the buffer */
#define BUF       (CELLS * 8u)
#define NEAR      4                  /* indices on each side of the known */
#define MAX_HITS  3
#define WAIT      20000
#define CANARY(i) (0xc0ffee0000000000ull | (uint64_t)(i))

struct hello {
	uint32_t qpn[P];
	uint8_t gid[16];
	uint32_t rkey;             /* server: one live key */
	uint32_t nmr;
	uint64_t addr;             /* server: the buffer */
};

/* client -> server after a round: which QPs to bring back; 0 ends */
struct round {
	uint32_t more;
	uint32_t reset;            /* bit i: QP i failed */
	uint32_t writes_ok;        /* end: WRITEs that succeeded */
	uint32_t rsvd;
};

struct side {
	struct wire_dev d;
	struct ibv_qp *qp[P];
	struct hello me, peer;
};

static void side_open(struct side *s)
{
	wire_open(&s->d, 4 * P);
	wire_gid(s->d.ctx, s->me.gid);
	for (int i = 0; i < P; i++) {
		s->qp[i] = wire_qp(s->d.pd, s->d.cq, IBV_QPT_RC, 4, 1);
		s->me.qpn[i] = s->qp[i]->qp_num;
	}
}

/* QP i to RESET, then connected again to the peer's QP i. */
static void reconnect(struct side *s, int i)
{
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	struct vu_conn c = vu_conn_default();
	struct vu_addr peer = { .qpn = s->peer.qpn[i], .psn = c.sq_psn };

	c.retry_cnt = 1;
	memcpy(peer.gid.raw, s->peer.gid, 16);
	if (ibv_modify_qp(s->qp[i], &r, IBV_QP_STATE) ||
	    vu_connect(s->qp[i], &peer, &c))
		wire_die("connect qp");
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int server(const char *port, uint32_t nmr)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ;
	struct side s = { 0 };
	struct ibv_mr **mr = calloc(nmr, sizeof(*mr));
	uint32_t *keys = calloc(nmr, sizeof(*keys));
	uint64_t *buf = aligned_alloc(4096, BUF);
	struct round rd;
	uint32_t changed = 0, rounds = 0;
	int ls, fd, one = 1;

	if (!mr || !keys || !buf)
		wire_die("memory");
	side_open(&s);
	for (uint32_t i = 0; i < CELLS; i++)
		buf[i] = CANARY(i);
	for (uint32_t i = 0; i < nmr; i++) {
		mr[i] = ibv_reg_mr(s.d.pd, buf, BUF, rw);
		if (!mr[i])
			wire_die("reg mr");
		keys[i] = mr[i]->rkey;
	}
	s.me.rkey = keys[nmr / 2];
	s.me.nmr = nmr;
	s.me.addr = (uintptr_t)buf;
	qsort(keys, nmr, sizeof(*keys), cmp_u32);

	ls = wire_listen(port);
	printf("listening\n");
	fflush(stdout);
	fd = wire_accept(ls);
	wire_put(fd, &s.me, sizeof(s.me));
	wire_get(fd, &s.peer, sizeof(s.peer));
	for (int i = 0; i < P; i++)
		reconnect(&s, i);
	wire_put(fd, &one, sizeof(one));
	for (;;) {
		wire_get(fd, &rd, sizeof(rd));
		if (!rd.more)
			break;
		for (int i = 0; i < P; i++) {
			if (rd.reset & (1u << i))
				reconnect(&s, i);
			else if (vu_qp_state(s.qp[i]) != IBV_QPS_RTS)
				wire_die("a QP whose WR succeeded is not in "
					 "RTS");
		}
		rounds++;
		wire_put(fd, &one, sizeof(one));
	}
	/* every cell holds its canary, or a live key a WRITE left there */
	for (uint32_t i = 0; i < CELLS; i++) {
		uint32_t k = (uint32_t)buf[i];

		if (buf[i] == CANARY(i))
			continue;
		if (buf[i] >> 32 ||
		    !bsearch(&k, keys, nmr, sizeof(k), cmp_u32)) {
			fprintf(stderr, "sv_keyguess: cell %u is 0x%016" PRIx64
				": a refused key changed memory\n", i, buf[i]);
			exit(1);
		}
		printf("cell %u: a WRITE with live key 0x%08x landed\n", i, k);
		changed++;
	}
	if (changed != rd.writes_ok) {
		fprintf(stderr, "sv_keyguess: %u cells changed, the client saw "
			"%u WRITEs succeed\n", changed, rd.writes_ok);
		exit(1);
	}
	for (uint32_t i = 0; i < nmr; i++)
		if (ibv_dereg_mr(mr[i]))
			wire_die("dereg mr");
	printf("PASS: server: %u MRs, %u rounds, %u cells changed, each by a "
	       "WRITE that succeeded with a live key\n", nmr, rounds, changed);
	return 0;
}

static uint64_t rs = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (uint32_t)(rs >> 16);
}

static int client(const char *host, const char *port, uint32_t ndraws)
{
	const uint32_t nnear = 2 * NEAR * 256;
	const uint32_t total = nnear + ndraws;
	struct side s = { 0 };
	uint64_t *src = aligned_alloc(64, 8 * P), *dst = aligned_alloc(64, 8 * P);
	struct ibv_mr *lm, *dm;
	struct round rd = { 0 };
	uint32_t next = 0, hits_near = 0, hits_rand = 0, writes_ok = 0, ack;
	int fd = -1;
	long t0;

	if (!src || !dst)
		wire_die("memory");
	rs ^= (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
	side_open(&s);
	lm = ibv_reg_mr(s.d.pd, src, 8 * P, IBV_ACCESS_LOCAL_WRITE);
	dm = ibv_reg_mr(s.d.pd, dst, 8 * P, IBV_ACCESS_LOCAL_WRITE);
	if (!lm || !dm)
		wire_die("setup");
	fd = wire_connect(host, port, 100);
	wire_get(fd, &s.peer, sizeof(s.peer));
	wire_put(fd, &s.me, sizeof(s.me));
	for (int i = 0; i < P; i++)
		reconnect(&s, i);
	wire_get(fd, &ack, sizeof(ack));
	t0 = vu_now_ms();
	while (next < total) {
		uint32_t key[P], n = 0;
		bool rd_op[P];

		rd.reset = 0;
		for (int i = 0; i < P && next < total; i++, next++, n++) {
			uint32_t k;

			if (next < nnear) {
				/* index known +- 1..NEAR, every consumer key */
				uint32_t j = next / 256, ck = next % 256;
				int32_t d = j < NEAR ? -(int32_t)j - 1 :
						       (int32_t)(j - NEAR) + 1;

				k = ((s.peer.rkey >> 8) + (uint32_t)d) << 8 | ck;
			} else {
				do
					k = rnd();
				while (k == s.peer.rkey);
			}
			key[i] = k;
			rd_op[i] = next & 1;
			src[i] = k;
			dst[i] = 0;
			struct ibv_sge sge = {
				(uintptr_t)(rd_op[i] ? &dst[i] : &src[i]), 8,
				rd_op[i] ? dm->lkey : lm->lkey };
			struct ibv_send_wr wr = {
				.wr_id = (uint64_t)i, .sg_list = &sge,
				.num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
				.opcode = rd_op[i] ? IBV_WR_RDMA_READ :
						     IBV_WR_RDMA_WRITE,
				.wr.rdma = { s.peer.addr + 8 * (next % CELLS),
					     k },
			}, *bad;

			if (ibv_post_send(s.qp[i], &wr, &bad))
				wire_die("post send");
		}
		for (uint32_t got = 0; got < n;) {
			struct ibv_wc wc[P];
			int c = vu_poll(s.d.cq, wc, P, WAIT);

			if (c <= 0)
				wire_die("no completion");
			for (int j = 0; j < c; j++) {
				uint32_t i = (uint32_t)wc[j].wr_id;
				bool nearkey = next - n + i < nnear;

				if (wc[j].status == IBV_WC_SUCCESS) {
					printf("key 0x%08x (%s) accepted by "
					       "a %s\n", key[i],
					       nearkey ? "near" : "random",
					       rd_op[i] ? "READ" : "WRITE");
					*(nearkey ? &hits_near : &hits_rand) += 1;
					writes_ok += !rd_op[i];
					if (rd_op[i] && (dst[i] >> 32) !=
					    (CANARY(0) >> 32) &&
					    (dst[i] >> 32))
						wire_die("a READ brought back "
						    "neither canary nor key");
				} else if (wc[j].status ==
					   IBV_WC_REM_ACCESS_ERR) {
					rd.reset |= 1u << i;
				} else {
					fprintf(stderr, "sv_keyguess: key "
						"0x%08x: %s\n", key[i],
						ibv_wc_status_str(wc[j].status));
					exit(1);
				}
			}
			got += (uint32_t)c;
		}
		for (int i = 0; i < P; i++)
			if (rd.reset & (1u << i))
				reconnect(&s, i);
		rd.more = 1;
		wire_put(fd, &rd, sizeof(rd));
		wire_get(fd, &ack, sizeof(ack));
	}
	rd.more = 0;
	rd.writes_ok = writes_ok;
	wire_put(fd, &rd, sizeof(rd));
	printf("%u near keys (every consumer key of %d indices each side of a "
	       "known one): %u accepted, %.4f expected by chance\n", nnear,
	       NEAR, hits_near, (double)nnear * s.peer.nmr / 4294967296.0);
	printf("%u random keys: %u accepted, %.4f expected by chance "
	       "(%ld ms)\n", ndraws, hits_rand,
	       (double)ndraws * s.peer.nmr / 4294967296.0, vu_now_ms() - t0);
	if (hits_near + hits_rand > MAX_HITS) {
		fprintf(stderr, "sv_keyguess: %u keys guessed (at most %d "
			"by chance)\n", hits_near + hits_rand, MAX_HITS);
		return 1;
	}
	printf("PASS: client\n");
	return 0;
}

int main(int argc, char **argv)
{
	wire_prog = "sv_keyguess";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && !strcmp(argv[1], "server"))
		return server(argv[2], argc > 3 ? (uint32_t)atoi(argv[3])
						: 10000);
	if (argc >= 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], argc > 4 ?
			      (uint32_t)strtoul(argv[4], NULL, 0) : 20000);
	fprintf(stderr, "usage: sv_keyguess server PORT [NMR] | "
		"sv_keyguess client HOST PORT [RANDOM_DRAWS]\n");
	return 2;
}
