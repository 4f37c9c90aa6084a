// SPDX-License-Identifier: MIT
/* Placeholder: the engine threads (being written). */
#include <errno.h>
#include <unistd.h>
#include <sys/mman.h>
#include "device/sv_dev.h"

int sv_engine_start(void)
{
	return sv_ring_alloc("softverbs-doorbell",
			     (size_t)SV_ENGINES * SV_DB_PAGE_BYTES,
			     &sv_dev.db_memfd, &sv_dev.db_map);
}
void sv_engine_stop(void) {}
void sv_engine_add_qp(struct sv_qp *qp) { (void)qp; }
void sv_engine_remove_qp(struct sv_qp *qp) { (void)qp; }
void sv_engine_kick(struct sv_engine *e) { (void)e; }
void sv_async_event(struct sv_client *c, uint32_t type, uint64_t cookie,
		    uint64_t handle) { (void)c; (void)type; (void)cookie; (void)handle; }
int sv_cq_push(struct sv_cq *cq, const struct sv_cqe *e, bool solicited)
{ (void)cq; (void)e; (void)solicited; return -ENOSPC; }
