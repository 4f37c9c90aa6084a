// SPDX-License-Identifier: MIT
/*
 * Completion queues and completion channels.
 *
 * A CQ's ring lies in a memfd that the daemon creates, sizes and seals (no
 * shrink, no grow: the client can never make the daemon's mapping fault), one
 * of the client's ring pools (ring.c, where all ring memory is made), and hands
 * to the client, which maps the ring at its offset. A completion channel is a
 * socket pair: the client keeps one end (the channel's fd) and gives the daemon
 * the other.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "abi/sv_ring.h"
#include "device/ctl/direct.h"
#include "device/exec/engine.h"
#include "device/sv_dev.h"

int sv_check_event_socket(int fd, const char **why)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (fd < 0) {
		*why = "no event socket attached";
		return -EINVAL;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) ||
	    type != SOCK_SEQPACKET) {
		*why = "event descriptor is not a seqpacket socket";
		return -EINVAL;
	}
	/* the daemon never blocks on a client's socket */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

int sv_cmd_create_channel(struct sv_req *r)
{
	struct sv_channel *ch;
	int ret;

	ret = sv_check_event_socket(r->fd_in, &r->why);
	if (ret)
		return ret;
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->owner = r->client;
	ret = sv_client_add_obj(r, SV_OBJ_CHANNEL, ch, &ch->handle);
	if (ret) {
		free(ch);
		return ret;
	}
	ch->fd = r->fd_in;
	r->fd_in = -1;
	r->rsp->u.obj.handle = ch->handle;
	return 0;
}

void sv_channel_destroy(struct sv_channel *ch)
{
	close(ch->fd);
	free(ch);
}

int sv_cmd_destroy_channel(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_channel *ch = sv_req_obj(r, h, SV_OBJ_CHANNEL);

	if (!ch)
		return -EINVAL;
	if (ch->refs) {
		r->why = "channel still has CQs";
		return -EBUSY;
	}
	sv_client_del_obj(r->client, SV_OBJ_CHANNEL, h);
	sv_channel_destroy(ch);
	return 0;
}

static uint32_t ring_entries_for(uint32_t cqe)
{
	uint32_t n = 16;

	while (n < cqe + 1)
		n <<= 1;
	return n;
}

static int cq_set_ring(struct sv_cq *cq, uint32_t cqe, struct sv_req *r)
{
	uint32_t entries = ring_entries_for(cqe);
	size_t bytes = sv_cq_ring_bytes(entries);
	struct sv_cq_ring *ring;
	struct sv_ring_loc loc;
	void *map = NULL;
	int out, ret;

	ret = sv_req_charge(r, bytes);
	if (ret)
		return ret;
	/* with the copy that goes to the client, before anything changes */
	ret = sv_ring_get(r->client, "softverbs-cq", bytes, &loc, &map, &out);
	if (ret) {
		sv_client_uncharge(r->client, bytes);
		r->why = "cannot allocate the ring";
		return ret;
	}
	ring = map;
	ring->entries = entries;
	ring->cqe_size = sizeof(struct sv_cqe);
	if (cq->ring) {
		/* resize: carry over what the client has not consumed yet */
		struct sv_cq_ring *old = cq->ring;
		uint32_t prod = cq->prod;
		uint32_t cons = __atomic_load_n(&old->cons, __ATOMIC_ACQUIRE);
		uint32_t pending = prod - cons;

		if (pending > cq->entries)      /* never trust cons */
			pending = cq->entries;
		if (pending > cqe) {
			sv_client_uncharge(r->client, bytes);
			sv_ring_put(&loc, map, bytes);
			close(out);
			r->why = "new size below the completions outstanding";
			return -EINVAL;
		}
		for (uint32_t i = 0; i < pending; i++)
			*sv_cq_slot(map, entries, i) =
				*sv_cq_slot(old, cq->entries, prod - pending + i);
		ring->prod = pending;
		ring->cons = 0;
		{
			/* the CQEs carried over that no event announced yet */
			uint32_t unrep = prod - cq->reported;

			if (unrep > pending)
				unrep = pending;
			cq->reported = pending - unrep;
		}
		cq->prod = pending;
		ring->arm_sn = old->arm_sn;
		ring->arm_flags = old->arm_flags;
		ring->fired_sn = old->fired_sn;
		sv_client_uncharge(cq->owner, cq->ring_bytes);
		sv_ring_put(&cq->loc, cq->ring, cq->ring_bytes);
	}
	cq->ring = map;
	cq->ring_bytes = bytes;
	cq->loc = loc;
	cq->entries = entries;
	cq->cqe = entries - 1;
	r->rsp->u.cq.handle = cq->handle;
	r->rsp->u.cq.cqe = cq->cqe;
	r->rsp->u.cq.ring_entries = entries;
	r->rsp->u.cq.ring_bytes = bytes;
	r->rsp->u.cq.ring_offset = loc.offset;
	r->fd_out = out;
	return 0;
}

int sv_cmd_create_cq(struct sv_req *r)
{
	const struct sv_cmd_create_cq *a = &r->cmd->u.create_cq;
	struct sv_client *c = r->client;
	struct sv_channel *ch = NULL;
	struct sv_cq *cq;
	int ret;

	if (a->cqe < 1 || a->cqe > SV_MAX_CQE) {
		r->why = "cqe out of range";
		return -EINVAL;
	}
	if (a->comp_vector >= sv_dev.attr.max_comp_vectors) {
		r->why = "comp_vector out of range";
		return -EINVAL;
	}
	if (a->flags & ~3u) {
		r->why = "unknown cq flags";
		return -EINVAL;
	}
	if (a->channel) {
		ch = sv_req_obj(r, a->channel, SV_OBJ_CHANNEL);
		if (!ch)
			return -EINVAL;
	}
	if (sv_dev.total[SV_OBJ_CQ] >= SV_MAX_CQ) {
		r->why = "max_cq reached";
		return -ENOMEM;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->owner = c;
	cq->cookie = a->cookie;
	cq->channel = ch;
	cq->flags = a->flags;
	cq->loc.memfd = -1;
	cq->id = sv_next_id(&sv_dev.next_cq_id);
	ret = sv_client_add_obj(r, SV_OBJ_CQ, cq, &cq->handle);
	if (ret)
		goto err_free;
	ret = cq_set_ring(cq, a->cqe, r);
	if (ret)
		goto err_del;
	if (ch)
		ch->refs++;
	return 0;

err_del:
	sv_client_del_obj(c, SV_OBJ_CQ, cq->handle);
err_free:
	free(cq);
	return ret;
}

/* A QP that completes into cq with sends its engine has not run yet
 * (posted, in a state that runs or flushes them, not waiting for an RNR or
 * ACK timer): its engine is kicked. */
static bool cq_sends_due(const struct sv_cq *cq)
{
	bool due = false;

	for (size_t i = 0; i < sizeof(sv_dev.qpn_tab) / sizeof(sv_dev.qpn_tab[0]);
	     i++) {
		struct sv_qp *qp = sv_dev.qpn_tab[i];

		if (!qp || qp->dead || qp->send_cq != cq || !qp->sq.entries ||
		    qp->wait_until_ns)
			continue;
		if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD &&
		    qp->state != IBV_QPS_SQE && qp->state != IBV_QPS_ERR)
			continue;
		if (qp->sq.cons != __atomic_load_n(&qp->sq.hdr->prod,
						   __ATOMIC_ACQUIRE)) {
			sv_engine_kick(qp->engine);
			due = true;
		}
	}
	return due;
}

int sv_cmd_resize_cq(struct sv_req *r)
{
	const struct sv_cmd_resize_cq *a = &r->cmd->u.resize_cq;
	struct sv_cq *cq = sv_req_obj(r, a->cq, SV_OBJ_CQ);

	if (!cq)
		return -EINVAL;
	if (a->cqe < 1 || a->cqe > SV_MAX_CQE) {
		r->why = "cqe out of range";
		return -EINVAL;
	}
	/* The completions outstanding decide whether a smaller ring takes
	 * them (EINVAL otherwise). A NIC has run the sends posted before the
	 * resize by the time its command arrives; the engines may lag behind
	 * the doorbells on a busy host: they catch up first (bounded, 100 ms;
	 * only the control thread frees objects, so cq stays). rdma-core's
	 * tests/test_cq.py test_resize_cq posts sends, then shrinks below
	 * their completions at once. */
	for (int i = 0; i < 1000 && cq_sends_due(cq); i++) {
		sv_dev_unlock();
		usleep(100);
		sv_dev_lock(true);
	}
	return cq_set_ring(cq, a->cqe, r);
}

void sv_cq_destroy(struct sv_cq *cq)
{
	if (cq->channel)
		cq->channel->refs--;
	if (cq->ring) {
		sv_client_uncharge(cq->owner, cq->ring_bytes);
		sv_ring_put(&cq->loc, cq->ring, cq->ring_bytes);
	}
	free(cq);
}

int sv_cmd_destroy_cq(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_cq *cq = sv_req_obj(r, h, SV_OBJ_CQ);

	if (!cq)
		return -EINVAL;
	if (cq->refs) {
		r->why = "cq still in use";
		return -EBUSY;
	}
	sv_client_del_obj(r->client, SV_OBJ_CQ, h);
	sv_cq_destroy(cq);
	return 0;
}

/* ---- CQE production (the engine, under sv_dev.lock) ---- */

/* A completion event on the CQ's channel for arm sn (it fired: the ring
 * says so); never waits for the client. */
static void cq_channel_event(struct sv_cq *cq, uint32_t sn)
{
	struct sv_event ev = {
		.magic = SV_PROTO_MAGIC,
		.type = 0,
		.cookie = cq->cookie,
		.handle = cq->handle,
	};
	struct sv_cq_ring *ring = cq->ring;

	cq->last_arm_sn = sn;
	/* release: a poster of the direct path that sees it fired sees
	 * everything before */
	__atomic_store_n(&ring->fired_sn, sn, __ATOMIC_RELEASE);
	if (send(cq->channel->fd, &ev, sizeof(ev),
		 MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(ev)) {
		__atomic_store_n(&ring->events, ring->events + 1,
				 __ATOMIC_RELAXED);
		cq->reported = cq->prod;
	}
}

int sv_cq_push(struct sv_cq *cq, const struct sv_cqe *e, bool solicited)
{
	return sv_cq_push_held(cq, e, solicited, 0);
}

int sv_cq_push_held(struct sv_cq *cq, const struct sv_cqe *e, bool solicited,
		    uint32_t held)
{
	struct sv_cq_ring *ring = cq->ring;
	/* our private counter: what the client writes into the ring's prod
	 * is never read back */
	uint32_t prod = cq->prod;
	struct sv_cqe *slot;
	/* acquire: the library has read the slots it says it consumed */
	uint32_t used = prod - __atomic_load_n(&ring->cons, __ATOMIC_ACQUIRE);
	/* the completions the library holds for WQEs it ran itself (the
	 * direct path): a lie only overruns the liar's CQ sooner or later */
	uint32_t dused = __atomic_load_n(&ring->dused, __ATOMIC_RELAXED);

	if (used > cq->entries)         /* never trust cons */
		used = cq->entries;
	used += dused < cq->entries ? dused : cq->entries;
	used += held < cq->entries ? held : cq->entries;
	if (used >= cq->entries) {
		if (!__atomic_load_n(&ring->overflow, __ATOMIC_RELAXED)) {
			__atomic_store_n(&ring->overflow, 1, __ATOMIC_RELAXED);
			sv_async_event(cq->owner, IBV_EVENT_CQ_ERR, cq->cookie,
				       cq->handle);
		}
		return -ENOSPC;
	}
	slot = sv_cq_slot(ring, cq->entries, prod);
	*slot = *e;
	slot->dev_flags = solicited ? SV_CQE_F_SOLICITED : 0;
	/* release: the CQE is in place before the library sees prod */
	cq->prod = prod + 1;
	__atomic_store_n(&ring->prod, cq->prod, __ATOMIC_RELEASE);
	if (cq->channel) {
		uint32_t sn, flags;

		/* pairs with the library's arm (store arm_sn, then look at
		 * prod): either it sees this CQE or we see its arm */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		sn = __atomic_load_n(&ring->arm_sn, __ATOMIC_ACQUIRE);
		if (sn != cq->last_arm_sn) {
			flags = __atomic_load_n(&ring->arm_flags,
						__ATOMIC_RELAXED);
			if ((flags & SV_CQ_ARM_NEXT) ||
			    ((flags & SV_CQ_ARM_SOLICITED) &&
			     (solicited || e->status != IBV_WC_SUCCESS))) {
				cq_channel_event(cq, sn);
			}
		}
	}
	return 0;
}

/* Arm sn of cq (still the latest, not fired) and its flags, or false:
 * no channel, a later arm, an arm that fired already. */
static bool cq_arm_stands(struct sv_cq *cq, uint32_t sn, uint32_t *flags)
{
	struct sv_cq_ring *ring = cq->ring;
	uint32_t cur;

	if (!cq->channel)
		return false;
	cur = __atomic_load_n(&ring->arm_sn, __ATOMIC_ACQUIRE);
	if (cur != sn || cur == cq->last_arm_sn)
		return false;
	*flags = __atomic_load_n(&ring->arm_flags, __ATOMIC_RELAXED);
	return true;
}

/* Completions the library wrote itself (the direct path: its private ring,
 * a receive queue's completion ring) that no event announced: they fire
 * a NEXT arm, and a SOLICITED one when one of them is a solicited
 * message's. True when the arm fired. */
static bool cq_fire_direct(struct sv_cq *cq, uint32_t sn, uint32_t flags,
			   bool solicited)
{
	if (!(flags & SV_CQ_ARM_NEXT) &&
	    !((flags & SV_CQ_ARM_SOLICITED) && solicited))
		return false;
	cq_channel_event(cq, sn);
	return true;
}

/*
 * NOTIFY_CQ: the library armed the CQ and saw completions it has not polled.
 * If that arm (arm_sn) is still the latest and has not fired, and one of
 * them that no event announced yet fires it (any for a NEXT arm; a
 * solicited one or an error for a SOLICITED arm), the event goes now. The slots are the client's memory and
 * only decide its own event. No channel, a later arm, an arm that fired
 * already: nothing to do, and no error.
 */
int sv_cmd_notify_cq(struct sv_req *r)
{
	const struct sv_cmd_notify_cq *a = &r->cmd->u.notify_cq;
	struct sv_cq *cq = sv_req_obj(r, a->cq, SV_OBJ_CQ);
	struct sv_cq_ring *ring;
	uint32_t sn = a->arm_sn, flags, n, cons;

	if (!cq)
		return -EINVAL;
	if (a->flags & ~(SV_NOTIFY_DIRECT | SV_NOTIFY_SOLICITED)) {
		r->why = "unknown flags";
		return -EINVAL;
	}
	if (!cq_arm_stands(cq, sn, &flags))
		return 0;
	/* completions of the library's private ring that no event
	 * announced */
	if ((a->flags & SV_NOTIFY_DIRECT) &&
	    cq_fire_direct(cq, sn, flags, a->flags & SV_NOTIFY_SOLICITED))
		return 0;
	ring = cq->ring;
	cons = __atomic_load_n(&ring->cons, __ATOMIC_ACQUIRE);
	n = cq->prod - cons;
	if (n > cq->entries)            /* never trust cons */
		n = cq->entries;
	/* only those no event announced: an application that re-arms
	 * before it polls the CQE that woke it (perftest's -e) is not woken
	 * again for that CQE; one that landed while the CQ was not armed
	 * (UCX's poll, arm, sleep) fires the arm */
	if (n > cq->prod - cq->reported)
		n = cq->prod - cq->reported;
	for (uint32_t i = 0; i < n; i++) {
		const struct sv_cqe *e = sv_cq_slot(ring, cq->entries,
						    cq->prod - n + i);

		if ((flags & SV_CQ_ARM_NEXT) ||
		    ((flags & SV_CQ_ARM_SOLICITED) &&
		     ((__atomic_load_n(&e->dev_flags, __ATOMIC_RELAXED) &
		       SV_CQE_F_SOLICITED) ||
		      __atomic_load_n(&e->status, __ATOMIC_RELAXED) !=
			      IBV_WC_SUCCESS))) {
			cq_channel_event(cq, sn);
			break;
		}
	}
	return 0;
}

/* DIRECT_NOTIFY (abi/sv_cmd.h): a direct SEND's completions in the peer's
 * receive ring fire its receive CQ's arm, as the daemon's would. */
int sv_cmd_direct_notify(struct sv_req *r)
{
	const struct sv_cmd_direct_notify *a = &r->cmd->u.direct_notify;
	struct sv_qp *t;
	uint32_t flags;
	int err;

	if (a->rsvd ||
	    (a->flags & ~(SV_NOTIFY_SOLICITED | SV_NOTIFY_SRQ_LIMIT))) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	t = sv_direct_notify_peer(r, a->qp, a->xprod, a->flags, &err);
	if (!t || (a->flags & SV_NOTIFY_SRQ_LIMIT))
		return t ? 0 : err;
	if (t->recv_cq && cq_arm_stands(t->recv_cq, a->arm_sn, &flags))
		(void)cq_fire_direct(t->recv_cq, a->arm_sn, flags,
				     a->flags & SV_NOTIFY_SOLICITED);
	return 0;
}
