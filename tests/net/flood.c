// SPDX-License-Identifier: MIT
/*
 * A RoCEv2 flooder for the flood test (issue 21, 6): UDP datagrams to port
 * 4791 of DST from SRC, as fast as it can send them (sendmmsg, 64 at a
 * time), until COUNT were sent or SECONDS passed. Six kinds in turn:
 *   random   random bytes, 16 to 1,024 of them (bad ICRC, or malformed)
 *   icrc     a well-formed request whose ICRC is wrong
 *   short    a RETH request cut short, its ICRC right (malformed)
 *   pkey     a well-formed request to a QPN given, P_Key 0x7fff
 *   qpn      a well-formed request to a random QPN (no such QP)
 *   forged   a well-formed request or ACK to a QPN given (a live QP), a
 *            random PSN, the ICRC right: from an address that is not the
 *            QP's peer
 * (the ICRC with the helpers of src/device/roce/icrc.c). It prints what it
 * sent of each kind. Only ever sends to DST, which the test made.
 *
 *   sv_flood SRC_IP DST_IP COUNT SECONDS [QPN...]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "device/roce/net.h"
#include "device/roce/wire.h"

#define BATCH 64
#define MAXQ  16

enum kind { K_RANDOM, K_ICRC, K_SHORT, K_PKEY, K_QPN, K_FORGED, K_MAX };
static const char *const kind_name[K_MAX] = {
	"random", "icrc", "short", "pkey", "qpn", "forged",
};

static uint64_t rs = 0x853c49e6748fea9bull;

static uint32_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (uint32_t)(rs >> 16);
}

static void gid_v4(uint8_t g[16], struct in_addr a)
{
	memset(g, 0, 10);
	g[10] = g[11] = 0xff;
	memcpy(g + 12, &a, 4);
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A well-formed request (or ACK) to qpn with random fields: its length
 * without ICRC; the header at b. */
static size_t request(uint8_t *b, uint32_t qpn, uint16_t pkey)
{
	static const uint8_t ops[] = {
		SV_OP_RC_SEND_ONLY, SV_OP_RC_WRITE_ONLY,
		SV_OP_RC_READ_REQ, SV_OP_RC_ACK,
		SV_OP_UC_SEND_ONLY, SV_OP_UD_SEND_ONLY,
	};
	struct sv_roce_pkt p;
	size_t hdr, pay;

	memset(&p, 0, sizeof(p));
	p.opcode = ops[rnd() % sizeof(ops)];
	p.pkey = pkey;
	p.dqpn = qpn & 0xffffff;
	p.psn = rnd() & 0xffffff;
	p.ackreq = true;
	p.va = (uint64_t)rnd() << 32 | rnd();
	p.rkey = rnd();
	p.dmalen = 64;
	p.qkey = rnd();
	p.sqpn = rnd() & 0xffffff;
	hdr = sv_roce_build_hdr(b, &p);
	pay = (p.opcode == SV_OP_RC_READ_REQ ||
	       p.opcode == SV_OP_RC_ACK) ? 0 :
	      p.opcode == SV_OP_RC_WRITE_ONLY ? 64 : 8 + rnd() % 256;
	for (size_t i = 0; i < pay; i++)
		b[hdr + i] = (uint8_t)rnd();
	return hdr + pay;
}

int main(int argc, char **argv)
{
	static uint8_t pkt[BATCH][SV_NET_MAX_PKT];
	struct sockaddr_in src = { .sin_family = AF_INET },
			   dst = { .sin_family = AF_INET };
	struct mmsghdr msg[BATCH];
	struct iovec iov[BATCH];
	unsigned long long sent[K_MAX] = { 0 }, total = 0, count;
	uint32_t qpn[MAXQ];
	unsigned int nq = 0;
	struct sv_roce_ip ip;
	socklen_t sl = sizeof(src);
	long t0, limit;
	int fd;

	if (argc < 5 || !inet_pton(AF_INET, argv[1], &src.sin_addr) ||
	    !inet_pton(AF_INET, argv[2], &dst.sin_addr)) {
		fprintf(stderr, "usage: sv_flood SRC_IP DST_IP COUNT SECONDS "
			"[QPN...]\n");
		return 2;
	}
	count = strtoull(argv[3], NULL, 0);
	limit = atol(argv[4]) * 1000;
	for (int i = 5; i < argc && nq < MAXQ; i++)
		qpn[nq++] = (uint32_t)strtoul(argv[i], NULL, 0);
	if (!nq)
		qpn[nq++] = 2;
	rs ^= (uint64_t)getpid() << 20;
	dst.sin_port = htons(4791);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof(src)) ||
	    getsockname(fd, (struct sockaddr *)&src, &sl) ||
	    connect(fd, (struct sockaddr *)&dst, sizeof(dst))) {
		perror("sv_flood: socket");
		return 1;
	}
	memset(&ip, 0, sizeof(ip));
	gid_v4(ip.src, src.sin_addr);
	gid_v4(ip.dst, dst.sin_addr);
	ip.sport = ntohs(src.sin_port);
	ip.dport = 4791;
	ip.df = true;
	memset(msg, 0, sizeof(msg));
	t0 = now_ms();
	while (total < count && now_ms() - t0 < limit) {
		unsigned int n = 0;
		int r;

		for (; n < BATCH && total + n < count; n++) {
			enum kind k = (enum kind)((total + n) % K_MAX);
			uint8_t *b = pkt[n];
			size_t len;

			switch (k) {
			case K_RANDOM:
				len = 16 + rnd() % 1009;
				for (size_t i = 0; i < len; i++)
					b[i] = (uint8_t)rnd();
				break;
			case K_ICRC:
				len = sv_roce_finish(b, request(b, qpn[rnd() % nq],
								0xffff), &ip);
				b[len - 1] ^= 0x5a;
				break;
			case K_SHORT: {
				struct sv_roce_pkt p;

				memset(&p, 0, sizeof(p));
				p.opcode = SV_OP_RC_WRITE_ONLY;
				p.pkey = 0xffff;
				p.dqpn = qpn[rnd() % nq];
				p.psn = rnd() & 0xffffff;
				(void)sv_roce_build_hdr(b, &p);
				/* BTH and half a RETH */
				len = sv_roce_finish(b, SV_BTH_BYTES + 8, &ip);
				break;
			}
			case K_PKEY:
				len = sv_roce_finish(b, request(b, qpn[rnd() % nq],
								0x7fff), &ip);
				break;
			case K_QPN:
				len = sv_roce_finish(b, request(b, 2 + rnd() %
								0xfffffd,
								0xffff), &ip);
				break;
			default:
				len = sv_roce_finish(b, request(b, qpn[rnd() % nq],
								0xffff), &ip);
				break;
			}
			iov[n].iov_base = b;
			iov[n].iov_len = len;
			msg[n].msg_hdr.msg_iov = &iov[n];
			msg[n].msg_hdr.msg_iovlen = 1;
		}
		r = sendmmsg(fd, msg, n, 0);
		if (r < 0)
			continue;       /* ENOBUFS and the like: try again */
		for (int i = 0; i < r; i++)
			sent[(total + (unsigned int)i) % K_MAX]++;
		total += (unsigned int)r;
	}
	printf("flood: sent %llu in %ld ms:", total, now_ms() - t0);
	for (int k = 0; k < K_MAX; k++)
		printf(" %s %llu", kind_name[k], sent[k]);
	printf("\n");
	close(fd);
	return 0;
}
