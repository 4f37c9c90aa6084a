// SPDX-License-Identifier: MIT
/*
 * Importing a context and its objects (issue 23, Deliver 3): a process
 * (the exporter) passes its context's cmd_fd to another (the importer),
 * which imports the device, the PD, an MR and a DM, and moves data through
 * them.
 *
 *   - forged descriptors refused: -1 (EBADF), a memfd of the importer's own,
 *     the exporter's async_fd (EINVAL); the descriptor stays the caller's;
 *   - forged handles refused (EINVAL): a PD handle changed, a handle of
 *     another type, 0, an MR imported into a PD it does not lie in;
 *   - the imported PD, MR and DM are the exporter's: same handles, keys and
 *     length, the MR's addr NULL (as rdma-core's); the DM's bytes are the
 *     ones the exporter wrote, and the importer's writes reach the exporter;
 *   - traffic through the imports: an RC QP made by the importer on the
 *     imported PD WRITEs from its own MR into the exporter's MR with the
 *     imported rkey, WRITEs from the exporter's memory (the imported lkey)
 *     into it, and READs it back; the exporter checks every byte;
 *   - unimport frees only the importer's view: the keys still work;
 *   - a destroy by either side ends the object for both: the importer's
 *     ibv_dealloc_pd of an imported PD frees the exporter's; the
 *     exporter's dereg makes the importer's next WRITE a remote access
 *     error;
 *   - an importer that exits without cleaning up takes only its own
 *     objects: the exporter's PD and DM live on;
 *   - the exporter cannot free its PD while the importer's QP and MR are on
 *     it (EBUSY); it closes its context with them there: the importer's
 *     commands then fail with EIO,
 *     its destroys succeed (the device freed its objects), and it closes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vu.h"

#define BUF 8192u

static const struct vu_qp_caps caps = {
	.send_wr = 16, .recv_wr = 16, .send_sge = 1, .recv_sge = 1,
};

struct share {
	uint32_t pd, pd2, mr, dm;
	uint32_t lkey, rkey;
	uint64_t mr_len, buf;
	struct vu_addr qa;
};

static void send_fd(int sock, int fd)
{
	char byte = 'f';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.b, .msg_controllen = sizeof(u.b) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	memset(&u, 0, sizeof(u));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	VU_CHECK(sendmsg(sock, &m, 0) == 1, "sendmsg: %s", strerror(errno));
}

static int recv_fd(int sock)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.b, .msg_controllen = sizeof(u.b) };
	struct cmsghdr *c;
	int fd = -1;

	VU_CHECK(recvmsg(sock, &m, MSG_CMSG_CLOEXEC) == 1, "recvmsg: %s",
		 strerror(errno));
	c = CMSG_FIRSTHDR(&m);
	VU_CHECK(c && c->cmsg_type == SCM_RIGHTS, "no descriptor came");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static void say(int sock, char what)
{
	vu_xfer_all(sock, &what, 1, true);
}

static void hear(int sock, char what)
{
	char got;

	vu_xfer_all(sock, &got, 1, false);
	VU_CHECK(got == what, "expected step '%c', got '%c'", what, got);
}

static void refused_fd(int fd, int err, const char *what)
{
	errno = 0;
	VU_CHECK(!ibv_import_device(fd) && errno == err,
		 "import of %s: errno %d, not %d", what, errno, err);
}

/* A second importer that makes objects of its own on the imported PD and
 * exits without freeing anything. */
static void careless(int sock)
{
	struct share s;
	struct ibv_context *ictx;
	struct ibv_pd *ipd, *own;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	static uint8_t b[4096];
	int fd = recv_fd(sock);

	vu_xfer_all(sock, &s, sizeof(s), false);
	ictx = ibv_import_device(fd);
	VU_CHECK(ictx, "careless import: %s", strerror(errno));
	ipd = ibv_import_pd(ictx, s.pd);
	own = ibv_alloc_pd(ictx);
	cq = ibv_create_cq(ictx, 8, NULL, NULL, 0);
	VU_CHECK(ipd && own && cq, "careless objects: %s", strerror(errno));
	mr = ibv_reg_mr(ipd, b, sizeof(b), IBV_ACCESS_LOCAL_WRITE);
	VU_CHECK(mr, "careless MR on the imported PD: %s", strerror(errno));
	_exit(0);
}

static void importer(int sock)
{
	struct ibv_context *ictx;
	struct ibv_pd *ipd, *own, *p;
	struct ibv_mr *imr, *bmr;
	struct ibv_dm *idm;
	struct vu_conn conn = vu_conn_default();
	struct vu_ep eb;
	struct share s;
	uint8_t *bbuf, tmp[2048];
	int cmd_fd, async_fd, mfd;

	cmd_fd = recv_fd(sock);
	async_fd = recv_fd(sock);
	vu_xfer_all(sock, &s, sizeof(s), false);

	/* forged descriptors, and the caller keeps its descriptor */
	refused_fd(-1, EBADF, "-1");
	mfd = memfd_create("not-a-context", MFD_CLOEXEC);
	VU_CHECK(mfd >= 0, "memfd_create");
	refused_fd(mfd, EINVAL, "a memfd of our own");
	refused_fd(async_fd, EINVAL, "the exporter's async_fd");
	VU_CHECK(fcntl(async_fd, F_GETFD) >= 0 && fcntl(mfd, F_GETFD) >= 0,
		 "a refused import closed the caller's descriptor");
	close(mfd);
	close(async_fd);

	ictx = ibv_import_device(cmd_fd);
	VU_CHECK(ictx, "ibv_import_device: %s", strerror(errno));
	VU_CHECK(ictx->cmd_fd == cmd_fd, "cmd_fd %d, not the one given %d",
		 ictx->cmd_fd, cmd_fd);

	/* forged handles */
	errno = 0;
	VU_CHECK(!ibv_import_pd(ictx, s.pd ^ 0x5) && errno == EINVAL,
		 "a changed PD handle: errno %d", errno);
	VU_CHECK(!ibv_import_pd(ictx, s.mr) && errno == EINVAL,
		 "an MR handle as a PD: errno %d", errno);
	VU_CHECK(!ibv_import_pd(ictx, 0) && errno == EINVAL, "handle 0");
	VU_CHECK(!ibv_import_dm(ictx, s.pd) && errno == EINVAL,
		 "a PD handle as a DM: errno %d", errno);

	ipd = ibv_import_pd(ictx, s.pd);
	VU_CHECK(ipd && ipd->handle == s.pd && ipd->context == ictx,
		 "ibv_import_pd: %s", strerror(errno));
	VU_CHECK(!ibv_import_mr(ipd, s.pd) && errno == EINVAL,
		 "a PD handle as an MR: errno %d", errno);
	own = ibv_alloc_pd(ictx);
	VU_CHECK(own, "a PD of the importer's own: %s", strerror(errno));
	VU_CHECK(!ibv_import_mr(own, s.mr) && errno == EINVAL,
		 "an MR imported into a PD it does not lie in: errno %d",
		 errno);
	imr = ibv_import_mr(ipd, s.mr);
	VU_CHECK(imr, "ibv_import_mr: %s", strerror(errno));
	VU_CHECK(imr->handle == s.mr && imr->lkey == s.lkey &&
		 imr->rkey == s.rkey && imr->length == s.mr_len &&
		 !imr->addr && imr->pd == ipd && imr->context == ictx,
		 "the imported MR is not the exporter's");

	idm = ibv_import_dm(ictx, s.dm);
	VU_CHECK(idm && idm->handle == s.dm, "ibv_import_dm: %s",
		 strerror(errno));
	VU_CHECK(!ibv_memcpy_from_dm(tmp, idm, 0, sizeof(tmp)), "from dm");
	vu_expect(tmp, 1, sizeof(tmp), "the exporter's DM, read here");
	vu_fill(tmp, 4, sizeof(tmp));
	VU_CHECK(!ibv_memcpy_to_dm(idm, 2048, tmp, sizeof(tmp)), "to dm");

	/* a QP of our own on the imported PD, towards the exporter's */
	VU_CHECK(!vu_ep_create(&eb, ictx, ipd, IBV_QPT_RC, &caps), "ep");
	{
		struct vu_addr qb = vu_addr_of(eb.qp, 0);

		vu_xfer_all(sock, &qb, sizeof(qb), true);
	}
	VU_CHECK(!vu_connect(eb.qp, &s.qa, &conn), "connect");
	bbuf = aligned_alloc(4096, BUF);
	VU_CHECK(bbuf, "alloc");
	vu_fill(bbuf, 3, 4096);
	memset(bbuf + 4096, 0, 4096);
	bmr = ibv_reg_mr(ipd, bbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
	VU_CHECK(bmr, "an MR of ours on the imported PD: %s", strerror(errno));

	VU_CHECK(vu_post_one(&eb, IBV_WR_RDMA_WRITE, 7, (uintptr_t)bbuf, bmr->lkey, 4096,
		      s.buf, imr->rkey) == IBV_WC_SUCCESS,
		 "WRITE into the imported MR");
	VU_CHECK(vu_post_one(&eb, IBV_WR_RDMA_WRITE, 7, s.buf, imr->lkey, 4096,
		      s.buf + 4096, imr->rkey) == IBV_WC_SUCCESS,
		 "WRITE from the imported MR's memory into it");
	VU_CHECK(vu_post_one(&eb, IBV_WR_RDMA_READ, 7, (uintptr_t)bbuf + 4096,
		      bmr->lkey, 4096, s.buf + 4096, imr->rkey) ==
		 IBV_WC_SUCCESS, "READ of the imported MR");
	vu_expect(bbuf + 4096, 3, 4096, "READ back");
	say(sock, 'W');
	hear(sock, 'w');

	/* unimport frees our view only */
	ibv_unimport_mr(imr);
	ibv_unimport_dm(idm);
	VU_CHECK(vu_post_one(&eb, IBV_WR_RDMA_READ, 7, (uintptr_t)bbuf + 4096,
		      bmr->lkey, 4096, s.buf, s.rkey) == IBV_WC_SUCCESS,
		 "the key after ibv_unimport_mr");

	/* a destroy through an import ends the object for both */
	p = ibv_import_pd(ictx, s.pd2);
	VU_CHECK(p, "import the second PD: %s", strerror(errno));
	VU_CHECK(!ibv_dealloc_pd(p), "dealloc of an imported PD");
	say(sock, 'D');
	hear(sock, 'd');              /* the exporter deregistered its MR */
	VU_CHECK(vu_post_one(&eb, IBV_WR_RDMA_WRITE, 7, (uintptr_t)bbuf, bmr->lkey, 64,
		      s.buf, s.rkey) == IBV_WC_REM_ACCESS_ERR,
		 "a WRITE through a key the exporter deregistered");
	say(sock, 'E');
	hear(sock, 'c');              /* the exporter closed its context */

	/* the device sees the exporter's socket close when it next polls:
	 * until then its objects are there (a bound, not a timing) */
	for (long t0 = vu_now_ms();;) {
		errno = 0;
		p = ibv_import_pd(ictx, s.pd);
		if (!p)
			break;
		ibv_unimport_pd(p);
		VU_CHECK(vu_now_ms() - t0 < VU_WAIT_MS,
			 "the exporter's PD outlives its context");
		vu_sleep_ms(5);
	}
	VU_CHECK(errno == EIO, "an import after the exporter closed: errno %d",
		 errno);
	errno = 0;
	VU_CHECK(!ibv_alloc_pd(ictx) && errno == EIO,
		 "a command after the exporter closed: errno %d", errno);
	/* the PD's struct goes before the objects made on it, as pyverbs'
	 * test_shared_pd does it: nothing may read it after */
	ibv_unimport_pd(ipd);
	VU_CHECK(!ibv_dereg_mr(bmr), "dereg after the exporter closed");
	vu_ep_destroy(&eb);
	VU_CHECK(!ibv_dealloc_pd(own), "dealloc after the exporter closed");
	VU_CHECK(!ibv_close_device(ictx), "close");
	free(bbuf);
	say(sock, 'Z');
	exit(0);
}

static pid_t spawn(void (*fn)(int), int *sock)
{
	int sp[2];
	pid_t pid;

	VU_CHECK(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp),
		 "socketpair");
	pid = fork();
	VU_CHECK(pid >= 0, "fork");
	if (!pid) {
		close(sp[0]);
		fn(sp[1]);
		exit(0);
	}
	close(sp[1]);
	*sock = sp[0];
	return pid;
}

static void reap(pid_t pid, const char *who)
{
	int st;

	VU_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		 !WEXITSTATUS(st), "the %s failed", who);
}

int main(void)
{
	struct ibv_context *ctx;
	struct ibv_alloc_dm_attr da = { .length = 4096 };
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *mr, *mr2;
	struct ibv_dm *dm;
	struct vu_conn conn = vu_conn_default();
	struct vu_addr qb;
	struct vu_ep ea;
	struct share s;
	uint8_t *buf, tmp[2048];
	int sock, sock2, fd;
	pid_t child, child2;

	/* forked before the context is opened: a child holds no share of
	 * the exporter's connection (as it would after a fork) */
	child2 = spawn(careless, &sock2);
	child = spawn(importer, &sock);
	ctx = vu_open();
	VU_CHECK(ctx, "no device");
	VU_CHECK(ctx->cmd_fd >= 0 && ctx->cmd_fd != ctx->async_fd,
		 "cmd_fd %d", ctx->cmd_fd);
	pd = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	buf = aligned_alloc(4096, BUF);
	VU_CHECK(pd && pd2 && buf, "pd, buf");
	memset(buf, 0, BUF);
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	VU_CHECK(mr, "reg_mr: %s", strerror(errno));
	dm = ibv_alloc_dm(ctx, &da);
	VU_CHECK(dm, "alloc_dm: %s", strerror(errno));
	vu_fill(tmp, 1, sizeof(tmp));
	VU_CHECK(!ibv_memcpy_to_dm(dm, 0, tmp, sizeof(tmp)), "to dm");
	VU_CHECK(!vu_ep_create(&ea, ctx, pd, IBV_QPT_RC, &caps), "ep");

	memset(&s, 0, sizeof(s));
	s.pd = pd->handle;
	s.pd2 = pd2->handle;
	s.mr = mr->handle;
	s.dm = dm->handle;
	s.lkey = mr->lkey;
	s.rkey = mr->rkey;
	s.mr_len = mr->length;
	s.buf = (uintptr_t)buf;
	s.qa = vu_addr_of(ea.qp, 0);

	/* an importer that leaves without cleaning up takes only its own */
	fd = dup(ctx->cmd_fd);
	send_fd(sock2, fd);
	close(fd);
	vu_xfer_all(sock2, &s, sizeof(s), true);
	reap(child2, "careless importer");
	close(sock2);
	mr2 = ibv_reg_mr(pd, tmp, sizeof(tmp), IBV_ACCESS_LOCAL_WRITE);
	VU_CHECK(mr2, "the PD after a careless importer left: %s",
		 strerror(errno));
	VU_CHECK(!ibv_dereg_mr(mr2), "dereg");
	VU_CHECK(!ibv_memcpy_from_dm(tmp, dm, 0, sizeof(tmp)), "from dm");
	vu_expect(tmp, 1, sizeof(tmp), "the DM after a careless importer left");

	fd = dup(ctx->cmd_fd);
	send_fd(sock, fd);
	close(fd);
	send_fd(sock, ctx->async_fd);
	vu_xfer_all(sock, &s, sizeof(s), true);
	vu_xfer_all(sock, &qb, sizeof(qb), false);
	VU_CHECK(!vu_connect(ea.qp, &qb, &conn), "connect");

	hear(sock, 'W');
	vu_expect(buf, 3, 4096, "the importer's WRITE");
	vu_expect(buf + 4096, 3, 4096, "the WRITE from our memory");
	VU_CHECK(!ibv_memcpy_from_dm(tmp, dm, 2048, sizeof(tmp)), "from dm");
	vu_expect(tmp, 4, sizeof(tmp), "the importer's write into the DM");
	say(sock, 'w');

	hear(sock, 'D');
	errno = 0;
	VU_CHECK(ibv_dealloc_pd(pd2) == EINVAL,
		 "the PD the importer freed is still here");
	ibv_unimport_pd(pd2);         /* what is left of it: our struct */
	VU_CHECK(!ibv_dereg_mr(mr), "dereg");
	say(sock, 'd');
	hear(sock, 'E');

	vu_ep_destroy(&ea);
	VU_CHECK(!ibv_free_dm(dm), "free_dm");
	/* the importer's QP and MR are on it, as on the kernel's device */
	VU_CHECK(ibv_dealloc_pd(pd) == EBUSY,
		 "a PD the importer's objects are on freed");
	VU_CHECK(!ibv_close_device(ctx), "close");
	ibv_unimport_pd(pd);          /* the device freed it with ctx */
	say(sock, 'c');
	hear(sock, 'Z');
	reap(child, "importer");
	free(buf);
	printf("PASS: import of device, PD, MR and DM\n");
	return 0;
}
