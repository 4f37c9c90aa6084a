// SPDX-License-Identifier: MIT
/*
 * WQE execution: what the NIC does with a work request.
 *
 * All QPs live on this one daemon, so a message goes from the requester's
 * send queue straight to the target QP ("loopback"); deliver() is the one
 * place that plays the responder, so that RoCE can later put a wire between
 * the two halves. Semantics follow the IBA and Linux rxe:
 *
 *  - the requester validates its WQE and its local SGEs, then the responder
 *    checks, in order: reachability, the operation against the QP's access
 *    flags, a receive WQE (RNR when none), length, rkey; only then is
 *    anything written to the target;
 *  - RC errors put the QP in ERR; UC/UD send errors put it in SQE; remote
 *    trouble on UC/UD drops the message and the sender succeeds;
 *  - an RC target that does not answer (gone, not ready, in error) costs the
 *    transport timeout, retry_cnt times; a missing receive WQE the target's
 *    RNR timer, rnr_retry times (7: forever).
 *
 * Execution is synchronous and in order: a WQE is finished (or waits as the
 * head of its queue) before the next starts. So IBV_SEND_FENCE and the
 * max_rd_atomic / max_dest_rd_atomic limits (at most one READ or atomic is
 * ever outstanding per QP) are honoured by construction. Atomics run under
 * sv_dev.lock, so they are atomic with respect to each other across the whole
 * device (IBV_ATOMIC_HCA).
 *
 * Nothing a client wrote is trusted: a WQE slot is copied out of the ring
 * before any field is looked at, and every index, count, length, key and
 * handle is checked against daemon-private state.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "device/engine.h"
#include "device/sv_dev.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

/* ================= pure helpers ================= */

uint64_t sv_rnr_timer_ns(uint8_t code)
{
	/* IBA table 45, in units of 10 us */
	static const uint32_t t10us[32] = {
		65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
		256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192,
		12288, 16384, 24576, 32768, 49152,
	};

	return (uint64_t)t10us[code & 31] * 10000u;
}

uint64_t sv_ack_timeout_ns(uint8_t timeout)
{
	if (timeout == 0)
		return UINT64_MAX;
	if (timeout > 31)
		timeout = 31;
	return 4096ull << timeout;
}

uint32_t sv_mtu_bytes(uint32_t mtu)
{
	if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096)
		return 0;
	return 256u << (mtu - IBV_MTU_256);
}

bool sv_range_ok(uint64_t base, uint64_t size, uint64_t addr, uint64_t len)
{
	if (addr < base || len > size)
		return false;
	return addr - base <= size - len;
}

uint16_t sv_ip_csum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t sum = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)b[i] << 8 | b[i + 1];
	if (len & 1)
		sum += (uint32_t)b[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

bool sv_gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					    0xff, 0xff };

	return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void sv_grh_build(uint8_t out[SV_GRH_BYTES], const uint8_t sgid[16],
		  const uint8_t dgid[16], uint8_t traffic_class,
		  uint32_t flow_label, uint8_t hop_limit, uint32_t payload,
		  bool imm)
{
	/* what follows the network header on the wire: UDP, BTH, DETH,
	 * ImmDt, the payload, ICRC */
	uint32_t l4 = 8 + 12 + 8 + (imm ? 4 : 0) + payload + 4;
	uint8_t hop = hop_limit ? hop_limit : 64;

	memset(out, 0, SV_GRH_BYTES);
	if (l4 > 0xffff - 20)
		l4 = 0xffff - 20;       /* cannot happen below the MTU */
	if (sv_gid_is_v4(sgid)) {
		uint8_t *ip = out + 20;

		ip[0] = 0x45;                   /* version 4, 5 words */
		ip[1] = traffic_class;
		put16(ip + 2, 20 + l4);
		/* id 0; flags: don't fragment */
		ip[6] = 0x40;
		ip[8] = hop;
		ip[9] = 17;                     /* UDP */
		memcpy(ip + 12, sgid + 12, 4);
		memcpy(ip + 16, dgid + 12, 4);
		put16(ip + 10, sv_ip_csum(ip, 20));
		return;
	}
	out[0] = (uint8_t)(0x60 | traffic_class >> 4);
	out[1] = (uint8_t)(traffic_class << 4 | ((flow_label >> 16) & 0xf));
	put16(out + 2, flow_label & 0xffff);
	put16(out + 4, l4);
	out[6] = 17;                            /* RoCEv2: UDP */
	out[7] = hop;
	memcpy(out + 8, sgid, 16);
	memcpy(out + 24, dgid, 16);
}

bool sv_iov_seek(const struct iovec *iov, unsigned int n,
		 struct sv_iov_cur *cur, uint64_t off)
{
	while (off) {
		size_t left;

		if (cur->idx >= n)
			return false;
		left = iov[cur->idx].iov_len - cur->off;
		if (off < left) {
			cur->off += off;
			return true;
		}
		off -= left;
		cur->idx++;
		cur->off = 0;
	}
	return true;
}

size_t sv_iov_take(const struct iovec *iov, unsigned int n,
		   struct sv_iov_cur *cur, size_t max, struct iovec *out,
		   unsigned int outmax, unsigned int *nout)
{
	size_t got = 0;
	unsigned int k = 0;

	while (got < max && k < outmax && cur->idx < n) {
		size_t left = iov[cur->idx].iov_len - cur->off;
		size_t take = left < max - got ? left : max - got;

		if (!take) {            /* an empty or finished piece */
			cur->idx++;
			cur->off = 0;
			continue;
		}
		out[k].iov_base = (char *)iov[cur->idx].iov_base + cur->off;
		out[k].iov_len = take;
		k++;
		got += take;
		cur->off += take;
		if (cur->off == iov[cur->idx].iov_len) {
			cur->idx++;
			cur->off = 0;
		}
	}
	*nout = k;
	return got;
}

/* ================= memory access ================= */

#define SV_IOV_WINDOW 64

/* Move len bytes between buf (this process) and the memory at cur of m:
 * into buf, or out of it when write. false on any failure. Inlined into
 * each caller, where write is a constant. */
static inline __attribute__((always_inline)) bool
mem_xfer(const struct sv_mem *m, struct sv_iov_cur *cur, void *buf, size_t len,
	 bool write)
{
	struct iovec win[SV_IOV_WINDOW];
	size_t done = 0;

	while (done < len) {
		unsigned int k;
		size_t n = sv_iov_take(m->iov, m->niov, cur, len - done, win,
				       SV_IOV_WINDOW, &k);
		struct iovec local = { (char *)buf + done, n };
		ssize_t r;

		if (!n)
			return false;   /* the list ran out */
		if (m->pid == 0) {
			for (unsigned int i = 0; i < k; i++) {
				char *b = (char *)buf + done;

				if (write)
					memcpy(win[i].iov_base, b,
					       win[i].iov_len);
				else
					memcpy(b, win[i].iov_base,
					       win[i].iov_len);
				done += win[i].iov_len;
			}
			continue;
		}
		r = write ? process_vm_writev(m->pid, &local, 1, win, k, 0)
			  : process_vm_readv(m->pid, &local, 1, win, k, 0);
		if (r < 0 || (size_t)r != n)
			return false;
		done += n;
	}
	return true;
}

int sv_mem_copy(const struct sv_mem *dst, uint64_t dst_off,
		const struct sv_mem *src, uint64_t src_off, uint64_t len,
		void *bounce, size_t bounce_bytes)
{
	struct sv_iov_cur sc = { 0, 0 }, dc = { 0, 0 };

	if (!len)
		return SV_COPY_OK;
	if (!sv_iov_seek(src->iov, src->niov, &sc, src_off))
		return SV_COPY_SRC_FAULT;
	if (!sv_iov_seek(dst->iov, dst->niov, &dc, dst_off))
		return SV_COPY_DST_FAULT;
	while (len) {
		size_t chunk = len < bounce_bytes ? (size_t)len : bounce_bytes;

		if (!mem_xfer(src, &sc, bounce, chunk, false))
			return SV_COPY_SRC_FAULT;
		if (!mem_xfer(dst, &dc, bounce, chunk, true))
			return SV_COPY_DST_FAULT;
		len -= chunk;
	}
	return SV_COPY_OK;
}

/* ================= WQE execution ================= */

uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A copy into or out of the target's memory failed: was it because its
 * process has exited (and its teardown has not run yet)? Then the target
 * gives no answer, as a vanished host would, and the requester sees the
 * transport timeout and retry-exceeded, not an access error. Only on the
 * error path: one poll of the pidfd.
 */
static bool target_gone(const struct sv_qp *t)
{
	const struct sv_client *c = t->owner;
	struct pollfd p;

	if (c->dead)
		return true;
	if (c->pidfd >= 0) {
		p.fd = c->pidfd;
		p.events = POLLIN;
		p.revents = 0;
		return poll(&p, 1, 0) == 1;
	}
	return kill(c->pid, 0) < 0 && errno == ESRCH;
}

/* Responder outcomes that are not a completion status. */
#define RES_RNR   (-1)    /* no receive WQE: wait the target's RNR timer */
#define RES_NOACK (-2)    /* no answer: wait the transport timeout */
#define RES_BUSY  (-3)    /* the target's receive queue is being filled by
			   * another engine's unlocked copy: try again */
#define RES_LOST  (-4)    /* the requester changed (destroyed, new state)
			   * during an unlocked copy: forget this attempt */

/* A send WQE copied out of its slot. */
struct swqe {
	struct sv_send_wqe h;
	union {
		struct sv_wqe_sge sge[SV_MAX_SGE];
		uint8_t data[SV_MAX_INLINE];
	} u;
};

/* A receive WQE copied out, and what it resolves to. */
struct rwqe {
	struct sv_recv_wqe h;
	struct sv_wqe_sge sge[SV_MAX_SGE];
	struct sv_wq *wq;          /* the ring it came from */
	struct sv_srq *srq;        /* or NULL */
	struct iovec iov[SV_MAX_SGE];
	struct sv_mem mem;
	uint64_t cap;              /* bytes the buffers hold */
};

/* One message on its way from requester to responder. */
struct msg {
	struct sv_qp *qp;          /* requester */
	const struct swqe *w;
	uint32_t opcode;           /* enum ibv_wr_opcode */
	uint64_t len;
	struct sv_mem local;       /* source (SEND, WRITE) or sink (READ, atomic) */
	struct iovec liov[SV_MAX_SGE];
	struct sv_ah *ah;          /* UD */
	uint64_t rnr_ns;           /* out: the target's RNR timer */
	int lost;                  /* out: see msg_copy */
};

/* What changed during an unlocked copy. */
#define LOST_REQ  1       /* the requester QP */
#define LOST_RESP 2       /* the responder QP */

/* Is t's receive queue (its own or its SRQ's) being filled unlocked? */
static bool *rx_busy_of(struct sv_qp *t)
{
	return t->srq ? &t->srq->rx_busy : &t->rx_busy;
}

/*
 * Copy a message's bytes between requester and responder. Up to
 * SV_UNLOCKED_COPY bytes, under sv_dev.lock like everything else; larger
 * ones without it, so that the engines of other domains, and commands, go on
 * meanwhile. Then:
 *  - copy_seq is odd for the duration: whoever frees an object waits for it
 *    to be even again (sv_engine_quiesce), so qp, t, their SRQ and CQs, and
 *    the memory of every MR resolved before the copy outlive it;
 *  - rx (the copy fills t's head receive WQE): the receive queue is marked
 *    busy, so no other engine takes, fills or flushes that WQE meanwhile;
 *  - the lock is held again on return, and m->lost says whether the
 *    requester or the responder was destroyed or changed state meanwhile:
 *    the caller then drops what it was doing.
 */
static __attribute__((noinline)) int
msg_copy_unlocked(struct sv_exec *x, struct msg *m, struct sv_qp *t, bool rx,
		  const struct sv_mem *dst, uint64_t doff,
		  const struct sv_mem *src, uint64_t soff, uint64_t len)
{
	uint32_t qgen = m->qp->state_gen, tgen = t->state_gen;
	bool *busy = rx ? rx_busy_of(t) : NULL;
	int ret;

	if (busy)
		*busy = true;
	__atomic_store_n(x->copy_seq, *x->copy_seq + 1, __ATOMIC_RELEASE);
	sv_dev_unlock();
	ret = sv_mem_copy(dst, doff, src, soff, len, x->bounce,
			  x->bounce_bytes);
	sv_dev_lock(false);
	__atomic_store_n(x->copy_seq, *x->copy_seq + 1, __ATOMIC_RELEASE);
	if (busy) {
		*busy = false;
		/* t's engine may have left a flush for later */
		if (t->engine != m->qp->engine)
			sv_engine_kick(t->engine);
	}
	if (m->qp->dead || m->qp->state_gen != qgen)
		m->lost = LOST_REQ;
	else if (t->dead || t->state_gen != tgen)
		m->lost = LOST_RESP;
	return ret;
}

static inline int msg_copy(struct sv_exec *x, struct msg *m, struct sv_qp *t,
			   bool rx, const struct sv_mem *dst, uint64_t doff,
			   const struct sv_mem *src, uint64_t soff,
			   uint64_t len)
{
	if (unlikely(len >= SV_UNLOCKED_COPY && x->copy_seq))
		return msg_copy_unlocked(x, m, t, rx, dst, doff, src, soff,
					 len);
	return sv_mem_copy(dst, doff, src, soff, len, x->bounce,
			   x->bounce_bytes);
}

/* The responder's answer once an unlocked copy found things changed. */
static int lost_res(const struct msg *m)
{
	return m->lost == LOST_REQ ? RES_LOST : RES_NOACK;
}

static inline uint32_t wq_prod(const struct sv_wq *wq)
{
	/* acquire: pairs with the library's release store after the WQE */
	return __atomic_load_n(&wq->hdr->prod, __ATOMIC_ACQUIRE);
}

/* WQEs waiting in wq; *corrupt when prod is more than a ring ahead. */
static inline uint32_t wq_pending(const struct sv_wq *wq, bool *corrupt)
{
	uint32_t n;

	if (!wq->hdr || !wq->entries) {
		*corrupt = false;
		return 0;
	}
	n = wq_prod(wq) - wq->cons;
	*corrupt = n > wq->entries;
	return *corrupt ? 0 : n;
}

static inline void wq_consume(struct sv_wq *wq)
{
	wq->cons++;
	/* release: the slot may be reused once the library sees this */
	__atomic_store_n(&wq->hdr->cons, wq->cons, __ATOMIC_RELEASE);
}

static inline void *wq_head(const struct sv_wq *wq)
{
	return sv_wq_slot(wq->hdr, wq->entries, wq->stride, wq->cons);
}

static void qp_set_state(struct sv_qp *qp, uint32_t state)
{
	qp->state = state;
	qp->state_gen++;
	if (qp->sq.hdr)
		__atomic_store_n(&qp->sq.hdr->qp_state, state, __ATOMIC_RELAXED);
	if (qp->rq.hdr && qp->rq.entries)
		__atomic_store_n(&qp->rq.hdr->qp_state, state, __ATOMIC_RELAXED);
	/* its engine flushes what is queued (it may be another engine) */
	sv_engine_kick(qp->engine);
}

static void qp_event(struct sv_qp *qp, uint32_t type)
{
	sv_async_event(qp->owner, type, qp->cookie, qp->handle);
}

/* The QP goes to ERR; event (if not 0) says why. */
static void qp_error(struct sv_qp *qp, uint32_t event)
{
	if (qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET)
		return;
	qp_set_state(qp, IBV_QPS_ERR);
	if (event)
		qp_event(qp, event);
}

static void srq_error(struct sv_srq *srq)
{
	if (srq->in_error)
		return;
	srq->in_error = true;
	sv_async_event(srq->owner, IBV_EVENT_SRQ_ERR, srq->cookie,
		       srq->handle);
}

static void cqe_init(struct sv_cqe *e, uint64_t wr_id, uint32_t status,
		     uint32_t opcode, uint32_t qpn)
{
	memset(e, 0, sizeof(*e));
	e->wr_id = wr_id;
	e->status = status;
	e->opcode = opcode;
	e->qp_num = qpn;
	e->timestamp = sv_now_ns();
}

/* Push a CQE for qp; a CQ overrun is fatal to the QP. */
static void qp_push(struct sv_qp *qp, struct sv_cq *cq, const struct sv_cqe *e,
		    bool solicited)
{
	if (!cq)
		return;
	if (sv_cq_push(cq, e, solicited) == -ENOSPC)
		qp_error(qp, IBV_EVENT_QP_FATAL);
}

static uint32_t wc_opcode(uint32_t wr_opcode)
{
	switch (wr_opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_TSO:
		return IBV_WC_TSO;
	default:
		return IBV_WC_SEND;
	}
}

static bool op_valid(uint32_t qp_type, uint32_t op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return qp_type == IBV_QPT_RC || qp_type == IBV_QPT_UC ||
		       qp_type == IBV_QPT_UD;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return qp_type == IBV_QPT_RC || qp_type == IBV_QPT_UC;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return qp_type == IBV_QPT_RC;
	default:
		return false;
	}
}

static bool is_atomic(uint32_t op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static bool has_imm(uint32_t op)
{
	return op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* ---- the send queue ---- */

/* Finish the head WQE of qp's SQ with status. */
static void sq_complete(struct sv_qp *qp, const struct swqe *w,
			uint32_t status, uint64_t len)
{
	bool signaled = (w->h.flags & IBV_SEND_SIGNALED) || qp->sq_sig_all;

	/* the slot is free before the completion says so */
	wq_consume(&qp->sq);
	qp->head_started = false;
	qp->wait_until_ns = 0;
	qp->rnr_left = qp->retry_left = 0;
	sv_dev.wqes++;
	if (status != IBV_WC_SUCCESS || signaled) {
		struct sv_cqe e;

		cqe_init(&e, w->h.wr_id, status, wc_opcode(w->h.opcode),
			 qp->qpn);
		e.byte_len = (uint32_t)len;
		qp_push(qp, qp->send_cq, &e, false);
	}
	if (status == IBV_WC_SUCCESS)
		return;
	if (qp->type == IBV_QPT_RC)
		qp_error(qp, 0);
	else if (qp->state != IBV_QPS_ERR)
		qp_set_state(qp, IBV_QPS_SQE);
}

/* Copy the head send WQE out of the ring: header, then as much of the body
 * as the header says, bounded by the QP's private limits. false: the WQE is
 * malformed. */
static bool swqe_copy(const struct sv_qp *qp, struct swqe *w)
{
	const uint8_t *slot = wq_head(&qp->sq);
	uint32_t body = qp->sq.stride - SV_SEND_WQE_HDR;
	size_t need;

	memcpy(&w->h, slot, sizeof(w->h));
	if (w->h.flags & IBV_SEND_INLINE) {
		if (w->h.num_sge > qp->sq.max_inline ||
		    w->h.num_sge > SV_MAX_INLINE)
			return false;
		need = w->h.num_sge;
	} else {
		if (w->h.num_sge > qp->sq.max_sge ||
		    w->h.num_sge > SV_MAX_SGE)
			return false;
		need = (size_t)w->h.num_sge * sizeof(struct sv_wqe_sge);
	}
	if (need > body)
		return false;
	memcpy(&w->u, slot + SV_SEND_WQE_HDR, need);
	return true;
}

/* Resolve local SGEs of pd into iovecs: a completion status. Zero-length
 * SGEs are skipped (no key is checked for them). */
static uint32_t sges_resolve(const struct sv_wqe_sge *sge, uint32_t n,
			     struct sv_pd *pd, bool sink, struct iovec *iov,
			     struct sv_mem *mem, uint64_t *total)
{
	uint64_t sum = 0;
	unsigned int k = 0;

	mem->pid = -1;      /* never 0 (this process): set by the first MR */
	for (uint32_t i = 0; i < n; i++) {
		struct sv_mr *mr;

		sum += sge[i].length;
		if (!sge[i].length)
			continue;
		mr = sv_keytab_lookup(&sv_dev.keys, sge[i].lkey);
		if (!mr || mr->pd != pd ||
		    !sv_range_ok(mr->iova, mr->length, sge[i].addr,
				 sge[i].length) ||
		    (sink && !(mr->access & IBV_ACCESS_LOCAL_WRITE)))
			return IBV_WC_LOC_PROT_ERR;
		mem->pid = mr->owner->pid;
		iov[k].iov_base = (void *)(uintptr_t)(mr->addr +
						      (sge[i].addr - mr->iova));
		iov[k].iov_len = sge[i].length;
		k++;
	}
	mem->iov = iov;
	mem->niov = k;
	*total = sum;
	return IBV_WC_SUCCESS;
}

/* ---- the responder ---- */

static bool can_receive(const struct sv_qp *t)
{
	switch (t->state) {
	case IBV_QPS_RTR:
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
	case IBV_QPS_SQE:
		return true;
	default:
		return false;
	}
}

/* The first message a connected QP takes in RTR establishes it. */
static void comm_est(struct sv_qp *t)
{
	if (t->state == IBV_QPS_RTR && !t->comm_est_sent &&
	    t->type != IBV_QPT_UD) {
		t->comm_est_sent = true;
		qp_event(t, IBV_EVENT_COMM_EST);
	}
}

/* RC: the responder refuses the request as invalid; its QP goes to ERR. */
static int resp_inv_req(struct sv_qp *t)
{
	if (t->type == IBV_QPT_RC)
		qp_error(t, IBV_EVENT_QP_REQ_ERR);
	return IBV_WC_REM_INV_REQ_ERR;
}

/* RC: a remote access violation; the responder's QP goes to ERR. */
static int resp_access(struct sv_qp *t)
{
	if (t->type == IBV_QPT_RC)
		qp_error(t, IBV_EVENT_QP_ACCESS_ERR);
	return IBV_WC_REM_ACCESS_ERR;
}

/*
 * Look at (do not take) the next receive WQE of t: 0, -ENOENT when there is
 * none, -EIO when the ring is corrupt (t or its SRQ is in error already).
 */
static int rq_peek(struct sv_qp *t, struct rwqe *r)
{
	struct sv_wq *wq;
	bool corrupt;
	uint32_t n;
	const uint8_t *slot;

	r->srq = t->srq;
	if (r->srq) {
		if (r->srq->in_error) {
			qp_error(t, 0);
			return -EIO;
		}
		wq = &r->srq->rq;
	} else {
		wq = &t->rq;
	}
	r->wq = wq;
	n = wq_pending(wq, &corrupt);
	if (corrupt) {
		if (r->srq)
			srq_error(r->srq);
		qp_error(t, r->srq ? 0 : IBV_EVENT_QP_FATAL);
		return -EIO;
	}
	if (!n)
		return -ENOENT;
	slot = wq_head(wq);
	memcpy(&r->h, slot, sizeof(r->h));
	if (r->h.num_sge > wq->max_sge || r->h.num_sge > SV_MAX_SGE ||
	    SV_RECV_WQE_HDR + (size_t)r->h.num_sge * sizeof(struct sv_wqe_sge) >
	    wq->stride)
		r->h.num_sge = UINT32_MAX;      /* malformed: see rq_resolve */
	else
		memcpy(r->sge, slot + SV_RECV_WQE_HDR,
		       (size_t)r->h.num_sge * sizeof(struct sv_wqe_sge));
	return 0;
}

/* Check the receive buffers: a completion status for the receive WQE. */
static uint32_t rq_resolve(struct sv_qp *t, struct rwqe *r)
{
	struct sv_pd *pd = r->srq ? r->srq->pd : t->pd;

	if (r->h.num_sge == UINT32_MAX)
		return IBV_WC_LOC_QP_OP_ERR;
	return sges_resolve(r->sge, r->h.num_sge, pd, true, r->iov, &r->mem,
			    &r->cap);
}

/* Take the peeked WQE off its ring. */
static void rq_commit(struct rwqe *r)
{
	struct sv_srq *srq = r->srq;

	wq_consume(r->wq);
	if (srq && srq->limit) {
		bool corrupt;
		uint32_t left = wq_pending(&srq->rq, &corrupt);

		if (!corrupt && left < srq->limit) {
			srq->limit = 0;
			__atomic_store_n(&srq->rq.hdr->srq_limit, 0,
					 __ATOMIC_RELAXED);
			sv_async_event(srq->owner,
				       IBV_EVENT_SRQ_LIMIT_REACHED,
				       srq->cookie, srq->handle);
		}
	}
}

/* Complete the taken receive WQE at t; an error puts t in ERR. */
static void rq_complete(struct sv_qp *t, struct rwqe *r, uint32_t status,
			uint32_t opcode, const struct msg *m, uint32_t byte_len)
{
	struct sv_cqe e;
	bool solicited = false;

	rq_commit(r);
	cqe_init(&e, r->h.wr_id, status, opcode, t->qpn);
	e.byte_len = byte_len;
	e.src_qp = m->qp->qpn;
	if (status == IBV_WC_SUCCESS) {
		if (has_imm(m->opcode)) {
			e.imm_data = m->w->h.imm;
			e.wc_flags |= IBV_WC_WITH_IMM;
		}
		solicited = (m->w->h.flags & IBV_SEND_SOLICITED) != 0;
	}
	if (m->ah) {
		e.sl = m->ah->attr.sl;
		if (status == IBV_WC_SUCCESS)
			e.wc_flags |= IBV_WC_GRH;
	} else {
		e.sl = m->qp->attr.ah_attr.sl;
	}
	qp_push(t, t->recv_cq, &e, solicited);
	if (status != IBV_WC_SUCCESS)
		qp_error(t, 0);
}

/* The receive WQE a message consumes, looked at (rq_peek): 0, or the
 * responder's answer when there is none to take: RES_BUSY (another engine
 * fills the head one), RES_RNR (none posted; m->rnr_ns set), RES_NOACK (the
 * target just went to ERR). */
static inline __attribute__((always_inline)) int
rq_next(struct sv_qp *t, struct rwqe *r, struct msg *m)
{
	int ret;

	if (*rx_busy_of(t))
		return RES_BUSY;
	ret = rq_peek(t, r);
	if (ret == -ENOENT) {
		m->rnr_ns = sv_rnr_timer_ns(t->attr.min_rnr_timer);
		return RES_RNR;
	}
	return ret ? RES_NOACK : 0;
}

/* Take a receive WQE and fill it with the message (SEND / SEND_WITH_IMM). */
static int deliver_send(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	struct rwqe r;
	uint8_t grh[SV_GRH_BYTES];
	uint64_t hdr = m->ah ? SV_GRH_BYTES : 0;
	uint32_t st;
	int ret;

	ret = rq_next(t, &r, m);
	if (ret)
		return ret;
	st = rq_resolve(t, &r);
	if (st != IBV_WC_SUCCESS) {
		rq_complete(t, &r, st, IBV_WC_RECV, m, 0);
		return IBV_WC_REM_OP_ERR;
	}
	if (r.cap < hdr + m->len) {
		rq_complete(t, &r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, m, 0);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	if (m->ah) {
		const struct sv_wire_ah *ah = &m->ah->attr;
		const uint8_t *sgid = sv_dev.gid[ah->sgid_index %
						 SV_GID_TBL_LEN].gid;
		struct iovec g = { grh, sizeof(grh) };
		struct sv_mem gm = { 0, &g, 1 };

		sv_grh_build(grh, sgid, ah->dgid, ah->traffic_class,
			     ah->flow_label, ah->hop_limit, (uint32_t)m->len,
			     has_imm(m->opcode));
		if (sv_mem_copy(&r.mem, 0, &gm, 0, sizeof(grh), x->bounce,
				x->bounce_bytes) != SV_COPY_OK) {
			rq_complete(t, &r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV,
				    m, 0);
			return IBV_WC_REM_OP_ERR;
		}
	}
	ret = msg_copy(x, m, t, true, &r.mem, hdr, &m->local, 0, m->len);
	if (m->lost)
		return lost_res(m);
	switch (ret) {
	case SV_COPY_SRC_FAULT:
		/* the requester's memory: the receive WQE stays posted */
		return IBV_WC_LOC_PROT_ERR;
	case SV_COPY_DST_FAULT:
		if (target_gone(t))
			return RES_NOACK;
		rq_complete(t, &r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, m, 0);
		return IBV_WC_REM_OP_ERR;
	default:
		break;
	}
	rq_complete(t, &r, IBV_WC_SUCCESS, IBV_WC_RECV, m,
		    (uint32_t)(hdr + m->len));
	return IBV_WC_SUCCESS;
}

/* The target's memory named by rkey for len bytes at addr, with access. */
static bool rkey_resolve(struct sv_qp *t, uint32_t rkey, uint64_t addr,
			 uint64_t len, uint32_t access, struct iovec *iov,
			 struct sv_mem *mem)
{
	struct sv_mr *mr = sv_keytab_lookup(&sv_dev.keys, rkey);

	if (!mr || mr->pd != t->pd || !(mr->access & access) ||
	    !sv_range_ok(mr->iova, mr->length, addr, len))
		return false;
	iov->iov_base = (void *)(uintptr_t)(mr->addr + (addr - mr->iova));
	iov->iov_len = len;
	mem->pid = mr->owner->pid;
	mem->iov = iov;
	mem->niov = 1;
	return true;
}

static int deliver_write(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;
	bool imm = m->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	struct iovec riov;
	struct sv_mem rmem;
	struct rwqe r;
	int ret;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
		return resp_inv_req(t);
	if (imm) {
		ret = rq_next(t, &r, m);
		if (ret)
			return ret;
	}
	if (m->len) {
		if (!rkey_resolve(t, h->rkey, h->remote_addr, m->len,
				  IBV_ACCESS_REMOTE_WRITE, &riov, &rmem))
			return resp_access(t);
		ret = msg_copy(x, m, t, imm, &rmem, 0, &m->local, 0, m->len);
		if (m->lost)
			return lost_res(m);
		switch (ret) {
		case SV_COPY_SRC_FAULT:
			return IBV_WC_LOC_PROT_ERR;
		case SV_COPY_DST_FAULT:
			return target_gone(t) ? RES_NOACK : resp_access(t);
		default:
			break;
		}
	}
	if (imm)
		rq_complete(t, &r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
			    m, (uint32_t)m->len);
	return IBV_WC_SUCCESS;
}

static int deliver_read(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;
	struct iovec riov;
	struct sv_mem rmem;
	int ret;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
		return resp_inv_req(t);
	if (!m->len)
		return IBV_WC_SUCCESS;
	if (!rkey_resolve(t, h->rkey, h->remote_addr, m->len,
			  IBV_ACCESS_REMOTE_READ, &riov, &rmem))
		return resp_access(t);
	ret = msg_copy(x, m, t, false, &m->local, 0, &rmem, 0, m->len);
	if (m->lost)
		return lost_res(m);
	switch (ret) {
	case SV_COPY_SRC_FAULT:
		return target_gone(t) ? RES_NOACK : resp_access(t);
	case SV_COPY_DST_FAULT:
		return IBV_WC_LOC_PROT_ERR;
	default:
		return IBV_WC_SUCCESS;
	}
}

static int deliver_atomic(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;
	uint64_t orig, val;
	struct iovec riov, liov = { &orig, sizeof(orig) };
	struct iovec viov = { &val, sizeof(val) };
	struct sv_mem rmem, lmem = { 0, &liov, 1 }, vmem = { 0, &viov, 1 };
	bool store;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) ||
	    (h->remote_addr & 7))
		return resp_inv_req(t);
	if (!rkey_resolve(t, h->rkey, h->remote_addr, sizeof(uint64_t),
			  IBV_ACCESS_REMOTE_ATOMIC, &riov, &rmem))
		return resp_access(t);
	/* atomic with respect to every other atomic: we hold sv_dev.lock */
	if (sv_mem_copy(&lmem, 0, &rmem, 0, sizeof(orig), x->bounce,
			x->bounce_bytes) != SV_COPY_OK)
		return target_gone(t) ? RES_NOACK : resp_access(t);
	if (m->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		store = orig == h->atomic.compare_add;
		val = h->atomic.swap;
	} else {
		store = true;
		val = orig + h->atomic.compare_add;
	}
	if (store && sv_mem_copy(&rmem, 0, &vmem, 0, sizeof(val), x->bounce,
				 x->bounce_bytes) != SV_COPY_OK)
		return target_gone(t) ? RES_NOACK : resp_access(t);
	if (sv_mem_copy(&m->local, 0, &lmem, 0, sizeof(orig), x->bounce,
			x->bounce_bytes) != SV_COPY_OK)
		return IBV_WC_LOC_PROT_ERR;
	return IBV_WC_SUCCESS;
}

/*
 * The responder: hand message m to the QP it is addressed to. Returns the
 * requester's completion status, RES_RNR or RES_NOACK, as an RC requester
 * would see it (the caller turns remote trouble into success for UC/UD).
 * Everything the target sees (receive completions, its state, its events)
 * happens here.
 */
static int deliver(struct sv_exec *x, struct msg *m)
{
	struct sv_qp *qp = m->qp, *t;

	if (qp->type == IBV_QPT_UD) {
		const struct sv_send_wqe *h = &m->w->h;
		uint32_t qkey = (h->ud.remote_qkey & 0x80000000u) ?
				qp->attr.qkey : h->ud.remote_qkey;

		t = sv_qp_lookup(h->remote_qpn & 0xffffff);
		if (!t || t->type != IBV_QPT_UD || !can_receive(t) ||
		    t->attr.qkey != qkey)
			return IBV_WC_SUCCESS;  /* a datagram is just lost */
	} else {
		t = sv_qp_lookup(qp->attr.dest_qp_num);
		/* a connected responder takes only its own peer's packets */
		if (!t || t->type != qp->type || !can_receive(t) ||
		    t->attr.dest_qp_num != qp->qpn)
			return RES_NOACK;
	}
	comm_est(t);
	switch (m->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return deliver_send(x, t, m);
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return deliver_write(x, t, m);
	case IBV_WR_RDMA_READ:
		return deliver_read(x, t, m);
	default:
		return deliver_atomic(x, t, m);
	}
}

/* ---- the requester ---- */

/* Validate the head WQE and run it: a completion status, RES_RNR or
 * RES_NOACK. */
static int sq_run(struct sv_exec *x, struct sv_qp *qp, struct swqe *w,
		  struct msg *m)
{
	uint32_t op, st;
	bool sink;

	if (!swqe_copy(qp, w))
		return IBV_WC_LOC_QP_OP_ERR;
	op = w->h.opcode;
	m->qp = qp;
	m->w = w;
	m->opcode = op;
	m->ah = NULL;
	m->len = 0;
	if (!op_valid(qp->type, op))
		return IBV_WC_LOC_QP_OP_ERR;
	sink = op == IBV_WR_RDMA_READ || is_atomic(op);
	if (w->h.flags & IBV_SEND_INLINE) {
		if (sink)
			return IBV_WC_LOC_QP_OP_ERR;
		m->liov[0].iov_base = w->u.data;
		m->liov[0].iov_len = w->h.num_sge;
		m->local.pid = 0;       /* the copy in our memory */
		m->local.iov = m->liov;
		m->local.niov = 1;
		m->len = w->h.num_sge;
	} else {
		if (is_atomic(op) &&
		    (w->h.num_sge != 1 || w->u.sge[0].length != 8))
			return IBV_WC_LOC_LEN_ERR;
		st = sges_resolve(w->u.sge, w->h.num_sge, qp->pd, sink,
				  m->liov, &m->local, &m->len);
		if (st != IBV_WC_SUCCESS)
			return (int)st;
	}
	if (m->len > SV_MAX_MSG_SZ)
		return IBV_WC_LOC_LEN_ERR;
	if (qp->type == IBV_QPT_UD) {
		m->ah = sv_objtab_lookup(&qp->owner->objs, w->h.ud.ah,
					 SV_OBJ_AH);
		if (!m->ah || m->ah->pd != qp->pd)
			return IBV_WC_LOC_QP_OP_ERR;
		if (m->len > sv_mtu_bytes(sv_dev.port.active_mtu))
			return IBV_WC_LOC_LEN_ERR;
	}
	return deliver(x, m);
}

/* retry_left once the last transport retry is on its way */
#define RETRY_FINAL UINT32_MAX

/* Execute (or retry) the head WQE of qp's send queue. */
static void sq_execute(struct sv_exec *x, struct sv_qp *qp)
{
	struct swqe w;
	struct msg m;
	int res;

	if (!qp->head_started) {
		qp->head_started = true;
		qp->rnr_left = qp->attr.rnr_retry;
		qp->retry_left = qp->attr.retry_cnt;
	} else if (qp->retry_left == RETRY_FINAL) {
		/* the last transmission timed out too */
		memcpy(&w.h, wq_head(&qp->sq), sizeof(w.h));
		sq_complete(qp, &w, IBV_WC_RETRY_EXC_ERR, 0);
		return;
	}
	qp->wait_until_ns = 0;
	m.rnr_ns = 0;
	m.len = 0;
	m.lost = 0;
	res = sq_run(x, qp, &w, &m);
	if (res == RES_BUSY || res == RES_LOST)
		return;         /* the head stays; next pass, or the flush */
	if (qp->type != IBV_QPT_RC) {
		/* no acknowledgements: remote trouble is invisible */
		if (res == RES_RNR || res == RES_NOACK ||
		    res == IBV_WC_REM_INV_REQ_ERR ||
		    res == IBV_WC_REM_ACCESS_ERR || res == IBV_WC_REM_OP_ERR)
			res = IBV_WC_SUCCESS;
	}
	if (res == RES_RNR) {
		if (qp->attr.rnr_retry != 7) {
			if (!qp->rnr_left) {
				sq_complete(qp, &w, IBV_WC_RNR_RETRY_EXC_ERR, 0);
				return;
			}
			qp->rnr_left--;
		}
		qp->wait_until_ns = x->now + m.rnr_ns;
		return;
	}
	if (res == RES_NOACK) {
		uint64_t t = sv_ack_timeout_ns(qp->attr.timeout);

		if (t != UINT64_MAX) {
			/* the error shows when the last try's timer expires */
			if (!qp->retry_left)
				qp->retry_left = RETRY_FINAL;
			else
				qp->retry_left--;
		}
		/* timeout 0: no timer, the WQE waits until the QP changes */
		qp->wait_until_ns = t == UINT64_MAX ? UINT64_MAX : x->now + t;
		return;
	}
	sq_complete(qp, &w, (uint32_t)res, res == IBV_WC_SUCCESS ? m.len : 0);
}

/* Complete the head WQE of wq with IBV_WC_WR_FLUSH_ERR. */
static void sq_flush_one(struct sv_qp *qp)
{
	struct sv_send_wqe h;
	struct sv_cqe e;

	memcpy(&h, wq_head(&qp->sq), sizeof(h));
	wq_consume(&qp->sq);
	qp->head_started = false;
	qp->wait_until_ns = 0;
	cqe_init(&e, h.wr_id, IBV_WC_WR_FLUSH_ERR, wc_opcode(h.opcode),
		 qp->qpn);
	/* a full CQ: the completion is lost, the WQE still goes */
	qp_push(qp, qp->send_cq, &e, false);
}

static void rq_flush_one(struct sv_qp *qp)
{
	struct sv_recv_wqe h;
	struct sv_cqe e;

	memcpy(&h, wq_head(&qp->rq), sizeof(h));
	wq_consume(&qp->rq);
	cqe_init(&e, h.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qpn);
	qp_push(qp, qp->recv_cq, &e, false);
}

/* Is the head WQE free to run at now? (not waiting on RNR or a timeout) */
static bool head_due(const struct sv_qp *qp, uint64_t now, uint64_t *timer)
{
	if (!qp->head_started || !qp->wait_until_ns)
		return true;
	if (qp->wait_until_ns == UINT64_MAX)
		return false;
	if (now >= qp->wait_until_ns)
		return true;
	if (timer && qp->wait_until_ns < *timer)
		*timer = qp->wait_until_ns;
	return false;
}

/*
 * The SQ drain point: the WQEs posted before a QP entered SQD still run (a
 * NIC would have started them when their doorbell rang); later ones wait.
 */
void sv_exec_enter_sqd(struct sv_qp *qp)
{
	qp->sqd_prod = qp->sq.hdr ? wq_prod(&qp->sq) : qp->sq.cons;
	qp->sqd_armed = true;
}

/* In SQD: may the head WQE start? (it was posted before the drain began) */
static bool sqd_may_start(const struct sv_qp *qp, uint32_t pending)
{
	uint32_t n;

	if (!qp->sqd_armed)
		return false;
	n = qp->sqd_prod - qp->sq.cons;
	return n && n <= pending;
}

static void sqd_disarm(struct sv_qp *qp)
{
	qp->sqd_armed = false;
}

bool sv_exec_ready(const struct sv_qp *qp, uint64_t now, uint64_t *timer)
{
	bool corrupt, rcorrupt;
	uint32_t n;

	switch (qp->state) {
	case IBV_QPS_RTS:
		n = wq_pending(&qp->sq, &corrupt);
		if (corrupt)
			return true;
		return n && head_due(qp, now, timer);
	case IBV_QPS_SQD:
		n = wq_pending(&qp->sq, &corrupt);
		if (n && (qp->head_started || sqd_may_start(qp, n)))
			return head_due(qp, now, timer);
		return !qp->sq_drained_sent;
	case IBV_QPS_SQE:
		return wq_pending(&qp->sq, &corrupt) != 0;
	case IBV_QPS_ERR:
		if (wq_pending(&qp->sq, &corrupt) ||
		    (!qp->rx_busy && wq_pending(&qp->rq, &rcorrupt)))
			return true;
		return qp->srq && !qp->last_wqe_sent;
	default:
		return false;
	}
}

bool sv_exec_step(struct sv_exec *x, struct sv_qp *qp)
{
	bool corrupt;
	uint32_t n;

	switch (qp->state) {
	case IBV_QPS_RTS:
		n = wq_pending(&qp->sq, &corrupt);
		if (corrupt) {
			qp_error(qp, IBV_EVENT_QP_FATAL);
			return true;
		}
		if (!n || !head_due(qp, x->now, NULL))
			return false;
		sq_execute(x, qp);
		return true;
	case IBV_QPS_SQD:
		/* finish what is in flight and what was posted before the
		 * drain began; start nothing newer */
		n = wq_pending(&qp->sq, &corrupt);
		if (n && (qp->head_started || sqd_may_start(qp, n))) {
			if (!head_due(qp, x->now, NULL))
				return false;
			sq_execute(x, qp);
			return true;
		}
		qp->head_started = false;
		if (qp->sq_drained_sent)
			return false;
		sqd_disarm(qp);
		qp->sq_drained_sent = true;
		if (qp->attr.en_sqd_async_notify)
			qp_event(qp, IBV_EVENT_SQ_DRAINED);
		return true;
	case IBV_QPS_SQE:
		if (!wq_pending(&qp->sq, &corrupt))
			return false;
		sq_flush_one(qp);
		return true;
	case IBV_QPS_ERR:
		if (wq_pending(&qp->sq, &corrupt)) {
			sq_flush_one(qp);
			return true;
		}
		/* not the WQE another engine fills right now (msg_copy) */
		if (!qp->rx_busy && wq_pending(&qp->rq, &corrupt)) {
			rq_flush_one(qp);
			return true;
		}
		if (qp->srq && !qp->last_wqe_sent) {
			qp->last_wqe_sent = true;
			qp_event(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
			return true;
		}
		return false;
	default:
		return false;
	}
}
