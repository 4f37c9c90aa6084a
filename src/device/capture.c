// SPDX-License-Identifier: MIT
/*
 * Capture (softverbs capture; docs/DESIGN.md "Capture"): every RoCEv2
 * packet the device sends or receives, as it left or arrived, to a reader
 * that asked for them (CAPTURE), one message each on a SOCK_SEQPACKET
 * socket: a struct sv_cap_rec (addresses, ports, the IPv4 identification
 * and DF the packet had, direction, time) and the UDP payload up to a
 * snap length. The reader writes the pcapng.
 *
 * Off, it costs one relaxed load per batch of packets. On, each packet is
 * one non-blocking sendmsg under a leaf mutex; a reader that is behind
 * loses packets (counted), it never holds the device up. A reader that
 * went away ends the capture, and so does the end of the connection that
 * asked for it (softverbs capture holds it for as long as it runs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

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

void sv_capture_pkt(unsigned int dir, const struct sv_roce_ip *ip,
		    const uint8_t *buf, uint32_t len)
{
	struct sv_cap_rec r;
	struct iovec iov[2];
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
	struct timespec ts;

	memset(&r, 0, sizeof(r));
	clock_gettime(CLOCK_REALTIME, &ts);
	r.time_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	r.len = len;
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
	pthread_mutex_lock(&cap.lock);
	if (cap.fd < 0) {
		pthread_mutex_unlock(&cap.lock);
		return;
	}
	r.caplen = cap.snaplen && cap.snaplen < len ? cap.snaplen : len;
	iov[0].iov_base = &r;
	iov[0].iov_len = sizeof(r);
	iov[1].iov_base = (void *)buf;
	iov[1].iov_len = r.caplen;
	if (sendmsg(cap.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
		cap.sent++;
	} else if (errno == EAGAIN || errno == ENOBUFS) {
		cap.lost++;
	} else {
		sv_log(SV_LOG_INFO, "capture: the reader is gone (%s): %llu "
		       "packets captured, %llu lost", strerror(errno),
		       (unsigned long long)cap.sent,
		       (unsigned long long)cap.lost);
		stop_locked();
	}
	pthread_mutex_unlock(&cap.lock);
}

int sv_cmd_capture(struct sv_req *r)
{
	const struct sv_cmd_capture *a = &r->cmd->u.capture;
	int type = 0;
	socklen_t tl = sizeof(type);

	if (a->rsvd) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	if (r->fd_in >= 0 &&
	    (getsockopt(r->fd_in, SOL_SOCKET, SO_TYPE, &type, &tl) ||
	     type != SOCK_SEQPACKET)) {
		r->why = "the descriptor is not a SOCK_SEQPACKET socket";
		return -EINVAL;
	}
	pthread_mutex_lock(&cap.lock);
	r->rsp->u.capture.sent = cap.sent;
	r->rsp->u.capture.lost = cap.lost;
	stop_locked();
	cap.sent = cap.lost = 0;
	if (r->fd_in >= 0) {
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
	return 0;
}

void sv_capture_client_gone(const struct sv_client *c)
{
	pthread_mutex_lock(&cap.lock);
	if (cap.fd >= 0 && cap.client_id == c->id) {
		sv_log(SV_LOG_INFO, "capture: its client is gone: %llu packets "
		       "captured, %llu lost", (unsigned long long)cap.sent,
		       (unsigned long long)cap.lost);
		stop_locked();
	}
	pthread_mutex_unlock(&cap.lock);
}
