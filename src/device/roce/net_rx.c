// SPDX-License-Identifier: MIT
/*
 * The receive side of the UDP transport (net.h, struct sv_net in
 * net_int.h): recvmmsg fills up to SV_NET_RX_MSGS buffers of RX_MSG_BYTES;
 * a GRO datagram (its UDP_GRO control message gives the packet length) is
 * handed out a packet at a time, across calls when the caller's array is
 * full, before the next recvmmsg. Each packet's addresses come from the
 * datagram's source and its pktinfo. One thread at a time; nothing here
 * allocates or blocks (MSG_DONTWAIT).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>

#include "device/roce/net_int.h"

/* ================= receive ================= */

static void gid_from_v4(uint8_t gid[16], const struct in_addr *a)
{
	memset(gid, 0, 10);
	gid[10] = 0xff;
	gid[11] = 0xff;
	memcpy(gid + 12, &a->s_addr, 4);
}

/* The destination address of a received datagram, from its pktinfo. */
static void rx_dst(const struct sv_net *n, struct msghdr *h, uint8_t dst[16])
{
	struct cmsghdr *c;

	memcpy(dst, n->addr, 16);       /* without pktinfo: ours */
	for (c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			gid_from_v4(dst, &pi.ipi_addr);
			return;
		}
		if (c->cmsg_level == IPPROTO_IPV6 &&
		    c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(dst, &pi.ipi6_addr, 16);
			return;
		}
	}
}

/* The packet length of a received datagram: its GRO segment size, or
 * all of it. */
static uint32_t rx_seg(struct msghdr *h, uint32_t len)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			int seg;

			memcpy(&seg, CMSG_DATA(c), sizeof(seg));
			if (seg > 0 && (uint32_t)seg < len)
				return (uint32_t)seg;
		}
	return len;
}

/* Begin datagram rx_cur: its addresses and packet length; false when it
 * is to be dropped. */
static bool rx_begin(struct sv_net *n)
{
	struct msghdr *h = &n->rxmsg[n->rx_cur].msg_hdr;
	const union sv_sa *src = &n->rxname[n->rx_cur];
	uint32_t len = n->rxmsg[n->rx_cur].msg_len;
	struct sv_roce_ip *ip = &n->rx_ip;

	n->rx_off = 0;
	if (unlikely(h->msg_flags & MSG_TRUNC)) {
		ctr_add(&n->st.rx_err, 1);
		return false;
	}
	n->rx_seg = rx_seg(h, len);
	if (unlikely(n->rx_seg > SV_NET_MAX_PKT)) {
		ctr_add(&n->st.rx_err, 1);
		return false;
	}
	if (n->rx_seg < len)
		ctr_add(&n->st.rx_gro, 1);
	memset(ip, 0, sizeof(*ip));
	if (src->sa.sa_family == AF_INET) {
		gid_from_v4(ip->src, &src->v4.sin_addr);
		ip->sport = ntohs(src->v4.sin_port);
	} else {
		memcpy(ip->src, &src->v6.sin6_addr, 16);
		ip->sport = ntohs(src->v6.sin6_port);
	}
	rx_dst(n, h, ip->dst);
	ip->dport = n->port;
	ip->ip_id = 0;
	ip->df = true;
	return true;
}

/* recvmmsg into the buffers: false when nothing came. */
static bool rx_fill(struct sv_net *n)
{
	unsigned int i;
	int r;

	for (i = 0; i < SV_NET_RX_MSGS; i++) {
		struct msghdr *h = &n->rxmsg[i].msg_hdr;

		h->msg_namelen = sizeof(n->rxname[i]);
		h->msg_controllen = sizeof(n->rxctl[i]);
		h->msg_flags = 0;
	}
	do
		r = recvmmsg(n->rx_fd, n->rxmsg, SV_NET_RX_MSGS, MSG_DONTWAIT,
			     NULL);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			ctr_add(&n->st.rx_err, 1);
		n->rx_short = true;
		return false;
	}
	n->rx_short = (unsigned int)r < SV_NET_RX_MSGS;
	n->rx_n = (unsigned int)r;
	n->rx_cur = 0;
	return true;
}

bool sv_net_rx_idle(const struct sv_net *n)
{
	return n->rx_cur == n->rx_n && n->rx_short;
}

unsigned sv_net_recv(struct sv_net *n, struct sv_net_rx *out, unsigned max)
{
	unsigned int k = 0;

	if (max > SV_NET_RX_BATCH)
		max = SV_NET_RX_BATCH;
	/* one recvmmsg per call, and only once the last one's packets
	 * are all out */
	if (max && n->rx_cur == n->rx_n) {
		if (!rx_fill(n))
			return 0;
		while (n->rx_cur < n->rx_n && !rx_begin(n))
			n->rx_cur++;
	}
	while (k < max && n->rx_cur < n->rx_n) {
		uint32_t len = n->rxmsg[n->rx_cur].msg_len;
		uint32_t seg = len - n->rx_off < n->rx_seg ? len - n->rx_off
							  : n->rx_seg;
		struct sv_net_rx *o = &out[k++];

		o->buf = (uint8_t *)n->rxiov[n->rx_cur].iov_base + n->rx_off;
		o->len = seg;
		o->ip = n->rx_ip;
		ctr_add(&n->st.rx_bytes, seg);
		n->rx_off += seg;
		if (n->rx_off >= len) {
			/* the next datagram to hand out */
			n->rx_cur++;
			while (n->rx_cur < n->rx_n && !rx_begin(n))
				n->rx_cur++;
		}
	}
	ctr_add(&n->st.rx_pkts, k);
	return k;
}
