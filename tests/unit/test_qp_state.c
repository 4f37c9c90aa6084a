// SPDX-License-Identifier: MIT
/*
 * Unit tests of the QP state machine (src/device/ctl/qp_state.c).
 *
 * The expected rules below are written out independently of the table in
 * ctl/qp_state.c, and the table is checked against them in both directions:
 * every listed transition behaves as listed, and every transition not listed
 * (other than any -> RESET/ERR) is refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "device/ctl/qp_state.h"

#define NSTATES (IBV_QPS_ERR + 1)

/* Every mask bit libibverbs defines for ibv_modify_qp(). */
#define KNOWN_BITS ((uint32_t)((IBV_QP_DEST_QPN << 1) - 1) | \
		    (uint32_t)IBV_QP_RATE_LIMIT)

static const enum ibv_qp_type types[] = {
	IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV,
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

struct expect {
	enum ibv_qp_type type;
	enum ibv_qp_state cur, next;
	uint32_t req, opt;
};

#define RC_RTR_REQ (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | \
		    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | \
		    IBV_QP_MIN_RNR_TIMER)
#define RC_RTS_REQ (IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | \
		    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)
#define CONN_INIT  (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define UD_INIT	   (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)
#define RTR_OPT	   (IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX)
#define APM_OPT	   (IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | \
		    IBV_QP_PATH_MIG_STATE | IBV_QP_ACCESS_FLAGS)

/* The happy paths: Reset -> Init -> RTR -> RTS, in order, per type. */
static const struct expect paths[] = {
	{ IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, CONN_INIT, 0 },
	{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, RC_RTR_REQ, RTR_OPT },
	{ IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, RC_RTS_REQ,
	  APM_OPT | IBV_QP_MIN_RNR_TIMER },

	{ IBV_QPT_UC, IBV_QPS_RESET, IBV_QPS_INIT, CONN_INIT, 0 },
	{ IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR,
	  IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
	  RTR_OPT },
	{ IBV_QPT_UC, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN, APM_OPT },

	{ IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, UD_INIT, 0 },
	{ IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTR, 0,
	  IBV_QP_PKEY_INDEX | IBV_QP_QKEY },
	{ IBV_QPT_UD, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN,
	  IBV_QP_CUR_STATE | IBV_QP_QKEY },

	/* XRC initiator: RC requester, no responder attributes */
	{ IBV_QPT_XRC_SEND, IBV_QPS_RESET, IBV_QPS_INIT, CONN_INIT, 0 },
	{ IBV_QPT_XRC_SEND, IBV_QPS_INIT, IBV_QPS_RTR,
	  IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN,
	  RTR_OPT | IBV_QP_RQ_PSN },
	{ IBV_QPT_XRC_SEND, IBV_QPS_RTR, IBV_QPS_RTS, RC_RTS_REQ, APM_OPT },

	/* XRC target: RC responder, no requester attributes */
	{ IBV_QPT_XRC_RECV, IBV_QPS_RESET, IBV_QPS_INIT, CONN_INIT, 0 },
	{ IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_RTR, RC_RTR_REQ, RTR_OPT },
	{ IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS, 0,
	  APM_OPT | IBV_QP_MIN_RNR_TIMER | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN },
};

/* The other legal transitions, besides any -> RESET and any -> ERR. */
static const struct expect others[] = {
	{ IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_INIT, 0, CONN_INIT },
	{ IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_INIT, 0, CONN_INIT },
	{ IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_INIT, 0, UD_INIT },
	{ IBV_QPT_XRC_SEND, IBV_QPS_INIT, IBV_QPS_INIT, 0, CONN_INIT },
	{ IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_INIT, 0, CONN_INIT },

	{ IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RTS, 0,
	  APM_OPT | IBV_QP_MIN_RNR_TIMER },
	{ IBV_QPT_UC, IBV_QPS_RTS, IBV_QPS_RTS, 0, APM_OPT },
	{ IBV_QPT_UD, IBV_QPS_RTS, IBV_QPS_RTS, 0,
	  IBV_QP_CUR_STATE | IBV_QP_QKEY },
	{ IBV_QPT_XRC_SEND, IBV_QPS_RTS, IBV_QPS_RTS, 0, APM_OPT },
	{ IBV_QPT_XRC_RECV, IBV_QPS_RTS, IBV_QPS_RTS, 0,
	  APM_OPT | IBV_QP_MIN_RNR_TIMER },

	{ IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	{ IBV_QPT_UC, IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	{ IBV_QPT_UD, IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	{ IBV_QPT_XRC_SEND, IBV_QPS_RTS, IBV_QPS_SQD, 0,
	  IBV_QP_EN_SQD_ASYNC_NOTIFY },
	{ IBV_QPT_XRC_RECV, IBV_QPS_RTS, IBV_QPS_SQD, 0,
	  IBV_QP_EN_SQD_ASYNC_NOTIFY },

	{ IBV_QPT_RC, IBV_QPS_SQD, IBV_QPS_SQD, 0,
	  IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
	  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
	  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
	  IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPT_UC, IBV_QPS_SQD, IBV_QPS_SQD, 0,
	  IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
	  IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPT_UD, IBV_QPS_SQD, IBV_QPS_SQD, 0,
	  IBV_QP_PKEY_INDEX | IBV_QP_QKEY },
	{ IBV_QPT_XRC_SEND, IBV_QPS_SQD, IBV_QPS_SQD, 0,
	  IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
	  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ALT_PATH |
	  IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE },
	{ IBV_QPT_XRC_RECV, IBV_QPS_SQD, IBV_QPS_SQD, 0,
	  IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT |
	  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
	  IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE },

	{ IBV_QPT_RC, IBV_QPS_SQD, IBV_QPS_RTS, 0,
	  APM_OPT | IBV_QP_MIN_RNR_TIMER },
	{ IBV_QPT_UC, IBV_QPS_SQD, IBV_QPS_RTS, 0, APM_OPT },
	{ IBV_QPT_UD, IBV_QPS_SQD, IBV_QPS_RTS, 0,
	  IBV_QP_CUR_STATE | IBV_QP_QKEY },
	{ IBV_QPT_XRC_SEND, IBV_QPS_SQD, IBV_QPS_RTS, 0, APM_OPT },
	{ IBV_QPT_XRC_RECV, IBV_QPS_SQD, IBV_QPS_RTS, 0,
	  APM_OPT | IBV_QP_MIN_RNR_TIMER },

	/* only UC and UD QPs enter SQE (a send error of RC goes to ERR) */
	{ IBV_QPT_UC, IBV_QPS_SQE, IBV_QPS_RTS, 0,
	  IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS },
	{ IBV_QPT_UD, IBV_QPS_SQE, IBV_QPS_RTS, 0,
	  IBV_QP_CUR_STATE | IBV_QP_QKEY },
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static int check(const struct expect *e, uint32_t mask)
{
	const char *why = "unset";
	int ret;

	ret = sv_qp_check_modify(e->type, e->cur, e->next, (int)mask, &why);
	if (ret)
		assert_non_null(why);
	else
		assert_null(why);
	return ret;
}

/* Run fn on every expected transition. */
static void each_expect(void (*fn)(const struct expect *))
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(paths); i++)
		fn(&paths[i]);
	for (i = 0; i < ARRAY_SIZE(others); i++)
		fn(&others[i]);
}

static void test_happy_paths(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(paths); i++)
		assert_int_equal(check(&paths[i], IBV_QP_STATE | paths[i].req),
				 0);
}

static void exact_and_full(const struct expect *e)
{
	assert_int_equal(check(e, IBV_QP_STATE | e->req), 0);
	assert_int_equal(check(e, IBV_QP_STATE | e->req | e->opt), 0);
}

static void test_exact_and_full_masks(void **state)
{
	(void)state;
	each_expect(exact_and_full);
}

static void required_removed(const struct expect *e)
{
	uint32_t bit;

	for (bit = 1; bit; bit <<= 1) {
		if (!(e->req & bit))
			continue;
		assert_int_equal(check(e, IBV_QP_STATE | (e->req & ~bit)),
				 -EINVAL);
		assert_int_equal(check(e, IBV_QP_STATE | e->opt |
					  (e->req & ~bit)), -EINVAL);
	}
}

static void test_required_removed(void **state)
{
	(void)state;
	each_expect(required_removed);
}

static void optional_added(const struct expect *e)
{
	uint32_t bit;

	for (bit = 1; bit; bit <<= 1)
		if (e->opt & bit)
			assert_int_equal(check(e, IBV_QP_STATE | e->req | bit),
					 0);
}

static void test_optional_added(void **state)
{
	(void)state;
	each_expect(optional_added);
}

static void disallowed_added(const struct expect *e)
{
	uint32_t allowed = IBV_QP_STATE | e->req | e->opt;
	uint32_t bit;

	for (bit = 1; bit; bit <<= 1) {
		if (allowed & bit)
			continue;
		assert_int_equal(check(e, IBV_QP_STATE | e->req | bit),
				 -EINVAL);
	}
}

static void test_disallowed_added(void **state)
{
	(void)state;
	each_expect(disallowed_added);
}

static void rule_matches(const struct expect *e)
{
	uint32_t req = ~0u, opt = ~0u;

	assert_int_equal(sv_qp_modify_rule(e->type, e->cur, e->next,
					   &req, &opt), 0);
	assert_int_equal(req, e->req);
	assert_int_equal(opt, e->opt);
	assert_int_equal(req & opt, 0);
	assert_int_equal((req | opt) & IBV_QP_STATE, 0);
}

static void test_rule_matches(void **state)
{
	(void)state;
	each_expect(rule_matches);
}

static const struct expect *find_expect(enum ibv_qp_type type,
					enum ibv_qp_state cur,
					enum ibv_qp_state next)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(paths); i++)
		if (paths[i].type == type && paths[i].cur == cur &&
		    paths[i].next == next)
			return &paths[i];
	for (i = 0; i < ARRAY_SIZE(others); i++)
		if (others[i].type == type && others[i].cur == cur &&
		    others[i].next == next)
			return &others[i];
	return NULL;
}

/* Everything not listed above (nor -> RESET/ERR) is an illegal transition. */
static void test_nothing_else_is_legal(void **state)
{
	const char *why;
	uint32_t req, opt;
	size_t t;
	int c, n;

	(void)state;
	for (t = 0; t < NTYPES; t++)
		for (c = 0; c < NSTATES; c++)
			for (n = 0; n < NSTATES; n++) {
				if (n == IBV_QPS_RESET || n == IBV_QPS_ERR ||
				    find_expect(types[t], c, n))
					continue;
				assert_int_equal(sv_qp_modify_rule(types[t], c,
						 n, &req, &opt), -EINVAL);
				why = NULL;
				assert_int_equal(sv_qp_check_modify(types[t],
						 c, n, (int)KNOWN_BITS, &why),
						 -EINVAL);
				assert_string_equal(why,
					"illegal QP state transition");
			}
}

static void illegal(enum ibv_qp_type type, enum ibv_qp_state cur,
		    enum ibv_qp_state next, uint32_t mask)
{
	const char *why = NULL;

	assert_int_equal(sv_qp_check_modify(type, cur, next,
					    (int)(IBV_QP_STATE | mask), &why),
			 -EINVAL);
	assert_string_equal(why, "illegal QP state transition");
}

static void test_illegal_transitions(void **state)
{
	size_t t;

	(void)state;
	for (t = 0; t < NTYPES; t++) {
		illegal(types[t], IBV_QPS_RESET, IBV_QPS_RTR, RC_RTR_REQ);
		illegal(types[t], IBV_QPS_RESET, IBV_QPS_RTS, RC_RTS_REQ);
		illegal(types[t], IBV_QPS_INIT, IBV_QPS_RTS, RC_RTS_REQ);
		illegal(types[t], IBV_QPS_RTS, IBV_QPS_RTR, 0);
		illegal(types[t], IBV_QPS_RTR, IBV_QPS_INIT, 0);
		illegal(types[t], IBV_QPS_RTR, IBV_QPS_RTR, 0);
		illegal(types[t], IBV_QPS_RTS, IBV_QPS_INIT, 0);
		illegal(types[t], IBV_QPS_SQD, IBV_QPS_RTR, 0);
		illegal(types[t], IBV_QPS_ERR, IBV_QPS_RTS, 0);
		illegal(types[t], IBV_QPS_ERR, IBV_QPS_INIT, CONN_INIT);
		illegal(types[t], IBV_QPS_RESET, IBV_QPS_SQD, 0);
		illegal(types[t], IBV_QPS_SQE, IBV_QPS_SQE, 0);
		illegal(types[t], IBV_QPS_SQE, IBV_QPS_SQD, 0);
		illegal(types[t], IBV_QPS_RTR, IBV_QPS_SQD, 0);
		/* only the device moves a QP to SQE */
		illegal(types[t], IBV_QPS_RTS, IBV_QPS_SQE, 0);
		illegal(types[t], IBV_QPS_SQD, IBV_QPS_SQE, 0);
	}
}

static void test_reset_and_err_from_any(void **state)
{
	static const enum ibv_qp_state to[] = { IBV_QPS_RESET, IBV_QPS_ERR };
	uint32_t req, opt;
	const char *why;
	size_t t, n;
	int c;

	(void)state;
	for (t = 0; t < NTYPES; t++)
		for (c = 0; c < NSTATES; c++)
			for (n = 0; n < 2; n++) {
				why = "unset";
				assert_int_equal(sv_qp_check_modify(types[t],
						 c, to[n], IBV_QP_STATE, &why),
						 0);
				assert_null(why);
				req = opt = ~0u;
				assert_int_equal(sv_qp_modify_rule(types[t], c,
						 to[n], &req, &opt), 0);
				assert_int_equal(req | opt, 0);
				/* no other attribute, not even CUR_STATE */
				assert_int_equal(sv_qp_check_modify(types[t],
						 c, to[n], IBV_QP_STATE |
						 IBV_QP_CUR_STATE, &why),
						 -EINVAL);
				assert_string_equal(why,
				"QP attribute not allowed in this transition");
				assert_int_equal(sv_qp_check_modify(types[t],
						 c, to[n], IBV_QP_STATE |
						 IBV_QP_PKEY_INDEX, NULL),
						 -EINVAL);
			}
}

static void test_sqd_round_trip(void **state)
{
	const char *why;
	size_t t;

	(void)state;
	for (t = 0; t < NTYPES; t++) {
		assert_int_equal(sv_qp_check_modify(types[t], IBV_QPS_RTS,
				 IBV_QPS_SQD, IBV_QP_STATE, NULL), 0);
		assert_int_equal(sv_qp_check_modify(types[t], IBV_QPS_RTS,
				 IBV_QPS_SQD, IBV_QP_STATE |
				 IBV_QP_EN_SQD_ASYNC_NOTIFY, NULL), 0);
		/* in place in SQD, with and without IBV_QP_STATE */
		assert_int_equal(sv_qp_check_modify(types[t], IBV_QPS_SQD,
				 IBV_QPS_SQD, IBV_QP_STATE, NULL), 0);
		assert_int_equal(sv_qp_check_modify(types[t], IBV_QPS_SQD,
				 IBV_QPS_RESET, IBV_QP_PKEY_INDEX, NULL), 0);
		assert_int_equal(sv_qp_check_modify(types[t], IBV_QPS_SQD,
				 IBV_QPS_RTS, IBV_QP_STATE, NULL), 0);
	}
	/* RC: new path and retry parameters while drained */
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_SQD,
			 IBV_QPS_SQD, IBV_QP_AV | IBV_QP_TIMEOUT |
			 IBV_QP_RETRY_CNT, NULL), 0);
	/* ... but not a new path MTU or PSN */
	why = NULL;
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_SQD,
			 IBV_QPS_SQD, IBV_QP_PATH_MTU, &why), -EINVAL);
	assert_string_equal(why, "QP attribute not allowed in this transition");
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_SQD,
			 IBV_QPS_SQD, IBV_QP_SQ_PSN, NULL), -EINVAL);
	/* the async notify request belongs to RTS -> SQD only */
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_SQD,
			 IBV_QPS_RTS, IBV_QP_STATE |
			 IBV_QP_EN_SQD_ASYNC_NOTIFY, NULL), -EINVAL);
}

static void test_sqe(void **state)
{
	(void)state;
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UC, IBV_QPS_SQE,
			 IBV_QPS_RTS, IBV_QP_STATE, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UD, IBV_QPS_SQE,
			 IBV_QPS_RTS, IBV_QP_STATE, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UD, IBV_QPS_SQE,
			 IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_CUR_STATE |
			 IBV_QP_QKEY, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UC, IBV_QPS_SQE,
			 IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_CUR_STATE |
			 IBV_QP_ACCESS_FLAGS, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UC, IBV_QPS_SQE,
			 IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_ALT_PATH, NULL),
			 -EINVAL);
	/* RC and XRC never reach SQE: their send errors go to ERR */
	illegal(IBV_QPT_RC, IBV_QPS_SQE, IBV_QPS_RTS, 0);
	illegal(IBV_QPT_XRC_SEND, IBV_QPS_SQE, IBV_QPS_RTS, 0);
	illegal(IBV_QPT_XRC_RECV, IBV_QPS_SQE, IBV_QPS_RTS, 0);
}

static void test_in_place(void **state)
{
	const char *why;

	(void)state;
	/* next is ignored without IBV_QP_STATE */
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 (enum ibv_qp_state)99, IBV_QP_ACCESS_FLAGS, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 IBV_QPS_RESET, IBV_QP_MIN_RNR_TIMER, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UD, IBV_QPS_RTS,
			 IBV_QPS_ERR, IBV_QP_QKEY, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UD, IBV_QPS_INIT,
			 IBV_QPS_RTR, IBV_QP_QKEY, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_INIT,
			 IBV_QPS_RTR, IBV_QP_PORT, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 IBV_QPS_RTS, 0, NULL), 0);
	/* the in-place rules still apply */
	why = NULL;
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 IBV_QPS_RTS, IBV_QP_SQ_PSN, &why), -EINVAL);
	assert_string_equal(why, "QP attribute not allowed in this transition");
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UC, IBV_QPS_RTS,
			 IBV_QPS_RTS, IBV_QP_MIN_RNR_TIMER, NULL), -EINVAL);
	/* states that allow no attribute change in place */
	why = NULL;
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RESET,
			 IBV_QPS_INIT, CONN_INIT, &why), -EINVAL);
	assert_string_equal(why, "IBV_QP_STATE required in this QP state");
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RESET,
			 IBV_QPS_RESET, 0, NULL), -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTR,
			 IBV_QPS_RTR, IBV_QP_ACCESS_FLAGS, NULL), -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UD, IBV_QPS_SQE,
			 IBV_QPS_SQE, IBV_QP_QKEY, NULL), -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UD, IBV_QPS_ERR,
			 IBV_QPS_ERR, 0, NULL), -EINVAL);
}

static void test_cur_state_bit(void **state)
{
	(void)state;
	/* optional leaving RTR, RTS, SQD and SQE (for RTS) only */
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RESET,
			 IBV_QPS_INIT, IBV_QP_STATE | CONN_INIT |
			 IBV_QP_CUR_STATE, NULL), -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UD, IBV_QPS_INIT,
			 IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_CUR_STATE, NULL),
			 -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UD, IBV_QPS_RTR,
			 IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN |
			 IBV_QP_CUR_STATE, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_CUR_STATE, NULL),
			 -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_SQD,
			 IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_CUR_STATE, NULL),
			 0);
}

static void test_xrc(void **state)
{
	(void)state;
	/* initiator: no responder resources or RNR timer at RTR */
	assert_int_equal(sv_qp_check_modify(IBV_QPT_XRC_SEND, IBV_QPS_INIT,
			 IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV |
			 IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			 IBV_QP_MAX_DEST_RD_ATOMIC, NULL), -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_XRC_SEND, IBV_QPS_INIT,
			 IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV |
			 IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			 IBV_QP_MIN_RNR_TIMER, NULL), -EINVAL);
	/* ... but the full requester set at RTS */
	assert_int_equal(sv_qp_check_modify(IBV_QPT_XRC_SEND, IBV_QPS_RTR,
			 IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN, NULL),
			 -EINVAL);
	/* target: RTS with the state alone; no requester attributes */
	assert_int_equal(sv_qp_check_modify(IBV_QPT_XRC_RECV, IBV_QPS_RTR,
			 IBV_QPS_RTS, IBV_QP_STATE, NULL), 0);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_XRC_RECV, IBV_QPS_RTR,
			 IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_RETRY_CNT, NULL),
			 -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_XRC_RECV, IBV_QPS_RTR,
			 IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC,
			 NULL), -EINVAL);
	/* what Linux requires of a target is accepted */
	assert_int_equal(sv_qp_check_modify(IBV_QPT_XRC_RECV, IBV_QPS_RTR,
			 IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_TIMEOUT |
			 IBV_QP_SQ_PSN, NULL), 0);
}

static void test_out_of_range(void **state)
{
	const char *why;
	uint32_t req, opt;
	int bit;

	(void)state;
	why = NULL;
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, (enum ibv_qp_state)99,
			 IBV_QPS_ERR, IBV_QP_STATE, &why), -EINVAL);
	assert_string_equal(why, "invalid current QP state");
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_UNKNOWN,
			 IBV_QPS_RESET, IBV_QP_STATE, NULL), -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, (enum ibv_qp_state)-1,
			 IBV_QPS_RESET, IBV_QP_STATE, NULL), -EINVAL);
	why = NULL;
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 (enum ibv_qp_state)99, IBV_QP_STATE, &why), -EINVAL);
	assert_string_equal(why, "invalid requested QP state");
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 IBV_QPS_UNKNOWN, IBV_QP_STATE, NULL), -EINVAL);

	why = NULL;
	assert_int_equal(sv_qp_check_modify((enum ibv_qp_type)99, IBV_QPS_RTS,
			 IBV_QPS_ERR, IBV_QP_STATE, &why), -EINVAL);
	assert_string_equal(why, "unknown QP type");
	assert_int_equal(sv_qp_check_modify((enum ibv_qp_type)0, IBV_QPS_RTS,
			 IBV_QPS_ERR, IBV_QP_STATE, NULL), -EINVAL);
	why = NULL;
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RAW_PACKET, IBV_QPS_RESET,
			 IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PORT, &why),
			 -EOPNOTSUPP);
	assert_string_equal(why, "QP type not supported");
	assert_int_equal(sv_qp_check_modify(IBV_QPT_DRIVER, IBV_QPS_RESET,
			 IBV_QPS_ERR, IBV_QP_STATE, NULL), -EOPNOTSUPP);
	assert_int_equal(sv_qp_modify_rule(IBV_QPT_RAW_PACKET, IBV_QPS_RESET,
			 IBV_QPS_INIT, &req, &opt), -EOPNOTSUPP);
	assert_int_equal(sv_qp_modify_rule(IBV_QPT_RC, IBV_QPS_RESET,
			 (enum ibv_qp_state)99, &req, &opt), -EINVAL);

	/* bits beyond the ones libibverbs defines, and the kernel-only ones */
	for (bit = 0; bit < 32; bit++) {
		if (KNOWN_BITS & (1u << bit))
			continue;
		why = NULL;
		assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
				 IBV_QPS_ERR, (int)(IBV_QP_STATE | (1u << bit)),
				 &why), -EINVAL);
		assert_string_equal(why, "unknown attribute mask bit");
	}
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 IBV_QPS_ERR, -1, NULL), -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 IBV_QPS_ERR, INT32_MIN | IBV_QP_STATE, NULL), -EINVAL);
	/* known, but never allowed for a supported type */
	assert_int_equal(sv_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS,
			 IBV_QPS_RTS, IBV_QP_CAP, NULL), -EINVAL);
	assert_int_equal(sv_qp_check_modify(IBV_QPT_UD, IBV_QPS_RTS,
			 IBV_QPS_RTS, IBV_QP_RATE_LIMIT, NULL), -EINVAL);
}

/* Every combination, single bits and garbage alike: a defined answer. */
static void test_sweep(void **state)
{
	static const int tv[] = { -1, 0, 1, IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
				  5, IBV_QPT_RAW_PACKET, IBV_QPT_XRC_SEND,
				  IBV_QPT_XRC_RECV, 11, IBV_QPT_DRIVER, 99,
				  INT32_MAX };
	static const int sv[] = { -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 99,
				  INT32_MAX };
	unsigned int ti, ci, ni, b, k;
	const char *why;
	int ret, mask;

	(void)state;
	for (ti = 0; ti < ARRAY_SIZE(tv); ti++)
	for (ci = 0; ci < ARRAY_SIZE(sv); ci++)
	for (ni = 0; ni < ARRAY_SIZE(sv); ni++)
	for (b = 0; b <= 32; b++)
	for (k = 0; k < 2; k++) {
		mask = b < 32 ? (int)(1u << b) : 0;
		if (k)
			mask |= IBV_QP_STATE;
		why = "unset";
		ret = sv_qp_check_modify((enum ibv_qp_type)tv[ti],
					 (enum ibv_qp_state)sv[ci],
					 (enum ibv_qp_state)sv[ni], mask, &why);
		assert_true(ret == 0 || ret == -EINVAL || ret == -EOPNOTSUPP);
		if (ret) {
			assert_non_null(why);
			assert_true(why[0] != '\0');
		} else {
			assert_null(why);
		}
		assert_int_equal(sv_qp_check_modify((enum ibv_qp_type)tv[ti],
				 (enum ibv_qp_state)sv[ci],
				 (enum ibv_qp_state)sv[ni], mask, NULL), ret);
	}
}

static void test_state_names(void **state)
{
	(void)state;
	assert_string_equal(sv_qp_state_name(IBV_QPS_RESET), "RESET");
	assert_string_equal(sv_qp_state_name(IBV_QPS_INIT), "INIT");
	assert_string_equal(sv_qp_state_name(IBV_QPS_RTR), "RTR");
	assert_string_equal(sv_qp_state_name(IBV_QPS_RTS), "RTS");
	assert_string_equal(sv_qp_state_name(IBV_QPS_SQD), "SQD");
	assert_string_equal(sv_qp_state_name(IBV_QPS_SQE), "SQE");
	assert_string_equal(sv_qp_state_name(IBV_QPS_ERR), "ERR");
	assert_string_equal(sv_qp_state_name(IBV_QPS_UNKNOWN), "UNKNOWN");
	assert_string_equal(sv_qp_state_name((enum ibv_qp_state)99),
			    "UNKNOWN");
	assert_string_equal(sv_qp_state_name((enum ibv_qp_state)-1),
			    "UNKNOWN");
}

static void test_posting(void **state)
{
	static const struct {
		enum ibv_qp_state s;
		bool send, recv, flush_send, flush_recv;
	} rows[] = {
		{ IBV_QPS_RESET, false, false, false, false },
		{ IBV_QPS_INIT,	 false, true,  false, false },
		{ IBV_QPS_RTR,	 false, true,  false, false },
		{ IBV_QPS_RTS,	 true,	true,  false, false },
		{ IBV_QPS_SQD,	 true,	true,  false, false },
		{ IBV_QPS_SQE,	 true,	true,  true,  false },
		{ IBV_QPS_ERR,	 true,	true,  true,  true },
		{ IBV_QPS_UNKNOWN, false, false, false, false },
		{ (enum ibv_qp_state)99, false, false, false, false },
		{ (enum ibv_qp_state)-1, false, false, false, false },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(rows); i++) {
		assert_int_equal(sv_qp_can_post_send(rows[i].s), rows[i].send);
		assert_int_equal(sv_qp_can_post_recv(rows[i].s), rows[i].recv);
		assert_int_equal(sv_qp_flushes_send(rows[i].s),
				 rows[i].flush_send);
		assert_int_equal(sv_qp_flushes_recv(rows[i].s),
				 rows[i].flush_recv);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_happy_paths),
		cmocka_unit_test(test_exact_and_full_masks),
		cmocka_unit_test(test_required_removed),
		cmocka_unit_test(test_optional_added),
		cmocka_unit_test(test_disallowed_added),
		cmocka_unit_test(test_rule_matches),
		cmocka_unit_test(test_nothing_else_is_legal),
		cmocka_unit_test(test_illegal_transitions),
		cmocka_unit_test(test_reset_and_err_from_any),
		cmocka_unit_test(test_sqd_round_trip),
		cmocka_unit_test(test_sqe),
		cmocka_unit_test(test_in_place),
		cmocka_unit_test(test_cur_state_bit),
		cmocka_unit_test(test_xrc),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_sweep),
		cmocka_unit_test(test_state_names),
		cmocka_unit_test(test_posting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
