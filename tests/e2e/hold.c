// SPDX-License-Identifier: MIT
/*
 * A verbs client for the end-to-end tests: opens sv0, creates objects, says
 * which daemon it is talking to, then either exits cleanly (--once) or holds
 * everything until it is killed.
 *   hold [--pd N] [--mr N] [--cq N] [--qp N] [--once] [--barrier FILE]
 * --qp: RC QPs on the first CQ, taken to INIT; their numbers are printed
 * (qpn=N) before "ready".
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* The pid at the other end of our connection to the device: the socket of
 * ours whose peer is bound to a path (the control socket; the context's
 * other sockets are socketpairs). -1 when there is none. */
static int daemon_pid_of_connection(void)
{
	for (int fd = 0; fd < 4096; fd++) {
		struct sockaddr_un sa;
		socklen_t len = sizeof(sa);
		struct ucred cr;
		int type;

		len = sizeof(type);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) ||
		    type != SOCK_SEQPACKET)
			continue;
		len = sizeof(sa);
		memset(&sa, 0, sizeof(sa));
		if (getpeername(fd, (struct sockaddr *)&sa, &len) ||
		    sa.sun_family != AF_UNIX || len <= sizeof(sa_family_t) ||
		    !sa.sun_path[0])
			continue;
		len = sizeof(cr);
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) &&
		    cr.pid != getpid())
			return (int)cr.pid;
	}
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pd", required_argument, NULL, 'p' },
		{ "mr", required_argument, NULL, 'm' },
		{ "cq", required_argument, NULL, 'c' },
		{ "qp", required_argument, NULL, 'q' },
		{ "once", no_argument, NULL, 'o' },
		{ "barrier", required_argument, NULL, 'b' },
		{ 0 }
	};
	int npd = 1, nmr = 1, ncq = 1, nqp = 0, once = 0, c, n;
	const char *barrier = NULL;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd **pd;
	struct ibv_mr **mr;
	struct ibv_cq **cq;
	struct ibv_qp **qp;
	struct ibv_comp_channel *ch;
	int dpid;
	static char buf[1 << 16];

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p': npd = atoi(optarg); break;
		case 'm': nmr = atoi(optarg); break;
		case 'c': ncq = atoi(optarg); break;
		case 'q': nqp = atoi(optarg); break;
		case 'o': once = 1; break;
		case 'b': barrier = optarg; break;
		default: return 2;
		}
	}
	if (npd < 1 || nmr < 0 || ncq < 0 || nqp < 0 || (nqp && !ncq))
		return 2;
	if (barrier) {
		struct stat st;

		while (stat(barrier, &st))
			usleep(500);
	}
	list = ibv_get_device_list(&n);
	if (!list || n != 1)
		die("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	ibv_free_device_list(list);
	pd = calloc((size_t)npd, sizeof(*pd));
	mr = calloc((size_t)nmr + 1, sizeof(*mr));
	cq = calloc((size_t)ncq + 1, sizeof(*cq));
	for (int i = 0; i < npd; i++)
		if (!(pd[i] = ibv_alloc_pd(ctx)))
			die("ibv_alloc_pd");
	for (int i = 0; i < nmr; i++)
		if (!(mr[i] = ibv_reg_mr(pd[i % npd], buf, sizeof(buf),
					 IBV_ACCESS_LOCAL_WRITE |
					 IBV_ACCESS_REMOTE_WRITE)))
			die("ibv_reg_mr");
	ch = ibv_create_comp_channel(ctx);
	if (!ch)
		die("ibv_create_comp_channel");
	for (int i = 0; i < ncq; i++)
		if (!(cq[i] = ibv_create_cq(ctx, 64, NULL, i ? NULL : ch, 0)))
			die("ibv_create_cq");
	qp = calloc((size_t)nqp + 1, sizeof(*qp));
	for (int i = 0; i < nqp; i++) {
		struct ibv_qp_init_attr a = {
			.send_cq = cq[0], .recv_cq = cq[0], .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 16, .max_recv_wr = 16,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};
		struct ibv_qp_attr m = {
			.qp_state = IBV_QPS_INIT, .port_num = 1,
			.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
		};

		if (!(qp[i] = ibv_create_qp(pd[0], &a)))
			die("ibv_create_qp");
		if (ibv_modify_qp(qp[i], &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			die("ibv_modify_qp");
		printf("qpn=%u\n", qp[i]->qp_num);
	}
	dpid = daemon_pid_of_connection();
	if (dpid < 0)
		die("no connection to the device");
	printf("daemon_pid=%d\nready\n", dpid);
	fflush(stdout);
	if (!once)
		for (;;)
			pause();
	for (int i = 0; i < nqp; i++)
		if (ibv_destroy_qp(qp[i]))
			die("ibv_destroy_qp");
	for (int i = 0; i < ncq; i++)
		if (ibv_destroy_cq(cq[i]))
			die("ibv_destroy_cq");
	if (ibv_destroy_comp_channel(ch))
		die("ibv_destroy_comp_channel");
	for (int i = 0; i < nmr; i++)
		if (ibv_dereg_mr(mr[i]))
			die("ibv_dereg_mr");
	for (int i = 0; i < npd; i++)
		if (ibv_dealloc_pd(pd[i]))
			die("ibv_dealloc_pd");
	if (ibv_close_device(ctx))
		die("ibv_close_device");
	free(pd);
	free(mr);
	free(cq);
	free(qp);
	return 0;
}
