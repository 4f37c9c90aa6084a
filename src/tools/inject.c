// SPDX-License-Identifier: MIT
/*
 * softverbs inject: faults on demand, for test scripts
 * (src/device/diag/inject.c says what each does; docs/DESIGN.md "Fault
 * injection").
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/snap.h"
#include "tools/tool.h"

static const char usage_text[] =
"usage: softverbs inject FAULT\n"
"  cmd=COMMAND errno=E [count=N] [pid=P]\n"
"                     the next N (1) commands COMMAND (create_qp, reg_mr,\n"
"                     alloc_pd, ...; of process P, else of any) fail with E\n"
"                     (a name, ENOMEM, or a number)\n"
"  rnr qp=QPN [count=N]     the next N messages to QPN that take a receive\n"
"                     WQE get an RNR NAK\n"
"  access qp=QPN [count=N]  the next N RDMA or atomic requests to QPN get\n"
"                     a remote access error\n"
"  lose qp=QPN [count=N]    the next N messages to QPN (same host) get no\n"
"                     answer: the requester's timeout and retries\n"
"  rnr|access|lose pid=P [count=N]\n"
"                     the same for the next N to any QP of process P\n"
"                     (those it makes later too)\n"
"  rnr|access|lose [count=N]\n"
"                     the same for the next N to any QP of the device\n"
"  fatal qp=QPN       QPN fails now (IBV_EVENT_QP_FATAL)\n"
"  fatal pid=P        every QP of process P fails now\n"
"  port down|up       the port goes down or up (IBV_EVENT_PORT_ERR or\n"
"                     PORT_ACTIVE to every context)\n"
"  wire SPEC          RoCEv2 packets: SPEC is seed=N,drop=P,dup=P,\n"
"                     reorder=P,corrupt=P,delay=US,qp=QPN (any of them;\n"
"                     \"\" for none; delay: each packet leaves US\n"
"                     microseconds later; qp: only the packets sent to\n"
"                     that QPN)\n"
"  wire SPEC pid=P    the same, for the packets of process P's QPs alone\n"
"                     (those it makes later too)\n"
"  clear              disarm everything, the wire's injector too\n"
"  status             what has been injected, and what is armed\n";

static const struct {
	const char *name;
	int err;
} errnos[] = {
	{ "EPERM", EPERM }, { "ENOENT", ENOENT }, { "EIO", EIO },
	{ "EBADF", EBADF }, { "EAGAIN", EAGAIN }, { "ENOMEM", ENOMEM },
	{ "EACCES", EACCES }, { "EFAULT", EFAULT }, { "EBUSY", EBUSY },
	{ "EEXIST", EEXIST }, { "ENODEV", ENODEV }, { "EINVAL", EINVAL },
	{ "ENFILE", ENFILE }, { "EMFILE", EMFILE }, { "ENOSPC", ENOSPC },
	{ "ERANGE", ERANGE }, { "ENOSYS", ENOSYS }, { "EPROTO", EPROTO },
	{ "EOPNOTSUPP", EOPNOTSUPP }, { "ETIMEDOUT", ETIMEDOUT },
	{ "ECONNREFUSED", ECONNREFUSED }, { "ENOTCONN", ENOTCONN },
};

static int parse_errno(const char *s)
{
	char *end;
	long v;

	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (!strcasecmp(s, errnos[i].name))
			return errnos[i].err;
	v = strtol(s, &end, 10);
	return *s && !*end && v > 0 && v < 4096 ? (int)v : -1;
}

static int parse_cmd(const char *s)
{
	for (unsigned int op = 1; op < SV_CMD_MAX; op++) {
		const char *n = sv_cmd_name(op);

		if (n && !strcasecmp(n, s))
			return (int)op;
	}
	return -1;
}

static bool parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (!*s || !isdigit((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* key=value arguments: 0, or -1 for one this fault does not take. */
static int parse_kv(struct sv_cmd_inject *a, int argc, char **argv,
		    const char *allowed)
{
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		size_t klen = eq ? (size_t)(eq - argv[i]) : 0;
		char key[16];
		bool ok;

		if (!eq || !klen || klen >= sizeof(key))
			return -1;
		memcpy(key, argv[i], klen);
		key[klen] = 0;
		if (!strstr(allowed, key))
			return -1;
		if (!strcmp(key, "cmd")) {
			int op = parse_cmd(eq + 1);

			ok = op > 0;
			a->op = (uint32_t)op;
		} else if (!strcmp(key, "errno")) {
			int e = parse_errno(eq + 1);

			ok = e > 0;
			a->err = e;
		} else if (!strcmp(key, "count")) {
			ok = parse_u32(eq + 1, &a->count) && a->count;
		} else if (!strcmp(key, "pid")) {
			ok = parse_u32(eq + 1, &a->pid);
		} else if (!strcmp(key, "qp")) {
			ok = parse_u32(eq + 1, &a->qpn);
		} else {
			ok = false;
		}
		if (!ok) {
			fprintf(stderr, "softverbs inject: bad %s\n", argv[i]);
			return -1;
		}
	}
	return 0;
}

int sv_tool_inject(int argc, char **argv)
{
	static const char *const kinds[SV_INJ_KIND_MAX] = {
		[SV_INJ_CMD] = "cmd", [SV_INJ_RNR] = "rnr",
		[SV_INJ_ACCESS] = "access", [SV_INJ_FATAL] = "fatal",
		[SV_INJ_PORT] = "port", [SV_INJ_WIRE] = "wire",
		[SV_INJ_LOSE] = "lose",
	};
	struct sv_cmd cmd;
	struct sv_cmd_inject *a = &cmd.u.inject;
	struct sv_rsp rsp;
	struct sv_probe p;
	const char *what;
	int ret;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	sv_cmd_init(&cmd, SV_CMD_INJECT);
	a->count = 1;
	what = argv[1];
	if (!strncmp(what, "cmd=", 4)) {
		a->kind = SV_INJ_CMD;
		if (parse_kv(a, argc - 1, argv + 1, "cmd errno count pid") ||
		    !a->op || !a->err)
			goto bad;
	} else if (!strcmp(what, "rnr") || !strcmp(what, "access") ||
		   !strcmp(what, "fatal") || !strcmp(what, "lose")) {
		a->kind = what[0] == 'r' ? SV_INJ_RNR :
			  what[0] == 'a' ? SV_INJ_ACCESS :
			  what[0] == 'l' ? SV_INJ_LOSE : SV_INJ_FATAL;
		a->qpn = 0;
		/* a QP, a process, or (but fatal) the whole device */
		if (parse_kv(a, argc - 2, argv + 2,
			     a->kind == SV_INJ_FATAL ? "qp pid" :
						       "qp pid count") ||
		    (a->qpn && a->pid) ||
		    (a->kind == SV_INJ_FATAL && !a->qpn && !a->pid))
			goto bad;
	} else if (!strcmp(what, "port") && argc == 3 &&
		   (!strcmp(argv[2], "down") || !strcmp(argv[2], "up"))) {
		a->kind = SV_INJ_PORT;
		a->up = !strcmp(argv[2], "up");
	} else if (!strcmp(what, "wire") && (argc == 3 || argc == 4)) {
		a->kind = SV_INJ_WIRE;
		if (strlen(argv[2]) >= sizeof(a->spec) ||
		    (argc == 4 && (parse_kv(a, 1, argv + 3, "pid") || !a->pid)))
			goto bad;
		strcpy(a->spec, argv[2]);
	} else if (!strcmp(what, "clear") && argc == 2) {
		a->kind = SV_INJ_CLEAR;
	} else if (!strcmp(what, "status") && argc == 2) {
		a->kind = SV_INJ_QUERY;
	} else {
		goto bad;
	}
	if (sv_probe_open(&p, NULL))
		return 1;
	ret = sv_probe_call(&p, &cmd, &rsp);
	sv_probe_close(&p);
	if (ret) {
		fprintf(stderr, "softverbs inject: the device refused it: %s\n",
			strerror(-ret));
		return 1;
	}
	printf("injected so far:");
	for (unsigned int k = SV_INJ_CMD; k < SV_INJ_KIND_MAX; k++)
		if (kinds[k])
			printf("%s %s %llu", k > SV_INJ_CMD ? "," : "",
			       kinds[k],
			       (unsigned long long)rsp.u.inject.done[k]);
	printf("; armed: %u\n", rsp.u.inject.armed);
	return 0;
bad:
	fprintf(stderr, "softverbs inject: not a fault it knows\n%s",
		usage_text);
	return 2;
}
