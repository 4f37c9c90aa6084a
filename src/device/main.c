// SPDX-License-Identifier: MIT
/*
 * softverbsd: the device. One control thread serves every client's commands
 * from an epoll loop; it also watches each client's pidfd, SIGTERM/SIGINT
 * (clean shutdown) and an idle timer (--idle-exit).
 *
 * One daemon per socket path: a daemon holds an exclusive flock on the lock
 * file beside the socket for its whole life. A second one started at the same
 * time waits for that lock, finds a live daemon answering and leaves quietly,
 * so two clients that auto-start at once end up on one daemon.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "device/sv_dev.h"
#include "device/roce/roce.h"
#include "device/cm/cm.h"

struct sv_device sv_dev = { .lock = PTHREAD_MUTEX_INITIALIZER, .db_memfd = -1 };

enum sv_evkind { EV_LISTEN, EV_SIGNAL, EV_IDLE, EV_SOCK, EV_PID, EV_CM_LISTEN,
		 EV_CM_TIMER, EV_CM_FILE, EV_CM_WIRE };

struct sv_evtag {
	enum sv_evkind kind;
	struct sv_client *client;
	struct sv_cm_file *cm;        /* EV_CM_FILE */
};

static struct {
	char sock_path[108];
	char lock_path[300];
	int listen_fd, lock_fd, epfd, sig_fd, idle_fd;
	unsigned int idle_exit;   /* seconds; 0 = never */
	struct sv_evtag t_listen, t_signal, t_idle, t_cm_listen, t_cm_timer;
	struct sv_evtag t_cm_wire;
} d = { .listen_fd = -1, .lock_fd = -1, .epfd = -1, .sig_fd = -1,
	.idle_fd = -1 };

static void usage(FILE *f)
{
	fprintf(f,
"usage: softverbsd [options]\n"
"  the softverbs device: serves sv0 to verbs programs on this host\n"
"  --socket PATH        control socket (default: $SOFTVERBS_SOCKET, else\n"
"                       $XDG_RUNTIME_DIR/softverbs/control, else\n"
"                       /run/softverbs/control as root)\n"
"  --idle-exit SECONDS  leave once no client has been connected for SECONDS\n"
"  --ip ADDR            the IPv4 or IPv6 address the device serves (GID 0)\n"
"  --netdev IFACE       serve every address of IFACE instead: IPv4 first\n"
"                       (GID 0), then IPv6, link-local last\n"
"  --roce-port PORT     the RoCEv2 UDP port (default 4791)\n"
"  --no-roce            no RoCEv2 port: peers on this host only\n"
"  --cm-timeout T       the CM response timeout asked of peers, as the IBTA's\n"
"                       exponent (4.096 us << T; default 20, about 4.3 s)\n"
"  --cm-retries N       sends of an unanswered REQ, REP, DREQ or SIDR_REQ\n"
"                       after the first (default 15, at most 15)\n"
"  --max-process-mem B  ring memory (QPs, SRQs, CQs, page lists) one process\n"
"                       may hold, in bytes, K/M/G suffixes (default 1G)\n"
"  --no-offload         no UDP GSO/GRO on the RoCEv2 port: one datagram per\n"
"                       packet (also $SOFTVERBSD_NO_OFFLOAD=1)\n"
"  --no-masked-atomics  no masked atomics: the device is one without them\n"
"                       (refuses them, answers them from the wire with an\n"
"                       invalid-request NAK; also\n"
"                       $SOFTVERBSD_NO_MASKED_ATOMICS=1)\n"
"  --inject SPEC        fault injection on the wire, for tests:\n"
"                       seed=N,drop=P,dup=P,reorder=P,corrupt=P (P in [0,1];\n"
"                       also $SOFTVERBSD_INJECT)\n"
"  --log FILE           log here instead of stderr\n"
"  --verbose            log every command\n"
"  --help               this text\n");
}

static int ep_add(int fd, uint32_t events, struct sv_evtag *tag)
{
	struct epoll_event ev = { .events = events, .data.ptr = tag };

	return epoll_ctl(d.epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void idle_arm(bool on)
{
	struct itimerspec its = { 0 };

	if (!d.idle_exit)
		return;
	if (on)
		its.it_value.tv_sec = d.idle_exit;
	timerfd_settime(d.idle_fd, 0, &its, NULL);
}

static int mkdir_p(const char *dir)
{
	char tmp[300];

	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Is a daemon answering on path? */
static bool daemon_alive(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return alive;
}

/* 1: we are the daemon for this path; 0: another one is; <0: error. */
static int claim_socket(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ret;

	ret = sv_sock_sibling(d.sock_path, SV_LOCK_NAME, d.lock_path,
			      sizeof(d.lock_path));
	if (ret)
		return ret;
	d.lock_fd = open(d.lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d.lock_fd < 0)
		return -errno;
	/* a daemon on its way out still holds it: wait for it to go */
	while (flock(d.lock_fd, LOCK_EX) && errno == EINTR)
		;
	if (daemon_alive(d.sock_path))
		return 0;
	/* the lock file names the daemon that holds it (tests wait on it) */
	if (ftruncate(d.lock_fd, 0) == 0) {
		char pid[16];
		int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());

		if (pwrite(d.lock_fd, pid, (size_t)n, 0) != n)
			sv_log(SV_LOG_WARN, "cannot write %s", d.lock_path);
	}
	/* the view exists before anyone can connect: a client that reaches
	 * the daemon finds it */
	sv_view_publish(d.sock_path);
	ret = sv_cm_start(d.sock_path);
	if (ret)
		sv_log(SV_LOG_WARN, "no rdma_cm device: %s", strerror(-ret));
	unlink(d.sock_path);
	d.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
			     SOCK_NONBLOCK, 0);
	if (d.listen_fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d.sock_path);
	if (bind(d.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(d.sock_path, 0600) || listen(d.listen_fd, 128))
		return -errno;
	return 1;
}

static struct sv_client *grave;
static struct sv_cm_file *cm_grave;   /* linked by next once closed */

/* Taken back when accept4 fails for want of descriptors, so that the
 * connection can be taken and refused: epoll is level-triggered, and a
 * connection left in the backlog would wake the loop again at once. */
static int spare_fd = -1;

static void bury(void)
{
	while (grave) {
		struct sv_client *c = grave;

		grave = c->next;
		sv_client_free(c);
	}
	while (cm_grave) {
		struct sv_cm_file *f = cm_grave;

		cm_grave = f->next;
		free(f->tag);
		sv_cm_file_free(f);
	}
}

/* The control thread takes the device lock saying so, so that a busy engine
 * lets it in between two WQEs instead of starving it. */
static void ctl_lock(void)
{
	sv_dev_lock(true);
}

static void ctl_unlock(void)
{
	sv_dev_unlock();
}

static void client_drop(struct sv_client *c)
{
	epoll_ctl(d.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->pidfd >= 0)
		epoll_ctl(d.epfd, EPOLL_CTL_DEL, c->pidfd, NULL);
	ctl_lock();
	sv_client_teardown(c);
	ctl_unlock();
	c->next = grave;
	grave = c;
	if (!sv_dev.nclients)
		idle_arm(true);
}

static void on_accept(void)
{
	for (;;) {
		int fd = accept4(d.listen_fd, NULL, NULL,
				 SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct sv_client *c;
		struct sv_evtag *ts, *tp;

		if (fd < 0 && (errno == EMFILE || errno == ENFILE) &&
		    spare_fd >= 0) {
			close(spare_fd);
			fd = accept4(d.listen_fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				close(fd);
			spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			sv_log(SV_LOG_WARN, "refused a connection: out of descriptors");
			if (fd >= 0)
				continue;
		}
		if (fd < 0)
			return;
		if (sv_dev.nclients >= SV_MAX_CLIENTS) {
			sv_log(SV_LOG_WARN, "refused a connection: %u clients",
			       sv_dev.nclients);
			close(fd);
			continue;
		}
		c = sv_client_new(fd);
		if (!c) {
			close(fd);
			continue;
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
			continue;
		}
		*ts = (struct sv_evtag){ EV_SOCK, c };
		*tp = (struct sv_evtag){ EV_PID, c };
		if (ep_add(fd, EPOLLIN | EPOLLRDHUP, ts) ||
		    (c->pidfd >= 0 && ep_add(c->pidfd, EPOLLIN, tp))) {
			sv_log(SV_LOG_ERR, "epoll: %s", strerror(errno));
			client_drop(c);
			continue;
		}
		idle_arm(false);
		sv_log(SV_LOG_DEBUG, "client %llu: pid %d uid %u connected",
		       (unsigned long long)c->id, (int)c->pid, c->uid);
	}
}

static void on_command(struct sv_client *c)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int fd_in, fd_out, ret;
	ssize_t n;

	for (;;) {
		n = sv_recv_msg(c->fd, &cmd, sizeof(cmd), &fd_in, MSG_DONTWAIT);
		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			if (fd_in >= 0)
				close(fd_in);
			client_drop(c);
			return;
		}
		if ((size_t)n < sizeof(cmd)) /* never read past what came */
			memset((char *)&cmd + n, 0, sizeof(cmd) - (size_t)n);
		ctl_lock();
		sv_control_handle(c, &cmd, n, fd_in, &rsp, &fd_out);
		ctl_unlock();
		if (sv_log_level >= SV_LOG_DEBUG)
			sv_log(SV_LOG_DEBUG, "client %llu: %s -> %d",
			       (unsigned long long)c->id,
			       sv_cmd_name(rsp.hdr.op), rsp.hdr.status);
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
		if (!t || ep_add(f->sock, EPOLLIN | EPOLLRDHUP, t)) {
			sv_log(SV_LOG_ERR, "epoll: rdma_cm file: %s", strerror(errno));
			cm_drop(f);
			continue;
		}
		t->kind = EV_CM_FILE;
		t->cm = f;
		idle_arm(false);
	}
}

static int serve(void)
{
	struct epoll_event evs[32];
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
	spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (d.sig_fd < 0 || d.idle_fd < 0 || d.epfd < 0)
		return -errno;
	d.t_listen.kind = EV_LISTEN;
	d.t_signal.kind = EV_SIGNAL;
	d.t_idle.kind = EV_IDLE;
	d.t_cm_listen.kind = EV_CM_LISTEN;
	d.t_cm_timer.kind = EV_CM_TIMER;
	d.t_cm_wire.kind = EV_CM_WIRE;
	if (sv_roce_gsi_fd() >= 0 && sv_cm_listen_fd() >= 0 &&
	    ep_add(sv_roce_gsi_fd(), EPOLLIN, &d.t_cm_wire))
		return -errno;
	if (sv_cm_listen_fd() >= 0 &&
	    (ep_add(sv_cm_listen_fd(), EPOLLIN, &d.t_cm_listen) ||
	     ep_add(sv_cm_timer_fd(), EPOLLIN, &d.t_cm_timer)))
		return -errno;
	if (ep_add(d.listen_fd, EPOLLIN, &d.t_listen) ||
	    ep_add(d.sig_fd, EPOLLIN, &d.t_signal) ||
	    ep_add(d.idle_fd, EPOLLIN, &d.t_idle))
		return -errno;
	idle_arm(true);

	for (;;) {
		int n = epoll_wait(d.epfd, evs, 32, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (int i = 0; i < n; i++) {
			struct sv_evtag *t = evs[i].data.ptr;
			struct signalfd_siginfo si;

			switch (t->kind) {
			case EV_LISTEN:
				on_accept();
				break;
			case EV_SIGNAL:
				if (read(d.sig_fd, &si, sizeof(si)) > 0)
					sv_log(SV_LOG_INFO, "signal %u: shutting down",
					       si.ssi_signo);
				return 0;
			case EV_IDLE:
				if (!sv_dev.nclients && !sv_cm_nfiles()) {
					sv_log(SV_LOG_INFO, "idle for %us: exiting",
					       d.idle_exit);
					return 0;
				}
				break;
			case EV_SOCK:
				if (!t->client->dead)
					on_command(t->client);
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
					if (!sv_dev.nclients && !sv_cm_nfiles())
						idle_arm(true);
				}
				break;
			case EV_PID:
				if (t->client->dead)
					break;
				sv_log(SV_LOG_INFO, "client %llu: pid %d exited",
				       (unsigned long long)t->client->id,
				       (int)t->client->pid);
				client_drop(t->client);
				break;
			}
		}
		/* clients dropped in this batch may still have had events in
		 * it; only now is their memory freed */
		bury();
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "idle-exit", required_argument, NULL, 'i' },
		{ "ip", required_argument, NULL, 'a' },
		{ "netdev", required_argument, NULL, 'N' },
		{ "log", required_argument, NULL, 'l' },
		{ "roce-port", required_argument, NULL, 'r' },
		{ "no-roce", no_argument, NULL, 'n' },
		{ "no-offload", no_argument, NULL, 'o' },
		{ "no-masked-atomics", no_argument, NULL, 'M' },
		{ "inject", required_argument, NULL, 'j' },
		{ "cm-timeout", required_argument, NULL, 'T' },
		{ "cm-retries", required_argument, NULL, 'R' },
		{ "max-process-mem", required_argument, NULL, 'P' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *ip = NULL, *log_path = NULL, *netdev = NULL;
	const char *inject = getenv("SOFTVERBSD_INJECT");
	unsigned long roce_port = 0;
	bool roce = true;
	bool no_offload = getenv("SOFTVERBSD_NO_OFFLOAD") &&
			  !strcmp(getenv("SOFTVERBSD_NO_OFFLOAD"), "1");
	bool no_masked = getenv("SOFTVERBSD_NO_MASKED_ATOMICS") &&
			 !strcmp(getenv("SOFTVERBSD_NO_MASKED_ATOMICS"), "1");
	int c, ret = -ENOMEM;

	while ((c = getopt_long(argc, argv, "s:i:a:l:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'r': {
			char *end;

			roce_port = strtoul(optarg, &end, 10);
			if (*end || !roce_port || roce_port > 65535) {
				fprintf(stderr, "softverbsd: bad --roce-port '%s'\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'n':
			roce = false;
			break;
		case 'T':
		case 'R': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || !*optarg || v > (c == 'T' ? 31ul : 15ul)) {
				fprintf(stderr, "softverbsd: bad --cm-%s '%s'\n",
					c == 'T' ? "timeout" : "retries", optarg);
				return 2;
			}
			if (c == 'T')
				sv_cm_cfg.response_timeout = (uint8_t)v;
			else
				sv_cm_cfg.max_retries = (uint8_t)v;
			break;
		}
		case 'P': {
			char *end;
			unsigned long long v = strtoull(optarg, &end, 10);
			unsigned int sh = *end == 'K' ? 10 : *end == 'M' ? 20 :
					  *end == 'G' ? 30 : 0;

			if (sh)
				end++;
			if (*end || !*optarg || !v || v > (1ull << (63 - sh))) {
				fprintf(stderr, "softverbsd: bad --max-process-mem '%s'\n",
					optarg);
				return 2;
			}
			sv_dev.proc_ring_max = v << sh;
			break;
		}
		case 'o':
			no_offload = true;
			break;
		case 'M':
			no_masked = true;
			break;
		case 'j':
			inject = optarg;
			break;
		case 's':
			snprintf(d.sock_path, sizeof(d.sock_path), "%s", optarg);
			break;
		case 'i': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || v > 86400 * 365) {
				fprintf(stderr, "softverbsd: bad --idle-exit '%s'\n",
					optarg);
				return 2;
			}
			d.idle_exit = (unsigned int)v;
			break;
		}
		case 'a':
			ip = optarg;
			break;
		case 'N':
			netdev = optarg;
			break;
		case 'l':
			log_path = optarg;
			break;
		case 'v':
			sv_log_level = SV_LOG_DEBUG;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (!d.sock_path[0] && sv_sock_path(d.sock_path, sizeof(d.sock_path))) {
		fprintf(stderr, "softverbsd: socket path too long\n");
		return 2;
	}
	{
		char dir[256];

		if (sv_sock_dir(d.sock_path, dir, sizeof(dir)) || mkdir_p(dir)) {
			fprintf(stderr, "softverbsd: cannot create the folder of %s\n",
				d.sock_path);
			return 1;
		}
	}
	if (log_path && sv_log_open(log_path)) {
		fprintf(stderr, "softverbsd: cannot open log %s: %s\n", log_path,
			strerror(errno));
		return 1;
	}
	sv_dev.clients.next = sv_dev.clients.prev = &sv_dev.clients;
	if (sv_keytab_init(&sv_dev.keys, SV_MAX_MR) ||
	    (ret = sv_identity_init(ip, netdev))) {
		sv_log(SV_LOG_ERR, "cannot set up the device%s%s: %s",
		       ip || netdev ? " on " : "", ip ? ip : netdev ? netdev : "",
		       ip && netdev ? "--ip and --netdev exclude each other" :
		       strerror(ret < 0 ? -ret : ENOMEM));
		return 1;
	}
	if (no_masked)
		sv_dev.attr.exp_cap_flags &= ~SV_EXP_CAP_MASKED_ATOMICS;
	ret = claim_socket();
	if (ret > 0) {
		int e = sv_engine_start();

		if (e) {
			sv_log(SV_LOG_ERR, "cannot start the engine");
			ret = e;
		}
	}
	if (ret == 0) {
		sv_log(SV_LOG_INFO, "a daemon already serves %s", d.sock_path);
		return 0;
	}
	if (ret < 0) {
		sv_view_unpublish();
		sv_log(SV_LOG_ERR, "cannot serve %s: %s", d.sock_path,
		       strerror(-ret));
		return 1;
	}
	if (roce) {
		int e = sv_roce_start((uint16_t)roce_port, inject,
				      no_offload);

		if (e)
			sv_log(SV_LOG_WARN, "no RoCEv2 port (UDP %lu): %s; peers on "
			       "this host only", roce_port ? roce_port : 4791ul,
			       strerror(-e));
		else
			sv_log(SV_LOG_INFO, "RoCEv2 on UDP port %lu%s%s",
			       roce_port ? roce_port : 4791ul,
			       inject ? ", fault injection " : "",
			       inject ? inject : "");
	}
	sv_log(SV_LOG_INFO, "serving %s (pid %d, idle exit %us)", d.sock_path,
	       (int)getpid(), d.idle_exit);
	ret = serve();
	/* the CM's last words (DREQs, REJs) still go out on the wire */
	sv_cm_stop();
	sv_roce_stop();
	/* stop new clients first, then free everything the old ones held */
	unlink(d.sock_path);
	sv_view_unpublish();
	close(d.listen_fd);
	while (sv_dev.clients.next != &sv_dev.clients)
		client_drop(sv_dev.clients.next);
	bury();
	sv_engine_stop();
	sv_keytab_fini(&sv_dev.keys);
	if (ret)
		sv_log(SV_LOG_ERR, "event loop: %s", strerror(-ret));
	sv_log(SV_LOG_INFO, "stopped");
	return ret ? 1 : 0;
}
