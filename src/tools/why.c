// SPDX-License-Identifier: MIT
/*
 * softverbs why: the device's last refused commands and error completions,
 * each with the reason the device had (which key, which bound, which
 * right), oldest first (src/device/diag/why.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "tools/snap.h"
#include "tools/tool.h"

static const char *wc_status(int s)
{
	static const char *const n[] = {
		"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR",
		"LOC_PROT_ERR", "WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR",
		"LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR",
		"REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
		"LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
		"INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR",
		"RESP_TIMEOUT_ERR", "GENERAL_ERR", "TM_ERR",
		"TM_RNDV_INCOMPLETE",
	};

	return s >= 0 && (size_t)s < sizeof(n) / sizeof(n[0]) ? n[s] : "?";
}

static const char *wc_opcode(uint32_t op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_BIND_MW: return "BIND_MW";
	case IBV_WC_LOCAL_INV: return "LOCAL_INV";
	case IBV_WC_TSO: return "TSO";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "WR";
	}
}

int sv_tool_why(int argc, char **argv)
{
	uint32_t qpn = 0, pid = 0;
	bool by_qp = false, by_pid = false;
	struct sv_probe p;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	uint64_t next = 0, shown = 0;
	int ret;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--qp") && i + 1 < argc) {
			qpn = (uint32_t)strtoul(argv[++i], NULL, 0);
			by_qp = true;
		} else if (!strcmp(argv[i], "--pid") && i + 1 < argc) {
			pid = (uint32_t)strtoul(argv[++i], NULL, 0);
			by_pid = true;
		} else {
			printf("usage: softverbs why [--qp QPN] [--pid PID]\n"
			       "  the device's last %u refused commands and "
			       "error completions, oldest first,\n"
			       "  each with the reason the device had (which "
			       "key, which bound, which right)\n", SV_WHY_RING);
			return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
		}
	}
	if (sv_probe_open(&p, NULL))
		return 1;
	do {
		sv_cmd_init(&cmd, SV_CMD_WHY);
		cmd.u.stat.first = (uint32_t)next;
		cmd.u.stat.rsvd = (uint32_t)(next >> 32);
		ret = sv_probe_call(&p, &cmd, &rsp);
		if (ret) {
			fprintf(stderr, "softverbs why: %s\n", strerror(-ret));
			sv_probe_close(&p);
			return 1;
		}
		if (rsp.u.why.nlisted > SV_WHY_PAGE || rsp.u.why.next < next)
			break;
		for (uint32_t i = 0; i < rsp.u.why.nlisted; i++) {
			struct sv_why_rec *r = &rsp.u.why.rec[i];
			time_t sec = (time_t)(r->time_ns / 1000000000u);
			struct tm tm;
			char t[32];

			r->why[SV_WHY_LEN - 1] = 0;
			if ((by_qp && (r->kind != SV_WHY_CQE || r->qpn != qpn)) ||
			    (by_pid && r->pid != pid))
				continue;
			localtime_r(&sec, &tm);
			strftime(t, sizeof(t), "%H:%M:%S", &tm);
			printf("%s.%03u pid %u ", t,
			       (unsigned int)(r->time_ns / 1000000u % 1000u),
			       r->pid);
			if (r->kind == SV_WHY_CMD)
				printf("%s refused: %s: %s\n", sv_cmd_name(r->op),
				       strerror(-r->status), r->why);
			else
				printf("qp %#x %s wr_id %llu: %s: %s\n", r->qpn,
				       wc_opcode(r->op),
				       (unsigned long long)r->wr_id,
				       wc_status(r->status), r->why);
			shown++;
		}
		next = rsp.u.why.next;
	} while (rsp.u.why.nlisted && next < rsp.u.why.total);
	sv_probe_close(&p);
	if (!shown)
		printf("nothing refused and no error completion%s\n",
		       by_qp || by_pid ? " of that QP or process" : "");
	return 0;
}
