// SPDX-License-Identifier: MIT
/*
 * The QP state machine as data: qp_rules[cur][next] holds, per QP type,
 * whether the consumer may request cur -> next and which attribute-mask bits
 * that request requires and which it allows (IBA vol 1, ch. 11.2.4.2,
 * "Modify Queue Pair"; states and transitions: ch. 10.3).
 *
 * A cell left out of the table is an illegal transition for every type; a
 * type left out of a cell is an illegal transition for that type (e.g. only
 * UC and UD QPs ever reach SQE, so only they may leave it for RTS).
 *
 * XRC (IBA Annex A14): an XRC_SEND QP (initiator) is an RC requester without
 * a responder, an XRC_RECV QP (target) an RC responder without a requester.
 * Each takes the RC rules of its side; the attributes of the side it lacks
 * are not allowed, except that RQ_PSN (XRC_SEND, INIT->RTR) and TIMEOUT and
 * SQ_PSN (XRC_RECV, RTR->RTS) are accepted as optional, since Linux requires
 * them and consumers written for it pass them.
 */
#include <errno.h>
#include <stddef.h>

#include "device/ctl/qp_state.h"

/* Short names of the attribute-mask bits, for a readable table. */
#define A_CUR	 IBV_QP_CUR_STATE
#define A_SQDN	 IBV_QP_EN_SQD_ASYNC_NOTIFY
#define A_ACCESS IBV_QP_ACCESS_FLAGS
#define A_PKEY	 IBV_QP_PKEY_INDEX
#define A_PORT	 IBV_QP_PORT
#define A_QKEY	 IBV_QP_QKEY
#define A_AV	 IBV_QP_AV
#define A_MTU	 IBV_QP_PATH_MTU
#define A_TMO	 IBV_QP_TIMEOUT
#define A_RETRY	 IBV_QP_RETRY_CNT
#define A_RNRRT	 IBV_QP_RNR_RETRY
#define A_RQPSN	 IBV_QP_RQ_PSN
#define A_RDA	 IBV_QP_MAX_QP_RD_ATOMIC	/* initiator depth */
#define A_ALT	 IBV_QP_ALT_PATH
#define A_RNRTM	 IBV_QP_MIN_RNR_TIMER
#define A_SQPSN	 IBV_QP_SQ_PSN
#define A_DRDA	 IBV_QP_MAX_DEST_RD_ATOMIC	/* responder resources */
#define A_MIG	 IBV_QP_PATH_MIG_STATE
#define A_DQPN	 IBV_QP_DEST_QPN

/*
 * Every mask bit libibverbs defines for ibv_modify_qp(). Bits 21-24
 * (_IBV_QP_SMAC and friends) were never exposed to consumers and count as
 * unknown; IBV_QP_CAP and IBV_QP_RATE_LIMIT are known but no transition of a
 * supported type allows them.
 */
#define SV_QP_ATTR_KNOWN \
	((uint32_t)((IBV_QP_DEST_QPN << 1) - 1) | (uint32_t)IBV_QP_RATE_LIMIT)

/* Attribute groups of the connected transports (RC, UC, XRC). */
#define PATH_RTR	(A_AV | A_MTU | A_DQPN)		/* the remote end */
#define RESP_RTR	(A_DRDA | A_RNRTM)		/* RC responder */
#define REQ_RTS		(A_TMO | A_RETRY | A_RNRRT | A_RDA)	/* RC requester */
#define APM		(A_ALT | A_MIG)			/* path migration */

enum qp_tidx {
	T_RC,
	T_UC,
	T_UD,
	T_XSEND,
	T_XRECV,
	T_NUM
};

struct qp_rule {
	bool legal;
	uint32_t req;
	uint32_t opt;
};

struct qp_cell {
	bool in_place;	/* may be asked without IBV_QP_STATE (cur == next) */
	struct qp_rule t[T_NUM];
};

#define R(r, o)		{ .legal = true, .req = (r), .opt = (o) }
#define ALL_TYPES(r, o)	.t = { [T_RC] = R(r, o), [T_UC] = R(r, o),	\
			       [T_UD] = R(r, o), [T_XSEND] = R(r, o),	\
			       [T_XRECV] = R(r, o) }

#define S_RESET IBV_QPS_RESET
#define S_INIT	IBV_QPS_INIT
#define S_RTR	IBV_QPS_RTR
#define S_RTS	IBV_QPS_RTS
#define S_SQD	IBV_QPS_SQD
#define S_SQE	IBV_QPS_SQE
#define S_ERR	IBV_QPS_ERR
#define S_NUM	(IBV_QPS_ERR + 1)

static const struct qp_cell qp_rules[S_NUM][S_NUM] = {
	/* ch. 10.3: any state -> Reset and -> Error, no other attribute */
	[S_RESET][S_RESET] = { ALL_TYPES(0, 0) },
	[S_INIT][S_RESET]  = { ALL_TYPES(0, 0) },
	[S_RTR][S_RESET]   = { ALL_TYPES(0, 0) },
	[S_RTS][S_RESET]   = { ALL_TYPES(0, 0) },
	[S_SQD][S_RESET]   = { ALL_TYPES(0, 0) },
	[S_SQE][S_RESET]   = { ALL_TYPES(0, 0) },
	[S_ERR][S_RESET]   = { ALL_TYPES(0, 0) },
	[S_RESET][S_ERR]   = { ALL_TYPES(0, 0) },
	[S_INIT][S_ERR]	   = { ALL_TYPES(0, 0) },
	[S_RTR][S_ERR]	   = { ALL_TYPES(0, 0) },
	[S_RTS][S_ERR]	   = { ALL_TYPES(0, 0) },
	[S_SQD][S_ERR]	   = { ALL_TYPES(0, 0) },
	[S_SQE][S_ERR]	   = { ALL_TYPES(0, 0) },
	[S_ERR][S_ERR]	   = { ALL_TYPES(0, 0) },

	/* Reset -> Init: bind the QP to a port and a partition */
	[S_RESET][S_INIT] = { .t = {
		[T_RC]	  = R(A_PKEY | A_PORT | A_ACCESS, 0),
		[T_UC]	  = R(A_PKEY | A_PORT | A_ACCESS, 0),
		[T_UD]	  = R(A_PKEY | A_PORT | A_QKEY, 0),
		[T_XSEND] = R(A_PKEY | A_PORT | A_ACCESS, 0),
		[T_XRECV] = R(A_PKEY | A_PORT | A_ACCESS, 0),
	} },

	/* Init -> Init: the Reset -> Init attributes may change */
	[S_INIT][S_INIT] = { .in_place = true, .t = {
		[T_RC]	  = R(0, A_PKEY | A_PORT | A_ACCESS),
		[T_UC]	  = R(0, A_PKEY | A_PORT | A_ACCESS),
		[T_UD]	  = R(0, A_PKEY | A_PORT | A_QKEY),
		[T_XSEND] = R(0, A_PKEY | A_PORT | A_ACCESS),
		[T_XRECV] = R(0, A_PKEY | A_PORT | A_ACCESS),
	} },

	/* Init -> RTR: the remote end and the receive side */
	[S_INIT][S_RTR] = { .t = {
		[T_RC]	  = R(PATH_RTR | A_RQPSN | RESP_RTR,
			      A_ALT | A_ACCESS | A_PKEY),
		[T_UC]	  = R(PATH_RTR | A_RQPSN, A_ALT | A_ACCESS | A_PKEY),
		[T_UD]	  = R(0, A_PKEY | A_QKEY),
		[T_XSEND] = R(PATH_RTR,
			      A_RQPSN | A_ALT | A_ACCESS | A_PKEY),
		[T_XRECV] = R(PATH_RTR | A_RQPSN | RESP_RTR,
			      A_ALT | A_ACCESS | A_PKEY),
	} },

	/* RTR -> RTS: the send side */
	[S_RTR][S_RTS] = { .t = {
		[T_RC]	  = R(A_SQPSN | REQ_RTS,
			      A_CUR | APM | A_ACCESS | A_RNRTM),
		[T_UC]	  = R(A_SQPSN, A_CUR | APM | A_ACCESS),
		[T_UD]	  = R(A_SQPSN, A_CUR | A_QKEY),
		[T_XSEND] = R(A_SQPSN | REQ_RTS, A_CUR | APM | A_ACCESS),
		[T_XRECV] = R(0, A_TMO | A_SQPSN |
				 A_CUR | APM | A_ACCESS | A_RNRTM),
	} },

	/* RTS -> RTS: change attributes of a running QP */
	[S_RTS][S_RTS] = { .in_place = true, .t = {
		[T_RC]	  = R(0, A_CUR | APM | A_ACCESS | A_RNRTM),
		[T_UC]	  = R(0, A_CUR | APM | A_ACCESS),
		[T_UD]	  = R(0, A_CUR | A_QKEY),
		[T_XSEND] = R(0, A_CUR | APM | A_ACCESS),
		[T_XRECV] = R(0, A_CUR | APM | A_ACCESS | A_RNRTM),
	} },

	/* RTS -> SQD: drain the send queue, optionally with an event */
	[S_RTS][S_SQD] = { ALL_TYPES(0, A_SQDN) },

	/*
	 * SQD -> SQD: while drained, most connection attributes may change
	 * (that the SQ is drained, not still draining, is the caller's check).
	 */
	[S_SQD][S_SQD] = { .in_place = true, .t = {
		[T_RC]	  = R(0, A_PORT | A_AV | REQ_RTS | RESP_RTR |
				 APM | A_ACCESS | A_PKEY),
		[T_UC]	  = R(0, A_AV | APM | A_ACCESS | A_PKEY),
		[T_UD]	  = R(0, A_PKEY | A_QKEY),
		[T_XSEND] = R(0, A_PORT | A_AV | REQ_RTS |
				 APM | A_ACCESS | A_PKEY),
		[T_XRECV] = R(0, A_PORT | A_AV | A_TMO | RESP_RTR |
				 APM | A_ACCESS | A_PKEY),
	} },

	/* SQD -> RTS: resume the send queue */
	[S_SQD][S_RTS] = { .t = {
		[T_RC]	  = R(0, A_CUR | APM | A_ACCESS | A_RNRTM),
		[T_UC]	  = R(0, A_CUR | APM | A_ACCESS),
		[T_UD]	  = R(0, A_CUR | A_QKEY),
		[T_XSEND] = R(0, A_CUR | APM | A_ACCESS),
		[T_XRECV] = R(0, A_CUR | APM | A_ACCESS | A_RNRTM),
	} },

	/* SQE -> RTS: recover from a send error; only UC and UD reach SQE */
	[S_SQE][S_RTS] = { .t = {
		[T_UC]	  = R(0, A_CUR | A_ACCESS),
		[T_UD]	  = R(0, A_CUR | A_QKEY),
	} },
};

static bool state_valid(enum ibv_qp_state s)
{
	return (unsigned int)s < S_NUM;
}

static int type_index(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return T_RC;
	case IBV_QPT_UC:
		return T_UC;
	case IBV_QPT_UD:
		return T_UD;
	case IBV_QPT_XRC_SEND:
		return T_XSEND;
	case IBV_QPT_XRC_RECV:
		return T_XRECV;
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_DRIVER:
		return -EOPNOTSUPP;
	default:
		return -EINVAL;
	}
}

static int fail(const char **why, int err, const char *reason)
{
	if (why)
		*why = reason;
	return err;
}

/* Validate the type and the current state: the type's index, or an error. */
static int check_qp(enum ibv_qp_type type, enum ibv_qp_state cur,
		    const char **why)
{
	int t = type_index(type);

	if (t == -EOPNOTSUPP)
		return fail(why, t, "QP type not supported");
	if (t < 0)
		return fail(why, t, "unknown QP type");
	if (!state_valid(cur))
		return fail(why, -EINVAL, "invalid current QP state");
	return t;
}

/* The rule of cur -> next (both valid), or NULL when illegal for the type. */
static const struct qp_rule *find_rule(int t, enum ibv_qp_state cur,
				       enum ibv_qp_state next)
{
	const struct qp_rule *r = &qp_rules[cur][next].t[t];

	return r->legal ? r : NULL;
}

int sv_qp_check_modify(enum ibv_qp_type type, enum ibv_qp_state cur,
		       enum ibv_qp_state next, int mask, const char **why)
{
	uint32_t m = (uint32_t)mask;
	const struct qp_rule *r;
	int t;

	t = check_qp(type, cur, why);
	if (t < 0)
		return t;
	if (m & ~SV_QP_ATTR_KNOWN)
		return fail(why, -EINVAL, "unknown attribute mask bit");
	if (!(m & IBV_QP_STATE)) {
		if (!qp_rules[cur][cur].in_place)
			return fail(why, -EINVAL,
				    "IBV_QP_STATE required in this QP state");
		next = cur;
	} else if (!state_valid(next)) {
		return fail(why, -EINVAL, "invalid requested QP state");
	}
	r = find_rule(t, cur, next);
	if (!r)
		return fail(why, -EINVAL, "illegal QP state transition");
	if ((m & r->req) != r->req)
		return fail(why, -EINVAL, "required QP attribute missing");
	if (m & ~(r->req | r->opt | IBV_QP_STATE))
		return fail(why, -EINVAL,
			    "QP attribute not allowed in this transition");
	if (why)
		*why = NULL;
	return 0;
}

int sv_qp_modify_rule(enum ibv_qp_type type, enum ibv_qp_state cur,
		      enum ibv_qp_state next, uint32_t *req, uint32_t *opt)
{
	const struct qp_rule *r;
	int t;

	t = check_qp(type, cur, NULL);
	if (t < 0)
		return t;
	if (!state_valid(next))
		return -EINVAL;
	r = find_rule(t, cur, next);
	if (!r)
		return -EINVAL;
	*req = r->req;
	*opt = r->opt;
	return 0;
}

static const char *const qp_state_names[S_NUM] = {
	[S_RESET] = "RESET",
	[S_INIT]  = "INIT",
	[S_RTR]	  = "RTR",
	[S_RTS]	  = "RTS",
	[S_SQD]	  = "SQD",
	[S_SQE]	  = "SQE",
	[S_ERR]	  = "ERR",
};

const char *sv_qp_state_name(enum ibv_qp_state s)
{
	return state_valid(s) ? qp_state_names[s] : "UNKNOWN";
}

bool sv_qp_can_post_send(enum ibv_qp_state s)
{
	return s == S_RTS || s == S_SQD || s == S_SQE || s == S_ERR;
}

bool sv_qp_can_post_recv(enum ibv_qp_state s)
{
	return state_valid(s) && s != S_RESET;
}

bool sv_qp_flushes_send(enum ibv_qp_state s)
{
	return s == S_SQE || s == S_ERR;
}

bool sv_qp_flushes_recv(enum ibv_qp_state s)
{
	return s == S_ERR;
}
