// SPDX-License-Identifier: MIT
/*
 * softverbsd's event loop: one control thread serves every client's
 * commands from epoll; it also watches each client's pidfd, SIGTERM/SIGINT/
 * SIGHUP (clean shutdown), an idle timer (--idle-exit), and the rdma_cm and
 * RDMA netlink sides of the device (their listening sockets, their
 * connections, the CM's timer and its QP1 datagrams). Everything a batch of
 * events dropped is freed after the batch (daemon_bury), since a later
 * event of the same batch may still name it.
 *
 * Owns the epoll tags of the fixed descriptors and of the rdma_cm and
 * netlink connections, and the lists of those closed in this batch. Calls
 * clients.c, refused.c, cm/ (cm.h), nl/ (nl.h), roce/ (its QP1 socket) and
 * diag/log.c; called by the files of daemon.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "device/daemon.h"
#include "device/roce/roce.h"
#include "device/cm/cm.h"
#include "device/nl/nl.h"

static struct sv_evtag t_listen = { .kind = EV_LISTEN },
	t_signal = { .kind = EV_SIGNAL }, t_idle = { .kind = EV_IDLE },
	t_cm_listen = { .kind = EV_CM_LISTEN },
	t_cm_timer = { .kind = EV_CM_TIMER }, t_cm_wire = { .kind = EV_CM_WIRE },
	t_nl_listen = { .kind = EV_NL_LISTEN };

static struct sv_cm_file *cm_grave;   /* linked by next once closed */
/* the tags of netlink connections closed in this batch */
static struct sv_evtag *nl_grave;

int daemon_ep_add(int fd, uint32_t events, struct sv_evtag *tag)
{
	struct epoll_event ev = { .events = events, .data.ptr = tag };

	return epoll_ctl(d.epfd, EPOLL_CTL_ADD, fd, &ev);
}

void daemon_idle_arm(bool on)
{
	struct itimerspec its = { 0 };

	if (!d.idle_exit)
		return;
	if (on)
		its.it_value.tv_sec = d.idle_exit;
	timerfd_settime(d.idle_fd, 0, &its, NULL);
}

/* No client, no rdma_cm file, no netlink connection. */
static bool idle(void)
{
	return !sv_dev.nclients && !sv_cm_nfiles() && !sv_nl_nconns();
}

void daemon_bury(void)
{
	clients_bury();
	while (cm_grave) {
		struct sv_cm_file *f = cm_grave;

		cm_grave = f->next;
		free(f->tag);
		sv_cm_file_free(f);
	}
	while (nl_grave) {
		struct sv_evtag *t = nl_grave;

		nl_grave = t->next;
		free(t);
	}
}

/* An rdma_cm file that has gone: its ids go now, its memory after the
 * batch (its events may still be in it). */
static void cm_drop(struct sv_cm_file *f)
{
	epoll_ctl(d.epfd, EPOLL_CTL_DEL, f->sock, NULL);
	sv_cm_file_close(f);
	f->next = cm_grave;
	cm_grave = f;
}

static void on_cm_accept(void)
{
	struct sv_cm_file *f;

	while ((f = sv_cm_file_accept())) {
		struct sv_evtag *t = calloc(1, sizeof(*t));

		f->tag = t;
		if (!t || daemon_ep_add(f->sock, EPOLLIN | EPOLLRDHUP, t)) {
			sv_log(SV_LOG_ERR, "epoll: rdma_cm file: %s", strerror(errno));
			cm_drop(f);
			continue;
		}
		t->kind = EV_CM_FILE;
		t->cm = f;
		daemon_idle_arm(false);
	}
}

/* ---- RDMA netlink connections (device/nl) ---- */

static void nl_drop(struct sv_nl_conn *c)
{
	void **tags = sv_nl_tags(c);

	epoll_ctl(d.epfd, EPOLL_CTL_DEL, sv_nl_req_fd(c), NULL);
	if (sv_nl_out_fd(c) >= 0)
		epoll_ctl(d.epfd, EPOLL_CTL_DEL, sv_nl_out_fd(c), NULL);
	for (int i = 0; i < 2; i++) {
		struct sv_evtag *t = tags[i];

		if (t) {
			t->nl = NULL;
			t->next = nl_grave;
			nl_grave = t;
		}
	}
	sv_nl_close(c);
	if (idle())
		daemon_idle_arm(true);
}

/* The answers' side in epoll once the hello brought it, EPOLLOUT while
 * answers wait: false when that fails (the connection goes). */
static bool nl_arm(struct sv_nl_conn *c)
{
	struct sv_evtag *t = sv_nl_tags(c)[1];
	struct epoll_event ev = { .events = sv_nl_wants_out(c) ? EPOLLOUT : 0,
				  .data.ptr = t };

	if (sv_nl_out_fd(c) < 0)
		return true;
	if (epoll_ctl(d.epfd, t->slot ? EPOLL_CTL_MOD : EPOLL_CTL_ADD,
		      sv_nl_out_fd(c), &ev))
		return false;
	t->slot = 1;
	return true;
}

static void on_nl_accept(void)
{
	struct sv_nl_conn *c;

	while ((c = sv_nl_accept())) {
		void **tags = sv_nl_tags(c);
		struct sv_evtag *in = calloc(1, sizeof(*in));
		struct sv_evtag *out = calloc(1, sizeof(*out));

		tags[0] = in;
		tags[1] = out;
		if (!in || !out || daemon_ep_add(sv_nl_req_fd(c), EPOLLIN, in)) {
			sv_log(SV_LOG_ERR, "epoll: netlink: %s", strerror(errno));
			free(in);
			free(out);
			tags[0] = tags[1] = NULL;
			sv_nl_close(c);
			continue;
		}
		in->kind = EV_NL_REQ;
		out->kind = EV_NL_OUT;
		in->nl = out->nl = c;
		daemon_idle_arm(false);
	}
}

static void on_nl(struct sv_evtag *t)
{
	struct sv_nl_conn *c = t->nl;
	bool ok;

	/* the objects it reports may be changing under an engine */
	ctl_lock();
	ok = t->kind == EV_NL_REQ ? sv_nl_input(c) : sv_nl_output(c);
	ctl_unlock();
	if (!ok || !nl_arm(c))
		nl_drop(c);
}

/* ---- the loop ---- */

/* The signals, the timer, epoll and the fixed descriptors in it: 0 or
 * -errno. */
static int loop_open(void)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	d.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	d.idle_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	d.epfd = epoll_create1(EPOLL_CLOEXEC);
	refused_init();
	if (d.sig_fd < 0 || d.idle_fd < 0 || d.epfd < 0)
		return -errno;
	if (sv_nl_listen_fd() >= 0 &&
	    daemon_ep_add(sv_nl_listen_fd(), EPOLLIN, &t_nl_listen))
		return -errno;
	if (sv_roce_gsi_fd() >= 0 && sv_cm_listen_fd() >= 0 &&
	    daemon_ep_add(sv_roce_gsi_fd(), EPOLLIN, &t_cm_wire))
		return -errno;
	if (sv_cm_listen_fd() >= 0 &&
	    (daemon_ep_add(sv_cm_listen_fd(), EPOLLIN, &t_cm_listen) ||
	     daemon_ep_add(sv_cm_timer_fd(), EPOLLIN, &t_cm_timer)))
		return -errno;
	if (daemon_ep_add(d.listen_fd, EPOLLIN, &t_listen) ||
	    daemon_ep_add(d.sig_fd, EPOLLIN, &t_signal) ||
	    daemon_ep_add(d.idle_fd, EPOLLIN, &t_idle))
		return -errno;
	daemon_idle_arm(true);
	return 0;
}

/* Serve one event: true when the daemon is to leave (a signal, or idle
 * for --idle-exit). */
static bool on_event(struct sv_evtag *t)
{
	struct signalfd_siginfo si;

	switch (t->kind) {
	case EV_LISTEN:
		clients_accept();
		break;
	case EV_SIGNAL:
		if (read(d.sig_fd, &si, sizeof(si)) > 0)
			sv_log(SV_LOG_INFO, "signal %u: shutting down",
			       si.ssi_signo);
		return true;
	case EV_IDLE:
		if (idle()) {
			sv_log(SV_LOG_INFO, "idle for %us: exiting",
			       d.idle_exit);
			return true;
		}
		break;
	case EV_SOCK:
		if (!t->client->dead)
			clients_input(t->client);
		break;
	case EV_CM_LISTEN:
		on_cm_accept();
		break;
	case EV_CM_TIMER:
		sv_cm_on_timer();
		break;
	case EV_CM_WIRE:
		sv_cm_on_wire();
		break;
	case EV_CM_FILE:
		if (!t->cm->dead && !sv_cm_file_input(t->cm)) {
			cm_drop(t->cm);
			if (idle())
				daemon_idle_arm(true);
		}
		break;
	case EV_NL_LISTEN:
		on_nl_accept();
		break;
	case EV_NL_REQ:
	case EV_NL_OUT:
		if (t->nl)
			on_nl(t);
		break;
	case EV_REFUSED:
		refused_input(t->slot);
		break;
	case EV_PID:
		if (!t->client->dead)
			client_exited(t->client);
		break;
	}
	return false;
}

int daemon_serve(void)
{
	struct epoll_event evs[32];
	bool log_pending = false;
	int ret = loop_open();

	if (ret)
		return ret;
	for (;;) {
		/* while the log holds suppression counts, wake to write them */
		int n = epoll_wait(d.epfd, evs, 32, log_pending ? 1000 : -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (int i = 0; i < n; i++)
			if (on_event(evs[i].data.ptr))
				return 0;
		/* clients dropped in this batch may still have had events in
		 * it; only now is their memory freed */
		daemon_bury();
		log_pending = sv_log_tick();
	}
}
