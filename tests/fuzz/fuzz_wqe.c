// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the WQE decoder and executor (exec/exec.c, exec/wq.c,
 * loop/req.c, loop/resp.c, exec/span.c, exec/keymap.c, exec/mm.c, exec/memio.c,
 * ctl/cq.c) fed ring contents a client can forge: send and receive WQEs of any
 * bytes (opcodes, flags, SGE lists, inline data, keys, remote addresses,
 * fast-register and bind overlays), producer counters out of range, a consumer
 * counter or ring header overwritten, the mailbox (sv_qp.h) lying about the WQE
 * it holds.
 * QPs on this device only: the loopback path of RC, UC and UD pairs, with
 * real memory behind the MRs (the fuzzer's own, fuzz_dev.h).
 *
 * Input: two bytes, then records.
 *   byte 0: the pair the WQEs go to (RC, UC, UD, RC with the peer in ERR)
 *   byte 1: bit 0 receives posted on the peer first, bit 1 the sender
 *           goes to SQD before the records (and back to RTS at the end)
 *   record: kind (1), len (1), len bytes. Kind, low nibble:
 *     0 a send WQE (the bytes: header, then body) at the SQ's prod, prod+1
 *     1 a receive WQE (header, SGEs) at the peer's RQ prod, prod+1
 *     2 the SQ's prod := the 4 bytes;   3 its cons := the 4 bytes
 *     4 the mailbox := the bytes, mb_seq := prod + 1 (the 4 bytes after
 *       80 if there are any)
 *     5 the engine runs (1 + byte) steps of each QP
 *     6 the sender moves to state byte % 8 (a MODIFY_QP)
 *     7 the peer's RQ prod := the 4 bytes
 *     8 bytes 2.. are written at offset bytes 0..1 of the SQ ring
 *   high nibble of kind (WQE records): 0x10 keys and addresses are made
 *   live (each key field becomes one of this input's keys, picked by its
 *   value; each address one in the MRs' memory), 0x20 the UD fields (AH,
 *   remote QPN, Q_Key) name the peer, 0x60 the peer's multicast group.
 * At the end the engine runs, both CQs are drained (every CQE sane), and
 * the client goes; no object or key may be left.
 *
 * fuzz_wqe_replay --gen DIR writes the seed corpus: every opcode a program
 * posts, as the library writes it into the ring, on each pair.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_dev.h"

/*
 * The MRs' memory sits low, at 64 KiB (Debian's vm.mmap_min_addr), so that
 * the page list (PL_ENTRIES words, the pages of mem) stays inside mem
 * whichever way a FAST_REG_MR reads it: as pages of any size the words are
 * aligned to (at most 64 KiB here), or, with SV_REG_BLOCKS, as {addr,
 * length} pairs, where a word's value is a length of 64-124 KiB: the last
 * pair ends at 0x3d000, inside mem's 0x10000-0x40000. Higher up, a pair's
 * length is the address itself (terabytes), and a fast-registered block
 * covered the fuzzer's own heap and libraries: the device wrote there as
 * the client allowed, the client being this process (a 44-minute run died
 * in ASan's allocator so). Where the address is taken, mem goes anywhere
 * and block-list registrations are not inside mem (a note says so).
 */
#define FZ_MEM_ADDR  0x10000ull
#define MEM_BYTES    (192u * 1024u)
#define PL_ENTRIES   16u
#define NKEY         6

static uint8_t *mem;
static const uint8_t mcast_gid[16] = { [10] = 0xff, [11] = 0xff,
				       239, 1, 2, 3 };

static struct {
	struct sv_client *c;
	uint64_t pd, cq, ah, mah, pl;
	struct fz_qp s, p;          /* sender, peer */
	uint32_t type;
	uint32_t key[NKEY];         /* mr0 mr1 mr2 fast-reg mw2b mw1 */
	uint64_t kh[NKEY];          /* their handles */
} r;

static void init(void)
{
	if (mem)
		return;
	fz_dev_init(false);
	mem = mmap((void *)FZ_MEM_ADDR, MEM_BYTES, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (mem == MAP_FAILED || mem != (void *)FZ_MEM_ADDR) {
		if (mem != MAP_FAILED)
			munmap(mem, MEM_BYTES);
		fprintf(stderr, "fuzz_wqe: no memory at %#llx: fast-registered "
			"block lists may reach beyond the MRs' memory\n",
			FZ_MEM_ADDR);
		mem = mmap(NULL, MEM_BYTES, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	FZ_CHECK(mem != MAP_FAILED);
}

static uint64_t cmd_obj(struct sv_cmd *cmd, uint32_t *key, int *fd,
		       uint64_t *h)
{
	struct sv_rsp rsp;

	if (fz_cmd(r.c, cmd, -1, &rsp, fd, false))
		return 0;
	if (key)
		*key = rsp.u.mr.rkey ? rsp.u.mr.rkey : rsp.u.mr.lkey;
	if (h)
		*h = rsp.u.obj.handle;
	return rsp.u.obj.handle;
}

static bool up(uint8_t h0, uint8_t h1)
{
	static const uint32_t types[4] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
					   IBV_QPT_RC };
	static const uint32_t acc[3] = {
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
		IBV_ACCESS_MW_BIND,
		IBV_ACCESS_REMOTE_READ,
		IBV_ACCESS_LOCAL_WRITE,
	};
	struct sv_cmd cmd;
	int fd = -1;

	memset(&r, 0, sizeof(r));
	r.type = types[h0 & 3];
	r.c = fz_client_new();
	r.pd = fz_alloc_pd(r.c);
	for (unsigned int i = 0; i < 3; i++)
		FZ_CHECK((r.kh[i] = fz_reg_mr(r.c, r.pd, mem + i * 65536,
					      65536, acc[i], &r.key[i])));
	sv_cmd_init(&cmd, SV_CMD_ALLOC_MR);
	cmd.u.alloc_mr.pd = r.pd;
	cmd.u.alloc_mr.max_entries = PL_ENTRIES;
	FZ_CHECK(cmd_obj(&cmd, &r.key[3], NULL, &r.kh[3]));
	sv_cmd_init(&cmd, SV_CMD_ALLOC_MW);
	cmd.u.alloc_mw.pd = r.pd;
	cmd.u.alloc_mw.type = SV_MW_TYPE_2B;
	FZ_CHECK(cmd_obj(&cmd, &r.key[4], NULL, &r.kh[4]));
	cmd.u.alloc_mw.type = SV_MW_TYPE_1;
	FZ_CHECK(cmd_obj(&cmd, &r.key[5], NULL, &r.kh[5]));
	/* a page list, filled by the client with pages of MR 0 */
	sv_cmd_init(&cmd, SV_CMD_ALLOC_PAGE_LIST);
	cmd.u.alloc_page_list.max_entries = PL_ENTRIES;
	r.pl = cmd_obj(&cmd, NULL, &fd, NULL);
	FZ_CHECK(r.pl && fd >= 0);
	{
		uint64_t *e = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0);

		FZ_CHECK(e != MAP_FAILED);
		for (unsigned int i = 0; i < PL_ENTRIES; i++)
			e[i] = (uintptr_t)mem + i * 4096;
		munmap(e, 4096);
		close(fd);
	}
	/* a small CQ: a flood of completions overruns it */
	r.cq = fz_create_cq(r.c, 16);
	if (fz_create_qp(r.c, r.type, r.pd, r.cq, 0, &r.s) ||
	    fz_create_qp(r.c, r.type, r.pd, r.cq, 0, &r.p))
		return false;
	if (r.type == IBV_QPT_UD) {
		/* the peer also in a multicast group, an AH to the group */
		struct sv_rsp rsp;

		r.ah = fz_create_ah(r.c, r.pd, fz_local_gid);
		r.mah = fz_create_ah(r.c, r.pd, mcast_gid);
		sv_cmd_init(&cmd, SV_CMD_ATTACH_MCAST);
		cmd.u.mcast.qp = r.p.handle;
		memcpy(cmd.u.mcast.gid, mcast_gid, 16);
		(void)fz_cmd(r.c, &cmd, -1, &rsp, NULL, false);
	}
	if (fz_qp_to(r.c, &r.s, IBV_QPS_RTS, r.p.qpn, fz_local_gid, 0) ||
	    fz_qp_to(r.c, &r.p, (h0 & 3) == 3 ? IBV_QPS_ERR : IBV_QPS_RTS,
		     r.s.qpn, fz_local_gid, 0))
		return false;
	if (h1 & 1) {
		for (unsigned int i = 0; i < 4; i++) {
			struct sv_wqe_sge sge = {
				(uintptr_t)mem + i * 4096, 4096, r.key[0]
			};

			fz_post_recv(r.p.qp, 1000 + i, &sge, 1);
		}
	}
	return true;
}

static void modify_state(uint32_t state)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_MODIFY_QP);
	cmd.u.modify_qp.qp = r.s.handle;
	cmd.u.modify_qp.attr_mask = IBV_QP_STATE;
	cmd.u.modify_qp.attr.qp_state = state;
	(void)fz_cmd(r.c, &cmd, -1, &rsp, NULL, false);
}

/* Key k of this input as it is now (fast registrations and binds give
 * MRs and windows new keys). */
static uint32_t live_key(uint32_t v)
{
	unsigned int k = v % NKEY;

	if (k < 4) {
		const struct sv_mr *mr = sv_objtab_lookup(&r.c->objs, r.kh[k],
							  SV_OBJ_MR);
		return mr ? mr->key : r.key[k];
	} else {
		const struct sv_mw *mw = sv_objtab_lookup(&r.c->objs, r.kh[k],
							  SV_OBJ_MW);
		return mw ? mw->key : r.key[k];
	}
}

/* An offset into the MRs' memory becomes its address; an address past it
 * (a fast-registered MR's IOVA, a wild one) stays. */
static uint64_t live_addr(uint64_t a)
{
	return a < MEM_BYTES ? (uintptr_t)mem + a : a;
}

/* Make the keys and addresses of a send WQE live (kind & 0x10), its UD
 * fields name the peer (kind & 0x20). */
static void fix_send(uint8_t *slot, uint32_t stride, uint8_t kind)
{
	struct sv_send_wqe w;

	memcpy(&w, slot, sizeof(w));
	if (kind & 0x10) {
		switch (w.opcode) {
		case IBV_WR_LOCAL_INV:
		case IBV_WR_SEND_WITH_INV:
		case SV_WR_RDMA_READ_INV:
			w.imm = live_key(w.imm);
			break;
		case SV_WR_FAST_REG_MR:
			w.reg.key = (live_key(3) & ~0xffu) | (w.reg.key & 0xff);
			w.reg.list = r.pl;
			break;
		case IBV_WR_BIND_MW:
			w.reg.key = (live_key(w.reg.key >> 8) & ~0xffu) |
				    (w.reg.key & 0xff);
			w.reg.list = live_key((uint32_t)w.reg.list);
			w.reg.iova = live_addr(w.reg.iova);
			break;
		case SV_WR_MASKED_CMP_SWAP:
		case SV_WR_MASKED_FETCH_ADD:
			w.imm = live_key(w.imm);
			w.masked.remote_addr = live_addr(w.masked.remote_addr) & ~7ull;
			break;
		default:
			w.rkey = live_key(w.rkey);
			w.remote_addr = live_addr(w.remote_addr);
			if (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			    w.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
				w.remote_addr &= ~7ull;
			break;
		}
		if (!(w.flags & IBV_SEND_INLINE) && w.opcode != SV_WR_FAST_REG_MR &&
		    w.opcode != IBV_WR_BIND_MW) {
			for (uint32_t i = 0; i < w.num_sge &&
			     SV_SEND_WQE_HDR + (i + 1) * 16 <= stride; i++) {
				struct sv_wqe_sge s;
				uint8_t *p = slot + SV_SEND_WQE_HDR + i * 16;

				memcpy(&s, p, sizeof(s));
				s.lkey = live_key(s.lkey);
				s.addr = live_addr(s.addr);
				memcpy(p, &s, sizeof(s));
			}
		}
	}
	if ((kind & 0x20) && r.type == IBV_QPT_UD) {
		/* 0x40 too: to the multicast group */
		w.ud.ah = kind & 0x40 ? r.mah : r.ah;
		w.remote_qpn = kind & 0x40 ? SV_MCAST_QPN : r.p.qpn;
		w.ud.remote_qkey = 0x11111111;
	}
	memcpy(slot, &w, sizeof(w));
}

static void put_send(const uint8_t *b, size_t len, uint8_t kind)
{
	struct sv_wq_ring *h = r.s.qp->sq.hdr;
	uint32_t stride = r.s.qp->sq.stride;
	uint8_t *slot = sv_wq_slot(h, r.s.qp->sq.entries, stride, h->prod);

	memset(slot, 0, stride);
	memcpy(slot, b, len < stride ? len : stride);
	fix_send(slot, stride, kind);
	__atomic_store_n(&h->prod, h->prod + 1, __ATOMIC_RELEASE);
}

static void put_recv(const uint8_t *b, size_t len, uint8_t kind)
{
	struct sv_wq_ring *h = r.p.qp->rq.hdr;
	uint32_t stride = r.p.qp->rq.stride;
	uint8_t *slot;

	if (!h || !r.p.qp->rq.entries)
		return;
	slot = sv_wq_slot(h, r.p.qp->rq.entries, stride, h->prod);
	memset(slot, 0, stride);
	memcpy(slot, b, len < stride ? len : stride);
	if (kind & 0x10) {
		for (uint32_t i = 0; SV_RECV_WQE_HDR + (i + 1) * 16 <= stride; i++) {
			struct sv_wqe_sge s;
			uint8_t *p = slot + SV_RECV_WQE_HDR + i * 16;

			memcpy(&s, p, sizeof(s));
			s.lkey = live_key(s.lkey);
			s.addr = live_addr(s.addr);
			memcpy(p, &s, sizeof(s));
		}
	}
	__atomic_store_n(&h->prod, h->prod + 1, __ATOMIC_RELEASE);
}

static uint32_t u32_of(const uint8_t *b, size_t len)
{
	uint32_t v = 0;

	memcpy(&v, b, len < 4 ? len : 4);
	return v;
}

static void record(uint8_t kind, const uint8_t *b, size_t len)
{
	struct sv_wq_ring *h = r.s.qp->sq.hdr;

	switch (kind & 0xf) {
	case 0:
		put_send(b, len, kind);
		break;
	case 1:
		put_recv(b, len, kind);
		break;
	case 2:
		__atomic_store_n(&h->prod, u32_of(b, len), __ATOMIC_RELEASE);
		break;
	case 3:
		__atomic_store_n(&h->cons, u32_of(b, len), __ATOMIC_RELEASE);
		break;
	case 4:
		memcpy(h->mb, b, len < SV_WQ_MB_BYTES ? len : SV_WQ_MB_BYTES);
		if (kind & 0x10)
			fix_send(h->mb, SV_WQ_MB_BYTES, kind);
		__atomic_store_n(&h->mb_seq, len > SV_WQ_MB_BYTES ?
				 u32_of(b + SV_WQ_MB_BYTES, len - SV_WQ_MB_BYTES) :
				 h->prod + 1, __ATOMIC_RELEASE);
		break;
	case 5:
		fz_run(1 + (len ? b[0] % 64 : 0));
		break;
	case 6:
		modify_state(len ? b[0] % 8 : IBV_QPS_ERR);
		break;
	case 7:
		if (r.p.qp->rq.hdr)
			__atomic_store_n(&r.p.qp->rq.hdr->prod, u32_of(b, len),
					 __ATOMIC_RELEASE);
		break;
	case 8:
		if (len >= 2) {
			size_t off = (b[0] | (size_t)b[1] << 8);

			if (off < r.s.qp->ring_bytes) {
				size_t n = len - 2;

				if (n > r.s.qp->ring_bytes - off)
					n = r.s.qp->ring_bytes - off;
				memcpy((uint8_t *)r.s.qp->ring + off, b + 2, n);
			}
		}
		break;
	default:
		break;
	}
}

static void run(const uint8_t *data, size_t size)
{
	size_t off = 2;

	if (size < 2)
		return;
	init();
	if (!up(data[0], data[1])) {
		if (getenv("FZ_VERBOSE"))
			fprintf(stderr, "setup failed\n");
		goto out;
	}
	if (data[1] & 2)
		modify_state(IBV_QPS_SQD);
	while (off + 2 <= size) {
		uint8_t kind = data[off];
		size_t len = data[off + 1];

		off += 2;
		if (len > size - off)
			len = size - off;
		record(kind, data + off, len);
		off += len;
	}
	if (data[1] & 2)
		modify_state(IBV_QPS_RTS);
	for (unsigned int i = 0; i < 8 && fz_run(8); i++)
		fz_poll_cq(r.c, r.cq);
	fz_poll_cq(r.c, r.cq);
out:
	fz_client_free(r.c);
	FZ_CHECK(sv_dev.nclients == 0 && sv_dev.keys.live == 0 &&
		 sv_dev.nqp == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run(data, size);
	return 0;
}

/* ---- the seed corpus ---- */

static struct {
	uint8_t buf[4096];
	size_t len;
} g;

static void g_rec(uint8_t kind, const void *b, size_t len)
{
	FZ_CHECK(g.len + 2 + len <= sizeof(g.buf) && len < 256);
	g.buf[g.len] = kind;
	g.buf[g.len + 1] = (uint8_t)len;
	memcpy(g.buf + g.len + 2, b, len);
	g.len += 2 + len;
}

/* A send WQE as the library writes it: the header and n SGEs. */
static void g_send(const struct sv_send_wqe *w, const struct sv_wqe_sge *sge,
		   unsigned int n, uint8_t kind)
{
	uint8_t b[SV_SEND_WQE_HDR + 4 * 16];

	memcpy(b, w, sizeof(*w));
	memcpy(b + SV_SEND_WQE_HDR, sge, n * 16);
	g_rec(kind, b, SV_SEND_WQE_HDR + n * 16);
}

static int g_save(const char *dir, const char *name, uint8_t h0, uint8_t h1)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	fputc(h0, f);
	fputc(h1, f);
	fwrite(g.buf, 1, g.len, f);
	g.len = 0;
	return fclose(f);
}

int fz_gen_seeds(const char *dir);
int fz_gen_seeds(const char *dir)
{
	static const struct {
		const char *name;
		uint32_t opcode;
		uint32_t flags;
		bool rc_only;
	} ops[] = {
		{ "send", IBV_WR_SEND, IBV_SEND_SIGNALED, false },
		{ "send_imm", IBV_WR_SEND_WITH_IMM, IBV_SEND_SIGNALED, false },
		{ "send_inline", IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE, false },
		{ "write", IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, false },
		{ "write_imm", IBV_WR_RDMA_WRITE_WITH_IMM, IBV_SEND_SIGNALED, false },
		{ "read", IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, true },
		{ "cas", IBV_WR_ATOMIC_CMP_AND_SWP, IBV_SEND_SIGNALED, true },
		{ "faa", IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_SEND_SIGNALED | IBV_SEND_FENCE, true },
		{ "masked_cas", SV_WR_MASKED_CMP_SWAP, IBV_SEND_SIGNALED, true },
		{ "masked_faa", SV_WR_MASKED_FETCH_ADD, IBV_SEND_SIGNALED, true },
		{ "send_inv", IBV_WR_SEND_WITH_INV, IBV_SEND_SIGNALED, true },
		{ "read_inv", SV_WR_RDMA_READ_INV, IBV_SEND_SIGNALED, true },
		{ "local_inv", IBV_WR_LOCAL_INV, IBV_SEND_SIGNALED, false },
		{ "fast_reg", SV_WR_FAST_REG_MR, IBV_SEND_SIGNALED, false },
		{ "bind_mw", IBV_WR_BIND_MW, IBV_SEND_SIGNALED, true },
	};
	static const char *const tn[4] = { "rc", "uc", "ud", "rc_err" };
	int ret = 0;

	for (unsigned int t = 0; t < 4; t++) {
		for (unsigned int k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
			struct sv_send_wqe w;
			struct sv_wqe_sge sge[2] = {
				{ 0x100, 512, 0 },      /* MR 0 */
				{ 0x10200, 100, 1 },    /* MR 1 */
			};
			uint8_t recv[SV_RECV_WQE_HDR + 16];
			struct sv_recv_wqe rw = { .wr_id = 7, .num_sge = 1 };
			struct sv_wqe_sge rs = { 0x20000, 4096, 2 };  /* MR 2 */
			char name[64];
			unsigned int nsge = 2;

			if (t == 2 && (ops[k].rc_only || ops[k].opcode ==
				       IBV_WR_RDMA_WRITE ||
				       ops[k].opcode == IBV_WR_RDMA_WRITE_WITH_IMM))
				continue;
			if (t == 1 && ops[k].rc_only)
				continue;
			memcpy(recv, &rw, sizeof(rw));
			memcpy(recv + SV_RECV_WQE_HDR, &rs, sizeof(rs));
			g_rec(0x11, recv, sizeof(recv));
			memset(&w, 0, sizeof(w));
			w.wr_id = 42;
			w.opcode = ops[k].opcode;
			w.flags = ops[k].flags;
			w.num_sge = 2;
			w.remote_addr = 0x8000 + 64;   /* MR 0 */
			w.rkey = 0;
			switch (w.opcode) {
			case IBV_WR_RDMA_READ:
			case SV_WR_RDMA_READ_INV:
				sge[1].addr = 0x20200; /* into MR 2 */
				sge[1].lkey = 2;
				if (w.opcode == IBV_WR_RDMA_READ)
					break;
				w.imm = 3;
				break;
			case IBV_WR_RDMA_WRITE_WITH_IMM:
			case IBV_WR_SEND_WITH_IMM:
				w.imm = 0x01020304;
				break;
			case IBV_WR_ATOMIC_CMP_AND_SWP:
			case IBV_WR_ATOMIC_FETCH_AND_ADD:
				w.atomic.compare_add = 5;
				w.atomic.swap = 9;
				sge[0].length = 8;
				nsge = 1;
				break;
			case SV_WR_MASKED_CMP_SWAP:
			case SV_WR_MASKED_FETCH_ADD:
				w.imm = 0;
				w.masked.remote_addr = 0x8000 + 64;
				w.masked.compare_add = 1;
				w.masked.swap = 0xff;
				w.masked.compare_mask = ~0ull;
				w.masked.swap_mask = 0xff;
				sge[0].length = 8;
				nsge = 1;
				break;
			case IBV_WR_SEND_WITH_INV:
			case IBV_WR_LOCAL_INV:
				w.imm = 3;             /* the fast-reg MR */
				break;
			case SV_WR_FAST_REG_MR:
				w.num_sge = 4;         /* list entries */
				w.reg.key = 0x0307;    /* MR 3, consumer key 7 */
				w.reg.access = IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_WRITE;
				w.reg.length = 4 * 4096;
				w.reg.iova = 0x40000;
				w.reg.page_shift = 12;
				nsge = 0;
				break;
			case IBV_WR_BIND_MW:
				w.reg.key = 0x0409;    /* MW 2B, consumer key 9 */
				w.reg.list = 0;        /* MR 0 */
				w.reg.iova = 0x1000;
				w.reg.length = 4096;
				w.reg.access = IBV_ACCESS_REMOTE_WRITE;
				nsge = 0;
				break;
			default:
				break;
			}
			if (w.flags & IBV_SEND_INLINE) {
				uint8_t b[SV_SEND_WQE_HDR + 48];

				w.num_sge = 48;
				memcpy(b, &w, sizeof(w));
				memset(b + SV_SEND_WQE_HDR, 0x5a, 48);
				g_rec(0x30, b, sizeof(b));
			} else {
				if (nsge == 1)
					w.num_sge = 1;
				g_send(&w, sge, nsge, 0x30);
			}
			g_rec(0x05, "\x10", 1);
			snprintf(name, sizeof(name), "%s-%s", tn[t], ops[k].name);
			ret |= g_save(dir, name, (uint8_t)t, 1);
		}
	}
	/* fast registration, then the MR used and invalidated, a window
	 * bound and used */
	for (unsigned int t = 0; t < 2; t++) {
		struct sv_send_wqe w = { .wr_id = 1, .opcode = SV_WR_FAST_REG_MR,
					 .flags = IBV_SEND_SIGNALED, .num_sge = 4 };
		struct sv_wqe_sge s = { 0x100, 64, 0 };

		w.reg.key = 0x0307;
		w.reg.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ;
		w.reg.length = 4 * 4096;
		w.reg.iova = 0x40000;
		w.reg.page_shift = 12;
		g_send(&w, NULL, 0, 0x10);
		g_rec(0x05, "\x02", 1);   /* run: the new key is live */
		w = (struct sv_send_wqe){ .wr_id = 2, .opcode = IBV_WR_RDMA_WRITE,
					  .flags = IBV_SEND_SIGNALED, .num_sge = 1,
					  .remote_addr = 0x40010, .rkey = 3 };
		g_send(&w, &s, 1, 0x10);
		w.wr_id = 3;
		w.opcode = t ? IBV_WR_SEND_WITH_INV : IBV_WR_LOCAL_INV;
		w.imm = 3;
		w.num_sge = t;
		g_send(&w, &s, t, 0x10);
		w = (struct sv_send_wqe){ .wr_id = 4, .opcode = IBV_WR_BIND_MW,
					  .flags = IBV_SEND_SIGNALED };
		w.reg.key = 0x0409;
		w.reg.list = 0;
		w.reg.iova = 0x1000;
		w.reg.length = 4096;
		w.reg.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		g_send(&w, NULL, 0, 0x10);
		g_rec(0x05, "\x02", 1);
		w = (struct sv_send_wqe){ .wr_id = 5, .opcode = IBV_WR_RDMA_READ,
					  .flags = IBV_SEND_SIGNALED, .num_sge = 1,
					  .remote_addr = 0x1000, .rkey = 4 };
		g_send(&w, &s, 1, 0x10);
		g_rec(0x05, "\x20", 1);
		ret |= g_save(dir, t ? "rc-chain-send_inv" : "rc-chain-local_inv",
			      0, 1);
	}
	/* a forged producer far ahead, a consumer pulled back, a lying mailbox */
	g_rec(0x02, "\x00\x01\x00\x00", 4);
	g_rec(0x05, "\x04", 1);
	ret |= g_save(dir, "rc-prod-ahead", 0, 1);
	g_rec(0x03, "\xff\xff\xff\xff", 4);
	g_rec(0x05, "\x04", 1);
	ret |= g_save(dir, "rc-cons-back", 0, 1);
	{
		uint8_t mb[SV_WQ_MB_BYTES + 4] = { 0 };
		struct sv_send_wqe w = { .wr_id = 1, .opcode = IBV_WR_SEND,
					 .flags = IBV_SEND_SIGNALED, .num_sge = 1 };
		struct sv_wqe_sge s = { 0x100, 16, 0 };

		memcpy(mb, &w, sizeof(w));
		memcpy(mb + SV_SEND_WQE_HDR, &s, sizeof(s));
		g_rec(0x14, mb, SV_WQ_MB_BYTES);
		g_send(&w, &s, 1, 0x10);
		ret |= g_save(dir, "rc-mailbox", 0, 1);
	}
	/* a UD send in SQD, released by the return to RTS */
	{
		struct sv_send_wqe w = { .wr_id = 3, .opcode = IBV_WR_SEND,
					 .flags = IBV_SEND_SIGNALED, .num_sge = 1 };
		struct sv_wqe_sge s = { 0x100, 16, 0 };

		g_send(&w, &s, 1, 0x30);
		ret |= g_save(dir, "ud-sqd", 2, 3);
		/* the same to the multicast group the peer is in */
		g_send(&w, &s, 1, 0x70);
		ret |= g_save(dir, "ud-mcast", 2, 1);
	}
	return ret;
}
