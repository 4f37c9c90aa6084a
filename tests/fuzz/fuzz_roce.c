// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the RoCEv2 receive path of the device: the packet
 * parser and ICRC check (roce/wire.c, icrc.c), the dispatch of the wire
 * thread (roce/dev.c, sv_roce_rx_batch), the responder (resp*.c) and the
 * completer and requester (comp.c, req.c), fed packets for a QP of any
 * type (RC, UC, UD, XRC target) in any state (RESET, INIT, RTR, RTS, SQD,
 * ERR), with real registered memory behind its MRs, so that WRITE, READ
 * and atomic requests really land, and with requests of its own in flight,
 * so that ACKs, NAKs, READ responses and atomic ACKs are answered too.
 *
 * The device runs in this process (fuzz_dev.c) on a transport in memory
 * (fake_net.c), which checks every packet the device sends back: it
 * parses and its ICRC is right. Nothing reaches a socket.
 *
 * Input: two bytes, then packet records.
 *   byte 0: bits 0-1 the QP type (RC, UC, UD, XRC_RECV), bits 2-4 its
 *           state (RESET, INIT, RTR, RTS, SQD, ERR; 6, 7 RTS), bit 5 the
 *           QP's own requests are posted first, bit 6 receives are posted
 *   byte 1: which requests (bit i: request kind i of post_requests)
 *   record: flags (1), length (2, little-endian), that many bytes: one UDP
 *           payload from the peer. Flags: FIX_QPN puts the QP's number in
 *           the BTH (and its SRQ's in an XRCETH), FIX_RKEY an MR's key (by the low bits of the one
 *           there) in the RETH or AtomicETH, FIX_ICRC makes the ICRC right
 *           (after the other fixes), FLUSH hands the packets so far to the
 *           device and lets its engine run.
 * The QP and its peer start at PSN FZ_PSN, so recorded traffic replays.
 *
 * fuzz_roce_replay --gen DIR writes the seed corpus from real traffic:
 * the requests a QP of this device sends for each kind of work request,
 * and the answers a second QP of the device gives to them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "fuzz_dev.h"

#define FZ_PSN   0x100u
#define FZ_DQPN  0x123456u   /* the peer's QP */
#define FZ_SPORT 0xc123u
#define MEM_BYTES (64u * 1024u)
#define FZ_MEM_ADDR 0x5f0000000000ull
#define NMR 4

enum {
	FIX_QPN = 1 << 0,
	FIX_RKEY = 1 << 1,
	FIX_ICRC = 1 << 2,
	FLUSH = 1 << 3,
};

static const uint32_t types[4] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
				   IBV_QPT_XRC_RECV };
static const uint32_t states[8] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
				    IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_ERR,
				    IBV_QPS_RTS, IBV_QPS_RTS };

/* The memory behind the MRs: one mapping, NMR parts. */
static uint8_t *mem;

/* One input's objects. */
struct rig {
	struct sv_client *c;
	uint64_t pd, cq, ah, srq, xrcd;
	uint32_t srqn;
	struct fz_qp qp;
	uint64_t mr[NMR];
	uint32_t key[NMR];
	uint32_t type;
};

static void rig_init(void)
{
	fz_dev_init(true);
	if (!mem) {
		/* at one address in every run, so that the addresses in
		 * recorded requests name it again */
		mem = mmap((void *)FZ_MEM_ADDR, NMR * MEM_BYTES,
			   PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
			   MAP_FIXED_NOREPLACE, -1, 0);
		if (mem == MAP_FAILED)
			mem = mmap(NULL, NMR * MEM_BYTES, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		FZ_CHECK(mem != MAP_FAILED);
	}
}

static uint64_t xrc_objects(struct rig *r)
{
	struct sv_rsp rsp;
	struct sv_cmd cmd;

	/* an XRC domain (no file), its SRQ on our CQ, a target QP */
	sv_cmd_init(&cmd, SV_CMD_OPEN_XRCD);
	if (fz_cmd(r->c, &cmd, -1, &rsp, NULL, false))
		return 0;
	r->xrcd = rsp.u.obj.handle;
	sv_cmd_init(&cmd, SV_CMD_CREATE_SRQ);
	cmd.u.create_srq.pd = r->pd;
	cmd.u.create_srq.cq = r->cq;
	cmd.u.create_srq.xrcd = r->xrcd;
	cmd.u.create_srq.srq_type = IBV_SRQT_XRC;
	cmd.u.create_srq.max_wr = 8;
	cmd.u.create_srq.max_sge = 2;
	if (fz_cmd(r->c, &cmd, -1, &rsp, NULL, false))
		return 0;
	r->srq = rsp.u.srq.handle;
	r->srqn = rsp.u.srq.srqn;
	sv_cmd_init(&cmd, SV_CMD_CREATE_QP);
	cmd.u.create_qp.qp_type = IBV_QPT_XRC_RECV;
	cmd.u.create_qp.xrcd = r->xrcd;
	if (fz_cmd(r->c, &cmd, -1, &rsp, NULL, false))
		return 0;
	r->qp.handle = rsp.u.qp.handle;
	r->qp.qpn = rsp.u.qp.qpn;
	r->qp.qp = sv_objtab_lookup(&r->c->objs, r->qp.handle, SV_OBJ_QP);
	return r->qp.handle;
}

/* The QP of the input in its state, and what surrounds it; false when a
 * step failed (the input then runs against less). */
static bool rig_up(struct rig *r, uint8_t h0)
{
	static const uint32_t access[NMR] = {
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
		IBV_ACCESS_REMOTE_READ,
		IBV_ACCESS_LOCAL_WRITE,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		IBV_ACCESS_ZERO_BASED,
	};

	memset(r, 0, sizeof(*r));
	r->type = types[h0 & 3];
	r->c = fz_client_new();
	r->pd = fz_alloc_pd(r->c);
	for (unsigned int i = 0; i < NMR; i++) {
		r->mr[i] = fz_reg_mr(r->c, r->pd, mem + i * MEM_BYTES,
				     MEM_BYTES, access[i], &r->key[i]);
		FZ_CHECK(r->mr[i] != 0);
	}
	r->cq = fz_create_cq(r->c, 64);
	if (r->type == IBV_QPT_XRC_RECV) {
		if (!xrc_objects(r))
			return false;
	} else if (fz_create_qp(r->c, r->type, r->pd, r->cq, 0, &r->qp)) {
		return false;
	}
	if (r->type == IBV_QPT_UD)
		r->ah = fz_create_ah(r->c, r->pd, fz_peer_gid);
	return fz_qp_to(r->c, &r->qp, states[(h0 >> 2) & 7], FZ_DQPN,
			fz_peer_gid, FZ_PSN) == 0;
}

static void rig_down(struct rig *r)
{
	fz_client_free(r->c);
}

static void post_recvs(struct rig *r)
{
	struct sv_srq *srq = NULL;

	for (unsigned int i = 0; i < 4; i++) {
		struct sv_wqe_sge sge[2] = {
			{ (uintptr_t)mem + i * 4096, 2048, r->key[0] },
			{ (uintptr_t)mem + 2 * MEM_BYTES + i * 4096, 4096,
			  r->key[2] },
		};

		if (r->srq) {
			/* XRC: the SRQ's ring, as the library fills it */
			struct sv_wq_ring *h;
			struct sv_recv_wqe w = { .wr_id = i, .num_sge = 2 };
			uint8_t *slot;

			srq = srq ? srq : sv_objtab_lookup(&r->c->objs, r->srq,
							   SV_OBJ_SRQ);
			if (!srq)
				return;
			h = srq->rq.hdr;
			slot = sv_wq_slot(h, srq->rq.entries, srq->rq.stride,
					  h->prod);
			memcpy(slot, &w, sizeof(w));
			memcpy(slot + SV_RECV_WQE_HDR, sge, sizeof(sge));
			__atomic_store_n(&h->prod, h->prod + 1,
					 __ATOMIC_RELEASE);
		} else {
			fz_post_recv(r->qp.qp, i, sge, 2);
		}
	}
}

/* Request kinds, by bit of byte 1. */
static void post_requests(struct rig *r, uint8_t kinds)
{
	static const uint32_t ops[8] = {
		IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND_WITH_IMM,
		SV_WR_MASKED_FETCH_ADD,
	};

	if (r->type == IBV_QPT_XRC_RECV)
		return;            /* a target has no send queue */
	for (unsigned int i = 0; i < 8; i++) {
		struct sv_send_wqe w;
		struct sv_wqe_sge sge = {
			(uintptr_t)mem + 8192 + i * 64,
			i == 1 || i == 5 ? 3000 : 8, r->key[0]
		};

		if (!(kinds & (1u << i)))
			continue;
		memset(&w, 0, sizeof(w));
		w.wr_id = 100 + i;
		w.opcode = ops[i];
		w.flags = IBV_SEND_SIGNALED;
		w.num_sge = 1;
		/* the peer's memory is ours (its requests come back with
		 * FIX_RKEY): READ from MR 1, the rest into MR 0 */
		w.remote_addr = (uintptr_t)mem + (i == 2 ? MEM_BYTES : 0) +
				16384 + i * 64;
		w.rkey = i == 2 ? 1 : 0;
		if (i == 3 || i == 4) {
			w.atomic.compare_add = 1;
			w.atomic.swap = 2;
		}
		if (i == 7) {
			w.imm = 0;            /* masked: the rkey is in imm */
			w.masked.compare_add = 1;
			w.masked.swap = 0;
		}
		if (r->type == IBV_QPT_UD) {
			w.opcode = i & 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
			w.remote_qpn = FZ_DQPN;
			w.ud.ah = r->ah;
			w.ud.remote_qkey = 0x11111111;
		}
		fz_post_send(r->qp.qp, &w, &sge, sizeof(sge));
	}
}

static void fix(uint8_t *b, uint32_t len, uint8_t flags, const struct rig *r,
		const struct sv_roce_ip *ip)
{
	const struct sv_roce_opinfo *op;

	if (len < SV_BTH_BYTES + SV_ICRC_BYTES)
		return;
	if (flags & FIX_QPN)
		sv_put_be24(b + 5, r->qp.qpn);
	op = sv_roce_op(b[0]);
	/* and an XRC request's SRQ is the input's */
	if ((flags & FIX_QPN) && op && (op->flags & SV_RF_XRCETH) && r->srqn &&
	    SV_BTH_BYTES + SV_XRCETH_BYTES <= len - SV_ICRC_BYTES)
		sv_put_be24(b + SV_BTH_BYTES + 1, r->srqn);
	if ((flags & FIX_RKEY) && op && (op->flags & (SV_RF_RETH | SV_RF_ATMETH))) {
		uint32_t off = SV_BTH_BYTES +
			       (op->flags & SV_RF_XRCETH ? SV_XRCETH_BYTES : 0);

		if (off + 12 <= len - SV_ICRC_BYTES)
			sv_put_be32(b + off + 8,
				    r->key[sv_get_be32(b + off + 8) % NMR]);
	}
	if (flags & FIX_ICRC) {
		uint32_t icrc = htole32(sv_roce_icrc(ip, b, len - SV_ICRC_BYTES));

		memcpy(b + len - SV_ICRC_BYTES, &icrc, SV_ICRC_BYTES);
	}
}

/* The packets of one batch: buffers of exactly their length, so that a
 * read past one is seen. */
struct batch {
	struct sv_net_rx rx[SV_NET_RX_BATCH];
	unsigned int n;
};

static void batch_run(struct batch *b)
{
	struct sv_qp *touched[SV_NET_RX_BATCH];
	struct sv_roce_tx *tx = sv_roce_tx_get();

	FZ_CHECK(tx != NULL);
	if (b->n)
		sv_roce_rx_batch(b->rx, b->n, touched, tx);
	for (unsigned int i = 0; i < b->n; i++)
		free(b->rx[i].buf);
	b->n = 0;
	fz_run(4);
}

static void peer_ip(struct sv_roce_ip *ip)
{
	memset(ip, 0, sizeof(*ip));
	memcpy(ip->src, fz_peer_gid, 16);
	memcpy(ip->dst, fz_local_gid, 16);
	ip->sport = FZ_SPORT;
	ip->dport = SV_ROCE_PORT;
	ip->df = true;
}

static void run(const uint8_t *data, size_t size)
{
	static struct batch b;
	struct sv_roce_ip ip;
	struct rig r;
	size_t off = 2;

	if (size < 2)
		return;
	rig_init();
	peer_ip(&ip);
	if (!rig_up(&r, data[0]))
		goto out;
	if (data[0] & 0x40)
		post_recvs(&r);
	if (data[0] & 0x20) {
		post_requests(&r, data[1]);
		fz_run(8);
	}
	while (off + 3 <= size) {
		uint8_t flags = data[off];
		uint32_t len = data[off + 1] | (uint32_t)data[off + 2] << 8;
		uint8_t *buf;

		off += 3;
		if (len > size - off)
			len = (uint32_t)(size - off);
		if (len > SV_NET_MAX_PKT)
			len = SV_NET_MAX_PKT;
		buf = malloc(len ? len : 1);
		FZ_CHECK(buf != NULL);
		memcpy(buf, data + off, len);
		off += len;
		fix(buf, len, flags, &r, &ip);
		b.rx[b.n].buf = buf;
		b.rx[b.n].len = len;
		b.rx[b.n].ip = ip;
		b.n++;
		if ((flags & FLUSH) || b.n == SV_NET_RX_BATCH)
			batch_run(&b);
	}
	batch_run(&b);
	fz_run(8);
	fz_poll_cq(r.c, r.cq);
	if (getenv("FZ_VERBOSE"))
		fprintf(stderr, "rx %llu drop %llu naks %llu tx %llu\n",
			(unsigned long long)sv_roce_stats.rx_pkts,
			(unsigned long long)sv_roce_stats.rx_drop,
			(unsigned long long)sv_roce_stats.naks_sent,
			(unsigned long long)fz_tx_count);
out:
	rig_down(&r);
	/* the rest of the device is as before: no object, no key left */
	FZ_CHECK(sv_dev.nclients == 0 && sv_dev.keys.live == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run(data, size);
	return 0;
}

/* ---- the seed corpus ---- */

static struct {
	uint8_t buf[1 << 16];
	size_t len;
	uint32_t from_qpn;
} cap;

static void capture(const uint8_t *buf, uint32_t len,
		    const struct sv_roce_ip *ip)
{
	(void)ip;
	if (cap.len + 3 + len > sizeof(cap.buf))
		return;
	cap.buf[cap.len] = FIX_QPN | FIX_RKEY | FIX_ICRC;
	cap.buf[cap.len + 1] = (uint8_t)len;
	cap.buf[cap.len + 2] = (uint8_t)(len >> 8);
	memcpy(cap.buf + cap.len + 3, buf, len);
	cap.len += 3 + len;
}

static int save(const char *dir, const char *name, const uint8_t *hdr,
		const uint8_t *recs, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	fwrite(hdr, 1, 2, f);
	fwrite(recs, 1, len, f);
	return fclose(f);
}

int fz_gen_seeds(const char *dir);
int fz_gen_seeds(const char *dir)
{
	static const char *const tn[4] = { "rc", "uc", "ud", "xrc" };
	static const char *const kn[8] = { "send", "write", "read", "cas",
					   "faa", "write_imm", "send_imm",
					   "masked_faa" };
	static uint8_t req[1 << 16];
	int ret = 0;

	rig_init();
	fz_tx_hook = capture;
	for (unsigned int t = 0; t < 3; t++) {
		for (unsigned int k = 0; k < 8; k++) {
			uint8_t h[2] = { (uint8_t)(t | 3 << 2 | 0x20),
					 (uint8_t)(1u << k) };
			uint8_t h2[2];
			size_t req_len;
			char name[64];

			if (t != 0 && (k == 2 || k == 3 || k == 4 || k == 7))
				continue;  /* RC only */
			if (t == 2 && (k == 1 || k == 5))
				continue;  /* no WRITE on UD */
			/* the requests this QP sends for request kind k */
			cap.len = 0;
			run(h, 2);
			memcpy(req, cap.buf, cap.len);
			req_len = cap.len;
			/* as a responder's input: receives posted */
			h2[0] = (uint8_t)(t | 3 << 2 | 0x40);
			h2[1] = 0;
			snprintf(name, sizeof(name), "req-%s-%s", tn[t], kn[k]);
			ret |= save(dir, name, h2, req, req_len);
			/* the answers of a responder: a completer's input */
			cap.len = 0;
			{
				uint8_t *in = malloc(2 + req_len);

				FZ_CHECK(in != NULL);
				memcpy(in, h2, 2);
				memcpy(in + 2, req, req_len);
				run(in, 2 + req_len);
				free(in);
			}
			if (cap.len) {
				snprintf(name, sizeof(name), "resp-%s-%s", tn[t],
					 kn[k]);
				ret |= save(dir, name, h, cap.buf, cap.len);
			}
		}
	}
	/* XRC: the RC requests as an XRC initiator sends them (opcode in
	 * the XRC range, an XRCETH after the BTH) to a target QP */
	for (unsigned int k = 0; k < 8; k++) {
		uint8_t h[2] = { (uint8_t)(3 << 2 | 0x20), (uint8_t)(1u << k) };
		uint8_t h2[2] = { 3 | 3 << 2 | 0x40, 0 };
		static uint8_t x[1 << 16];
		size_t xl = 0, o = 0;
		char name[64];

		if (k == 7)
			continue;          /* masked atomics are RC only */
		cap.len = 0;
		run(h, 2);
		while (o + 3 <= cap.len) {
			uint32_t len = cap.buf[o + 1] | cap.buf[o + 2] << 8;
			const uint8_t *pk = cap.buf + o + 3;

			x[xl] = cap.buf[o];
			x[xl + 1] = (uint8_t)(len + 4);
			x[xl + 2] = (uint8_t)((len + 4) >> 8);
			memcpy(x + xl + 3, pk, SV_BTH_BYTES);
			x[xl + 3] = (uint8_t)(pk[0] | SV_OP_XRC_BASE);
			memset(x + xl + 3 + SV_BTH_BYTES, 0, SV_XRCETH_BYTES);
			memcpy(x + xl + 3 + SV_BTH_BYTES + 4, pk + SV_BTH_BYTES,
			       len - SV_BTH_BYTES);
			xl += 3 + len + 4;
			o += 3 + len;
		}
		snprintf(name, sizeof(name), "req-xrc-%s", kn[k]);
		ret |= save(dir, name, h2, x, xl);
	}
	/* every state, with the RC send's requests */
	for (unsigned int s = 0; s < 6; s++) {
		uint8_t h[2] = { (uint8_t)(s << 2 | 0x40 | 0x20), 0x07 };
		char name[64];

		cap.len = 0;
		run((const uint8_t[]){ 0x0c | 0x20, 0x01 }, 2);
		snprintf(name, sizeof(name), "state-%u-rc-send", s);
		ret |= save(dir, name, h, cap.buf, cap.len);
	}
	fz_tx_hook = NULL;
	return ret;
}
