// SPDX-License-Identifier: MIT
/*
 * Connections on the control socket: accepting them (or refusing them,
 * refused.c), reading each client's commands and sending the responses
 * (on its socket or a reply channel), and dropping a client that has gone,
 * that cannot be read, or that does not read its responses. The client
 * object itself (identity, channels, teardown) is ctl/client.c's; the
 * commands are ctl/control.c's.
 *
 * Owns the list of clients dropped in the current batch of events (freed
 * by clients_bury). Calls ctl/client.c, ctl/control.c, diag/capture.c,
 * refused.c and evloop.c (daemon_ep_add, daemon_idle_arm); called by
 * evloop.c and main.c (daemon.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "device/daemon.h"

/* dropped in this batch: their events may still be in it */
static struct sv_client *grave;

void clients_bury(void)
{
	while (grave) {
		struct sv_client *c = grave;

		grave = c->next;
		sv_client_free(c);
	}
}

void client_drop(struct sv_client *c)
{
	epoll_ctl(d.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->pidfd >= 0)
		epoll_ctl(d.epfd, EPOLL_CTL_DEL, c->pidfd, NULL);
	ctl_lock();
	sv_capture_client_gone(c);
	sv_client_teardown(c);
	ctl_unlock();
	c->next = grave;
	grave = c;
	if (!sv_dev.nclients)
		daemon_idle_arm(true);
}

void client_exited(struct sv_client *c)
{
	sv_log(SV_LOG_INFO, "client %llu: pid %d exited",
	       (unsigned long long)c->id, (int)c->pid);
	client_drop(c);
}

/* Another uid (root excepted): refused with EACCES. */
static bool peer_foreign(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) ||
	    cr.uid == geteuid() || cr.uid == 0)
		return false;
	/* one line per kind: a client retrying in a loop is counted */
	sv_log(SV_LOG_WARN, "refused pid %d: uid %u is not the daemon's uid %u",
	       (int)cr.pid, cr.uid, geteuid());
	return true;
}

/* A connection taken: its client, in epoll. */
static void client_add(int fd)
{
	struct sv_client *c;
	struct sv_evtag *ts, *tp;

	errno = 0;
	c = sv_client_new(fd);
	if (!c) {
		/* a process at its share of connections hears so */
		if (errno == EMFILE)
			refused_park(fd, -EMFILE);
		else
			close(fd);
		return;
	}
	/* from here on the client is on sv_dev's list: under the lock */
	ts = calloc(1, sizeof(*ts));
	tp = calloc(1, sizeof(*tp));
	c->ev_sock = ts;
	c->ev_pid = tp;
	if (!ts || !tp) {
		ctl_lock();
		sv_client_teardown(c);
		ctl_unlock();
		sv_client_free(c);
		return;
	}
	*ts = (struct sv_evtag){ EV_SOCK, c };
	*tp = (struct sv_evtag){ EV_PID, c };
	if (daemon_ep_add(fd, EPOLLIN | EPOLLRDHUP, ts) ||
	    (c->pidfd >= 0 && daemon_ep_add(c->pidfd, EPOLLIN, tp))) {
		sv_log(SV_LOG_ERR, "epoll: %s", strerror(errno));
		client_drop(c);
		return;
	}
	daemon_idle_arm(false);
	sv_log(SV_LOG_DEBUG, "client %llu: pid %d uid %u connected",
	       (unsigned long long)c->id, (int)c->pid, c->uid);
}

void clients_accept(void)
{
	for (;;) {
		int fd = accept4(d.listen_fd, NULL, NULL,
				 SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			if (refused_take_nofile())
				continue;
			return;
		}
		if (fd < 0)
			return;
		if (peer_foreign(fd)) {
			refused_park(fd, -EACCES);
			continue;
		}
		if (sv_dev.nclients >= SV_MAX_CLIENTS) {
			sv_log(SV_LOG_WARN, "refused a connection: %u clients",
			       sv_dev.nclients);
			refused_park(fd, -ENFILE);
			continue;
		}
		client_add(fd);
	}
}

/*
 * Where the response to cmd goes: the socket it came on, or a reply channel
 * of the client's (sv_cmd_hdr.chan), so that processes that share a
 * connection since a fork each read only their own responses. REPLY_CHANNEL
 * with a seqpacket socket is answered on it (*via, a copy taken before the
 * command is handled), whatever the outcome. -1: a channel the client does
 * not have (answered on the socket, EINVAL, not run); -2: nowhere (no copy
 * of the descriptor could be made).
 */
static int reply_to(struct sv_client *c, const struct sv_cmd *cmd, ssize_t n,
		    int fd_in, int *via)
{
	int type = 0;
	socklen_t len = sizeof(type);

	*via = -1;
	if (sv_cmd_check(cmd, (size_t)n) != SV_CMD_OK)
		return c->fd;
	if (cmd->hdr.op == SV_CMD_REPLY_CHANNEL) {
		if (fd_in < 0 ||
		    getsockopt(fd_in, SOL_SOCKET, SO_TYPE, &type, &len) ||
		    type != SOCK_SEQPACKET)
			return c->fd; /* refused (EINVAL), on the socket */
		*via = fcntl(fd_in, F_DUPFD_CLOEXEC, 0);
		return *via < 0 ? -2 : *via;
	}
	if (!cmd->hdr.chan)
		return c->fd;
	return sv_client_chan_fd(c, cmd->hdr.chan);
}

void clients_input(struct sv_client *c)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int fd_in, fd_out, ret, to, via;
	ssize_t n;

	for (;;) {
		n = sv_recv_msg(c->fd, &cmd, sizeof(cmd), &fd_in, MSG_DONTWAIT);
		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			if (fd_in >= 0)
				close(fd_in);
			if (n < 0)    /* EOF is a close; anything else says why */
				sv_log(SV_LOG_WARN, "client %llu (pid %d): dropped: "
				       "cannot read: %s", (unsigned long long)c->id,
				       (int)c->pid, strerror((int)-n));
			client_drop(c);
			return;
		}
		if ((size_t)n < sizeof(cmd)) /* never read past what came */
			memset((char *)&cmd + n, 0, sizeof(cmd) - (size_t)n);
		to = reply_to(c, &cmd, n, fd_in, &via);
		if (to == -2) {
			/* out of descriptors: unanswered, not run (its
			 * process's time limit tells it) */
			sv_log(SV_LOG_WARN, "client %llu (pid %d): REPLY_CHANNEL "
			       "not answered: %s", (unsigned long long)c->id,
			       (int)c->pid, strerror(errno));
			close(fd_in);
			continue;
		}
		if (to == -1) {
			sv_log_client(c, "no such reply channel", SV_LOG_INFO,
				      "%s refused: no reply channel %u",
				      sv_cmd_name(cmd.hdr.op), cmd.hdr.chan);
			if (fd_in >= 0)
				close(fd_in);
			sv_rsp_init(&rsp, &cmd, -EINVAL);
			fd_out = -1;
			to = c->fd;
		} else {
			ctl_lock();
			sv_control_handle(c, &cmd, n, fd_in, &rsp, &fd_out);
			ctl_unlock();
		}
		if (sv_log_level >= SV_LOG_DEBUG)
			sv_log(SV_LOG_DEBUG, "client %llu: %s -> %d",
			       (unsigned long long)c->id,
			       sv_cmd_name(rsp.hdr.op), rsp.hdr.status);
		if (to != c->fd) {
			/* a reply channel: its process alone waits for it;
			 * one that cannot take it (gone, or not reading) loses
			 * its channel, and the client stays */
			ret = sv_send_msg(to, &rsp, sizeof(rsp), fd_out,
					  MSG_DONTWAIT);
			if (fd_out >= 0)
				close(fd_out);
			if (via >= 0)
				close(via);
			else if (ret)
				sv_client_chan_drop(c, cmd.hdr.chan);
			if (ret)
				sv_log(SV_LOG_INFO, "client %llu (pid %d): the "
				       "response to %s on reply channel %u is "
				       "lost: %s", (unsigned long long)c->id,
				       (int)c->pid, sv_cmd_name(rsp.hdr.op),
				       cmd.hdr.chan, strerror(-ret));
			continue;
		}
		/* a client that does not read its responses is dropped, never
		 * waited for: one client cannot stall the device */
		ret = sv_send_msg(c->fd, &rsp, sizeof(rsp), fd_out, MSG_DONTWAIT);
		if (fd_out >= 0)
			close(fd_out);
		if (ret) {
			sv_log(SV_LOG_WARN, "client %llu (pid %d): dropped: %s",
			       (unsigned long long)c->id, (int)c->pid,
			       strerror(-ret));
			client_drop(c);
			return;
		}
	}
}
