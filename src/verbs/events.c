// SPDX-License-Identifier: MIT
/*
 * Completion channels and async events. Each is a socket whose other end the
 * daemon holds; an event is one struct sv_event. Applications poll() the fd
 * (channel->fd, context->async_fd) and may make it non-blocking, as with any
 * verbs device. When the daemon dies the async socket reads EOF, which the
 * context reports once as IBV_EVENT_DEVICE_FATAL; a channel reads EOF too,
 * and answers for each armed CQ of it that has completions to poll (the
 * flushes of a dead device, cq.c) before it fails with EIO.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "verbs/qp_ops.h"
#include "verbs/sv_verbs.h"

struct sv_cq *sv_ctx_find_cq(struct sv_context *ctx, uint64_t cookie)
{
	struct sv_cq *cq;

	pthread_mutex_lock(&ctx->lock);
	for (cq = ctx->cqs; cq; cq = cq->next)
		if ((uintptr_t)cq == cookie)
			break;
	pthread_mutex_unlock(&ctx->lock);
	return cq;
}

/* ---- QPs and SRQs: the objects of affiliated async events ---- */

void sv_ctx_add_evtarget(struct sv_context *ctx, struct sv_evtarget *t,
			 enum sv_evtarget_kind kind, void *obj,
			 pthread_mutex_t *mutex, pthread_cond_t *cond,
			 uint32_t *completed)
{
	t->kind = kind;
	t->obj = obj;
	t->mutex = mutex;
	t->cond = cond;
	t->completed = completed;
	t->handed = 0;
	pthread_mutex_lock(&ctx->lock);
	t->next = ctx->evtargets;
	ctx->evtargets = t;
	pthread_mutex_unlock(&ctx->lock);
}

void sv_ctx_del_evtarget(struct sv_context *ctx, struct sv_evtarget *t)
{
	pthread_mutex_lock(&ctx->lock);
	for (struct sv_evtarget **p = &ctx->evtargets; *p; p = &(*p)->next) {
		if (*p == t) {
			*p = t->next;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	pthread_mutex_lock(t->mutex);
	while (*t->completed != t->handed)
		pthread_cond_wait(t->cond, t->mutex);
	pthread_mutex_unlock(t->mutex);
}

void *sv_ctx_take_event(struct sv_context *ctx, enum sv_evtarget_kind kind,
			uint64_t cookie)
{
	struct sv_evtarget *t;

	pthread_mutex_lock(&ctx->lock);
	for (t = ctx->evtargets; t; t = t->next)
		if (t->kind == kind && (uintptr_t)t->obj == cookie)
			break;
	if (t) {
		pthread_mutex_lock(t->mutex);
		t->handed++;
		pthread_mutex_unlock(t->mutex);
	}
	pthread_mutex_unlock(&ctx->lock);
	return t ? t->obj : NULL;
}

SV_EXPORT struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *context)
{
	struct sv_context *ctx = to_sv_ctx(context);
	struct sv_channel *ch;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int sp[2], ret;

	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return sv_err_ptr(-ENOMEM);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		ret = -errno;
		goto err_free;
	}
	sv_cmd_init(&cmd, SV_CMD_CREATE_CHANNEL);
	ret = sv_conn_call(&ctx->conn, &cmd, sp[1], &rsp, NULL);
	close(sp[1]);
	if (ret) {
		close(sp[0]);
		goto err_free;
	}
	ch->handle = rsp.u.obj.handle;
	ch->ch.context = context;
	ch->ch.fd = sp[0];
	ch->ch.refcnt = 0;
	pthread_mutex_lock(&ctx->ch_lock);
	ch->next = ctx->channels;
	ctx->channels = ch;
	pthread_mutex_unlock(&ctx->ch_lock);
	return &ch->ch;

err_free:
	free(ch);
	return sv_err_ptr(ret);
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_channel *ch = (struct sv_channel *)channel;
	struct sv_context *ctx = to_sv_ctx(channel->context);
	int ret;

	if (__atomic_load_n(&channel->refcnt, __ATOMIC_RELAXED))
		return EBUSY;
	ret = sv_destroy_obj(channel->context, SV_CMD_DESTROY_CHANNEL,
			     ch->handle);
	if (ret)
		return ret;
	pthread_mutex_lock(&ctx->ch_lock);
	for (struct sv_channel **p = &ctx->channels; *p; p = &(*p)->next) {
		if (*p == ch) {
			*p = ch->next;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->ch_lock);
	close(channel->fd);
	free(ch);
	return 0;
}

/* One event off fd: 1, 0 at EOF, or -errno (-EAGAIN when non-blocking). */
static int read_event(int fd, struct sv_event *ev)
{
	ssize_t n;

	do {
		n = recv(fd, ev, sizeof(*ev), MSG_TRUNC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	if ((size_t)n != sizeof(*ev) || ev->magic != SV_PROTO_MAGIC)
		return -EIO;
	return 1;
}

SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel,
			       struct ibv_cq **cq_out, void **cq_context)
{
	struct sv_context *ctx = to_sv_ctx(channel->context);
	struct sv_event ev;
	struct sv_cq *cq;
	int ret;

	for (;;) {
		ret = read_event(channel->fd, &ev);
		if (ret == 0) {
			/* the daemon has gone: its WQEs come back flushed */
			sv_ctx_mark_dead(ctx);
			cq = sv_cq_dead_event(ctx, channel);
			if (cq)
				break;
		}
		if (ret <= 0) {
			errno = ret ? -ret : EIO;
			return -1;
		}
		/* an event for a CQ destroyed since is dropped */
		cq = sv_ctx_find_cq(ctx, ev.cookie);
		if (cq)
			break;
	}
	pthread_mutex_lock(&cq->ex.mutex);
	cq->comp_events++;
	pthread_mutex_unlock(&cq->ex.mutex);
	*cq_out = ibv_cq_ex_to_cq(&cq->ex);
	*cq_context = cq->ex.cq_context;
	return 0;
}

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *context,
				  struct ibv_async_event *event)
{
	struct sv_context *ctx = to_sv_ctx(context);
	struct sv_event ev;
	struct sv_cq *cq;
	void *obj;
	int ret;

	for (;;) {
		ret = read_event(context->async_fd, &ev);
		if (ret == 0 || ret == -EIO) {
			sv_ctx_mark_dead(ctx);
			if (__atomic_exchange_n(&ctx->fatal_sent, true,
						__ATOMIC_ACQ_REL)) {
				errno = EIO;
				return -1;
			}
			memset(event, 0, sizeof(*event));
			event->event_type = IBV_EVENT_DEVICE_FATAL;
			return 0;
		}
		if (ret < 0) {
			errno = -ret;
			return -1;
		}
		memset(event, 0, sizeof(*event));
		event->event_type = (enum ibv_event_type)ev.type;
		switch (ev.type) {
		case IBV_EVENT_CQ_ERR:
			cq = sv_ctx_find_cq(ctx, ev.cookie);
			if (!cq)
				continue; /* destroyed since */
			pthread_mutex_lock(&cq->ex.mutex);
			cq->async_events++;
			pthread_mutex_unlock(&cq->ex.mutex);
			event->element.cq = ibv_cq_ex_to_cq(&cq->ex);
			return 0;
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_COMM_EST:
		case IBV_EVENT_SQ_DRAINED:
		case IBV_EVENT_PATH_MIG:
		case IBV_EVENT_PATH_MIG_ERR:
		case IBV_EVENT_QP_LAST_WQE_REACHED:
			obj = sv_ctx_take_event(ctx, SV_EVT_QP, ev.cookie);
			if (!obj)
				continue; /* destroyed since */
			event->element.qp = obj;
			return 0;
		case IBV_EVENT_SRQ_ERR:
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			obj = sv_ctx_take_event(ctx, SV_EVT_SRQ, ev.cookie);
			if (!obj)
				continue; /* destroyed since */
			event->element.srq = obj;
			return 0;
		case IBV_EVENT_PORT_ACTIVE:
		case IBV_EVENT_PORT_ERR:
		case IBV_EVENT_LID_CHANGE:
		case IBV_EVENT_PKEY_CHANGE:
		case IBV_EVENT_SM_CHANGE:
		case IBV_EVENT_CLIENT_REREGISTER:
		case IBV_EVENT_GID_CHANGE:
			event->element.port_num = (int)ev.port_num;
			return 0;
		case IBV_EVENT_DEVICE_FATAL:
			__atomic_store_n(&ctx->fatal_sent, true, __ATOMIC_RELEASE);
			return 0;
		default:
			continue; /* not an event this library knows yet */
		}
	}
}

SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_srq *srq;

	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		cq = event->element.cq;
		pthread_mutex_lock(&cq->mutex);
		cq->async_events_completed++;
		pthread_cond_broadcast(&cq->cond);
		pthread_mutex_unlock(&cq->mutex);
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		qp = event->element.qp;
		pthread_mutex_lock(&qp->mutex);
		qp->events_completed++;
		pthread_cond_broadcast(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		srq = event->element.srq;
		pthread_mutex_lock(&srq->mutex);
		srq->events_completed++;
		pthread_cond_broadcast(&srq->cond);
		pthread_mutex_unlock(&srq->mutex);
		break;
	default:
		break;
	}
}
