// SPDX-License-Identifier: MIT
/*
 * Descriptors (issue 35, item 5; docs/DESIGN.md "Memory"): the device's
 * descriptors grow with its clients, not with its objects, and where they
 * do run out the program hears ENOMEM or EMFILE, never EINVAL.
 *
 *   test_nofile          the daemon starts under a soft RLIMIT_NOFILE of
 *                        256 (the hard one stays): it raises the soft one to
 *                        the hard one; one process makes 2100 CQs and 2100
 *                        QPs on one context and 300 of each on a second,
 *                        all succeed, and the daemon's open descriptors grow
 *                        by a handful, not per ring (and so do the
 *                        process's mappings); everything is freed and
 *                        made again (freed ring space is reused, clean).
 *   test_nofile limit    the daemon starts under a hard limit it cannot
 *                        pass: contexts are opened until one is refused,
 *                        and that refusal is EMFILE; objects are made on the
 *                        contexts held until one is refused, and that is
 *                        ENOMEM; the log says why, and the contexts held
 *                        keep working once some descriptors are back.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define NOBJ    2100
#define NOBJ2   300
#define MAX_CTX 200

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	VU_CHECK(d, "%s: %s", path, strerror(errno));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Our own mappings: each pool of rings is mapped once, not each ring. */
static int count_maps(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	VU_CHECK(f, "maps");
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n;
}

static unsigned long long soft_nofile(pid_t pid)
{
	struct rlimit rl;

	VU_CHECK(!prlimit(pid, RLIMIT_NOFILE, NULL, &rl), "prlimit: %s",
		 strerror(errno));
	return (unsigned long long)rl.rlim_cur;
}

static bool log_has(const char *what, const char *and_what)
{
	const char *dir = getenv("SV_TEST_DIR");
	char path[512], line[1024];
	bool found = false;
	FILE *f;

	VU_CHECK(dir && *dir, "SV_TEST_DIR is not set (run through isolated.sh)");
	snprintf(path, sizeof(path), "%s/softverbsd.log", dir);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, what) && strstr(line, and_what);
	fclose(f);
	return found;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &a);
}

struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq **cq;
	struct ibv_qp **qp;
	int n;
};

static void make_all(struct objs *o, int n)
{
	o->cq = calloc((size_t)n, sizeof(*o->cq));
	o->qp = calloc((size_t)n, sizeof(*o->qp));
	VU_CHECK(o->cq && o->qp, "calloc");
	for (int i = 0; i < n; i++) {
		o->cq[i] = ibv_create_cq(o->ctx, 8, NULL, NULL, 0);
		VU_CHECK(o->cq[i], "CQ %d: %s", i, strerror(errno));
		o->qp[i] = make_qp(o->pd, o->cq[i]);
		VU_CHECK(o->qp[i], "QP %d: %s", i, strerror(errno));
		o->n = i + 1;
	}
}

static void free_all(struct objs *o)
{
	for (int i = 0; i < o->n; i++) {
		VU_CHECK(!ibv_destroy_qp(o->qp[i]), "destroy qp %d", i);
		VU_CHECK(!ibv_destroy_cq(o->cq[i]), "destroy cq %d", i);
	}
	free(o->cq);
	free(o->qp);
	o->cq = NULL;
	o->qp = NULL;
	o->n = 0;
}

/* A fresh CQ's ring starts clean: nothing to poll; a fresh QP's rings
 * take WRs (a receive posts, a send to a QP in RESET is refused). */
static void check_fresh(struct objs *o)
{
	struct ibv_wc wc;

	for (int i = 0; i < o->n; i++) {
		struct ibv_recv_wr rwr = { .wr_id = 1 }, *bad;

		VU_CHECK(ibv_poll_cq(o->cq[i], 1, &wc) == 0,
			 "CQ %d is not empty", i);
		VU_CHECK(!ibv_post_recv(o->qp[i], &rwr, &bad) || errno,
			 "post_recv %d", i);
	}
}

static int many(void)
{
	struct rlimit rl;
	struct objs a = { 0 }, b = { 0 };
	pid_t dpid;
	int base, now, maps;

	/* the daemon this test starts inherits it */
	VU_CHECK(!getrlimit(RLIMIT_NOFILE, &rl), "getrlimit");
	VU_CHECK(rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= 4096,
		 "the hard descriptor limit (%llu) is too low for this test",
		 (unsigned long long)rl.rlim_max);
	rl.rlim_cur = 256;
	VU_CHECK(!setrlimit(RLIMIT_NOFILE, &rl), "setrlimit: %s",
		 strerror(errno));
	a.ctx = vu_open();
	VU_CHECK(a.ctx, "no sv0");
	dpid = vu_daemon_pid();
	VU_CHECK(dpid > 0, "no daemon pid in $SV_TEST_DIR/control.lock");
	VU_CHECK(soft_nofile(dpid) == (unsigned long long)rl.rlim_max,
		 "the daemon's soft descriptor limit is %llu, not %llu",
		 soft_nofile(dpid), (unsigned long long)rl.rlim_max);
	a.pd = ibv_alloc_pd(a.ctx);
	VU_CHECK(a.pd, "pd");
	base = count_fds(dpid);
	maps = count_maps();
	make_all(&a, NOBJ);
	now = count_fds(dpid);
	printf("our mappings %d -> %d\n", maps, count_maps());
	/* (malloc, and a sanitizer's allocator, map some of their own) */
	VU_CHECK(count_maps() - maps <= 256, "our mappings grew by %d for "
		 "%d CQs and %d QPs", count_maps() - maps, NOBJ, NOBJ);
	printf("%d CQs and %d QPs: daemon descriptors %d -> %d\n", NOBJ, NOBJ,
	       base, now);
	VU_CHECK(now - base <= 16, "the daemon's descriptors grew by %d for "
		 "%d CQs and %d QPs", now - base, NOBJ, NOBJ);

	/* a second client: its own rings, a few more descriptors */
	b.ctx = vu_open();
	VU_CHECK(b.ctx, "second context");
	b.pd = ibv_alloc_pd(b.ctx);
	VU_CHECK(b.pd, "pd");
	make_all(&b, NOBJ2);
	now = count_fds(dpid);
	printf("and a second context with %d of each: %d\n", NOBJ2, now);
	VU_CHECK(now - base <= 48, "the daemon's descriptors grew by %d",
		 now - base);

	/* freed and made again: the space comes back clean */
	free_all(&a);
	make_all(&a, NOBJ);
	check_fresh(&a);
	check_fresh(&b);
	now = count_fds(dpid);
	VU_CHECK(now - base <= 48, "after remaking, descriptors grew by %d",
		 now - base);
	free_all(&a);
	free_all(&b);
	VU_CHECK(!ibv_dealloc_pd(a.pd) && !ibv_dealloc_pd(b.pd), "dealloc");
	VU_CHECK(!ibv_close_device(a.ctx) && !ibv_close_device(b.ctx), "close");
	printf("PASS\n");
	return 0;
}

static int limit(void)
{
	struct ibv_context *ctx[MAX_CTX];
	struct ibv_comp_channel *ch[MAX_CTX];
	int go[2], nctx = 0, nch = 0, err = 0, status;
	struct ibv_cq *cq0, *cq;
	struct ibv_qp *qp;
	struct ibv_pd *pd;
	pid_t starter, dpid;
	char c;

	/* a process under a low hard limit starts the daemon, which
	 * inherits it, and holds it until told */
	VU_CHECK(!pipe(go), "pipe");
	starter = fork();
	VU_CHECK(starter >= 0, "fork");
	if (starter == 0) {
		struct rlimit rl = { 64, 64 };
		struct ibv_context *c0;

		close(go[0]);
		VU_CHECK(!setrlimit(RLIMIT_NOFILE, &rl), "setrlimit: %s",
			 strerror(errno));
		c0 = vu_open();
		VU_CHECK(c0, "no sv0 under a limit of 64 descriptors");
		VU_CHECK(write(go[1], "s", 1) == 1, "write");
		/* until the parent closes its end */
		while (read(go[1], &c, 1) > 0)
			;
		_exit(0);
	}
	close(go[1]);
	VU_CHECK(read(go[0], &c, 1) == 1, "the starter failed");
	dpid = vu_daemon_pid();
	VU_CHECK(dpid > 0, "no daemon pid");
	VU_CHECK(soft_nofile(dpid) == 64, "daemon limit %llu",
		 soft_nofile(dpid));
	ctx[0] = vu_open();
	VU_CHECK(ctx[0], "no sv0");
	nctx = 1;
	pd = ibv_alloc_pd(ctx[0]);
	VU_CHECK(pd, "pd: %s", strerror(errno));
	cq0 = ibv_create_cq(ctx[0], 8, NULL, NULL, 0);
	VU_CHECK(cq0, "cq: %s", strerror(errno));

	/* contexts until one is refused: EMFILE */
	while (nctx < MAX_CTX) {
		ctx[nctx] = vu_open();
		if (!ctx[nctx]) {
			err = errno;
			break;
		}
		nctx++;
	}
	printf("%d contexts, then %s; daemon descriptors %d\n", nctx,
	       strerror(err), count_fds(dpid));
	VU_CHECK(nctx < MAX_CTX, "no context refused (%d)", nctx);
	VU_CHECK(err == EMFILE, "a context refused for want of descriptors "
		 "says %s, not EMFILE", strerror(err));
	VU_CHECK(log_has("refused a connection", "out of descriptors") ||
		 log_has("CONTEXT", "out of descriptors"), "no log line for the refused "
		 "context");

	/* the refused context gave its descriptors back: completion
	 * channels (a socket the daemon keeps each) take them, until one is
	 * refused: ENOMEM */
	err = 0;
	while (nch < (int)VU_ARRAY_SIZE(ch)) {
		ch[nch] = ibv_create_comp_channel(ctx[0]);
		if (!ch[nch]) {
			err = errno;
			break;
		}
		nch++;
	}
	printf("%d channels, then %s; daemon descriptors %d\n", nch,
	       strerror(err), count_fds(dpid));
	VU_CHECK(err == ENOMEM, "a channel refused for want of descriptors "
		 "says %s, not ENOMEM", strerror(err));

	/* a connection it cannot take is refused: EMFILE, with a line */
	ctx[nctx] = vu_open();
	err = errno;
	VU_CHECK(!ctx[nctx], "a context at the descriptor limit");
	VU_CHECK(err == EMFILE, "a connection refused for want of descriptors "
		 "says %s, not EMFILE", strerror(err));
	VU_CHECK(log_has("refused a connection", "out of descriptors"),
		 "no log line for the refused connection");

	/* at the limit, a CQ and a QP are refused: ENOMEM */
	cq = ibv_create_cq(ctx[0], 8, NULL, NULL, 0);
	err = errno;
	VU_CHECK(!cq, "a CQ at the descriptor limit");
	VU_CHECK(err == ENOMEM, "a CQ refused for want of descriptors says "
		 "%s, not ENOMEM", strerror(err));
	qp = make_qp(pd, cq0);
	err = errno;
	VU_CHECK(!qp, "a QP at the descriptor limit");
	VU_CHECK(err == ENOMEM, "a QP refused for want of descriptors says "
		 "%s, not ENOMEM", strerror(err));
	VU_CHECK(log_has("CREATE_CQ refused", "out of descriptors"), "no log line for the refused CQ");

	/* descriptors back: the context held works again */
	while (nch > 0)
		VU_CHECK(!ibv_destroy_comp_channel(ch[--nch]), "channel");
	while (nctx > 1)
		VU_CHECK(!ibv_close_device(ctx[--nctx]), "close");
	qp = NULL;
	for (int i = 0; i < 200 && !qp; i++) {
		qp = make_qp(pd, cq0);
		if (!qp)
			vu_sleep_ms(10);
	}
	VU_CHECK(qp, "no QP once descriptors are back: %s", strerror(errno));
	VU_CHECK(!ibv_destroy_qp(qp), "destroy qp");
	VU_CHECK(!ibv_destroy_cq(cq0), "destroy cq");
	VU_CHECK(!ibv_dealloc_pd(pd), "dealloc");
	VU_CHECK(!ibv_close_device(ctx[0]), "close");
	close(go[0]);
	VU_CHECK(waitpid(starter, &status, 0) == starter && WIFEXITED(status) &&
		 !WEXITSTATUS(status), "the starter failed");
	printf("PASS\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "limit"))
		return limit();
	return many();
}
