// SPDX-License-Identifier: MIT
/*
 * RC traffic with every byte checked, between two processes that may be on
 * two hosts (two network namespaces): for the fault-injection tests and
 * the soak. The client drives rounds of
 *   - an RDMA WRITE of CHUNK bytes of a fresh pattern into the server's
 *     buffer, then an RDMA READ of them back, compared byte by byte (the
 *     READ proves the WRITE landed whole, and is itself checked);
 *   - SENDs of 64 KiB (a fresh pattern each, its round and index in the
 *     first 16 bytes) that the server checks byte by byte as they arrive;
 * until BYTES bytes went each of the three ways. Before the rounds, the
 * client binds a memory window (an operation of the requester alone, in
 * order with the wire's WQEs), then drains its send queue: 4 WRITEs
 * posted, the QP moved to SQD, the SQ_DRAINED event awaited (what
 * completed by then completed well), back to RTS, the rest completes in
 * order. A completion error, a
 * byte wrong, or 60 s with no completion ends it with exit status 1 and a
 * message; the server says how many SENDs it checked.
 *
 *   sv_stress server PORT
 *   sv_stress client HOST PORT BYTES [CHUNK]
 *
 * Addresses are exchanged over TCP (qpn, psn, gid, rkey, addr).
 * $SV_STRESS_TIMEOUT: the QPs' local ACK timeout (IBA encoding; 14).
 * $SV_STRESS_RNR_STALL_MS: the server waits this long after its first
 * SEND before it goes on (and posts receives again): the client's SENDs
 * past the receives posted meet RNR NAKs all that time, which its
 * rnr_retry of 7 must wait out however many local ACK timeouts it lasts.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vu.h"

#define BUF_BYTES  (8u << 20)       /* per side: src half, dst half */
#define SEND_BYTES (64u << 10)
#define NRECV      32u
#define WAIT_MS    60000

struct wire_info {
	uint32_t qpn, psn, rkey, pad;
	uint64_t addr;
	uint8_t gid[16];
};

static void die(const char *what)
{
	fprintf(stderr, "sv_stress: %s\n", what);
	exit(1);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* n bytes (a multiple of 8) of the pattern named by seed */
static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t s = mix(seed) | 1;

	for (size_t i = 0; i < n; i += 8) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		memcpy(p + i, &s, 8);
	}
}

static size_t check(const uint8_t *p, size_t n, uint64_t seed)
{
	static uint8_t *ref;
	static size_t ref_n;

	if (ref_n < n) {
		free(ref);
		ref = malloc(n);
		if (!ref)
			die("out of memory");
		ref_n = n;
	}
	fill(ref, n, seed);
	for (size_t i = 0; i < n; i++)
		if (p[i] != ref[i])
			return i;
	return SIZE_MAX;
}

static int tcp_server(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0), c;

	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 1))
		die("cannot listen");
	c = accept(s, NULL, NULL);
	close(s);
	if (c < 0)
		die("accept");
	return c;
}

static int tcp_client(const char *host, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	int s;

	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		die("bad host address");
	for (int i = 0; i < 100; i++) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			return s;
		close(s);
		vu_sleep_ms(100);
	}
	die("cannot connect");
	return -1;
}

static void xfer(int fd, void *p, size_t n, bool out)
{
	if (vu_xfer(fd, p, n, out))
		die("the TCP exchange broke");
}

static void post_recv(struct vu_ep *ep, struct ibv_mr *mr, uint8_t *buf,
		      uint32_t i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(buf + (size_t)i * SEND_BYTES),
			       .length = SEND_BYTES, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	if (ibv_post_recv(ep->qp, &wr, &bad))
		die("ibv_post_recv");
}

static void one_wc(struct ibv_cq *cq, struct ibv_wc *wc, const char *what);

/* WRITEs in flight, the QP to SQD, the SQ_DRAINED event; back to RTS. */
static void sq_drain(struct vu_ep *ep, struct ibv_mr *mr, uint8_t *src,
		     const struct wire_info *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD,
				 .en_sqd_async_notify = 1 };
	struct ibv_async_event ev;
	struct pollfd pfd = { .fd = ep->qp->context->async_fd,
			      .events = POLLIN };
	struct ibv_wc wc[4];
	int got = 0, n, fl;

	for (uint64_t i = 0; i < 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)src,
				       .length = 65536, .lkey = mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 0x5d0 + i, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = peer->addr + BUF_BYTES / 2 +
						65536 * i,
				     .rkey = peer->rkey },
		}, *bad;

		if (ibv_post_send(ep->qp, &wr, &bad))
			die("post a WRITE before SQD");
	}
	if (ibv_modify_qp(ep->qp, &a, IBV_QP_STATE |
			  IBV_QP_EN_SQD_ASYNC_NOTIFY))
		die("modify to SQD");
	fl = fcntl(pfd.fd, F_GETFL);
	if (fl < 0 || fcntl(pfd.fd, F_SETFL, fl | O_NONBLOCK))
		die("async fd nonblocking");
	for (;;) {
		if (poll(&pfd, 1, WAIT_MS) != 1)
			die("no SQ_DRAINED event");
		if (ibv_get_async_event(ep->qp->context, &ev))
			continue;
		ibv_ack_async_event(&ev);
		if (ev.event_type == IBV_EVENT_SQ_DRAINED &&
		    ev.element.qp == ep->qp)
			break;
		if (ev.event_type != IBV_EVENT_COMM_EST)
			die("an async event other than SQ_DRAINED");
	}
	/* drained: what completed completed well, in order */
	while ((n = ibv_poll_cq(ep->scq, 4 - got, wc)) > 0) {
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].wr_id != 0x5d0 + (uint64_t)got + (uint64_t)i)
				die("a WRITE before SQD completed wrong");
		got += n;
	}
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(ep->qp, &a, IBV_QP_STATE))
		die("modify SQD -> RTS");
	for (; got < 4; got++) {
		one_wc(ep->scq, wc, "a WRITE after SQD");
		if (wc[0].wr_id != 0x5d0 + (uint64_t)got)
			die("a WRITE after SQD out of order");
	}
}

static void one_wc(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	char msg[160];

	if (vu_poll(cq, wc, 1, WAIT_MS) != 1) {
		snprintf(msg, sizeof(msg), "no completion of %s in %d s: hung",
			 what, WAIT_MS / 1000);
		die(msg);
	}
	if (wc->status != IBV_WC_SUCCESS) {
		snprintf(msg, sizeof(msg), "%s completed with %s", what,
			 ibv_wc_status_str(wc->status));
		die(msg);
	}
}

int main(int argc, char **argv)
{
	struct vu_qp_caps caps = { .send_wr = 64, .recv_wr = NRECV,
				   .cqe = 256 };
	struct vu_conn c = vu_conn_default();
	bool server = argc == 3 && !strcmp(argv[1], "server");
	bool client = (argc == 5 || argc == 6) && !strcmp(argv[1], "client");
	uint64_t bytes = 0, chunk = 1u << 20;
	struct wire_info me, peer;
	struct vu_addr pa;
	struct ibv_mr *mr;
	struct vu_ep ep;
	struct ibv_wc wc;
	uint8_t *buf;
	int fd;

	if (!server && !client) {
		fprintf(stderr, "usage: sv_stress server PORT | "
				"sv_stress client HOST PORT BYTES [CHUNK]\n");
		return 2;
	}
	if (client) {
		bytes = strtoull(argv[4], NULL, 0);
		if (argc == 6)
			chunk = strtoull(argv[5], NULL, 0);
		if (!bytes || !chunk || chunk > BUF_BYTES / 2 || chunk % 8)
			die("bad BYTES or CHUNK");
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	buf = aligned_alloc(4096, BUF_BYTES);
	if (!buf || vu_ep_create(&ep, NULL, NULL, IBV_QPT_RC, &caps))
		die("cannot make the QP");
	memset(buf, 0, BUF_BYTES);
	mr = ibv_reg_mr(ep.pd, buf, BUF_BYTES, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_MW_BIND);
	if (!mr)
		die("ibv_reg_mr");
	memset(&me, 0, sizeof(me));
	pa = vu_addr_of(ep.qp, (uint32_t)(mix((uint64_t)getpid()) & 0xffffff));
	me.qpn = pa.qpn;
	me.psn = pa.psn;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	memcpy(me.gid, pa.gid.raw, 16);
	fd = server ? tcp_server(atoi(argv[2])) :
		      tcp_client(argv[2], atoi(argv[3]));
	xfer(fd, &me, sizeof(me), true);
	xfer(fd, &peer, sizeof(peer), false);
	pa.qpn = peer.qpn;
	pa.psn = peer.psn;
	memcpy(pa.gid.raw, peer.gid, 16);
	/* the local ACK timeout (IBA encoding): $SV_STRESS_TIMEOUT, else 14
	 * (67 ms, as perftest) */
	c.timeout = getenv("SV_STRESS_TIMEOUT") ?
		    (uint8_t)atoi(getenv("SV_STRESS_TIMEOUT")) : 14;
	c.retry_cnt = 7;
	c.rnr_retry = 7;
	c.max_rd_atomic = 16;
	c.max_dest_rd_atomic = 16;
	c.sq_psn = me.psn;
	c.rq_psn = peer.psn;
	if (vu_connect(ep.qp, &pa, &c))
		die("cannot connect the QP");
	if (server)
		for (uint32_t i = 0; i < NRECV; i++)
			post_recv(&ep, mr, buf, i);
	{
		char ok = 1;

		/* both connected (and the server's receives posted) */
		xfer(fd, &ok, 1, true);
		xfer(fd, &ok, 1, false);
	}

	if (server) {
		uint64_t n = 0, total = 0;

		for (;;) {
			uint64_t hdr[2];
			size_t bad;
			uint8_t *m;

			one_wc(ep.rcq, &wc, "a receive");
			m = buf + (size_t)wc.wr_id * SEND_BYTES;
			if (wc.byte_len == 16 && !memcmp(m, "sv_stress done\n", 16))
				break;
			if (wc.byte_len != SEND_BYTES)
				die("a SEND of the wrong length");
			memcpy(hdr, m, sizeof(hdr));
			bad = check(m + 16, SEND_BYTES - 16, hdr[0] ^ (hdr[1] << 40));
			if (bad != SIZE_MAX) {
				fprintf(stderr, "SEND %" PRIu64 "/%" PRIu64
					": byte %zu wrong\n", hdr[0], hdr[1],
					bad + 16);
				die("corrupted SEND");
			}
			n++;
			total += wc.byte_len;
			if (n == 1 && getenv("SV_STRESS_RNR_STALL_MS"))
				usleep((useconds_t)atoi(
					getenv("SV_STRESS_RNR_STALL_MS")) * 1000);
			post_recv(&ep, mr, buf, (uint32_t)wc.wr_id);
		}
		printf("server: %" PRIu64 " SENDs (%" PRIu64
		       " bytes) checked, none wrong\n", n, total);
		xfer(fd, &n, sizeof(n), true);
		{
			/* the QP stays until the client saw its last SEND
			 * complete: if the ACK of it was lost, the SEND comes
			 * again and is acknowledged again */
			char bye;

			xfer(fd, &bye, 1, false);
		}
		return 0;
	}

	{
		uint64_t done = 0, sends = 0, got;
		uint8_t *src = buf, *dst = buf + BUF_BYTES / 2;
		struct ibv_mw *mw = ibv_alloc_mw(ep.pd, IBV_MW_TYPE_1);
		struct ibv_mw_bind bind = {
			.wr_id = 0x6d77,
			.send_flags = IBV_SEND_SIGNALED,
			.bind_info = { .mr = mr, .addr = (uintptr_t)dst,
				       .length = 4096,
				       .mw_access_flags = IBV_ACCESS_REMOTE_READ },
		};

		/* an operation of the requester alone (binding a window) runs
		 * in order on a QP whose peer is on another host, and the
		 * traffic after it goes on */
		if (!mw || ibv_bind_mw(ep.qp, mw, &bind))
			die("ibv_alloc_mw / ibv_bind_mw");
		one_wc(ep.scq, &wc, "a window bind");
		if (wc.wr_id != 0x6d77 || wc.opcode != IBV_WC_BIND_MW)
			die("the bind's completion is not the bind's");
		sq_drain(&ep, mr, src, &peer);
		for (uint64_t r = 1; done < bytes; r++) {
			struct ibv_sge sge = { .lkey = mr->lkey };
			struct ibv_send_wr wr, *bad;
			uint64_t seed = r * 2654435761u;
			size_t off;

			/* WRITE, then READ back, every byte compared */
			fill(src, chunk, seed);
			memset(dst, 0, chunk);
			memset(&wr, 0, sizeof(wr));
			sge.addr = (uintptr_t)src;
			sge.length = (uint32_t)chunk;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = peer.addr + BUF_BYTES / 2;
			wr.wr.rdma.rkey = peer.rkey;
			if (ibv_post_send(ep.qp, &wr, &bad))
				die("post WRITE");
			one_wc(ep.scq, &wc, "a WRITE");
			sge.addr = (uintptr_t)dst;
			wr.opcode = IBV_WR_RDMA_READ;
			if (ibv_post_send(ep.qp, &wr, &bad))
				die("post READ");
			one_wc(ep.scq, &wc, "a READ");
			off = check(dst, chunk, seed);
			if (off != SIZE_MAX) {
				fprintf(stderr, "round %" PRIu64 ": byte %zu of "
					"the WRITE/READ wrong\n", r, off);
				die("corrupted WRITE or READ");
			}
			/* SENDs the server checks */
			for (uint64_t k = 0; k * SEND_BYTES < chunk; k++) {
				uint8_t *m = src + (k % 16) * SEND_BYTES;
				uint64_t hdr[2] = { r, k };

				memcpy(m, hdr, sizeof(hdr));
				fill(m + 16, SEND_BYTES - 16, r ^ (k << 40));
				sge.addr = (uintptr_t)m;
				sge.length = SEND_BYTES;
				wr.opcode = IBV_WR_SEND;
				if (ibv_post_send(ep.qp, &wr, &bad))
					die("post SEND");
				one_wc(ep.scq, &wc, "a SEND");
				sends++;
			}
			done += chunk;
		}
		{
			struct ibv_sge sge = { .addr = (uintptr_t)src,
					       .length = 16, .lkey = mr->lkey };
			struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
						  .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED };
			struct ibv_send_wr *bad;

			memcpy(src, "sv_stress done\n", 16);
			if (ibv_post_send(ep.qp, &wr, &bad))
				die("post the last SEND");
			one_wc(ep.scq, &wc, "the last SEND");
		}
		xfer(fd, &got, sizeof(got), false);
		if (got != sends)
			die("the server checked another number of SENDs");
		{
			char bye = 1;

			xfer(fd, &bye, 1, true);
		}
		printf("client: %" PRIu64 " bytes each of WRITE, READ and SEND "
		       "(%" PRIu64 " SENDs), every byte checked\n", done, sends);
	}
	return 0;
}
