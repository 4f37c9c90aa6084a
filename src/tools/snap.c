// SPDX-License-Identifier: MIT
/*
 * One look at the device (snap.h): taken over a probe connection, rendered
 * as JSON (docs/stat.schema.json) or in Prometheus' text format.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_direct.h"
#include "abi/sv_sock.h"
#include "tools/snap.h"

static const char *const obj_names[SV_OBJ_TYPE_MAX] = SV_OBJ_NAMES_INIT;

static const char *const rx_drop_keys[SV_RX_DROP_MAX] = {
#define SV_RX_DROP_KEY(N, n, what) [SV_RX_DROP_##N] = #n,
	SV_RX_DROP_REASONS(SV_RX_DROP_KEY)
#undef SV_RX_DROP_KEY
};

int sv_probe_open(struct sv_probe *p, struct sv_rsp_hello *hello)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	char path[108], why[512];
	int ret;

	if (sv_sock_path(path, sizeof(path)))
		return -ENAMETOOLONG;
	/* the library's checks: a default per-user folder and its daemon are
	 * the user's own, or nothing is sent */
	ret = sv_sock_dir_check(path, why, sizeof(why));
	if (ret && ret != -ENOENT) {
		fprintf(stderr, "softverbs: refusing the device at %s: %s\n",
			path, why);
		p->fd = -1;
		return ret;
	}
	p->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (p->fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(p->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		ret = -errno;
		fprintf(stderr, "softverbs: no device answers on %s: %s\n", path,
			strerror(-ret));
		close(p->fd);
		p->fd = -1;
		return ret;
	}
	ret = sv_sock_peer_check(p->fd, path, why, sizeof(why));
	if (ret) {
		fprintf(stderr, "softverbs: refusing the device at %s: %s\n",
			path, why);
		close(p->fd);
		p->fd = -1;
		return ret;
	}
	p->seq = 0;
	sv_cmd_init(&cmd, SV_CMD_HELLO);
	cmd.u.hello.abi = SV_PROTO_VERSION;
	cmd.u.hello.flags = SV_HELLO_PROBE;
	ret = sv_probe_call(p, &cmd, &rsp);
	if (ret) {
		sv_probe_close(p);
		return ret;
	}
	rsp.u.hello.dev_name[SV_DEV_NAME_MAX - 1] = 0;
	if (hello)
		*hello = rsp.u.hello;
	return 0;
}

int sv_probe_call(struct sv_probe *p, struct sv_cmd *cmd, struct sv_rsp *rsp)
{
	int ret, status;

	cmd->hdr.seq = ++p->seq;
	ret = sv_call(p->fd, cmd, -1, rsp, &status, NULL, false);
	return ret ? ret : status;
}

void sv_probe_close(struct sv_probe *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

static int grow(void **arr, uint32_t *cap, uint32_t want, size_t size)
{
	void *n;

	if (want <= *cap)
		return 0;
	n = realloc(*arr, (size_t)(want + 16) * size);
	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = want + 16;
	return 0;
}

int sv_snap_take(struct sv_probe *p, const char *dev_name, struct sv_snap *s)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	struct timespec ts;
	uint32_t first = 0, cap_c = 0, cap_q = 0, slot = 0;
	int ret;

	memset(s, 0, sizeof(*s));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	snprintf(s->dev_name, sizeof(s->dev_name), "%s", dev_name);
	for (;;) {
		sv_cmd_init(&cmd, SV_CMD_STAT);
		cmd.u.stat.first = first;
		ret = sv_probe_call(p, &cmd, &rsp);
		if (ret)
			return ret;
		if (rsp.u.stat.nlisted > SV_STAT_PAGE)
			return -EPROTO;
		if (grow((void **)&s->clients, &cap_c,
			 s->nclients + rsp.u.stat.nlisted, sizeof(*s->clients)))
			return -ENOMEM;
		if (rsp.u.stat.nlisted)
			memcpy(&s->clients[s->nclients], rsp.u.stat.client,
			       rsp.u.stat.nlisted * sizeof(*s->clients));
		s->nclients += rsp.u.stat.nlisted;
		first += rsp.u.stat.nlisted;
		if (!rsp.u.stat.nlisted || first >= rsp.u.stat.nclients)
			break;
	}
	memcpy(s->total, rsp.u.stat.total, sizeof(s->total));
	s->keys_live = rsp.u.stat.keys_live;
	s->daemon_pid = rsp.u.stat.daemon_pid;
	s->refused = rsp.u.stat.refused;
	do {
		sv_cmd_init(&cmd, SV_CMD_STAT_QP);
		cmd.u.stat.first = slot;
		ret = sv_probe_call(p, &cmd, &rsp);
		if (ret)
			return ret;
		if (rsp.u.stat_qp.nlisted > SV_STAT_QP_PAGE ||
		    (rsp.u.stat_qp.next && rsp.u.stat_qp.next <= slot))
			return -EPROTO;
		if (grow((void **)&s->qps, &cap_q,
			 s->nqps + rsp.u.stat_qp.nlisted, sizeof(*s->qps)))
			return -ENOMEM;
		if (rsp.u.stat_qp.nlisted)
			memcpy(&s->qps[s->nqps], rsp.u.stat_qp.qp,
			       rsp.u.stat_qp.nlisted * sizeof(*s->qps));
		s->nqps += rsp.u.stat_qp.nlisted;
		slot = rsp.u.stat_qp.next;
	} while (slot);
	sv_cmd_init(&cmd, SV_CMD_STAT_WIRE);
	ret = sv_probe_call(p, &cmd, &rsp);
	if (ret)
		return ret;
	s->wire = rsp.u.stat_wire;
	return 0;
}

void sv_snap_free(struct sv_snap *s)
{
	free(s->clients);
	free(s->qps);
	s->clients = NULL;
	s->qps = NULL;
}

const char *sv_snap_qp_type(unsigned int type)
{
	static const char *const n[] = {
		[2] = "RC", [3] = "UC", [4] = "UD", [8] = "RAW_PACKET",
		[9] = "XRC_SEND", [10] = "XRC_RECV",
	};

	return type < sizeof(n) / sizeof(n[0]) && n[type] ? n[type] : "?";
}

const char *sv_snap_qp_state(unsigned int state)
{
	static const char *const n[] = {
		"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR",
	};

	return state < sizeof(n) / sizeof(n[0]) ? n[state] : "?";
}

/* ---- JSON ---- */

static void j_objects(FILE *f, const uint32_t *count)
{
	fputc('{', f);
	for (unsigned int t = 1; t < SV_OBJ_TYPE_MAX; t++)
		fprintf(f, "%s\"%s\": %u", t > 1 ? ", " : "", obj_names[t],
			count[t]);
	fputc('}', f);
}

#define U64(x) ((unsigned long long)(x))

void sv_snap_json(const struct sv_snap *s, FILE *f)
{
	const struct sv_rsp_stat_wire *w = &s->wire;

	fprintf(f, "{\n  \"schema\": \"softverbs-stat/1\",\n");
	fprintf(f, "  \"device\": {\"name\": \"%s\", \"daemon_pid\": %u},\n",
		s->dev_name, s->daemon_pid);
	fprintf(f, "  \"totals\": {\"clients\": %u, \"qps\": %u, "
		"\"keys_live\": %u, \"commands_refused\": %llu, \"objects\": ",
		s->nclients, s->nqps, s->keys_live, U64(s->refused));
	j_objects(f, s->total);
	fprintf(f, "},\n  \"clients\": [");
	for (uint32_t i = 0; i < s->nclients; i++) {
		const struct sv_stat_client *c = &s->clients[i];

		fprintf(f, "%s\n    {\"id\": %llu, \"pid\": %u, \"uid\": %u, "
			"\"objects\": ", i ? "," : "", U64(c->client_id),
			c->pid, c->uid);
		j_objects(f, c->count);
		fputc('}', f);
	}
	fprintf(f, "%s],\n  \"qps\": [", s->nclients ? "\n  " : "");
	for (uint32_t i = 0; i < s->nqps; i++) {
		const struct sv_stat_qp *q = &s->qps[i];

		fprintf(f, "%s\n    {\"qpn\": %u, \"client\": %llu, \"pid\": %u, "
			"\"type\": \"%s\", \"state\": \"%s\", \"wire\": %s, "
			"\"srq\": %s, \"dest_qpn\": %u, "
			"\"sq\": {\"entries\": %u, \"used\": %u}, "
			"\"rq\": {\"entries\": %u, \"used\": %u}, "
			"\"sends\": %llu, \"recvs\": %llu, \"errors\": %llu, "
			"\"retransmits\": %llu}",
			i ? "," : "", q->qpn, U64(q->client_id), q->pid,
			sv_snap_qp_type(q->type), sv_snap_qp_state(q->state),
			q->wire ? "true" : "false", q->srq ? "true" : "false",
			q->dest_qpn, q->sq_entries, q->sq_used, q->rq_entries,
			q->rq_used, U64(q->sends), U64(q->recvs),
			U64(q->errors), U64(q->retrans));
	}
	fprintf(f, "%s],\n", s->nqps ? "\n  " : "");
	fprintf(f, "  \"same_host\": {\"messages\": %llu, \"bytes\": %llu, "
		"\"direct_messages\": %llu, \"direct_bytes\": %llu, "
		"\"direct_mapped\": %llu, \"direct_refused\": {",
		U64(w->lo_msgs), U64(w->lo_bytes), U64(w->direct_msgs),
		U64(w->direct_bytes), U64(w->direct_mapped));
	for (unsigned int i = 0; i < SV_DREF_MAX; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "",
			sv_direct_refusal_name(i), U64(w->direct_refused[i]));
	fprintf(f, "}},\n");
	fprintf(f, "  \"rdma_cm\": {\"files\": %u, \"ids\": %u, "
		"\"ids_created\": %llu, \"connects\": %llu, \"accepts\": %llu, "
		"\"established\": %llu, \"rejects\": %llu, "
		"\"disconnects\": %llu, \"mads_sent\": %llu, "
		"\"mads_received\": %llu, \"mad_retries\": %llu, "
		"\"mad_timeouts\": %llu, \"mads_dropped\": %llu},\n",
		w->cm_files, w->cm_ids, U64(w->cm_ids_created),
		U64(w->cm_connects), U64(w->cm_accepts),
		U64(w->cm_established), U64(w->cm_rejects),
		U64(w->cm_disconnects), U64(w->cm_mad_sent),
		U64(w->cm_mad_rcvd), U64(w->cm_mad_retries),
		U64(w->cm_mad_timeouts), U64(w->cm_mad_dropped));
	fprintf(f, "  \"roce\": {\"running\": %s, \"udp_port\": %u, "
		"\"tx_packets\": %llu, \"rx_packets\": %llu, "
		"\"rx_dropped\": %llu, \"tx_socket_full\": %llu, \"drops\": {",
		w->running ? "true" : "false", w->running ? w->port : 0,
		U64(w->tx_pkts), U64(w->rx_pkts), U64(w->rx_drop),
		U64(w->tx_drop_full));
	for (unsigned int i = 0; i < SV_RX_DROP_MAX; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", rx_drop_keys[i],
			U64(w->rx_drop_why[i]));
	fprintf(f, "}, \"retransmits\": %llu, \"timeouts\": %llu, "
		"\"retry_exceeded\": %llu, \"duplicates\": %llu, "
		"\"naks_sent\": %llu, \"naks_received\": %llu, "
		"\"rnr_naks_sent\": %llu, \"rnr_naks_received\": %llu, "
		"\"injected\": {\"drop\": %llu, \"dup\": %llu, "
		"\"reorder\": %llu, \"corrupt\": %llu, \"delay\": %llu}}\n}\n",
		U64(w->retransmits), U64(w->timeouts), U64(w->retry_exceeded),
		U64(w->dup_reqs), U64(w->naks_sent), U64(w->naks_rcvd),
		U64(w->rnr_naks_sent), U64(w->rnr_naks_rcvd), U64(w->inj_drop),
		U64(w->inj_dup), U64(w->inj_reorder), U64(w->inj_corrupt),
		U64(w->inj_delay));
}

/* ---- Prometheus ---- */

static void p_head(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP softverbs_%s %s\n# TYPE softverbs_%s %s\n", name,
		help, name, type);
}

static void p_one(FILE *f, const char *name, const char *type,
		  const char *help, unsigned long long v)
{
	p_head(f, name, type, help);
	fprintf(f, "softverbs_%s %llu\n", name, v);
}

void sv_snap_prometheus(const struct sv_snap *s, FILE *f)
{
	const struct sv_rsp_stat_wire *w = &s->wire;
	static const struct {
		const char *name, *help;
		size_t off;
	} qc[] = {
		{ "qp_sends_total", "Send WQEs the QP completed.",
		  offsetof(struct sv_stat_qp, sends) },
		{ "qp_recvs_total", "Receive completions of the QP.",
		  offsetof(struct sv_stat_qp, recvs) },
		{ "qp_errors_total", "Error completions of the QP (not flushes).",
		  offsetof(struct sv_stat_qp, errors) },
		{ "qp_retransmits_total", "RoCEv2 packets the QP sent again.",
		  offsetof(struct sv_stat_qp, retrans) },
	};

	p_one(f, "clients", "gauge", "Connections to the device.",
	      s->nclients);
	p_head(f, "objects", "gauge", "Objects on the device, by kind.");
	for (unsigned int t = 1; t < SV_OBJ_TYPE_MAX; t++)
		fprintf(f, "softverbs_objects{kind=\"%s\"} %u\n", obj_names[t],
			s->total[t]);
	p_one(f, "keys_live", "gauge", "Keys in the device's key table.",
	      s->keys_live);
	p_one(f, "commands_refused_total", "counter",
	      "Commands the device refused.", U64(s->refused));
	p_head(f, "qp_state", "gauge",
	       "1 for each QP, labelled with its state and type.");
	for (uint32_t i = 0; i < s->nqps; i++)
		fprintf(f, "softverbs_qp_state{qpn=\"%u\",pid=\"%u\",type=\"%s\","
			"state=\"%s\"} 1\n", s->qps[i].qpn, s->qps[i].pid,
			sv_snap_qp_type(s->qps[i].type),
			sv_snap_qp_state(s->qps[i].state));
	p_head(f, "qp_sq_used", "gauge", "Send queue slots taken.");
	for (uint32_t i = 0; i < s->nqps; i++)
		fprintf(f, "softverbs_qp_sq_used{qpn=\"%u\"} %u\n",
			s->qps[i].qpn, s->qps[i].sq_used);
	p_head(f, "qp_rq_used", "gauge", "Receive queue slots taken.");
	for (uint32_t i = 0; i < s->nqps; i++)
		fprintf(f, "softverbs_qp_rq_used{qpn=\"%u\"} %u\n",
			s->qps[i].qpn, s->qps[i].rq_used);
	for (size_t k = 0; k < sizeof(qc) / sizeof(qc[0]); k++) {
		p_head(f, qc[k].name, "counter", qc[k].help);
		for (uint32_t i = 0; i < s->nqps; i++) {
			uint64_t v;

			memcpy(&v, (const char *)&s->qps[i] + qc[k].off,
			       sizeof(v));
			fprintf(f, "softverbs_%s{qpn=\"%u\"} %llu\n", qc[k].name,
				s->qps[i].qpn, U64(v));
		}
	}
	p_one(f, "same_host_messages_total", "counter",
	      "Messages between QPs of this host.", U64(w->lo_msgs));
	p_one(f, "same_host_bytes_total", "counter",
	      "Bytes between QPs of this host.", U64(w->lo_bytes));
	p_one(f, "roce_tx_packets_total", "counter", "RoCEv2 packets sent.",
	      U64(w->tx_pkts));
	p_one(f, "roce_rx_packets_total", "counter",
	      "RoCEv2 packets received.", U64(w->rx_pkts));
	p_head(f, "roce_rx_dropped_total", "counter",
	       "RoCEv2 packets dropped on receipt, by reason.");
	for (unsigned int i = 0; i < SV_RX_DROP_MAX; i++)
		fprintf(f, "softverbs_roce_rx_dropped_total{reason=\"%s\"} %llu\n",
			rx_drop_keys[i], U64(w->rx_drop_why[i]));
	p_one(f, "roce_retransmits_total", "counter",
	      "RoCEv2 packets sent again.", U64(w->retransmits));
	p_one(f, "roce_timeouts_total", "counter",
	      "Retransmission timeouts.", U64(w->timeouts));
	p_one(f, "roce_naks_sent_total", "counter", "NAKs sent.",
	      U64(w->naks_sent));
	p_one(f, "roce_naks_received_total", "counter", "NAKs received.",
	      U64(w->naks_rcvd));
	p_one(f, "roce_rnr_naks_sent_total", "counter", "RNR NAKs sent.",
	      U64(w->rnr_naks_sent));
	p_one(f, "roce_rnr_naks_received_total", "counter",
	      "RNR NAKs received.", U64(w->rnr_naks_rcvd));
}
