// SPDX-License-Identifier: MIT
/*
 * softverbs top: a live view of the device, refreshed like top(1): its
 * clients and QPs (state, queue occupancy, posted and completed rates,
 * errors, retransmissions), sorted by a column the keys choose.
 * softverbs stat --serve: the same numbers for Prometheus, over HTTP.
 * Both look through a probe connection, which creates nothing.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "tools/snap.h"
#include "tools/tool.h"

/* ---- top ---- */

enum col {
	C_QPN, C_PID, C_STATE, C_SQ, C_RQ, C_SENDR, C_RECVR, C_ERR, C_RETX,
	C_MAX
};

static const char *const col_name[C_MAX] = {
	"qpn", "pid", "state", "sq", "rq", "send/s", "recv/s", "errors",
	"retrans",
};

struct row {
	const struct sv_stat_qp *q;
	double send_rate, recv_rate;
};

static enum col sort_col = C_QPN;
static bool sort_rev;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double key(const struct row *r, enum col c)
{
	switch (c) {
	case C_QPN: return r->q->qpn;
	case C_PID: return r->q->pid;
	case C_STATE: return r->q->state;
	case C_SQ: return r->q->sq_used;
	case C_RQ: return r->q->rq_used;
	case C_SENDR: return r->send_rate;
	case C_RECVR: return r->recv_rate;
	case C_ERR: return (double)r->q->errors;
	case C_RETX: return (double)r->q->retrans;
	default: return 0;
	}
}

static int row_cmp(const void *a, const void *b)
{
	double x = key(a, sort_col), y = key(b, sort_col);
	int c = x < y ? -1 : x > y;

	if (!c)   /* ties: by QPN, always ascending */
		c = ((const struct row *)a)->q->qpn <
		    ((const struct row *)b)->q->qpn ? -1 : 1;
	else if (sort_rev)
		c = -c;
	return c;
}

/* The same QP in the last look (same QPN and client), or NULL. */
static const struct sv_stat_qp *before(const struct sv_snap *old,
				       const struct sv_stat_qp *q)
{
	for (uint32_t i = 0; old && i < old->nqps; i++)
		if (old->qps[i].qpn == q->qpn &&
		    old->qps[i].client_id == q->client_id)
			return &old->qps[i];
	return NULL;
}

static double rate(uint64_t now, uint64_t then, double dt)
{
	return dt > 0 && now >= then ? (double)(now - then) / dt : 0;
}

static void draw(const struct sv_snap *s, const struct sv_snap *old,
		 bool tty, unsigned int rows_max)
{
	const struct sv_rsp_stat_wire *w = &s->wire;
	double dt = old ? s->t - old->t : 0;
	struct row *rows = calloc(s->nqps ? s->nqps : 1, sizeof(*rows));
	uint32_t n = 0;

	if (tty)
		fputs("\033[H\033[2J", stdout);
	printf("softverbs top - %s, daemon pid %u: %u clients, %u QPs, "
	       "%llu commands refused   sort: %s%s\n", s->dev_name,
	       s->daemon_pid, s->nclients, s->nqps,
	       (unsigned long long)s->refused, col_name[sort_col],
	       sort_rev ? " (reversed)" : "");
	printf("same host: %llu msgs (%.0f/s)   roce: %s, tx %llu rx %llu "
	       "pkts, %llu retransmitted, %llu dropped\n",
	       (unsigned long long)w->lo_msgs,
	       old ? rate(w->lo_msgs, old->wire.lo_msgs, dt) : 0.0,
	       w->running ? "up" : "off", (unsigned long long)w->tx_pkts,
	       (unsigned long long)w->rx_pkts,
	       (unsigned long long)w->retransmits,
	       (unsigned long long)w->rx_drop);
	if (tty)
		printf("keys: s next sort column, r reverse, q quit\n");
	printf("\n%8s %8s %-8s %-5s %11s %11s %10s %10s %8s %8s %4s\n", "QPN",
	       "PID", "TYPE", "STATE", "SQ", "RQ", "SEND/s", "RECV/s", "ERRORS",
	       "RETRANS", "WIRE");
	for (uint32_t i = 0; rows && i < s->nqps; i++) {
		const struct sv_stat_qp *p = before(old, &s->qps[i]);

		rows[n].q = &s->qps[i];
		rows[n].send_rate = p ? rate(s->qps[i].sends, p->sends, dt) : 0;
		rows[n].recv_rate = p ? rate(s->qps[i].recvs, p->recvs, dt) : 0;
		n++;
	}
	if (rows)
		qsort(rows, n, sizeof(*rows), row_cmp);
	for (uint32_t i = 0; i < n && (!rows_max || i < rows_max); i++) {
		const struct sv_stat_qp *q = rows[i].q;
		char sq[24], rq[24];

		snprintf(sq, sizeof(sq), "%u/%u", q->sq_used, q->sq_entries);
		snprintf(rq, sizeof(rq), "%u/%u", q->rq_used, q->rq_entries);
		printf("%8u %8u %-8s %-5s %11s %11s %10.0f %10.0f %8llu %8llu "
		       "%4s\n", q->qpn, q->pid, sv_snap_qp_type(q->type),
		       sv_snap_qp_state(q->state), sq, q->srq ? "srq" : rq,
		       rows[i].send_rate, rows[i].recv_rate,
		       (unsigned long long)q->errors,
		       (unsigned long long)q->retrans, q->wire ? "yes" : "no");
	}
	free(rows);
	if (!tty)
		printf("\n");
	fflush(stdout);
}

static enum col col_by_name(const char *name)
{
	for (int c = 0; c < C_MAX; c++)
		if (!strcmp(name, col_name[c]))
			return (enum col)c;
	return C_MAX;
}

/* Wait up to ms for a key; handle it. */
static void keys(int ms, bool tty)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	char c;

	if (!tty) {
		poll(NULL, 0, ms);
		return;
	}
	if (poll(&pfd, 1, ms) <= 0 || read(STDIN_FILENO, &c, 1) != 1)
		return;
	if (c == 'q' || c == 'Q' || c == 3)
		stop = 1;
	else if (c == 's')
		sort_col = (enum col)((sort_col + 1) % C_MAX);
	else if (c == 'r')
		sort_rev = !sort_rev;
}

int sv_tool_top(int argc, char **argv)
{
	struct sv_rsp_hello hello;
	struct sv_snap snaps[2], *cur = NULL, *old = NULL;
	struct termios saved, raw;
	struct sv_probe p;
	double delay = 1.0;
	long iters = 0, done = 0;
	bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO), raw_on = false;
	int opt, ret = 0;

	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};

	while ((opt = getopt_long(argc, argv, "d:n:s:rh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'd':
			delay = strtod(optarg, NULL);
			if (!(delay >= 0.05 && delay <= 3600)) {
				fprintf(stderr, "softverbs top: -d takes 0.05 "
					"to 3600 seconds\n");
				return 2;
			}
			break;
		case 'n':
			iters = strtol(optarg, NULL, 10);
			if (iters <= 0) {
				fprintf(stderr, "softverbs top: -n takes a "
					"positive count\n");
				return 2;
			}
			break;
		case 's':
			sort_col = col_by_name(optarg);
			if (sort_col == C_MAX) {
				fprintf(stderr, "softverbs top: no column %s\n",
					optarg);
				return 2;
			}
			break;
		case 'r':
			sort_rev = true;
			break;
		default:
			printf("usage: softverbs top [-d SECONDS] [-n COUNT] "
			       "[-s COLUMN] [-r]\n"
			       "  the device's QPs, refreshed every SECONDS "
			       "(1), COUNT times (until q);\n"
			       "  sorted by COLUMN: qpn pid state sq rq send/s "
			       "recv/s errors retrans\n"
			       "  (-r: reversed). Keys: s next column, r "
			       "reverse, q quit.\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (sv_probe_open(&p, &hello))
		return 1;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (tty && !tcgetattr(STDIN_FILENO, &saved)) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		raw_on = !tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	memset(snaps, 0, sizeof(snaps));
	while (!stop) {
		cur = &snaps[done & 1];
		sv_snap_free(cur);
		ret = sv_snap_take(&p, hello.dev_name, cur);
		if (ret) {
			fprintf(stderr, "softverbs top: %s\n", strerror(-ret));
			break;
		}
		draw(cur, old, tty, 0);
		old = cur;
		if (iters && ++done >= iters)
			break;
		if (!iters)
			done++;
		for (double left = delay; left > 0 && !stop; left -= 0.05)
			keys(50, tty);
	}
	if (raw_on)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	sv_snap_free(&snaps[0]);
	sv_snap_free(&snaps[1]);
	sv_probe_close(&p);
	return ret ? 1 : 0;
}

/* ---- the metrics endpoint ---- */

static int parse_addr(const char *arg, struct sockaddr_in *sa)
{
	const char *colon = strrchr(arg, ':');
	char host[64] = "127.0.0.1";
	char *end;
	long port;

	if (colon) {
		if ((size_t)(colon - arg) >= sizeof(host))
			return -1;
		memcpy(host, arg, (size_t)(colon - arg));
		host[colon - arg] = 0;
		arg = colon + 1;
	}
	port = strtol(arg, &end, 10);
	if (*arg == 0 || *end || port < 0 || port > 65535)
		return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* Answer one HTTP request on c: GET /metrics, a fresh look each time. */
static void serve_one(int c)
{
	static const char nf[] = "HTTP/1.0 404 Not Found\r\n"
				 "Content-Type: text/plain\r\n"
				 "Connection: close\r\n\r\nnot found\n";
	struct timeval tv = { .tv_sec = 2 };
	struct sv_rsp_hello hello;
	struct sv_probe p;
	struct sv_snap s;
	char req[1024], *body = NULL;
	size_t got = 0, blen = 0;
	ssize_t n;
	FILE *f;

	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* the request line and headers, up to the blank line */
	while (got < sizeof(req) - 1 &&
	       (n = read(c, req + got, sizeof(req) - 1 - got)) > 0) {
		got += (size_t)n;
		req[got] = 0;
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	req[got] = 0;
	if (strncmp(req, "GET /metrics ", 13) && strncmp(req, "GET /metrics?", 13)) {
		if (write(c, nf, sizeof(nf) - 1) < 0)
			return;
		return;
	}
	f = open_memstream(&body, &blen);
	if (!f)
		return;
	if (sv_probe_open(&p, &hello)) {
		fclose(f);
		free(body);
		return;
	}
	if (!sv_snap_take(&p, hello.dev_name, &s))
		sv_snap_prometheus(&s, f);
	sv_snap_free(&s);
	sv_probe_close(&p);
	fclose(f);
	dprintf(c, "HTTP/1.0 200 OK\r\n"
		"Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
		"Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
	for (size_t off = 0; off < blen;) {
		n = write(c, body + off, blen - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	free(body);
}

int sv_tool_serve(const char *addr)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	char host[INET_ADDRSTRLEN];
	int one = 1, ls;

	if (parse_addr(addr, &sa)) {
		fprintf(stderr, "softverbs stat --serve: [ADDR:]PORT, not %s\n",
			addr);
		return 2;
	}
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one,
				 sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 16) ||
	    getsockname(ls, (struct sockaddr *)&sa, &len)) {
		fprintf(stderr, "softverbs stat --serve %s: %s\n", addr,
			strerror(errno));
		if (ls >= 0)
			close(ls);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
	printf("serving http://%s:%u/metrics\n", host, ntohs(sa.sin_port));
	fflush(stdout);
	while (!stop) {
		struct pollfd pfd = { .fd = ls, .events = POLLIN };
		int c;

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		serve_one(c);
		close(c);
	}
	close(ls);
	return 0;
}
