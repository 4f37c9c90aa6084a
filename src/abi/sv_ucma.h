/* SPDX-License-Identifier: MIT */
/*
 * The rdma_cm device in user space (docs/DESIGN.md, "rdma_cm"): what the
 * preload library and the daemon say to each other about one open
 * /dev/infiniband/rdma_cm.
 *
 * Each open() connects to the daemon's second socket, SV_UCMA_SOCK_NAME
 * beside the control socket (SOCK_SEQPACKET). The daemon answers with a
 * struct sv_ucma_hello carrying, by SCM_RIGHTS, an eventfd in
 * EFD_SEMAPHORE mode: that eventfd is the descriptor open() returns, and
 * the daemon adds 1 to it for every event it queues on the file, so
 * poll/epoll/select on it work as on the kernel's file.
 *
 * Then every write() of the program is one struct sv_ucma_req (the bytes
 * as written, the kernel's ABI of <rdma/rdma_user_cm.h>) answered by one
 * struct sv_ucma_rsp: what write() returns, and the response bytes with
 * the address they go to, which the preload copies into the program.
 */
#ifndef SV_ABI_UCMA_H
#define SV_ABI_UCMA_H

#include <stdint.h>

#define SV_UCMA_SOCK_NAME "rdma_cm"   /* beside the control socket */
#define SV_UCMA_MAGIC     0x75636d61u /* "ucma" */
#define SV_UCMA_VERSION   1

/* The kernel's numbers: the misc class's ABI version, and the misc
 * device's major (the minor is dynamic there; ours is fixed). */
#define SV_UCMA_ABI       4
#define SV_UCMA_MAJOR     10
#define SV_UCMA_MINOR     58

/* The largest command we read from a write() (the largest ucma command is
 * about 300 bytes; a longer write carries bytes the kernel ignores too),
 * the largest option value passed on (RDMA_OPTION_IB_PATH with a few path
 * records), the largest response (QUERY with 6 paths is 440 bytes). */
#define SV_UCMA_MAX_CMD   512
#define SV_UCMA_MAX_OPT   512
#define SV_UCMA_MAX_RSP   1024

struct sv_ucma_hello {
	uint32_t magic;
	uint32_t version;
	uint64_t token;        /* names this file to the daemon (MIGRATE_ID) */
};

/* What aux says in a request. */
enum {
	SV_UCMA_AUX_NONE,
	SV_UCMA_AUX_FILE,      /* MIGRATE_ID: aux is the token of cmd.fd's file */
	SV_UCMA_AUX_NOT_UCMA,  /* MIGRATE_ID: cmd.fd is open, not an rdma_cm file */
	SV_UCMA_AUX_BAD_FD,    /* MIGRATE_ID: cmd.fd is not open */
	SV_UCMA_UNGET,         /* put the event just fetched back (its copy
				* into the program failed) */
};

struct sv_ucma_req {
	uint32_t magic;
	uint32_t wlen;         /* the length passed to write() */
	uint32_t nbytes;       /* bytes of the write in data[] */
	uint32_t optlen;       /* SET_OPTION: the option value after them */
	uint32_t aux_kind;     /* SV_UCMA_AUX_* */
	uint32_t rsvd;
	uint64_t aux;
	uint8_t data[SV_UCMA_MAX_CMD + SV_UCMA_MAX_OPT];
};

/* GET_EVENT found the file's queue empty: the token the preload took was
 * stale (its event went with a destroyed id); it takes the next one. */
#define SV_UCMA_STALE 1

struct sv_ucma_rsp {
	uint32_t magic;
	int32_t ret;           /* write()'s result, -errno, or SV_UCMA_STALE */
	uint64_t out_addr;     /* where out[] goes in the program */
	uint32_t out_len;
	uint32_t rsvd;
	uint8_t out[SV_UCMA_MAX_RSP];
};

#define SV_UCMA_REQ_HDR ((uint32_t)(sizeof(struct sv_ucma_req) - \
				    SV_UCMA_MAX_CMD - SV_UCMA_MAX_OPT))
#define SV_UCMA_RSP_HDR ((uint32_t)(sizeof(struct sv_ucma_rsp) - SV_UCMA_MAX_RSP))

_Static_assert(sizeof(struct sv_ucma_req) == 32 + SV_UCMA_MAX_CMD + SV_UCMA_MAX_OPT,
	       "sv_ucma_req layout");
_Static_assert(sizeof(struct sv_ucma_rsp) == 24 + SV_UCMA_MAX_RSP, "sv_ucma_rsp layout");

#endif
