// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the receive side of the RoCEv2 transport
 * (src/device/roce/net_rx.c): recvmmsg into the net's buffers, the datagram's
 * addresses from its control messages, and the cutting of a UDP GRO
 * datagram into its packets, fed datagrams of any length and GSO segment
 * size a peer can send. The traffic stays on the loopback interface: the
 * net listens on 127.0.0.1 at a port the kernel picks, a socket of this
 * process sends to it, and nothing else is reached.
 *
 * Input: records, each
 *   flags (1)  bit 0: sent as one GSO datagram of segments of
 *              64 * (1 + (flags >> 1)) bytes (the kernel's UDP_SEGMENT)
 *   len (2)    the datagram's length (little-endian; at most 65507)
 *   n (1)      then n bytes, repeated to fill the datagram
 * Properties: every packet sv_net_recv gives is, byte for byte, the next
 * packet sent or a later one (a datagram longer than SV_NET_MAX_PKT
 * bytes, or one the kernel could not take, is skipped whole), no longer
 * than SV_NET_MAX_PKT, from the sender's address and port.
 *
 * fuzz_net_replay --gen DIR writes the seed corpus: RoCEv2-sized packets,
 * a GSO burst as the device's own sender makes them, a jumbo one, one too
 * long, a largest GSO datagram.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device/roce/net.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz_net: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond); \
			abort(); \
		} \
	} while (0)

#define MAX_DGRAM 65507u
#define MAX_PKTS  1024u

static struct sv_net *net;
static int tx_fd = -1;
static struct sockaddr_in to, from;

/* The packets sent, in order: offsets into sent[]. */
static uint8_t sent[MAX_PKTS * 128 + 8 * MAX_DGRAM];
static struct {
	uint32_t off, len;
} pkt[MAX_PKTS];
static unsigned int npkt;

static void init(void)
{
	struct sv_net_cfg cfg = { .addr = { [10] = 0xff, [11] = 0xff,
					    127, 0, 0, 1 } };
	socklen_t len = sizeof(to);

	if (net)
		return;
	CHECK(sv_net_open(&net, &cfg) == 0);
	CHECK(getsockname(sv_net_fd(net), (struct sockaddr *)&to, &len) == 0);
	tx_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(tx_fd >= 0);
	from.sin_family = AF_INET;
	from.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(tx_fd, (struct sockaddr *)&from, sizeof(from)) == 0);
	len = sizeof(from);
	CHECK(getsockname(tx_fd, (struct sockaddr *)&from, &len) == 0);
}

/* Send one datagram (GSO segments of seg bytes, or 0); note its packets. */
static void send_one(const uint8_t *b, uint32_t len, uint16_t seg,
		     uint32_t *used)
{
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { sent + *used, len };
	struct msghdr m = { .msg_name = &to, .msg_namelen = sizeof(to),
			    .msg_iov = &iov, .msg_iovlen = 1 };
	uint32_t nseg = seg && len > seg ? (len + seg - 1) / seg : 1;

	if (*used + len > sizeof(sent) || npkt + nseg > MAX_PKTS)
		return;
	(void)b;
	if (nseg > 1) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	}
	if (sendmsg(tx_fd, &m, 0) != (ssize_t)len)
		return;             /* refused (too many segments, ...) */
	for (uint32_t i = 0; i < nseg; i++) {
		uint32_t o = i * (nseg > 1 ? seg : 0);

		pkt[npkt].off = *used + o;
		pkt[npkt].len = nseg > 1 ? (len - o < seg ? len - o : seg) : len;
		npkt++;
	}
	*used += len;
}

/* Every packet the net gives back, checked against those sent. */
static void drain(void)
{
	static struct sv_net_rx rx[SV_NET_RX_BATCH];
	unsigned int next = 0, idle = 0, got = 0;

	while (idle < 2) {
		unsigned int n = sv_net_recv(net, rx, SV_NET_RX_BATCH);

		if (!n) {
			struct pollfd p = { sv_net_fd(net), POLLIN, 0 };

			/* loopback delivers at once; a short wait for what
			 * the softirq still holds, once all is not here */
			idle++;
			(void)poll(&p, 1, next < npkt && idle == 1 ? 5 : 0);
			continue;
		}
		idle = 0;
		for (unsigned int i = 0; i < n; i++) {
			const struct sv_net_rx *r = &rx[i];

			CHECK(r->len <= SV_NET_MAX_PKT);
			CHECK(r->ip.sport == ntohs(from.sin_port));
			CHECK(!memcmp(r->ip.src + 12, &from.sin_addr, 4));
			while (next < npkt && (pkt[next].len != r->len ||
			       memcmp(sent + pkt[next].off, r->buf, r->len)))
				next++;
			CHECK(next < npkt);
			next++;
			got++;
		}
	}
	if (getenv("FZ_VERBOSE"))
		fprintf(stderr, "%u packets sent, %u received\n", npkt, got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t used = 0;
	size_t off = 0;

	init();
	npkt = 0;
	while (off + 4 <= size) {
		uint8_t flags = data[off];
		uint32_t len = data[off + 1] | (uint32_t)data[off + 2] << 8;
		size_t have = data[off + 3];

		off += 4;
		if (have > size - off)
			have = size - off;
		if (len > MAX_DGRAM)
			len = MAX_DGRAM;
		if (used + len > sizeof(sent))
			break;
		/* the bytes given, repeated to the datagram's length */
		for (uint32_t i = 0; i < len; i++)
			sent[used + i] = have ? data[off + i % have] : (uint8_t)i;
		send_one(sent + used, len, flags & 1 ?
			 (uint16_t)(64u * (1u + (flags >> 1))) : 0, &used);
		off += have;
	}
	drain();
	return 0;
}

int fz_gen_seeds(const char *dir);
int fz_gen_seeds(const char *dir)
{
	static const struct {
		const char *name;
		uint8_t flags;
		uint32_t len;
		uint32_t count;
	} s[] = {
		{ "ack", 0, 20, 1 },               /* BTH + AETH + ICRC */
		{ "mtu1024", 0, 1024 + 32, 4 },
		{ "gso-burst", 1 | 15 << 1, 8 * 1024 + 100, 1 },   /* 1024 */
		{ "jumbo", 0, SV_NET_MAX_PKT, 1 },
		{ "too-long", 0, SV_NET_MAX_PKT + 1, 1 },
		{ "gso-largest", 1 | 15 << 1, MAX_DGRAM, 1 },
		{ "gso-64", 1, 64 * 64, 1 },
	};
	int ret = 0;

	for (unsigned int i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, s[i].name);
		f = fopen(path, "wb");
		if (!f)
			return -1;
		for (uint32_t k = 0; k < s[i].count; k++) {
			/* a BTH's first bytes: RC SEND ONLY to QP 0x123456 */
			static const uint8_t bth[12] = { 0x04, 0x40, 0xff, 0xff,
							 0, 0x12, 0x34, 0x56,
							 0x80, 0, 0x01, 0 };

			fputc(s[i].flags, f);
			fputc((int)(s[i].len & 0xff), f);
			fputc((int)(s[i].len >> 8), f);
			fputc((int)sizeof(bth), f);
			fwrite(bth, 1, sizeof(bth), f);
		}
		ret |= fclose(f);
	}
	return ret;
}
