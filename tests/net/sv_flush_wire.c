// SPDX-License-Identifier: MIT
/*
 * RDMA FLUSH from a raw RoCEv2 peer (issue 23, Deliver 4): the peer is this
 * program, not a device, so the packets are exactly those Linux 6.2+ rxe
 * sends (BTH, FETH, RETH; opcode 0x1C) and the answers are read off the
 * wire.
 *
 *   sv_flush_wire server PEER_IP DQPN PSN   (through sv0, in the host with
 *       a device) an RC QP towards PEER_IP's QP DQPN, expecting PSN; an MR
 *       with FLUSH_GLOBAL access and one without. Prints
 *       "qpn VA RKEY VA2 RKEY2", then waits for a line on stdin and checks
 *       that the peer's WRITE landed.
 *   sv_flush_wire peer SRC_IP DST_IP SQPN PSN DQPN VA RKEY VA2 RKEY2
 *       (in the other host, no device there: UDP port 4791 is its own)
 *       sends, each answer checked:
 *        1. WRITE ONLY of 16 bytes, AckReq               -> ACK
 *        2. FLUSH global, range (the 16 bytes)           -> READ RESPONSE
 *           ONLY, zero length, AETH ACK, its PSN
 *        3. the same FLUSH again (a duplicate)           -> the same answer,
 *           not executed again (the MSN does not move)
 *        4. FLUSH global, whole MR                       -> READ RESPONSE
 *        5. FLUSH of an MR without the FLUSH_GLOBAL right -> NAK remote
 *           access error; the QP is in error after it
 * (FLUSH_PERSISTENT: no MR can have it, the server checks, as the device
 * has no persistent memory.)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "device/roce/net.h"
#include "device/roce/wire.h"
#include "vu.h"

#define CHECK VU_CHECK
#define ACCESS_FLUSH_GLOBAL (1u << 8)

static const char data[16] = "flushflushflush!";

static int server(const char *peer_ip, uint32_t dqpn, uint32_t psn)
{
	struct vu_conn c = vu_conn_default();
	struct ibv_context *ctx = vu_open();
	struct vu_qp_caps caps = { .send_wr = 4, .recv_wr = 4, .cqe = 16 };
	struct vu_addr peer = { .qpn = dqpn, .psn = psn };
	struct ibv_mr *mr, *mr2;
	struct in_addr a;
	struct vu_ep ep;
	char *buf, line[16];

	CHECK(ctx, "no sv0");
	CHECK(inet_pton(AF_INET, peer_ip, &a) == 1, "bad peer %s", peer_ip);
	peer.gid.raw[10] = peer.gid.raw[11] = 0xff;
	memcpy(&peer.gid.raw[12], &a, 4);
	buf = aligned_alloc(4096, 8192);
	CHECK(buf, "memory");
	memset(buf, 0, 8192);
	CHECK(!vu_ep_create(&ep, ctx, NULL, IBV_QPT_RC, &caps), "endpoint");
	mr = ibv_reg_mr(ep.pd, buf, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				ACCESS_FLUSH_GLOBAL);
	CHECK(mr, "an MR with FLUSH_GLOBAL: %s", strerror(errno));
	mr2 = ibv_reg_mr(ep.pd, buf + 4096, 4096,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr2, "ibv_reg_mr");
	errno = 0;
	CHECK(!ibv_reg_mr(ep.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | (1u << 9))
	      && errno == EOPNOTSUPP,
	      "an MR with FLUSH_PERSISTENT on memory that is not persistent");
	c.sq_psn = 5;
	CHECK(!vu_connect(ep.qp, &peer, &c), "connect");
	printf("%u %llu %u %llu %u\n", ep.qp->qp_num,
	       (unsigned long long)(uintptr_t)buf, mr->rkey,
	       (unsigned long long)(uintptr_t)(buf + 4096), mr2->rkey);
	fflush(stdout);
	CHECK(fgets(line, sizeof(line), stdin), "no word from the test");
	CHECK(!memcmp(buf, data, sizeof(data)), "the WRITE did not land");
	CHECK(vu_qp_state(ep.qp) == IBV_QPS_ERR,
	      "the QP is not in error after the NAK");
	ibv_dereg_mr(mr);
	ibv_dereg_mr(mr2);
	vu_ep_destroy(&ep);
	ibv_close_device(ctx);
	printf("server: the WRITE landed; the QP is in error after the NAK\n");
	return 0;
}

struct wire {
	int fd;
	struct sockaddr_in dst;    /* not connected: answers come from the
				    * QP's own source port */
	struct sv_roce_ip ip;
	uint32_t dqpn;
};

static void gid_v4(uint8_t g[16], struct in_addr a)
{
	memset(g, 0, 10);
	g[10] = g[11] = 0xff;
	memcpy(g + 12, &a, 4);
}

static void tx(struct wire *w, struct sv_roce_pkt *p, const void *pay,
	       size_t paylen)
{
	uint8_t b[256];
	size_t n;

	p->dqpn = w->dqpn;
	p->pkey = SV_PKEY_DEFAULT;
	n = sv_roce_build_hdr(b, p);
	CHECK(n, "build opcode %#x", p->opcode);
	if (paylen)
		memcpy(b + n, pay, paylen);
	n = sv_roce_finish(b, n + paylen, &w->ip);
	CHECK(sendto(w->fd, b, n, 0, (struct sockaddr *)&w->dst,
		     sizeof(w->dst)) == (ssize_t)n, "send: %s", strerror(errno));
}

/* The next packet for us: parsed into p (its ICRC not checked here: the
 * device computed it, unit tests check that). */
static void rx(struct wire *w, struct sv_roce_pkt *p, uint8_t *b,
	       const char *what)
{
	struct pollfd pf = { .fd = w->fd, .events = POLLIN };
	ssize_t n;

	CHECK(poll(&pf, 1, 5000) == 1, "%s: no answer in 5 s", what);
	n = recv(w->fd, b, 2048, 0);
	CHECK(n > 0 && !sv_roce_parse(b, (size_t)n, p), "%s: a bad packet",
	      what);
}

static void flush(struct wire *w, uint32_t psn, uint32_t plt, uint32_t sel,
		  uint64_t va, uint32_t rkey, uint32_t len)
{
	struct sv_roce_pkt p = { .opcode = SV_OP_RC_FLUSH, .psn = psn,
				 .ackreq = true, .va = va, .rkey = rkey,
				 .dmalen = len, .feth = sel << 4 | plt };

	tx(w, &p, NULL, 0);
}

static void read_ack(struct wire *w, uint32_t psn, uint32_t msn,
		     const char *what)
{
	struct sv_roce_pkt p;
	uint8_t b[2048];

	rx(w, &p, b, what);
	CHECK(p.opcode == SV_OP_RC_READ_RESP_ONLY && p.psn == psn &&
	      p.syndrome == SV_AETH_ACK && p.paylen == 0 && p.msn == msn,
	      "%s: opcode %#x psn %u syndrome %#x paylen %u msn %u", what,
	      p.opcode, p.psn, p.syndrome, p.paylen, p.msn);
}

static int peer(char **a)
{
	struct sockaddr_in src = { .sin_family = AF_INET,
				   .sin_port = htons(4791) },
			   dst = { .sin_family = AF_INET,
				   .sin_port = htons(4791) };
	uint32_t psn = (uint32_t)strtoul(a[3], NULL, 0);
	uint64_t va = strtoull(a[5], NULL, 0), va2 = strtoull(a[7], NULL, 0);
	uint32_t rkey = (uint32_t)strtoul(a[6], NULL, 0);
	uint32_t rkey2 = (uint32_t)strtoul(a[8], NULL, 0);
	struct sv_roce_pkt p;
	struct wire w;
	uint8_t b[2048];

	CHECK(inet_pton(AF_INET, a[0], &src.sin_addr) == 1 &&
	      inet_pton(AF_INET, a[1], &dst.sin_addr) == 1, "bad addresses");
	w.dqpn = (uint32_t)strtoul(a[4], NULL, 0);
	w.fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(w.fd >= 0 && !bind(w.fd, (struct sockaddr *)&src, sizeof(src)),
	      "udp 4791: %s", strerror(errno));
	w.dst = dst;
	memset(&w.ip, 0, sizeof(w.ip));
	gid_v4(w.ip.src, src.sin_addr);
	gid_v4(w.ip.dst, dst.sin_addr);
	w.ip.sport = 4791;
	w.ip.dport = 4791;
	w.ip.df = true;
	(void)a[2];

	/* 1. WRITE ONLY, AckReq: ACK, MSN 1 */
	p = (struct sv_roce_pkt){ .opcode = SV_OP_RC_WRITE_ONLY, .psn = psn,
				  .ackreq = true, .va = va, .rkey = rkey,
				  .dmalen = sizeof(data) };
	tx(&w, &p, data, sizeof(data));
	rx(&w, &p, b, "WRITE");
	CHECK(p.opcode == SV_OP_RC_ACK && p.psn == psn &&
	      p.syndrome == SV_AETH_ACK && p.msn == 1,
	      "WRITE: opcode %#x psn %u syndrome %#x msn %u", p.opcode, p.psn,
	      p.syndrome, p.msn);
	/* 2. FLUSH global, the WRITE's range: MSN 2 */
	flush(&w, psn + 1, SV_FLUSH_GLOBAL, SV_FLUSH_SEL_RANGE, va, rkey,
	      sizeof(data));
	read_ack(&w, psn + 1, 2, "FLUSH of a range");
	/* 3. the same again: answered, not executed (the MSN stays 2) */
	flush(&w, psn + 1, SV_FLUSH_GLOBAL, SV_FLUSH_SEL_RANGE, va, rkey,
	      sizeof(data));
	read_ack(&w, psn + 1, 2, "a duplicate FLUSH");
	/* 4. the whole MR: MSN 3 */
	flush(&w, psn + 2, SV_FLUSH_GLOBAL, SV_FLUSH_SEL_MR, va, rkey, 0);
	read_ack(&w, psn + 2, 3, "FLUSH of the MR");
	/* 5. an MR without FLUSH_GLOBAL: NAK remote access */
	flush(&w, psn + 3, SV_FLUSH_GLOBAL, SV_FLUSH_SEL_RANGE, va2, rkey2, 8);
	rx(&w, &p, b, "FLUSH without the right");
	CHECK(p.opcode == SV_OP_RC_ACK && p.psn == psn + 3 &&
	      p.syndrome == SV_AETH_NAK_ACCESS,
	      "FLUSH without the right: opcode %#x psn %u syndrome %#x",
	      p.opcode, p.psn, p.syndrome);
	close(w.fd);
	printf("PASS: flush: a WRITE, FLUSH of a range and of an MR, a "
	       "duplicate answered again, no right: NAK\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "server"))
		return server(argv[2], (uint32_t)strtoul(argv[3], NULL, 0),
			      (uint32_t)strtoul(argv[4], NULL, 0));
	if (argc == 11 && !strcmp(argv[1], "peer"))
		return peer(argv + 2);
	fprintf(stderr, "usage: sv_flush_wire server PEER_IP DQPN PSN | peer "
		"SRC_IP DST_IP SQPN PSN DQPN VA RKEY VA2 RKEY2\n");
	return 2;
}
