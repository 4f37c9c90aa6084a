/* SPDX-License-Identifier: MIT */
/*
 * One look at the device, for softverbs stat, top and the metrics endpoint:
 * everything STAT, STAT_QP and STAT_WIRE say, taken over a probe connection
 * (which creates nothing), and its renderings (text, JSON, Prometheus).
 */
#ifndef SV_TOOLS_SNAP_H
#define SV_TOOLS_SNAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "abi/sv_cmd.h"

struct sv_probe {
	int fd;
	uint32_t seq;
};

/* Connect to the device (a message on stderr when none answers) and say
 * hello as a probe: 0 or -errno. */
int sv_probe_open(struct sv_probe *p, struct sv_rsp_hello *hello);
int sv_probe_call(struct sv_probe *p, struct sv_cmd *cmd, struct sv_rsp *rsp);
void sv_probe_close(struct sv_probe *p);

struct sv_snap {
	double t;                  /* CLOCK_MONOTONIC seconds, when taken */
	char dev_name[SV_DEV_NAME_MAX];
	uint32_t daemon_pid;
	uint32_t nclients;         /* entries in clients (this probe among them) */
	struct sv_stat_client *clients;
	uint32_t total[SV_OBJ_TYPE_MAX];
	uint32_t keys_live;
	uint64_t refused;
	uint32_t nqps;
	struct sv_stat_qp *qps;
	struct sv_rsp_stat_wire wire;
};

/* 0 or -errno; sv_snap_free frees what it holds (also after a failure). */
int sv_snap_take(struct sv_probe *p, const char *dev_name, struct sv_snap *s);
void sv_snap_free(struct sv_snap *s);

const char *sv_snap_qp_type(unsigned int type);
const char *sv_snap_qp_state(unsigned int state);

/* docs/stat.schema.json */
void sv_snap_json(const struct sv_snap *s, FILE *f);
/* The Prometheus text format (version 0.0.4) */
void sv_snap_prometheus(const struct sv_snap *s, FILE *f);

#endif
