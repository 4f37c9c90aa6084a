// SPDX-License-Identifier: MIT
/*
 * Completion channels and async events. Each is a socket whose other end the
 * daemon holds; an event is one struct sv_event. Applications poll() the fd
 * (channel->fd, context->async_fd) and may make it non-blocking, as with any
 * verbs device. When the daemon dies the async socket reads EOF, which the
 * context reports once as IBV_EVENT_DEVICE_FATAL.
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

/* ---- QPs and SRQs: the objects of affiliated async events ----
 *
 * An event is counted as handed out while the object is still in the
 * context's list (under ctx->lock); destroy unlinks it under the same lock
 * before it waits for the acks, so it never misses a count. */

void sv_ctx_add_qp(struct sv_context *ctx, struct sv_qp *qp)
{
	pthread_mutex_lock(&ctx->lock);
	qp->next = ctx->qps;
	ctx->qps = qp;
	pthread_mutex_unlock(&ctx->lock);
}

void sv_ctx_del_qp(struct sv_context *ctx, struct sv_qp *qp)
{
	struct ibv_qp *ibqp = &qp->ex.qp_base;

	pthread_mutex_lock(&ctx->lock);
	for (struct sv_qp **p = &ctx->qps; *p; p = &(*p)->next) {
		if (*p == qp) {
			*p = qp->next;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	pthread_mutex_lock(&ibqp->mutex);
	while (ibqp->events_completed != qp->async_events)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);
}

struct sv_qp *sv_ctx_take_qp_event(struct sv_context *ctx, uint64_t cookie)
{
	struct sv_qp *qp;

	pthread_mutex_lock(&ctx->lock);
	for (qp = ctx->qps; qp; qp = qp->next)
		if ((uintptr_t)&qp->ex.qp_base == cookie)
			break;
	if (qp) {
		pthread_mutex_lock(&qp->ex.qp_base.mutex);
		qp->async_events++;
		pthread_mutex_unlock(&qp->ex.qp_base.mutex);
	}
	pthread_mutex_unlock(&ctx->lock);
	return qp;
}

void sv_ctx_add_srq(struct sv_context *ctx, struct sv_srq *srq)
{
	pthread_mutex_lock(&ctx->lock);
	srq->next = ctx->srqs;
	ctx->srqs = srq;
	pthread_mutex_unlock(&ctx->lock);
}

void sv_ctx_del_srq(struct sv_context *ctx, struct sv_srq *srq)
{
	pthread_mutex_lock(&ctx->lock);
	for (struct sv_srq **p = &ctx->srqs; *p; p = &(*p)->next) {
		if (*p == srq) {
			*p = srq->next;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	pthread_mutex_lock(&srq->ibsrq.mutex);
	while (srq->ibsrq.events_completed != srq->async_events)
		pthread_cond_wait(&srq->ibsrq.cond, &srq->ibsrq.mutex);
	pthread_mutex_unlock(&srq->ibsrq.mutex);
}

struct sv_srq *sv_ctx_take_srq_event(struct sv_context *ctx, uint64_t cookie)
{
	struct sv_srq *srq;

	pthread_mutex_lock(&ctx->lock);
	for (srq = ctx->srqs; srq; srq = srq->next)
		if ((uintptr_t)&srq->ibsrq == cookie)
			break;
	if (srq) {
		pthread_mutex_lock(&srq->ibsrq.mutex);
		srq->async_events++;
		pthread_mutex_unlock(&srq->ibsrq.mutex);
	}
	pthread_mutex_unlock(&ctx->lock);
	return srq;
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
	return &ch->ch;

err_free:
	free(ch);
	return sv_err_ptr(ret);
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_channel *ch = (struct sv_channel *)channel;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	if (__atomic_load_n(&channel->refcnt, __ATOMIC_RELAXED))
		return EBUSY;
	sv_cmd_init(&cmd, SV_CMD_DESTROY_CHANNEL);
	cmd.u.handle.handle = ch->handle;
	ret = sv_conn_call(&to_sv_ctx(channel->context)->conn, &cmd, -1, &rsp,
			   NULL);
	if (ret && ret != -ENOTCONN && ret != -EIO)
		return -ret;
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
	struct sv_qp *qp;
	struct sv_srq *srq;
	int ret;

	for (;;) {
		ret = read_event(context->async_fd, &ev);
		if (ret == 0 || ret == -EIO) {
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
			qp = sv_ctx_take_qp_event(ctx, ev.cookie);
			if (!qp)
				continue; /* destroyed since */
			event->element.qp = &qp->ex.qp_base;
			return 0;
		case IBV_EVENT_SRQ_ERR:
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			srq = sv_ctx_take_srq_event(ctx, ev.cookie);
			if (!srq)
				continue; /* destroyed since */
			event->element.srq = &srq->ibsrq;
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
