/* SPDX-License-Identifier: MIT */
/*
 * How a message gets from a requester to its responder: the operations a
 * transport gives the dispatcher (exec.c) and the rest of the daemon. Two
 * fill them: the same-host path (sv_loop_transport, loop/req.c: the
 * message is handed to the target QP on this daemon, synchronously, no
 * packets) and RoCEv2 (sv_roce_transport, roce/dev.c: packets, ACKs and
 * timers). A connected QP's transport is fixed by its address vector when
 * it leaves INIT (qp->roce: a peer of another host); a UD send picks the
 * wire per datagram (its AH's GID).
 *
 * Every op of a table is set: where a transport has nothing to do, it
 * names the default stub (sv_tr_nosup_*, returning -EOPNOTSUPP), so
 * callers never test for NULL. Every op returns an int: for the questions
 * and steps, > 0 yes (something was done), 0 no, < 0 not supported (read
 * as no); ud_send a completion status (< 0: not supported). Under
 * sv_dev.lock.
 */
#ifndef SV_DEVICE_TRANSPORT_H
#define SV_DEVICE_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "device/exec/engine.h"
#include "device/sv_dev.h"

struct span;
struct sv_ah;

struct sv_transport {
	const char *name;
	/* The requester of qp, in RTS or SQD (never an XRC target's): has it
	 * something to do at now? If it only waits on a timer, *timer (when
	 * not NULL) is lowered to that deadline. */
	int (*ready)(const struct sv_qp *qp, uint64_t now, uint64_t *timer);
	/* ... one step of it (a WQE executed or taken, packets sent, a
	 * retransmission, SQ_DRAINED): > 0 if something was done. */
	int (*step)(struct sv_exec *x, struct sv_qp *qp);
	/* ... does it still owe WQEs numbered below upto that it would run
	 * now (sv_exec_sq_owes, engine.h)? */
	int (*sq_owes)(const struct sv_qp *qp, uint32_t upto, uint64_t now);
	/* qp is in ERR: does the transport hold something of it to finish
	 * (a receive WQE that a message in progress took)? flush: finish one
	 * such thing, > 0 if something was done. */
	int (*flush_pending)(const struct sv_qp *qp);
	int (*flush)(struct sv_qp *qp);
	/* XRC: srq goes; what a message that target t was receiving holds
	 * of it ends (a flush completion on srq's CQ). */
	int (*srq_gone)(struct sv_qp *t, const struct sv_srq *srq);
	/* A UD datagram from qp through ah to remote_qpn (qkey, immediate
	 * data if imm, the solicited bit): the payload's len bytes (at most
	 * the path MTU). A completion status for the send WQE. */
	int (*ud_send)(struct sv_exec *x, struct sv_qp *qp,
		       const struct sv_ah *ah, uint32_t remote_qpn,
		       uint32_t qkey, bool imm, uint32_t imm_data,
		       bool solicited, const struct span *payload,
		       uint64_t len);
};

extern const struct sv_transport sv_loop_transport;   /* loop/req.c */
extern const struct sv_transport sv_roce_transport;   /* roce/dev.c */

/* The transport of qp's connection. */
static inline const struct sv_transport *
sv_transport_of(const struct sv_qp *qp)
{
	return __builtin_expect(qp->roce != NULL, 0) ? &sv_roce_transport :
						       &sv_loop_transport;
}

/* The default stubs (exec.c): -EOPNOTSUPP. */
int sv_tr_nosup_ready(const struct sv_qp *qp, uint64_t now, uint64_t *timer);
int sv_tr_nosup_step(struct sv_exec *x, struct sv_qp *qp);
int sv_tr_nosup_sq_owes(const struct sv_qp *qp, uint32_t upto, uint64_t now);
int sv_tr_nosup_flush_pending(const struct sv_qp *qp);
int sv_tr_nosup_flush(struct sv_qp *qp);
int sv_tr_nosup_srq_gone(struct sv_qp *t, const struct sv_srq *srq);
int sv_tr_nosup_ud_send(struct sv_exec *x, struct sv_qp *qp,
			const struct sv_ah *ah, uint32_t remote_qpn,
			uint32_t qkey, bool imm, uint32_t imm_data,
			bool solicited, const struct span *payload,
			uint64_t len);

#endif /* SV_DEVICE_TRANSPORT_H */
