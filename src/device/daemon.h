/* SPDX-License-Identifier: MIT */
/*
 * softverbsd's process: what its start, its control socket, its event loop
 * and its connections share. Internal to these files, which are the
 * daemon's process and nothing else (the fuzzers' device library leaves
 * them out: tests/fuzz/fuzz_dev.c stands in for them):
 *
 *   main.c     start and stop, the options, the word to the spawner
 *              (--ready-fd) and giving up, priority, descriptor limit
 *   socket.c   the control socket: its folder, its lock (one daemon per
 *              socket path), socket activation, listening
 *   evloop.c   the epoll loop: what each event is, the idle timer, the
 *              rdma_cm and RDMA-netlink connections, freeing after a batch
 *              (the same-host transport is loop/req.c and loop/resp.c)
 *   clients.c  connections on the control socket: accept, the commands
 *              and their replies, drop (the client object is ctl/client.c's)
 *   refused.c  refused connections, kept until their HELLO is answered;
 *              the spare descriptor that takes one when descriptors run out
 *
 * They call the rest of the daemon (sv_dev.h, cm/cm.h, nl/nl.h,
 * roce/roce.h, ctl/direct.h); nothing else calls them.
 */
#ifndef SV_DEVICE_DAEMON_H
#define SV_DEVICE_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "device/sv_dev.h"

struct sv_cm_file;
struct sv_nl_conn;

/* What an epoll event is about (epoll_event.data.ptr). */
enum sv_evkind { EV_LISTEN, EV_SIGNAL, EV_IDLE, EV_SOCK, EV_PID, EV_CM_LISTEN,
		 EV_CM_TIMER, EV_CM_FILE, EV_CM_WIRE, EV_REFUSED, EV_NL_LISTEN,
		 EV_NL_REQ, EV_NL_OUT };

struct sv_evtag {
	enum sv_evkind kind;
	struct sv_client *client;
	struct sv_cm_file *cm;        /* EV_CM_FILE */
	unsigned int slot;            /* EV_REFUSED; EV_NL_OUT: in epoll */
	struct sv_nl_conn *nl;        /* EV_NL_REQ, EV_NL_OUT; NULL: gone */
	struct sv_evtag *next;        /* in nl_grave */
};

struct sv_daemon {
	char sock_path[108];
	char lock_path[300];
	int listen_fd, lock_fd, epfd, sig_fd, idle_fd;
	unsigned int idle_exit;   /* seconds; 0 = never */
	int ready_fd;             /* --ready-fd: one word to the spawner */
	bool activated;           /* the listening socket came from systemd */
};
extern struct sv_daemon d;    /* main.c */

/* main.c: tell the spawner (--ready-fd), once: 0 (a daemon serves the
 * socket) or -errno and why. */
void daemon_ready_say(int err, const char *why);
/* The daemon cannot serve: say why (log, stderr when it is not the log, the
 * spawner) and return status for main. */
int daemon_give_up(int status, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* socket.c */
/* The socket's folder, made and checked: 0, or main's status (said). */
int daemon_sock_folder(void);
/* 1: we are the daemon for this path; 0: another one is; <0: error, said
 * (daemon_give_up). */
int daemon_claim_socket(void);
/* Remove the control socket's path, unless systemd owns it. */
void daemon_sock_unlink(void);

/* evloop.c */
int daemon_serve(void);       /* until a signal or idle: 0, or -errno */
int daemon_ep_add(int fd, uint32_t events, struct sv_evtag *tag);
void daemon_idle_arm(bool on);
/* Free what this batch's events may still have named. */
void daemon_bury(void);

/* clients.c */
void clients_accept(void);
void clients_input(struct sv_client *c);     /* its socket is readable */
void client_exited(struct sv_client *c);     /* its pidfd is */
void client_drop(struct sv_client *c);
void clients_bury(void);                     /* free those dropped */

/* refused.c */
void refused_init(void);
/* Keep fd until its HELLO is answered with status. */
void refused_park(int fd, int status);
/* accept4 failed for want of descriptors (errno): take the connection
 * anyway and refuse it: true when one was taken (accept again), false
 * when none could be (stop accepting for now). */
bool refused_take_nofile(void);
void refused_input(unsigned int slot);       /* its socket is readable */

/* The control thread takes the device lock saying so, so that a busy
 * engine lets it in between two WQEs instead of starving it. */
static inline void ctl_lock(void)
{
	sv_dev_lock(true);
}

static inline void ctl_unlock(void)
{
	sv_dev_unlock();
}

#endif
