// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the control path: the command decoder and every handler
 * (ctl/control.c and the handlers in ctl/: mem.c, mw.c, cq.c, qp.c, srq.c,
 * ah.c, xrc.c, domain.c, mcast.c), command by command, as the control thread runs them,
 * against a device object table that lives across inputs: a neighbour client
 * holds a PD, an MR, a CQ and a QP the whole time, and each input is a new
 * client whose objects all go when it ends (as when a process dies). The
 * client's memory is the fuzzer's own (fuzz_dev.h), so REG_MR and friends check
 * real mappings; MR addresses in the seeds name FZ_MEM, which is mapped at one
 * address in every run.
 *
 * Input: records, each
 *   op (1)     the header's op (any value: 0 and past the last are tried)
 *   ctl (1)    bits 0-2: the descriptor that comes with it (none, a
 *              seqpacket socket, a datagram socket, a memfd, /dev/null, a
 *              closed-on-exec pipe end); bit 3: the first 8 bytes of the
 *              body become a handle this input got before (the byte there
 *              picks which), bit 4: bytes 8..16 too; bit 5: the body
 *              starts with the header (raw: magic, op, version forged);
 *              bit 6: the engine runs a step of every QP after it; bit 7:
 *              the message is cut to the header and the body given
 *   len (1)    body bytes (at most SV_CMD_SIZE - 16)
 *   body       the command's payload (struct sv_cmd's u)
 * After every command the response must be well formed; after the input,
 * the device must hold exactly what the neighbour holds (no object, key,
 * QP or XRC domain left behind), and LeakSanitizer sees no leak.
 *
 * fuzz_cmd_replay --gen DIR writes the seed corpus: the command sequences
 * of the verbs a program calls (ibv_rc_pingpong's, SRQs, AHs, XRC,
 * memory windows, fast-register MRs and page lists, domains, multicast),
 * recorded while they run against the device.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_dev.h"

#define FZ_MEM_ADDR  0x5e0000000000ull
#define FZ_MEM_BYTES (256u * 1024u)
#define MAX_HANDLES  64

enum {
	C_FD = 7,
	C_FIX0 = 1 << 3,
	C_FIX1 = 1 << 4,
	C_RAW = 1 << 5,
	C_RUN = 1 << 6,
	C_SHORT = 1 << 7,
};

static uint8_t *mem;
static bool verbose;           /* $FZ_VERBOSE: each command's status */
static struct sv_client *neighbour;
static uint32_t n_total[SV_OBJ_TYPE_MAX], n_keys, n_qp;

/* One input's state. */
static struct {
	struct sv_client *c;
	uint64_t h[MAX_HANDLES];
	unsigned int nh;
	struct sv_rsp rsp;
} in;

static void init(void)
{
	struct sv_client *c;
	struct fz_qp qp;
	uint64_t pd, cq;

	if (neighbour)
		return;
	fz_dev_init(false);
	verbose = getenv("FZ_VERBOSE") != NULL;
	mem = mmap((void *)FZ_MEM_ADDR, FZ_MEM_BYTES, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (mem == MAP_FAILED)
		mem = mmap(NULL, FZ_MEM_BYTES, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FZ_CHECK(mem != MAP_FAILED);
	c = neighbour = fz_client_new();
	pd = fz_alloc_pd(c);
	FZ_CHECK(fz_reg_mr(c, pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE, NULL) != 0);
	cq = fz_create_cq(c, 16);
	FZ_CHECK(fz_create_qp(c, IBV_QPT_RC, pd, cq, 0, &qp) == 0);
	FZ_CHECK(fz_qp_to(c, &qp, IBV_QPS_INIT, 0, fz_peer_gid, 0) == 0);
	memcpy(n_total, sv_dev.total, sizeof(n_total));
	n_keys = sv_dev.keys.live;
	n_qp = sv_dev.nqp;
}

static int make_fd(unsigned int kind)
{
	int sv[2], fd = -1;

	switch (kind) {
	case 1:
	case 2:
		if (socketpair(AF_UNIX, (kind == 1 ? SOCK_SEQPACKET : SOCK_DGRAM) |
			       SOCK_CLOEXEC, 0, sv))
			return -1;
		close(sv[1]);
		return sv[0];
	case 3:
		return memfd_create("fuzz-xrcd", MFD_CLOEXEC);
	case 4:
		return open("/dev/null", O_RDWR | O_CLOEXEC);
	case 5:
		if (pipe2(sv, O_CLOEXEC))
			return -1;
		close(sv[1]);
		return sv[0];
	case 6:
		return open("/", O_PATH | O_CLOEXEC);
	default:
		return fd;
	}
}

/* Does a successful op's response start with a new object's handle? */
static bool creates(unsigned int op)
{
	switch (op) {
	case SV_CMD_ALLOC_PD: case SV_CMD_REG_MR: case SV_CMD_CREATE_CHANNEL:
	case SV_CMD_CREATE_CQ: case SV_CMD_CREATE_QP: case SV_CMD_CREATE_SRQ:
	case SV_CMD_CREATE_AH: case SV_CMD_CREATE_DOMAIN: case SV_CMD_ALLOC_MR:
	case SV_CMD_ALLOC_PAGE_LIST: case SV_CMD_REG_MR_LIST:
	case SV_CMD_ALLOC_MW: case SV_CMD_OPEN_XRCD: case SV_CMD_OPEN_QP:
		return true;
	default:
		return false;
	}
}

/* A new page list: the client fills it with pages of FZ_MEM, as a
 * program fills a list before a fast registration. */
static void fill_page_list(int fd, const struct sv_rsp_page_list *pl)
{
	uint64_t *e;

	if (fd < 0 || !pl->bytes || pl->bytes > (1u << 20))
		return;
	e = mmap(NULL, pl->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (e == MAP_FAILED)
		return;
	for (uint64_t i = 0; i < pl->bytes / 8; i++)
		e[i] = (uintptr_t)mem + (i % (FZ_MEM_BYTES / 4096)) * 4096;
	munmap(e, pl->bytes);
}

/* One command of the input; its status. */
static int exec_rec(uint8_t op, uint8_t ctl, const uint8_t *body, size_t len)
{
	struct sv_cmd cmd;
	ssize_t n = sizeof(cmd);
	int fd_out = -1, fd_in;

	memset(&cmd, 0, sizeof(cmd));
	if (len > sizeof(cmd.u))
		len = sizeof(cmd.u);
	if (ctl & C_RAW) {
		size_t k = len < sizeof(cmd) ? len : sizeof(cmd);

		memcpy(&cmd, body, k);
	} else {
		sv_cmd_init(&cmd, op);
		memcpy(&cmd.u, body, len);
	}
	for (unsigned int i = 0; i < 2 && in.nh; i++) {
		uint64_t *f = (uint64_t *)cmd.u.raw + i;

		if (ctl & (C_FIX0 << i))
			*f = in.h[*(uint8_t *)f % in.nh];
	}
	if (ctl & C_SHORT)
		n = (ssize_t)(sizeof(cmd.hdr) + len);
	fd_in = make_fd(ctl & C_FD);
	memset(&in.rsp, 0, sizeof(in.rsp));
	sv_dev_lock(true);
	sv_control_handle(in.c, &cmd, n, fd_in, &in.rsp, &fd_out);
	sv_dev_unlock();
	FZ_CHECK(in.rsp.hdr.magic == SV_PROTO_MAGIC);
	FZ_CHECK(in.rsp.hdr.status <= 0);
	FZ_CHECK(in.rsp.hdr.status == 0 || fd_out < 0);
	if (in.rsp.hdr.status == 0 && creates(cmd.hdr.op)) {
		FZ_CHECK(in.rsp.u.obj.handle != 0);
		if (in.nh < MAX_HANDLES)
			in.h[in.nh++] = in.rsp.u.obj.handle;
		if (cmd.hdr.op == SV_CMD_ALLOC_PAGE_LIST)
			fill_page_list(fd_out, &in.rsp.u.page_list);
	}
	if (fd_out >= 0)
		close(fd_out);
	if (ctl & C_RUN)
		fz_run(2);
	if (verbose)
		fprintf(stderr, "%s -> %d\n", sv_cmd_name(cmd.hdr.op),
			in.rsp.hdr.status);
	return in.rsp.hdr.status;
}

static void begin(void)
{
	init();
	memset(&in, 0, sizeof(in));
	in.c = fz_client_new();
}

static void end(void)
{
	fz_run(4);
	fz_client_free(in.c);
	in.c = NULL;
	/* what the input made is gone; the neighbour's is all there is */
	FZ_CHECK(sv_dev.nclients == 1);
	FZ_CHECK(!memcmp(n_total, sv_dev.total, sizeof(n_total)));
	FZ_CHECK(sv_dev.keys.live == n_keys);
	FZ_CHECK(sv_dev.nqp == n_qp);
	FZ_CHECK(neighbour->objs.live == 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	begin();
	while (off + 3 <= size) {
		uint8_t op = data[off], ctl = data[off + 1];
		size_t len = data[off + 2];

		off += 3;
		if (len > size - off)
			len = size - off;
		exec_rec(op, ctl, data + off, len);
		off += len;
	}
	end();
	return 0;
}

/* ---- the seed corpus ---- */

static struct {
	uint8_t buf[16384];
	size_t len;
} g;

/* Run one command and record it: its status. */
static int rec(uint8_t op, uint8_t ctl, const void *body, size_t len)
{
	FZ_CHECK(g.len + 3 + len <= sizeof(g.buf));
	g.buf[g.len] = op;
	g.buf[g.len + 1] = ctl;
	g.buf[g.len + 2] = (uint8_t)len;
	memcpy(g.buf + g.len + 3, body, len);
	g.len += 3 + len;
	return exec_rec(op, ctl, body, len);
}

#define REC(op, ctl, field) rec(SV_CMD_##op, ctl, &(field), sizeof(field))

static int save(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	fwrite(g.buf, 1, g.len, f);
	g.len = 0;
	return fclose(f);
}

static uint64_t last(void)
{
	return in.rsp.hdr.status ? 0 : in.rsp.u.obj.handle;
}

static void modify(uint64_t qp, uint32_t type, uint32_t state, uint32_t dqpn)
{
	static const uint32_t rtr = IBV_QP_AV | IBV_QP_PATH_MTU |
		IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		IBV_QP_MIN_RNR_TIMER;
	static const uint32_t rts = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
	struct sv_cmd_modify_qp m;

	memset(&m, 0, sizeof(m));
	m.qp = qp;
	m.attr.qp_state = state;
	m.attr.port_num = 1;
	m.attr.qkey = 0x11111111;
	m.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ;
	m.attr.path_mtu = IBV_MTU_1024;
	m.attr.dest_qp_num = dqpn;
	m.attr.max_dest_rd_atomic = m.attr.max_rd_atomic = 1;
	m.attr.min_rnr_timer = 12;
	m.attr.timeout = 14;
	m.attr.retry_cnt = m.attr.rnr_retry = 7;
	m.attr.ah_attr.is_global = 1;
	m.attr.ah_attr.port_num = 1;
	m.attr.ah_attr.hop_limit = 1;
	memcpy(m.attr.ah_attr.dgid, fz_local_gid, 16);
	if (state == IBV_QPS_INIT)
		m.attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      (type == IBV_QPT_UD ? IBV_QP_QKEY :
			       IBV_QP_ACCESS_FLAGS);
	else if (state == IBV_QPS_RTR)
		m.attr_mask = IBV_QP_STATE | (type == IBV_QPT_UD ? 0 : rtr);
	else if (state == IBV_QPS_RTS)
		m.attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN |
			      (type == IBV_QPT_UD ? 0 : rts);
	else
		m.attr_mask = IBV_QP_STATE;
	REC(MODIFY_QP, 0, m);
}

/* What a program does first: the device, its port and GID, a context. */
static void open_device(void)
{
	struct sv_cmd_hello h = { .abi = SV_PROTO_VERSION };
	struct sv_cmd_query_port p = { .port_num = 1 };
	struct sv_cmd_query_gid gq = { .port_num = 1, .index = 0 };
	struct sv_cmd_open_context oc = { { 0 } };

	REC(HELLO, 0, h);
	rec(SV_CMD_QUERY_DEVICE, 0, NULL, 0);
	REC(QUERY_PORT, 0, p);
	REC(QUERY_GID, 0, gq);
	REC(OPEN_CONTEXT, 1, oc);
}

static uint64_t pd_mr(uint64_t *mr, uint32_t access)
{
	struct sv_cmd_reg_mr r;
	uint64_t pd;

	rec(SV_CMD_ALLOC_PD, 0, NULL, 0);
	pd = last();
	memset(&r, 0, sizeof(r));
	r.pd = pd;
	r.addr = r.iova = (uintptr_t)mem;
	r.length = 8192;
	r.access = access;
	REC(REG_MR, 0, r);
	*mr = last();
	return pd;
}

static uint64_t cq(uint64_t channel)
{
	struct sv_cmd_create_cq c = { .cqe = 16, .channel = channel };

	REC(CREATE_CQ, 0, c);
	return last();
}

static uint64_t qp(uint64_t pd, uint64_t scq, uint64_t rcq, uint64_t srq,
		   uint32_t type, uint32_t *qpn)
{
	struct sv_cmd_create_qp q;

	memset(&q, 0, sizeof(q));
	q.pd = pd;
	q.send_cq = scq;
	q.recv_cq = rcq;
	q.srq = srq;
	q.qp_type = type;
	q.cap.max_send_wr = 8;
	q.cap.max_recv_wr = srq ? 0 : 8;
	q.cap.max_send_sge = 1;
	q.cap.max_recv_sge = srq ? 0 : 1;
	q.cap.max_inline_data = 64;
	REC(CREATE_QP, 0, q);
	*qpn = in.rsp.u.qp.qpn;
	return last();
}

static void destroy(unsigned int op, uint64_t h)
{
	struct sv_cmd_handle c = { h };

	rec((uint8_t)op, 0, &c, sizeof(c));
}

int fz_gen_seeds(const char *dir);
int fz_gen_seeds(const char *dir)
{
	uint64_t pd, mr, ch, c1, q1, q2, srq, ah, dom, x, pl, fmr, mw;
	uint32_t qpn1, qpn2;
	int ret = 0;

	/* ibv_rc_pingpong, both sides in one client */
	begin();
	open_device();
	pd = pd_mr(&mr, IBV_ACCESS_LOCAL_WRITE);
	{
		struct sv_cmd_open_context oc = { { 0 } };

		REC(CREATE_CHANNEL, 1, oc);
		ch = last();
	}
	c1 = cq(ch);
	q1 = qp(pd, c1, c1, 0, IBV_QPT_RC, &qpn1);
	q2 = qp(pd, c1, c1, 0, IBV_QPT_RC, &qpn2);
	modify(q1, IBV_QPT_RC, IBV_QPS_INIT, 0);
	modify(q2, IBV_QPT_RC, IBV_QPS_INIT, 0);
	modify(q1, IBV_QPT_RC, IBV_QPS_RTR, qpn2);
	modify(q2, IBV_QPT_RC, IBV_QPS_RTR, qpn1);
	modify(q1, IBV_QPT_RC, IBV_QPS_RTS, qpn2);
	modify(q2, IBV_QPT_RC, IBV_QPS_RTS, qpn1);
	{
		struct sv_cmd_query_qp qq = { .qp = q1, .attr_mask = ~0u };
		struct sv_cmd_notify_cq n = { .cq = c1, .arm_sn = 1 };
		struct sv_cmd_resize_cq rz = { .cq = c1, .cqe = 64 };
		struct sv_cmd_stat st = { 0 };

		REC(QUERY_QP, 0, qq);
		REC(NOTIFY_CQ, 0, n);
		REC(RESIZE_CQ, 0, rz);
		REC(STAT, 0, st);
		REC(STAT_WIRE, 0, st);
	}
	modify(q1, IBV_QPT_RC, IBV_QPS_SQD, 0);
	modify(q2, IBV_QPT_RC, IBV_QPS_ERR, 0);
	destroy(SV_CMD_DESTROY_QP, q1);
	destroy(SV_CMD_DESTROY_QP, q2);
	destroy(SV_CMD_DESTROY_CQ, c1);
	destroy(SV_CMD_DESTROY_CHANNEL, ch);
	destroy(SV_CMD_DEREG_MR, mr);
	destroy(SV_CMD_DEALLOC_PD, pd);
	end();
	ret |= save(dir, "rc_pingpong");

	/* an SRQ, UD QPs, an AH, multicast, rereg */
	begin();
	open_device();
	pd = pd_mr(&mr, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	c1 = cq(0);
	{
		struct sv_cmd_create_srq s = { .pd = pd, .max_wr = 16,
					       .max_sge = 2, .srq_type =
					       IBV_SRQT_BASIC };
		struct sv_cmd_modify_srq ms;
		struct sv_cmd_create_ah a;
		struct sv_cmd_mcast mc;
		struct sv_cmd_rereg_mr rr;

		REC(CREATE_SRQ, 0, s);
		srq = last();
		memset(&ms, 0, sizeof(ms));
		ms.srq = srq;
		ms.attr_mask = IBV_SRQ_LIMIT;
		ms.srq_limit = 4;
		REC(MODIFY_SRQ, 0, ms);
		REC(QUERY_SRQ, 0, ms);
		q1 = qp(pd, c1, c1, srq, IBV_QPT_UD, &qpn1);
		modify(q1, IBV_QPT_UD, IBV_QPS_INIT, 0);
		modify(q1, IBV_QPT_UD, IBV_QPS_RTR, 0);
		modify(q1, IBV_QPT_UD, IBV_QPS_RTS, 0);
		memset(&a, 0, sizeof(a));
		a.pd = pd;
		a.attr.is_global = 1;
		a.attr.port_num = 1;
		memcpy(a.attr.dgid, fz_local_gid, 16);
		REC(CREATE_AH, 0, a);
		ah = last();
		memset(&mc, 0, sizeof(mc));
		mc.qp = q1;
		mc.gid[10] = mc.gid[11] = 0xff;
		mc.gid[12] = 239;
		mc.gid[15] = 7;
		REC(ATTACH_MCAST, 0, mc);
		REC(DETACH_MCAST, 0, mc);
		memset(&rr, 0, sizeof(rr));
		rr.mr = mr;
		rr.flags = IBV_REREG_MR_CHANGE_TRANSLATION |
			   IBV_REREG_MR_CHANGE_ACCESS;
		rr.addr = rr.iova = (uintptr_t)mem + 4096;
		rr.length = 4096;
		rr.access = IBV_ACCESS_LOCAL_WRITE;
		REC(REREG_MR, 0, rr);
		destroy(SV_CMD_DESTROY_AH, ah);
		destroy(SV_CMD_DESTROY_QP, q1);
		destroy(SV_CMD_DESTROY_SRQ, srq);
	}
	end();
	ret |= save(dir, "srq_ud_ah_mcast");

	/* the memory-management extensions and a domain */
	begin();
	open_device();
	pd = pd_mr(&mr, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	{
		struct sv_cmd_create_domain d = { .msg_model = SV_MSG_LOW_LATENCY };
		struct sv_cmd_alloc_mr am = { .pd = pd, .max_entries = 8 };
		struct sv_cmd_alloc_page_list ap = { .max_entries = 8 };
		struct sv_cmd_reg_mr_list rl;
		struct sv_cmd_alloc_mw aw = { .pd = pd, .type = SV_MW_TYPE_2B };
		struct sv_cmd_create_qp q;

		REC(CREATE_DOMAIN, 0, d);
		dom = last();
		c1 = cq(0);
		memset(&q, 0, sizeof(q));
		q.pd = pd;
		q.send_cq = q.recv_cq = c1;
		q.qp_type = IBV_QPT_RC;
		q.cap.max_send_wr = q.cap.max_recv_wr = 4;
		q.cap.max_send_sge = q.cap.max_recv_sge = 1;
		q.domain = dom;
		REC(CREATE_QP, 0, q);
		q1 = last();
		REC(ALLOC_MR, 0, am);
		fmr = last();
		REC(ALLOC_PAGE_LIST, 0, ap);
		pl = last();
		memset(&rl, 0, sizeof(rl));
		rl.pd = pd;
		rl.list = pl;
		rl.nentries = 4;
		rl.length = 4 * 4096;
		rl.iova = 0x10000;
		rl.page_shift = 12;
		rl.access = IBV_ACCESS_LOCAL_WRITE;
		REC(REG_MR_LIST, 0, rl);
		REC(ALLOC_MW, 0, aw);
		mw = last();
		aw.type = SV_MW_TYPE_1;
		REC(ALLOC_MW, 0, aw);
		destroy(SV_CMD_DEALLOC_MW, mw);
		destroy(SV_CMD_FREE_PAGE_LIST, pl);
		destroy(SV_CMD_DEREG_MR, fmr);
		destroy(SV_CMD_DESTROY_QP, q1);
		destroy(SV_CMD_DESTROY_DOMAIN, dom);
	}
	end();
	ret |= save(dir, "mem_ext_domain");

	/* XRC: a shared domain by file, its SRQ, a target QP opened again */
	begin();
	open_device();
	pd = pd_mr(&mr, IBV_ACCESS_LOCAL_WRITE);
	c1 = cq(0);
	{
		struct sv_cmd_open_xrcd ox = { .flags = SV_XRCD_SHARED |
						SV_XRCD_CREATE };
		struct sv_cmd_create_srq s;
		struct sv_cmd_create_qp q;
		struct sv_cmd_open_qp oq;

		REC(OPEN_XRCD, 3, ox);
		x = last();
		memset(&s, 0, sizeof(s));
		s.pd = pd;
		s.cq = c1;
		s.xrcd = x;
		s.srq_type = IBV_SRQT_XRC;
		s.max_wr = 8;
		s.max_sge = 1;
		REC(CREATE_SRQ, 0, s);
		srq = last();
		memset(&q, 0, sizeof(q));
		q.qp_type = IBV_QPT_XRC_RECV;
		q.xrcd = x;
		REC(CREATE_QP, 0, q);
		q1 = last();
		qpn1 = in.rsp.u.qp.qpn;
		modify(q1, IBV_QPT_XRC_RECV, IBV_QPS_INIT, 0);
		memset(&oq, 0, sizeof(oq));
		oq.xrcd = x;
		oq.qpn = qpn1;
		oq.qp_type = IBV_QPT_XRC_RECV;
		REC(OPEN_QP, 0, oq);
		q2 = last();
		q = (struct sv_cmd_create_qp){ .pd = pd, .send_cq = c1,
					       .qp_type = IBV_QPT_XRC_SEND };
		q.cap.max_send_wr = 4;
		q.cap.max_send_sge = 1;
		REC(CREATE_QP, 0, q);
		destroy(SV_CMD_DESTROY_QP, q2);
		destroy(SV_CMD_DESTROY_QP, q1);
		destroy(SV_CMD_DESTROY_SRQ, srq);
		destroy(SV_CMD_CLOSE_XRCD, x);
	}
	end();
	ret |= save(dir, "xrc");

	/* refusals: a probe connection, bad headers, a short message */
	begin();
	{
		struct sv_cmd_hello h = { .abi = SV_PROTO_VERSION,
					  .flags = SV_HELLO_PROBE };
		struct sv_cmd_hdr bad = { .magic = SV_PROTO_MAGIC, .op = 99,
					  .version = SV_PROTO_VERSION };

		REC(HELLO, 0, h);
		rec(SV_CMD_ALLOC_PD, 0, NULL, 0);
		rec(0, C_RAW, &bad, sizeof(bad));
		rec(SV_CMD_QUERY_GID, C_SHORT, &h, 4);
		rec(SV_CMD_STAT, 4, NULL, 0);
	}
	end();
	ret |= save(dir, "refusals");
	return ret;
}
