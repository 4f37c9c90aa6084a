/* SPDX-License-Identifier: MIT */
/*
 * QPs, SRQs and AHs in the library: the ops that context.c puts in the
 * context's tables and what events.c needs to name QPs and SRQs.
 */
#ifndef SV_VERBS_QP_OPS_H
#define SV_VERBS_QP_OPS_H

#include "verbs/sv_verbs.h"

/* qp.c */
struct ibv_qp *sv_create_qp_ex(struct ibv_context *context,
			       struct ibv_qp_init_attr_ex *attr);

/* post.c */
int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		 struct ibv_send_wr **bad_wr);
int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad_wr);
int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr);

/* srq_ah.c */
struct ibv_srq *sv_create_srq_ex(struct ibv_context *context,
				 struct ibv_srq_init_attr_ex *attr);
int sv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);

/* The live QP / SRQ of ctx named by an event's cookie, with one more async
 * event counted as handed out (so its destroy waits for the ack); NULL when
 * it has been destroyed since (events.c). */
struct sv_qp *sv_ctx_take_qp_event(struct sv_context *ctx, uint64_t cookie);
struct sv_srq *sv_ctx_take_srq_event(struct sv_context *ctx, uint64_t cookie);

/* Link into / unlink from the context's lists (under ctx->lock); del then
 * waits until every async event handed out for the object is acked
 * (events.c). */
void sv_ctx_add_qp(struct sv_context *ctx, struct sv_qp *qp);
void sv_ctx_del_qp(struct sv_context *ctx, struct sv_qp *qp);
void sv_ctx_add_srq(struct sv_context *ctx, struct sv_srq *srq);
void sv_ctx_del_srq(struct sv_context *ctx, struct sv_srq *srq);

#endif
