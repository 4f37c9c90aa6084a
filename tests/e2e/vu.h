/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the data-path tests (test_data, test_errors,
 * test_noalloc, the kill_transfer helper): open sv0, make QPs, walk them
 * through RESET -> INIT -> RTR -> RTS against a peer, wait for completions
 * and events with generous bounds (never as synchronisation: a bound only
 * turns a hang into a failure).
 *
 * Only the standard verbs API (<infiniband/verbs.h>); nothing here knows how
 * softverbs is built.
 */
#ifndef SV_TESTS_VU_H
#define SV_TESTS_VU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define VU_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Default bound for a completion or an event that must come. */
#define VU_WAIT_MS 20000

/* How a QP is connected (what ibv_modify_qp gets on the way to RTS). */
struct vu_conn {
	unsigned int access;       /* qp_access_flags (RC, UC) */
	uint8_t timeout;           /* RC: local ACK timeout */
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t min_rnr_timer;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint32_t qkey;             /* UD */
	uint32_t sq_psn, rq_psn;
	enum ibv_qp_state stop_at; /* 0: IBV_QPS_RTS */
};

/* What a peer QP is known by. */
struct vu_addr {
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
};

long vu_now_ms(void);
/* The pid of the device this test runs against, from the lock file of its
 * private socket folder ($SV_TEST_DIR/control.lock, tests/e2e/isolated.sh);
 * -1 when there is none. */
pid_t vu_daemon_pid(void);
void vu_sleep_ms(long ms);
/* Threads of process pid whose name starts with prefix: how many (-1 when
 * the process is not there), and in *tid (if not NULL) the first one's task
 * id, or -1. */
int vu_threads_named(pid_t pid, const char *prefix, int *tid);

/* Open the device named sv0 (the only one softverbs shows). NULL and a
 * message on stderr when there is none. */
struct ibv_context *vu_open(void);

/* The port's active MTU enum and its size in bytes. */
enum ibv_mtu vu_active_mtu(struct ibv_context *ctx);
unsigned int vu_mtu_bytes(enum ibv_mtu mtu);

/* GID index 0 of port 1. 0 or -1. */
int vu_gid(struct ibv_context *ctx, union ibv_gid *gid);

/* The defaults: every remote access, timeout 14, retry 7, rnr_retry 7,
 * min_rnr_timer 1, 16 reads and atomics in flight, qkey 0x11111111. */
struct vu_conn vu_conn_default(void);

/* RESET -> INIT. 0 or an errno. */
int vu_to_init(struct ibv_qp *qp, const struct vu_conn *c);
/* INIT -> RTR towards peer. 0 or an errno. */
int vu_to_rtr(struct ibv_qp *qp, const struct vu_addr *peer,
	      const struct vu_conn *c);
/* RTR -> RTS. 0 or an errno. */
int vu_to_rts(struct ibv_qp *qp, const struct vu_conn *c);
/* RESET -> ... -> c->stop_at (RTS by default) towards peer. */
int vu_connect(struct ibv_qp *qp, const struct vu_addr *peer,
	       const struct vu_conn *c);
/* The address of a local QP, as its peer names it. */
struct vu_addr vu_addr_of(struct ibv_qp *qp, uint32_t psn);
/* Connect a and b to each other (both with c, the PSNs swapped). */
int vu_connect_pair(struct ibv_qp *a, struct ibv_qp *b,
		    const struct vu_conn *c);

/* An address handle towards a GID on port 1 (RoCE: global). */
struct ibv_ah *vu_ah(struct ibv_pd *pd, const union ibv_gid *gid);

/* The state of qp as ibv_query_qp says, or -1 (with a message). */
int vu_qp_state(struct ibv_qp *qp);

/* Poll cq until n completions arrived or ms passed: how many arrived. */
int vu_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n, long ms);
/* Wait up to ms for an async event; 0 and the event (acknowledged already:
 * only its copy is returned), or -ETIMEDOUT. */
int vu_async_event(struct ibv_context *ctx, struct ibv_async_event *ev,
		   long ms);
/* Is an event readable on fd right now? */
bool vu_fd_readable(int fd, int ms);
/* A check of a test process: on failure, say so with the pid and exit 1. */
#define VU_CHECK(c, ...)                                                     \
	do {                                                                 \
		if (!(c)) {                                                  \
			fprintf(stderr, "FAIL (pid %d): ", (int)getpid());   \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, "\n");                               \
			exit(1);                                             \
		}                                                            \
	} while (0)

/* All n bytes to (out) or from fd (a pipe or a socket), through EINTR and
 * short transfers: 0, or -1 with errno set (0: the other end closed). */
int vu_xfer(int fd, void *p, size_t n, bool out);
/* vu_xfer, or exit 1 with a message (the peer closed, or the error). */
void vu_xfer_all(int fd, void *p, size_t n, bool out);
/* A TCP socket listening on port (0: an ephemeral one) of every IPv4
 * address; a TCP connection to host:port, tried for 10 s (the peer may not
 * listen yet). Each exits 1 with a message when it cannot. */
int vu_tcp_listen(int port, int backlog);
int vu_tcp_connect(const char *host, int port);
/* Wait up to ms for a completion event on ch: 0 and its CQ (acknowledged),
 * or -ETIMEDOUT. */
int vu_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, long ms);

const char *vu_opcode_str(enum ibv_wr_opcode op);

/* The byte i of pattern tag (never all zero); fill n bytes with it, or
 * check n bytes against it (exit 1 with what and the byte otherwise). */
uint8_t vu_pat(unsigned int tag, size_t i);
void vu_fill(uint8_t *p, unsigned int tag, size_t n);
void vu_expect(const uint8_t *p, unsigned int tag, size_t n, const char *what);

/* Run this build's softverbs tool ($SV_BUILD_DIR/bin/softverbs) with the
 * arguments fmt makes; its output (stdout and stderr) in out if out is not
 * NULL. Its exit status (128 when it did not exit). */
int vu_softverbs(char *out, size_t outlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* One endpoint: context, PD, a CQ for sends and one for receives, a QP. */
struct vu_ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	bool own_ctx, own_pd, own_scq, own_rcq;
};

struct vu_qp_caps {
	uint32_t send_wr, recv_wr, send_sge, recv_sge, inline_data;
	int cqe;                   /* each CQ; 0: 256 */
	bool sq_sig_all;
	struct ibv_srq *srq;
	struct ibv_cq *scq, *rcq;  /* use these instead of making CQs */
};

/* Make an endpoint on ctx (and pd, unless NULL: then a fresh PD). 0 or an
 * errno (with a message). */
int vu_ep_create(struct vu_ep *ep, struct ibv_context *ctx, struct ibv_pd *pd,
		 enum ibv_qp_type type, const struct vu_qp_caps *caps);
void vu_ep_destroy(struct vu_ep *ep);

/* Post one signaled WR of op on ep's QP (one SGE: laddr, len, lkey; raddr
 * and rkey for RDMA) and wait for its completion: its status. Exits 1 if
 * the post fails or no completion comes. */
enum ibv_wc_status vu_post_one(struct vu_ep *ep, enum ibv_wr_opcode op,
			       uint64_t wr_id, uint64_t laddr, uint32_t lkey,
			       uint32_t len, uint64_t raddr, uint32_t rkey);

#endif
