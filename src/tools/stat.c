// SPDX-License-Identifier: MIT
/*
 * softverbs devinfo / stat: talk to the daemon directly over the control
 * socket (a probe connection: it creates nothing), so they also work when no
 * verbs library is around.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "abi/sv_cmd.h"
#include "abi/sv_direct.h"
#include "abi/sv_sock.h"
#include "tools/snap.h"
#include "tools/tool.h"

static const char *const rx_drop_names[SV_RX_DROP_MAX] = {
#define SV_RX_DROP_NAME(N, n, what) [SV_RX_DROP_##N] = what,
	SV_RX_DROP_REASONS(SV_RX_DROP_NAME)
#undef SV_RX_DROP_NAME
};

static const char *const obj_names[SV_OBJ_TYPE_MAX] = SV_OBJ_NAMES_INIT;

struct probe {
	struct sv_probe p;
	int fd;
};

static int probe_open(struct probe *p)
{
	int ret = sv_probe_open(&p->p, NULL);

	p->fd = p->p.fd;
	return ret;
}

static int probe_call(struct probe *p, struct sv_cmd *cmd, struct sv_rsp *rsp)
{
	return sv_probe_call(&p->p, cmd, rsp);
}

static int probe_hello(struct probe *p, struct sv_rsp *rsp)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_HELLO);
	cmd.u.hello.abi = SV_PROTO_VERSION;
	cmd.u.hello.flags = SV_HELLO_PROBE;
	return probe_call(p, &cmd, rsp);
}

static int want_help(int argc, char **argv, const char *text)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(text, stdout);
		return 1;
	}
	return 0;
}

int sv_tool_devinfo(int argc, char **argv)
{
	struct probe p;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	uint64_t guid;
	int ret;

	if (want_help(argc, argv,
		      "usage: softverbs devinfo\n"
		      "  the device's identity, limits, port and GID table,\n"
		      "  from the running daemon\n"))
		return 0;
	if (probe_open(&p))
		return 1;
	ret = probe_hello(&p, &rsp);
	if (ret)
		goto fail;
	rsp.u.hello.dev_name[SV_DEV_NAME_MAX - 1] = 0;
	printf("device:   %s (daemon pid %u)\n", rsp.u.hello.dev_name,
	       rsp.u.hello.daemon_pid);
	sv_cmd_init(&cmd, SV_CMD_QUERY_DEVICE);
	ret = probe_call(&p, &cmd, &rsp);
	if (ret)
		goto fail;
	guid = be64toh(rsp.u.dev.node_guid);
	rsp.u.dev.fw_ver[sizeof(rsp.u.dev.fw_ver) - 1] = 0;
	printf("guid:     %04x:%04x:%04x:%04x\n", (unsigned int)(guid >> 48),
	       (unsigned int)(guid >> 32) & 0xffff,
	       (unsigned int)(guid >> 16) & 0xffff, (unsigned int)guid & 0xffff);
	printf("vendor:   0x%06x, part %u, hw %u (softverbs' own, no PCI/IEEE "
	       "ID)\n", rsp.u.dev.vendor_id, rsp.u.dev.vendor_part_id,
	       rsp.u.dev.hw_ver);
	printf("fw:       %s\n", rsp.u.dev.fw_ver);
	printf("limits:   qp %u, qp_wr %u, sge %u, cq %u, cqe %u, mr %u, pd %u,"
	       " inline %u\n", rsp.u.dev.max_qp, rsp.u.dev.max_qp_wr,
	       rsp.u.dev.max_sge, rsp.u.dev.max_cq, rsp.u.dev.max_cqe,
	       rsp.u.dev.max_mr, rsp.u.dev.max_pd, rsp.u.dev.max_inline_data);
	sv_cmd_init(&cmd, SV_CMD_QUERY_PORT);
	cmd.u.query_port.port_num = 1;
	ret = probe_call(&p, &cmd, &rsp);
	if (ret)
		goto fail;
	printf("port 1:   %s, link layer %s, active mtu %u\n",
	       rsp.u.port.state == 4 ? "ACTIVE" : "not active",
	       rsp.u.port.link_layer == 2 ? "Ethernet" : "InfiniBand",
	       128u << rsp.u.port.active_mtu);
	for (uint32_t i = 0; i < SV_GID_TBL_LEN; i++) {
		char buf[INET6_ADDRSTRLEN];

		sv_cmd_init(&cmd, SV_CMD_QUERY_GID);
		cmd.u.query_gid.port_num = 1;
		cmd.u.query_gid.index = i;
		ret = probe_call(&p, &cmd, &rsp);
		if (ret)
			goto fail;
		if (!rsp.u.gid.valid)
			continue;
		inet_ntop(AF_INET6, rsp.u.gid.gid, buf, sizeof(buf));
		printf("gid[%2u]:  %s (RoCE v2)\n", i, buf);
	}
	close(p.fd);
	return 0;
fail:
	fprintf(stderr, "softverbs devinfo: %s\n", strerror(-ret));
	close(p.fd);
	return 1;
}

/* The objects each client holds, their totals and the keys live. */
static void print_text_clients(const struct sv_snap *s)
{
	uint32_t type;

	printf("daemon pid %u, %u clients (this one included), "
	       "%llu commands refused\n", s->daemon_pid, s->nclients,
	       (unsigned long long)s->refused);
	printf("%-8s %-8s %-6s", "client", "pid", "uid");
	for (type = 1; type < SV_OBJ_TYPE_MAX; type++)
		printf(" %7s", obj_names[type]);
	printf("\n");
	for (uint32_t i = 0; i < s->nclients; i++) {
		const struct sv_stat_client *c = &s->clients[i];

		printf("%-8llu %-8u %-6u", (unsigned long long)c->client_id,
		       c->pid, c->uid);
		for (type = 1; type < SV_OBJ_TYPE_MAX; type++)
			printf(" %7u", c->count[type]);
		printf("\n");
	}
	printf("%-8s %-8s %-6s", "total", "", "");
	for (type = 1; type < SV_OBJ_TYPE_MAX; type++)
		printf(" %7u", s->total[type]);
	printf("\nkeys live: %u\n", s->keys_live);
}

/* One line per QP, when there are any. */
static void print_text_qps(const struct sv_snap *s)
{
	if (!s->nqps)
		return;
	printf("%-8s %-8s %-8s %-5s %-11s %-11s %10s %10s %7s %7s\n",
	       "qpn", "pid", "type", "state", "sq used", "rq used",
	       "sends", "recvs", "errors", "retrans");
	for (uint32_t i = 0; i < s->nqps; i++) {
		const struct sv_stat_qp *q = &s->qps[i];
		char sq[24], rq[24];

		snprintf(sq, sizeof(sq), "%u/%u", q->sq_used,
			 q->sq_entries);
		snprintf(rq, sizeof(rq), "%u/%u", q->rq_used,
			 q->rq_entries);
		printf("%-8u %-8u %-8s %-5s %-11s %-11s %10llu %10llu "
		       "%7llu %7llu\n", q->qpn, q->pid,
		       sv_snap_qp_type(q->type),
		       sv_snap_qp_state(q->state), sq,
		       q->srq ? "srq" : rq,
		       (unsigned long long)q->sends,
		       (unsigned long long)q->recvs,
		       (unsigned long long)q->errors,
		       (unsigned long long)q->retrans);
	}
}

/* rdma_cm, the same-host traffic and the direct path. */
static void print_text_host(const struct sv_rsp_stat_wire *w)
{
	printf("rdma_cm: %u files, %u ids open; since start %llu ids, "
	       "%llu connects, %llu accepts, %llu established, %llu rejects, "
	       "%llu disconnects\n", w->cm_files, w->cm_ids,
	       (unsigned long long)w->cm_ids_created,
	       (unsigned long long)w->cm_connects,
	       (unsigned long long)w->cm_accepts,
	       (unsigned long long)w->cm_established,
	       (unsigned long long)w->cm_rejects,
	       (unsigned long long)w->cm_disconnects);
	printf("rdma_cm MADs: %llu sent, %llu received, %llu retried, "
	       "%llu timed out, %llu dropped\n",
	       (unsigned long long)w->cm_mad_sent,
	       (unsigned long long)w->cm_mad_rcvd,
	       (unsigned long long)w->cm_mad_retries,
	       (unsigned long long)w->cm_mad_timeouts,
	       (unsigned long long)w->cm_mad_dropped);
	printf("same host: %llu messages, %llu bytes; of them run by "
	       "the initiating process (direct): %llu messages, %llu "
	       "bytes, %llu between mapped memfds\n",
	       (unsigned long long)w->lo_msgs,
	       (unsigned long long)w->lo_bytes,
	       (unsigned long long)w->direct_msgs,
	       (unsigned long long)w->direct_bytes,
	       (unsigned long long)w->direct_mapped);
	printf("direct path: sent to the daemon instead:");
	for (unsigned int i = 0; i < SV_DREF_MAX; i++)
		printf(" %s %llu", sv_direct_refusal_name(i),
		       (unsigned long long)w->direct_refused[i]);
	printf("\n");
}

/* The RoCEv2 port's counters, or that there is none. */
static void print_text_roce(const struct sv_rsp_stat_wire *w)
{
	if (!w->running) {
		printf("roce: no RoCEv2 port (peers on this host only)\n");
		return;
	}
	printf("roce: UDP port %u\n", w->port);
	printf("roce packets: %llu sent, %llu received, %llu dropped "
	       "(%llu bad ICRC), %llu not sent (socket full)\n",
	       (unsigned long long)w->tx_pkts,
	       (unsigned long long)w->rx_pkts,
	       (unsigned long long)w->rx_drop,
	       (unsigned long long)w->rx_bad_icrc,
	       (unsigned long long)w->tx_drop_full);
	printf("roce drops:");
	for (unsigned int i = 0; i < SV_RX_DROP_MAX; i++)
		printf("%s %llu %s", i ? "," : "",
		       (unsigned long long)w->rx_drop_why[i],
		       rx_drop_names[i]);
	printf("\n");
	printf("roce reliability: %llu retransmitted, %llu timeouts, "
	       "%llu retries exceeded, %llu duplicates answered\n",
	       (unsigned long long)w->retransmits,
	       (unsigned long long)w->timeouts,
	       (unsigned long long)w->retry_exceeded,
	       (unsigned long long)w->dup_reqs);
	printf("roce NAKs: %llu sent, %llu received; RNR NAKs: %llu "
	       "sent, %llu received\n",
	       (unsigned long long)w->naks_sent,
	       (unsigned long long)w->naks_rcvd,
	       (unsigned long long)w->rnr_naks_sent,
	       (unsigned long long)w->rnr_naks_rcvd);
	printf("roce offload: GSO %s (%llu datagrams of several "
	       "packets sent), GRO %s (%llu received)\n",
	       w->gso ? "on" : "off", (unsigned long long)w->tx_gso,
	       w->gro ? "on" : "off", (unsigned long long)w->rx_gro);
	if (w->inj_drop || w->inj_dup || w->inj_reorder || w->inj_corrupt ||
	    w->inj_delay)
		printf("roce injected: %llu dropped, %llu duplicated, "
		       "%llu reordered, %llu corrupted, %llu delayed\n",
		       (unsigned long long)w->inj_drop,
		       (unsigned long long)w->inj_dup,
		       (unsigned long long)w->inj_reorder,
		       (unsigned long long)w->inj_corrupt,
		       (unsigned long long)w->inj_delay);
}

static void print_text(const struct sv_snap *s)
{
	print_text_clients(s);
	print_text_qps(s);
	print_text_host(&s->wire);
	print_text_roce(&s->wire);
}

int sv_tool_stat(int argc, char **argv)
{
	enum { TEXT, JSON, PROM } how = TEXT;
	struct sv_rsp_hello hello;
	struct sv_probe p;
	struct sv_snap s;
	int ret;

	if (want_help(argc, argv,
		      "usage: softverbs stat [--json | --prometheus | "
		      "--serve [ADDR:]PORT]\n"
		      "  objects held by each client of the device, and totals;\n"
		      "  every QP (state, queues, completions, errors,\n"
		      "  retransmissions); the RoCEv2 port's counters (packets,\n"
		      "  retransmissions, NAKs, RNR NAKs, injected faults)\n"
		      "  --json         one JSON document (docs/stat.schema.json)\n"
		      "  --prometheus   Prometheus' text format, once\n"
		      "  --serve ADDR   serve that at http://ADDR/metrics until\n"
		      "                 stopped (default address 127.0.0.1;\n"
		      "                 port 0: any, printed on stdout)\n"))
		return 0;
	if (argc >= 3 && !strcmp(argv[1], "--serve"))
		return sv_tool_serve(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "--json"))
		how = JSON;
	else if (argc == 2 && !strcmp(argv[1], "--prometheus"))
		how = PROM;
	else if (argc != 1) {
		fprintf(stderr, "softverbs stat: unknown arguments (see --help)\n");
		return 2;
	}
	if (sv_probe_open(&p, &hello))
		return 1;
	ret = sv_snap_take(&p, hello.dev_name, &s);
	sv_probe_close(&p);
	if (ret) {
		sv_snap_free(&s);
		fprintf(stderr, "softverbs stat: %s\n", strerror(-ret));
		return 1;
	}
	if (how == JSON)
		sv_snap_json(&s, stdout);
	else if (how == PROM)
		sv_snap_prometheus(&s, stdout);
	else
		print_text(&s);
	sv_snap_free(&s);
	return fflush(stdout) ? 1 : 0;
}
