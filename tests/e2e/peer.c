// SPDX-License-Identifier: MIT
/*
 * A verbs peer in a process of its own, for tests that need one to vanish:
 * opens sv0, makes an RC QP and a 1 MiB buffer registered for remote read
 * and write, and says on stdout
 *     qpn psn gid(32 hex) rkey addr len
 * then reads its peer's "qpn psn gid" from stdin, connects (RTS), says
 * "ready", and holds everything until stdin reaches EOF (or it is killed).
 *   sv_peer [--recv N]   also post N receives of 4 KiB before "ready"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vu.h"

#define LEN (1u << 20)

static void gid_hex(const union ibv_gid *g, char *out)
{
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", g->raw[i]);
}

static int hex_gid(const char *s, union ibv_gid *g)
{
	unsigned int b;

	if (strlen(s) != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		if (sscanf(s + 2 * i, "%2x", &b) != 1)
			return -1;
		g->raw[i] = (uint8_t)b;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct vu_qp_caps caps = { .send_wr = 16, .recv_wr = 64 };
	struct vu_conn c = vu_conn_default();
	struct vu_addr me, peer;
	struct ibv_mr *mr;
	struct vu_ep ep;
	char line[256], gid[40], hex[40];
	uint8_t *buf;
	int nrecv = 0;

	if (argc == 3 && !strcmp(argv[1], "--recv"))
		nrecv = atoi(argv[2]);
	if (nrecv < 0 || nrecv > 64)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	buf = calloc(1, LEN);
	if (!buf || vu_ep_create(&ep, NULL, NULL, IBV_QPT_RC, &caps))
		return 1;
	mr = ibv_reg_mr(ep.pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr) {
		perror("ibv_reg_mr");
		return 1;
	}
	me = vu_addr_of(ep.qp, c.sq_psn);
	gid_hex(&me.gid, hex);
	printf("%u %u %s %u %" PRIu64 " %u\n", me.qpn, me.psn, hex, mr->rkey,
	       (uint64_t)(uintptr_t)buf, LEN);
	if (!fgets(line, sizeof(line), stdin) ||
	    sscanf(line, "%u %u %39s", &peer.qpn, &peer.psn, gid) != 3 ||
	    hex_gid(gid, &peer.gid)) {
		fprintf(stderr, "sv_peer: no peer address\n");
		return 1;
	}
	if (vu_connect(ep.qp, &peer, &c)) {
		perror("sv_peer: connect");
		return 1;
	}
	for (int i = 0; i < nrecv; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)buf + 4096u * (unsigned int)i,
			.length = 4096, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i,
					  .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;

		if (ibv_post_recv(ep.qp, &wr, &bad)) {
			fprintf(stderr, "sv_peer: ibv_post_recv failed\n");
			return 1;
		}
	}
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin))
		;
	ibv_dereg_mr(mr);
	vu_ep_destroy(&ep);
	free(buf);
	return 0;
}
