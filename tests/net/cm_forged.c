// SPDX-License-Identifier: MIT
/*
 * A host that speaks the CM's protocol by hand (tests/net/cm_forged_netns.sh):
 * bound to UDP port 4791 of its own address, it sends CM MADs to the
 * softverbsd at PEER and checks what comes back.
 *
 *   cm_forged SELF PEER
 *
 *   1. a REQ for a port nobody listens on: a REJ comes back, reason 8
 *      (invalid service ID), naming our comm id, "message rejected" REQ
 *   2. the same REQ again: the same REJ again (a REQ nobody took stays
 *      untaken)
 *   3. malformed MADs (class version 3, a bad attribute, a short datagram,
 *      a bad ICRC), a REP and a DREQ for comm ids nobody has, a Get: no
 *      answer to any of them (the daemon drops and counts them)
 *   4. a REQ whose private data has no RDMA CM header: a REJ, reason 8
 *
 * Exit 0 when all of it held; prints what it saw.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device/cm/mad.h"

static int sock;
static struct sockaddr_in self, peer;
static struct sv_roce_ip ip_out, ip_in;

static void gid_of(const struct sockaddr_in *sa, uint8_t gid[16])
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, &sa->sin_addr, 4);
}

static void send_raw(const uint8_t *buf, size_t len)
{
	if (sendto(sock, buf, len, 0, (const struct sockaddr *)&peer,
		   sizeof(peer)) != (ssize_t)len) {
		perror("sendto");
		exit(1);
	}
}

static void send_mad(const uint8_t mad[SV_MAD_BYTES])
{
	uint8_t buf[SV_CM_DGRAM_BYTES + 16];
	size_t n = sv_cm_dgram_build(buf, mad, 0xffff, 1, &ip_out);

	send_raw(buf, n);
}

/* The next MAD from the peer within ms, decoded: 0, or -1 when none came. */
static int recv_mad(int ms, struct sv_cm_mad *m)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	uint8_t buf[2048];
	struct sv_roce_pkt pkt;
	const uint8_t *mad;
	ssize_t n;

	struct sockaddr_in from;
	socklen_t fl;

	while (poll(&p, 1, ms) == 1) {
		fl = sizeof(from);
		n = recvfrom(sock, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n <= 0)
			continue;
		ip_in.sport = ntohs(from.sin_port);   /* the ICRC covers it */
		if (sv_cm_dgram_parse(buf, (size_t)n, &ip_in, &pkt, &mad)) {
			printf("  (a datagram that is not a good MAD to QP1: %zd bytes)\n", n);
			return -2;
		}
		if (sv_cm_decode(mad, SV_MAD_BYTES, 0, m)) {
			printf("  (a MAD that does not decode)\n");
			return -2;
		}
		return 0;
	}
	return -1;
}

static void req_for(uint8_t out[SV_MAD_BYTES], uint32_t comm, uint16_t port,
		    bool with_hdr)
{
	struct sv_cm_mad m;
	struct sv_cma_hdr h;

	sv_cm_mad_init(&m, SV_CM_ATTR_REQ, 0x1234000000000000ull | comm);
	m.req.local_comm_id = comm;
	m.req.service_id = sv_cm_service_id(SV_RDMA_PS_TCP, port);
	m.req.local_qpn = 0x123;
	m.req.starting_psn = 0x4567;
	m.req.pkey = 0xffff;
	m.req.path_mtu = SV_CM_MTU_1024;
	m.req.retry_count = 7;
	m.req.rnr_retry_count = 7;
	m.req.max_cm_retries = 15;
	m.req.remote_cm_response_timeout = 20;
	m.req.local_cm_response_timeout = 20;
	m.req.primary.local_lid = m.req.primary.remote_lid = 0xffff;
	gid_of(&self, m.req.primary.local_gid);
	gid_of(&peer, m.req.primary.remote_gid);
	m.req.primary.hop_limit = 64;
	if (with_hdr) {
		memset(&h, 0, sizeof(h));
		h.ip_version = 4;
		h.src_port = 40000;
		gid_of(&self, h.src);
		gid_of(&peer, h.dst);
		if (sv_cma_hdr_build(m.req.private_data, &h))
			abort();
	}
	if (sv_cm_encode(&m, out)) {
		fprintf(stderr, "cannot encode the REQ\n");
		exit(1);
	}
}

static int fails;

static void check(bool ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAILED", what);
	if (!ok)
		fails++;
}

static void expect_rej8(uint32_t comm, const char *what)
{
	struct sv_cm_mad m;
	int r = recv_mad(3000, &m);

	if (r) {
		check(false, what);
		return;
	}
	printf("  got %s: reason %u, remote comm 0x%x, message rejected %u\n",
	       sv_cm_attr_name(m.attr_id), m.rej.reason, m.rej.remote_comm_id,
	       m.rej.message_rejected);
	check(m.attr_id == SV_CM_ATTR_REJ &&
	      m.rej.reason == SV_CM_REJ_INVALID_SERVICE_ID &&
	      m.rej.remote_comm_id == comm && m.rej.local_comm_id == 0 &&
	      m.rej.message_rejected == SV_CM_MSG_REQ &&
	      m.tid == (0x1234000000000000ull | comm), what);
}

int main(int argc, char **argv)
{
	uint8_t mad[SV_MAD_BYTES], buf[SV_CM_DGRAM_BYTES + 16];
	struct sv_cm_mad m;
	size_t n;

	if (argc != 3) {
		fprintf(stderr, "usage: cm_forged SELF PEER\n");
		return 2;
	}
	self.sin_family = peer.sin_family = AF_INET;
	self.sin_port = peer.sin_port = htons(4791);
	if (inet_pton(AF_INET, argv[1], &self.sin_addr) != 1 ||
	    inet_pton(AF_INET, argv[2], &peer.sin_addr) != 1)
		return 2;
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&self, sizeof(self))) {
		perror("bind to port 4791");
		return 1;
	}
	memset(&ip_out, 0, sizeof(ip_out));
	gid_of(&self, ip_out.src);
	gid_of(&peer, ip_out.dst);
	ip_out.sport = ip_out.dport = 4791;
	ip_out.df = true;
	/* the kernel fills in the IP ID on our unconnected socket with DF: 0 */
	ip_in = ip_out;
	memcpy(ip_in.src, ip_out.dst, 16);
	memcpy(ip_in.dst, ip_out.src, 16);

	/* 1, 2: a REQ for nobody, twice */
	req_for(mad, 0x0badc0de, 9999, true);
	send_mad(mad);
	expect_rej8(0x0badc0de, "a REQ for a port nobody listens on: REJ, reason 8");
	send_mad(mad);
	expect_rej8(0x0badc0de, "the same REQ again: the same REJ");

	/* 3: malformed and forged: no answer */
	memcpy(buf, mad, sizeof(mad));
	buf[2] = 3;                                  /* class version 3 */
	send_mad(buf);
	memcpy(buf, mad, sizeof(mad));
	buf[16] = 0x7f;                              /* attribute 0x7f10 */
	send_mad(buf);
	n = sv_cm_dgram_build(buf, mad, 0xffff, 2, &ip_out);
	send_raw(buf, n - 100);                      /* short */
	n = sv_cm_dgram_build(buf, mad, 0xffff, 3, &ip_out);
	buf[n - 1] ^= 0x55;                          /* bad ICRC */
	send_raw(buf, n);
	sv_cm_mad_init(&m, SV_CM_ATTR_REP, 7);       /* a REP for nobody */
	m.rep.local_comm_id = 0x1111;
	m.rep.remote_comm_id = 0x7fff1234;
	if (sv_cm_encode(&m, mad))
		return 1;
	send_mad(mad);
	sv_cm_mad_init(&m, SV_CM_ATTR_DREQ, 8);      /* a DREQ for nobody */
	m.dreq.local_comm_id = 0x1111;
	m.dreq.remote_comm_id = 0x5a5a5a5a;
	if (sv_cm_encode(&m, mad))
		return 1;
	send_mad(mad);
	sv_cm_mad_init(&m, SV_CM_ATTR_CLASS_PORT_INFO, 9);
	m.method = SV_MAD_METHOD_GET;                /* a Get: not served */
	if (sv_cm_encode(&m, mad))
		return 1;
	send_mad(mad);
	check(recv_mad(1500, &m) == -1,
	      "malformed MADs, a bad ICRC, a REP and a DREQ for nobody, a Get: no answer");

	/* 4: a REQ without the RDMA CM's header */
	req_for(mad, 0x0badc0df, 9999, false);
	send_mad(mad);
	expect_rej8(0x0badc0df, "a REQ without an RDMA CM header: REJ, reason 8");
	close(sock);
	printf("%d checks failed\n", fails);
	return fails ? 1 : 0;
}
