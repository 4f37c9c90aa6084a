// SPDX-License-Identifier: MIT
/*
 * `rdma statistic` (device/nl/nl.h): STAT_GET and STAT_GET_STATUS as the
 * kernel's nldev.c answers them for a device whose port has hardware
 * counters and no counters to bind (no rdma_counter objects, mode none):
 *
 *  - STAT_GET doit, no STAT_RES: the port's counters
 *    (stat_get_doit_default_counter): the handle, PORT_INDEX, then
 *    STAT_HWCOUNTERS of entries NAME, VALUE: the hw_counters the device
 *    view shows under /sys/class/infiniband/sv0/ports/1/hw_counters, with
 *    the same values (abi/sv_view.h; the counters/ folder is the PMA's,
 *    which the kernel does not send over netlink either);
 *  - STAT_GET doit, STAT_RES RES_QP: with STAT_MODE, the port's counter
 *    mode (none); with STAT_COUNTER_ID, the counter, which is not there
 *    (ENOENT); STAT_RES RES_MR: the MR of RES_MRN, its MRN only;
 *  - STAT_GET dump, STAT_RES RES_QP: the bound counters (none: only
 *    NLMSG_DONE); RES_MR: every MR's MRN; no STAT_RES: EINVAL;
 *  - STAT_GET_STATUS: the counters' names and indexes (none optional).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "abi/sv_view.h"
#include "device/nl/nl.h"
#include "device/sv_dev.h"

static bool is_hw(unsigned int i)
{
	return !strcmp(sv_view_counters[i].dir, "hw_counters");
}

/* a counter's default mode: the kernel's rdma_counter_get_mode of a port
 * nobody set */
static int stat_mode(struct sv_nl_ctx *ctx, struct sv_nlb *b)
{
	uint32_t port;
	long at;
	int ret;

	if (!ctx->tb[RDMA_NLDEV_ATTR_STAT_MODE] ||
	    !ctx->tb[RDMA_NLDEV_ATTR_DEV_INDEX] ||
	    !ctx->tb[RDMA_NLDEV_ATTR_PORT_INDEX]) {
		ctx->why = "Device index, port index and mode are needed";
		return -EINVAL;
	}
	ret = sv_nldev_dev_of(ctx);
	if (!ret)
		ret = sv_nldev_port_of(ctx, &port);
	if (ret)
		return ret;
	at = sv_nlb_msg(b, ctx, RDMA_NLDEV_CMD_STAT_GET, 0);
	if (at < 0)
		return -EMSGSIZE;
	sv_nldev_handle(b);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_PORT_INDEX, port);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_STAT_MODE, RDMA_COUNTER_MODE_NONE);
	sv_nlb_msg_end(b, at);
	return 0;
}

/* the counter of STAT_COUNTER_ID (res_get_common_doit of a counter): a
 * per-port kind, and there are none */
static int counter_doit(struct sv_nl_ctx *ctx)
{
	uint32_t port;
	int ret = sv_nldev_dev_of(ctx);

	if (ret)
		return ret;
	if (!ctx->tb[RDMA_NLDEV_ATTR_PORT_INDEX]) {
		ctx->why = "A counter is per port: a port is needed";
		return -EINVAL;
	}
	ret = sv_nldev_port_of(ctx, &port);
	return ret ? ret : -ENOENT;
}

/* stat_get_doit_default_counter */
static int port_counters(struct sv_nl_ctx *ctx, struct sv_nlb *b)
{
	struct sv_rsp_stat_wire w;
	uint32_t port;
	long at, table;
	int ret;

	if (!ctx->tb[RDMA_NLDEV_ATTR_DEV_INDEX] ||
	    !ctx->tb[RDMA_NLDEV_ATTR_PORT_INDEX]) {
		ctx->why = "Device index and port index are needed";
		return -EINVAL;
	}
	ret = sv_nldev_dev_of(ctx);
	if (!ret)
		ret = sv_nldev_port_of(ctx, &port);
	if (ret)
		return ret;
	memset(&w, 0, sizeof(w));
	sv_stat_wire_fill(&w);
	at = sv_nlb_msg(b, ctx, RDMA_NLDEV_CMD_STAT_GET, 0);
	if (at < 0)
		return -EMSGSIZE;
	sv_nldev_handle(b);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_PORT_INDEX, port);
	table = sv_nlb_nest(b, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS | NLA_F_NESTED);
	for (unsigned int i = 0; i < sv_view_ncounters; i++) {
		long e;

		if (!is_hw(i))
			continue;
		e = sv_nlb_nest(b, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY | NLA_F_NESTED);
		sv_nlb_str(b, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME,
			   sv_view_counters[i].name);
		sv_nlb_u64(b, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE,
			   sv_view_counter_value(i, &w));
		sv_nlb_nest_end(b, e);
	}
	sv_nlb_nest_end(b, table);
	sv_nlb_msg_end(b, at);
	return 0;
}

/* The STAT_RES a request names: 0 and *res, -ENOENT where absent, or
 * -EINVAL. */
static int stat_res(struct sv_nl_ctx *ctx, uint32_t *res)
{
	int ret = sv_nl_attr_u32(ctx, RDMA_NLDEV_ATTR_STAT_RES, res);

	if (ret == -EINVAL)
		ctx->why = "Statistic resource is malformed";
	return ret;
}

int sv_nl_stat_get_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b)
{
	uint32_t res;
	int ret = stat_res(ctx, &res);

	if (ret == -ENOENT)
		return port_counters(ctx, b);
	if (ret)
		return ret;
	switch (res) {
	case RDMA_NLDEV_ATTR_RES_QP:
		if (ctx->tb[RDMA_NLDEV_ATTR_STAT_COUNTER_ID])
			return counter_doit(ctx);
		return stat_mode(ctx, b);
	case RDMA_NLDEV_ATTR_RES_MR:
		return sv_nl_res_mr_stat_doit(ctx, b);
	default:
		ctx->why = "No statistics of that resource";
		return -EINVAL;
	}
}

int sv_nl_stat_get_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor)
{
	uint32_t res, port;
	int ret = stat_res(ctx, &res);

	if (ret) {
		if (ret == -ENOENT)
			ctx->why = "Statistic resource is missing";
		return -EINVAL;
	}
	switch (res) {
	case RDMA_NLDEV_ATTR_RES_QP:
		/* the bound counters (nldev_res_get_counter_dumpit): none */
		ret = sv_nldev_dev_of(ctx);
		if (!ret && ctx->tb[RDMA_NLDEV_ATTR_PORT_INDEX])
			ret = sv_nldev_port_of(ctx, &port);
		return ret;
	case RDMA_NLDEV_ATTR_RES_MR:
		return sv_nl_res_mr_stat_dump(ctx, b, cursor);
	default:
		ctx->why = "No statistics of that resource";
		return -EINVAL;
	}
}

/* nldev_stat_get_counter_status_doit */
int sv_nl_stat_status_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b)
{
	uint32_t port, idx = 0;
	long at, table;
	int ret;

	if (!ctx->tb[RDMA_NLDEV_ATTR_DEV_INDEX] ||
	    !ctx->tb[RDMA_NLDEV_ATTR_PORT_INDEX]) {
		ctx->why = "Device index and port index are needed";
		return -EINVAL;
	}
	ret = sv_nldev_dev_of(ctx);
	if (!ret)
		ret = sv_nldev_port_of(ctx, &port);
	if (ret)
		return ret;
	at = sv_nlb_msg(b, ctx, RDMA_NLDEV_CMD_STAT_GET_STATUS, 0);
	if (at < 0)
		return -EMSGSIZE;
	sv_nldev_handle(b);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_PORT_INDEX, port);
	table = sv_nlb_nest(b, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS | NLA_F_NESTED);
	for (unsigned int i = 0; i < sv_view_ncounters; i++) {
		long e;

		if (!is_hw(i))
			continue;
		e = sv_nlb_nest(b, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY | NLA_F_NESTED);
		sv_nlb_str(b, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME,
			   sv_view_counters[i].name);
		/* none is optional: no HWCOUNTER_DYNAMIC */
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX, idx++);
		sv_nlb_nest_end(b, e);
	}
	sv_nlb_nest_end(b, table);
	sv_nlb_msg_end(b, at);
	return 0;
}
