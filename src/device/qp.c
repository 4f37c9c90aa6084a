// SPDX-License-Identifier: MIT
/* Placeholder: QP, SRQ and AH control (being written). */
#include <errno.h>
#include <stdlib.h>
#include "device/sv_dev.h"

int sv_cmd_create_qp(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
int sv_cmd_modify_qp(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
int sv_cmd_query_qp(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
int sv_cmd_destroy_qp(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
void sv_qp_destroy(struct sv_qp *qp) { free(qp); }
struct sv_qp *sv_qp_lookup(uint32_t qpn) { (void)qpn; return NULL; }
int sv_cmd_create_srq(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
int sv_cmd_modify_srq(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
int sv_cmd_query_srq(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
int sv_cmd_destroy_srq(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
void sv_srq_destroy(struct sv_srq *srq) { free(srq); }
int sv_cmd_create_ah(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
int sv_cmd_destroy_ah(struct sv_req *r) { (void)r; return -EOPNOTSUPP; }
void sv_ah_destroy(struct sv_ah *ah) { free(ah); }
