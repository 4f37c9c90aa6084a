// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the rdma_cm device (src/device/cm/ucma.c and the
 * CM behind it, cm/id.c, bind.c, resolve.c, listen.c, conn.c, addr.c, attr.c, mcast.c): the ucma commands of
 * <rdma/rdma_user_cm.h> as the preload passes them (struct sv_ucma_req on
 * a file's socket), two files open at once (MIGRATE_ID moves ids between
 * them; a connection on 127.0.0.1 runs between two ids of this device, no
 * MAD leaves the process: the device has no RoCEv2 port here). The
 * daemon's side runs in this process: sv_cm_start on a socket in a fresh
 * directory, each file accepted with sv_cm_file_accept and its requests
 * served with sv_cm_file_input, as evloop.c's loop does.
 *
 * Input: records, each
 *   ctl (1)   bit 0 the file (0, 1); bits 1-3 aux_kind (SV_UCMA_AUX_*; the
 *             other file's token with SV_UCMA_AUX_FILE); bit 4 write()'s
 *             length 100 bytes longer than the bytes given; bit 5 a
 *             response room of 4 bytes; bit 6 the command's id field is
 *             one this input got (the byte there picks which); bit 7 the
 *             CM's timer runs after it
 *   cmd (1)   the ucma command number
 *   len (2)   little-endian; then len bytes: the command struct (SET_OPTION:
 *             the struct,
 *             then the option's value)
 * Every response must be well formed; when the input ends both files
 * close and no id, multicast or file may be left.
 *
 * fuzz_ucma_replay --gen DIR writes the seed corpus: what librdmacm
 * writes for a connection on 127.0.0.1 (listen, resolve, connect, accept,
 * disconnect), for a UDP id and a multicast join, and for migrations.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <rdma/rdma_user_cm.h>

#include "abi/sv_sock.h"
#include "abi/sv_ucma.h"
#include "device/cm/cm.h"
#include "fuzz_dev.h"

#define MAX_IDS 32

static char dir[40], sock_path[64], cm_path[80];
static bool verbose;

static struct {
	struct sv_cm_file *f[2];
	int fd[2];                 /* our end of each file's socket */
	uint64_t token[2];
	uint32_t id[MAX_IDS];
	unsigned int nid;
	struct sv_ucma_rsp rsp;
	int ret;
} in;

static void cleanup(void)
{
	sv_cm_stop();
	unlink(cm_path);
	rmdir(dir);
}

static void init(void)
{
	if (dir[0])
		return;
	fz_dev_init(false);
	verbose = getenv("FZ_VERBOSE") != NULL;
	snprintf(dir, sizeof(dir), "/tmp/fuzz-ucma-XXXXXX");
	FZ_CHECK(mkdtemp(dir) != NULL);
	snprintf(sock_path, sizeof(sock_path), "%s/control", dir);
	snprintf(cm_path, sizeof(cm_path), "%s/%s", dir, SV_UCMA_SOCK_NAME);
	FZ_CHECK(sv_cm_start(sock_path) == 0);
	atexit(cleanup);
}

static void file_open(unsigned int k)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sv_ucma_hello h;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), efd = -1;

	FZ_CHECK(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", cm_path);
	FZ_CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	in.f[k] = sv_cm_file_accept();
	FZ_CHECK(in.f[k] != NULL);
	FZ_CHECK(sv_recv_msg(fd, &h, sizeof(h), &efd, 0) == sizeof(h));
	FZ_CHECK(h.magic == SV_UCMA_MAGIC && efd >= 0);
	close(efd);                 /* the program's descriptor: not needed */
	in.fd[k] = fd;
	in.token[k] = h.token;
}

static void file_close(unsigned int k)
{
	if (!in.f[k])
		return;
	sv_cm_file_close(in.f[k]);
	sv_cm_file_free(in.f[k]);
	in.f[k] = NULL;
	close(in.fd[k]);
}

static void begin(void)
{
	init();
	memset(&in, 0, sizeof(in));
	file_open(0);
	file_open(1);
}

static void end(void)
{
	sv_cm_on_timer();
	file_close(0);
	file_close(1);
	FZ_CHECK(sv_cm_nfiles() == 0);
	FZ_CHECK(sv_cm_stats.live == 0);
}

/* Where a command's id is (bytes after the header), or -1. */
static int id_offset(uint32_t cmd)
{
	switch (cmd) {
	case RDMA_USER_CM_CMD_DESTROY_ID:
	case RDMA_USER_CM_CMD_LEAVE_MCAST:
		return offsetof(struct rdma_ucm_destroy_id, id);
	case RDMA_USER_CM_CMD_BIND_IP:
		return offsetof(struct rdma_ucm_bind_ip, id);
	case RDMA_USER_CM_CMD_RESOLVE_IP:
		return offsetof(struct rdma_ucm_resolve_ip, id);
	case RDMA_USER_CM_CMD_QUERY_ROUTE:
	case RDMA_USER_CM_CMD_QUERY:
		return offsetof(struct rdma_ucm_query, id);
	case RDMA_USER_CM_CMD_CONNECT:
		return offsetof(struct rdma_ucm_connect, id);
	case RDMA_USER_CM_CMD_ACCEPT:
		return offsetof(struct rdma_ucm_accept, id);
	case RDMA_USER_CM_CMD_INIT_QP_ATTR:
		return offsetof(struct rdma_ucm_init_qp_attr, id);
	case RDMA_USER_CM_CMD_SET_OPTION:
		return offsetof(struct rdma_ucm_set_option, id);
	case RDMA_USER_CM_CMD_JOIN_IP_MCAST:
		return offsetof(struct rdma_ucm_join_ip_mcast, id);
	case RDMA_USER_CM_CMD_MIGRATE_ID:
		return offsetof(struct rdma_ucm_migrate_id, id);
	case RDMA_USER_CM_CMD_JOIN_MCAST:
		return offsetof(struct rdma_ucm_join_mcast, id);
	case RDMA_USER_CM_CMD_RESOLVE_ROUTE:
	case RDMA_USER_CM_CMD_LISTEN:
	case RDMA_USER_CM_CMD_REJECT:
	case RDMA_USER_CM_CMD_DISCONNECT:
	case RDMA_USER_CM_CMD_NOTIFY:
	case RDMA_USER_CM_CMD_BIND:
	case RDMA_USER_CM_CMD_RESOLVE_ADDR:
		return 0;
	default:
		return -1;
	}
}

static void add_id(uint32_t id)
{
	if (in.nid < MAX_IDS)
		in.id[in.nid++] = id;
}

/* One request; write()'s result. */
static int request(uint8_t ctl, uint8_t cmd, const uint8_t *body, size_t len)
{
	static struct sv_ucma_req q;
	struct rdma_ucm_cmd_hdr hdr = { .cmd = cmd, .in = 0, .out = 1024 };
	unsigned int k = ctl & 1;
	uint32_t opt = 0;
	ssize_t n;
	int off;

	if (!in.f[k])
		return -EBADF;
	if (len > SV_UCMA_MAX_CMD - sizeof(hdr))
		len = SV_UCMA_MAX_CMD - sizeof(hdr);
	if (cmd == RDMA_USER_CM_CMD_SET_OPTION &&
	    len > sizeof(struct rdma_ucm_set_option)) {
		opt = (uint32_t)(len - sizeof(struct rdma_ucm_set_option));
		len = sizeof(struct rdma_ucm_set_option);
	}
	memset(&q, 0, SV_UCMA_REQ_HDR);
	q.magic = SV_UCMA_MAGIC;
	hdr.in = (uint16_t)len;
	if (ctl & 0x20)
		hdr.out = 4;
	memcpy(q.data, &hdr, sizeof(hdr));
	memcpy(q.data + sizeof(hdr), body, len + opt);
	q.nbytes = (uint32_t)(sizeof(hdr) + len);
	q.optlen = opt;
	q.wlen = q.nbytes + (ctl & 0x10 ? 100 : 0);
	q.aux_kind = (ctl >> 1) & 7;
	if (q.aux_kind == SV_UCMA_AUX_FILE)
		q.aux = in.token[k ^ 1];
	off = id_offset(cmd);
	if ((ctl & 0x40) && in.nid && off >= 0 &&
	    (size_t)off + 4 <= len) {
		uint8_t *p = q.data + sizeof(hdr) + off;

		memcpy(p, &in.id[*p % in.nid], 4);
	}
	FZ_CHECK(send(in.fd[k], &q, SV_UCMA_REQ_HDR + q.nbytes + q.optlen,
		      0) > 0);
	if (!sv_cm_file_input(in.f[k])) {
		/* dropped, as clients.c drops it */
		file_close(k);
		return -EPIPE;
	}
	n = recv(in.fd[k], &in.rsp, sizeof(in.rsp), MSG_DONTWAIT);
	FZ_CHECK(n >= (ssize_t)SV_UCMA_RSP_HDR);
	FZ_CHECK(in.rsp.magic == SV_UCMA_MAGIC);
	FZ_CHECK((size_t)n == SV_UCMA_RSP_HDR + in.rsp.out_len);
	FZ_CHECK(in.rsp.out_len <= SV_UCMA_MAX_RSP);
	/* write()'s length, an error, "no event after all", or UNGET's 0 */
	FZ_CHECK(in.rsp.ret < 0 || in.rsp.ret == SV_UCMA_STALE ||
		 (uint32_t)in.rsp.ret == q.wlen ||
		 (in.rsp.ret == 0 && q.aux_kind == SV_UCMA_UNGET));
	FZ_CHECK(in.rsp.out_len <= hdr.out || in.rsp.ret < 0);
	if (in.rsp.ret > 0 && in.rsp.out_len >= 4 &&
	    (cmd == RDMA_USER_CM_CMD_CREATE_ID ||
	     cmd == RDMA_USER_CM_CMD_JOIN_IP_MCAST ||
	     cmd == RDMA_USER_CM_CMD_JOIN_MCAST)) {
		uint32_t id;

		memcpy(&id, in.rsp.out, 4);
		add_id(id);
	}
	if (in.rsp.ret > 0 && cmd == RDMA_USER_CM_CMD_GET_EVENT &&
	    in.rsp.out_len >= offsetof(struct rdma_ucm_event_resp, status)) {
		struct rdma_ucm_event_resp e;

		memset(&e, 0, sizeof(e));
		memcpy(&e, in.rsp.out, in.rsp.out_len < sizeof(e) ?
		       in.rsp.out_len : sizeof(e));
		if (e.event == SV_EV_CONNECT_REQUEST)
			add_id(e.id);
	}
	if (ctl & 0x80)
		sv_cm_on_timer();
	if (verbose)
		fprintf(stderr, "file %u cmd %u -> %d (%u bytes)\n", k, cmd,
			in.rsp.ret, in.rsp.out_len);
	return in.rsp.ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	begin();
	while (off + 4 <= size) {
		uint8_t ctl = data[off], cmd = data[off + 1];
		size_t len = data[off + 2] | (size_t)data[off + 3] << 8;

		off += 4;
		if (len > size - off)
			len = size - off;
		request(ctl, cmd, data + off, len);
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

/* Record a request and make it: an id the input got is recorded as its
 * index among them (ctl 0x40), so the seed replays whatever handles the
 * device gives this time. */
static int rec(uint8_t ctl, uint8_t cmd, const void *b, size_t len)
{
	static uint8_t body[SV_UCMA_MAX_CMD + SV_UCMA_MAX_OPT];
	int off = id_offset(cmd);

	FZ_CHECK(g.len + 4 + len <= sizeof(g.buf) && len <= sizeof(body));
	memcpy(body, b, len);
	if ((ctl & 0x40) && off >= 0 && (size_t)off + 4 <= len) {
		uint32_t id, i;

		memcpy(&id, body + off, 4);
		for (i = 0; i < in.nid && in.id[i] != id; i++)
			;
		FZ_CHECK(i < in.nid);
		memcpy(body + off, &i, 4);
	}
	g.buf[g.len] = ctl;
	g.buf[g.len + 1] = cmd;
	g.buf[g.len + 2] = (uint8_t)len;
	g.buf[g.len + 3] = (uint8_t)(len >> 8);
	memcpy(g.buf + g.len + 4, body, len);
	g.len += 4 + len;
	return request(ctl, cmd, body, len);
}

#define REC(ctl, cmd, s) rec(ctl, RDMA_USER_CM_CMD_##cmd, &(s), sizeof(s))

static int save(const char *d, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", d, name);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	fwrite(g.buf, 1, g.len, f);
	g.len = 0;
	return fclose(f);
}

static void sin4(struct __kernel_sockaddr_storage *ss, uint16_t *size,
		 uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &a, sizeof(a));
	if (size)
		*size = sizeof(a);
}

static uint32_t create_id(uint8_t ctl, uint16_t ps, uint8_t qp_type)
{
	struct rdma_ucm_create_id c = { .uid = 1, .response = 0x1000,
					.ps = ps, .qp_type = qp_type };

	REC(ctl, CREATE_ID, c);
	return in.nid ? in.id[in.nid - 1] : 0;
}

static void get_event(uint8_t ctl)
{
	struct rdma_ucm_get_event e = { .response = 0x2000 };

	REC(ctl, GET_EVENT, e);
}

int fz_gen_seeds(const char *d);
int fz_gen_seeds(const char *d)
{
	int ret = 0;

	/* a connection on 127.0.0.1: file 0 listens, file 1 connects */
	for (int variant = 0; variant < 2; variant++) {
		struct rdma_ucm_bind b = { 0 };
		struct rdma_ucm_listen l = { 0 };
		struct rdma_ucm_resolve_addr ra = { 0 };
		struct rdma_ucm_resolve_route rr = { 0 };
		struct rdma_ucm_query qy = { .response = 0x3000 };
		struct rdma_ucm_init_qp_attr ia = { .response = 0x4000 };
		struct rdma_ucm_connect cn = { 0 };
		struct rdma_ucm_accept ac = { 0 };
		struct rdma_ucm_reject rj = { 0 };
		struct rdma_ucm_disconnect dc = { 0 };
		struct rdma_ucm_destroy_id di = { .response = 0x5000 };
		uint32_t srv, cli, req;

		begin();
		srv = create_id(0x00, RDMA_PS_TCP, IBV_QPT_RC);
		b.id = srv;
		sin4(&b.addr, &b.addr_size, 7471);
		REC(0x40, BIND, b);
		l.id = srv;
		l.backlog = 8;
		REC(0x40, LISTEN, l);
		cli = create_id(0x01, RDMA_PS_TCP, IBV_QPT_RC);
		ra.id = cli;
		ra.timeout_ms = 2000;
		sin4(&ra.dst_addr, &ra.dst_size, 7471);
		REC(0x41, RESOLVE_ADDR, ra);
		get_event(0x01);
		rr.id = cli;
		rr.timeout_ms = 2000;
		REC(0x41, RESOLVE_ROUTE, rr);
		get_event(0x01);
		for (uint32_t o = 0; o < 3; o++) {
			qy.id = cli;
			qy.option = o;
			REC(0x41, QUERY, qy);
		}
		ia.id = cli;
		ia.qp_state = IBV_QPS_INIT;
		REC(0x41, INIT_QP_ATTR, ia);
		cn.id = cli;
		cn.conn_param.qp_num = 0x1234;
		cn.conn_param.responder_resources = 1;
		cn.conn_param.initiator_depth = 1;
		cn.conn_param.retry_count = 7;
		cn.conn_param.rnr_retry_count = 7;
		cn.conn_param.private_data_len = 8;
		cn.conn_param.valid = 1;
		REC(0x41, CONNECT, cn);
		get_event(0x00);           /* CONNECT_REQUEST: a new id */
		req = in.nid ? in.id[in.nid - 1] : 0;
		if (variant == 0) {
			ac.id = req;
			ac.uid = 2;
			ac.conn_param = cn.conn_param;
			ac.conn_param.qp_num = 0x5678;
			REC(0x40, ACCEPT, ac);
			get_event(0x01);   /* ESTABLISHED */
			get_event(0x00);
			ia.id = req;
			ia.qp_state = IBV_QPS_RTR;
			REC(0x40, INIT_QP_ATTR, ia);
			ia.qp_state = IBV_QPS_RTS;
			REC(0x40, INIT_QP_ATTR, ia);
			dc.id = cli;
			REC(0x41, DISCONNECT, dc);
			get_event(0x00);
			get_event(0x01);
		} else {
			rj.id = req;
			rj.reason = 28;
			rj.private_data_len = 4;
			REC(0x40, REJECT, rj);
			get_event(0x01);   /* REJECTED */
		}
		di.id = cli;
		REC(0x41, DESTROY_ID, di);
		di.id = srv;
		REC(0x40, DESTROY_ID, di);
		end();
		ret |= save(d, variant ? "rc_reject" : "rc_connect");
	}

	/* UDP: bind, options, a multicast join and leave; a migration */
	begin();
	{
		struct rdma_ucm_bind_ip bi = { .response = 0x1000 };
		struct {
			struct rdma_ucm_set_option s;
			uint8_t val[4];
		} so = { { .optval = 0x6000, .level = RDMA_OPTION_ID,
			   .optname = RDMA_OPTION_ID_TOS, .optlen = 1 },
			 { 32 } };
		struct rdma_ucm_join_mcast jm = { .response = 0x7000, .uid = 3 };
		struct rdma_ucm_destroy_id lv = { .response = 0x8000 };
		struct rdma_ucm_migrate_id mi = { .response = 0x9000 };
		struct rdma_ucm_notify nt = { 0 };
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		struct sockaddr_in m = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(0xef010203) };
		uint32_t id = create_id(0x00, RDMA_PS_UDP, IBV_QPT_UD);

		memcpy(&bi.addr, &a, sizeof(a));
		bi.id = id;
		REC(0x40, BIND_IP, bi);
		so.s.id = id;
		rec(0x40, RDMA_USER_CM_CMD_SET_OPTION, &so, sizeof(so.s) + 1);
		jm.id = id;
		jm.addr_size = sizeof(m);
		memcpy(&jm.addr, &m, sizeof(m));
		REC(0x40, JOIN_MCAST, jm);
		get_event(0x00);
		lv.id = in.nid ? in.id[in.nid - 1] : 0;
		REC(0x00, LEAVE_MCAST, lv);
		nt.id = id;
		nt.event = 0;
		REC(0x40, NOTIFY, nt);
		mi.id = id;
		mi.fd = 5;
		REC(0x01 | SV_UCMA_AUX_FILE << 1 | 0x40, MIGRATE_ID, mi);
		REC(0x00 | SV_UCMA_AUX_BAD_FD << 1 | 0x40, MIGRATE_ID, mi);
		lv.id = id;
		REC(0x41, DESTROY_ID, lv);
	}
	end();
	ret |= save(d, "udp_mcast_migrate");
	return ret;
}
