// SPDX-License-Identifier: MIT
/*
 * Capture (softverbs capture; docs/DESIGN.md "Capture"): every RoCEv2
 * packet the device sends or receives, as it left or arrived, and every
 * message between two QPs of this host rendered as the packets a NIC would
 * have sent for it (sv_capture_loop), to a reader that asked for them
 * (CAPTURE), one message each on a SOCK_SEQPACKET socket: a struct
 * sv_cap_rec (addresses, ports, the IPv4 identification and DF the packet
 * had, direction, time; the QPs and processes of a rendered one) and the
 * UDP payload up to a snap length. The reader writes the pcapng.
 *
 * Off, it costs one relaxed load per batch of packets. On, each packet is
 * one non-blocking sendmsg under a leaf mutex; a reader that is behind
 * loses packets (counted), it never holds the device up. A reader that
 * went away ends the capture, and so does the end of the connection that
 * asked for it (softverbs capture holds it for as long as it runs).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_op.h"
#include "device/ctl/direct.h"
#include "device/loop/loop.h"
#include "device/roce/roce.h"
#include "device/roce/roce_int.h"
#include "device/sv_dev.h"

bool sv_cap_on;

static struct {
	pthread_mutex_t lock;
	int fd;
	uint64_t client_id;        /* the connection that asked for it */
	uint32_t snaplen;
	uint64_t sent, lost;
} cap = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static void stop_locked(void)
{
	__atomic_store_n(&sv_cap_on, false, __ATOMIC_RELAXED);
	if (cap.fd >= 0)
		close(cap.fd);
	cap.fd = -1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One message to the reader, of pkts records (a reader gone stops the
 * capture). Under cap.lock. */
static void cap_send_locked(const struct iovec *iov, unsigned int niov,
			    uint32_t pkts)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov,
			    .msg_iovlen = niov };

	if (cap.fd < 0)
		return;
	if (sendmsg(cap.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
		cap.sent += pkts;
	} else if (errno == EAGAIN || errno == ENOBUFS) {
		cap.lost += pkts;
	} else {
		sv_log(SV_LOG_INFO, "capture: the reader is gone (%s): %llu "
		       "packets captured, %llu lost", strerror(errno),
		       (unsigned long long)cap.sent,
		       (unsigned long long)cap.lost);
		/* the direct path comes back when the connection that
		 * asked goes, or with the next CAPTURE (under sv_dev.lock) */
		stop_locked();
	}
}

/* The records a thread has for the reader, sent as one message by
 * sv_capture_flush: one system call for a message's packets, or for a
 * receive batch, instead of one each. */
#define CAP_BATCH 65536u
static __thread struct {
	uint32_t bytes, pkts;
	uint64_t b[CAP_BATCH / 8];
} cb;

void sv_capture_flush(void)
{
	struct iovec iov = { cb.b, cb.bytes };

	if (!cb.pkts)
		return;
	pthread_mutex_lock(&cap.lock);
	cap_send_locked(&iov, 1, cb.pkts);
	pthread_mutex_unlock(&cap.lock);
	cb.bytes = cb.pkts = 0;
}

/* Record r (all but len and caplen) and the len bytes of buf to the
 * thread's batch. */
static void cap_put(struct sv_cap_rec *r, const uint8_t *buf, uint32_t len)
{
	uint32_t snap = __atomic_load_n(&cap.snaplen, __ATOMIC_RELAXED);
	uint32_t rec;

	r->len = len;
	r->caplen = snap && snap < len ? snap : len;
	rec = (uint32_t)sizeof(*r) + ((r->caplen + 7) & ~7u);
	if (cb.bytes + rec > CAP_BATCH)
		sv_capture_flush();
	if (rec > CAP_BATCH) {
		/* alone in its message */
		struct iovec iov[2] = { { r, sizeof(*r) },
					{ (void *)buf, r->caplen } };

		pthread_mutex_lock(&cap.lock);
		cap_send_locked(iov, 2, 1);
		pthread_mutex_unlock(&cap.lock);
		return;
	}
	memcpy((uint8_t *)cb.b + cb.bytes, r, sizeof(*r));
	memcpy((uint8_t *)cb.b + cb.bytes + sizeof(*r), buf, r->caplen);
	cb.bytes += rec;
	cb.pkts++;
}

void sv_capture_pkt(unsigned int dir, const struct sv_roce_ip *ip,
		    const uint8_t *buf, uint32_t len)
{
	struct sv_cap_rec r;

	memset(&r, 0, sizeof(r));
	r.time_ns = now_ns();
	memcpy(r.src, ip->src, 16);
	memcpy(r.dst, ip->dst, 16);
	r.sport = ip->sport;
	r.dport = ip->dport;
	r.ip_id = ip->ip_id;
	r.df = ip->df;
	r.dir = (uint8_t)dir;
	if (dir == SV_CAP_IN) {
		/* a UDP socket does not see the IPv4 identification and DF
		 * a packet had: its ICRC says which they were */
		uint16_t id;
		bool df;

		if (sv_roce_icrc_solve_v4(ip, buf, len, &id, &df)) {
			r.ip_id = id;
			r.df = df;
		}
	}
	cap_put(&r, buf, len);
}

/* ---- same-host traffic, rendered ---- */

/* One message between two QPs of this host, being rendered. */
struct render {
	struct sv_exec *x;
	const struct msg *m;
	struct sv_qp *qp, *t;      /* requester; responder (or NULL) */
	struct sv_roce_ip ip;      /* the requester's direction */
	uint32_t dqpn;
	bool mcast;                /* to a group: no one responder */
};

/* The GID a same-host QP sends from (its AV's source, else the first). */
static const uint8_t *src_gid(unsigned int idx)
{
	if (idx < SV_GID_TBL_LEN && sv_dev.gid[idx].valid)
		return sv_dev.gid[idx].gid;
	return sv_dev.gid[0].gid;
}

/* Packet p with len payload bytes (from raw, or byte off of the message's
 * local span), sent by the responder when resp. */
static void emit(struct render *rd, bool resp, const struct sv_roce_pkt *p,
		 const void *raw, uint64_t off, uint32_t len)
{
	uint8_t buf[SV_ROCE_MAX_HDR + 4096 + 8];
	struct sv_cap_rec r;
	struct sv_roce_ip ip = rd->ip;
	const struct sv_qp *from = resp ? rd->t : rd->qp,
			   *to = resp ? rd->qp : rd->t;
	size_t hdr = sv_roce_build_hdr(buf, p), n;
	/* a packet cut at the snap length loses its ICRC: only the bytes
	 * kept are read (relaxed: set before the capture was turned on) */
	uint32_t snap = __atomic_load_n(&cap.snaplen, __ATOMIC_RELAXED);
	uint32_t wire = (uint32_t)hdr + ((len + 3) & ~3u) + SV_ICRC_BYTES;
	uint32_t keep = snap && snap < wire ?
			(snap > hdr ? snap - (uint32_t)hdr : 0) : len;

	if (!hdr || len > 4096)
		return;
	if (keep > len)
		keep = len;
	if (raw) {
		memcpy(buf + hdr, raw, keep);
	} else if (keep) {
		struct span d;

		sv_span_raw(&d, buf + hdr, keep);
		if (sv_span_copy(rd->x, &d, 0, &rd->m->local, off, keep))
			memset(buf + hdr, 0, keep);
	}
	if (resp) {
		memcpy(ip.src, rd->ip.dst, 16);
		memcpy(ip.dst, rd->ip.src, 16);
	}
	if (keep < len) {
		/* the rest is never shown: only the pad count, no ICRC */
		buf[1] = (uint8_t)((buf[1] & ~0x30) | (-len & 3) << 4);
		n = wire;
	} else {
		n = sv_roce_finish(buf, hdr + len, &ip);
	}
	memset(&r, 0, sizeof(r));
	r.time_ns = now_ns();
	memcpy(r.src, ip.src, 16);
	memcpy(r.dst, ip.dst, 16);
	r.sport = ip.sport;
	r.dport = ip.dport;
	r.df = ip.df;
	r.dir = SV_CAP_OUT;
	r.local = 1;
	r.qpn = from ? from->qpn : 0;
	r.pid = from && from->owner ? from->owner->pid : 0;
	r.peer_qpn = to ? to->qpn : resp ? 0 : rd->dqpn;
	r.peer_pid = to && to->owner ? to->owner->pid : 0;
	cap_put(&r, buf, (uint32_t)n);
}

/* The request packets of the message, as the requester builds them
 * (roce/build.c), with a full congestion window: how many PSNs they
 * take. */
static uint32_t requests(struct render *rd, uint32_t psn, uint32_t mtu)
{
	const struct msg *m = rd->m;
	const struct sv_send_wqe *h = &m->w->h;
	struct sv_roce_pkt p;
	struct sv_roce_seg s;
	uint32_t k = 0;

	while (sv_roce_req_pkt(rd->qp->type, m->opcode, h, m->len, mtu, k,
			       &p, &s)) {
		p.psn = sv_psn_add(psn, k);
		p.dqpn = rd->dqpn;
		if (rd->qp->type == IBV_QPT_UD) {
			p.qkey = sv_ud_qkey(rd->qp, h);
			p.sqpn = rd->qp->qpn;
		}
		/* and every SV_ACKREQ_EVERY packets, as req.c asks */
		if (sv_qp_reliable(rd->qp) && (k + 1) % SV_ACKREQ_EVERY == 0)
			p.ackreq = true;
		emit(rd, false, &p, s.raw, s.off, s.len);
		k += s.span;
		if (s.last)
			break;
	}
	return k ? k : 1;
}

/* The responder's answer to a message of n PSNs from psn that ended in
 * res (reliable QPs). */
static void answer(struct render *rd, uint32_t psn, uint32_t n,
		   uint32_t mtu, int res)
{
	const struct msg *m = rd->m;
	uint32_t base = sv_roce_op_base(rd->qp), f = sv_op_flags(m->opcode);
	struct sv_roce_pkt p;

	memset(&p, 0, sizeof(p));
	p.pkey = SV_PKEY_DEFAULT;
	p.dqpn = rd->qp->qpn;
	p.psn = psn;
	p.opcode = (uint8_t)(SV_OP_RC_ACK + base);
	if (rd->t)
		p.msn = rd->t->cap_msn;
	if (res == RES_NOACK)
		return;         /* nothing came back */
	if (res != IBV_WC_SUCCESS) {
		/* the NAK of the outcome, at the request's first PSN */
		p.syndrome = (uint8_t)(res == RES_RNR ?
			SV_AETH_RNR(rd->t ? rd->t->attr.min_rnr_timer : 0) :
			res == IBV_WC_REM_ACCESS_ERR ? SV_AETH_NAK_ACCESS :
			res == IBV_WC_REM_INV_REQ_ERR ? SV_AETH_NAK_INV :
			SV_AETH_NAK_OP);
		emit(rd, true, &p, NULL, 0, 0);
		return;
	}
	p.syndrome = SV_AETH_ACK;
	if (rd->t)
		p.msn = ++rd->t->cap_msn & SV_PSN_MASK;
	if (f & SV_OPF_ATOMIC) {
		uint64_t orig = 0;
		struct span d;

		sv_span_raw(&d, &orig, 8);
		(void)sv_span_copy(rd->x, &d, 0, &m->local, 0, 8);
		p.opcode = (uint8_t)(SV_OP_RC_ATOMIC_ACK + base);
		p.orig = orig;
		emit(rd, true, &p, NULL, 0, 0);
	} else if (f & SV_OPF_READ) {
		/* each READ request (SV_READ_CHUNK responses at most, as
		 * the requester asks: requests()) answered on its own */
		for (uint32_t k = 0; k < n; k++) {
			uint64_t off = (uint64_t)k * mtu;
			uint32_t c = k % SV_READ_CHUNK,
				 cn = n - (k - c) < SV_READ_CHUNK ?
				      n - (k - c) : SV_READ_CHUNK;

			p.opcode = (uint8_t)(base + (cn == 1 ?
					SV_OP_RC_READ_RESP_ONLY : !c ?
					SV_OP_RC_READ_RESP_FIRST : c + 1 == cn ?
					SV_OP_RC_READ_RESP_LAST :
					SV_OP_RC_READ_RESP_MIDDLE));
			p.psn = sv_psn_add(psn, k);
			emit(rd, true, &p, NULL, off,
			     (uint32_t)(m->len - off < mtu ? m->len - off :
							     mtu));
		}
	} else if (f & (SV_OPF_AWRITE | SV_OPF_FLUSH)) {
		/* answered by an empty READ response */
		p.opcode = SV_OP_RC_READ_RESP_ONLY;
		emit(rd, true, &p, NULL, 0, 0);
	} else {
		p.psn = sv_psn_add(psn, n - 1);
		emit(rd, true, &p, NULL, 0, 0);
	}
}

/* The first PSN a message of qp renders with: on from the QP's sq_psn by
 * what was rendered (a message that ran while no capture was on took
 * none). */
static uint32_t cap_psn(struct sv_qp *qp)
{
	if (!qp->cap_psn_set || qp->cap_psn_base != qp->attr.sq_psn) {
		qp->cap_psn = qp->cap_psn_base = qp->attr.sq_psn & SV_PSN_MASK;
		qp->cap_psn_set = true;
	}
	return qp->cap_psn;
}

/* rd's addresses for a message of av from rd->qp to rd->dqpn. */
static void cap_path(struct render *rd, const struct sv_wire_ah *av)
{
	memcpy(rd->ip.src, src_gid(av->sgid_index), 16);
	memcpy(rd->ip.dst, av->is_global ? av->dgid : rd->ip.src, 16);
	rd->ip.sport = sv_roce_sport(rd->qp->qpn, rd->dqpn);
	rd->ip.dport = SV_ROCE_PORT;
	rd->ip.df = true;
}

/* The MTU a connected qp's messages are cut by. */
static uint32_t cap_mtu(const struct sv_qp *qp)
{
	uint32_t mtu = sv_mtu_bytes(qp->attr.path_mtu);

	return mtu && mtu <= 4096 ? mtu : 4096;
}

/*
 * A tag-matching rendezvous between QPs of this host, after the SEND that
 * carried its RVH (rendered by sv_capture_loop): the responder t READs the
 * RVH's range from the requester (request, then the responses with the
 * data that landed in the tagged buffer, or the NAK of st), then SENDs the
 * FIN back, acknowledged if fin says it landed. As a NIC that offloads tag
 * matching puts them on the wire, from t's send PSNs.
 */
void sv_capture_rndv(struct sv_exec *x, const struct msg *m, struct sv_qp *t,
		     uint32_t st, bool fin)
{
	const struct tm_rndv *v = &m->rndv;
	struct swqe w;
	struct ibv_tmh tmh = v->tmh;
	struct render rd = { .x = x, .qp = t, .t = m->qp,
			     .dqpn = m->qp->qpn };
	/* a message of t's, as requests() and answer() read one */
	struct msg mm, *r = &mm;
	uint64_t cap;
	uint32_t mtu = cap_mtu(t), psn, n;

	memset(&w, 0, sizeof(w));
	memset(r, 0, offsetof(struct msg, lmap));
	w.h.remote_addr = be64toh(v->rvh.va);
	w.h.rkey = be32toh(v->rvh.rkey);
	r->qp = t;
	r->w = &w;
	r->opcode = IBV_WR_RDMA_READ;
	r->len = be32toh(v->rvh.len);
	/* the sink: the tagged buffer, with what landed in it */
	if (sv_span_sges(&r->local, r->lmap, r->liov, &v->sge, v->num_sge,
			 t->srq->pd, true, &cap) != IBV_WC_SUCCESS ||
	    cap < r->len)
		sv_span_raw(&r->local, NULL, 0);
	rd.m = r;
	cap_path(&rd, &t->attr.ah_attr);
	psn = cap_psn(t);
	n = requests(&rd, psn, mtu);
	answer(&rd, psn, n, mtu, (int)st);
	psn = sv_psn_add(psn, n);
	if (st == IBV_WC_SUCCESS) {
		/* the FIN: the TMH again, its opcode FIN */
		tmh.opcode = IBV_TMH_FIN;
		r->opcode = IBV_WR_SEND;
		r->len = sizeof(tmh);
		sv_span_raw(&r->local, &tmh, sizeof(tmh));
		n = requests(&rd, psn, mtu);
		answer(&rd, psn, n, mtu, fin ? IBV_WC_SUCCESS : RES_NOACK);
		psn = sv_psn_add(psn, n);
	}
	t->cap_psn = psn;
	sv_capture_flush();
}

void sv_capture_loop(struct sv_exec *x, const struct msg *m, int res)
{
	struct sv_qp *qp = m->qp;
	const struct sv_send_wqe *h = &m->w->h;
	const struct sv_wire_ah *av;
	struct render rd = { .x = x, .m = m, .qp = qp };
	uint32_t mtu, psn, n;

	/* what reached the responder: an error the requester found sent
	 * nothing, and a retry to come is rendered when it runs */
	if (res != IBV_WC_SUCCESS && res != IBV_WC_REM_ACCESS_ERR &&
	    res != IBV_WC_REM_INV_REQ_ERR && res != IBV_WC_REM_OP_ERR &&
	    res != RES_RNR && res != RES_NOACK)
		return;
	if (sv_op_flags(m->opcode) & SV_OPF_LOCAL)
		return;
	if (qp->type == IBV_QPT_UD) {
		bool mcast = m->ah && sv_gid_is_mcast(m->ah->attr.dgid);

		/* a datagram to another host, or to a group while the port
		 * sends it on the wire too: what the wire carried is
		 * captured there; a group's without a wire is rendered
		 * once, to the group (its members take copies) */
		if (!m->ah || (sv_roce_running() &&
			       (mcast || !sv_roce_gid_local(m->ah->attr.dgid))))
			return;
		av = &m->ah->attr;
		rd.dqpn = h->remote_qpn & SV_QPN_MASK;
		mtu = sv_mtu_bytes(sv_dev.port.active_mtu);
		if (mcast) {
			if (rd.dqpn != SV_MCAST_QPN)
				return;         /* nobody took it */
			rd.mcast = true;
		}
	} else {
		av = &qp->attr.ah_attr;
		rd.dqpn = qp->attr.dest_qp_num & SV_QPN_MASK;
		mtu = cap_mtu(qp);
	}
	if (mtu > 4096 || !mtu)
		mtu = 4096;
	rd.t = rd.mcast ? NULL : sv_qp_lookup(rd.dqpn);
	cap_path(&rd, av);
	psn = cap_psn(qp);
	n = requests(&rd, psn, mtu);
	if (sv_qp_reliable(qp))
		answer(&rd, psn, n, mtu, res);
	/* a retry sends the same PSNs again */
	if (res != RES_RNR && res != RES_NOACK)
		qp->cap_psn = sv_psn_add(psn, n);
	sv_capture_flush();
}

int sv_cmd_capture(struct sv_req *r)
{
	const struct sv_cmd_capture *a = &r->cmd->u.capture;
	int type = 0;
	socklen_t tl = sizeof(type);
	bool on = r->fd_in >= 0;

	if (a->rsvd) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	if (on &&
	    (getsockopt(r->fd_in, SOL_SOCKET, SO_TYPE, &type, &tl) ||
	     type != SOCK_SEQPACKET)) {
		r->why = "the descriptor is not a SOCK_SEQPACKET socket";
		return -EINVAL;
	}
	/* while a capture is on, every message runs through the device,
	 * which renders it: no QP takes the direct path (this may let
	 * sv_dev.lock go, so not under cap.lock, which engines take under
	 * sv_dev.lock) */
	if (on)
		sv_direct_all_off(true);
	pthread_mutex_lock(&cap.lock);
	r->rsp->u.capture.sent = cap.sent;
	r->rsp->u.capture.lost = cap.lost;
	stop_locked();
	cap.sent = cap.lost = 0;
	if (on) {
		cap.fd = r->fd_in;
		r->fd_in = -1;          /* ours now */
		cap.client_id = r->client->id;
		cap.snaplen = a->snaplen;
		__atomic_store_n(&sv_cap_on, true, __ATOMIC_RELAXED);
		sv_log(SV_LOG_INFO, "capture: on (client %llu, pid %d, snap "
		       "length %u)", (unsigned long long)r->client->id,
		       (int)r->client->pid, a->snaplen);
	}
	pthread_mutex_unlock(&cap.lock);
	if (!on)
		sv_direct_all_off(false);
	return 0;
}

void sv_capture_client_gone(const struct sv_client *c)
{
	bool ended = false;

	pthread_mutex_lock(&cap.lock);
	if (cap.fd >= 0 && cap.client_id == c->id) {
		sv_log(SV_LOG_INFO, "capture: its client is gone: %llu packets "
		       "captured, %llu lost", (unsigned long long)cap.sent,
		       (unsigned long long)cap.lost);
		stop_locked();
		ended = true;
	}
	pthread_mutex_unlock(&cap.lock);
	if (ended)
		sv_direct_all_off(false);
}
