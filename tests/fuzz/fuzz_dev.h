/* SPDX-License-Identifier: MIT */
/*
 * The device in the fuzzer's own process (fuzz_dev.c): sv_dev, its key
 * table and identity (127.0.0.1), the engine without threads
 * (fake_engine.c: fz_run steps the QPs), and clients whose "process" is
 * the fuzzer itself: a client is made from one end of a socketpair, so its
 * peer credentials, pidfd and memory (process_vm_readv/writev, the maps
 * REG_MR checks) are the fuzzer's. Commands go straight to
 * sv_control_handle, as the control thread hands them over.
 *
 * With fz_dev_init(true) the device has a RoCEv2 port whose transport is
 * fake_net.c: nothing reaches a socket, every packet the device sends is
 * checked (it parses, its ICRC is right) and handed to fz_tx_hook.
 */
#ifndef SV_FUZZ_DEV_H
#define SV_FUZZ_DEV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "abi/sv_cmd.h"
#include "device/exec/engine.h"
#include "device/roce/roce_int.h"
#include "device/sv_dev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(cond) do { \
		if (!(cond)) { \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, \
				#cond); \
			abort(); \
		} \
	} while (0)

/* The address the device serves (GID 0) and a peer on "another host". */
extern const uint8_t fz_local_gid[16], fz_peer_gid[16];

/* Once per process; wire: a RoCEv2 port on fake_net.c. */
void fz_dev_init(bool wire);

/* A client of the fuzzer's own process (its socket's other end is closed:
 * fz_cmd hands the responses back directly). */
struct sv_client *fz_client_new(void);
/* Every object of c goes (as when a client's process dies). */
void fz_client_free(struct sv_client *c);

/* One command as the control thread runs it; cmd's header is filled here
 * (unless raw). fd_in is taken; *fd_out (may be NULL: closed) gets the
 * descriptor the response carries. The response's status. */
int fz_cmd(struct sv_client *c, struct sv_cmd *cmd, int fd_in,
	   struct sv_rsp *rsp, int *fd_out, bool raw);

/* Object helpers (abort on failure unless said otherwise). */
uint64_t fz_alloc_pd(struct sv_client *c);
/* 0 on failure */
uint64_t fz_reg_mr(struct sv_client *c, uint64_t pd, void *buf,
		   uint64_t len, uint32_t access, uint32_t *key);
uint64_t fz_create_cq(struct sv_client *c, uint32_t cqe);
struct fz_qp {
	uint64_t handle;
	uint32_t qpn;
	struct sv_qp *qp;          /* the device's object */
};
int fz_create_qp(struct sv_client *c, uint32_t type, uint64_t pd,
		 uint64_t cq, uint64_t srq, struct fz_qp *out);
/* Walk qp from RESET to state (INIT, RTR, RTS, SQD, ERR) the way a
 * connecting program does, to dqpn at dgid (UD: no peer). The status of
 * the first modify that failed, else 0. */
int fz_qp_to(struct sv_client *c, struct fz_qp *q, uint32_t state,
	     uint32_t dqpn, const uint8_t dgid[16], uint32_t psn);
uint64_t fz_create_ah(struct sv_client *c, uint64_t pd,
		      const uint8_t dgid[16]);

/* Post a send WQE (hdr, then body bytes: SGEs or inline data) to qp's SQ,
 * or a receive WQE: as the library does. false: no room. */
bool fz_post_send(struct sv_qp *qp, const struct sv_send_wqe *w,
		  const void *body, uint32_t body_len);
bool fz_post_recv(struct sv_qp *qp, uint64_t wr_id,
		  const struct sv_wqe_sge *sge, uint32_t nsge);
/* Drain a CQ's ring as the library would: the CQEs taken. */
unsigned int fz_poll_cq(struct sv_client *c, uint64_t cq);

/* fake_engine.c: at most steps steps of every QP the engine holds (under
 * sv_dev.lock, taken here): the steps that did something. */
unsigned int fz_run(unsigned int steps);

/* fake_net.c: each packet the device sends, after its checks. */
extern void (*fz_tx_hook)(const uint8_t *buf, uint32_t len,
			  const struct sv_roce_ip *ip);
extern uint64_t fz_tx_count;

#endif
