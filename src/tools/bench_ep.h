/* SPDX-License-Identifier: MIT */
/*
 * sv-bench's measuring halves, what their two files share: bench_setup.c
 * makes and connects an endpoint (device, domains, CQs, QPs, buffers) and
 * prepares it for a run, bench_run.c runs the protocol between the two
 * processes and the timed loops (tools/bench.h is the tool's face).
 */
#ifndef SV_TOOLS_BENCH_EP_H
#define SV_TOOLS_BENCH_EP_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

#include "tools/bench.h"

#define BT_MAGIC      0x73766274u   /* "svbt" */
#define BT_PSN        0x2a2a
#define BT_WC_BATCH   32
#define BT_LAT_DEPTH  64            /* send and receive WRs of a lat QP */
#define BT_MAX_INLINE 512           /* asked for; the QP says what it got */
#define BT_REAP_SPINS (1u << 14)    /* spins between looks at the send CQ */
#define BT_IMM        0x5eb0b0e5u
#define BT_MAX_CQE    65535         /* the most CQEs one CQ is asked for */

enum { BT_RUN = 1, BT_READY, BT_FINISH, BT_DONE, BT_QUIT };

struct bt_msg {
	uint32_t op;
	uint32_t zero;
	uint64_t size;
	uint64_t iters;
};

/* What one side tells the other; nqp QPNs follow. */
struct bt_info {
	uint32_t magic;
	uint32_t nqp;
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint32_t psn;
	uint8_t gid[16];
};

struct bt_cq {
	struct ibv_cq *cq;
	bool armed;              /* -e: a notification is requested */
};

/* The send CQs, or the receive CQs: one for all QPs, or one per QP
 * (--domains per-qp). Under -e they share one completion channel. */
struct bt_cqs {
	struct bt_cq *c;
	unsigned int n;
	unsigned int next;       /* where a look at all of them begins */
	struct ibv_comp_channel *ch;
};

struct bt_ep {
	const struct bt_opts *o;
	bool server;
	int fd;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct bt_cqs scq, rcq;
	struct ibv_qp **qp;
	unsigned int nqp;
	struct ibv_exp_res_domain **dom;   /* --domains one or per-qp */
	unsigned int ndom;
	char *buf;               /* 2 * half bytes: receive, then send */
	int memfd;               /* --memfd: the buffer's file, else -1 */
	size_t half;
	char *rbuf, *sbuf;
	uint64_t rva, sva;       /* their addresses in the MR (--dm: 0, half) */
	struct ibv_dm *dm;       /* --dm: the buffers */
	uint32_t max_inline;
	uint32_t sq_depth, rq_depth, sig_every;
	bool recvs;              /* receive WRs are posted and reposted */
	bool imm;                /* write ping-pong by WRITE_WITH_IMM (-e) */

	/* the peer */
	uint64_t raddr;
	uint32_t rkey;
	uint32_t *rqpn;
	union ibv_gid rgid;

	/* per QP, built once */
	struct ibv_send_wr *swr;
	struct ibv_sge *ssge;
	struct ibv_recv_wr *rwr;
	struct ibv_sge *rsge;
	uint64_t *posted, *done;
	uint32_t *unsig;
	unsigned int base_flags;
	uint64_t iters;          /* of the current run, per QP */

	uint64_t *samples;       /* lat: one round trip per iteration, ns */
	uint64_t nsamples;
	struct ibv_wc wc[BT_WC_BATCH];
};

/* The CQ of s that QP j uses. */
static inline unsigned int cq_of(const struct bt_cqs *s, uint32_t j)
{
	return s->n == 1 ? 0 : j;
}

/* A message on stderr, naming the half (bench_run.c) */
void bt_errmsg(const struct bt_ep *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The whole of len bytes to or from the socket: 0 or -1 */
int bt_xwrite(int fd, const void *p, size_t len);
int bt_xread(int fd, void *p, size_t len);
/* Post QP j's receive WR: 0 or -1 (with a message) */
int bt_post_recv(struct bt_ep *e, uint32_t j);

/* bench_setup.c: an endpoint made and connected to its peer over fd (0,
 * or -1 with a message; bt_ep_destroy undoes what was made), its end, and
 * its WRs set for a run of iters of size bytes */
int bt_ep_create(struct bt_ep *e, const struct bt_opts *o, int fd,
		 bool server);
int bt_ep_destroy(struct bt_ep *e);
void bt_prepare(struct bt_ep *e, uint64_t size, uint64_t iters);

#endif /* SV_TOOLS_BENCH_EP_H */
