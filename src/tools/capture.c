// SPDX-License-Identifier: MIT
/*
 * softverbs capture: the device's RoCEv2 packets, as they left or arrived,
 * and its messages between QPs of this host rendered as the packets a NIC
 * would have sent, into a pcapng file that Wireshark and tshark dissect
 * with their stock InfiniBand dissector (docs/DESIGN.md "Capture"). The
 * device hands each packet over a SOCK_SEQPACKET socket (CAPTURE); here it
 * gets the Ethernet, IP and UDP headers it had on the wire (the IPv4
 * identification and DF as sent, so its ICRC verifies), its interface (0:
 * the wire, 1: this host), its direction in epb_flags, its QPs and
 * processes in a comment, and goes to the file.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "abi/sv_sock.h"
#include "tools/snap.h"
#include "tools/tool.h"

#define MAX_FRAME (14 + 40 + 8 + 65536)

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct out {
	const char *path;
	unsigned int files, idx;   /* ring: files > 1 */
	uint64_t max_bytes, bytes;
	uint32_t snaplen;
	FILE *f;
};

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* pcapng option code, length and value, padded to 4 bytes: the bytes. */
static size_t put_opt(uint8_t *p, uint16_t code, const void *v, size_t len)
{
	size_t pad = (4 - len % 4) % 4;

	put16(p, code);
	put16(p + 2, (uint16_t)len);
	memcpy(p + 4, v, len);
	memset(p + 4 + len, 0, pad);
	return 4 + len + pad;
}

/* Interface description block: Ethernet, nanosecond timestamps. */
static int put_idb(struct out *o, const char *name, const char *descr)
{
	uint8_t b[256];
	uint8_t res = 9;
	size_t n = 16;

	put16(b + 8, 1);                /* LINKTYPE_ETHERNET */
	put16(b + 10, 0);
	put32(b + 12, o->snaplen ? o->snaplen + 62 : 0);
	n += put_opt(b + n, 2, name, strlen(name));    /* if_name */
	n += put_opt(b + n, 3, descr, strlen(descr));  /* if_description */
	n += put_opt(b + n, 9, &res, 1);               /* if_tsresol */
	put32(b + n, 0);                               /* opt_endofopt */
	n += 4;
	put32(b, 1);
	put32(b + 4, (uint32_t)(n + 4));
	put32(b + n, (uint32_t)(n + 4));
	n += 4;
	if (fwrite(b, n, 1, o->f) != 1)
		return -1;
	o->bytes += n;
	return 0;
}

static int out_open(struct out *o)
{
	char name[4096];
	uint8_t shb[28];

	if (o->files > 1)
		snprintf(name, sizeof(name), "%s.%u", o->path, o->idx);
	else
		snprintf(name, sizeof(name), "%s", o->path);
	o->f = fopen(name, "wb");
	if (!o->f) {
		fprintf(stderr, "softverbs capture: %s: %s\n", name,
			strerror(errno));
		return -1;
	}
	/* section header: byte order magic, version 1.0, length unknown */
	put32(shb, 0x0A0D0D0A);
	put32(shb + 4, sizeof(shb));
	put32(shb + 8, 0x1A2B3C4D);
	put16(shb + 12, 1);
	put16(shb + 14, 0);
	memset(shb + 16, 0xff, 8);
	put32(shb + 24, sizeof(shb));
	if (fwrite(shb, sizeof(shb), 1, o->f) != 1)
		return -1;
	o->bytes = sizeof(shb);
	/* interface 0: RoCEv2 on the wire; 1: traffic between two QPs of
	 * this host, rendered as the packets a NIC would have sent */
	if (put_idb(o, "sv0", "RoCEv2 packets of the device, as they left "
		    "or arrived") ||
	    put_idb(o, "sv0-local", "messages between QPs of this host, "
		    "rendered as RoCEv2 packets"))
		return -1;
	return 0;
}

static uint16_t ip_csum(const uint8_t *h, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i < n; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static bool is_v4(const uint8_t *gid)
{
	static const uint8_t pre[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(gid, pre, 12);
}

/* The frame the packet was on the wire: Ethernet, IPv4 or IPv6, UDP. */
static size_t frame(const struct sv_cap_rec *r, const uint8_t *payload,
		    uint8_t *f, uint32_t *orig)
{
	bool v4 = is_v4(r->src);
	size_t iph = v4 ? 20 : 40, n = 0;
	uint16_t udplen = (uint16_t)(8 + r->len);

	/* locally administered MACs: 02:00:00:00:00:01 out, :02 in; to
	 * a group, its multicast MAC (01:00:5e and the low 23 bits of an
	 * IPv4 group, 33:33 and the low 32 bits of an IPv6 one) */
	memset(f, 0, 12);
	f[0] = f[6] = 0x02;
	f[5] = r->dir == SV_CAP_OUT ? 2 : 1;
	f[11] = r->dir == SV_CAP_OUT ? 1 : 2;
	if (v4 && (r->dst[12] & 0xf0) == 0xe0) {
		f[0] = 0x01;
		f[2] = 0x5e;
		f[3] = r->dst[13] & 0x7f;
		f[4] = r->dst[14];
		f[5] = r->dst[15];
	} else if (!v4 && r->dst[0] == 0xff) {
		f[0] = f[1] = 0x33;
		memcpy(f + 2, r->dst + 12, 4);
	}
	f[12] = v4 ? 0x08 : 0x86;
	f[13] = v4 ? 0x00 : 0xdd;
	n = 14;
	if (v4) {
		uint8_t *h = f + n;

		h[0] = 0x45;
		h[1] = 0;
		put16(h + 2, htons((uint16_t)(20 + udplen)));
		put16(h + 4, htons(r->ip_id));
		put16(h + 6, htons(r->df ? 0x4000 : 0));
		h[8] = 64;
		h[9] = 17;
		put16(h + 10, 0);
		memcpy(h + 12, r->src + 12, 4);
		memcpy(h + 16, r->dst + 12, 4);
		put16(h + 10, htons(ip_csum(h, 20)));
	} else {
		uint8_t *h = f + n;

		memset(h, 0, 4);
		h[0] = 0x60;
		put16(h + 4, htons(udplen));
		h[6] = 17;
		h[7] = 64;
		memcpy(h + 8, r->src, 16);
		memcpy(h + 24, r->dst, 16);
	}
	n += iph;
	put16(f + n, htons(r->sport));
	put16(f + n + 2, htons(r->dport));
	put16(f + n + 4, htons(udplen));
	put16(f + n + 6, 0);
	n += 8;
	memcpy(f + n, payload, r->caplen);
	*orig = (uint32_t)(n + r->len);
	return n + r->caplen;
}

/* What the frame's comment says: its QPs and processes. */
static size_t who(const struct sv_cap_rec *r, char *c, size_t room)
{
	int n;

	if (r->local && r->peer_qpn == 0xffffff)
		n = snprintf(c, room, "same-host: pid %d qp %#x -> the "
			     "group's QPs (qp 0xffffff)", (int)r->pid, r->qpn);
	else if (r->local)
		n = snprintf(c, room, "same-host: pid %d qp %#x -> pid %d "
			     "qp %#x", (int)r->pid, r->qpn, (int)r->peer_pid,
			     r->peer_qpn);
	else if (r->pid)
		n = snprintf(c, room, "%s: pid %d qp %#x",
			     r->dir == SV_CAP_IN ? "in" : "out", (int)r->pid,
			     r->qpn);
	else
		n = snprintf(c, room, "%s: qp not known",
			     r->dir == SV_CAP_IN ? "in" : "out");
	return n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1;
}

static int write_epb(struct out *o, const struct sv_cap_rec *r,
		     const uint8_t *payload)
{
	static uint8_t f[MAX_FRAME];
	uint8_t h[28], opt[160], tail[4];
	char c[96];
	uint32_t orig, pad, total, flags = r->dir == SV_CAP_IN ? 1 : 2;
	size_t len = frame(r, payload, f, &orig), nopt = 0;
	static const uint8_t zero[4];

	/* epb_flags: direction, 1 inbound, 2 outbound; opt_comment: who */
	nopt += put_opt(opt + nopt, 2, &flags, 4);
	nopt += put_opt(opt + nopt, 1, c, who(r, c, sizeof(c)));
	put32(opt + nopt, 0);
	nopt += 4;
	pad = (uint32_t)((4 - len % 4) % 4);
	total = (uint32_t)(sizeof(h) + len + pad + nopt + sizeof(tail));
	put32(h, 6);
	put32(h + 4, total);
	put32(h + 8, r->local ? 1 : 0);
	put32(h + 12, (uint32_t)(r->time_ns >> 32));
	put32(h + 16, (uint32_t)r->time_ns);
	put32(h + 20, (uint32_t)len);
	put32(h + 24, orig);
	put32(tail, total);
	if (fwrite(h, sizeof(h), 1, o->f) != 1 ||
	    (len && fwrite(f, len, 1, o->f) != 1) ||
	    (pad && fwrite(zero, pad, 1, o->f) != 1) ||
	    fwrite(opt, nopt, 1, o->f) != 1 ||
	    fwrite(tail, sizeof(tail), 1, o->f) != 1)
		return -1;
	o->bytes += total;
	if (o->files > 1 && o->max_bytes && o->bytes >= o->max_bytes) {
		fclose(o->f);
		o->idx = (o->idx + 1) % o->files;
		return out_open(o);
	}
	return 0;
}

/* The QPs of this device, as last looked at: which local QP and process a
 * RoCEv2 packet is of (the device names them only for rendered ones). */
struct qps {
	struct sv_snap s;
	double t;                  /* when taken (0: never) */
	bool ok;
};

static double elapsed(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) +
	       (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const struct sv_stat_qp *qp_find(const struct qps *q, uint32_t qpn,
					bool by_dest)
{
	for (uint32_t i = 0; q->ok && i < q->s.nqps; i++) {
		const struct sv_stat_qp *e = &q->s.qps[i];

		if (by_dest ? e->wire && e->dest_qpn == qpn &&
			      e->type != IBV_QPT_UD :
			      e->qpn == qpn)
			return e;
	}
	return NULL;
}

/* r's local QP and process, from its headers: an arriving packet is for
 * the QP its BTH names; a datagram sent says its QP in the DETH; any other
 * packet sent is of the wire QP whose peer the BTH names. A QP not seen
 * yet has the device looked at again (at most every 50 ms). */
static void resolve(struct sv_probe *p, struct qps *q, struct sv_cap_rec *r,
		    const uint8_t *b)
{
	uint32_t dq, qpn;
	bool by_dest = false;
	const struct sv_stat_qp *e;

	if (r->local || r->caplen < 12)
		return;
	dq = (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
	if (r->dir == SV_CAP_IN)
		qpn = dq;
	else if ((b[0] & 0xe0) == 0x60 && r->caplen >= 20)
		qpn = (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
	else {
		qpn = dq;
		by_dest = true;
	}
	e = qp_find(q, qpn, by_dest);
	if (!e && mono() - q->t > 0.05) {
		sv_snap_free(&q->s);
		q->ok = !sv_snap_take(p, "sv0", &q->s);
		q->t = mono();
		e = qp_find(q, qpn, by_dest);
	}
	if (e) {
		r->qpn = e->qpn;
		r->pid = (int32_t)e->pid;
	}
}

/* The filters of -q, -o and -p (-1: any). */
struct filter {
	long qpn, opcode, pid;
};

/* Does the filter keep record r, whose payload starts at b? */
static bool wanted(const struct filter *f, const struct sv_cap_rec *r,
		   const uint8_t *b)
{
	if (r->caplen < 12)
		return f->qpn < 0 && f->opcode < 0 &&
		       (f->pid < 0 || r->pid == f->pid ||
			r->peer_pid == f->pid);
	if (f->qpn >= 0) {
		uint32_t q = (uint32_t)f->qpn,
			 dq = (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];

		if (dq != q && r->qpn != q && r->peer_qpn != q)
			return false;
	}
	if (f->opcode >= 0 && b[0] != f->opcode)
		return false;
	return f->pid < 0 || r->pid == f->pid || r->peer_pid == f->pid;
}

static int capture_cmd(struct sv_probe *p, int fd, uint32_t snaplen,
		       struct sv_rsp *rsp)
{
	struct sv_cmd cmd;
	int status, ret;

	sv_cmd_init(&cmd, SV_CMD_CAPTURE);
	cmd.u.capture.snaplen = snaplen;
	cmd.hdr.seq = ++p->seq;
	ret = sv_call(p->fd, &cmd, fd, rsp, &status, NULL, false);
	return ret ? ret : status;
}

/* The options into o, *count, *secs and *flt: -1, or the exit status
 * (-h: 0, a bad option: 2). */
static int capture_args(int argc, char **argv, struct out *o, long *count,
			double *secs, struct filter *flt)
{
	int opt;

	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};

	while ((opt = getopt_long(argc, argv, "w:s:c:d:W:C:q:o:p:h", longopts,
				  NULL)) != -1) {
		unsigned long long v = 0;
		char *end = NULL;

		if (opt != 'w' && opt != 'h' && opt != '?' && opt != ':') {
			errno = 0;
			if (opt == 'd') {
				*secs = strtod(optarg, &end);
				v = *secs > 0;
			} else {
				v = strtoull(optarg, &end, 0);
			}
			/* a number, whole, and in range for its option */
			if (errno || end == optarg || *end || optarg[0] == '-' ||
			    (opt != 'o' && opt != 's' && !v) ||
			    v > (opt == 'C' ? UINT64_MAX / 2 :
				 opt == 'o' ? 255 : opt == 'W' ? 1024 :
				 opt == 'd' ? 1 : INT32_MAX)) {
				fprintf(stderr, "softverbs capture: bad -%c "
					"'%s'\n", opt, optarg);
				return 2;
			}
		}
		switch (opt) {
		case 'w': o->path = optarg; break;
		case 's': o->snaplen = (uint32_t)v; break;
		case 'c': *count = (long)v; break;
		case 'd': break;
		case 'W': o->files = (unsigned int)v; break;
		case 'C': o->max_bytes = v; break;
		case 'q': flt->qpn = (long)v; break;
		case 'o': flt->opcode = (long)v; break;
		case 'p': flt->pid = (long)v; break;
		default:
			printf("usage: softverbs capture -w FILE [-s SNAPLEN] "
			       "[-c COUNT] [-d SECONDS]\n"
			       "       [-q QPN] [-p PID] [-o OPCODE] "
			       "[-W FILES -C BYTES]\n"
			       "  the device's RoCEv2 packets, both directions, "
			       "and its messages\n"
			       "  between QPs of this host as the packets a NIC "
			       "would have sent,\n"
			       "  into a pcapng file (tshark -r FILE); until "
			       "COUNT packets, SECONDS\n"
			       "  or a signal.\n"
			       "  -q, -p, -o: only packets of that QP (either "
			       "end), of that process\n"
			       "  (either end) or with that opcode\n"
			       "  -W, -C: a ring of FILES files FILE.0 ... of "
			       "about BYTES each\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	return -1;
}

int sv_tool_capture(int argc, char **argv)
{
	struct out o = { .files = 1 };
	long count = 0, got = 0, shown = 0;
	double secs = 0;
	struct filter flt = { -1, -1, -1 };
	struct qps q = { .ok = false };
	struct sv_probe p;
	struct sv_rsp rsp;
	/* a message: records of at most 64 KiB, or one of a larger packet */
	static uint64_t msg64[(131072 + 4096) / 8];
	uint8_t *msg = (uint8_t *)msg64;
	int sp[2], ret;
	bool draining = false;
	struct timespec t0;

	ret = capture_args(argc, argv, &o, &count, &secs, &flt);
	if (ret >= 0)
		return ret;
	if (!o.path || !o.files || (o.files > 1 && !o.max_bytes)) {
		fprintf(stderr, "softverbs capture: -w FILE is needed (and -C "
			"with -W); see -h\n");
		return 2;
	}
	if (sv_probe_open(&p, NULL))
		return 1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		perror("softverbs capture: socketpair");
		return 1;
	}
	{
		int big = 4 << 20;

		setsockopt(sp[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		setsockopt(sp[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	}
	if (out_open(&o))
		return 1;
	ret = capture_cmd(&p, sp[1], o.snaplen, &rsp);
	close(sp[1]);
	if (ret) {
		fprintf(stderr, "softverbs capture: the device refused: %s\n",
			strerror(-ret));
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	fprintf(stderr, "capturing the device's packets into %s\n", o.path);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pfd = { .fd = sp[0], .events = POLLIN };
		ssize_t n;

		if (!draining && (stop || (count && shown >= count) ||
				  (secs > 0 && elapsed(&t0) >= secs))) {
			/* the device stops, closes its end; what it sent
			 * before is still read (recv: 0 at the end) */
			ret = capture_cmd(&p, -1, 0, &rsp);
			draining = true;
		}
		if (count && shown >= count)
			break;
		if (poll(&pfd, 1, draining ? 1000 : 100) <= 0) {
			if (draining)
				break;
			continue;
		}
		n = recv(sp[0], msg, sizeof(msg64), MSG_DONTWAIT);
		if (n <= 0) {
			if (n == 0)
				break;  /* the device ended it */
			continue;
		}
		/* one or more records, each padded to 8 bytes */
		for (size_t off = 0; off < (size_t)n;) {
			struct sv_cap_rec *r = (struct sv_cap_rec *)(msg + off);
			const uint8_t *b = msg + off + sizeof(*r);
			size_t left = (size_t)n - off;

			if (left < sizeof(*r) || r->caplen > left - sizeof(*r) ||
			    r->len < r->caplen)
				break;  /* malformed: the rest too */
			off += sizeof(*r) + ((r->caplen + 7) & ~(size_t)7);
			got++;
			resolve(&p, &q, r, b);
			if (!wanted(&flt, r, b))
				continue;
			if (count && shown >= count)
				break;
			if (write_epb(&o, r, b)) {
				fprintf(stderr, "softverbs capture: writing %s: "
					"%s\n", o.path, strerror(errno));
				goto out;
			}
			shown++;
		}
	}
out:
	if (!draining)
		ret = capture_cmd(&p, -1, 0, &rsp);
	sv_probe_close(&p);
	sv_snap_free(&q.s);
	close(sp[0]);
	if (fclose(o.f)) {
		perror("softverbs capture: closing the file");
		return 1;
	}
	fprintf(stderr, "%ld packets written (%ld seen); the device sent %llu "
		"and lost %llu to a full socket\n", shown, got,
		ret ? 0ull : (unsigned long long)rsp.u.capture.sent,
		ret ? 0ull : (unsigned long long)rsp.u.capture.lost);
	return 0;
}
