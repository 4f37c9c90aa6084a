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
struct ibv_qp *sv_open_qp(struct ibv_context *context,
			  struct ibv_qp_open_attr *attr);

/* xrc.c */
struct ibv_xrcd *sv_open_xrcd(struct ibv_context *context,
			      struct ibv_xrcd_init_attr *attr);
int sv_close_xrcd(struct ibv_xrcd *xrcd);

/* post.c */
int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		 struct ibv_send_wr **bad_wr);
int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad_wr);
int sv_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *wr,
		    struct ibv_ops_wr **bad_wr);
int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr);

/* srq_ah.c */
struct ibv_srq *sv_create_srq_ex(struct ibv_context *context,
				 struct ibv_srq_init_attr_ex *attr);
int sv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);

#endif
