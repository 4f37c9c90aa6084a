// SPDX-License-Identifier: MIT
/*
 * softverbsd: the device. main() reads the options, sets the device up,
 * claims the control socket (socket.c), starts the engine and the RoCEv2
 * port, runs the event loop (evloop.c) until a signal or --idle-exit, and
 * takes it all down again; daemon.h lists the files of the process.
 *
 * A daemon started with --ready-fd says on that descriptor whether it
 * serves ("0") or why not ("-ERRNO reason"): the autostart of
 * src/abi/sv_spawn.c waits for that word.
 *
 * Owns the device (sv_dev) and the daemon's state (d). Calls every part of
 * the daemon that has a start and a stop; called by nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "device/cm/cm.h"
#include "device/ctl/direct.h"
#include "device/daemon.h"
#include "device/nl/nl.h"
#include "device/roce/roce.h"

struct sv_device sv_dev = { .lock = PTHREAD_MUTEX_INITIALIZER, .db_memfd = -1 };

struct sv_daemon d = { .listen_fd = -1, .lock_fd = -1, .epfd = -1, .sig_fd = -1,
		       .idle_fd = -1, .ready_fd = -1 };

/* Tell the spawner (--ready-fd), once: 0 (a daemon serves the socket) or
 * -errno and why. */
void daemon_ready_say(int err, const char *why)
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
int daemon_give_up(int status, int err, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	sv_log(SV_LOG_ERR, "%s", why);
	daemon_ready_say(err < 0 ? err : -EIO, why);
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
 * object (but for the direct path's completion sides, one per connected
 * QP of this host, at most a quarter of the limit); still, the usual soft RLIMIT_NOFILE of 1024 would cap it far
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

/* What the options ask for, beyond d's and the device's own fields. */
struct sv_opts {
	const char *ip, *log_path, *netdev, *inject;
	unsigned long roce_port;
	bool roce, no_offload, no_masked, no_direct, nice_asked;
	int nice_want;
};

static bool env_is_1(const char *name)
{
	return getenv(name) && !strcmp(getenv(name), "1");
}

/* The environment and the command line: -1 to go on, else main's status. */
static int parse_opts(int argc, char **argv, struct sv_opts *o)
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
	int c;

	*o = (struct sv_opts){
		.inject = getenv("SOFTVERBSD_INJECT"),
		.roce = true,
		.no_offload = env_is_1("SOFTVERBSD_NO_OFFLOAD"),
		.no_masked = env_is_1("SOFTVERBSD_NO_MASKED_ATOMICS"),
		.no_direct = env_is_1("SOFTVERBSD_NO_DIRECT"),
		.nice_want = SV_NICE,
	};
	sv_dev.maps_text = env_is_1("SOFTVERBSD_MAPS_TEXT");

	if (getenv("SOFTVERBSD_NICE") && *getenv("SOFTVERBSD_NICE")) {
		if (parse_nice(getenv("SOFTVERBSD_NICE"), &o->nice_want)) {
			fprintf(stderr, "softverbsd: bad $SOFTVERBSD_NICE '%s'\n",
				getenv("SOFTVERBSD_NICE"));
			return 2;
		}
		o->nice_asked = true;
	}
	while ((c = getopt_long(argc, argv, "s:i:a:l:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'r': {
			char *end;

			o->roce_port = strtoul(optarg, &end, 10);
			if (*end || !o->roce_port || o->roce_port > 65535) {
				fprintf(stderr, "softverbsd: bad --roce-port '%s'\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'n':
			o->roce = false;
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
			o->no_offload = true;
			break;
		case 'M':
			o->no_masked = true;
			break;
		case 'D':
			o->no_direct = true;
			break;
		case 'j':
			o->inject = optarg;
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
			o->ip = optarg;
			break;
		case 'N':
			o->netdev = optarg;
			break;
		case 'l':
			o->log_path = optarg;
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
			if (parse_nice(optarg, &o->nice_want)) {
				fprintf(stderr, "softverbsd: bad --nice '%s'\n",
					optarg);
				return 2;
			}
			o->nice_asked = true;
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
	return -1;
}

/* The socket's path and folder, and the log: -1 to go on, else main's
 * status (said). */
static int open_paths(const struct sv_opts *o)
{
	int e;

	if (d.ready_fd >= 0 && fcntl(d.ready_fd, F_SETFD, FD_CLOEXEC))
		d.ready_fd = -1;
	if (!d.sock_path[0] && sv_sock_path(d.sock_path, sizeof(d.sock_path)))
		return daemon_give_up(2, -ENAMETOOLONG, "socket path too long");
	e = daemon_sock_folder();
	if (e)
		return e;
	if (o->log_path && sv_log_open(o->log_path)) {
		const char *name;

		e = -errno;
		name = strerrorname_np(-e);
		/* ELOOP: a link, never followed (diag/log.c) */
		return daemon_give_up(1, e, "cannot open the log %s: %s (%s)%s",
				      o->log_path, strerror(-e),
				      name ? name : "?",
				      e == -ELOOP ? ": it is a symbolic link" :
				      "");
	}
	return -1;
}

/* The device itself: its keys, its identity (--ip, --netdev), its
 * capabilities and the direct path: -1 to go on, else main's status. */
static int device_setup(const struct sv_opts *o)
{
	const char *ip = o->ip, *netdev = o->netdev;
	int ret = -ENOMEM;

	sv_dev.clients.next = sv_dev.clients.prev = &sv_dev.clients;
	if (sv_keytab_init(&sv_dev.keys, SV_MAX_MR) ||
	    (ret = sv_identity_init(ip, netdev)))
		return daemon_give_up(1, ret < 0 ? ret : -ENOMEM,
				      "cannot set up the device%s%s: %s",
				      ip || netdev ? " on " : "",
				      ip ? ip : netdev ? netdev : "",
				      ip && netdev ? "--ip and --netdev "
				      "exclude each other" :
				      strerror(ret < 0 ? -ret : ENOMEM));
	if (o->no_masked)
		sv_dev.attr.exp_cap_flags &= ~SV_EXP_CAP_MASKED_ATOMICS;
	if (!o->no_direct) {
		int e = sv_direct_init();

		if (e)
			sv_log(SV_LOG_WARN, "no direct path: %s", strerror(-e));
	}
	return -1;
}

/* The socket claimed and the engine started: -1 to go on, else main's
 * status (said). */
static int claim_and_start(void)
{
	int ret = daemon_claim_socket();

	if (ret > 0) {
		int e = sv_engine_start();

		if (e) {
			sv_cm_stop();
			sv_nl_stop();
			daemon_sock_unlink();
			sv_view_unpublish();
			return daemon_give_up(1, e, "cannot serve %s: cannot start "
					      "the engine: %s", d.sock_path,
					      strerror(-e));
		}
	}
	if (ret == 0) {
		sv_log(SV_LOG_INFO, "a daemon already serves %s", d.sock_path);
		daemon_ready_say(0, "a daemon already serves the socket");
		return 0;
	}
	if (ret < 0) {
		sv_view_unpublish();
		return 1; /* said by daemon_claim_socket */
	}
	return -1;
}

static void roce_start(const struct sv_opts *o)
{
	unsigned long port = o->roce_port ? o->roce_port : 4791ul;
	int e;

	if (!o->roce)
		return;
	e = sv_roce_start((uint16_t)o->roce_port, o->inject, o->no_offload);
	if (e)
		sv_log(SV_LOG_WARN, "no RoCEv2 port (UDP %lu): %s; peers on "
		       "this host only", port, strerror(-e));
	else
		sv_log(SV_LOG_INFO, "RoCEv2 on UDP port %lu%s%s", port,
		       o->inject ? ", fault injection " : "",
		       o->inject ? o->inject : "");
}

/* After the loop: ret is its outcome; main's status. */
static int stop(int ret)
{
	/* the CM's last words (DREQs, REJs) still go out on the wire */
	sv_cm_stop();
	sv_nl_stop();
	sv_roce_stop();
	/* stop new clients first, then free everything the old ones held */
	daemon_sock_unlink();
	sv_view_unpublish();
	close(d.listen_fd);
	while (sv_dev.clients.next != &sv_dev.clients)
		client_drop(sv_dev.clients.next);
	daemon_bury();
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

int main(int argc, char **argv)
{
	struct sv_opts o;
	int ret;

	ret = parse_opts(argc, argv, &o);
	if (ret < 0)
		ret = open_paths(&o);
	if (ret >= 0)
		return ret;
	/* before the first thread: they all inherit it */
	device_priority(o.nice_want, o.nice_asked);
	raise_nofile();
	ret = device_setup(&o);
	if (ret < 0)
		ret = claim_and_start();
	if (ret >= 0)
		return ret;
	roce_start(&o);
	sv_log(SV_LOG_INFO, "serving %s (pid %d, idle exit %us)", d.sock_path,
	       (int)getpid(), d.idle_exit);
	daemon_ready_say(0, "serving");
	return stop(daemon_serve());
}
