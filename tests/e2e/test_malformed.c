// SPDX-License-Identifier: MIT
/*
 * Malformed and hostile input on softverbsd's control socket.
 *
 * Talks to a daemon of its own through raw sockets (no verbs library): every
 * truncated, oversized, garbled or out-of-range command must get an error
 * response with the errno the daemon's code defines, descriptors sent with
 * refused commands must not leak in the daemon, one client can never touch
 * another's objects, a client that floods the daemon is dropped without
 * stalling anybody else, and after 20000 random messages the daemon still
 * answers. The group teardown checks that the daemon survived all of it and
 * then leaves by itself (--idle-exit 1) with exit status 0 (under ASan that
 * includes no leak report).
 *
 * Environment (tests/e2e/isolated.sh sets it): SOFTVERBS_SOCKET, SOFTVERBSD,
 * optionally SV_TEST_DIR (the daemon logs to SV_TEST_DIR/softverbsd.log).
 * SV_FUZZ_SEED and SV_FUZZ_ITERS override the fuzz loop's defaults.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <infiniband/verbs.h>

#include "abi/sv_cmd.h"
#include "abi/sv_direct.h"
#include "abi/sv_sock.h"

#define SV_TEST_MAX_CQE	     ((1u << 22) - 1)
#define SV_TEST_MAX_MR_SIZE  (1ull << 47)
#define RSP_TIMEOUT_MS	     5000

static struct {
	pid_t pid;		/* the daemon */
	pid_t flooder;		/* test_flood_reading's child */
	struct rlimit nofile;	/* the daemon's own, while lowered */
	bool nofile_lowered;
	char sock_path[108];
	int keeper;		/* open all along: no idle exit */
	int base_fds;		/* the daemon's, the test's start */
	bool failed;		/* trouble in the group fixtures */
} g = { .pid = -1, .flooder = -1, .keeper = -1 };

static uint32_t seq_next = 1;

/* ---- helpers ---- */

#define assert_status(got, want)                                              \
	do {                                                                  \
		int got_ = (got), want_ = (want);                             \
		if (got_ != want_)                                            \
			fail_msg("status %d (%s), expected %d (%s)", got_,    \
				 strerror(-got_), want_, strerror(-want_));   \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* xorshift64*: the fuzz loop's generator, the same on every libc */
static uint64_t rnd_state = 0x5eed5eed5eed5eedull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 0x2545f4914f6cdd1dull;
}

static int conn_try(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -errno;
	memcpy(sa.sun_path, g.sock_path, sizeof(sa.sun_path));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = -errno;

		close(s);
		return e;
	}
	return s;
}

/* Connections of the running test: its teardown closes what a failed test
 * left open, so that the next one starts with the keeper alone. */
static int conns[16];
static unsigned int nconns;

static int conn_open(void)
{
	int s = conn_try();

	if (s < 0)
		fail_msg("connect %s: %s", g.sock_path, strerror(-s));
	assert_true(nconns < sizeof(conns) / sizeof(conns[0]));
	conns[nconns++] = s;
	return s;
}

static void conn_close(int s)
{
	unsigned int i;

	for (i = 0; i < nconns; i++)
		if (conns[i] == s)
			conns[i] = conns[--nconns];
	close(s);
}

/* Wait up to ms for a message on s. */
static bool readable(int s, int ms)
{
	struct pollfd p = { .fd = s, .events = POLLIN };
	int n;

	do {
		n = poll(&p, 1, ms);
	} while (n < 0 && errno == EINTR);
	return n > 0;
}

/* Receive one message, waiting at most RSP_TIMEOUT_MS: its length, 0 on EOF. */
static ssize_t recv_rsp(int s, struct sv_rsp *rsp, int *fd)
{
	*fd = -1;
	if (!readable(s, RSP_TIMEOUT_MS))
		fail_msg("no response within %d ms", RSP_TIMEOUT_MS);
	return sv_recv_msg(s, rsp, sizeof(*rsp), fd, MSG_DONTWAIT);
}

static void check_rsp_hdr(const struct sv_rsp *rsp, unsigned int op,
			  uint32_t seq)
{
	assert_int_equal(rsp->hdr.magic, SV_PROTO_MAGIC);
	assert_int_equal(rsp->hdr.version, SV_PROTO_VERSION);
	assert_int_equal(rsp->hdr.op, op);
	assert_int_equal(rsp->hdr.seq, seq);
	assert_true(rsp->hdr.status <= 0);
}

/* Send a full-size cmd (seq assigned here) with fd_in attached when >= 0, and
 * return the response's status. The response's descriptor goes to *fd_out,
 * or is closed when fd_out is NULL. */
static int xfer_fd(int s, struct sv_cmd *cmd, int fd_in, struct sv_rsp *rsp,
		   int *fd_out)
{
	ssize_t n;
	int fd;

	cmd->hdr.seq = seq_next++;
	assert_int_equal(sv_send_msg(s, cmd, sizeof(*cmd), fd_in, 0), 0);
	n = recv_rsp(s, rsp, &fd);
	if (n != (ssize_t)sizeof(*rsp))
		fail_msg("%s: response of %zd bytes", sv_cmd_name(cmd->hdr.op),
			 n);
	check_rsp_hdr(rsp, cmd->hdr.op, cmd->hdr.seq);
	if (rsp->hdr.status && fd >= 0)
		fail_msg("%s: a refused command returned a descriptor",
			 sv_cmd_name(cmd->hdr.op));
	if (fd_out)
		*fd_out = fd;
	else if (fd >= 0)
		close(fd);
	return rsp->hdr.status;
}

static int xfer(int s, struct sv_cmd *cmd, struct sv_rsp *rsp)
{
	return xfer_fd(s, cmd, -1, rsp, NULL);
}

/* A command carrying one 64-bit handle (DEALLOC_PD, DEREG_MR, ...). */
static int cmd_handle(int s, unsigned int op, uint64_t h)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, op);
	cmd.u.handle.handle = h;
	return xfer(s, &cmd, &rsp);
}

static int hello(int s, uint32_t abi, uint32_t flags, struct sv_rsp *rsp)
{
	struct sv_cmd cmd;
	struct sv_rsp tmp;

	sv_cmd_init(&cmd, SV_CMD_HELLO);
	cmd.u.hello.abi = abi;
	cmd.u.hello.flags = flags;
	return xfer(s, &cmd, rsp ? rsp : &tmp);
}

static void stat_get(int s, struct sv_rsp_stat *st)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_STAT);
	assert_status(xfer(s, &cmd, &rsp), 0);
	*st = rsp.u.stat;
}

static uint64_t alloc_pd(int s)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
	assert_status(xfer(s, &cmd, &rsp), 0);
	assert_true(rsp.u.obj.handle != 0);
	return rsp.u.obj.handle;
}

static struct sv_cmd reg_mr_cmd(uint64_t pd, uint64_t addr, uint64_t len,
			       uint32_t access)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_REG_MR);
	cmd.u.reg_mr.pd = pd;
	cmd.u.reg_mr.addr = addr;
	cmd.u.reg_mr.length = len;
	cmd.u.reg_mr.iova = addr;
	cmd.u.reg_mr.access = access;
	return cmd;
}

static int reg_mr(int s, uint64_t pd, uint64_t addr, uint64_t len,
		  uint32_t access, struct sv_rsp_mr *mr)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	cmd = reg_mr_cmd(pd, addr, len, access);
	ret = xfer(s, &cmd, &rsp);
	if (!ret) {
		assert_true(rsp.u.mr.handle != 0);
		assert_true(rsp.u.mr.lkey != 0);
		assert_int_equal(rsp.u.mr.lkey, rsp.u.mr.rkey);
	}
	if (mr)
		*mr = rsp.u.mr;
	return ret;
}

static struct sv_cmd rereg_mr_cmd(uint64_t mr, uint32_t flags, uint64_t pd,
				 uint64_t addr, uint64_t len, uint32_t access)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_REREG_MR);
	cmd.u.rereg_mr.mr = mr;
	cmd.u.rereg_mr.flags = flags;
	cmd.u.rereg_mr.pd = pd;
	cmd.u.rereg_mr.addr = addr;
	cmd.u.rereg_mr.length = len;
	cmd.u.rereg_mr.iova = addr;
	cmd.u.rereg_mr.access = access;
	return cmd;
}

static int rereg_mr(int s, uint64_t mr, uint32_t flags, uint64_t pd,
		    uint64_t addr, uint64_t len, uint32_t access,
		    struct sv_rsp_mr *out)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	cmd = rereg_mr_cmd(mr, flags, pd, addr, len, access);
	ret = xfer(s, &cmd, &rsp);
	if (out)
		*out = rsp.u.mr;
	return ret;
}

static struct sv_cmd create_cq_cmd(uint32_t cqe, uint32_t vec, uint32_t flags,
				   uint64_t channel)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_CREATE_CQ);
	cmd.u.create_cq.cookie = 0xc0ffee;
	cmd.u.create_cq.channel = channel;
	cmd.u.create_cq.cqe = cqe;
	cmd.u.create_cq.comp_vector = vec;
	cmd.u.create_cq.flags = flags;
	return cmd;
}

/* CREATE_CQ; on success checks the ring memfd that comes with it. */
static int create_cq(int s, uint32_t cqe, uint32_t vec, uint32_t flags,
		     uint64_t channel, int fd_in, uint64_t *h)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	struct stat st;
	int ret, fd;

	cmd = create_cq_cmd(cqe, vec, flags, channel);
	ret = xfer_fd(s, &cmd, fd_in, &rsp, &fd);
	if (ret)
		return ret;
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	/* the ring lies in one of the client's pools of rings */
	assert_true(rsp.u.cq.ring_offset % 4096 == 0);
	assert_true((uint64_t)st.st_size >= rsp.u.cq.ring_offset +
		    rsp.u.cq.ring_bytes);
	assert_true(rsp.u.cq.cqe >= cqe);
	assert_true(rsp.u.cq.ring_entries > rsp.u.cq.cqe);
	close(fd);
	if (h)
		*h = rsp.u.cq.handle;
	return 0;
}

static int resize_cq(int s, uint64_t cq, uint32_t cqe)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_RESIZE_CQ);
	cmd.u.resize_cq.cq = cq;
	cmd.u.resize_cq.cqe = cqe;
	return xfer(s, &cmd, &rsp);
}

static int notify_cq(int s, uint64_t cq, uint32_t arm_sn)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_NOTIFY_CQ);
	cmd.u.notify_cq.cq = cq;
	cmd.u.notify_cq.arm_sn = arm_sn;
	return xfer(s, &cmd, &rsp);
}

/* CREATE_CHANNEL / OPEN_CONTEXT with fd attached (fd < 0: none). */
static int cmd_with_fd(int s, unsigned int op, int fd, uint64_t *h)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, op);
	ret = xfer_fd(s, &cmd, fd, &rsp, NULL);
	if (!ret && h)
		*h = rsp.u.obj.handle;
	return ret;
}

/* A fresh seqpacket pair's end for the daemon: the caller keeps *mine. */
static int event_pair(int *mine)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				    sv), 0);
	*mine = sv[0];
	return sv[1];
}

/* CREATE_CHANNEL with a fresh pair's end; the daemon keeps its copy. */
static int create_channel(int s, uint64_t *h)
{
	int mine, fd = event_pair(&mine), ret;

	ret = cmd_with_fd(s, SV_CMD_CREATE_CHANNEL, fd, h);
	close(fd);
	close(mine);
	return ret;
}

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Wait (bounded) until the daemon counts n clients, as seen by the keeper. */
static void wait_clients(uint32_t n)
{
	struct sv_rsp_stat st;
	double end = now_s() + 5;

	for (;;) {
		stat_get(g.keeper, &st);
		if (st.nclients == n)
			return;
		if (now_s() > end)
			fail_msg("daemon has %u clients, expected %u",
				 st.nclients, n);
		sleep_ms(10);
	}
}

static bool daemon_alive(void)
{
	int st;

	return g.pid > 0 && waitpid(g.pid, &st, WNOHANG) == 0;
}

/* Only the keeper connected, nothing leaked: the state every test ends in. */
static void check_clean(void)
{
	struct sv_rsp_stat st;
	int i, n;

	assert_true(daemon_alive());
	wait_clients(1);
	stat_get(g.keeper, &st);
	for (i = 0; i < SV_OBJ_TYPE_MAX; i++)
		if (st.total[i])
			fail_msg("%u objects of type %d left", st.total[i], i);
	assert_int_equal(st.keys_live, 0);
	n = count_fds(g.pid);
	if (n != g.base_fds)
		fail_msg("daemon descriptors: %d, %d before the test", n,
			 g.base_fds);
}

/* ---- group fixtures: our own daemon ---- */

static int daemon_setup(void **state)
{
	const char *bin = getenv("SOFTVERBSD");
	const char *sock = getenv("SOFTVERBS_SOCKET");
	const char *dir = getenv("SV_TEST_DIR");
	char log[PATH_MAX] = "";
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	double end;
	int st, s = -1, fd;

	(void)state;
	if (!bin || !sock || strlen(sock) >= sizeof(g.sock_path)) {
		fprintf(stderr, "SOFTVERBSD and SOFTVERBS_SOCKET must be set "
			"(run through tests/e2e/isolated.sh)\n");
		goto fail;
	}
	snprintf(g.sock_path, sizeof(g.sock_path), "%s", sock);
	if (dir)
		snprintf(log, sizeof(log), "%s/softverbsd.log", dir);
	g.pid = fork();
	if (g.pid < 0) {
		perror("fork");
		goto fail;
	}
	if (g.pid == 0) {
		if (log[0])
			execl(bin, bin, "--socket", sock, "--idle-exit", "1",
			      "--log", log, (char *)NULL);
		else
			execl(bin, bin, "--socket", sock, "--idle-exit", "1",
			      (char *)NULL);
		_exit(127);
	}
	/* the first connection that gets through is the keeper */
	for (end = now_s() + 5; s < 0; sleep_ms(20)) {
		if (waitpid(g.pid, &st, WNOHANG) == g.pid) {
			fprintf(stderr, "softverbsd exited early (%#x)\n", st);
			g.pid = -1;
			goto fail;
		}
		s = conn_try();
		if (s < 0 && now_s() > end) {
			fprintf(stderr, "softverbsd: no socket after 5 s\n");
			goto fail;
		}
	}
	g.keeper = s;
	sv_cmd_init(&cmd, SV_CMD_HELLO);
	cmd.u.hello.abi = SV_PROTO_VERSION;
	cmd.hdr.seq = seq_next++;
	if (sv_send_msg(s, &cmd, sizeof(cmd), -1, 0) || !readable(s, 5000) ||
	    sv_recv_msg(s, &rsp, sizeof(rsp), &fd, 0) !=
		    (ssize_t)sizeof(rsp) ||
	    rsp.hdr.status || rsp.u.hello.daemon_pid != (uint32_t)g.pid) {
		fprintf(stderr, "softverbsd: no HELLO from pid %d\n",
			(int)g.pid);
		goto fail;
	}
	/* The guard table of our uid (OPEN_DIRECT's part GUARDS) is the
	 * daemon's from the first such command to its end: made now, so that
	 * a test (test_fuzz) whose command makes it does not count it as a
	 * descriptor left behind; then a command, after which the daemon has
	 * closed its copy of the fd it handed out */
	sv_cmd_init(&cmd, SV_CMD_OPEN_DIRECT);
	cmd.u.open_direct.part = SV_DIRECT_PART_GUARDS;
	cmd.hdr.seq = seq_next++;
	if (sv_send_msg(s, &cmd, sizeof(cmd), -1, 0) || !readable(s, 5000) ||
	    sv_recv_msg(s, &rsp, sizeof(rsp), &fd, 0) !=
		    (ssize_t)sizeof(rsp) || rsp.hdr.status || fd < 0) {
		fprintf(stderr, "softverbsd: no guard table\n");
		goto fail;
	}
	close(fd);
	sv_cmd_init(&cmd, SV_CMD_QUERY_DEVICE);
	cmd.hdr.seq = seq_next++;
	if (sv_send_msg(s, &cmd, sizeof(cmd), -1, 0) || !readable(s, 5000) ||
	    sv_recv_msg(s, &rsp, sizeof(rsp), &fd, 0) !=
		    (ssize_t)sizeof(rsp) || rsp.hdr.status) {
		fprintf(stderr, "softverbsd: no QUERY_DEVICE\n");
		goto fail;
	}
	g.base_fds = count_fds(g.pid);
	if (g.base_fds <= 0) {
		fprintf(stderr, "cannot count the daemon's descriptors\n");
		goto fail;
	}
	return 0;

fail:
	g.failed = true;
	if (g.keeper >= 0)
		close(g.keeper);
	g.keeper = -1;
	if (g.pid > 0) {
		kill(g.pid, SIGTERM);
		waitpid(g.pid, NULL, 0);
		g.pid = -1;
	}
	return -1;
}

static int daemon_teardown(void **state)
{
	double end;
	int st = 0;
	pid_t r;

	(void)state;
	if (g.flooder > 0) {
		kill(g.flooder, SIGKILL);
		waitpid(g.flooder, NULL, 0);
	}
	if (g.pid <= 0)
		return -1;
	if (!daemon_alive()) {
		fprintf(stderr, "softverbsd died during the tests\n");
		g.failed = true;
		return -1;
	}
	/* last connection gone: it leaves by itself after 1 s */
	close(g.keeper);
	g.keeper = -1;
	for (end = now_s() + 10;; sleep_ms(20)) {
		r = waitpid(g.pid, &st, WNOHANG);
		if (r == g.pid)
			break;
		if (now_s() > end) {
			fprintf(stderr, "softverbsd still running 10 s after "
				"its last client left\n");
			kill(g.pid, SIGTERM);
			waitpid(g.pid, &st, 0);
			g.failed = true;
			return -1;
		}
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "softverbsd ended with status %#x\n", st);
		g.failed = true;
		return -1;
	}
	return 0;
}

/* Every test starts with the keeper alone and takes the daemon's descriptor
 * count then as its baseline. */
static int test_setup(void **state)
{
	(void)state;
	wait_clients(1);
	g.base_fds = count_fds(g.pid);
	return 0;
}

static int fd_limit_restore(void **state);

static int test_teardown(void **state)
{
	while (nconns)
		conn_close(conns[0]);
	if (g.flooder > 0) {
		kill(g.flooder, SIGKILL);
		waitpid(g.flooder, NULL, 0);
		g.flooder = -1;
	}
	return fd_limit_restore(state);
}

/* Handles that name nothing on any connection the tests use: index 0, type
 * none or unknown, index beyond the table, generation 0 (never issued) or one
 * no slot reaches in a test's lifetime. */
static const uint64_t garbage_handles[] = {
	0, 1, ~0ull, 0xffffffffull, 0x100000000ull, 0x0000000100ffffffull,
	0xdeadbeefcafef00dull, 0x8000000000000000ull,
	(1ull << 32) | ((uint64_t)SV_OBJ_PD << 24) | 0xffffff,
	(1ull << 32) | ((uint64_t)SV_OBJ_PD << 24) | 0x1000,
	(0ull << 32) | ((uint64_t)SV_OBJ_PD << 24) | 1,
	(0ull << 32) | ((uint64_t)SV_OBJ_CQ << 24) | 2,
	(0x7fffffffull << 32) | ((uint64_t)SV_OBJ_PD << 24) | 1,
	(0x7fffffffull << 32) | ((uint64_t)SV_OBJ_MR << 24) | 1,
	(0x7fffffffull << 32) | ((uint64_t)SV_OBJ_CQ << 24) | 1,
	(0x7fffffffull << 32) | ((uint64_t)SV_OBJ_CHANNEL << 24) | 1,
	(1ull << 32) | ((uint64_t)SV_OBJ_QP << 24) | 1,
	(1ull << 32) | (0xffull << 24) | 1,
};
#define N_GARBAGE (sizeof(garbage_handles) / sizeof(garbage_handles[0]))

/* ---- one field made bad: the cases of one shape, as table rows ---- */

/*
 * Most refusals are of one shape: a command the daemon would take, with one
 * field made bad, must get one errno and no descriptor, and leave the daemon
 * up; the test's check_clean() then finds nothing leaked. Each such case is
 * a row: the command (by its op: the test builds the good one), the field,
 * the bad value (a number, or each of garbage_handles[] in turn) and the
 * status. run_bad() sends every row to one connection, in order.
 */
enum bad_kind {
	BAD_VALUE,		/* value */
	BAD_GARBAGE,		/* each of garbage_handles[] */
	BAD_GARBAGE_NZ,		/* each but 0, where 0 means "none" */
};

struct bad_row {
	const char *field;	/* "create_qp.cap.max_send_wr" */
	unsigned int op;	/* SV_CMD_*: the good command's */
	size_t off, size;	/* the field within struct sv_cmd */
	enum bad_kind kind;
	uint64_t value;
	int status;		/* what the daemon answers: < 0 */
};

#define BAD_FIELD(OP, m, f)                                                   \
	#m "." #f, SV_CMD_##OP, offsetof(struct sv_cmd, u.m.f),                \
		sizeof(((struct sv_cmd *)0)->u.m.f)
/* OP's field m.f set to v: status st */
#define BAD(OP, m, f, v, st) { BAD_FIELD(OP, m, f), BAD_VALUE, (v), (st) }
/* OP's field m.f set to each garbage handle (but 0: GARBAGE_NZ): st */
#define GARBAGE(OP, m, f, st) { BAD_FIELD(OP, m, f), BAD_GARBAGE, 0, (st) }
#define GARBAGE_NZ(OP, m, f, st)                                              \
	{ BAD_FIELD(OP, m, f), BAD_GARBAGE_NZ, 0, (st) }
#define NROWS(rows) (sizeof(rows) / sizeof((rows)[0]))

static void set_field(struct sv_cmd *cmd, const struct bad_row *r,
		      uint64_t v)
{
	char *p = (char *)cmd + r->off;
	uint8_t v8 = (uint8_t)v;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;

	switch (r->size) {
	case 1: memcpy(p, &v8, 1); break;
	case 2: memcpy(p, &v16, 2); break;
	case 4: memcpy(p, &v32, 4); break;
	case 8: memcpy(p, &v, 8); break;
	default: fail_msg("%s: a field of %zu bytes", r->field, r->size);
	}
}

/* Each row of rows, on good with its field made bad, on connection s. */
static void run_bad(int s, const struct sv_cmd *good,
		    const struct bad_row *rows, size_t n)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	size_t i, k, nv;
	uint64_t v;
	int got;

	for (i = 0; i < n; i++) {
		const struct bad_row *r = &rows[i];

		assert_int_equal(r->op, good->hdr.op);
		assert_true(r->status < 0);
		assert_true(r->off + r->size <= sizeof(cmd));
		nv = r->kind == BAD_VALUE ? 1 : N_GARBAGE;
		for (k = 0; k < nv; k++) {
			v = r->kind == BAD_VALUE ? r->value : garbage_handles[k];
			if (r->kind == BAD_GARBAGE_NZ && !v)
				continue;
			cmd = *good;
			set_field(&cmd, r, v);
			got = xfer(s, &cmd, &rsp);
			if (got != r->status)
				fail_msg("%s %s = %#" PRIx64 ": status %d (%s), "
					 "expected %d (%s)",
					 sv_cmd_name(r->op), r->field, v, got,
					 strerror(-got), r->status,
					 strerror(-r->status));
			if (!daemon_alive())
				fail_msg("%s %s = %#" PRIx64 ": the daemon died",
					 sv_cmd_name(r->op), r->field, v);
		}
	}
}

/* The good commands the rows start from. */
static struct sv_cmd good_cmd(unsigned int op)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, op);
	return cmd;
}

static struct sv_cmd good_handle(unsigned int op, uint64_t h)
{
	struct sv_cmd cmd = good_cmd(op);

	cmd.u.handle.handle = h;
	return cmd;
}

/* ---- the header and the framing ---- */

/* Every length from 1 to sizeof(cmd) - 1: -EINVAL, and the connection stays
 * usable. Below 16 bytes the header cannot be read: op and seq are 0. */
static void test_truncated(void **state)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	size_t len;
	ssize_t n;
	int s = conn_open(), fd;

	(void)state;
	for (len = 1; len < sizeof(cmd); len++) {
		sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
		cmd.hdr.seq = seq_next++;
		assert_int_equal(sv_send_msg(s, &cmd, len, -1, 0), 0);
		n = recv_rsp(s, &rsp, &fd);
		assert_int_equal(n, sizeof(rsp));
		assert_int_equal(fd, -1);
		if (len >= sizeof(cmd.hdr))
			check_rsp_hdr(&rsp, SV_CMD_ALLOC_PD, cmd.hdr.seq);
		else
			check_rsp_hdr(&rsp, 0, 0);
		assert_status(rsp.hdr.status, -EINVAL);
	}
	assert_status(hello(s, SV_PROTO_VERSION, 0, NULL), 0);
	conn_close(s);
	check_clean();
}

/* Longer than a command: -EINVAL with op and seq echoed; the excess is
 * discarded, not taken for the next command. */
static void test_oversized(void **state)
{
	static const size_t lens[] = { SV_CMD_SIZE + 1, SV_CMD_SIZE + 100,
				       4096, 65536 };
	struct sv_rsp rsp;
	struct sv_cmd *cmd;
	unsigned int i;
	ssize_t n;
	int s = conn_open(), fd;

	(void)state;
	cmd = calloc(1, 65536);
	assert_non_null(cmd);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		/* a valid ALLOC_PD, twice: neither may be executed */
		sv_cmd_init(cmd, SV_CMD_ALLOC_PD);
		cmd->hdr.seq = seq_next++;
		memcpy((char *)cmd + SV_CMD_SIZE, cmd, SV_CMD_SIZE);
		assert_int_equal(sv_send_msg(s, cmd, lens[i], -1, 0), 0);
		n = recv_rsp(s, &rsp, &fd);
		assert_int_equal(n, sizeof(rsp));
		assert_int_equal(fd, -1);
		check_rsp_hdr(&rsp, SV_CMD_ALLOC_PD, cmd->hdr.seq);
		assert_status(rsp.hdr.status, -EINVAL);
	}
	free(cmd);
	assert_status(hello(s, SV_PROTO_VERSION, 0, NULL), 0);
	assert_false(readable(s, 0)); /* nothing else came */
	conn_close(s);
	check_clean();
}

/*
 * A zero-length SEQPACKET message reads as 0 bytes, the same as EOF, so the
 * daemon cannot tell it from a hang-up. What is asserted: the daemon either
 * answers -EINVAL or closes that connection (today: closes it); either way it
 * stays up, serves everybody else, and does not keep a descriptor that came
 * with the empty message.
 */
static int zero_length(int fd_in)
{
	struct sv_rsp rsp;
	ssize_t n;
	int s = conn_open(), fd;

	assert_int_equal(sv_send_msg(s, "", 0, fd_in, 0), 0);
	n = recv_rsp(s, &rsp, &fd);
	if (n > 0) {
		assert_int_equal(n, sizeof(rsp));
		check_rsp_hdr(&rsp, 0, 0);
		assert_status(rsp.hdr.status, -EINVAL);
		assert_int_equal(fd, -1);
	} else {
		assert_int_equal(n, 0); /* EOF: dropped */
	}
	conn_close(s);
	return (int)n;
}

static void test_zero_length(void **state)
{
	int p[2], i, before, after, dropped = 0;

	(void)state;
	zero_length(-1);
	assert_status(hello(g.keeper, SV_PROTO_VERSION, 0, NULL), 0);

	/* with a descriptor attached, 200 times */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	before = count_fds(g.pid);
	for (i = 0; i < 200; i++)
		dropped += zero_length(p[0]) == 0;
	wait_clients(1);
	after = count_fds(g.pid);
	close(p[0]);
	close(p[1]);
	print_message("zero-length message: %s\n",
		      dropped ? "connection closed" : "-EINVAL");
	if (after != before)
		fail_msg("daemon descriptors %d -> %d after 200 empty messages "
			 "with a pipe attached", before, after);
	check_clean();
}

static void bad_header(int s, uint32_t magic, uint16_t version, uint16_t op)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	ssize_t n;
	int fd;

	sv_cmd_init(&cmd, op);
	cmd.hdr.magic = magic;
	cmd.hdr.version = version;
	cmd.hdr.seq = seq_next++;
	cmd.u.hello.abi = SV_PROTO_VERSION;
	assert_int_equal(sv_send_msg(s, &cmd, sizeof(cmd), -1, 0), 0);
	n = recv_rsp(s, &rsp, &fd);
	assert_int_equal(n, sizeof(rsp));
	assert_int_equal(fd, -1);
	check_rsp_hdr(&rsp, op, cmd.hdr.seq);
	assert_status(rsp.hdr.status, -EINVAL);
}

static void test_bad_header(void **state)
{
	int s = conn_open();
	unsigned int op;

	(void)state;
	bad_header(s, 0, SV_PROTO_VERSION, SV_CMD_HELLO);
	bad_header(s, ~SV_PROTO_MAGIC, SV_PROTO_VERSION, SV_CMD_HELLO);
	bad_header(s, __builtin_bswap32(SV_PROTO_MAGIC), SV_PROTO_VERSION,
		   SV_CMD_HELLO);
	bad_header(s, SV_PROTO_MAGIC, 0, SV_CMD_HELLO);
	bad_header(s, SV_PROTO_MAGIC, SV_PROTO_VERSION - 1, SV_CMD_HELLO);
	bad_header(s, SV_PROTO_MAGIC, SV_PROTO_VERSION + 1, SV_CMD_HELLO);
	bad_header(s, SV_PROTO_MAGIC, 0xffff, SV_CMD_HELLO);
	bad_header(s, SV_PROTO_MAGIC, SV_PROTO_VERSION, 0);
	for (op = SV_CMD_MAX; op < SV_CMD_MAX + 16; op++)
		bad_header(s, SV_PROTO_MAGIC, SV_PROTO_VERSION, op);
	bad_header(s, SV_PROTO_MAGIC, SV_PROTO_VERSION, 0x100 | SV_CMD_HELLO);
	bad_header(s, SV_PROTO_MAGIC, SV_PROTO_VERSION, 0x8000);
	bad_header(s, SV_PROTO_MAGIC, SV_PROTO_VERSION, 0xffff);
	assert_status(hello(s, SV_PROTO_VERSION, 0, NULL), 0);
	conn_close(s);
	check_clean();
}

/* ---- every command with its fields out of range ---- */

static void test_hello(void **state)
{
	struct sv_rsp rsp;
	int s = conn_open();

	const struct bad_row rows[] = {
		BAD(HELLO, hello, abi, 0, -EPROTO),
		BAD(HELLO, hello, abi, SV_PROTO_VERSION - 1, -EPROTO),
		BAD(HELLO, hello, abi, SV_PROTO_VERSION + 1, -EPROTO),
		BAD(HELLO, hello, abi, ~0u, -EPROTO),
		BAD(HELLO, hello, flags, 2, -EINVAL),
		BAD(HELLO, hello, flags, 1u << 31, -EINVAL),
		BAD(HELLO, hello, flags, ~0u, -EINVAL),
	};
	struct sv_cmd good = good_cmd(SV_CMD_HELLO);

	(void)state;
	good.u.hello.abi = SV_PROTO_VERSION;
	run_bad(s, &good, rows, NROWS(rows));
	assert_status(hello(s, SV_PROTO_VERSION, 0, &rsp), 0);
	assert_int_equal(rsp.u.hello.abi, SV_PROTO_VERSION);
	assert_int_equal(rsp.u.hello.daemon_pid, (uint32_t)g.pid);
	assert_true(rsp.u.hello.client_id != 0);
	assert_true(rsp.u.hello.dev_name[0] != 0);
	assert_non_null(memchr(rsp.u.hello.dev_name, 0,
			       sizeof(rsp.u.hello.dev_name)));
	conn_close(s);
	check_clean();
}

static int query_port(int s, uint32_t port)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_QUERY_PORT);
	cmd.u.query_port.port_num = port;
	return xfer(s, &cmd, &rsp);
}

static int query_gid(int s, uint32_t port, uint32_t index)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_QUERY_GID);
	cmd.u.query_gid.port_num = port;
	cmd.u.query_gid.index = index;
	return xfer(s, &cmd, &rsp);
}

static void test_query(void **state)
{
	struct sv_rsp_stat st;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	uint32_t i;
	int s = conn_open();

	const struct bad_row port_rows[] = {
		BAD(QUERY_PORT, query_port, port_num, 0, -EINVAL),
		BAD(QUERY_PORT, query_port, port_num, 2, -EINVAL),
		BAD(QUERY_PORT, query_port, port_num, 256, -EINVAL),
		BAD(QUERY_PORT, query_port, port_num, ~0u, -EINVAL),
	}, gid_rows[] = {
		BAD(QUERY_GID, query_gid, port_num, 0, -EINVAL),
		BAD(QUERY_GID, query_gid, port_num, 2, -EINVAL),
		BAD(QUERY_GID, query_gid, port_num, ~0u, -EINVAL),
		BAD(QUERY_GID, query_gid, index, SV_GID_TBL_LEN, -EINVAL),
		BAD(QUERY_GID, query_gid, index, SV_GID_TBL_LEN + 1, -EINVAL),
		BAD(QUERY_GID, query_gid, index, 1u << 31, -EINVAL),
		BAD(QUERY_GID, query_gid, index, ~0u, -EINVAL),
	};
	struct sv_cmd good;

	(void)state;
	good = good_cmd(SV_CMD_QUERY_PORT);
	good.u.query_port.port_num = 1;
	run_bad(s, &good, port_rows, NROWS(port_rows));
	assert_status(query_port(s, 1), 0);

	good = good_cmd(SV_CMD_QUERY_GID);
	good.u.query_gid.port_num = 1;
	good.u.query_gid.index = 0;
	run_bad(s, &good, gid_rows, NROWS(gid_rows));
	for (i = 0; i < SV_GID_TBL_LEN; i++)
		assert_status(query_gid(s, 1, i), 0);

	/* payloads of commands that take none are ignored */
	sv_cmd_init(&cmd, SV_CMD_QUERY_DEVICE);
	memset(cmd.u.raw, 0xa5, sizeof(cmd.u.raw));
	assert_status(xfer(s, &cmd, &rsp), 0);
	assert_true(rsp.u.dev.max_cqe >= 1);

	/* STAT past the last client: an empty page */
	sv_cmd_init(&cmd, SV_CMD_STAT);
	cmd.u.stat.first = ~0u;
	assert_status(xfer(s, &cmd, &rsp), 0);
	assert_int_equal(rsp.u.stat.nlisted, 0);
	assert_int_equal(rsp.u.stat.nclients, 2);
	stat_get(s, &st);
	assert_int_equal(st.nlisted, 2);
	conn_close(s);
	check_clean();
}

static void test_reg_mr(void **state)
{
	/* (1 << 8 and 1 << 9 are FLUSH_GLOBAL and FLUSH_PERSISTENT: the
	 * first taken, the second refused, EOPNOTSUPP: below) */
	static const uint32_t bad_access[] = {
		1u << 10, 1u << 19, 1u << 21, 1u << 31, ~0u,
	};
	const uint32_t lw = IBV_ACCESS_LOCAL_WRITE;
	size_t len = 1 << 16;
	char *buf = malloc(len);
	uint64_t pd, other_pd, cq = 0, addr = (uintptr_t)buf;
	struct sv_rsp_mr mr;
	int s = conn_open();

	(void)state;
	assert_non_null(buf);
	memset(buf, 0, len);
	pd = alloc_pd(s);
	other_pd = alloc_pd(s);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, other_pd), 0);
	assert_status(create_cq(s, 1, 0, 0, 0, -1, &cq), 0);

	/* with local write: the pd garbage, the length 0, the access bad */
	const struct bad_row lw_rows[] = {
		GARBAGE(REG_MR, reg_mr, pd, -EINVAL),
		BAD(REG_MR, reg_mr, length, 0, -EINVAL),
		BAD(REG_MR, reg_mr, access, bad_access[0] | lw, -EINVAL),
		BAD(REG_MR, reg_mr, access, bad_access[1] | lw, -EINVAL),
		BAD(REG_MR, reg_mr, access, bad_access[2] | lw, -EINVAL),
		BAD(REG_MR, reg_mr, access, bad_access[3] | lw, -EINVAL),
		BAD(REG_MR, reg_mr, access, bad_access[4] | lw, -EINVAL),
		BAD(REG_MR, reg_mr, access, (1u << 9) | lw, -EOPNOTSUPP),
		/* remote write or atomic without local write */
		BAD(REG_MR, reg_mr, access, IBV_ACCESS_REMOTE_WRITE, -EINVAL),
		BAD(REG_MR, reg_mr, access, IBV_ACCESS_REMOTE_ATOMIC, -EINVAL),
		BAD(REG_MR, reg_mr, access, IBV_ACCESS_REMOTE_WRITE |
		    IBV_ACCESS_REMOTE_READ, -EINVAL),
	};
	/* no access: the pd another type or stale; the length above 2^47 */
	const struct bad_row rows[] = {
		BAD(REG_MR, reg_mr, pd, cq, -EINVAL),
		BAD(REG_MR, reg_mr, pd, other_pd, -EINVAL),
		BAD(REG_MR, reg_mr, length, SV_TEST_MAX_MR_SIZE + 1, -EINVAL),
		BAD(REG_MR, reg_mr, length, ~0ull, -EINVAL),
		/* 2^47 itself passes the size check, then is not mapped */
		BAD(REG_MR, reg_mr, length, SV_TEST_MAX_MR_SIZE, -EFAULT),
	};
	struct sv_cmd good = reg_mr_cmd(pd, addr, len, lw);

	run_bad(s, &good, lw_rows, NROWS(lw_rows));
	good = reg_mr_cmd(pd, addr, len, 0);
	run_bad(s, &good, rows, NROWS(rows));

	/* the address and the length together */
	assert_status(reg_mr(s, pd, 0x1000, 0, 0, NULL), -EINVAL);
	assert_status(reg_mr(s, pd, 0, 1ull << 63, 0, NULL), -EINVAL);

	/* ranges that wrap */
	assert_status(reg_mr(s, pd, ~0ull, 2, 0, NULL), -EINVAL);
	assert_status(reg_mr(s, pd, ~0ull - 4095, 8192, 0, NULL), -EINVAL);
	assert_status(reg_mr(s, pd, -4096ull, 4096 * 2, 0, NULL), -EINVAL);
	assert_status(reg_mr(s, pd, 0xffff800000000000ull,
			     SV_TEST_MAX_MR_SIZE, 0, NULL), -EINVAL);

	/* not mapped */
	assert_status(reg_mr(s, pd, 0x1000, 4096, 0, NULL), -EFAULT);
	assert_status(reg_mr(s, pd, 0, 1, 0, NULL), -EFAULT);
	assert_status(reg_mr(s, pd, 1ull << 47, 4096, 0, NULL), -EFAULT);
	assert_status(reg_mr(s, pd, -8192ull, 4096, 0, NULL), -EFAULT);

	/* and the same buffer, right: it works */
	assert_status(reg_mr(s, pd, addr, len, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC, &mr), 0);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr.handle), 0);

	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), 0);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), 0);
	conn_close(s);
	free(buf);
	check_clean();
}

/* Mappings of the test process with too few rights, and a hole. */
static void test_reg_mr_mapping(void **state)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *ro, *none, *holed;
	struct sv_rsp_mr mr;
	uint64_t pd;
	int s = conn_open();

	(void)state;
	ro = mmap(NULL, (size_t)pg * 3, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
		  -1, 0);
	none = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	holed = mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(ro != MAP_FAILED && none != MAP_FAILED &&
		    holed != MAP_FAILED);
	/* two readable pages, then one that is not */
	assert_int_equal(mprotect(ro + 2 * pg, (size_t)pg, PROT_NONE), 0);
	assert_int_equal(munmap(holed + pg, (size_t)pg), 0);
	pd = alloc_pd(s);

	/* read-only: any write right is refused, reading is fine */
	assert_status(reg_mr(s, pd, (uintptr_t)ro, (uint64_t)pg * 2,
			     IBV_ACCESS_LOCAL_WRITE, NULL), -EFAULT);
	assert_status(reg_mr(s, pd, (uintptr_t)ro + 1, 1,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
			     NULL), -EFAULT);
	assert_status(reg_mr(s, pd, (uintptr_t)ro, (uint64_t)pg,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
			     NULL), -EFAULT);
	assert_status(reg_mr(s, pd, (uintptr_t)ro, (uint64_t)pg * 2,
			     IBV_ACCESS_REMOTE_READ, &mr), 0);
	/* ... and rereg cannot add a write right to it */
	assert_status(rereg_mr(s, mr.handle, IBV_REREG_MR_CHANGE_ACCESS, 0, 0,
			       0, IBV_ACCESS_LOCAL_WRITE, NULL), -EFAULT);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr.handle), 0);
	/* one byte into the page after */
	assert_status(reg_mr(s, pd, (uintptr_t)ro, (uint64_t)pg * 2 + 1, 0,
			     NULL), -EFAULT);

	/* no rights at all */
	assert_status(reg_mr(s, pd, (uintptr_t)none, (uint64_t)pg, 0, NULL),
		      -EFAULT);
	assert_status(reg_mr(s, pd, (uintptr_t)none + 100, 1, 0, NULL),
		      -EFAULT);

	/* a hole in the middle */
	assert_status(reg_mr(s, pd, (uintptr_t)holed, (uint64_t)pg * 3,
			     IBV_ACCESS_LOCAL_WRITE, NULL), -EFAULT);
	assert_status(reg_mr(s, pd, (uintptr_t)holed + pg - 1, 2, 0, NULL),
		      -EFAULT);
	assert_status(reg_mr(s, pd, (uintptr_t)holed + pg, (uint64_t)pg, 0,
			     NULL), -EFAULT);
	assert_status(reg_mr(s, pd, (uintptr_t)holed, (uint64_t)pg,
			     IBV_ACCESS_LOCAL_WRITE, &mr), 0);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr.handle), 0);

	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), 0);
	conn_close(s);
	munmap(ro, (size_t)pg * 3);
	munmap(none, (size_t)pg);
	munmap(holed, (size_t)pg);
	munmap(holed + 2 * pg, (size_t)pg);
	check_clean();
}

static void test_rereg_mr(void **state)
{
	const uint32_t lw = IBV_ACCESS_LOCAL_WRITE;
	size_t len = 1 << 14;
	char *buf = malloc(len);
	uint64_t pd, pd2, stale_pd, cq = 0, addr = (uintptr_t)buf;
	struct sv_rsp_mr mr, mr2, out;
	int s = conn_open();

	(void)state;
	assert_non_null(buf);
	pd = alloc_pd(s);
	pd2 = alloc_pd(s);
	stale_pd = alloc_pd(s);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, stale_pd), 0);
	assert_status(create_cq(s, 4, 0, 0, 0, -1, &cq), 0);
	assert_status(reg_mr(s, pd, addr, len, lw, &mr), 0);

	/* flags, with nothing else set */
	const struct bad_row flag_rows[] = {
		BAD(REREG_MR, rereg_mr, flags, 0, -EINVAL),
		BAD(REREG_MR, rereg_mr, flags, 1u << 3, -EINVAL),
	};
	/* CHANGE_ACCESS to lw: the flags, the mr, the access */
	const struct bad_row access_rows[] = {
		BAD(REREG_MR, rereg_mr, flags,
		    IBV_REREG_MR_CHANGE_ACCESS | (1u << 31), -EINVAL),
		GARBAGE(REREG_MR, rereg_mr, mr, -EINVAL),
		BAD(REREG_MR, rereg_mr, mr, pd, -EINVAL),
		BAD(REREG_MR, rereg_mr, mr, cq, -EINVAL),
		BAD(REREG_MR, rereg_mr, access, lw | (1u << 10), -EINVAL),
		BAD(REREG_MR, rereg_mr, access, IBV_ACCESS_REMOTE_WRITE,
		    -EINVAL),
	};
	/* CHANGE_PD to a pd that is not one */
	const struct bad_row pd_rows[] = {
		GARBAGE(REREG_MR, rereg_mr, pd, -EINVAL),
		BAD(REREG_MR, rereg_mr, pd, stale_pd, -EINVAL),
		BAD(REREG_MR, rereg_mr, pd, cq, -EINVAL),
		BAD(REREG_MR, rereg_mr, pd, mr.handle, -EINVAL),
	};
	/* CHANGE_TRANSLATION to addr: lengths above 2^47 or 0 */
	const struct bad_row len_rows[] = {
		BAD(REREG_MR, rereg_mr, length, SV_TEST_MAX_MR_SIZE + 1,
		    -EINVAL),
		BAD(REREG_MR, rereg_mr, length, 0, -EINVAL),
	};
	struct sv_cmd good;

	good = rereg_mr_cmd(mr.handle, 0, 0, 0, 0, 0);
	run_bad(s, &good, flag_rows, NROWS(flag_rows));
	assert_status(rereg_mr(s, mr.handle, ~0u, pd, addr, len, lw, NULL),
		      -EINVAL);
	good = rereg_mr_cmd(mr.handle, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, lw);
	run_bad(s, &good, access_rows, NROWS(access_rows));
	good = rereg_mr_cmd(mr.handle, IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0);
	run_bad(s, &good, pd_rows, NROWS(pd_rows));
	good = rereg_mr_cmd(mr.handle, IBV_REREG_MR_CHANGE_TRANSLATION, 0, addr,
			    len, 0);
	run_bad(s, &good, len_rows, NROWS(len_rows));

	/* CHANGE_TRANSLATION: the address and the length together */
	assert_status(rereg_mr(s, mr.handle, IBV_REREG_MR_CHANGE_TRANSLATION,
			       0, 0x1000, 4096, 0, NULL), -EFAULT);
	assert_status(rereg_mr(s, mr.handle, IBV_REREG_MR_CHANGE_TRANSLATION,
			       0, ~0ull - 10, 100, 0, NULL), -EINVAL);
	/* a change refused on one count changes nothing on the others */
	assert_status(rereg_mr(s, mr.handle, IBV_REREG_MR_CHANGE_PD |
			       IBV_REREG_MR_CHANGE_TRANSLATION, pd2, 0x1000,
			       4096, 0, NULL), -EFAULT);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd2), 0);
	pd2 = alloc_pd(s);

	/* the MR survived all of it: a real rereg works and moves the pd */
	assert_status(rereg_mr(s, mr.handle, IBV_REREG_MR_CHANGE_PD |
			       IBV_REREG_MR_CHANGE_ACCESS, pd2, 0, 0,
			       lw | IBV_ACCESS_REMOTE_READ, &out), 0);
	assert_true(out.handle == mr.handle);
	/* the keys stay (posted work requests keep working) */
	assert_int_equal(out.lkey, mr.lkey);
	assert_int_equal(out.rkey, mr.rkey);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd2), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), 0);

	/* DEALLOC_PD with an MR on it */
	assert_status(reg_mr(s, pd2, addr, len, 0, &mr2), 0);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr.handle), 0);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd2), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr2.handle), 0);
	assert_status(rereg_mr(s, mr2.handle, IBV_REREG_MR_CHANGE_ACCESS, 0, 0,
			       0, 0, NULL), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd2), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), 0);
	conn_close(s);
	free(buf);
	check_clean();
}

/* Destroy commands with garbage handles, handles of another type, and stale
 * handles (destroyed once already, also after the slot was reused). */
static void test_destroy(void **state)
{
	static const unsigned int ops[] = {
		SV_CMD_DEALLOC_PD, SV_CMD_DEREG_MR, SV_CMD_DESTROY_CQ,
		SV_CMD_DESTROY_CHANNEL,
	};
	uint64_t pd, pd_new, cq = 0, ch = 0, h[4];
	struct sv_rsp_mr mr;
	char buf[64];
	unsigned int i, j;
	int s = conn_open();

	(void)state;
	for (i = 0; i < 4; i++) {
		const struct bad_row rows[] = {
			{ "handle.handle", ops[i],
			  offsetof(struct sv_cmd, u.handle.handle),
			  sizeof(uint64_t), BAD_GARBAGE, 0, -EINVAL },
		};
		struct sv_cmd good = good_handle(ops[i], 0);

		run_bad(s, &good, rows, NROWS(rows));
	}

	pd = alloc_pd(s);
	assert_status(reg_mr(s, pd, (uintptr_t)buf, sizeof(buf), 0, &mr), 0);
	assert_status(create_cq(s, 8, 0, 0, 0, -1, &cq), 0);
	assert_status(create_channel(s, &ch), 0);
	h[0] = pd;
	h[1] = mr.handle;
	h[2] = cq;
	h[3] = ch;
	/* every live handle with every other type's destroy */
	for (i = 0; i < 4; i++)
		for (j = 0; j < 4; j++)
			if (i != j)
				assert_status(cmd_handle(s, ops[i], h[j]),
					      -EINVAL);
	/* busy */
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr.handle), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), 0);
	assert_status(create_cq(s, 8, 0, 0, ch, -1, &cq), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CHANNEL, ch), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), 0);
	/* each destroyed, then again */
	for (i = 0; i < 4; i++) {
		if (i != 1 && i != 2)
			assert_status(cmd_handle(s, ops[i], h[i]), 0);
		assert_status(cmd_handle(s, ops[i], h[i]), -EINVAL);
	}
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), -EINVAL);
	/* the stale pd handle does not name the pd now in its slot */
	pd_new = alloc_pd(s);
	assert_true(pd_new != pd);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), -EINVAL);
	assert_status(reg_mr(s, pd, (uintptr_t)buf, sizeof(buf), 0, NULL),
		      -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd_new), 0);
	conn_close(s);
	check_clean();
}

static void test_cq(void **state)
{
	uint64_t cq = 0, ch = 0, stale_ch = 0, pd;
	int s = conn_open(), p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pd = alloc_pd(s);
	assert_status(create_channel(s, &ch), 0);
	assert_status(create_channel(s, &stale_ch), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CHANNEL, stale_ch), 0);

	const struct bad_row create_rows[] = {
		BAD(CREATE_CQ, create_cq, cqe, 0, -EINVAL),
		BAD(CREATE_CQ, create_cq, cqe, SV_TEST_MAX_CQE + 1, -EINVAL),
		BAD(CREATE_CQ, create_cq, cqe, 1u << 31, -EINVAL),
		BAD(CREATE_CQ, create_cq, cqe, ~0u, -EINVAL),
		BAD(CREATE_CQ, create_cq, comp_vector, 1, -EINVAL),
		BAD(CREATE_CQ, create_cq, comp_vector, ~0u, -EINVAL),
		BAD(CREATE_CQ, create_cq, flags, 4, -EINVAL),
		BAD(CREATE_CQ, create_cq, flags, 1u << 31, -EINVAL),
		BAD(CREATE_CQ, create_cq, flags, ~0u, -EINVAL),
		GARBAGE_NZ(CREATE_CQ, create_cq, channel, -EINVAL),
		BAD(CREATE_CQ, create_cq, channel, pd, -EINVAL),
		BAD(CREATE_CQ, create_cq, channel, stale_ch, -EINVAL),
	};
	struct sv_cmd good = create_cq_cmd(1, 0, 0, 0);

	run_bad(s, &good, create_rows, NROWS(create_rows));
	/* a descriptor where none is taken */
	assert_status(create_cq(s, 1, 0, 0, 0, p[0], NULL), -EINVAL);

	/* the limits themselves are fine */
	assert_status(create_cq(s, SV_TEST_MAX_CQE, 0, 0, ch, -1, &cq), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), 0);
	assert_status(create_cq(s, 1, 0, 3, ch, -1, &cq), 0);

	/* RESIZE_CQ */
	const struct bad_row resize_rows[] = {
		GARBAGE(RESIZE_CQ, resize_cq, cq, -EINVAL),
		BAD(RESIZE_CQ, resize_cq, cq, pd, -EINVAL),
		BAD(RESIZE_CQ, resize_cq, cq, ch, -EINVAL),
		BAD(RESIZE_CQ, resize_cq, cqe, 0, -EINVAL),
		BAD(RESIZE_CQ, resize_cq, cqe, SV_TEST_MAX_CQE + 1, -EINVAL),
		BAD(RESIZE_CQ, resize_cq, cqe, ~0u, -EINVAL),
	};

	good = good_cmd(SV_CMD_RESIZE_CQ);
	good.u.resize_cq.cq = cq;
	good.u.resize_cq.cqe = 16;
	run_bad(s, &good, resize_rows, NROWS(resize_rows));
	assert_status(resize_cq(s, cq, 100), 0);
	assert_status(resize_cq(s, cq, 1), 0);

	/* NOTIFY_CQ: a CQ of this client, any arm number (an arm that is not
	 * the latest, or a CQ with nothing in it or no channel, is no error) */
	const struct bad_row notify_rows[] = {
		GARBAGE(NOTIFY_CQ, notify_cq, cq, -EINVAL),
		BAD(NOTIFY_CQ, notify_cq, cq, pd, -EINVAL),
		BAD(NOTIFY_CQ, notify_cq, cq, ch, -EINVAL),
		BAD(NOTIFY_CQ, notify_cq, flags, SV_NOTIFY_SOLICITED << 1,
		    -EINVAL),
		BAD(NOTIFY_CQ, notify_cq, flags, ~0u, -EINVAL),
	};

	good = good_cmd(SV_CMD_NOTIFY_CQ);
	good.u.notify_cq.cq = cq;
	good.u.notify_cq.arm_sn = 1;
	run_bad(s, &good, notify_rows, NROWS(notify_rows));
	assert_status(notify_cq(s, cq, 0), 0);
	assert_status(notify_cq(s, cq, ~0u), 0);
	{
		uint64_t nch;

		assert_status(create_cq(s, 1, 0, 0, 0, -1, &nch), 0);
		assert_status(notify_cq(s, nch, 1), 0);
		assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, nch), 0);
		assert_status(notify_cq(s, nch, 1), -EINVAL);
	}
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), 0);
	assert_status(resize_cq(s, cq, 16), -EINVAL);
	assert_status(notify_cq(s, cq, 1), -EINVAL);

	assert_status(cmd_handle(s, SV_CMD_DESTROY_CHANNEL, ch), 0);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), 0);
	close(p[0]);
	close(p[1]);
	conn_close(s);
	check_clean();
}

/* CREATE_CHANNEL and OPEN_CONTEXT take a seqpacket socket and nothing else. */
static void fd_cmd_bad_fds(int s, unsigned int op)
{
	int p[2], sv[2], fd, ev;

	assert_status(cmd_with_fd(s, op, -1, NULL), -EINVAL);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_status(cmd_with_fd(s, op, p[0], NULL), -EINVAL);
	assert_status(cmd_with_fd(s, op, p[1], NULL), -EINVAL);
	close(p[0]);
	close(p[1]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    sv), 0);
	assert_status(cmd_with_fd(s, op, sv[0], NULL), -EINVAL);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0,
				    sv), 0);
	assert_status(cmd_with_fd(s, op, sv[0], NULL), -EINVAL);
	close(sv[0]);
	close(sv[1]);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_status(cmd_with_fd(s, op, fd, NULL), -EINVAL);
	close(fd);
	fd = memfd_create("not-a-socket", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_status(cmd_with_fd(s, op, fd, NULL), -EINVAL);
	close(fd);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		assert_status(cmd_with_fd(s, op, fd, NULL), -EINVAL);
		close(fd);
	}
	/* the refused ones did not leave a half-made object behind */
	fd = event_pair(&ev);
	assert_status(cmd_with_fd(s, op, fd, NULL), 0);
	close(fd);
	close(ev);
}

static void test_fd_commands(void **state)
{
	struct sv_rsp_stat st;
	int s = conn_open(), fd, ev;

	(void)state;
	fd_cmd_bad_fds(s, SV_CMD_CREATE_CHANNEL);
	fd_cmd_bad_fds(s, SV_CMD_OPEN_CONTEXT);
	/* a context is opened once per connection */
	fd = event_pair(&ev);
	assert_status(cmd_with_fd(s, SV_CMD_OPEN_CONTEXT, fd, NULL), -EBUSY);
	close(fd);
	close(ev);
	assert_status(cmd_with_fd(s, SV_CMD_OPEN_CONTEXT, -1, NULL), -EBUSY);
	stat_get(g.keeper, &st);
	assert_int_equal(st.total[SV_OBJ_CHANNEL], 1);
	conn_close(s);
	check_clean();
}

/* Send cmd with nfd copies of fd attached, in ncm SCM_RIGHTS messages. */
static void send_fds(int s, const struct sv_cmd *cmd, int fd, int nfd,
		     int ncm)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16) * 4];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)cmd, .iov_len = sizeof(*cmd) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = ctl.buf };
	struct cmsghdr *cm;
	int per = nfd / ncm, i, j;

	memset(&ctl, 0, sizeof(ctl));
	msg.msg_controllen = (size_t)ncm * CMSG_SPACE(sizeof(int) * per);
	assert_true(msg.msg_controllen <= sizeof(ctl.buf));
	for (cm = CMSG_FIRSTHDR(&msg), i = 0; i < ncm;
	     cm = CMSG_NXTHDR(&msg, cm), i++) {
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * per);
		for (j = 0; j < per; j++)
			memcpy(CMSG_DATA(cm) + j * sizeof(int), &fd,
			       sizeof(int));
	}
	assert_int_equal(sendmsg(s, &msg, MSG_NOSIGNAL), sizeof(*cmd));
}

/*
 * Descriptors sent with commands that take none, with refused commands and
 * several at once: every one is closed by the daemon. 200 rounds of each, and
 * the daemon's descriptor count is what it was.
 */
static void test_fd_leak(void **state)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int s = conn_open(), p[2], i, fd, before, after, pr;
	ssize_t n;

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pr = conn_open();
	assert_status(hello(pr, SV_PROTO_VERSION, SV_HELLO_PROBE, NULL), 0);
	before = count_fds(g.pid);
	for (i = 0; i < 200; i++) {
		/* a command that takes none */
		sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
		assert_status(xfer_fd(s, &cmd, p[0], &rsp, NULL), -EINVAL);
		sv_cmd_init(&cmd, SV_CMD_QUERY_DEVICE);
		assert_status(xfer_fd(s, &cmd, p[1], &rsp, NULL), -EINVAL);
		/* refused before the handler: bad header, short, long */
		sv_cmd_init(&cmd, 0);
		assert_status(xfer_fd(s, &cmd, p[0], &rsp, NULL), -EINVAL);
		sv_cmd_init(&cmd, SV_CMD_HELLO);
		cmd.hdr.seq = seq_next++;
		assert_int_equal(sv_send_msg(s, &cmd, 20, p[0], 0), 0);
		n = recv_rsp(s, &rsp, &fd);
		assert_int_equal(n, sizeof(rsp));
		assert_status(rsp.hdr.status, -EINVAL);
		/* refused by the handler */
		sv_cmd_init(&cmd, SV_CMD_CREATE_CHANNEL);
		assert_status(xfer_fd(s, &cmd, p[0], &rsp, NULL), -EINVAL);
		/* refused on a probe connection */
		sv_cmd_init(&cmd, SV_CMD_CREATE_CHANNEL);
		assert_status(xfer_fd(pr, &cmd, p[0], &rsp, NULL), -EPERM);
		/* several descriptors in one message, and in several cmsgs */
		sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
		cmd.hdr.seq = seq_next++;
		send_fds(s, &cmd, p[0], 8, 1);
		n = recv_rsp(s, &rsp, &fd);
		assert_int_equal(n, sizeof(rsp));
		check_rsp_hdr(&rsp, SV_CMD_ALLOC_PD, cmd.hdr.seq);
		assert_status(rsp.hdr.status, -EINVAL);
		sv_cmd_init(&cmd, SV_CMD_QUERY_PORT);
		cmd.hdr.seq = seq_next++;
		send_fds(s, &cmd, p[1], 6, 3);
		n = recv_rsp(s, &rsp, &fd);
		assert_int_equal(n, sizeof(rsp));
		check_rsp_hdr(&rsp, SV_CMD_QUERY_PORT, cmd.hdr.seq);
		assert_status(rsp.hdr.status, -EINVAL);
	}
	after = count_fds(g.pid);
	if (after != before)
		fail_msg("daemon descriptors %d -> %d", before, after);
	close(p[0]);
	close(p[1]);
	conn_close(pr);
	conn_close(s);
	check_clean();
}

/* ---- one client, another's objects ---- */

static void test_other_client(void **state)
{
	size_t len = 8192;
	char *buf = malloc(len);
	uint64_t pd, cq = 0, ch = 0, b_pd;
	struct sv_rsp_mr mr, out;
	int a = conn_open(), b = conn_open();

	(void)state;
	assert_non_null(buf);
	assert_status(hello(a, SV_PROTO_VERSION, 0, NULL), 0);
	assert_status(hello(b, SV_PROTO_VERSION, 0, NULL), 0);
	pd = alloc_pd(a);
	assert_status(reg_mr(a, pd, (uintptr_t)buf, len,
			     IBV_ACCESS_LOCAL_WRITE, &mr), 0);
	assert_status(create_cq(a, 16, 0, 0, 0, -1, &cq), 0);
	assert_status(create_channel(a, &ch), 0);

	/* b holds nothing: a's handles name nothing on b */
	assert_status(cmd_handle(b, SV_CMD_DEALLOC_PD, pd), -EINVAL);
	assert_status(cmd_handle(b, SV_CMD_DEREG_MR, mr.handle), -EINVAL);
	assert_status(cmd_handle(b, SV_CMD_DESTROY_CQ, cq), -EINVAL);
	assert_status(cmd_handle(b, SV_CMD_DESTROY_CHANNEL, ch), -EINVAL);
	assert_status(reg_mr(b, pd, (uintptr_t)buf, len, 0, NULL), -EINVAL);
	assert_status(rereg_mr(b, mr.handle, IBV_REREG_MR_CHANGE_ACCESS, 0, 0,
			       0, 0, NULL), -EINVAL);
	assert_status(resize_cq(b, cq, 32), -EINVAL);
	assert_status(create_cq(b, 16, 0, 0, ch, -1, NULL), -EINVAL);
	/* ... nor does a's pd as the target of b's rereg */
	b_pd = alloc_pd(b);
	assert_status(cmd_handle(b, SV_CMD_DEALLOC_PD, b_pd), 0);
	assert_status(reg_mr(b, pd, (uintptr_t)buf, len, 0, NULL), -EINVAL);

	/* a's objects work */
	assert_status(rereg_mr(a, mr.handle, IBV_REREG_MR_CHANGE_ACCESS, 0, 0,
			       0, IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_READ, &out), 0);
	assert_status(resize_cq(a, cq, 64), 0);
	assert_status(cmd_handle(a, SV_CMD_DEREG_MR, mr.handle), 0);
	assert_status(cmd_handle(a, SV_CMD_DEALLOC_PD, pd), 0);
	assert_status(cmd_handle(a, SV_CMD_DESTROY_CQ, cq), 0);
	assert_status(cmd_handle(a, SV_CMD_DESTROY_CHANNEL, ch), 0);
	conn_close(a);
	conn_close(b);
	free(buf);
	check_clean();
}

/* A probe connection reads; it creates nothing. */
static void test_probe(void **state)
{
	static const unsigned int ops[] = {
		SV_CMD_OPEN_CONTEXT, SV_CMD_ALLOC_PD, SV_CMD_DEALLOC_PD,
		SV_CMD_REG_MR, SV_CMD_REREG_MR, SV_CMD_DEREG_MR,
		SV_CMD_CREATE_CHANNEL, SV_CMD_DESTROY_CHANNEL, SV_CMD_CREATE_CQ,
		SV_CMD_RESIZE_CQ, SV_CMD_DESTROY_CQ, SV_CMD_CREATE_QP,
		SV_CMD_MODIFY_QP, SV_CMD_QUERY_QP, SV_CMD_DESTROY_QP,
		SV_CMD_CREATE_SRQ, SV_CMD_MODIFY_SRQ, SV_CMD_QUERY_SRQ,
		SV_CMD_DESTROY_SRQ, SV_CMD_CREATE_AH, SV_CMD_DESTROY_AH,
	};
	struct sv_rsp_stat st;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	char buf[64];
	unsigned int i;
	int s = conn_open(), fd, ev;

	(void)state;
	assert_status(hello(s, SV_PROTO_VERSION, SV_HELLO_PROBE, NULL), 0);
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		sv_cmd_init(&cmd, ops[i]);
		assert_status(xfer(s, &cmd, &rsp), -EPERM);
	}
	/* well-formed ones, descriptors included */
	fd = event_pair(&ev);
	assert_status(cmd_with_fd(s, SV_CMD_CREATE_CHANNEL, fd, NULL), -EPERM);
	assert_status(cmd_with_fd(s, SV_CMD_OPEN_CONTEXT, fd, NULL), -EPERM);
	close(fd);
	close(ev);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, NULL), -EPERM);
	assert_status(reg_mr(s, 1, (uintptr_t)buf, sizeof(buf), 0, NULL),
		      -EPERM);
	/* a second HELLO without the flag does not shed the probe limit */
	assert_status(hello(s, SV_PROTO_VERSION, 0, NULL), 0);
	sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
	assert_status(xfer(s, &cmd, &rsp), -EPERM);
	/* what a probe is for */
	assert_status(query_port(s, 1), 0);
	assert_status(query_gid(s, 1, 0), 0);
	stat_get(s, &st);
	for (i = 0; i < SV_OBJ_TYPE_MAX; i++)
		assert_int_equal(st.total[i], 0);
	conn_close(s);
	check_clean();
}

/* ---- queue pairs, SRQs and address handles ---- */

/* What the device reports, for the limits below. */
static struct sv_dev_attr dev_attr(int s)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_QUERY_DEVICE);
	assert_status(xfer(s, &cmd, &rsp), 0);
	return rsp.u.dev;
}

/* A ring memfd the daemon handed out: the size it said, sealed against
 * shrinking and growing (a client that could shrink it would crash the
 * device with SIGBUS). */
static void check_ring_fd(int fd, uint64_t offset, uint64_t bytes)
{
	struct stat st;
	int seals;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(offset % 4096 == 0);
	assert_true((uint64_t)st.st_size >= offset + bytes);
	seals = fcntl(fd, F_GET_SEALS);
	assert_true(seals >= 0);
	assert_true((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) ==
		    (F_SEAL_SHRINK | F_SEAL_GROW));
	assert_int_not_equal(ftruncate(fd, 0), 0);
	assert_int_not_equal(ftruncate(fd, (off_t)bytes * 2), 0);
}

static struct sv_cmd_create_qp qp_args(uint64_t pd, uint64_t cq,
				       uint32_t type)
{
	struct sv_cmd_create_qp a;

	memset(&a, 0, sizeof(a));
	a.cookie = 0xfeed;
	a.pd = pd;
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = type;
	a.cap.max_send_wr = 16;
	a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return a;
}

static uint32_t last_qp_db;   /* db_index of the last QP created */

/* CREATE_QP; on success checks the response and the ring memfd. */
static int create_qp(int s, const struct sv_cmd_create_qp *a, uint64_t *h,
		     uint32_t *qpn)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	const struct sv_rsp_qp *q = &rsp.u.qp;
	int ret, fd;

	sv_cmd_init(&cmd, SV_CMD_CREATE_QP);
	cmd.u.create_qp = *a;
	ret = xfer_fd(s, &cmd, -1, &rsp, &fd);
	if (ret)
		return ret;
	check_ring_fd(fd, q->ring_offset, q->ring_bytes);
	close(fd);
	last_qp_db = q->db_index;
	assert_true(q->handle != 0);
	assert_true(q->qpn > 1 && q->qpn <= 0xffffff);
	assert_true(q->cap.max_send_wr >= a->cap.max_send_wr);
	assert_true(q->cap.max_send_sge >= a->cap.max_send_sge);
	assert_true(q->cap.max_inline_data >= a->cap.max_inline_data);
	if (!a->srq) {
		assert_true(q->cap.max_recv_wr >= a->cap.max_recv_wr);
		assert_true(q->cap.max_recv_sge >= a->cap.max_recv_sge);
		assert_true(q->rq_entries >= q->cap.max_recv_wr);
	}
	assert_true(q->sq_entries >= q->cap.max_send_wr);
	assert_true(q->sq_offset + SV_RING_HDR_BYTES +
		    (uint64_t)q->sq_entries * q->sq_stride <= q->ring_bytes);
	assert_true(q->rq_offset + SV_RING_HDR_BYTES +
		    (uint64_t)q->rq_entries * q->rq_stride <= q->ring_bytes);
	if (h)
		*h = q->handle;
	if (qpn)
		*qpn = q->qpn;
	return 0;
}

static int modify_qp(int s, uint64_t qp, uint32_t mask,
		     const struct sv_wire_qp_attr *at)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_MODIFY_QP);
	cmd.u.modify_qp.qp = qp;
	cmd.u.modify_qp.attr_mask = mask;
	cmd.u.modify_qp.attr = *at;
	return xfer(s, &cmd, &rsp);
}

static int query_qp(int s, uint64_t qp, struct sv_rsp_query_qp *out)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_QUERY_QP);
	cmd.u.query_qp.qp = qp;
	cmd.u.query_qp.attr_mask = ~0u;
	ret = xfer(s, &cmd, &rsp);
	if (!ret && out)
		*out = rsp.u.query_qp;
	return ret;
}

static uint32_t qp_state_of(int s, uint64_t qp)
{
	struct sv_rsp_query_qp q;

	assert_status(query_qp(s, qp, &q), 0);
	return q.attr.qp_state;
}

static struct sv_cmd create_srq_cmd(uint64_t pd, uint32_t type,
				    uint32_t max_wr, uint32_t max_sge,
				    uint64_t cq, uint64_t xrcd)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_CREATE_SRQ);
	cmd.u.create_srq.cookie = 0x5e;
	cmd.u.create_srq.pd = pd;
	cmd.u.create_srq.srq_type = type;
	cmd.u.create_srq.max_wr = max_wr;
	cmd.u.create_srq.max_sge = max_sge;
	cmd.u.create_srq.cq = cq;
	cmd.u.create_srq.xrcd = xrcd;
	return cmd;
}

static int create_srq(int s, uint64_t pd, uint32_t type, uint32_t max_wr,
		      uint32_t max_sge, uint64_t cq, uint64_t xrcd,
		      uint64_t *h)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, fd;

	cmd = create_srq_cmd(pd, type, max_wr, max_sge, cq, xrcd);
	ret = xfer_fd(s, &cmd, -1, &rsp, &fd);
	if (ret)
		return ret;
	check_ring_fd(fd, rsp.u.srq.ring_offset, rsp.u.srq.ring_bytes);
	close(fd);
	assert_true(rsp.u.srq.max_wr >= max_wr);
	assert_true(rsp.u.srq.max_sge >= max_sge);
	assert_true(SV_RING_HDR_BYTES + (uint64_t)rsp.u.srq.entries *
		    rsp.u.srq.stride <= rsp.u.srq.ring_bytes);
	if (h)
		*h = rsp.u.srq.handle;
	return 0;
}

static int modify_srq(int s, uint64_t srq, uint32_t mask, uint32_t max_wr,
		      uint32_t limit, uint32_t rsvd)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_MODIFY_SRQ);
	cmd.u.modify_srq.srq = srq;
	cmd.u.modify_srq.attr_mask = mask;
	cmd.u.modify_srq.max_wr = max_wr;
	cmd.u.modify_srq.srq_limit = limit;
	cmd.u.modify_srq.rsvd = rsvd;
	return xfer(s, &cmd, &rsp);
}

static int query_srq(int s, uint64_t srq, struct sv_rsp_query_srq *out)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_QUERY_SRQ);
	cmd.u.handle.handle = srq;
	ret = xfer(s, &cmd, &rsp);
	if (!ret && out)
		*out = rsp.u.query_srq;
	return ret;
}

/* A valid RoCE address vector: GID index 0 of port 1. */
/* An address vector to a peer on this daemon: its own GID 0 (another
 * GID would be a peer on another host, over the RoCEv2 wire). */
static struct sv_wire_ah good_av(void)
{
	struct sv_wire_ah av;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int s = conn_open();

	memset(&av, 0, sizeof(av));
	av.is_global = 1;
	av.port_num = 1;
	av.hop_limit = 64;
	av.sgid_index = 0;
	sv_cmd_init(&cmd, SV_CMD_QUERY_GID);
	cmd.u.query_gid.port_num = 1;
	cmd.u.query_gid.index = 0;
	assert_status(xfer(s, &cmd, &rsp), 0);
	memcpy(av.dgid, rsp.u.gid.gid, sizeof(av.dgid));
	close(s);
	return av;
}

static int create_ah(int s, uint64_t pd, const struct sv_wire_ah *av,
		     uint64_t *h)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_CREATE_AH);
	cmd.u.create_ah.pd = pd;
	cmd.u.create_ah.attr = *av;
	ret = xfer(s, &cmd, &rsp);
	if (!ret) {
		assert_true(rsp.u.obj.handle != 0);
		if (h)
			*h = rsp.u.obj.handle;
	}
	return ret;
}

static void test_create_qp(void **state)
{
	struct sv_cmd_create_qp a;
	struct sv_dev_attr dev;
	uint64_t pd, stale_pd, cq = 0, cq2 = 0, srq = 0, qp;
	uint32_t qpn, qpn2;
	int s = conn_open();

	(void)state;
	pd = alloc_pd(s);	/* first: see garbage_handles */
	dev = dev_attr(s);
	stale_pd = alloc_pd(s);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, stale_pd), 0);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, &cq), 0);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, &cq2), 0);
	assert_status(create_srq(s, pd, IBV_SRQT_BASIC, 16, 1, 0, 0, &srq), 0);

	/* an RC QP of pd on cq: each field made bad */
#define QP_BAD(f, v, st) BAD(CREATE_QP, create_qp, f, v, st)
#define QP_CAP_BAD(f, lim)                                                    \
	QP_BAD(cap.f, (lim) + 1, -EINVAL), QP_BAD(cap.f, 1u << 31, -EINVAL),  \
	QP_BAD(cap.f, ~0u, -EINVAL)
	const struct bad_row rows[] = {
		/* handles: garbage, the wrong type, stale */
		GARBAGE(CREATE_QP, create_qp, pd, -EINVAL),
		GARBAGE(CREATE_QP, create_qp, send_cq, -EINVAL),
		GARBAGE(CREATE_QP, create_qp, recv_cq, -EINVAL),
		GARBAGE_NZ(CREATE_QP, create_qp, srq, -EINVAL), /* 0: none */
		QP_BAD(pd, cq, -EINVAL),
		QP_BAD(pd, srq, -EINVAL),
		QP_BAD(srq, pd, -EINVAL),
		QP_BAD(srq, cq, -EINVAL),
		QP_BAD(pd, stale_pd, -EINVAL),
		/* the type */
		QP_BAD(qp_type, IBV_QPT_RAW_PACKET, -EOPNOTSUPP),
		QP_BAD(qp_type, IBV_QPT_DRIVER, -EOPNOTSUPP),
		QP_BAD(qp_type, 0, -EINVAL),
		QP_BAD(qp_type, 1, -EINVAL),
		QP_BAD(qp_type, 5, -EINVAL),
		QP_BAD(qp_type, 6, -EINVAL),
		QP_BAD(qp_type, 7, -EINVAL),
		QP_BAD(qp_type, 11, -EINVAL),
		QP_BAD(qp_type, 0x80, -EINVAL),
		QP_BAD(qp_type, 0xfe, -EINVAL),
		QP_BAD(qp_type, 0x100, -EINVAL),
		QP_BAD(qp_type, 1u << 31, -EINVAL),
		QP_BAD(qp_type, ~0u, -EINVAL),
		/* flags, sq_sig_all, reserved */
		QP_BAD(create_flags, 1, -EOPNOTSUPP),
		QP_BAD(create_flags, ~0u, -EOPNOTSUPP),
		QP_BAD(send_ops_flags, 1ull << 63, -EOPNOTSUPP),
		QP_BAD(send_ops_flags, ~0ull, -EOPNOTSUPP),
		QP_BAD(sq_sig_all, 2, -EINVAL),
		QP_BAD(sq_sig_all, ~0u, -EINVAL),
		QP_BAD(rsvd, 1, -EINVAL),
		QP_BAD(rsvd2, 1u << 31, -EINVAL),
		/* capacities past the device's */
		QP_CAP_BAD(max_send_wr, dev.max_qp_wr),
		QP_CAP_BAD(max_recv_wr, dev.max_qp_wr),
		QP_CAP_BAD(max_send_sge, dev.max_sge),
		QP_CAP_BAD(max_recv_sge, dev.max_sge),
		QP_CAP_BAD(max_inline_data, dev.max_inline_data),
	};
#undef QP_CAP_BAD
#undef QP_BAD
	struct sv_cmd good = good_cmd(SV_CMD_CREATE_QP);

	good.u.create_qp = qp_args(pd, cq, IBV_QPT_RC);
	run_bad(s, &good, rows, NROWS(rows));
	/* two fields: both CQs a pd, or an SRQ */
	a = qp_args(pd, pd, IBV_QPT_RC);
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	a = qp_args(pd, srq, IBV_QPT_RC);
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);

	/* capacities exactly the device's: fine */
	a = qp_args(pd, cq, IBV_QPT_RC);
	a.cap.max_send_wr = a.cap.max_recv_wr = dev.max_qp_wr;
	a.cap.max_send_sge = a.cap.max_recv_sge = dev.max_sge;
	a.cap.max_inline_data = dev.max_inline_data;
	assert_status(create_qp(s, &a, &qp, &qpn), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, qp), 0);

	/* every type that works, with an SRQ too; QPNs are unique */
	a = qp_args(pd, cq, IBV_QPT_UD);
	a.send_cq = cq2;
	assert_status(create_qp(s, &a, &qp, &qpn), 0);
	a = qp_args(pd, cq, IBV_QPT_UC);
	a.srq = srq;
	assert_status(create_qp(s, &a, NULL, &qpn2), 0);
	assert_int_not_equal(qpn, qpn2);
	a = qp_args(pd, cq, IBV_QPT_RC);
	a.cap = (struct sv_wire_qp_cap){ 0 };	/* zero: at least one slot */
	assert_status(create_qp(s, &a, NULL, &qpn2), 0);
	assert_int_not_equal(qpn, qpn2);
	/* the things QPs use are busy */
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq2), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_SRQ, srq), -EBUSY);
	/* the connection going takes the QPs, the SRQ, the rest with it */
	conn_close(s);
	check_clean();
}

static int create_domain(int s, uint32_t model, uint32_t flags,
			 struct sv_rsp_domain *out)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_CREATE_DOMAIN);
	cmd.u.create_domain.msg_model = model;
	cmd.u.create_domain.flags = flags;
	ret = xfer(s, &cmd, &rsp);
	if (ret)
		return ret;
	assert_true(rsp.u.domain.handle != 0);
	assert_true(rsp.u.domain.dedicated <= 1);
	if (out)
		*out = rsp.u.domain;
	return 0;
}

/* Resource domains: values, handles, EBUSY, the pages running out. */
static void test_domain(void **state)
{
	struct sv_rsp_domain d[32], extra, forced;
	struct sv_cmd_create_qp a;
	struct sv_dev_attr dev;
	uint64_t pd, cq = 0, qp, qp2;
	uint32_t max, seen = 0;
	unsigned int i;
	int s = conn_open(), b = conn_open();

	(void)state;
	pd = alloc_pd(s);
	dev = dev_attr(s);
	max = dev.max_resource_domains;
	assert_true(max >= 2 && max < 32);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, &cq), 0);
	{
#define DOM_BAD(f, v) BAD(CREATE_DOMAIN, create_domain, f, v, -EINVAL)
		const struct bad_row rows[] = {
			DOM_BAD(msg_model, SV_MSG_MAX),
			DOM_BAD(msg_model, 0xff),
			DOM_BAD(msg_model, 1u << 31),
			DOM_BAD(msg_model, ~0u),
			DOM_BAD(flags, 2),
			DOM_BAD(flags, 0x100),
			DOM_BAD(flags, 1u << 31),
			DOM_BAD(flags, ~0u),
		}, qp_rows[] = {	/* garbage domain handles for a QP */
			GARBAGE_NZ(CREATE_QP, create_qp, domain, -EINVAL),
		}, destroy_rows[] = {
			GARBAGE(DESTROY_DOMAIN, handle, handle, -EINVAL),
		};
#undef DOM_BAD
		struct sv_cmd good = good_cmd(SV_CMD_CREATE_DOMAIN);

		good.u.create_domain.msg_model = SV_MSG_DEFAULT;
		run_bad(s, &good, rows, NROWS(rows));
		good = good_cmd(SV_CMD_CREATE_QP);
		good.u.create_qp = qp_args(pd, cq, IBV_QPT_RC);
		run_bad(s, &good, qp_rows, NROWS(qp_rows));
		good = good_handle(SV_CMD_DESTROY_DOMAIN, 0);
		run_bad(s, &good, destroy_rows, NROWS(destroy_rows));
	}
	/* a page each while they last: pages 1..max, all different */
	for (i = 0; i < max; i++) {
		assert_status(create_domain(s, i % SV_MSG_MAX, 0, &d[i]), 0);
		assert_int_equal(d[i].dedicated, 1);
		assert_true(d[i].db_index >= 1 && d[i].db_index <= max);
		assert_false(seen & (1u << d[i].db_index));
		seen |= 1u << d[i].db_index;
	}
	/* then: sharing, or ENOMEM for one that wants its own */
	assert_status(create_domain(s, SV_MSG_LOW_LATENCY, SV_DOMAIN_DEDICATED,
				    NULL), -ENOMEM);
	assert_status(create_domain(s, SV_MSG_HIGH_BW, 0, &extra), 0);
	assert_int_equal(extra.dedicated, 0);
	assert_true(extra.db_index >= 1 && extra.db_index <= max);
	/* another client's domain is not a handle of ours */
	assert_status(hello(b, SV_PROTO_VERSION, 0, NULL), 0);
	assert_status(cmd_handle(b, SV_CMD_DESTROY_DOMAIN, d[0].handle), -EINVAL);
	/* a QP in a domain rings its page; the domain is busy meanwhile */
	a = qp_args(pd, cq, IBV_QPT_RC);
	a.domain = d[1].handle;
	assert_status(create_qp(s, &a, &qp, NULL), 0);
	assert_int_equal(last_qp_db, d[1].db_index);
	a.domain = extra.handle;
	assert_status(create_qp(s, &a, &qp2, NULL), 0);
	assert_int_equal(last_qp_db, extra.db_index);
	a.domain = 0;
	assert_status(create_qp(s, &a, NULL, NULL), 0);
	assert_int_equal(last_qp_db, 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_DOMAIN, d[1].handle), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, qp), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_DOMAIN, d[1].handle), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_DOMAIN, d[1].handle), -EINVAL);
	/* its page is free again: one that wants its own gets it */
	assert_status(create_domain(s, SV_MSG_LOW_LATENCY, SV_DOMAIN_DEDICATED,
				    &forced), 0);
	assert_int_equal(forced.dedicated, 1);
	assert_int_equal(forced.db_index, d[1].db_index);
	/* the connection going takes the rest */
	conn_close(b);
	conn_close(s);
	check_clean();
}

/* Pages claimed by dedicated-only domains are never shared: sharers go to
 * the default page once every page is so claimed. */
static void test_domain_exclusive(void **state)
{
	struct sv_rsp_domain d[32], shared;
	struct sv_dev_attr dev;
	uint32_t i, max;
	int s = conn_open();

	(void)state;
	dev = dev_attr(s);
	max = dev.max_resource_domains;
	for (i = 0; i < max; i++) {
		assert_status(create_domain(s, SV_MSG_LOW_LATENCY,
					    SV_DOMAIN_DEDICATED, &d[i]), 0);
		assert_int_equal(d[i].dedicated, 1);
	}
	assert_status(create_domain(s, SV_MSG_DEFAULT, 0, &shared), 0);
	assert_int_equal(shared.dedicated, 0);
	assert_int_equal(shared.db_index, 0);
	assert_status(create_domain(s, SV_MSG_DEFAULT, SV_DOMAIN_DEDICATED,
				    NULL), -ENOMEM);
	/* one goes: its page is free for the next */
	assert_status(cmd_handle(s, SV_CMD_DESTROY_DOMAIN, d[3].handle), 0);
	assert_status(create_domain(s, SV_MSG_HIGH_BW, 0, &d[3]), 0);
	assert_int_equal(d[3].dedicated, 1);
	assert_true(d[3].db_index != 0);
	conn_close(s);
	check_clean();
}

static void test_modify_qp(void **state)
{
	struct sv_wire_qp_attr at, init, rtr, rts;
	struct sv_rsp_query_qp q;
	uint64_t pd, cq = 0, qp, other;
	uint32_t qpn;
	int s = conn_open();
	const uint32_t init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	const uint32_t rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER;
	const uint32_t rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN |
				  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

	(void)state;
	pd = alloc_pd(s);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, &cq), 0);
	{
		struct sv_cmd_create_qp a = qp_args(pd, cq, IBV_QPT_RC);

		assert_status(create_qp(s, &a, &qp, &qpn), 0);
		assert_status(create_qp(s, &a, &other, NULL), 0);
	}
	memset(&init, 0, sizeof(init));
	init.qp_state = IBV_QPS_INIT;
	init.port_num = 1;
	init.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	rtr = init;
	rtr.qp_state = IBV_QPS_RTR;
	rtr.ah_attr = good_av();
	rtr.path_mtu = IBV_MTU_1024;
	rtr.dest_qp_num = qpn;
	rtr.rq_psn = 0x123456;
	rtr.max_dest_rd_atomic = 4;
	rtr.min_rnr_timer = 12;
	rts = rtr;
	rts.qp_state = IBV_QPS_RTS;
	rts.sq_psn = 0x654321;
	rts.timeout = 14;
	rts.retry_cnt = 7;
	rts.rnr_retry = 7;
	rts.max_rd_atomic = 4;

	/* RESET -> INIT, each field made bad: the qp (garbage, the wrong
	 * type), reserved, masks that do not fit, values out of range */
#define INIT_BAD(f, v) BAD(MODIFY_QP, modify_qp, f, v, -EINVAL)
	const struct bad_row init_rows[] = {
		GARBAGE(MODIFY_QP, modify_qp, qp, -EINVAL),
		INIT_BAD(qp, pd),
		INIT_BAD(qp, cq),
		INIT_BAD(rsvd, 1),
		INIT_BAD(attr_mask, init_mask & ~IBV_QP_PORT),
		INIT_BAD(attr_mask, init_mask | IBV_QP_SQ_PSN),
		INIT_BAD(attr_mask, init_mask | (1u << 30)),
		INIT_BAD(attr_mask, ~0u),
		INIT_BAD(attr.qp_state, 7),
		INIT_BAD(attr.qp_state, ~0u),
		INIT_BAD(attr.port_num, 0),
		INIT_BAD(attr.port_num, 2),
		INIT_BAD(attr.pkey_index, 1),
		INIT_BAD(attr.pkey_index, 0xffff),
		INIT_BAD(attr.qp_access_flags, 1u << 20),
		INIT_BAD(attr.qp_access_flags, ~0u),
	};
#undef INIT_BAD
	/* QUERY_QP: the qp, reserved */
	const struct bad_row query_rows[] = {
		GARBAGE(QUERY_QP, query_qp, qp, -EINVAL),
		BAD(QUERY_QP, query_qp, qp, pd, -EINVAL),
		BAD(QUERY_QP, query_qp, rsvd, ~0u, -EINVAL),
	};
	struct sv_cmd good = good_cmd(SV_CMD_MODIFY_QP);

	good.u.modify_qp.qp = qp;
	good.u.modify_qp.attr_mask = init_mask;
	good.u.modify_qp.attr = init;
	run_bad(s, &good, init_rows, NROWS(init_rows));
	good = good_cmd(SV_CMD_QUERY_QP);
	good.u.query_qp.qp = qp;
	good.u.query_qp.attr_mask = ~0u;
	run_bad(s, &good, query_rows, NROWS(query_rows));
	/* transitions that do not exist */
	assert_status(modify_qp(s, qp, rtr_mask, &rtr), -EINVAL);
	assert_status(modify_qp(s, qp, rts_mask, &rts), -EINVAL);
	at = init;	/* cur_qp_state that is not the QP's */
	at.cur_qp_state = IBV_QPS_RTS;
	assert_status(modify_qp(s, qp, init_mask | IBV_QP_CUR_STATE, &at),
		      -EINVAL);
	assert_int_equal(qp_state_of(s, qp), IBV_QPS_RESET);
	assert_status(modify_qp(s, qp, init_mask, &init), 0);
	assert_int_equal(qp_state_of(s, qp), IBV_QPS_INIT);

	/* values out of range at RTR */
#define RTR_BAD(f, v) BAD(MODIFY_QP, modify_qp, attr.f, v, -EINVAL)
	const struct bad_row rtr_rows[] = {
		RTR_BAD(ah_attr.port_num, 0),
		RTR_BAD(ah_attr.port_num, 2),
		RTR_BAD(ah_attr.is_global, 0),
		RTR_BAD(ah_attr.sgid_index, SV_GID_TBL_LEN),
		RTR_BAD(ah_attr.sgid_index, 255),
		RTR_BAD(path_mtu, 0),
		RTR_BAD(path_mtu, IBV_MTU_4096 + 1),
		RTR_BAD(path_mtu, ~0u),
		RTR_BAD(dest_qp_num, 1u << 24),
		RTR_BAD(dest_qp_num, ~0u),
		RTR_BAD(max_dest_rd_atomic, dev_attr(s).max_qp_rd_atom + 1),
		RTR_BAD(max_dest_rd_atomic, 255),
		RTR_BAD(min_rnr_timer, 32),
		RTR_BAD(min_rnr_timer, 255),
	};
#undef RTR_BAD

	good = good_cmd(SV_CMD_MODIFY_QP);
	good.u.modify_qp.qp = qp;
	good.u.modify_qp.attr_mask = rtr_mask;
	good.u.modify_qp.attr = rtr;
	run_bad(s, &good, rtr_rows, NROWS(rtr_rows));
	assert_int_equal(qp_state_of(s, qp), IBV_QPS_INIT);
	assert_status(modify_qp(s, qp, rtr_mask, &rtr), 0);

	/* values out of range at RTS */
#define RTS_BAD(f, v) BAD(MODIFY_QP, modify_qp, attr.f, v, -EINVAL)
	const struct bad_row rts_rows[] = {
		RTS_BAD(timeout, 32),
		RTS_BAD(timeout, 255),
		RTS_BAD(retry_cnt, 8),
		RTS_BAD(rnr_retry, 8),
		RTS_BAD(max_rd_atomic, dev_attr(s).max_qp_init_rd_atom + 1),
		RTS_BAD(max_rd_atomic, 255),
	};
#undef RTS_BAD

	good.u.modify_qp.attr_mask = rts_mask;
	good.u.modify_qp.attr = rts;
	run_bad(s, &good, rts_rows, NROWS(rts_rows));
	at = rts;
	at.path_mig_state = IBV_MIG_ARMED + 1;
	assert_status(modify_qp(s, qp, rts_mask | IBV_QP_PATH_MIG_STATE, &at),
		      -EINVAL);
	assert_int_equal(qp_state_of(s, qp), IBV_QPS_RTR);
	assert_status(modify_qp(s, qp, rts_mask, &rts), 0);
	at = rts;	/* RTS -> SQD, notification not 0 or 1 */
	at.qp_state = IBV_QPS_SQD;
	at.en_sqd_async_notify = 2;
	assert_status(modify_qp(s, qp, IBV_QP_STATE |
				IBV_QP_EN_SQD_ASYNC_NOTIFY, &at), -EINVAL);

	/* the attributes set are the ones reported */
	assert_status(query_qp(s, qp, &q), 0);
	assert_int_equal(q.attr.qp_state, IBV_QPS_RTS);
	assert_int_equal(q.qp_type, IBV_QPT_RC);
	assert_int_equal(q.attr.dest_qp_num, qpn);
	assert_int_equal(q.attr.path_mtu, IBV_MTU_1024);
	assert_int_equal(q.attr.rq_psn, 0x123456);
	assert_int_equal(q.attr.sq_psn, 0x654321);
	assert_int_equal(q.attr.timeout, 14);
	assert_int_equal(q.attr.retry_cnt, 7);
	assert_int_equal(q.attr.rnr_retry, 7);
	assert_int_equal(q.attr.min_rnr_timer, 12);
	assert_int_equal(q.attr.max_rd_atomic, 4);
	assert_int_equal(q.attr.max_dest_rd_atomic, 4);
	assert_int_equal(q.attr.qp_access_flags, IBV_ACCESS_REMOTE_WRITE);
	assert_memory_equal(q.attr.ah_attr.dgid, rtr.ah_attr.dgid, 16);
	/* to ERR and RESET from anywhere; RESET forgets */
	at = init;
	at.qp_state = IBV_QPS_ERR;
	assert_status(modify_qp(s, qp, IBV_QP_STATE, &at), 0);
	assert_int_equal(qp_state_of(s, qp), IBV_QPS_ERR);
	assert_status(modify_qp(s, qp, rts_mask, &rts), -EINVAL);
	at.qp_state = IBV_QPS_RESET;
	assert_status(modify_qp(s, qp, IBV_QP_STATE, &at), 0);
	assert_status(query_qp(s, qp, &q), 0);
	assert_int_equal(q.attr.qp_state, IBV_QPS_RESET);
	/* the other QP never moved */
	assert_int_equal(qp_state_of(s, other), IBV_QPS_RESET);

	/* DESTROY_QP: garbage, the wrong type, twice */
	const struct bad_row destroy_rows[] = {
		GARBAGE(DESTROY_QP, handle, handle, -EINVAL),
		BAD(DESTROY_QP, handle, handle, pd, -EINVAL),
		BAD(DESTROY_QP, handle, handle, cq, -EINVAL),
	};

	good = good_handle(SV_CMD_DESTROY_QP, qp);
	run_bad(s, &good, destroy_rows, NROWS(destroy_rows));
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, qp), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, qp), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, qp), -EINVAL);
	assert_status(modify_qp(s, qp, init_mask, &init), -EINVAL);
	assert_status(query_qp(s, qp, NULL), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, other), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), 0);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), 0);
	conn_close(s);
	check_clean();
}

/* OPEN_XRCD with file fd (-1: none): 0 and the handle, or the status. */
static int open_xrcd(int s, uint32_t flags, int fd, uint64_t *h)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_OPEN_XRCD);
	cmd.u.open_xrcd.flags = flags;
	ret = xfer_fd(s, &cmd, fd, &rsp, NULL);
	if (!ret && h)
		*h = rsp.u.obj.handle;
	return ret;
}

static int open_qp(int s, uint64_t xrcd, uint32_t qpn, uint32_t type,
		   uint64_t *h)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_OPEN_QP);
	cmd.u.open_qp.xrcd = xrcd;
	cmd.u.open_qp.qpn = qpn;
	cmd.u.open_qp.qp_type = type;
	ret = xfer(s, &cmd, &rsp);
	if (!ret && h)
		*h = rsp.u.qp.handle;
	return ret;
}

/* XRC commands: domains, XRC SRQs, XRC QPs and OPEN_QP with bad input. */
static void test_xrc_cmds(void **state)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	struct sv_cmd_create_qp a;
	uint64_t pd, cq = 0, x = 0, x2 = 0, xs = 0, tgt = 0, ini = 0, op = 0;
	uint64_t bsrq = 0, x2x = 0;
	uint32_t qpn = 0;
	unsigned int i;
	char path[300];
	int s = conn_open(), f, fp;

	(void)state;
	snprintf(path, sizeof(path), "%s/xrcd-file",
		 getenv("SV_TEST_DIR") ? getenv("SV_TEST_DIR") : "/tmp");
	f = open(path, O_RDONLY | O_CREAT, 0600);
	fp = open(path, O_PATH);
	assert_true(f >= 0 && fp >= 0);
	pd = alloc_pd(s);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, &cq), 0);
	/* OPEN_XRCD: flags, reserved bits, the file (an open one) */
	assert_status(open_xrcd(s, 8, -1, NULL), -EINVAL);
	assert_status(open_xrcd(s, 0, f, NULL), -EINVAL);
	assert_status(open_xrcd(s, SV_XRCD_SHARED, -1, NULL), -EINVAL);
	assert_status(open_xrcd(s, SV_XRCD_SHARED | SV_XRCD_CREATE, fp, NULL),
		      -EBADF);
	sv_cmd_init(&cmd, SV_CMD_OPEN_XRCD);
	cmd.u.open_xrcd.rsvd = 1;
	assert_status(xfer(s, &cmd, &rsp), -EINVAL);
	assert_status(open_xrcd(s, SV_XRCD_SHARED, f, NULL), -ENOENT);
	assert_status(open_xrcd(s, SV_XRCD_SHARED | SV_XRCD_CREATE, f, &x), 0);
	assert_status(open_xrcd(s, SV_XRCD_SHARED | SV_XRCD_EXCL, f, NULL),
		      -EEXIST);
	assert_status(open_xrcd(s, SV_XRCD_SHARED, f, &x2), 0);
	assert_status(cmd_handle(s, SV_CMD_CLOSE_XRCD, x2), 0);
	assert_status(cmd_handle(s, SV_CMD_CLOSE_XRCD, x2), -EINVAL);
	for (i = 0; i < N_GARBAGE; i++)
		assert_status(cmd_handle(s, SV_CMD_CLOSE_XRCD,
					 garbage_handles[i]), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_CLOSE_XRCD, pd), -EINVAL);
	/* XRC SRQs: a domain and a CQ */
	assert_status(create_srq(s, pd, IBV_SRQT_XRC, 16, 1, cq, 0, NULL),
		      -EINVAL);
	assert_status(create_srq(s, pd, IBV_SRQT_XRC, 16, 1, cq, pd, NULL),
		      -EINVAL);
	assert_status(create_srq(s, pd, IBV_SRQT_XRC, 16, 1, 0, x, NULL),
		      -EINVAL);
	assert_status(create_srq(s, pd, IBV_SRQT_XRC, 16, 1, pd, x, NULL),
		      -EINVAL);
	assert_status(create_srq(s, pd, IBV_SRQT_BASIC, 16, 1, 0, x, NULL),
		      -EINVAL);
	assert_status(create_srq(s, pd, IBV_SRQT_XRC, 16, 1, cq, x, &xs), 0);
	assert_status(cmd_handle(s, SV_CMD_CLOSE_XRCD, x), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), -EBUSY);
	/* XRC_RECV: a domain and nothing else */
	a = qp_args(pd, cq, IBV_QPT_XRC_RECV);
	a.xrcd = x;
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_RECV;
	for (i = 0; i < N_GARBAGE; i++) {
		a.xrcd = garbage_handles[i];
		assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	}
	a.xrcd = pd;
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	a.xrcd = x;
	a.send_ops_flags = IBV_QP_EX_WITH_SEND;
	assert_status(create_qp(s, &a, NULL, NULL), -EOPNOTSUPP);
	a.send_ops_flags = 0;
	assert_status(create_qp(s, &a, &tgt, &qpn), 0);
	/* XRC_SEND: no receive side, no domain */
	a = qp_args(pd, cq, IBV_QPT_XRC_SEND);
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	a.recv_cq = 0;
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	a.cap.max_recv_wr = 0;
	a.cap.max_recv_sge = 0;
	a.xrcd = x;
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	a.xrcd = 0;
	assert_status(create_srq(s, pd, IBV_SRQT_BASIC, 16, 1, 0, 0, &bsrq), 0);
	a.srq = bsrq;
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	a.srq = 0;
	assert_status(create_qp(s, &a, &ini, NULL), 0);
	/* an RC QP takes no domain, and no XRC SRQ */
	a = qp_args(pd, cq, IBV_QPT_RC);
	a.xrcd = x;
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	a.xrcd = 0;
	a.srq = xs;
	assert_status(create_qp(s, &a, NULL, NULL), -EINVAL);
	/* OPEN_QP: a target of the domain, by number */
	assert_status(open_qp(s, x, qpn, IBV_QPT_RC, NULL), -EINVAL);
	assert_status(open_qp(s, pd, qpn, IBV_QPT_XRC_RECV, NULL), -EINVAL);
	assert_status(open_qp(s, x, qpn ^ 0x800000, IBV_QPT_XRC_RECV, NULL),
		      -ENOENT);
	assert_status(open_qp(s, x, ~0u, IBV_QPT_XRC_RECV, NULL), -ENOENT);
	assert_status(open_xrcd(s, 0, -1, &x2), 0);        /* private */
	assert_status(open_qp(s, x2, qpn, IBV_QPT_XRC_RECV, NULL), -ENOENT);
	assert_status(open_qp(s, x, qpn, IBV_QPT_XRC_RECV, &op), 0);
	/* the opened handle names the QP: modify, query, destroy */
	{
		struct sv_wire_qp_attr at;

		memset(&at, 0, sizeof(at));
		at.qp_state = IBV_QPS_INIT;
		at.port_num = 1;
		assert_status(modify_qp(s, op, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, &at),
			      0);
		sv_cmd_init(&cmd, SV_CMD_QUERY_QP);
		cmd.u.query_qp.qp = tgt;
		cmd.u.query_qp.attr_mask = IBV_QP_STATE;
		assert_status(xfer(s, &cmd, &rsp), 0);
		assert_int_equal(rsp.u.query_qp.attr.qp_state, IBV_QPS_INIT);
	}
	/* the creator's handle goes: the QP lives on, the opened handle
	 * names it */
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, tgt), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, tgt), -EINVAL);
	sv_cmd_init(&cmd, SV_CMD_QUERY_QP);
	cmd.u.query_qp.qp = op;
	cmd.u.query_qp.attr_mask = IBV_QP_STATE;
	assert_status(xfer(s, &cmd, &rsp), 0);
	assert_int_equal(rsp.u.query_qp.attr.qp_state, IBV_QPS_INIT);
	assert_status(open_qp(s, x, qpn, IBV_QPT_XRC_RECV, &x2x), 0);
	assert_status(cmd_handle(s, SV_CMD_CLOSE_XRCD, x), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, op), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, x2x), 0);
	/* the last handle gone, the QP with it */
	assert_status(open_qp(s, x, qpn, IBV_QPT_XRC_RECV, NULL), -ENOENT);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_SRQ, xs), 0);
	assert_status(cmd_handle(s, SV_CMD_CLOSE_XRCD, x), 0);
	assert_status(cmd_handle(s, SV_CMD_CLOSE_XRCD, x2), 0);
	/* the last handle closed: the file's domain is gone */
	assert_status(open_xrcd(s, SV_XRCD_SHARED, f, NULL), -ENOENT);
	close(f);
	close(fp);
	unlink(path);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, ini), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_SRQ, bsrq), 0);

	/* the creating client ends: its target lives on in the client that
	 * has it open, which then holds the only handle */
	{
		int s2 = conn_open(), f2 = open(path, O_RDONLY | O_CREAT, 0600);
		struct sv_rsp_stat st;
		uint32_t before;
		uint64_t y = 0;

		assert_true(f2 >= 0);
		assert_status(open_xrcd(s, SV_XRCD_SHARED | SV_XRCD_CREATE, f2,
					&x), 0);
		memset(&a, 0, sizeof(a));
		a.qp_type = IBV_QPT_XRC_RECV;
		a.xrcd = x;
		assert_status(create_qp(s, &a, &tgt, &qpn), 0);
		assert_status(open_xrcd(s2, SV_XRCD_SHARED, f2, &y), 0);
		assert_status(open_qp(s2, y, qpn, IBV_QPT_XRC_RECV, &op), 0);
		stat_get(s2, &st);
		before = st.nclients;
		conn_close(s);
		for (i = 0; i < 400; i++) {     /* bounded: 10 s */
			stat_get(s2, &st);
			if (st.nclients < before)
				break;
			usleep(25000);
		}
		assert_true(st.nclients < before);
		sv_cmd_init(&cmd, SV_CMD_QUERY_QP);
		cmd.u.query_qp.qp = op;
		cmd.u.query_qp.attr_mask = IBV_QP_STATE;
		assert_status(xfer(s2, &cmd, &rsp), 0);
		assert_int_equal(rsp.u.query_qp.attr.qp_state, IBV_QPS_RESET);
		assert_status(cmd_handle(s2, SV_CMD_CLOSE_XRCD, y), -EBUSY);
		assert_status(cmd_handle(s2, SV_CMD_DESTROY_QP, op), 0);
		assert_status(open_qp(s2, y, qpn, IBV_QPT_XRC_RECV, NULL),
			      -ENOENT);
		assert_status(cmd_handle(s2, SV_CMD_CLOSE_XRCD, y), 0);
		close(f2);
		unlink(path);
		conn_close(s2);
	}
}

static void test_srq_cmds(void **state)
{
	struct sv_rsp_query_srq q = { 0 };
	struct sv_dev_attr dev;
	uint64_t pd, cq = 0, srq, qp;
	unsigned int i;
	int s = conn_open();

	(void)state;
	pd = alloc_pd(s);
	dev = dev_attr(s);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, &cq), 0);

	/* CREATE_SRQ: a basic SRQ of pd, each field made bad */
#define SRQ_BAD(f, v) BAD(CREATE_SRQ, create_srq, f, v, -EINVAL)
	const struct bad_row create_rows[] = {
		GARBAGE(CREATE_SRQ, create_srq, pd, -EINVAL),
		SRQ_BAD(pd, cq),
		/* tag matching: a CQ and max_num_tags (0 here) are needed */
		SRQ_BAD(srq_type, IBV_SRQT_TM),
		SRQ_BAD(srq_type, 3),
		SRQ_BAD(srq_type, ~0u),
		SRQ_BAD(cq, cq),
		SRQ_BAD(xrcd, 1),
		SRQ_BAD(max_wr, 0),
		SRQ_BAD(max_wr, dev.max_srq_wr + 1),
		SRQ_BAD(max_wr, ~0u),
		SRQ_BAD(max_sge, dev.max_srq_sge + 1),
		SRQ_BAD(max_sge, ~0u),
	};
#undef SRQ_BAD
	struct sv_cmd good = create_srq_cmd(pd, IBV_SRQT_BASIC, 16, 1, 0, 0);

	run_bad(s, &good, create_rows, NROWS(create_rows));
	/* XRC: no domain; tag matching: no max_num_tags */
	assert_status(create_srq(s, pd, IBV_SRQT_XRC, 16, 1, cq, 0, NULL),
		      -EINVAL);
	assert_status(create_srq(s, pd, IBV_SRQT_TM, 16, 1, cq, 0, NULL),
		      -EINVAL);
	assert_status(create_srq(s, pd, IBV_SRQT_BASIC, dev.max_srq_wr,
				 dev.max_srq_sge, 0, 0, &srq), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_SRQ, srq), 0);
	assert_status(create_srq(s, pd, IBV_SRQT_BASIC, 16, 1, 0, 0, &srq), 0);

	/* MODIFY_SRQ (a limit of 4) and QUERY_SRQ */
	assert_status(query_srq(s, srq, &q), 0);
	const struct bad_row modify_rows[] = {
		GARBAGE(MODIFY_SRQ, modify_srq, srq, -EINVAL),
		BAD(MODIFY_SRQ, modify_srq, srq, pd, -EINVAL),
		BAD(MODIFY_SRQ, modify_srq, attr_mask, 1u << 2, -EINVAL),
		BAD(MODIFY_SRQ, modify_srq, attr_mask, ~0u, -EINVAL),
		BAD(MODIFY_SRQ, modify_srq, rsvd, 1, -EINVAL),
		BAD(MODIFY_SRQ, modify_srq, srq_limit, q.max_wr + 1, -EINVAL),
		BAD(MODIFY_SRQ, modify_srq, srq_limit, ~0u, -EINVAL),
	}, query_rows[] = {
		GARBAGE(QUERY_SRQ, handle, handle, -EINVAL),
		BAD(QUERY_SRQ, handle, handle, cq, -EINVAL),
	};

	good = good_cmd(SV_CMD_MODIFY_SRQ);
	good.u.modify_srq.srq = srq;
	good.u.modify_srq.attr_mask = IBV_SRQ_LIMIT;
	good.u.modify_srq.srq_limit = 4;
	run_bad(s, &good, modify_rows, NROWS(modify_rows));
	good = good_handle(SV_CMD_QUERY_SRQ, srq);
	run_bad(s, &good, query_rows, NROWS(query_rows));
	assert_status(modify_srq(s, srq, IBV_SRQ_LIMIT, 0, 5, 0), 0);
	assert_status(query_srq(s, srq, &q), 0);
	assert_int_equal(q.srq_limit, 5);
	assert_true(q.max_wr >= 16);
	/* resizing past the device's limits is refused however it is done */
	assert_true(modify_srq(s, srq, IBV_SRQ_MAX_WR, ~0u, 0, 0) < 0);
	assert_true(modify_srq(s, srq, IBV_SRQ_MAX_WR, 0, 0, 0) < 0);

	/* DESTROY_SRQ: busy with a QP on it, garbage, twice */
	{
		struct sv_cmd_create_qp a = qp_args(pd, cq, IBV_QPT_RC);

		a.srq = srq;
		assert_status(create_qp(s, &a, &qp, NULL), 0);
	}
	assert_status(cmd_handle(s, SV_CMD_DESTROY_SRQ, srq), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), -EBUSY);
	for (i = 0; i < N_GARBAGE; i++)
		assert_status(cmd_handle(s, SV_CMD_DESTROY_SRQ,
					 garbage_handles[i]), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_SRQ, qp), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, srq), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_QP, qp), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_SRQ, srq), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_SRQ, srq), -EINVAL);
	assert_status(query_srq(s, srq, NULL), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), 0);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), 0);
	conn_close(s);
	check_clean();
}

static void test_ah_cmds(void **state)
{
	struct sv_wire_ah av;
	uint64_t pd, stale_pd, ah, ah2;
	unsigned int i;
	int s = conn_open();

	(void)state;
	pd = alloc_pd(s);
	stale_pd = alloc_pd(s);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, stale_pd), 0);
	av = good_av();
	for (i = 0; i < N_GARBAGE; i++)
		assert_status(create_ah(s, garbage_handles[i], &av, NULL),
			      -EINVAL);
	assert_status(create_ah(s, stale_pd, &av, NULL), -EINVAL);
	av.port_num = 0;
	assert_status(create_ah(s, pd, &av, NULL), -EINVAL);
	av.port_num = 2;
	assert_status(create_ah(s, pd, &av, NULL), -EINVAL);
	av = good_av();
	av.is_global = 0;	/* RoCE: a GRH is a must */
	assert_status(create_ah(s, pd, &av, NULL), -EINVAL);
	av = good_av();
	av.sgid_index = SV_GID_TBL_LEN;
	assert_status(create_ah(s, pd, &av, NULL), -EINVAL);
	av.sgid_index = 255;
	assert_status(create_ah(s, pd, &av, NULL), -EINVAL);
	av = good_av();
	assert_status(create_ah(s, pd, &av, &ah), 0);
	assert_status(create_ah(s, pd, &av, &ah2), 0);
	assert_true(ah != ah2);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), -EBUSY);
	for (i = 0; i < N_GARBAGE; i++)
		assert_status(cmd_handle(s, SV_CMD_DESTROY_AH,
					 garbage_handles[i]), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_AH, pd), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, ah), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_AH, ah), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_AH, ah), -EINVAL);
	/* ah2 goes with the connection */
	conn_close(s);
	check_clean();
}

/* One client's QPs, SRQs and AHs name nothing on another connection. */
static int direct_est(int s, uint64_t qp)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_DIRECT_EST);
	cmd.u.direct_est.qp = qp;
	return xfer(s, &cmd, &rsp);
}

/* Move qp RESET -> INIT -> RTR towards dest (-> RTS when rts). */
static void qp_connect(int s, uint64_t qp, uint32_t dest, bool rts)
{
	struct sv_wire_qp_attr at;

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = 1;
	at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	assert_status(modify_qp(s, qp, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, &at), 0);
	at.qp_state = IBV_QPS_RTR;
	at.ah_attr = good_av();
	at.path_mtu = IBV_MTU_1024;
	at.dest_qp_num = dest;
	at.max_dest_rd_atomic = 1;
	at.min_rnr_timer = 12;
	assert_status(modify_qp(s, qp, IBV_QP_STATE | IBV_QP_AV |
				IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER, &at), 0);
	if (!rts)
		return;
	at.qp_state = IBV_QPS_RTS;
	at.timeout = 14;
	at.retry_cnt = 7;
	at.rnr_retry = 7;
	at.max_rd_atomic = 1;
	assert_status(modify_qp(s, qp, IBV_QP_STATE | IBV_QP_SQ_PSN |
				IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
				&at), 0);
}

/*
 * DIRECT_EST (the direct path's first WRITE to a peer in RTR): refused for
 * a handle that is no QP of the caller's, a QP not in RTS, a QP whose peer
 * is not a QP of this host connected back to it; for a connected pair it
 * establishes the peer (still in RTR), and again changes nothing.
 */
static void test_direct_est(void **state)
{
	uint64_t pd, cq = 0, a, b, c;
	uint32_t an, bn, cn;
	int s = conn_open(), other = conn_open();

	(void)state;
	pd = alloc_pd(s);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, &cq), 0);
	{
		struct sv_cmd_create_qp q = qp_args(pd, cq, IBV_QPT_RC);

		assert_status(create_qp(s, &q, &a, &an), 0);
		assert_status(create_qp(s, &q, &b, &bn), 0);
		assert_status(create_qp(s, &q, &c, &cn), 0);
	}
	assert_status(direct_est(s, 0), -EINVAL);
	assert_status(direct_est(s, ~0ull), -EINVAL);
	assert_status(direct_est(s, pd), -EINVAL);
	assert_status(direct_est(s, cq), -EINVAL);
	assert_status(direct_est(other, a), -EINVAL);   /* not its QP */
	assert_status(direct_est(s, a), -EINVAL);       /* RESET */
	qp_connect(s, a, bn, true);
	qp_connect(s, b, an, false);
	assert_status(direct_est(s, b), -EINVAL);       /* RTR */
	/* c in RTS towards b, which is connected to a, not to c */
	qp_connect(s, c, bn, true);
	assert_status(direct_est(s, c), -ENOENT);
	assert_status(direct_est(s, a), 0);
	assert_int_equal(qp_state_of(s, b), IBV_QPS_RTR);
	assert_status(direct_est(s, a), 0);
	assert_int_equal(qp_state_of(s, b), IBV_QPS_RTR);
	conn_close(other);
	conn_close(s);
	check_clean();
}

static int direct_recv(int s, uint64_t qp, uint32_t part, uint32_t rsvd,
		       int *fd)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_DIRECT_RECV);
	cmd.u.direct_recv.qp = qp;
	cmd.u.direct_recv.part = part;
	cmd.u.direct_recv.rsvd = rsvd;
	return xfer_fd(s, &cmd, -1, &rsp, fd);
}

/* ... and what it says of the part */
static int direct_recv_rsp(int s, uint64_t qp, uint32_t part, int *fd,
			   struct sv_rsp_direct_recv *o)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_DIRECT_RECV);
	cmd.u.direct_recv.qp = qp;
	cmd.u.direct_recv.part = part;
	ret = xfer_fd(s, &cmd, -1, &rsp, fd);
	*o = rsp.u.direct_recv;
	return ret;
}

static int direct_notify(int s, uint64_t qp, uint32_t flags, uint32_t rsvd)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	sv_cmd_init(&cmd, SV_CMD_DIRECT_NOTIFY);
	cmd.u.direct_notify.qp = qp;
	cmd.u.direct_notify.arm_sn = 1;
	cmd.u.direct_notify.flags = flags;
	cmd.u.direct_notify.rsvd = rsvd;
	return xfer(s, &cmd, &rsp);
}

/*
 * DIRECT_RECV (a direct SEND maps its peer's receive ring and CQ ring) and
 * DIRECT_NOTIFY (its completions fire the peer's CQ): refused for a handle
 * that is no QP of the caller's, reserved bits, a part that does not
 * exist, a QP whose peer is not connected back to it, the SRQ part of a
 * peer on no SRQ; the rings come read-only (no writable mapping can be
 * made of them), an SRQ peer's with its SRQ's number and word's tag; a
 * notify before the peer's queue was ever taken directly is refused.
 */
static void test_direct_recv(void **state)
{
	uint64_t pd, cq = 0, srq = 0, a, b, c, d, e;
	uint32_t an, bn, cn, dn, en;
	int s = conn_open(), other = conn_open(), fd = -1;
	void *map;

	(void)state;
	pd = alloc_pd(s);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, &cq), 0);
	assert_status(create_srq(s, pd, IBV_SRQT_BASIC, 16, 1, 0, 0, &srq), 0);
	{
		struct sv_cmd_create_qp q = qp_args(pd, cq, IBV_QPT_RC);

		assert_status(create_qp(s, &q, &a, &an), 0);
		assert_status(create_qp(s, &q, &b, &bn), 0);
		assert_status(create_qp(s, &q, &c, &cn), 0);
		assert_status(create_qp(s, &q, &d, &dn), 0);
		q.srq = srq;
		q.cap.max_recv_wr = 0;
		q.cap.max_recv_sge = 0;
		assert_status(create_qp(s, &q, &e, &en), 0);
	}
	assert_status(direct_recv(s, 0, SV_DRECV_RQ, 0, NULL), -EINVAL);
	assert_status(direct_recv(s, pd, SV_DRECV_RQ, 0, NULL), -EINVAL);
	assert_status(direct_recv(s, cq, SV_DRECV_CQ, 0, NULL), -EINVAL);
	assert_status(direct_recv(other, a, SV_DRECV_RQ, 0, NULL), -EINVAL);
	assert_status(direct_recv(s, a, SV_DRECV_XSIDE + 1, 0, NULL),
		      -EINVAL);
	assert_status(direct_recv(s, a, SV_DRECV_RQ, 1, NULL), -EINVAL);
	/* not connected yet: no peer */
	assert_status(direct_recv(s, a, SV_DRECV_RQ, 0, NULL), -ENOENT);
	qp_connect(s, a, bn, true);
	qp_connect(s, b, an, true);
	qp_connect(s, c, bn, true);     /* b is connected to a, not to c */
	assert_status(direct_recv(s, c, SV_DRECV_RQ, 0, NULL), -ENOENT);
	qp_connect(s, d, en, true);
	qp_connect(s, e, dn, true);     /* e receives on an SRQ */
	{
		struct sv_rsp_direct_recv o;

		assert_status(direct_recv_rsp(s, d, SV_DRECV_RQ, &fd, &o), 0);
		assert_int_equal(o.bytes, SV_RING_HDR_BYTES);
		assert_true(o.srqn != 0);
		close(fd);
		assert_status(direct_recv_rsp(s, d, SV_DRECV_SRQ, &fd, &o), 0);
		assert_true(o.srqn != 0 && o.srq_tag != 0 && o.entries >= 16);
		map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED,
			   fd, (off_t)o.offset);
		assert_true(map == MAP_FAILED);
		close(fd);
	}
	/* a's peer has a receive queue of its own, no SRQ */
	assert_status(direct_recv(s, a, SV_DRECV_SRQ, 0, NULL), -EINVAL);
	/* never taken directly: nothing to notify */
	assert_status(direct_notify(s, a, 0, 0), -EINVAL);
	assert_status(direct_recv(s, a, SV_DRECV_RQ, 0, &fd), 0);
	assert_true(fd >= 0);
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(map == MAP_FAILED);
	map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	assert_int_equal(mprotect(map, 4096, PROT_READ | PROT_WRITE), -1);
	munmap(map, 4096);
	close(fd);
	assert_status(direct_recv(s, a, SV_DRECV_CQ, 0, &fd), 0);
	assert_true(fd >= 0);
	close(fd);
	{
		/* the peer's completion side: the one part that comes
		 * read-write, closed once the peer errs */
		struct sv_rsp_direct_recv o;
		struct sv_wire_qp_attr at;
		struct sv_xside *xs;

		assert_status(direct_recv_rsp(s, a, SV_DRECV_XSIDE, &fd, &o),
			      0);
		assert_true(o.entries >= 16 &&
			    !(o.entries & (o.entries - 1)) &&
			    o.bytes >= sv_xside_bytes(o.entries));
		xs = mmap(NULL, o.bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			  fd, 0);
		assert_true(xs != MAP_FAILED);
		close(fd);
		assert_int_equal(xs->xentries, o.entries);
		assert_int_equal(xs->qpn, bn);
		assert_int_equal(xs->word >> 32, 0);
		memset(&at, 0, sizeof(at));
		at.qp_state = IBV_QPS_ERR;
		assert_status(modify_qp(s, b, IBV_QP_STATE, &at), 0);
		assert_int_equal(__atomic_load_n(&xs->word,
						 __ATOMIC_ACQUIRE) >> 32,
				 SV_XSIDE_CLOSED);
		munmap(xs, o.bytes);
	}
	assert_status(direct_notify(s, a, SV_NOTIFY_SRQ_LIMIT << 1, 0),
		      -EINVAL);
	/* a limit looked at on a peer with no SRQ: nothing to raise */
	assert_status(direct_notify(s, a, SV_NOTIFY_SRQ_LIMIT, 0), 0);
	assert_status(direct_notify(s, a, 0, 1), -EINVAL);
	assert_status(direct_notify(other, a, 0, 0), -EINVAL);
	assert_status(direct_notify(s, a, 0, 0), 0);
	assert_status(direct_notify(s, a, SV_NOTIFY_SOLICITED, 0), 0);
	conn_close(other);
	conn_close(s);
	check_clean();
}

static void test_other_client_qp(void **state)
{
	struct sv_wire_qp_attr at;
	struct sv_wire_ah av = good_av();
	uint64_t pd, cq = 0, srq, qp, ah, b_pd, b_cq = 0;
	int a = conn_open(), b = conn_open();

	(void)state;
	/* a handle names a slot of its own client's table: a's objects sit in
	 * slots that b's table does not use (b has two objects) */
	for (int i = 0; i < 3; i++)
		alloc_pd(a);
	pd = alloc_pd(a);
	assert_status(create_cq(a, 16, 0, 0, 0, -1, &cq), 0);
	assert_status(create_srq(a, pd, IBV_SRQT_BASIC, 16, 1, 0, 0, &srq), 0);
	{
		struct sv_cmd_create_qp q = qp_args(pd, cq, IBV_QPT_RC);

		assert_status(create_qp(a, &q, &qp, NULL), 0);
	}
	assert_status(create_ah(a, pd, &av, &ah), 0);
	b_pd = alloc_pd(b);
	assert_status(create_cq(b, 16, 0, 0, 0, -1, &b_cq), 0);

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_ERR;
	assert_status(modify_qp(b, qp, IBV_QP_STATE, &at), -EINVAL);
	assert_status(query_qp(b, qp, NULL), -EINVAL);
	assert_status(cmd_handle(b, SV_CMD_DESTROY_QP, qp), -EINVAL);
	assert_status(modify_srq(b, srq, IBV_SRQ_LIMIT, 0, 1, 0), -EINVAL);
	assert_status(query_srq(b, srq, NULL), -EINVAL);
	assert_status(cmd_handle(b, SV_CMD_DESTROY_SRQ, srq), -EINVAL);
	assert_status(cmd_handle(b, SV_CMD_DESTROY_AH, ah), -EINVAL);
	/* nor as the parts of b's new objects */
	{
		struct sv_cmd_create_qp q = qp_args(pd, b_cq, IBV_QPT_RC);

		assert_status(create_qp(b, &q, NULL, NULL), -EINVAL);
		q = qp_args(b_pd, cq, IBV_QPT_RC);
		assert_status(create_qp(b, &q, NULL, NULL), -EINVAL);
		q = qp_args(b_pd, b_cq, IBV_QPT_RC);
		q.recv_cq = cq;
		assert_status(create_qp(b, &q, NULL, NULL), -EINVAL);
		q = qp_args(b_pd, b_cq, IBV_QPT_RC);
		q.srq = srq;
		assert_status(create_qp(b, &q, NULL, NULL), -EINVAL);
	}
	assert_status(create_srq(b, pd, IBV_SRQT_BASIC, 16, 1, 0, 0, NULL),
		      -EINVAL);
	assert_status(create_ah(b, pd, &av, NULL), -EINVAL);
	/* a's are untouched */
	assert_int_equal(qp_state_of(a, qp), IBV_QPS_RESET);
	assert_status(query_srq(a, srq, NULL), 0);
	assert_status(cmd_handle(a, SV_CMD_DESTROY_AH, ah), 0);
	conn_close(b);
	conn_close(a);
	check_clean();
}

/* ---- memory-management extensions ---- */

/* ALLOC_PAGE_LIST; on success the list as this process maps it (the
 * memfd's size and seals checked). */
static int alloc_pl(int s, uint32_t max, uint32_t rsvd, int fd_in,
		    uint64_t *h, uint64_t **map, size_t *bytes)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, fd;
	void *p;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_PAGE_LIST);
	cmd.u.alloc_page_list.max_entries = max;
	cmd.u.alloc_page_list.rsvd = rsvd;
	ret = xfer_fd(s, &cmd, fd_in, &rsp, &fd);
	if (ret)
		return ret;
	check_ring_fd(fd, 0, rsp.u.page_list.bytes);
	assert_true(rsp.u.page_list.bytes >= (uint64_t)max * 16);
	assert_int_equal(rsp.u.page_list.max_entries, max);
	assert_true(rsp.u.page_list.handle != 0);
	p = mmap(NULL, rsp.u.page_list.bytes, PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	close(fd);
	*h = rsp.u.page_list.handle;
	*map = p;
	*bytes = rsp.u.page_list.bytes;
	return 0;
}

/* A command answered with struct sv_rsp_mr: on success its handle and keys
 * are checked (an MR: lkey == rkey; a window: rkey, lkey 0). */
static int xfer_mr(int s, struct sv_cmd *cmd, bool window,
		   struct sv_rsp_mr *out)
{
	struct sv_rsp rsp;
	int ret = xfer(s, cmd, &rsp);

	if (!ret) {
		assert_true(rsp.u.mr.handle != 0);
		assert_true(rsp.u.mr.rkey != 0);
		assert_int_equal(rsp.u.mr.lkey, window ? 0 : rsp.u.mr.rkey);
	}
	if (out)
		*out = rsp.u.mr;
	return ret;
}

static int alloc_mr_fr(int s, uint64_t pd, uint32_t max, uint32_t rsvd,
		       struct sv_rsp_mr *mr)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_MR);
	cmd.u.alloc_mr.pd = pd;
	cmd.u.alloc_mr.max_entries = max;
	cmd.u.alloc_mr.rsvd = rsvd;
	return xfer_mr(s, &cmd, false, mr);
}

static int alloc_mw(int s, uint64_t pd, uint32_t type, uint32_t rsvd,
		    struct sv_rsp_mr *mw)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_MW);
	cmd.u.alloc_mw.pd = pd;
	cmd.u.alloc_mw.type = type;
	cmd.u.alloc_mw.rsvd = rsvd;
	return xfer_mr(s, &cmd, true, mw);
}

static int reg_mr_list(int s, const struct sv_cmd_reg_mr_list *a,
		       struct sv_rsp_mr *mr)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_REG_MR_LIST);
	cmd.u.reg_mr_list = *a;
	return xfer_mr(s, &cmd, false, mr);
}

/* The capabilities of the memory-management extensions. */
static void test_mm_caps(void **state)
{
	int s = conn_open();
	struct sv_dev_attr a = dev_attr(s);
	const uint64_t caps = IBV_DEVICE_MEM_MGT_EXTENSIONS |
			      IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2A |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B;

	(void)state;
	assert_int_equal(a.device_cap_flags & caps, caps);
	assert_true(a.max_mw > 0);
	assert_int_equal(a.max_fast_reg_page_list_len, SV_MAX_PAGE_LIST);
	assert_int_equal(a.exp_cap_flags,
			 SV_EXP_CAP_FAST_REG_USER | SV_EXP_CAP_BLOCK_LIST |
			 SV_EXP_CAP_ZERO_BASED_MR | SV_EXP_CAP_ZERO_BASED_MW |
			 SV_EXP_CAP_READ_WITH_INV | SV_EXP_CAP_SEND_WITH_INV |
			 SV_EXP_CAP_MASKED_ATOMICS);
	conn_close(s);
	check_clean();
}

/* ALLOC_PAGE_LIST / FREE_PAGE_LIST, ALLOC_MR, ALLOC_MW / DEALLOC_MW: every
 * field, every handle that is not the right one. */
static void test_mm_objects(void **state)
{
	uint64_t pd, stale_pd, cq = 0, pl, stale_pl, pl_max, *map, *map2;
	struct sv_rsp_mr fr, mw[3], stale_mw;
	struct sv_rsp_stat st;
	size_t bytes, bytes2;
	unsigned int i, t;
	int s = conn_open(), p[2];

	(void)state;
	pd = alloc_pd(s);
	stale_pd = alloc_pd(s);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, stale_pd), 0);
	assert_status(create_cq(s, 1, 0, 0, 0, -1, &cq), 0);

	/* page lists */
	assert_status(alloc_pl(s, 0, 0, -1, NULL, NULL, NULL), -EINVAL);
	assert_status(alloc_pl(s, SV_MAX_PAGE_LIST + 1, 0, -1, NULL, NULL,
			       NULL), -EINVAL);
	assert_status(alloc_pl(s, ~0u, 0, -1, NULL, NULL, NULL), -EINVAL);
	assert_status(alloc_pl(s, 1u << 31, 0, -1, NULL, NULL, NULL), -EINVAL);
	assert_status(alloc_pl(s, 4, 1, -1, NULL, NULL, NULL), -EINVAL);
	assert_status(alloc_pl(s, 4, ~0u, -1, NULL, NULL, NULL), -EINVAL);
	/* a descriptor it does not take: refused, and closed by the daemon */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_status(alloc_pl(s, 4, 0, p[0], NULL, NULL, NULL), -EINVAL);
	close(p[0]);
	close(p[1]);
	assert_status(alloc_pl(s, 1, 0, -1, &pl, &map, &bytes), 0);
	assert_status(alloc_pl(s, SV_MAX_PAGE_LIST, 0, -1, &pl_max, &map2,
			       &bytes2), 0);
	assert_int_equal(bytes2, (uint64_t)SV_MAX_PAGE_LIST * 16);
	assert_status(alloc_pl(s, 3, 0, -1, &stale_pl, &map, &bytes), 0);
	munmap(map, bytes);
	assert_status(cmd_handle(s, SV_CMD_FREE_PAGE_LIST, stale_pl), 0);
	for (i = 0; i < N_GARBAGE; i++)
		assert_status(cmd_handle(s, SV_CMD_FREE_PAGE_LIST,
					 garbage_handles[i]), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_FREE_PAGE_LIST, stale_pl), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_FREE_PAGE_LIST, pd), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_FREE_PAGE_LIST, cq), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, pl), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pl), -EINVAL);

	/* fast-register MRs */
	for (i = 0; i < N_GARBAGE; i++)
		assert_status(alloc_mr_fr(s, garbage_handles[i], 4, 0, NULL),
			      -EINVAL);
	assert_status(alloc_mr_fr(s, stale_pd, 4, 0, NULL), -EINVAL);
	assert_status(alloc_mr_fr(s, cq, 4, 0, NULL), -EINVAL);
	assert_status(alloc_mr_fr(s, pl, 4, 0, NULL), -EINVAL);
	assert_status(alloc_mr_fr(s, pd, 0, 0, NULL), -EINVAL);
	assert_status(alloc_mr_fr(s, pd, SV_MAX_PAGE_LIST + 1, 0, NULL),
		      -EINVAL);
	assert_status(alloc_mr_fr(s, pd, ~0u, 0, NULL), -EINVAL);
	assert_status(alloc_mr_fr(s, pd, 4, 1, NULL), -EINVAL);
	assert_status(alloc_mr_fr(s, pd, SV_MAX_PAGE_LIST, 0, &fr), 0);
	/* it is an MR: DEREG_MR frees it, no other destroy does; no rereg */
	assert_status(cmd_handle(s, SV_CMD_FREE_PAGE_LIST, fr.handle), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_MW, fr.handle), -EINVAL);
	assert_status(rereg_mr(s, fr.handle, IBV_REREG_MR_CHANGE_ACCESS, 0, 0,
			       0, 0, NULL), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), -EBUSY);

	/* windows */
	for (i = 0; i < N_GARBAGE; i++)
		assert_status(alloc_mw(s, garbage_handles[i], SV_MW_TYPE_1, 0,
				       NULL), -EINVAL);
	assert_status(alloc_mw(s, stale_pd, SV_MW_TYPE_1, 0, NULL), -EINVAL);
	assert_status(alloc_mw(s, fr.handle, SV_MW_TYPE_1, 0, NULL), -EINVAL);
	assert_status(alloc_mw(s, pd, 0, 0, NULL), -EINVAL);
	assert_status(alloc_mw(s, pd, 4, 0, NULL), -EINVAL);
	assert_status(alloc_mw(s, pd, ~0u, 0, NULL), -EINVAL);
	assert_status(alloc_mw(s, pd, IBV_MW_TYPE_2, 1, NULL), -EINVAL);
	for (t = 0; t < 3; t++)
		assert_status(alloc_mw(s, pd, SV_MW_TYPE_1 + t, 0, &mw[t]), 0);
	assert_int_not_equal(mw[0].rkey, mw[1].rkey);
	assert_status(alloc_mw(s, pd, SV_MW_TYPE_2A, 0, &stale_mw), 0);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_MW, stale_mw.handle), 0);
	for (i = 0; i < N_GARBAGE; i++)
		assert_status(cmd_handle(s, SV_CMD_DEALLOC_MW,
					 garbage_handles[i]), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_MW, stale_mw.handle),
		      -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_MW, pd), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_MW, pl), -EINVAL);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mw[0].handle), -EINVAL);
	assert_status(rereg_mr(s, mw[1].handle, IBV_REREG_MR_CHANGE_ACCESS, 0,
			       0, 0, 0, NULL), -EINVAL);

	stat_get(g.keeper, &st);
	assert_int_equal(st.total[SV_OBJ_PAGE_LIST], 2);
	assert_int_equal(st.total[SV_OBJ_MR], 1);
	assert_int_equal(st.total[SV_OBJ_MW], 3);
	assert_int_equal(st.keys_live, 4);
	/* the windows and the MR hold the pd */
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, fr.handle), 0);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), -EBUSY);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_MW, mw[1].handle), 0);
	/* the rest goes with the connection */
	munmap(map2, bytes2);
	conn_close(s);
	check_clean();
}

/* REG_MR_LIST: every field and every kind of bad entry. */
static void test_reg_mr_list(void **state)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, (size_t)pg * 6, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t pd, stale_pd, pl, pl2, stale_pl, *w, *w2, *ws;
	struct sv_cmd_reg_mr_list good, x;
	struct sv_rsp_mr mr, fr;
	size_t bytes, bytes2, bytes_s;
	unsigned int i;
	int s = conn_open(), b = conn_open();
	uint64_t b_pl, *wb;
	size_t bytes_b;

	(void)state;
	assert_true(mem != MAP_FAILED);
	/* pages 0..3 read-write, 4 read-only, 5 no access (not unmapped:
	 * the page lists mapped below could land in a hole) */
	assert_int_equal(mprotect(mem + 4 * pg, (size_t)pg, PROT_READ), 0);
	assert_int_equal(mprotect(mem + 5 * pg, (size_t)pg, PROT_NONE), 0);
	pd = alloc_pd(s);
	stale_pd = alloc_pd(s);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, stale_pd), 0);
	assert_status(alloc_pl(s, 4, 0, -1, &pl, &w, &bytes), 0);
	assert_status(alloc_pl(s, 1, 0, -1, &pl2, &w2, &bytes2), 0);
	assert_status(alloc_pl(s, 4, 0, -1, &stale_pl, &ws, &bytes_s), 0);
	assert_status(cmd_handle(s, SV_CMD_FREE_PAGE_LIST, stale_pl), 0);
	/* b's list, in a slot s's table does not use as a page list */
	for (i = 0; i < 6; i++)
		alloc_pd(b);
	assert_status(alloc_pl(b, 4, 0, -1, &b_pl, &wb, &bytes_b), 0);
	assert_status(alloc_mr_fr(s, pd, 4, 0, &fr), 0);

	/* two blocks of odd sizes and alignments, in reverse order */
	w[0] = (uintptr_t)mem + 2 * pg + 3;
	w[1] = 1001;
	w[2] = (uintptr_t)mem + 1;
	w[3] = (uint64_t)pg;
	memcpy(wb, w, 32);
	memset(&good, 0, sizeof(good));
	good.pd = pd;
	good.list = pl;
	good.nentries = 2;
	good.fbo = 5;
	good.length = 1001 + (uint64_t)pg - 5;
	good.iova = 0x10000;
	good.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	good.flags = SV_REG_BLOCKS;
	assert_status(reg_mr_list(s, &good, &mr), 0);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr.handle), 0);

#define LBAD(field, val, err)                                                  \
	do {                                                                   \
		x = good;                                                      \
		x.field = val;                                                 \
		assert_status(reg_mr_list(s, &x, NULL), err);                  \
	} while (0)
	for (i = 0; i < N_GARBAGE; i++) {
		LBAD(pd, garbage_handles[i], -EINVAL);
		LBAD(list, garbage_handles[i], -EINVAL);
	}
	LBAD(pd, stale_pd, -EINVAL);
	LBAD(pd, pl, -EINVAL);
	LBAD(pd, fr.handle, -EINVAL);
	LBAD(list, stale_pl, -EINVAL);
	LBAD(list, b_pl, -EINVAL);
	LBAD(list, pd, -EINVAL);
	LBAD(list, fr.handle, -EINVAL);
	LBAD(list, pl2, -EINVAL);              /* one entry only */
	LBAD(nentries, 0, -EINVAL);
	LBAD(nentries, 5, -EINVAL);
	LBAD(nentries, ~0u, -EINVAL);
	LBAD(nentries, 1u << 31, -EINVAL);
	LBAD(fbo, 6, -EINVAL);
	LBAD(fbo, ~0u, -EINVAL);
	LBAD(length, 0, -EINVAL);
	LBAD(length, good.length + 1, -EINVAL);
	LBAD(length, ~0ull, -EINVAL);
	LBAD(length, (1ull << 47) + 1, -EINVAL);
	LBAD(iova, ~0ull - 100, -EINVAL);
	LBAD(access, IBV_ACCESS_REMOTE_WRITE, -EINVAL);
	LBAD(access, IBV_ACCESS_REMOTE_ATOMIC, -EINVAL);
	LBAD(access, IBV_ACCESS_LOCAL_WRITE | (1u << 10), -EINVAL);
	LBAD(access, ~0u, -EINVAL);
	LBAD(rsvd, 1, -EINVAL);
	LBAD(rsvd, 0xff, -EINVAL);
	LBAD(flags, SV_REG_BLOCKS | SV_REG_TYPE1, -EINVAL);
	LBAD(flags, SV_REG_BLOCKS | 0x8000, -EINVAL);
	LBAD(flags, 0xffff, -EINVAL);
	/* pages, not blocks: these entries are not page addresses */
	LBAD(flags, 0, -EINVAL);
	/* the page size, in page mode */
	w[0] = (uintptr_t)mem;
	w[1] = (uintptr_t)mem + pg;
	x = good;
	x.flags = 0;
	x.fbo = 0;
	x.length = 2 * (uint64_t)pg;
	x.page_shift = (uint8_t)__builtin_ctzl((unsigned long)pg);
	assert_status(reg_mr_list(s, &x, &mr), 0);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr.handle), 0);
	{
		static const uint8_t bad_shift[] = { 0, 1, 11, 31, 63, 64, 255 };
		struct sv_cmd_reg_mr_list y = x;

		for (i = 0; i < sizeof(bad_shift); i++) {
			y.page_shift = bad_shift[i];
			assert_status(reg_mr_list(s, &y, NULL), -EINVAL);
		}
		y = x;
		y.fbo = (uint32_t)pg;
		y.length = 1;
		assert_status(reg_mr_list(s, &y, NULL), -EINVAL);
		y = x;
		w[1] += 8;                      /* not aligned */
		assert_status(reg_mr_list(s, &y, NULL), -EINVAL);
		w[1] = ~0ull & ~((uint64_t)pg - 1); /* wraps */
		assert_status(reg_mr_list(s, &y, NULL), -EINVAL);
		w[1] = (uintptr_t)mem + 4 * pg;  /* read-only */
		assert_status(reg_mr_list(s, &y, NULL), -EFAULT);
		y.access = IBV_ACCESS_REMOTE_READ;
		assert_status(reg_mr_list(s, &y, &mr), 0);
		assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr.handle), 0);
		w[1] = (uintptr_t)mem + 5 * pg;  /* no access */
		assert_status(reg_mr_list(s, &y, NULL), -EFAULT);
		w[1] = 0;
		assert_status(reg_mr_list(s, &y, NULL), -EFAULT);
		w[1] = 1ull << 47;
		assert_status(reg_mr_list(s, &y, NULL), -EFAULT);
	}
	/* blocks: empty, huge, wrapping, not mapped, read-only with write */
	w[0] = (uintptr_t)mem + 2 * pg + 3;
	w[1] = 1001;
	w[2] = (uintptr_t)mem + 1;
	w[3] = 0;
	assert_status(reg_mr_list(s, &good, NULL), -EINVAL);
	w[3] = ~0ull;
	assert_status(reg_mr_list(s, &good, NULL), -EINVAL);
	w[3] = (1ull << 47) + 1;
	assert_status(reg_mr_list(s, &good, NULL), -EINVAL);
	w[2] = ~0ull - 10;
	w[3] = (uint64_t)pg;
	assert_status(reg_mr_list(s, &good, NULL), -EINVAL);
	w[2] = ~0ull - (uint64_t)pg - 10;
	assert_status(reg_mr_list(s, &good, NULL), -EFAULT);
	w[2] = (uintptr_t)mem + 4 * pg;
	assert_status(reg_mr_list(s, &good, NULL), -EFAULT);
	w[2] = (uintptr_t)mem + 5 * pg - 10;     /* runs into page 5 */
	assert_status(reg_mr_list(s, &good, NULL), -EFAULT);
	w[2] = (uintptr_t)mem + 1;
	assert_status(reg_mr_list(s, &good, &mr), 0);
	assert_status(cmd_handle(s, SV_CMD_DEREG_MR, mr.handle), 0);
	/* garbage everywhere in a full list: refused, never a crash */
	for (i = 0; i < 200; i++) {
		uint64_t v = rnd();

		for (unsigned int k = 0; k < 8; k++)
			w[k] = k & 1 ? rnd() % 100000 : rnd() >> (v % 64);
		x = good;
		x.nentries = 1 + (uint32_t)(v % 4);
		x.flags = v & (1ull << 8) ? SV_REG_BLOCKS : 0;
		x.page_shift = (uint8_t)(12 + v % 20);
		x.fbo = (uint32_t)(rnd() % 5000);
		x.length = 1 + rnd() % 200000;
		x.access = IBV_ACCESS_LOCAL_WRITE;
		{
			int st = reg_mr_list(s, &x, &mr);

			if (st == 0)
				assert_status(cmd_handle(s, SV_CMD_DEREG_MR,
							 mr.handle), 0);
			else if (st != -EINVAL && st != -EFAULT)
				fail_msg("status %d", st);
		}
	}
#undef LBAD
	munmap(w, bytes);
	munmap(w2, bytes2);
	munmap(ws, bytes_s);
	munmap(wb, bytes_b);
	munmap(mem, (size_t)pg * 6);
	conn_close(b);
	conn_close(s);
	check_clean();
}

/* A probe creates none of them. */
static void test_mm_probe(void **state)
{
	static const unsigned int ops[] = {
		SV_CMD_ALLOC_MR, SV_CMD_ALLOC_PAGE_LIST, SV_CMD_FREE_PAGE_LIST,
		SV_CMD_REG_MR_LIST, SV_CMD_ALLOC_MW, SV_CMD_DEALLOC_MW,
	};
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	unsigned int i;
	int s = conn_open();

	(void)state;
	assert_status(hello(s, SV_PROTO_VERSION, SV_HELLO_PROBE, NULL), 0);
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		sv_cmd_init(&cmd, ops[i]);
		assert_status(xfer(s, &cmd, &rsp), -EPERM);
	}
	sv_cmd_init(&cmd, SV_CMD_ALLOC_PAGE_LIST);
	cmd.u.alloc_page_list.max_entries = 4;
	assert_status(xfer(s, &cmd, &rsp), -EPERM);
	conn_close(s);
	check_clean();
}

/* ---- clients that misbehave at volume ---- */

/* One round trip on b, within 2 s. */
static void still_served(int b)
{
	double t = now_s();

	assert_status(hello(b, SV_PROTO_VERSION, 0, NULL), 0);
	if (now_s() - t > 2)
		fail_msg("HELLO took %.2f s", now_s() - t);
}

/*
 * A client that sends and never reads: the daemon never waits for it, it
 * drops it once its responses no longer fit; another client is answered all
 * along.
 */
static void test_flood_no_read(void **state)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int a = conn_open(), b = conn_open(), fd, ret = 0;
	unsigned int sent = 0, blocked = 0, got = 0;
	double end = now_s() + 10;
	ssize_t n;

	(void)state;
	sv_cmd_init(&cmd, SV_CMD_QUERY_DEVICE);
	while (now_s() < end) {
		cmd.hdr.seq = seq_next++;
		ret = sv_send_msg(a, &cmd, sizeof(cmd), -1, MSG_DONTWAIT);
		if (ret == -EAGAIN) {
			struct pollfd p = { .fd = a, .events = POLLOUT };

			blocked++;
			poll(&p, 1, 50);
		} else if (ret) {
			break;
		} else {
			sent++;
		}
		if ((sent + blocked) % 64 == 0)
			still_served(b);
	}
	print_message("flooder: %u sent, would block %u times, then %s\n",
		      sent, blocked, strerror(-ret));
	if (ret != -EPIPE && ret != -ECONNRESET)
		fail_msg("a client that does not read was not dropped "
			 "(%u commands sent)", sent);
	/* what it was sent before it was dropped, then EOF */
	while ((n = recv_rsp(a, &rsp, &fd)) > 0) {
		assert_int_equal(n, sizeof(rsp));
		assert_status(rsp.hdr.status, 0);
		got++;
	}
	assert_int_equal(n, 0);
	assert_true(got > 0 && got < sent);
	still_served(b);
	conn_close(a);
	conn_close(b);
	check_clean();
}

/*
 * The flooder: keeps up to 32 commands in flight for 4 s at most, reading
 * every response (so it is never dropped for not reading).
 */
static void __attribute__((noreturn)) flood_reading_child(void)
{
	double end = now_s() + 4;
	unsigned int inflight = 0;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	unsigned int i;
	int a, fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* the parent's connections are not ours to hold open */
	close(g.keeper);
	for (i = 0; i < nconns; i++)
		close(conns[i]);
	a = conn_try();
	if (a < 0)
		_exit(1);
	sv_cmd_init(&cmd, SV_CMD_QUERY_PORT);
	cmd.u.query_port.port_num = 1;
	while (now_s() < end) {
		ssize_t n;

		while (inflight < 32 &&
		       !sv_send_msg(a, &cmd, sizeof(cmd), -1, MSG_DONTWAIT))
			inflight++;
		n = sv_recv_msg(a, &rsp, sizeof(rsp), &fd, 0);
		if (n != (ssize_t)sizeof(rsp) || rsp.hdr.status)
			_exit(2);
		inflight--;
	}
	_exit(0);
}

/*
 * A client that floods and reads its responses, from another process, with
 * its queue never running dry: another client must still be served promptly.
 * The flooder is killed at the end, and the daemon lets it go.
 */
static void test_flood_reading(void **state)
{
	double end, worst = 0, t;
	unsigned int rounds = 0;
	int b = conn_open(), st;

	(void)state;
	g.flooder = fork();
	assert_true(g.flooder >= 0);
	if (g.flooder == 0)
		flood_reading_child();
	wait_clients(3);
	for (end = now_s() + 1.5; now_s() < end; rounds++) {
		t = now_s();
		assert_status(hello(b, SV_PROTO_VERSION, 0, NULL), 0);
		t = now_s() - t;
		if (t > worst)
			worst = t;
	}
	kill(g.flooder, SIGKILL);
	assert_int_equal(waitpid(g.flooder, &st, 0), g.flooder);
	g.flooder = -1;
	print_message("beside a flooder: %u round trips, worst %.1f ms\n",
		      rounds, worst * 1e3);
	if (!WIFSIGNALED(st))
		fail_msg("the flooder ended by itself: status %#x", st);
	/* a starved client would wait for the flooder's end (2.5 s or more) */
	if (worst > 2)
		fail_msg("a flooding client stalled another for %.2f s", worst);
	conn_close(b);
	check_clean();
}

/*
 * Commands sent just before a half-close (shutdown(SHUT_WR)) are all
 * answered; then the daemon drops the connection.
 */
static void test_half_close(void **state)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	uint32_t first = seq_next;
	int s = conn_open(), i, fd;
	ssize_t n;

	(void)state;
	for (i = 0; i < 8; i++) {
		sv_cmd_init(&cmd, i % 2 ? SV_CMD_ALLOC_PD : SV_CMD_QUERY_PORT);
		cmd.u.query_port.port_num = 1;
		cmd.hdr.seq = seq_next++;
		assert_int_equal(sv_send_msg(s, &cmd, sizeof(cmd), -1, 0), 0);
	}
	assert_int_equal(shutdown(s, SHUT_WR), 0);
	for (i = 0; i < 8; i++) {
		n = recv_rsp(s, &rsp, &fd);
		assert_int_equal(n, sizeof(rsp));
		check_rsp_hdr(&rsp, i % 2 ? SV_CMD_ALLOC_PD : SV_CMD_QUERY_PORT,
			      first + (uint32_t)i);
		assert_status(rsp.hdr.status, 0);
	}
	assert_int_equal(recv_rsp(s, &rsp, &fd), 0);
	conn_close(s);
	check_clean();	/* its PDs went with it */
}

/* CPU seconds the daemon has used. */
static double daemon_cpu(void)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)g.pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = 0;
	p = strrchr(buf, ')');
	assert_non_null(p);
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime */
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
				"%*u %*u %lu %lu", &ut, &st), 2);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int fd_limit_restore(void **state)
{
	(void)state;
	if (g.nofile_lowered &&
	    prlimit(g.pid, RLIMIT_NOFILE, &g.nofile, NULL) == 0)
		g.nofile_lowered = false;
	return 0;
}

/* Create channels until the daemon has no descriptor left to take the next
 * one's socket in (it then gets the command without it, and says ENOMEM,
 * not EINVAL: the socket was sent). */
static void fd_fill(int s, uint64_t *ch, unsigned int *nch, unsigned int max)
{
	int ret;

	for (;;) {
		assert_true(*nch < max);
		ret = create_channel(s, &ch[*nch]);
		if (ret)
			break;
		(*nch)++;
	}
	assert_status(ret, -ENOMEM);
}

/* Send a HELLO on a connection the daemon may have refused meanwhile:
 * answered, or EOF / EPIPE. */
static void hello_or_refused(int s)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	ssize_t n;
	int ret, fd;

	sv_cmd_init(&cmd, SV_CMD_HELLO);
	cmd.u.hello.abi = SV_PROTO_VERSION;
	cmd.hdr.seq = seq_next++;
	ret = sv_send_msg(s, &cmd, sizeof(cmd), -1, 0);
	if (ret) {
		if (ret != -EPIPE && ret != -ECONNRESET)
			fail_msg("send: %s", strerror(-ret));
		return;
	}
	n = recv_rsp(s, &rsp, &fd);
	if (!n)
		return;
	assert_int_equal(n, sizeof(rsp));
	check_rsp_hdr(&rsp, SV_CMD_HELLO, cmd.hdr.seq);
	if (rsp.hdr.status != -EMFILE)   /* refused for want of descriptors */
		assert_status(rsp.hdr.status, 0);
}

/*
 * The daemon out of descriptors (its RLIMIT_NOFILE lowered with prlimit, then
 * filled with completion channels, whose sockets it keeps): commands that need
 * one are refused and leak nothing, existing clients are served, and a
 * connection it cannot accept does not make it spin. Problems are collected
 * and reported together at the end.
 */
static void test_fd_limit(void **state)
{
	enum { MAX_CH = 256 };
	char buf[64], problems[512] = "";
	uint64_t ch[MAX_CH], cq = 0, pd;
	unsigned int nch = 0;
	struct rlimit low;
	int s = conn_open(), n, full, pending, ret;
	size_t pl = 0;
	double cpu;

	(void)state;
#define PROBLEM(...)                                                          \
	(pl += (size_t)snprintf(problems + pl, sizeof(problems) - pl,         \
				__VA_ARGS__),                                 \
	 pl = pl < sizeof(problems) ? pl : sizeof(problems) - 1)
	pd = alloc_pd(s);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, &cq), 0);
	assert_int_equal(prlimit(g.pid, RLIMIT_NOFILE, NULL, &g.nofile), 0);
	low = g.nofile;
	low.rlim_cur = (rlim_t)count_fds(g.pid) + 24;
	if (low.rlim_cur > g.nofile.rlim_cur)
		skip();
	if (prlimit(g.pid, RLIMIT_NOFILE, &low, NULL))
		skip();		/* not allowed here: nothing to test */
	g.nofile_lowered = true;

	fd_fill(s, ch, &nch, MAX_CH);
	full = count_fds(g.pid);
	print_message("daemon full at %d descriptors, %u channels\n", full,
		      nch);

	/* nothing to spare: ENOMEM, as for any memory the device lacks */
	assert_status(create_cq(s, 16, 0, 0, 0, -1, NULL), -ENOMEM);
	assert_status(resize_cq(s, cq, 64), -ENOMEM);
	assert_status(reg_mr(s, pd, (uintptr_t)buf, sizeof(buf), 0, NULL),
		      -EFAULT);	/* it cannot read our maps */
	assert_int_equal(count_fds(g.pid), full);
	assert_status(hello(g.keeper, SV_PROTO_VERSION, 0, NULL), 0);

	/* one free: a CQ needs one for the copy of its pool that is sent
	 * (and two when the client has no pool yet). The daemon closes the
	 * copy it sent after the response: a HELLO answered after it says
	 * that close is done (one control thread, in order). */
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CHANNEL, ch[--nch]), 0);
	ret = create_cq(s, 16, 0, 0, 0, -1, NULL);
	assert_status(hello(g.keeper, SV_PROTO_VERSION, 0, NULL), 0);
	n = count_fds(g.pid);
	if (ret)
		assert_status(ret, -ENOMEM);
	if (n != full - 1)
		PROBLEM("CREATE_CQ with one descriptor free: status %d, "
			"descriptors %d -> %d; ", ret, full - 1, n);
	ret = resize_cq(s, cq, 64);
	assert_status(hello(g.keeper, SV_PROTO_VERSION, 0, NULL), 0);
	n = count_fds(g.pid);
	if (ret)
		assert_status(ret, -ENOMEM);
	if (n != full - 1 && !problems[0])
		PROBLEM("RESIZE_CQ with one descriptor free: status %d, "
			"descriptors %d -> %d; ", ret, full - 1, n);

	/* full again; a connection it cannot accept: no busy loop */
	fd_fill(s, ch, &nch, MAX_CH);
	pending = conn_open();
	sleep_ms(50);
	cpu = daemon_cpu();
	sleep_ms(500);
	cpu = daemon_cpu() - cpu;
	print_message("daemon CPU with a connection pending: %.2f s in 0.5 s\n",
		      cpu);
	if (cpu > 0.1)
		PROBLEM("the daemon spins (%.2f s CPU in 0.5 s) while it "
			"cannot accept; ", cpu);
	assert_status(hello(g.keeper, SV_PROTO_VERSION, 0, NULL), 0);

	/* descriptors back: everything works again */
	while (nch)
		assert_status(cmd_handle(s, SV_CMD_DESTROY_CHANNEL, ch[--nch]),
			      0);
	assert_int_equal(fd_limit_restore(NULL), 0);
	assert_false(g.nofile_lowered);
	hello_or_refused(pending);	/* taken in by now, or refused */
	conn_close(pending);
	assert_status(resize_cq(s, cq, 64), 0);
	assert_status(create_cq(s, 16, 0, 0, 0, -1, NULL), 0);
	assert_status(cmd_handle(s, SV_CMD_DESTROY_CQ, cq), 0);
	assert_status(cmd_handle(s, SV_CMD_DEALLOC_PD, pd), 0);
	conn_close(s);
#undef PROBLEM
	if (problems[0])
		fail_msg("%s", problems);
	check_clean();
}

/* ---- random messages ---- */

struct fuzz {
	uint64_t handles[64];	/* issued to the fuzz connection */
	unsigned int nhandles;
	char *buf;		/* memory of ours to register */
	size_t buf_len;
};

static uint64_t fuzz_u64(struct fuzz *f)
{
	uint64_t r = rnd();

	switch (r % 16) {
	case 0:
		return 0;
	case 1:
		return ~0ull;
	case 2:
		return (uintptr_t)f->buf + (r >> 8) % f->buf_len;
	case 3:
		return f->buf_len >> ((r >> 8) % 16);
	case 4:
		return SV_TEST_MAX_MR_SIZE + ((r >> 8) % 3) - 1;
	case 5:
	case 6:
	case 7:
		if (f->nhandles)
			return f->handles[(r >> 8) % f->nhandles];
		return 1;
	case 8:
	case 9:
		return rnd();
	default: {
		/* two small 32-bit values */
		static const uint32_t small[] = {
			0, 1, 2, 3, 4, 7, 16, 255, 65535, 65536, ~0u, 1u << 31,
		};
		uint64_t lo = small[(r >> 8) % 12], hi = small[(r >> 16) % 12];

		return hi << 32 | lo;
	}
	}
}

static void fuzz_keep_handle(struct fuzz *f, uint64_t h)
{
	if (!h)
		return;
	if (f->nhandles < 64)
		f->handles[f->nhandles++] = h;
	else
		f->handles[rnd() % 64] = h;
}

/* REPLY_CHANNEL with a fresh pair's end, answered on it: its status; the
 * pair's other end stays open in *mine. */
static int reply_channel(int s, int *mine)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int fd = event_pair(mine);
	ssize_t n;

	sv_cmd_init(&cmd, SV_CMD_REPLY_CHANNEL);
	cmd.hdr.seq = seq_next++;
	assert_int_equal(sv_send_msg(s, &cmd, sizeof(cmd), fd, 0), 0);
	close(fd);
	n = recv_rsp(*mine, &rsp, &fd);
	assert_int_equal(n, sizeof(rsp));
	check_rsp_hdr(&rsp, SV_CMD_REPLY_CHANNEL, cmd.hdr.seq);
	assert_int_equal(fd, -1);
	if (!rsp.hdr.status)
		assert_true(rsp.u.obj.handle >= 1 &&
			    rsp.u.obj.handle <= SV_MAX_REPLY_CHANS);
	return rsp.hdr.status;
}

/*
 * REPLY_CHANNEL (a process that shares a connection since a fork gets its
 * responses apart): answered on the channel it brings; without a seqpacket
 * socket refused on the connection; a command naming a channel the client
 * does not have is refused on the connection, and not run; one naming its
 * channel is answered there, and nothing comes on the connection.
 */
static void test_reply_channel(void **state)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int s = conn_open(), mine, fd, p[2], mines[SV_MAX_REPLY_CHANS];
	uint32_t chan;
	unsigned int i;
	ssize_t n;

	(void)state;
	assert_status(hello(s, SV_PROTO_VERSION, 0, NULL), 0);
	sv_cmd_init(&cmd, SV_CMD_REPLY_CHANNEL);
	assert_status(xfer_fd(s, &cmd, -1, &rsp, NULL), -EINVAL);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	sv_cmd_init(&cmd, SV_CMD_REPLY_CHANNEL);
	assert_status(xfer_fd(s, &cmd, p[0], &rsp, NULL), -EINVAL);
	close(p[0]);
	close(p[1]);
	/* a channel the client does not have: refused on the connection */
	sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
	cmd.hdr.chan = 7;
	assert_status(xfer_fd(s, &cmd, -1, &rsp, NULL), -EINVAL);
	/* one of its own */
	fd = event_pair(&mine);
	sv_cmd_init(&cmd, SV_CMD_REPLY_CHANNEL);
	cmd.hdr.seq = seq_next++;
	assert_int_equal(sv_send_msg(s, &cmd, sizeof(cmd), fd, 0), 0);
	close(fd);
	n = recv_rsp(mine, &rsp, &fd);
	assert_int_equal(n, sizeof(rsp));
	check_rsp_hdr(&rsp, SV_CMD_REPLY_CHANNEL, cmd.hdr.seq);
	assert_status(rsp.hdr.status, 0);
	assert_int_equal(fd, -1);
	assert_true(rsp.u.obj.handle >= 1 &&
		    rsp.u.obj.handle <= SV_MAX_REPLY_CHANS);
	chan = (uint32_t)rsp.u.obj.handle;
	sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
	cmd.hdr.seq = seq_next++;
	cmd.hdr.chan = chan;
	assert_int_equal(sv_send_msg(s, &cmd, sizeof(cmd), -1, 0), 0);
	n = recv_rsp(mine, &rsp, &fd);
	assert_int_equal(n, sizeof(rsp));
	check_rsp_hdr(&rsp, SV_CMD_ALLOC_PD, cmd.hdr.seq);
	assert_status(rsp.hdr.status, 0);
	assert_false(readable(s, 0));
	/* its process gone: the response is lost, the connection stays */
	close(mine);
	sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
	cmd.hdr.seq = seq_next++;
	cmd.hdr.chan = chan;
	assert_int_equal(sv_send_msg(s, &cmd, sizeof(cmd), -1, 0), 0);
	sv_cmd_init(&cmd, SV_CMD_QUERY_DEVICE);
	assert_status(xfer_fd(s, &cmd, -1, &rsp, NULL), 0);
	/* as many live ones as there are; then ENOMEM, on the channel; one
	 * whose processes have gone is taken again */
	for (i = 0; i < SV_MAX_REPLY_CHANS; i++)
		assert_status(reply_channel(s, &mines[i]), 0);
	assert_status(reply_channel(s, &mine), -ENOMEM);
	close(mine);
	close(mines[SV_MAX_REPLY_CHANS / 2]);
	assert_status(reply_channel(s, &mines[SV_MAX_REPLY_CHANS / 2]), 0);
	for (i = 0; i < SV_MAX_REPLY_CHANS; i++)
		close(mines[i]);
	assert_false(readable(s, 0));
	conn_close(s);
}

static void test_fuzz(void **state)
{
	static const int ok_status[] = {
		0, -EINVAL, -EPERM, -EBUSY, -EFAULT, -ENOMEM, -EPROTO,
		-EOPNOTSUPP, -ENOENT, -EEXIST,
	};
	const char *env_seed = getenv("SV_FUZZ_SEED");
	const char *env_iters = getenv("SV_FUZZ_ITERS");
	uint64_t seed = env_seed ? strtoull(env_seed, NULL, 0) : 20240601;
	unsigned long iters = env_iters ? strtoul(env_iters, NULL, 0) : 20000;
	unsigned int reconnects = 0, refused = 0, accepted = 0;
	union {
		struct sv_cmd cmd;
		uint8_t b[320];
	} m;
	struct fuzz f = { .buf_len = 1 << 16 };
	struct sv_rsp rsp;
	int s = conn_open(), p[2], fd;
	double t0 = now_s();
	unsigned long i;

	(void)state;
	rnd_state = seed ? seed : 1;
	memset(&m, 0, sizeof(m));
	f.buf = malloc(f.buf_len);
	assert_non_null(f.buf);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	print_message("fuzz: seed %" PRIu64 ", %lu messages\n", seed, iters);
	for (i = 0; i < iters; i++) {
		uint64_t r = rnd();
		size_t len, k;
		int fd_in = -1, mine = -1;
		bool valid_hdr = r % 4 != 0;
		ssize_t n;

		if (valid_hdr) {
			sv_cmd_init(&m.cmd, (unsigned int)((r >> 8) %
							  (SV_CMD_MAX + 2)));
			for (k = 0; k < sizeof(m.cmd.u.raw) / 8; k++) {
				uint64_t v = fuzz_u64(&f);

				memcpy(m.cmd.u.raw + 8 * k, &v, 8);
			}
			if ((r >> 16) % 16 == 0)	/* a flipped bit */
				m.b[(r >> 20) % sizeof(m.cmd)] ^=
					(uint8_t)(1u << ((r >> 32) % 8));
			len = (r >> 24) % 10 ? sizeof(m.cmd) :
					       (size_t)((r >> 36) % 301);
		} else {
			len = (size_t)((r >> 8) % 301);
			for (k = 0; k < sizeof(m.b); k += 8) {
				uint64_t v = rnd();

				memcpy(m.b + k, &v, 8);
			}
		}
		m.cmd.hdr.seq = (uint32_t)i;
		if (valid_hdr) /* reply channels: test_reply_channel */
			m.cmd.hdr.chan = 0;
		if ((r >> 40) % 32 == 0)
			fd_in = (r >> 45) % 2 ? p[0] : event_pair(&mine);
		assert_int_equal(sv_send_msg(s, &m, len, fd_in, 0), 0);
		if (mine >= 0)
			close(fd_in);
		/* a reply channel is answered on itself */
		if (mine >= 0 && sv_cmd_check(&m.cmd, len) == SV_CMD_OK &&
		    m.cmd.hdr.op == SV_CMD_REPLY_CHANNEL)
			n = recv_rsp(mine, &rsp, &fd);
		else
			n = recv_rsp(s, &rsp, &fd);
		if (mine >= 0)
			close(mine);
		if (n == 0 && len == 0) {	/* see test_zero_length */
			conn_close(s);
			s = conn_open();
			reconnects++;
			continue;
		}
		if (n != (ssize_t)sizeof(rsp))
			fail_msg("message %lu (%zu bytes): response of %zd",
				 i, len, n);
		assert_int_equal(rsp.hdr.magic, SV_PROTO_MAGIC);
		assert_int_equal(rsp.hdr.version, SV_PROTO_VERSION);
		if (len >= sizeof(m.cmd.hdr)) {
			assert_int_equal(rsp.hdr.seq, m.cmd.hdr.seq);
			assert_int_equal(rsp.hdr.op, m.cmd.hdr.op);
		} else {
			assert_int_equal(rsp.hdr.seq, 0);
			assert_int_equal(rsp.hdr.op, 0);
		}
		if (sv_cmd_check(&m.cmd, len) != SV_CMD_OK) {
			assert_status(rsp.hdr.status, -EINVAL);
		} else {
			for (k = 0; k < sizeof(ok_status) / sizeof(int); k++)
				if (rsp.hdr.status == ok_status[k])
					break;
			if (k == sizeof(ok_status) / sizeof(int))
				fail_msg("message %lu (%s): status %d", i,
					 sv_cmd_name(m.cmd.hdr.op),
					 rsp.hdr.status);
		}
		if (rsp.hdr.status) {
			refused++;
			assert_int_equal(fd, -1);
		} else {
			accepted++;
			fuzz_keep_handle(&f, rsp.u.obj.handle);
		}
		if (fd >= 0)
			close(fd);
	}
	print_message("fuzz: %u accepted, %u refused, %u reconnects, %.1f s\n",
		      accepted, refused, reconnects, now_s() - t0);
	assert_status(hello(s, SV_PROTO_VERSION, 0, NULL), 0);
	/* and it still creates things */
	assert_status(create_channel(s, NULL), 0);
	/* random INJECTs may have armed faults or taken the port down, as a
	 * test script may: disarmed, as such a script does at its end */
	{
		struct sv_cmd cmd;
		struct sv_rsp rsp;

		sv_cmd_init(&cmd, SV_CMD_INJECT);
		cmd.u.inject.kind = SV_INJ_CLEAR;
		assert_status(xfer(s, &cmd, &rsp), 0);
		assert_int_equal(rsp.u.inject.armed, 0);
	}
	conn_close(s);
	close(p[0]);
	close(p[1]);
	free(f.buf);
	check_clean();
}

/* After all of that: a fresh client is served, and refusals were counted. */
static void test_after_all(void **state)
{
	struct sv_rsp_stat st;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int s = conn_open();

	(void)state;
	assert_status(hello(s, SV_PROTO_VERSION, 0, &rsp), 0);
	assert_int_equal(rsp.u.hello.daemon_pid, (uint32_t)g.pid);
	sv_cmd_init(&cmd, SV_CMD_QUERY_DEVICE);
	assert_status(xfer(s, &cmd, &rsp), 0);
	assert_int_equal(rsp.u.dev.max_cqe, SV_TEST_MAX_CQE);
	assert_int_equal(rsp.u.dev.max_comp_vectors, 1);
	assert_true(rsp.u.dev.max_mr_size == SV_TEST_MAX_MR_SIZE);
	stat_get(s, &st);
	print_message("commands refused: %" PRIu64 "\n", st.refused);
	assert_true(st.refused > 0);
	assert_int_equal(st.nclients, 2);
	assert_int_equal(st.daemon_pid, (uint32_t)g.pid);
	conn_close(s);
	check_clean();
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
		T(test_truncated),
		T(test_oversized),
		T(test_zero_length),
		T(test_bad_header),
		T(test_hello),
		T(test_query),
		T(test_reg_mr),
		T(test_reg_mr_mapping),
		T(test_rereg_mr),
		T(test_destroy),
		T(test_cq),
		T(test_fd_commands),
		T(test_fd_leak),
		T(test_other_client),
		T(test_probe),
		T(test_create_qp),
		T(test_domain),
		T(test_domain_exclusive),
		T(test_modify_qp),
		T(test_direct_est),
		T(test_direct_recv),
		T(test_srq_cmds),
		T(test_xrc_cmds),
		T(test_ah_cmds),
		T(test_other_client_qp),
		T(test_mm_caps),
		T(test_mm_objects),
		T(test_reg_mr_list),
		T(test_mm_probe),
		T(test_flood_no_read),
		T(test_flood_reading),
		T(test_half_close),
		T(test_fd_limit),
		T(test_reply_channel),
		T(test_fuzz),
		T(test_after_all),
	};
	int failed;

	failed = cmocka_run_group_tests(tests, daemon_setup, daemon_teardown);
	return failed || g.failed ? 1 : 0;
}
