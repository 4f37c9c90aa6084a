// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 port of the device: the UDP socket (net.c), the wire thread
 * that receives packets and hands them to the responder or the completer,
 * the packet batches threads send, and the wire state of QPs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "device/roce/roce_int.h"

struct sv_roce_stats sv_roce_stats;

void sv_roce_exec(struct sv_exec *x)
{
	/* the wire copies a packet's payload (4096 bytes at most) at a
	 * time; sv_mem_copy goes through the bounce in chunks anyway */
	static __thread uint8_t bounce[4096];

	memset(x, 0, sizeof(*x));
	x->bounce = bounce;
	x->bounce_bytes = sizeof(bounce);
	x->now = sv_now_ns();
}

static struct {
	/* one UDP transport per address served, by GID index (NULL: that
	 * GID has none); nets of them */
	struct sv_net *net[SV_GID_TBL_LEN];
	unsigned int nets;
	uint16_t port;             /* the UDP port peers send to */
	/* the send side of the nets (sv_net_send, sv_net_sport), one thread
	 * at a time (net.h): the engines send under sv_dev.lock, the wire
	 * thread sends a receive batch's ACKs and responses after it */
	pthread_mutex_t tx_lock;
	int stop_fd;               /* an eventfd: written to stop the thread */
	pthread_t thread;
	bool running;
	uint32_t stop;
} wire = { .tx_lock = PTHREAD_MUTEX_INITIALIZER };

#define RX_BATCH SV_NET_RX_BATCH

/* The transport of the address gid (one of the device's GIDs), or NULL. */
static struct sv_net *net_of(const uint8_t gid[16])
{
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++)
		if (wire.net[i] && sv_dev.gid[i].valid &&
		    !memcmp(sv_dev.gid[i].gid, gid, 16))
			return wire.net[i];
	return NULL;
}

bool sv_roce_has_net(unsigned int k)
{
	return k < SV_GID_TBL_LEN && wire.net[k];
}

/* ---- sending ---- */

static pthread_key_t tx_key;
static pthread_once_t tx_once = PTHREAD_ONCE_INIT;

static void tx_free(void *p)
{
	struct sv_roce_tx *tx = p;

	if (tx) {
		free(tx->buf);
		free(tx);
	}
}

static void tx_key_make(void)
{
	(void)pthread_key_create(&tx_key, tx_free);
}

struct sv_roce_tx *sv_roce_tx_get(void)
{
	struct sv_roce_tx *tx;

	if (!wire.nets)
		return NULL;
	pthread_once(&tx_once, tx_key_make);
	tx = pthread_getspecific(tx_key);
	if (tx)
		return tx;
	/* once per thread: never on the way of a packet after that */
	tx = calloc(1, sizeof(*tx));
	if (!tx)
		return NULL;
	tx->buf = malloc((size_t)SV_TX_BATCH * SV_PKT_BYTES);
	if (!tx->buf) {
		free(tx);
		return NULL;
	}
	pthread_setspecific(tx_key, tx);
	return tx;
}

uint8_t *sv_roce_tx_next(struct sv_roce_tx *tx)
{
	if (tx->n == SV_TX_BATCH)
		sv_roce_tx_flush(tx);
	return tx->buf + (size_t)tx->n * SV_PKT_BYTES;
}

void sv_roce_tx_push(struct sv_roce_tx *tx, size_t hdr_plus_payload,
		     const uint8_t sgid[16], const uint8_t dgid[16],
		     uint16_t sport, uint32_t lqpn)
{
	struct sv_net_tx *t = &tx->pkt[tx->n];

	t->buf = tx->buf + (size_t)tx->n * SV_PKT_BYTES;
	t->len = (uint32_t)hdr_plus_payload;   /* finished at the flush */
	memcpy(t->dst, dgid, 16);
	t->sport = sport;
	t->lqpn = lqpn;
	memcpy(tx->sgid[tx->n], sgid, 16);
	tx->n++;
}

/* The UDP payload bytes of a packet of hdr_plus_payload bytes. */
static inline uint32_t wire_len(uint32_t hdr_plus_payload)
{
	return hdr_plus_payload + (-hdr_plus_payload & 3) + SV_ICRC_BYTES;
}

/* Send pkt[0..n), all from the address of net. */
static void tx_send(struct sv_net *net, const struct sv_net_tx *pkt,
		    unsigned int n)
{
	if (!net)
		return;
	/* a port that is down (softverbs inject port down) sends nothing */
	if (__builtin_expect(__atomic_load_n(&sv_dev.port.state,
					     __ATOMIC_RELAXED) !=
			     IBV_PORT_ACTIVE, 0))
		return;
	pthread_mutex_lock(&wire.tx_lock);
	sv_roce_stats.tx_pkts += sv_net_send(net, pkt, n);
	pthread_mutex_unlock(&wire.tx_lock);
}

/* sv_net_sport under the send side's lock. */
static int net_sport(struct sv_net *net, uint16_t want)
{
	int ret;

	pthread_mutex_lock(&wire.tx_lock);
	ret = sv_net_sport(net, want);
	pthread_mutex_unlock(&wire.tx_lock);
	return ret;
}

void sv_roce_tx_flush(struct sv_roce_tx *tx)
{
	uint32_t run_len = 0, run_bytes = 0, last = 0, seg = 0;
	struct sv_net *net = NULL;
	unsigned int from = 0;
	bool gso = false, cap;

	if (!tx->n)
		return;
	/* softverbs capture: one load for the batch */
	cap = __builtin_expect(__atomic_load_n(&sv_cap_on, __ATOMIC_RELAXED), 0);
	/* Each packet's pad and ICRC. With GSO, a packet for the same
	 * peer from the same port as the one before joins its datagram
	 * while the rules of sv_net_tx hold; the kernel gives segment k of
	 * a datagram IP identification k, and its ICRC covers that. */
	for (unsigned int i = 0; i < tx->n; i++) {
		struct sv_net_tx *t = &tx->pkt[i];
		uint32_t len = wire_len(t->len);
		struct sv_roce_ip ip;

		if (!i || memcmp(tx->sgid[i], tx->sgid[i - 1], 16)) {
			/* another source address: its own transport */
			struct sv_net *nn = net_of(tx->sgid[i]);

			if (i && nn != net) {
				tx_send(net, tx->pkt + from, i - from);
				from = i;
			}
			net = nn;
			gso = net && sv_net_gso(net);
		}
		t->cont = gso && i > from && last == run_len && len <= run_len &&
			  seg + 1 < SV_NET_GSO_SEGS &&
			  run_bytes + len <= SV_NET_GSO_BYTES &&
			  t->sport == tx->pkt[i - 1].sport &&
			  !memcmp(t->dst, tx->pkt[i - 1].dst, 16) &&
			  !memcmp(tx->sgid[i], tx->sgid[i - 1], 16);
		if (t->cont) {
			seg++;
			run_bytes += len;
		} else {
			seg = 0;
			run_len = run_bytes = len;
		}
		last = len;
		memset(&ip, 0, sizeof(ip));
		memcpy(ip.src, tx->sgid[i], 16);
		memcpy(ip.dst, t->dst, 16);
		ip.sport = t->sport;
		ip.dport = wire.port;
		/* what the kernel sends with DF (net_tx.c) */
		ip.ip_id = (uint16_t)seg;
		ip.df = true;
		t->len = (uint32_t)sv_roce_finish((uint8_t *)t->buf, t->len,
						  &ip);
		if (cap)
			sv_capture_pkt(SV_CAP_OUT, &ip, t->buf, t->len);
	}
	if (cap)
		sv_capture_flush();
	tx_send(net, tx->pkt + from, tx->n - from);
	tx->n = 0;
}

void sv_roce_send_resp(struct sv_roce_tx *tx, struct sv_roce_qp *rq,
		       uint8_t opcode, uint8_t syndrome, uint32_t psn,
		       uint64_t orig)
{
	struct sv_roce_pkt p;
	uint8_t *buf = sv_roce_tx_next(tx);
	size_t hdr;

	memset(&p, 0, sizeof(p));
	p.opcode = opcode;
	p.dqpn = rq->dqpn;
	p.pkey = SV_PKEY_DEFAULT;
	p.psn = psn;
	p.syndrome = syndrome;
	p.msn = rq->msn;
	p.orig = orig;
	hdr = sv_roce_build_hdr(buf, &p);
	sv_roce_tx_push(tx, hdr, rq->sgid, rq->dgid, rq->sport, rq->qp->qpn);
}

void sv_roce_send_ack(struct sv_roce_tx *tx, struct sv_roce_qp *rq,
		      uint8_t syndrome, uint32_t psn)
{
	sv_roce_send_resp(tx, rq, rq->qp->type == IBV_QPT_XRC_RECV ?
			  SV_OP_XRC_ACK : SV_OP_RC_ACK, syndrome, psn, 0);
}

/* ---- QP1: the connection manager's datagrams ---- */

/*
 * The wire thread receives them and the control thread, where the CM
 * lives, serves them: a bounded inbox under a mutex, and an eventfd the
 * control thread polls. A full inbox drops (the CM retries, as over a
 * lossy wire). The control thread sends under the device lock, from a
 * batch of its own.
 */
#define GSI_INBOX 64

static struct {
	pthread_mutex_t lock;
	int fd;                    /* eventfd: something in the inbox */
	unsigned int head, n;
	struct {
		struct sv_roce_ip ip;
		uint32_t len;
		uint8_t buf[SV_GSI_MAX_PKT];
	} in[GSI_INBOX];
	uint64_t drops;            /* inbox full or too long */
	uint32_t psn;
} gsi = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static void gsi_rx(const struct sv_net_rx *rx)
{
	unsigned int k;
	bool wake;

	pthread_mutex_lock(&gsi.lock);
	if (gsi.n == GSI_INBOX || rx->len > SV_GSI_MAX_PKT) {
		gsi.drops++;
		pthread_mutex_unlock(&gsi.lock);
		return;
	}
	k = (gsi.head + gsi.n) % GSI_INBOX;

	gsi.in[k].ip = rx->ip;
	gsi.in[k].len = rx->len;
	memcpy(gsi.in[k].buf, rx->buf, rx->len);
	wake = gsi.n++ == 0;
	pthread_mutex_unlock(&gsi.lock);
	if (wake && eventfd_write(gsi.fd, 1))
		sv_log(SV_LOG_WARN, "roce: cannot wake the CM");
}

int sv_roce_gsi_fd(void)
{
	return wire.running ? gsi.fd : -1;
}

unsigned int sv_roce_gsi_recv(struct sv_gsi_pkt *out, unsigned int max)
{
	eventfd_t v;
	unsigned int n = 0;

	(void)eventfd_read(gsi.fd, &v);
	pthread_mutex_lock(&gsi.lock);
	while (gsi.n && n < max) {
		const unsigned int k = gsi.head;

		out[n].ip = gsi.in[k].ip;
		out[n].len = gsi.in[k].len;
		memcpy(out[n].buf, gsi.in[k].buf, gsi.in[k].len);
		n++;
		gsi.head = (gsi.head + 1) % GSI_INBOX;
		gsi.n--;
	}
	/* more than max: come back */
	if (gsi.n && eventfd_write(gsi.fd, 1))
		sv_log(SV_LOG_WARN, "roce: cannot wake the CM");
	pthread_mutex_unlock(&gsi.lock);
	return n;
}

uint64_t sv_roce_gsi_drops(void)
{
	uint64_t d;

	pthread_mutex_lock(&gsi.lock);
	d = gsi.drops;
	pthread_mutex_unlock(&gsi.lock);
	return d;
}

int sv_roce_gsi_send(const uint8_t sgid[16], const uint8_t dgid[16],
		     const uint8_t *mad, size_t len)
{
	struct sv_roce_tx *tx;
	struct sv_roce_pkt p;
	struct sv_net *net;
	uint8_t *buf;
	size_t hdr;
	int sport, ret = 0;

	if (!wire.running || len > SV_PKT_BYTES - 64)
		return -ENODEV;
	sv_dev_lock(true);
	tx = sv_roce_tx_get();
	net = net_of(sgid);
	if (!tx || !net) {
		ret = !tx ? -ENOMEM : -EADDRNOTAVAIL;
		goto out;
	}
	if (sv_gid_is_v4(sgid) != sv_gid_is_v4(dgid)) {
		ret = -EAFNOSUPPORT;
		goto out;
	}
	/* QP1's port, as any QP's: the hash of its numbers */
	sport = net_sport(net, sv_roce_sport(SV_GSI_QPN, SV_GSI_QPN));
	if (sport < 0) {
		ret = sport;
		goto out;
	}
	memset(&p, 0, sizeof(p));
	p.opcode = SV_OP_UD_SEND_ONLY;
	p.pkey = SV_PKEY_DEFAULT;
	p.dqpn = SV_GSI_QPN;
	p.psn = gsi.psn;
	gsi.psn = sv_psn_add(gsi.psn, 1);
	p.qkey = SV_GSI_QKEY;
	p.sqpn = SV_GSI_QPN;
	buf = sv_roce_tx_next(tx);
	hdr = sv_roce_build_hdr(buf, &p);
	memcpy(buf + hdr, mad, len);
	sv_roce_tx_push(tx, hdr + len, sgid, dgid, (uint16_t)sport,
			SV_GSI_QPN);
	sv_roce_tx_flush(tx);
out:
	sv_dev_unlock();
	return ret;
}

/* ---- receiving ---- */

static void rx_one(const struct sv_net_rx *rx, struct sv_roce_tx *tx,
		   struct sv_qp **touched, unsigned int *ntouched)
{
	struct sv_roce_pkt p;
	struct sv_qp *qp;
	int err;

	sv_roce_stats.rx_pkts++;
	if (!sv_roce_icrc_ok(&rx->ip, rx->buf, rx->len)) {
		sv_roce_drop(SV_RX_DROP_ICRC);
		return;
	}
	err = sv_roce_parse(rx->buf, rx->len, &p);
	/* a device started without masked atomics knows not their opcodes */
	if (!err && (p.flags & SV_RF_MASKED) &&
	    !(sv_dev.attr.exp_cap_flags & SV_EXP_CAP_MASKED_ATOMICS))
		err = -EOPNOTSUPP;
	if (err && err != -EOPNOTSUPP) {
		sv_roce_drop(SV_RX_DROP_MALFORMED);
		return;
	}
	if (p.pkey != SV_PKEY_DEFAULT) {
		sv_roce_drop(SV_RX_DROP_PKEY);
		return;
	}
	if (p.dqpn == SV_GSI_QPN) {
		/* the CM's: for the control thread */
		gsi_rx(rx);
		return;
	}
	qp = sv_qp_lookup(p.dqpn);
	if (!qp || qp->dead) {
		sv_roce_drop(SV_RX_DROP_QPN);
		return;
	}
	/* a connected QP hears its peer only: a packet from any other
	 * address, request or response, is dropped before it can touch the
	 * QP (a forged ACK or NAK would move its send queue) */
	if (qp->type != IBV_QPT_UD && qp->roce &&
	    qp->state != IBV_QPS_RESET && qp->state != IBV_QPS_INIT &&
	    memcmp(rx->ip.src, qp->roce->dgid, 16)) {
		sv_roce_drop(SV_RX_DROP_PEER);
		return;
	}
	if (err) {
		/* an opcode this device does not know */
		sv_roce_drop(SV_RX_DROP_OPCODE);
		sv_roce_resp_unknown(qp, &p, &rx->ip, tx);
		return;
	}
	if (p.flags & SV_RF_RESP) {
		sv_roce_comp_rx(qp, &p, tx);
		return;
	}
	sv_roce_resp_rx(qp, &p, &rx->ip, tx);
	if (qp->roce && qp->roce->ack_due) {
		for (unsigned int i = 0; i < *ntouched; i++)
			if (touched[i] == qp)
				return;
		if (*ntouched < RX_BATCH)
			touched[(*ntouched)++] = qp;
		else
			sv_roce_resp_flush_ack(qp, tx);
	}
}

void sv_roce_rx_batch(const struct sv_net_rx *rx, unsigned int n,
		      struct sv_qp **touched, struct sv_roce_tx *tx)
{
	unsigned int nt = 0;

	sv_dev_lock(false);
	for (unsigned int i = 0; i < n; i++)
		rx_one(&rx[i], tx, touched, &nt);
	/* the data in place, then the ACKs that say so */
	sv_roce_comp_flush(tx);
	(void)sv_roce_resp_place(tx);
	/* ACKs coalesced: one per QP and batch */
	for (unsigned int i = 0; i < nt; i++)
		sv_roce_resp_flush_ack(touched[i], tx);
	sv_dev_unlock();
	/*
	 * Sent after the lock is let go: the batch's ACKs and responses are
	 * bytes in tx, and only this thread sends a responder's packets, so
	 * their order holds; an engine meanwhile runs its step instead of
	 * waiting through sendmmsg, which on a veth carries each packet
	 * through the peer's whole receive path.
	 */
	sv_roce_tx_flush(tx);
}

/* One receive batch of net k. */
static unsigned int wire_batch(struct sv_net *net, struct sv_net_rx *rx,
			       struct sv_qp **touched, struct sv_roce_tx *tx)
{
	unsigned int n = sv_net_recv(net, rx, RX_BATCH);

	if (__builtin_expect(n && __atomic_load_n(&sv_cap_on,
						  __ATOMIC_RELAXED), 0)) {
		for (unsigned int i = 0; i < n; i++)
			sv_capture_pkt(SV_CAP_IN, &rx[i].ip, rx[i].buf,
				       rx[i].len);
		sv_capture_flush();
	}
	/* nor receives anything */
	if (n && __atomic_load_n(&sv_dev.port.state, __ATOMIC_RELAXED) ==
		 IBV_PORT_ACTIVE)
		sv_roce_rx_batch(rx, n, touched, tx);
	return n;
}

/* The injector's delayed packets whose time came leave: how long poll may
 * sleep until the next one's (ms), or -1 when none waits. */
static int wire_tick(struct sv_net *const *nets, unsigned int nn)
{
	uint64_t next = 0;

	for (unsigned int k = 0; k < nn; k++) {
		uint64_t w;

		if (!sv_net_delayed(nets[k]))
			continue;
		pthread_mutex_lock(&wire.tx_lock);
		w = sv_net_tick(nets[k]);
		pthread_mutex_unlock(&wire.tx_lock);
		if (w && (!next || w < next))
			next = w;
	}
	return next ? (int)((next + 999999u) / 1000000u) : -1;
}

static void *wire_main(void *arg)
{
	static struct sv_net_rx rx[RX_BATCH];
	struct sv_qp *touched[RX_BATCH];
	struct sv_roce_tx *tx = sv_roce_tx_get();
	/* no timeout: an idle port sleeps until a packet or the stop */
	struct pollfd pfd[SV_GID_TBL_LEN + 2];
	struct sv_net *nets[SV_GID_TBL_LEN];
	unsigned int nn = 0;

	(void)arg;
	pthread_setname_np(pthread_self(), "sv-wire");
	if (!tx) {
		sv_log(SV_LOG_ERR, "roce: no memory for the wire thread");
		return NULL;
	}
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++) {
		if (!wire.net[i])
			continue;
		nets[nn] = wire.net[i];
		pfd[nn].fd = sv_net_fd(wire.net[i]);
		pfd[nn++].events = POLLIN;
	}
	pfd[nn].fd = wire.stop_fd;
	pfd[nn].events = POLLIN;
	/* the multicast groups' sockets (an epoll set: groups come and go) */
	pfd[nn + 1].fd = sv_roce_mcast_fd();
	pfd[nn + 1].events = POLLIN;
	/*
	 * A batch shorter than recvmmsg's room emptied the socket: the next
	 * look is poll's, which sleeps, or returns at once if more came
	 * meanwhile (one system call per wake-up saved: a recvmmsg that
	 * would only have said EAGAIN).
	 */
	while (!__atomic_load_n(&wire.stop, __ATOMIC_ACQUIRE)) {
		bool more = false;

		for (unsigned int k = 0; k < nn; k++) {
			wire_batch(nets[k], rx, touched, tx);
			more |= !sv_net_rx_idle(nets[k]);
		}
		more |= sv_roce_mcast_rx(tx) != 0;
		if (!more)
			(void)poll(pfd, nn + 2, wire_tick(nets, nn));
	}
	return NULL;
}

static void nets_close(void)
{
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++) {
		sv_net_close(wire.net[i]);
		wire.net[i] = NULL;
	}
	wire.nets = 0;
}

int sv_roce_start(uint16_t port, const char *inject, bool no_offload)
{
	struct sv_net_cfg cfg;
	sigset_t all, old;
	int ret = -EADDRNOTAVAIL;

	/* a transport for each address served (its GID's) */
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++) {
		int r;

		if (!sv_dev.gid[i].valid)
			continue;
		memset(&cfg, 0, sizeof(cfg));
		memcpy(cfg.addr, sv_dev.gid[i].gid, 16);
		cfg.port = port ? port : SV_ROCE_PORT;
		cfg.inject = inject;
		cfg.no_offload = no_offload;
		r = sv_net_open(&wire.net[i], &cfg);
		if (r) {
			/* GID 0's failure is the port's; another's only
			 * its own */
			wire.net[i] = NULL;
			if (i == 0) {
				ret = r;
				break;
			}
			sv_log(SV_LOG_WARN, "roce: no RoCEv2 on gid[%u]: %s", i,
			       strerror(-r));
			continue;
		}
		wire.nets++;
	}
	if (!wire.net[0]) {
		nets_close();
		return ret;
	}
	wire.port = port ? port : SV_ROCE_PORT;
	wire.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wire.stop_fd < 0) {
		ret = -errno;
		nets_close();
		return ret;
	}
	gsi.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (gsi.fd < 0) {
		ret = -errno;
		close(wire.stop_fd);
		nets_close();
		return ret;
	}
	ret = sv_roce_mcast_start(wire.port);
	if (ret) {
		close(gsi.fd);
		gsi.fd = -1;
		close(wire.stop_fd);
		nets_close();
		return ret;
	}
	/* signals are the control thread's (signalfd): the wire thread
	 * takes none */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = pthread_create(&wire.thread, NULL, wire_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		sv_roce_mcast_stop();
		close(gsi.fd);
		gsi.fd = -1;
		close(wire.stop_fd);
		nets_close();
		return -ret;
	}
	wire.running = true;
	return 0;
}

void sv_roce_stop(void)
{
	if (!wire.running)
		return;
	__atomic_store_n(&wire.stop, 1, __ATOMIC_RELEASE);
	if (eventfd_write(wire.stop_fd, 1))
		sv_log(SV_LOG_WARN, "roce: cannot wake the wire thread");
	pthread_join(wire.thread, NULL);
	sv_roce_mcast_stop();
	close(wire.stop_fd);
	close(gsi.fd);
	gsi.fd = -1;
	wire.running = false;
	nets_close();
}

int sv_roce_inject(const char *spec, const uint8_t *qps)
{
	int ret = wire.running ? 0 : -ENODEV;

	for (unsigned int i = 0; !ret && i < SV_GID_TBL_LEN; i++)
		if (wire.net[i])
			ret = sv_net_set_inject(wire.net[i], spec, qps,
						(1u << SV_MAX_QP_BITS) - 1);
	return ret;
}

bool sv_roce_running(void)
{
	return wire.running;
}

void sv_roce_get_stats(struct sv_roce_stats *out)
{
	*out = sv_roce_stats;
}

void sv_roce_stat_fill(struct sv_rsp_stat_wire *o)
{
	const struct sv_roce_stats *s = &sv_roce_stats;
	struct sv_net_stats n;

	memset(o, 0, sizeof(*o));
	o->running = wire.running;
	o->port = wire.port;
	o->tx_pkts = s->tx_pkts;
	o->rx_pkts = s->rx_pkts;
	o->rx_drop = s->rx_drop;
	o->rx_bad_icrc = s->drop_why[SV_RX_DROP_ICRC];
	for (unsigned int i = 0; i < SV_RX_DROP_MAX; i++)
		o->rx_drop_why[i] = s->drop_why[i];
	o->retransmits = s->retransmits;
	o->timeouts = s->timeouts;
	o->naks_sent = s->naks_sent;
	o->naks_rcvd = s->naks_rcvd;
	o->rnr_naks_sent = s->rnr_naks_sent;
	o->rnr_naks_rcvd = s->rnr_naks_rcvd;
	o->dup_reqs = s->dup_reqs;
	o->retry_exceeded = s->retry_exceeded;
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++) {
		if (!wire.net[i])
			continue;
		sv_net_stats(wire.net[i], &n);
		o->tx_drop_full += n.tx_drop_full;
		o->inj_drop += n.inj_drop;
		o->inj_dup += n.inj_dup;
		o->inj_reorder += n.inj_reorder;
		o->inj_corrupt += n.inj_corrupt;
		o->inj_delay += n.inj_delay;
		o->tx_gso += n.tx_gso;
		o->tx_bytes += n.tx_bytes;
		o->rx_bytes += n.rx_bytes;
		o->rx_gro += n.rx_gro;
		/* on: on for every address */
		o->gso = (i == 0 || o->gso) && sv_net_gso(wire.net[i]);
		o->gro = (i == 0 || o->gro) && sv_net_gro(wire.net[i]);
	}
}

bool sv_roce_gid_local(const uint8_t gid[16])
{
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++)
		if (sv_dev.gid[i].valid && !memcmp(sv_dev.gid[i].gid, gid, 16))
			return true;
	return false;
}

/* ---- the wire state of QPs ---- */

static void roce_free(struct sv_qp *qp)
{
	struct sv_roce_qp *rq = qp->roce;

	if (!rq)
		return;
	qp->roce = NULL;
	free(rq->win);
	free(rq);
}

/* Does qp (RC or UC, its address vector set) talk over the wire? */
static bool wants_wire(const struct sv_qp *qp)
{
	const struct sv_wire_ah *ah = &qp->attr.ah_attr;

	if (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC &&
	    qp->type != IBV_QPT_XRC_SEND && qp->type != IBV_QPT_XRC_RECV)
		return false;
	return ah->is_global && !sv_roce_gid_local(ah->dgid);
}

int sv_roce_qp_modify(struct sv_qp *qp, uint32_t cur, uint32_t next,
		      const char **why)
{
	struct sv_roce_qp *rq = qp->roce;
	struct sv_net *net;
	uint32_t mtu;
	int ret;

	if (next == IBV_QPS_RESET) {
		roce_free(qp);
		return 0;
	}
	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
		if (!wants_wire(qp))
			return 0;
		if (!wire.running) {
			*why = "the peer is on another host and the device has no RoCE port";
			return -EHOSTUNREACH;
		}
		if (!rq) {
			rq = calloc(1, sizeof(*rq));
			if (!rq)
				return -ENOMEM;
			rq->win = calloc(SV_RQ_WIN, sizeof(*rq->win));
			if (!rq->win) {
				free(rq);
				return -ENOMEM;
			}
			qp->roce = rq;
		}
		rq->qp = qp;
		memcpy(rq->sgid, sv_dev.gid[qp->attr.ah_attr.sgid_index %
					    SV_GID_TBL_LEN].gid, 16);
		memcpy(rq->dgid, qp->attr.ah_attr.dgid, 16);
		rq->dqpn = qp->attr.dest_qp_num & SV_QPN_MASK;
		net = net_of(rq->sgid);
		if (!net) {
			*why = "the source GID has no RoCEv2 port";
			return -EHOSTUNREACH;
		}
		if (sv_gid_is_v4(rq->sgid) != sv_gid_is_v4(rq->dgid)) {
			*why = "the source and destination GIDs are of two IP versions";
			return -EINVAL;
		}
		/* the port its packets really leave from (the ICRC covers
		 * it): the hash's, or the next free one */
		ret = net_sport(net, sv_roce_sport(qp->qpn, rq->dqpn));
		if (ret < 0) {
			*why = "no UDP source port for the QP";
			return ret;
		}
		rq->sport = (uint16_t)ret;
		mtu = sv_mtu_bytes(qp->attr.path_mtu);
		if (!mtu || mtu > sv_mtu_bytes(sv_dev.port.active_mtu))
			mtu = sv_mtu_bytes(sv_dev.port.active_mtu);
		rq->mtu = mtu;
		rq->epsn = qp->attr.rq_psn & SV_PSN_MASK;
		rq->msn = 0;
		return 0;
	}
	if (!rq)
		return 0;
	if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR) {
		rq->next_psn = rq->una = rq->snd = qp->attr.sq_psn & SV_PSN_MASK;
		rq->head = rq->tail = rq->cur = qp->sq.cons;
		rq->cur_pkt = 0;
		rq->retry_left = qp->attr.retry_cnt;
		rq->rnr_left = qp->attr.rnr_retry;
		rq->cwnd = rq->ssthresh = SV_PKT_WIN;
		rq->cwnd_acc = 0;
		rq->recover = rq->una;
		rq->rnr_probe = false;
	}
	if (next == IBV_QPS_ERR || next == IBV_QPS_SQE) {
		/* what is in flight is flushed from the ring */
		rq->head = rq->tail = rq->cur = qp->sq.cons;
		rq->cur_pkt = 0;
		rq->rto = 0;
	}
	return 0;
}

void sv_roce_qp_destroy(struct sv_qp *qp)
{
	sv_roce_tm_release(qp);
	roce_free(qp);
}

/* ---- UD over the wire ---- */

int sv_roce_ud_send(struct sv_exec *x, struct sv_qp *qp,
		    const struct sv_ah *ah, uint32_t remote_qpn, uint32_t qkey,
		    bool imm, uint32_t imm_data, bool solicited,
		    const struct span *payload, uint64_t len)
{
	struct sv_roce_tx *tx = sv_roce_tx_get();
	const struct sv_wire_ah *a = &ah->attr;
	struct sv_roce_pkt p;
	struct sv_net *net;
	struct span d;
	uint8_t *buf;
	size_t hdr;
	int sport;

	if (!tx)
		return IBV_WC_SUCCESS;  /* no port: the datagram is lost */
	net = net_of(sv_dev.gid[a->sgid_index % SV_GID_TBL_LEN].gid);
	if (!net || sv_gid_is_v4(a->dgid) !=
		    sv_gid_is_v4(sv_dev.gid[a->sgid_index % SV_GID_TBL_LEN].gid))
		return IBV_WC_SUCCESS;  /* no way there: lost, as on a wire */
	sport = net_sport(net, sv_roce_sport(qp->qpn,
					    remote_qpn & SV_QPN_MASK));
	if (sport < 0)
		return IBV_WC_SUCCESS;  /* no socket: lost, as on a wire */
	memset(&p, 0, sizeof(p));
	p.opcode = imm ? SV_OP_UD_SEND_ONLY_IMM : SV_OP_UD_SEND_ONLY;
	p.se = solicited;
	p.pkey = SV_PKEY_DEFAULT;
	p.dqpn = remote_qpn & SV_QPN_MASK;
	p.psn = qp->ud_psn;
	qp->ud_psn = sv_psn_add(qp->ud_psn, 1);
	p.qkey = qkey;
	p.sqpn = qp->qpn;
	p.imm = imm_data;
	buf = sv_roce_tx_next(tx);
	hdr = sv_roce_build_hdr(buf, &p);
	if (len) {
		sv_span_raw(&d, buf + hdr, len);
		if (sv_span_copy(x, &d, 0, payload, 0, len) != SV_COPY_OK) {
			return IBV_WC_LOC_PROT_ERR;
		}
	}
	sv_roce_tx_push(tx, hdr + len,
			sv_dev.gid[a->sgid_index % SV_GID_TBL_LEN].gid,
			a->dgid, (uint16_t)sport, qp->qpn);
	sv_roce_tx_flush(tx);
	return IBV_WC_SUCCESS;
}

/* ---- the transport (exec/transport.h) ---- */

const struct sv_transport sv_roce_transport = {
	.name = "roce",
	.ready = sv_roce_ready,
	.step = sv_roce_step,
	.sq_owes = sv_roce_sq_owes,
	.flush_pending = sv_roce_flush_pending,
	.flush = sv_roce_flush,
	.srq_gone = sv_roce_srq_gone,
	.ud_send = sv_roce_ud_send,
};
