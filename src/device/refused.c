// SPDX-License-Identifier: MIT
/*
 * Refused connections on the control socket: EACCES for another uid,
 * EMFILE for a process at its share of connections (or a daemon out of
 * descriptors), ENFILE for a device at its count of clients. Each is kept
 * in a slot until its HELLO is answered with the reason (then closed), so
 * that its library fails at once with a clear word instead of retrying a
 * closed socket; the oldest goes when a new one needs its slot.
 *
 * Owns the slots and the spare descriptor. Calls evloop.c (daemon_ep_add)
 * and the socket layer of src/abi; called by clients.c and evloop.c
 * (daemon.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "device/daemon.h"

#define SV_REFUSED_SLOTS 8

static struct {
	int fd;
	int status;       /* -errno the HELLO gets */
	uint64_t seq;     /* age: the lowest goes first */
	struct sv_evtag tag;
} refused[SV_REFUSED_SLOTS];
static uint64_t refused_seq;

/* Taken back when accept4 fails for want of descriptors, so that the
 * connection can be taken and refused: epoll is level-triggered, and a
 * connection left in the backlog would wake the loop again at once. */
static int spare_fd = -1;

void refused_init(void)
{
	spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < SV_REFUSED_SLOTS; i++)
		refused[i].fd = -1;
}

/* A refused connection: kept until its HELLO is answered with status (and,
 * for EACCES, the owner's uid), so that its library fails at once with a
 * clear word instead of retrying a closed socket. */
void refused_park(int fd, int status)
{
	unsigned int i, old = 0;

	for (i = 0; i < SV_REFUSED_SLOTS; i++) {
		if (refused[i].fd < 0)
			break;
		if (refused[i].seq < refused[old].seq)
			old = i;
	}
	if (i == SV_REFUSED_SLOTS) {
		i = old;
		close(refused[i].fd); /* leaves epoll with it */
	}
	refused[i].fd = fd;
	refused[i].status = status;
	refused[i].seq = ++refused_seq;
	refused[i].tag = (struct sv_evtag){ .kind = EV_REFUSED, .slot = i };
	if (daemon_ep_add(fd, EPOLLIN | EPOLLRDHUP, &refused[i].tag)) {
		close(fd);
		refused[i].fd = -1;
	}
	if (spare_fd < 0)   /* where a slot's descriptor was given back */
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Is a connection waiting to be accepted? */
static bool listen_pending(void)
{
	struct pollfd p = { .fd = d.listen_fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Close the oldest refused connection, unanswered, for its descriptor:
 * false if none is held. */
static bool refuse_evict(void)
{
	unsigned int i, old = SV_REFUSED_SLOTS;

	for (i = 0; i < SV_REFUSED_SLOTS; i++)
		if (refused[i].fd >= 0 &&
		    (old == SV_REFUSED_SLOTS ||
		     refused[i].seq < refused[old].seq))
			old = i;
	if (old == SV_REFUSED_SLOTS)
		return false;
	close(refused[old].fd);
	refused[old].fd = -1;
	return true;
}

bool refused_take_nofile(void)
{
	int e, fd;

	/* (accept4 says EMFILE before it looks for a connection) */
	if (spare_fd < 0 && !(listen_pending() && refuse_evict()))
		return false;
	e = errno;
	/* the spare (or the oldest refused connection's) descriptor takes
	 * the connection, which is refused with EMFILE; the spare comes
	 * back with the slot */
	if (spare_fd >= 0)
		close(spare_fd);
	spare_fd = -1;
	fd = accept4(d.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		return false;
	}
	sv_log(SV_LOG_WARN, "refused a connection: out of descriptors (%s)",
	       strerror(e));
	refused_park(fd, -EMFILE);
	return true;
}

void refused_input(unsigned int i)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int fd_in;
	ssize_t n;

	if (refused[i].fd < 0)
		return;
	n = sv_recv_msg(refused[i].fd, &cmd, sizeof(cmd), &fd_in,
			MSG_DONTWAIT);
	if (fd_in >= 0)
		close(fd_in);
	if (n == -EAGAIN)
		return;
	if (n >= (ssize_t)sizeof(cmd.hdr) && cmd.hdr.magic == SV_PROTO_MAGIC &&
	    cmd.hdr.op == SV_CMD_HELLO) {
		sv_rsp_init(&rsp, &cmd, refused[i].status);
		rsp.u.hello.abi = SV_PROTO_VERSION;
		rsp.u.hello.daemon_pid = (uint32_t)getpid();
		rsp.u.hello.owner_uid = (uint32_t)geteuid();
		sv_send_msg(refused[i].fd, &rsp, sizeof(rsp), -1,
			    MSG_DONTWAIT);
	}
	close(refused[i].fd);
	refused[i].fd = -1;
	if (spare_fd < 0)
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}
