// SPDX-License-Identifier: MIT
/*
 * softverbsd: the device. One control thread serves every client's commands
 * from an epoll loop; it also watches each client's pidfd, SIGTERM/SIGINT
 * (clean shutdown) and an idle timer (--idle-exit).
 *
 * One daemon per socket path: a daemon holds an exclusive flock on the
 * socket's lock file (PATH.lock) for its whole life. A second one started at
 * the same time waits a little for that lock, finds a live daemon answering
 * and leaves quietly, so two clients that auto-start at once end up on one
 * daemon. One that finds the lock held by a process that does not answer on
 * the socket for SV_LOCK_GRACE_MS leaves with an error naming it, never
 * waits forever. A daemon started with --ready-fd says on that descriptor
 * whether it serves ("0") or why not ("-ERRNO reason"): the autostart of
 * src/abi/sv_spawn.c waits for that word.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "device/direct.h"
#include "device/sv_dev.h"
#include "device/roce/roce.h"
#include "device/cm/cm.h"
#include "device/nl/nl.h"

struct sv_device sv_dev = { .lock = PTHREAD_MUTEX_INITIALIZER, .db_memfd = -1 };

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

/* How long a lock held by a process that does not answer on the socket is
 * waited for: a daemon between its flock and its listen, or on its way out,
 * takes far less. */
#define SV_LOCK_GRACE_MS 3000

/* Refused connections, waiting for their HELLO to be answered with the
 * reason (then closed): EACCES for another uid, EMFILE for a process at
 * its share of connections, ENFILE for a device at its count of clients;
 * the oldest goes when a new one needs its slot. */
#define SV_REFUSED_SLOTS 8

static struct {
	char sock_path[108];
	char lock_path[300];
	int listen_fd, lock_fd, epfd, sig_fd, idle_fd;
	unsigned int idle_exit;   /* seconds; 0 = never */
	struct sv_evtag t_listen, t_signal, t_idle, t_cm_listen, t_cm_timer;
	struct sv_evtag t_cm_wire, t_nl_listen;
	int ready_fd;             /* --ready-fd: one word to the spawner */
	struct {
		int fd;
		int status;       /* -errno the HELLO gets */
		uint64_t seq;     /* age: the lowest goes first */
		struct sv_evtag tag;
	} refused[SV_REFUSED_SLOTS];
	uint64_t refused_seq;
	bool activated;           /* the listening socket came from systemd */
} d = { .listen_fd = -1, .lock_fd = -1, .epfd = -1, .sig_fd = -1,
	.idle_fd = -1, .ready_fd = -1 };

/* Tell the spawner (--ready-fd), once: 0 (a daemon serves the socket) or
 * -errno and why. */
static void ready_say(int err, const char *why)
{
	char line[600];
	int n;

	if (d.ready_fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%d %s\n", err, why ? why : "");
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	if (write(d.ready_fd, line, (size_t)n) < 0) {
		/* the spawner has gone: nobody to tell */
	}
	/* a daemon that gives up keeps it open: the spawner waits for the
	 * end of it, which comes when this process has gone (exit closes it
	 * last), so no daemon on its way out outlives the spawner's answer */
	if (!err)
		close(d.ready_fd);
	d.ready_fd = -1;
}

/* The daemon cannot serve: say why (log, stderr when it is not the log, the
 * spawner) and return status for main. */
static int __attribute__((format(printf, 3, 4)))
give_up(int status, int err, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	sv_log(SV_LOG_ERR, "%s", why);
	ready_say(err < 0 ? err : -EIO, why);
	return status;
}

/*
 * The device's priority. rxe and siw do a NIC's work in softirq and kernel
 * threads, ahead of every user thread; softverbsd's threads are that work
 * here, and applications that busy-poll their CQs (perftest, UCX, MPI) would
 * otherwise share the CPUs with them as equals: on 2 cores a busy job beside
 * two pollers leaves the device a third of a core, and every wake-up of its
 * threads waits in the run queue. So the daemon asks, before its first
 * thread starts (threads inherit it), for nice SV_NICE (or --nice,
 * $SOFTVERBSD_NICE): where that is refused (no CAP_SYS_NICE, RLIMIT_NICE)
 * it runs as it was started, and says so. One started at a nice value
 * other than 0 (nice(1), a unit's Nice=) keeps it unless told otherwise.
 * docs/DESIGN.md, "The device's priority"; measured in docs/ROCE.md.
 */
#define SV_NICE (-20)

static int parse_nice(const char *s, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < -20 || v > 19)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

static void device_priority(int want, bool asked)
{
	int now;

	errno = 0;
	now = getpriority(PRIO_PROCESS, 0);
	if (errno)
		now = 0;
	/* a daemon started at another nice value was placed on purpose */
	if (want == now || (!asked && now != 0))
		return;
	if (setpriority(PRIO_PROCESS, 0, want))
		sv_log(SV_LOG_INFO, "runs at nice %d: nice %d refused (%s)", now,
		       want, strerror(errno));
	else
		sv_log(SV_LOG_DEBUG, "runs at nice %d", want);
}

/*
 * Descriptors. The device holds a few per client (its socket, pidfd, event
 * sockets) and one per ring pool (docs/DESIGN.md, "Memory"), not one per
 * object; still, the usual soft RLIMIT_NOFILE of 1024 would cap it far
 * below its own limits (SV_MAX_CLIENTS clients): the soft limit goes up to
 * the hard one at start, as systemd does for its services. Where
 * descriptors run out anyway, a command fails with ENOMEM and a new
 * connection with EMFILE, each with a log line, never with EINVAL.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		sv_log(SV_LOG_INFO, "descriptor limit stays: %s",
		       strerror(errno));
	else
		sv_log(SV_LOG_DEBUG, "descriptor limit %llu",
		       (unsigned long long)rl.rlim_cur);
}

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
"  --no-direct         no direct path: every WQE between processes of this\n"
"                       host runs here, none in the initiating process\n"
"                       (also $SOFTVERBSD_NO_DIRECT=1; a process alone:\n"
"                       SOFTVERBS_DIRECT=0)\n"
"  --no-masked-atomics  no masked atomics: the device is one without them\n"
"                       (refuses them, answers them from the wire with an\n"
"                       invalid-request NAK; also\n"
"                       $SOFTVERBSD_NO_MASKED_ATOMICS=1)\n"
"  --inject SPEC        fault injection on the wire, for tests:\n"
"                       seed=N,drop=P,dup=P,reorder=P,corrupt=P (P in [0,1];\n"
"                       also $SOFTVERBSD_INJECT)\n"
"  --nice N             the device's threads at nice N (-20 .. 19; default\n"
"                       -20 where allowed: ahead of busy-polling programs,\n"
"                       as rxe's softirq work is; also $SOFTVERBSD_NICE)\n"
"  --log FILE           log here instead of stderr\n"
"  --log-max-bytes N    rotate FILE to FILE.1 past N bytes (default 8 MiB;\n"
"                       0: never)\n"
"  --ready-fd FD        write \"0\" to FD once serving, or \"-ERRNO reason\"\n"
"                       when it cannot (the autostart waits for it)\n"
"  --verbose            log every command\n"
"  --help               this text\n"
"Environment: $SOFTVERBSD_MAPS_TEXT=1 checks registrations against the text\n"
"of /proc/PID/maps even where the kernel has its query (Linux 6.11).\n");
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

static long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The pid that holds an flock on fd's file, from /proc/locks; else the pid
 * the file names (what a daemon writes there); else -1. */
static long lock_holder(int fd)
{
	struct stat st;
	char line[256], buf[32];
	long pid = -1;
	FILE *f;
	ssize_t n;

	if (!fstat(fd, &st) && (f = fopen("/proc/locks", "re"))) {
		while (pid < 0 && fgets(line, sizeof(line), f)) {
			unsigned int maj, min;
			unsigned long ino;
			long p;

			/* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" */
			if (!strstr(line, "FLOCK") ||
			    sscanf(line, "%*s %*s %*s %*s %ld %x:%x:%lu", &p,
				   &maj, &min, &ino) != 4)
				continue;
			if (ino == (unsigned long)st.st_ino &&
			    maj == major(st.st_dev) && min == minor(st.st_dev) &&
			    p != (long)getpid())
				pid = p;
		}
		fclose(f);
	}
	if (pid < 0 && (n = pread(fd, buf, sizeof(buf) - 1, 0)) > 0) {
		buf[n] = 0;
		pid = strtol(buf, NULL, 10);
		if (pid <= 0)
			pid = -1;
	}
	return pid;
}

/* Take the socket's lock: 1 taken; 0 another daemon answers on the socket;
 * -EBUSY the holder does not answer within SV_LOCK_GRACE_MS; -errno. */
static int take_lock(void)
{
	long end = mono_ms() + SV_LOCK_GRACE_MS;

	for (;;) {
		if (!flock(d.lock_fd, LOCK_EX | LOCK_NB))
			return 1;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return -errno;
		/* a daemon starting, serving, or on its way out holds it */
		if (daemon_alive(d.sock_path))
			return 0;
		if (mono_ms() > end)
			return -EBUSY;
		usleep(10000);
	}
}

/*
 * Socket activation (softverbsd.socket): systemd's listen-fds protocol
 * hands over one listening SOCK_SEQPACKET socket as descriptor 3, bound to
 * the control socket's path, which systemd owns (it is not unlinked here).
 * Its path replaces --socket. false when there is none.
 */
static bool take_activated(void)
{
	const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	int type = 0, acc = 0;
	socklen_t tl = sizeof(type), al = sizeof(acc);

	if (!pid || !n || strtol(pid, NULL, 10) != (long)getpid() ||
	    strtol(n, NULL, 10) < 1)
		return false;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	memset(&sa, 0, sizeof(sa));
	if (getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &tl) ||
	    type != SOCK_SEQPACKET ||
	    getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) || !acc ||
	    getsockname(3, (struct sockaddr *)&sa, &len) ||
	    sa.sun_family != AF_UNIX || !sa.sun_path[0]) {
		sv_log(SV_LOG_WARN, "socket activation: descriptor 3 is not a "
		       "listening SOCK_SEQPACKET socket with a path: ignored");
		return false;
	}
	snprintf(d.sock_path, sizeof(d.sock_path), "%s", sa.sun_path);
	fcntl(3, F_SETFD, FD_CLOEXEC);
	fcntl(3, F_SETFL, fcntl(3, F_GETFL) | O_NONBLOCK);
	d.listen_fd = 3;
	d.activated = true;
	return true;
}

/* Remove the control socket's path, unless systemd owns it. */
static void sock_unlink(void)
{
	if (!d.activated)
		unlink(d.sock_path);
}

/* 1: we are the daemon for this path; 0: another one is; <0: error, said
 * (give_up). */
static int claim_socket(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ret;

	take_activated();

	ret = sv_sock_lock_path(d.sock_path, d.lock_path, sizeof(d.lock_path));
	if (ret) {
		give_up(1, ret, "cannot serve %s: path too long", d.sock_path);
		return ret;
	}
	d.lock_fd = open(d.lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
			 0600);
	if (d.lock_fd < 0) {
		ret = -errno;
		give_up(1, ret, "cannot serve %s: cannot open its lock %s: %s",
			d.sock_path, d.lock_path, strerror(-ret));
		return ret;
	}
	ret = take_lock();
	if (ret == -EBUSY) {
		long pid = lock_holder(d.lock_fd);

		if (pid > 0)
			give_up(1, ret, "cannot serve %s: its lock %s is held by "
				"pid %ld, which does not answer on the socket",
				d.sock_path, d.lock_path, pid);
		else
			give_up(1, ret, "cannot serve %s: its lock %s is held by "
				"a process that does not answer on the socket",
				d.sock_path, d.lock_path);
		return ret;
	}
	if (ret < 0) {
		give_up(1, ret, "cannot serve %s: cannot lock %s: %s",
			d.sock_path, d.lock_path, strerror(-ret));
		return ret;
	}
	/* (an activated socket is ours: a connection to it would only wait
	 * in our own backlog) */
	if (ret == 0 || (!d.activated && daemon_alive(d.sock_path)))
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
	ret = sv_nl_start(d.sock_path);
	if (ret)
		sv_log(SV_LOG_WARN, "no RDMA netlink: %s", strerror(-ret));
	if (d.activated) {
		sv_log(SV_LOG_INFO, "socket activation: serving the socket "
		       "systemd listens on");
		return 1;
	}
	unlink(d.sock_path);
	ret = 0;
	d.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
			     SOCK_NONBLOCK, 0);
	if (d.listen_fd < 0)
		ret = -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d.sock_path);
	if (d.listen_fd >= 0) {
		/* made 0600 as it is bound: no chmod by name afterwards, which
		 * would follow whatever took the name in between */
		mode_t um = umask(0177);

		if (bind(d.listen_fd, (struct sockaddr *)&sa, sizeof(sa)))
			ret = -errno;
		umask(um);
		if (!ret && listen(d.listen_fd, 128))
			ret = -errno;
	}
	if (ret < 0) {
		sv_cm_stop();
		sv_nl_stop();
		give_up(1, ret, "cannot serve %s: %s", d.sock_path,
			strerror(-ret));
		return ret;
	}
	return 1;
}

static struct sv_client *grave;
static struct sv_cm_file *cm_grave;   /* linked by next once closed */

/* Taken back when accept4 fails for want of descriptors, so that the
 * connection can be taken and refused: epoll is level-triggered, and a
 * connection left in the backlog would wake the loop again at once. */
static int spare_fd = -1;

/* the tags of netlink connections closed in this batch */
static struct sv_evtag *nl_grave;

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
	while (nl_grave) {
		struct sv_evtag *t = nl_grave;

		nl_grave = t->next;
		free(t);
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
	sv_capture_client_gone(c);
	sv_client_teardown(c);
	ctl_unlock();
	c->next = grave;
	grave = c;
	if (!sv_dev.nclients)
		idle_arm(true);
}

/* A refused connection: kept until its HELLO is answered with status (and,
 * for EACCES, the owner's uid), so that its library fails at once with a
 * clear word instead of retrying a closed socket. */
static void refuse_park(int fd, int status)
{
	unsigned int i, old = 0;

	for (i = 0; i < SV_REFUSED_SLOTS; i++) {
		if (d.refused[i].fd < 0)
			break;
		if (d.refused[i].seq < d.refused[old].seq)
			old = i;
	}
	if (i == SV_REFUSED_SLOTS) {
		i = old;
		close(d.refused[i].fd); /* leaves epoll with it */
	}
	d.refused[i].fd = fd;
	d.refused[i].status = status;
	d.refused[i].seq = ++d.refused_seq;
	d.refused[i].tag = (struct sv_evtag){ .kind = EV_REFUSED, .slot = i };
	if (ep_add(fd, EPOLLIN | EPOLLRDHUP, &d.refused[i].tag)) {
		close(fd);
		d.refused[i].fd = -1;
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
		if (d.refused[i].fd >= 0 &&
		    (old == SV_REFUSED_SLOTS ||
		     d.refused[i].seq < d.refused[old].seq))
			old = i;
	if (old == SV_REFUSED_SLOTS)
		return false;
	close(d.refused[old].fd);
	d.refused[old].fd = -1;
	return true;
}

static void on_refused(unsigned int i)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int fd_in;
	ssize_t n;

	n = sv_recv_msg(d.refused[i].fd, &cmd, sizeof(cmd), &fd_in,
			MSG_DONTWAIT);
	if (fd_in >= 0)
		close(fd_in);
	if (n == -EAGAIN)
		return;
	if (n >= (ssize_t)sizeof(cmd.hdr) && cmd.hdr.magic == SV_PROTO_MAGIC &&
	    cmd.hdr.op == SV_CMD_HELLO) {
		sv_rsp_init(&rsp, &cmd, d.refused[i].status);
		rsp.u.hello.abi = SV_PROTO_VERSION;
		rsp.u.hello.daemon_pid = (uint32_t)getpid();
		rsp.u.hello.owner_uid = (uint32_t)geteuid();
		sv_send_msg(d.refused[i].fd, &rsp, sizeof(rsp), -1,
			    MSG_DONTWAIT);
	}
	close(d.refused[i].fd);
	d.refused[i].fd = -1;
	if (spare_fd < 0)
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void on_accept(void)
{
	for (;;) {
		int fd = accept4(d.listen_fd, NULL, NULL,
				 SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct sv_client *c;
		struct sv_evtag *ts, *tp;

		/* (accept4 says EMFILE before it looks for a connection) */
		if (fd < 0 && (errno == EMFILE || errno == ENFILE) &&
		    (spare_fd >= 0 || (listen_pending() && refuse_evict()))) {
			/* the spare (or the oldest refused connection's)
			 * descriptor takes the connection, which is refused
			 * with EMFILE; the spare comes back with the slot */
			int e = errno;

			if (spare_fd >= 0)
				close(spare_fd);
			spare_fd = -1;
			fd = accept4(d.listen_fd, NULL, NULL,
				     SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (fd < 0) {
				spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				return;
			}
			sv_log(SV_LOG_WARN, "refused a connection: out of "
			       "descriptors (%s)", strerror(e));
			refuse_park(fd, -EMFILE);
			continue;
		}
		if (fd < 0)
			return;
		{
			struct ucred cr;
			socklen_t len = sizeof(cr);

			if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) &&
			    cr.uid != geteuid() && cr.uid != 0) {
				/* one line per kind: a client retrying in a
				 * loop is counted */
				sv_log(SV_LOG_WARN, "refused pid %d: uid %u is "
				       "not the daemon's uid %u", (int)cr.pid,
				       cr.uid, geteuid());
				refuse_park(fd, -EACCES);
				continue;
			}
		}
		if (sv_dev.nclients >= SV_MAX_CLIENTS) {
			sv_log(SV_LOG_WARN, "refused a connection: %u clients",
			       sv_dev.nclients);
			refuse_park(fd, -ENFILE);
			continue;
		}
		errno = 0;
		c = sv_client_new(fd);
		if (!c) {
			/* a process at its share of connections hears so */
			if (errno == EMFILE)
				refuse_park(fd, -EMFILE);
			else
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

static void on_command(struct sv_client *c)
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
	if (!sv_dev.nclients && !sv_cm_nfiles() && !sv_nl_nconns())
		idle_arm(true);
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
		if (!in || !out || ep_add(sv_nl_req_fd(c), EPOLLIN, in)) {
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
		idle_arm(false);
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

static int serve(void)
{
	struct epoll_event evs[32];
	bool log_pending = false;
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
	d.t_nl_listen.kind = EV_NL_LISTEN;
	if (sv_nl_listen_fd() >= 0 &&
	    ep_add(sv_nl_listen_fd(), EPOLLIN, &d.t_nl_listen))
		return -errno;
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

	for (int i = 0; i < SV_REFUSED_SLOTS; i++)
		d.refused[i].fd = -1;
	for (;;) {
		/* while the log holds suppression counts, wake to write them */
		int n = epoll_wait(d.epfd, evs, 32, log_pending ? 1000 : -1);

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
				if (!sv_dev.nclients && !sv_cm_nfiles() &&
				    !sv_nl_nconns()) {
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
					if (!sv_dev.nclients && !sv_cm_nfiles() &&
					    !sv_nl_nconns())
						idle_arm(true);
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
				if (d.refused[t->slot].fd >= 0)
					on_refused(t->slot);
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
		log_pending = sv_log_tick();
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
		{ "no-direct", no_argument, NULL, 'D' },
		{ "inject", required_argument, NULL, 'j' },
		{ "cm-timeout", required_argument, NULL, 'T' },
		{ "cm-retries", required_argument, NULL, 'R' },
		{ "max-process-mem", required_argument, NULL, 'P' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "ready-fd", required_argument, NULL, 'F' },
		{ "log-max-bytes", required_argument, NULL, 'B' },
		{ "nice", required_argument, NULL, 'Z' },
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
	bool no_direct = getenv("SOFTVERBSD_NO_DIRECT") &&
			 !strcmp(getenv("SOFTVERBSD_NO_DIRECT"), "1");
	int c, ret = -ENOMEM, nice_want = SV_NICE;
	bool nice_asked = false;

	sv_dev.maps_text = getenv("SOFTVERBSD_MAPS_TEXT") &&
			   !strcmp(getenv("SOFTVERBSD_MAPS_TEXT"), "1");

	if (getenv("SOFTVERBSD_NICE") && *getenv("SOFTVERBSD_NICE")) {
		if (parse_nice(getenv("SOFTVERBSD_NICE"), &nice_want)) {
			fprintf(stderr, "softverbsd: bad $SOFTVERBSD_NICE '%s'\n",
				getenv("SOFTVERBSD_NICE"));
			return 2;
		}
		nice_asked = true;
	}
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
		case 'D':
			no_direct = true;
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
		case 'F':
		case 'B': {
			char *end;
			unsigned long long v = strtoull(optarg, &end, 10);

			if (*end || !*optarg || (c == 'F' && v > 65535)) {
				fprintf(stderr, "softverbsd: bad --%s '%s'\n",
					c == 'F' ? "ready-fd" : "log-max-bytes",
					optarg);
				return 2;
			}
			if (c == 'F')
				d.ready_fd = (int)v;
			else
				sv_log_max_bytes = v;
			break;
		}
		case 'Z':
			if (parse_nice(optarg, &nice_want)) {
				fprintf(stderr, "softverbsd: bad --nice '%s'\n",
					optarg);
				return 2;
			}
			nice_asked = true;
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
	if (d.ready_fd >= 0 && fcntl(d.ready_fd, F_SETFD, FD_CLOEXEC))
		d.ready_fd = -1;
	if (!d.sock_path[0] && sv_sock_path(d.sock_path, sizeof(d.sock_path)))
		return give_up(2, -ENAMETOOLONG, "socket path too long");
	{
		char dir[256], why[512];
		int e = sv_sock_dir(d.sock_path, dir, sizeof(dir));

		if (e || (e = mkdir_p(dir)))
			return give_up(1, e, "cannot serve %s: cannot create its "
				       "folder %s: %s", d.sock_path, dir,
				       strerror(-e));
		/* a default per-user folder made by another user is not
		 * served: its lock, log and socket would be theirs to swap */
		e = sv_sock_dir_check(d.sock_path, why, sizeof(why));
		if (e)
			return give_up(1, e, "cannot serve %s: %s", d.sock_path,
				       why);
	}
	if (log_path && sv_log_open(log_path)) {
		int e = -errno;
		const char *name = strerrorname_np(-e);

		/* ELOOP: a link, never followed (log.c) */
		return give_up(1, e, "cannot open the log %s: %s (%s)%s",
			       log_path, strerror(-e), name ? name : "?",
			       e == -ELOOP ? ": it is a symbolic link" : "");
	}
	/* before the first thread: they all inherit it */
	device_priority(nice_want, nice_asked);
	raise_nofile();
	sv_dev.clients.next = sv_dev.clients.prev = &sv_dev.clients;
	if (sv_keytab_init(&sv_dev.keys, SV_MAX_MR) ||
	    (ret = sv_identity_init(ip, netdev)))
		return give_up(1, ret < 0 ? ret : -ENOMEM,
			       "cannot set up the device%s%s: %s",
			       ip || netdev ? " on " : "",
			       ip ? ip : netdev ? netdev : "",
			       ip && netdev ? "--ip and --netdev exclude each "
			       "other" : strerror(ret < 0 ? -ret : ENOMEM));
	if (no_masked)
		sv_dev.attr.exp_cap_flags &= ~SV_EXP_CAP_MASKED_ATOMICS;
	if (!no_direct) {
		int e = sv_direct_init();

		if (e)
			sv_log(SV_LOG_WARN, "no direct path: %s", strerror(-e));
	}
	ret = claim_socket();
	if (ret > 0) {
		int e = sv_engine_start();

		if (e) {
			sv_cm_stop();
			sv_nl_stop();
			sock_unlink();
			sv_view_unpublish();
			return give_up(1, e, "cannot serve %s: cannot start the "
				       "engine: %s", d.sock_path, strerror(-e));
		}
	}
	if (ret == 0) {
		sv_log(SV_LOG_INFO, "a daemon already serves %s", d.sock_path);
		ready_say(0, "a daemon already serves the socket");
		return 0;
	}
	if (ret < 0) {
		sv_view_unpublish();
		return 1; /* said by claim_socket */
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
	ready_say(0, "serving");
	ret = serve();
	/* the CM's last words (DREQs, REJs) still go out on the wire */
	sv_cm_stop();
	sv_nl_stop();
	sv_roce_stop();
	/* stop new clients first, then free everything the old ones held */
	sock_unlink();
	sv_view_unpublish();
	close(d.listen_fd);
	while (sv_dev.clients.next != &sv_dev.clients)
		client_drop(sv_dev.clients.next);
	bury();
	sv_engine_stop();
	sv_direct_fini();
	sv_keytab_fini(&sv_dev.keys);
	if (ret)
		sv_log(SV_LOG_ERR, "event loop: %s", strerror(-ret));
	sv_log_flush();
	sv_log(SV_LOG_INFO, "stopped (%llu log lines suppressed)",
	       (unsigned long long)sv_log_suppressed());
	return ret ? 1 : 0;
}
