// SPDX-License-Identifier: MIT
/*
 * The UDP transport of src/device/roce/net*.c (net.h) in memory, for
 * fuzz_roce: no socket is opened and no packet leaves the process. Every
 * packet the device sends must be one a peer accepts: its UDP payload
 * parses as a RoCEv2 packet and carries the right ICRC; then fz_tx_hook
 * sees it. Receiving never returns anything: the harness hands packets to
 * the device through sv_roce_rx_batch, as the wire thread does after
 * sv_net_recv.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_dev.h"

struct sv_net {
	uint8_t addr[16];
	uint16_t port;
	struct sv_net_stats st;
};

void (*fz_tx_hook)(const uint8_t *buf, uint32_t len,
		   const struct sv_roce_ip *ip);
uint64_t fz_tx_count;

int sv_net_open(struct sv_net **out, const struct sv_net_cfg *cfg)
{
	struct sv_net *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	memcpy(n->addr, cfg->addr, 16);
	n->port = cfg->port;
	*out = n;
	return 0;
}

void sv_net_close(struct sv_net *n)
{
	free(n);
}

int sv_net_fd(const struct sv_net *n)
{
	(void)n;
	return -1;                  /* poll() skips it: the wire thread sleeps */
}

int sv_net_set_inject(struct sv_net *n, const char *spec, const uint8_t *qps,
		      uint32_t qps_mask)
{
	(void)n;
	(void)spec;
	(void)qps;
	(void)qps_mask;
	return 0;                   /* this transport injects nothing */
}

int sv_net_sport(struct sv_net *n, uint16_t want)
{
	(void)n;
	return want;
}

bool sv_net_gso(const struct sv_net *n)
{
	(void)n;
	return false;
}

bool sv_net_gro(const struct sv_net *n)
{
	(void)n;
	return false;
}

/* no injector here: nothing is ever held back */
uint32_t sv_net_delayed(const struct sv_net *n)
{
	(void)n;
	return 0;
}

uint64_t sv_net_tick(struct sv_net *n)
{
	(void)n;
	return 0;
}

unsigned sv_net_send(struct sv_net *n, const struct sv_net_tx *pkts,
		     unsigned cnt)
{
	for (unsigned int i = 0; i < cnt; i++) {
		const struct sv_net_tx *t = &pkts[i];
		struct sv_roce_ip ip;
		struct sv_roce_pkt p;

		FZ_CHECK(!t->cont);
		FZ_CHECK(t->len >= SV_BTH_BYTES + SV_ICRC_BYTES &&
			 t->len <= SV_NET_MAX_PKT);
		memset(&ip, 0, sizeof(ip));
		memcpy(ip.src, n->addr, 16);
		memcpy(ip.dst, t->dst, 16);
		ip.sport = t->sport;
		ip.dport = n->port;
		ip.df = true;
		FZ_CHECK(sv_roce_icrc_ok(&ip, t->buf, t->len));
		FZ_CHECK(sv_roce_parse(t->buf, t->len, &p) == 0);
		n->st.tx_pkts++;
		n->st.tx_bytes += t->len;
		fz_tx_count++;
		if (fz_tx_hook)
			fz_tx_hook(t->buf, t->len, &ip);
	}
	return cnt;
}

unsigned sv_net_recv(struct sv_net *n, struct sv_net_rx *out, unsigned max)
{
	(void)n;
	(void)out;
	(void)max;
	return 0;
}

bool sv_net_rx_idle(const struct sv_net *n)
{
	(void)n;
	return true;
}

void sv_net_stats(const struct sv_net *n, struct sv_net_stats *out)
{
	*out = n->st;
}
