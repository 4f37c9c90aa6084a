// SPDX-License-Identifier: MIT
/*
 * Command codec shared by libibverbs.so.1 and softverbsd: names, header
 * checks and header initialisation of struct sv_cmd / struct sv_rsp.
 */
#include <string.h>

#include "abi/sv_cmd.h"

static const char *const cmd_names[SV_CMD_MAX] = {
#define SV_X(name, num) [num] = #name,
	SV_CMD_LIST(SV_X)
#undef SV_X
};

const char *sv_cmd_name(unsigned int op)
{
	if (op >= SV_CMD_MAX || !cmd_names[op])
		return "unknown";
	return cmd_names[op];
}

enum sv_cmd_verdict sv_cmd_check(const struct sv_cmd *cmd, size_t n)
{
	if (n < sizeof(*cmd))
		return SV_CMD_SHORT;
	if (n > sizeof(*cmd))
		return SV_CMD_LONG;
	if (cmd->hdr.magic != SV_PROTO_MAGIC)
		return SV_CMD_BAD_MAGIC;
	if (cmd->hdr.version != SV_PROTO_VERSION)
		return SV_CMD_BAD_VERSION;
	if (!cmd->hdr.op || cmd->hdr.op >= SV_CMD_MAX)
		return SV_CMD_BAD_OP;
	return SV_CMD_OK;
}

const char *sv_cmd_verdict_str(enum sv_cmd_verdict v)
{
	static const char *const str[] = {
		[SV_CMD_OK] = "ok",
		[SV_CMD_SHORT] = "short message",
		[SV_CMD_LONG] = "long message",
		[SV_CMD_BAD_MAGIC] = "bad magic",
		[SV_CMD_BAD_VERSION] = "bad version",
		[SV_CMD_BAD_OP] = "bad op",
	};

	if ((unsigned int)v >= sizeof(str) / sizeof(str[0]) || !str[v])
		return "unknown";
	return str[v];
}

void sv_cmd_init(struct sv_cmd *cmd, unsigned int op)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->hdr.magic = SV_PROTO_MAGIC;
	cmd->hdr.op = op;
	cmd->hdr.version = SV_PROTO_VERSION;
}

void sv_rsp_init(struct sv_rsp *rsp, const struct sv_cmd *cmd, int status)
{
	memset(rsp, 0, sizeof(*rsp));
	rsp->hdr.magic = SV_PROTO_MAGIC;
	rsp->hdr.op = cmd->hdr.op;
	rsp->hdr.version = SV_PROTO_VERSION;
	rsp->hdr.seq = cmd->hdr.seq;
	rsp->hdr.status = status;
}
