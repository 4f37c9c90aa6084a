/* SPDX-License-Identifier: MIT */
/*
 * softverbsd internals: the device, its clients and their objects.
 */
#ifndef SV_DEVICE_DEV_H
#define SV_DEVICE_DEV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "abi/sv_cmd.h"
#include "device/keys.h"
#include "device/objtab.h"

/* Limits of the device: what it reports and what it enforces. */
#define SV_MAX_CLIENTS      1024
#define SV_MAX_OBJS_CLIENT  (1u << 20)
#define SV_MAX_PD           (1u << 16)
#define SV_MAX_MR           (1u << 20)
#define SV_MAX_CQ           (1u << 14)
#define SV_MAX_CQE          ((1u << 16) - 1)
#define SV_MAX_CHANNEL      (1u << 12)
#define SV_MAX_MR_SIZE      (1ull << 47)   /* the user address space */

struct sv_client;

struct sv_pd {
	struct sv_client *owner;
	uint64_t handle;
	uint32_t refs;             /* MRs (and later QPs, SRQs, AHs, MWs) */
};

struct sv_mr {
	struct sv_client *owner;
	struct sv_pd *pd;
	uint64_t handle;
	uint64_t addr;             /* in the owner's address space */
	uint64_t length;
	uint64_t iova;             /* the address the MR's users name */
	uint32_t access;
	uint32_t key;              /* lkey == rkey */
};

struct sv_channel {
	struct sv_client *owner;
	uint64_t handle;
	int fd;                    /* the daemon's end of the event socket */
	uint32_t refs;             /* CQs */
};

struct sv_cq {
	struct sv_client *owner;
	uint64_t handle;
	uint64_t cookie;
	struct sv_channel *channel;
	int memfd;
	void *ring;                /* struct sv_cq_ring + slots */
	size_t ring_bytes;
	uint32_t entries;          /* ring slots */
	uint32_t cqe;              /* usable entries reported */
	uint32_t flags;
	uint32_t refs;             /* QPs, SRQs */
};

struct sv_client {
	struct sv_client *next, *prev;
	uint64_t id;
	int fd;
	int pidfd;                 /* -1 where pidfds are unavailable */
	int async_fd;              /* -1 until OPEN_CONTEXT */
	pid_t pid;
	uid_t uid;
	bool probe;
	bool dead;
	struct sv_objtab objs;
	void *ev_sock, *ev_pid;    /* epoll tags (struct sv_evtag *) */
};

struct sv_device {
	char name[SV_DEV_NAME_MAX];
	struct sv_dev_attr attr;
	struct sv_port_attr port;
	struct sv_rsp_gid gid[SV_GID_TBL_LEN];
	struct sv_keytab keys;
	struct sv_client clients;  /* list head */
	uint32_t nclients;
	uint64_t next_client_id;
	uint32_t total[SV_OBJ_TYPE_MAX];
	uint64_t refused;
};

extern struct sv_device sv_dev;

/* identity.c: fill sv_dev's name, attributes, port and GIDs. ip may be NULL
 * (pick the host's first non-loopback IPv4 address). */
int sv_identity_init(const char *ip);

/* A handler's view of one command. */
struct sv_req {
	struct sv_client *client;
	const struct sv_cmd *cmd;
	struct sv_rsp *rsp;
	int fd_in;                 /* owned by the handler when it takes it */
	int fd_out;                /* sent with the response, then closed */
	const char *why;           /* for the log when the command is refused */
};

/* control.c */
void sv_control_handle(struct sv_client *c, const struct sv_cmd *cmd,
		       ssize_t n, int fd_in, struct sv_rsp *rsp, int *fd_out);

/* mem.c */
int sv_mem_check_range(struct sv_client *c, uint64_t addr, uint64_t len,
		       bool write, const char **why);
int sv_cmd_reg_mr(struct sv_req *r);
int sv_cmd_rereg_mr(struct sv_req *r);
int sv_cmd_dereg_mr(struct sv_req *r);
void sv_mr_destroy(struct sv_mr *mr);

/* cq.c */
/* Is fd a seqpacket socket the daemon can send events on? Makes it
 * non-blocking: the daemon never waits for a client. */
int sv_check_event_socket(int fd, const char **why);
int sv_cmd_create_channel(struct sv_req *r);
int sv_cmd_destroy_channel(struct sv_req *r);
int sv_cmd_create_cq(struct sv_req *r);
int sv_cmd_resize_cq(struct sv_req *r);
int sv_cmd_destroy_cq(struct sv_req *r);
void sv_channel_destroy(struct sv_channel *ch);
void sv_cq_destroy(struct sv_cq *cq);

/* client.c */
struct sv_client *sv_client_new(int fd);
/* Free every object of c, close its descriptors, unlink it; the struct
 * itself stays (marked dead) until sv_client_free. */
void sv_client_teardown(struct sv_client *c);
void sv_client_free(struct sv_client *c);
int sv_client_add_obj(struct sv_client *c, unsigned int type, void *obj,
		      uint64_t *handle);
void sv_client_del_obj(struct sv_client *c, unsigned int type,
		       uint64_t handle);

/* log.c */
enum { SV_LOG_ERR, SV_LOG_WARN, SV_LOG_INFO, SV_LOG_DEBUG };
extern int sv_log_level;
int sv_log_open(const char *path);
void sv_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
