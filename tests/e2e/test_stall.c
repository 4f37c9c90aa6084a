// SPDX-License-Identifier: MIT
/*
 * A stopped process stalls nobody but itself (issue 35, items 3 and 4;
 * docs/DESIGN.md "A context shared by fork" and "A command's time limit").
 *
 * sibling: a context shared by fork. Process O opens it and forks S; the
 * test process drives both through pipes. With the daemon stopped (SIGSTOP),
 * one of them is asked for a PD: it sends its command and waits for the
 * response, which cannot come; once /proc says it waits in that call, it is
 * stopped too, and the daemon continued. The other must then get its own PD
 * within 2 s, while the first stays stopped; continued, the first gets its
 * PD as well. Both ways round (the stopped one the child, then the opener).
 * The stopped process is in the middle of its command by construction (its
 * response cannot have come), not by timing.
 *
 * daemon: SOFTVERBS_CMD_TIMEOUT=2, the daemon stopped. ibv_alloc_pd fails
 * with ETIMEDOUT (no sooner than the limit), the context reports
 * IBV_EVENT_DEVICE_FATAL, a thread waiting in ibv_get_cq_event wakes with
 * EIO, the next command fails with EIO at once, everything is destroyed;
 * the daemon, continued, drops the connection and exits when idle
 * (tests/e2e/isolated.sh checks that it does).
 *
 * Every wait is bounded: on a library where a stopped process does stall
 * the others, each case fails (after its bound) instead of hanging.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define QUICK_MS 2000   /* the bound for the sibling's command */

/* ---- /proc ---- */

/* The state letter of pid (R, S, T, t, Z ...), or 0. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

static bool wait_state(pid_t pid, const char *states, long ms)
{
	long end = vu_now_ms() + ms;

	do {
		char s = proc_state(pid);

		if (s && strchr(states, s))
			return true;
		vu_sleep_ms(2);
	} while (vu_now_ms() < end);
	return false;
}

/* The system call pid is blocked in (/proc/PID/syscall), -1 when it runs
 * or is in none, -2 when that cannot be read. */
static long proc_syscall(pid_t pid)
{
	char path[64], buf[256], *end;
	ssize_t n;
	long nr;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -2;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -2;
	buf[n] = 0;
	nr = strtol(buf, &end, 10);
	return end == buf ? -1 : nr;
}

/* Is nr a call that waits for a response on a socket? */
static bool waits_for_response(long nr)
{
#ifdef SYS_poll
	if (nr == SYS_poll)
		return true;
#endif
	return nr == SYS_ppoll || nr == SYS_recvmsg || nr == SYS_recvfrom ||
	       nr == SYS_pselect6;
}

/* Wait (bounded) until pid blocks in such a call: it has sent its command
 * and waits for the response. */
static bool wait_in_command(pid_t pid, long ms)
{
	long end = vu_now_ms() + ms;

	do {
		long nr = proc_syscall(pid);

		if (nr == -2)
			return false;
		if (nr >= 0 && waits_for_response(nr) && proc_state(pid) == 'S')
			return true;
		vu_sleep_ms(1);
	} while (vu_now_ms() < end);
	return false;
}

/* ---- the two processes that share a context ---- */

struct result {
	int ok;      /* the PD came */
	int err;     /* errno when it did not */
	pid_t pid;
};

struct agent {
	pid_t pid;
	int to, from;       /* the test's ends of its pipes */
};

/* Serve the test: 'a' allocates a PD (kept) and answers; 'q' ends. */
static void agent_loop(struct ibv_context *ctx, int in, int out)
{
	struct result r;
	char c;

	while (vu_xfer(in, &c, 1, false) == 0) {
		if (c == 'q')
			break;
		memset(&r, 0, sizeof(r));
		r.pid = getpid();
		errno = 0;
		r.ok = ibv_alloc_pd(ctx) != NULL;
		r.err = errno;
		if (vu_xfer(out, &r, sizeof(r), true))
			break;
	}
}

static void ask(struct agent *a, char c)
{
	assert_int_equal(vu_xfer(a->to, &c, 1, true), 0);
}

/* The answer of a within ms: 0, or -1 when none came. */
static int answer(struct agent *a, struct result *r, long ms)
{
	if (!vu_fd_readable(a->from, (int)ms))
		return -1;
	return vu_xfer(a->from, r, sizeof(*r), false) ? -1 : 0;
}

/*
 * The opener O (a child of the test) and its child S. Pipes: test -> O,
 * O -> test, test -> S, S -> test; O tells S's pid first.
 */
static void start_pair(struct agent *o, struct agent *s)
{
	int to_o[2], from_o[2], to_s[2], from_s[2];
	pid_t pid;

	assert_int_equal(pipe(to_o), 0);
	assert_int_equal(pipe(from_o), 0);
	assert_int_equal(pipe(to_s), 0);
	assert_int_equal(pipe(from_s), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ibv_context *ctx;
		pid_t spid;
		int st;

		close(to_o[1]);
		close(from_o[0]);
		close(to_s[1]);
		close(from_s[0]);
		ctx = vu_open();
		if (!ctx)
			_exit(2);
		spid = fork();
		if (spid < 0)
			_exit(3);
		if (spid == 0) {
			close(to_o[0]);
			close(from_o[1]);
			agent_loop(ctx, to_s[0], from_s[1]);
			_exit(0);
		}
		close(to_s[0]);
		close(from_s[1]);
		if (vu_xfer(from_o[1], &spid, sizeof(spid), true))
			_exit(4);
		agent_loop(ctx, to_o[0], from_o[1]);
		if (waitpid(spid, &st, 0) != spid || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			_exit(5);
		_exit(ibv_close_device(ctx) ? 6 : 0);
	}
	close(to_o[0]);
	close(from_o[1]);
	close(to_s[0]);
	close(from_s[1]);
	o->pid = pid;
	o->to = to_o[1];
	o->from = from_o[0];
	s->to = to_s[1];
	s->from = from_s[0];
	assert_true(vu_fd_readable(o->from, VU_WAIT_MS));
	assert_int_equal(vu_xfer(o->from, &s->pid, sizeof(s->pid), false), 0);
}

/*
 * One round: with the daemon stopped, stopped asks for a PD and is stopped
 * inside that command; the daemon goes on; other must get its PD within
 * QUICK_MS. Everything is continued before anything is asserted, so that a
 * failure leaves nothing stopped.
 */
static void stopped_sibling_round(pid_t daemon, struct agent *stopped,
				  struct agent *other, const char *what)
{
	struct result r1 = { 0 }, r2 = { 0 };
	bool in_cmd, is_stopped;
	int got1, got2;
	long t0, ms;

	assert_int_equal(kill(daemon, SIGSTOP), 0);
	assert_true(wait_state(daemon, "Tt", VU_WAIT_MS));
	ask(stopped, 'a');
	in_cmd = wait_in_command(stopped->pid, VU_WAIT_MS);
	kill(stopped->pid, SIGSTOP);
	is_stopped = wait_state(stopped->pid, "Tt", VU_WAIT_MS);
	kill(daemon, SIGCONT);

	t0 = vu_now_ms();
	ask(other, 'a');
	got2 = answer(other, &r2, QUICK_MS);
	ms = vu_now_ms() - t0;
	/* whatever happened: continue the stopped one, collect both */
	kill(stopped->pid, SIGCONT);
	if (got2)
		got2 = answer(other, &r2, VU_WAIT_MS) ? -2 : -1;
	got1 = answer(stopped, &r1, VU_WAIT_MS);

	if (!in_cmd || !is_stopped)
		fail_msg("%s: the process to stop was not stopped inside its "
			 "command (in it: %d, stopped: %d)", what, in_cmd,
			 is_stopped);
	if (got2 == -1)
		fail_msg("%s: the sibling of a stopped process got no PD "
			 "within %d ms (it came once the other went on)",
			 what, QUICK_MS);
	if (got2)
		fail_msg("%s: the sibling of a stopped process got no PD at "
			 "all", what);
	if (!r2.ok)
		fail_msg("%s: the sibling's ibv_alloc_pd failed: %s", what,
			 strerror(r2.err));
	if (got1 || !r1.ok)
		fail_msg("%s: the stopped process, continued, got no PD (%s)",
			 what, got1 ? "no answer" : strerror(r1.err));
	printf("%s: the sibling's PD in %ld ms\n", what, ms);
}

static void test_stopped_sibling(void **state)
{
	struct agent o, s;
	struct result r;
	pid_t daemon;
	int st;

	(void)state;
	start_pair(&o, &s);
	daemon = vu_daemon_pid();
	assert_true(daemon > 0);
	if (proc_syscall(o.pid) == -2) {
		/* no /proc/PID/syscall here: "inside its command" cannot be
		 * told */
		ask(&s, 'q');
		ask(&o, 'q');
		waitpid(o.pid, &st, 0);
		skip();
	}
	/* both work (and S has made its side of the connection) */
	ask(&o, 'a');
	assert_int_equal(answer(&o, &r, VU_WAIT_MS), 0);
	assert_true(r.ok);
	ask(&s, 'a');
	assert_int_equal(answer(&s, &r, VU_WAIT_MS), 0);
	assert_true(r.ok);

	stopped_sibling_round(daemon, &s, &o, "child stopped");
	stopped_sibling_round(daemon, &o, &s, "opener stopped");

	ask(&s, 'q');
	ask(&o, 'q');
	assert_int_equal(waitpid(o.pid, &st, 0), o.pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(o.to);
	close(o.from);
	close(s.to);
	close(s.from);
}

/* ---- a stopped daemon ---- */

struct call {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int ret, err;
	long ms;
	int done;
};

static void *alloc_pd_thread(void *arg)
{
	struct call *c = arg;
	long t0 = vu_now_ms();

	errno = 0;
	c->pd = ibv_alloc_pd(c->ctx);
	c->err = errno;
	c->ms = vu_now_ms() - t0;
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *cq_event_thread(void *arg)
{
	struct call *c = arg;
	void *cq_ctx;

	c->ret = ibv_get_cq_event(c->ch, &c->cq, &cq_ctx);
	c->err = errno;
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static bool wait_done(struct call *c, long ms)
{
	long end = vu_now_ms() + ms;

	while (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
		if (vu_now_ms() >= end)
			return false;
		vu_sleep_ms(5);
	}
	return true;
}

static void test_stopped_daemon(void **state)
{
	struct call alloc = { 0 }, waiter = { 0 };
	struct ibv_async_event ev;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	pthread_t ta, tw;
	bool alloc_done, waiter_done = false;
	pid_t daemon;
	int ret = -1;

	(void)state;
	assert_int_equal(setenv("SOFTVERBS_CMD_TIMEOUT", "2", 1), 0);
	ctx = vu_open();
	assert_non_null(ctx);
	daemon = vu_daemon_pid();
	assert_true(daemon > 0);
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	waiter.ch = ibv_create_comp_channel(ctx);
	assert_non_null(waiter.ch);
	cq = ibv_create_cq(ctx, 16, NULL, waiter.ch, 0);
	assert_non_null(cq);
	assert_int_equal(ibv_req_notify_cq(cq, 0), 0);
	assert_int_equal(pthread_create(&tw, NULL, cq_event_thread, &waiter),
			 0);

	assert_int_equal(kill(daemon, SIGSTOP), 0);
	assert_true(wait_state(daemon, "Tt", VU_WAIT_MS));
	alloc.ctx = ctx;
	assert_int_equal(pthread_create(&ta, NULL, alloc_pd_thread, &alloc),
			 0);
	/* 2 s is the limit; a library without one waits for the daemon */
	alloc_done = wait_done(&alloc, VU_WAIT_MS);
	if (alloc_done) {
		ret = vu_async_event(ctx, &ev, VU_WAIT_MS);
		waiter_done = wait_done(&waiter, VU_WAIT_MS);
	}
	kill(daemon, SIGCONT);
	pthread_join(ta, NULL);
	if (!alloc_done)
		fail_msg("ibv_alloc_pd with the daemon stopped: no answer "
			 "within %d ms (SOFTVERBS_CMD_TIMEOUT=2)", VU_WAIT_MS);
	printf("ibv_alloc_pd failed after %ld ms: %s\n", alloc.ms,
	       strerror(alloc.err));
	assert_null(alloc.pd);
	assert_int_equal(alloc.err, ETIMEDOUT);
	assert_true(alloc.ms >= 1900);
	/* the device is dead, as if the daemon had gone */
	assert_int_equal(ret, 0);
	assert_int_equal(ev.event_type, IBV_EVENT_DEVICE_FATAL);
	assert_true(waiter_done);
	pthread_join(tw, NULL);
	assert_int_equal(waiter.ret, -1);
	assert_int_equal(waiter.err, EIO);
	errno = 0;
	assert_null(ibv_alloc_pd(ctx));
	assert_int_equal(errno, EIO);
	/* and everything goes */
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_destroy_comp_channel(waiter.ch), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
	assert_int_equal(ibv_close_device(ctx), 0);
	/* the daemon, continued, drops the connection (isolated.sh sees it
	 * leave once idle) */
	assert_true(wait_state(daemon, "RSDZ", VU_WAIT_MS) ||
		    kill(daemon, 0) != 0);
	unsetenv("SOFTVERBS_CMD_TIMEOUT");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest sibling[] = {
		cmocka_unit_test(test_stopped_sibling),
	};
	const struct CMUnitTest daemon[] = {
		cmocka_unit_test(test_stopped_daemon),
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "daemon"))
		return cmocka_run_group_tests(daemon, NULL, NULL);
	if (argc > 1 && !strcmp(argv[1], "sibling"))
		return cmocka_run_group_tests(sibling, NULL, NULL);
	fprintf(stderr, "usage: %s sibling|daemon\n", argv[0]);
	return 2;
}
