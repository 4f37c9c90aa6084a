/* SPDX-License-Identifier: MIT */
/*
 * The queue-pair state machine of the InfiniBand Architecture (IBA vol 1,
 * ch. 10.3 "QP and EE context states", ch. 11.2.4.2 "Modify Queue Pair"), as
 * softverbsd uses it to validate ibv_modify_qp() requests of its clients.
 *
 * What is checked here is the *shape* of a request: whether the transition
 * is legal for the QP type and whether the attribute mask carries every
 * required attribute and nothing beyond the optional ones. The values of the
 * attributes (port number, P_Key index, MTU, that cur_qp_state matches the
 * real state, that SQD is drained before the attributes that need it are
 * changed, ...) are the caller's to check.
 *
 * Only consumer-requested transitions are covered: the device itself moves a
 * QP to SQE (UC/UD send error) or to ERR (RC error, fatal event), and no
 * ibv_modify_qp() may ask for SQE.
 *
 * QP types: RC, UC, UD, XRC_SEND (XRC initiator) and XRC_RECV (XRC target).
 * RAW_PACKET and DRIVER QPs are known but not supported (-EOPNOTSUPP); any
 * other type value is -EINVAL.
 */
#ifndef SV_DEVICE_QP_STATE_H
#define SV_DEVICE_QP_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/*
 * May a QP of this type in state cur be modified with this attribute mask?
 *
 * When mask carries IBV_QP_STATE the request is the transition cur -> next;
 * without it next is ignored and the request is an attribute change in place
 * (cur -> cur), which only INIT, RTS and SQD allow.
 *
 * Returns 0, -EINVAL (unknown type or state, unknown mask bit, illegal
 * transition, required attribute missing, attribute not allowed) or
 * -EOPNOTSUPP (QP type not supported). On error *why (if why is non-NULL)
 * is set to a short static reason; on success it is set to NULL.
 * Any argument values are safe inputs.
 */
int sv_qp_check_modify(enum ibv_qp_type type, enum ibv_qp_state cur,
		       enum ibv_qp_state next, int mask, const char **why);

/*
 * The rule of one transition: *req gets the attributes that must be in the
 * mask and *opt those that may be (IBV_QP_STATE is in neither; it is always
 * required for a state change). Returns 0, -EOPNOTSUPP, or -EINVAL when the
 * type or a state is invalid or the transition is illegal for the type.
 * For error messages ("missing: ...") and tests.
 */
int sv_qp_modify_rule(enum ibv_qp_type type, enum ibv_qp_state cur,
		      enum ibv_qp_state next, uint32_t *req, uint32_t *opt);

/* "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"; "UNKNOWN" otherwise. */
const char *sv_qp_state_name(enum ibv_qp_state s);

/*
 * Whether ibv_post_send() is accepted in this state (IBA ch. 11.4, Post Send
 * Request): refused at once in RESET, INIT and RTR (and for invalid values);
 * accepted in RTS (executed), SQD (queued, not started until back in RTS)
 * and in SQE and ERR, where the work requests complete with
 * IBV_WC_WR_FLUSH_ERR (see sv_qp_flushes_send()).
 */
bool sv_qp_can_post_send(enum ibv_qp_state s);

/*
 * Whether ibv_post_recv() is accepted in this state (IBA ch. 11.4, Post
 * Receive Request): refused in RESET (and for invalid values); accepted from
 * INIT on, RQ processing starts in RTR, and in ERR the work requests complete
 * with IBV_WC_WR_FLUSH_ERR (see sv_qp_flushes_recv()). SQE is a send queue
 * error only: the receive queue keeps working.
 */
bool sv_qp_can_post_recv(enum ibv_qp_state s);

/* Accepted send WRs complete with a flush error in this state (SQE, ERR). */
bool sv_qp_flushes_send(enum ibv_qp_state s);

/* Accepted receive WRs complete with a flush error in this state (ERR). */
bool sv_qp_flushes_recv(enum ibv_qp_state s);

#endif
