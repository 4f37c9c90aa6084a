/* SPDX-License-Identifier: MIT */
/*
 * Non-default symbol versions kept by rdma-core for binaries linked before
 * 2006: name@IBVERBS_1.0 for the core verbs, ibv_register_driver@IBVERBS_1.1.
 *
 * The 1.0 ABI used different structure layouts, which softverbs does not
 * implement: every entry point fails cleanly (NULL with errno, or ENOSYS)
 * and says so once on stderr. Releases and acks do nothing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define SV_SYMVER(fn, sym) __asm__(".symver " #fn ", " sym)

#define SV_COMPAT(type, name, ...)					\
	SV_SYMVER(sv_compat_##name##_1_0, #name "@IBVERBS_1.0");	\
	__attribute__((used)) type sv_compat_##name##_1_0(__VA_ARGS__)

static void unsupported(void)
{
	static int warned;

	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		fputs("softverbs: the IBVERBS_1.0 ABI is not supported\n",
		      stderr);
	errno = ENOSYS;
}

/* Verbs returning an object: NULL with errno set. */
#define SV_PTR(name, ...)						\
	SV_COMPAT(void *, name, __VA_ARGS__)				\
	{ unsupported(); return NULL; }

/* Verbs returning an errno value. */
#define SV_ERR(name, ...)						\
	SV_COMPAT(int, name, __VA_ARGS__)				\
	{ unsupported(); return ENOSYS; }

/* Verbs returning -1 with errno set. */
#define SV_NEG(name, ...)						\
	SV_COMPAT(int, name, __VA_ARGS__)				\
	{ unsupported(); return -1; }

/* Releases and acknowledgements of what was never handed out. */
#define SV_NOP(name, ...)						\
	SV_COMPAT(void, name, __VA_ARGS__) {}

SV_PTR(ibv_get_device_list, int *num_devices)
SV_NOP(ibv_free_device_list, void **list)
SV_PTR(ibv_get_device_name, void *device)
SV_COMPAT(uint64_t, ibv_get_device_guid, void *device)
{
	unsupported();
	return 0;
}
SV_PTR(ibv_open_device, void *device)
SV_ERR(ibv_close_device, void *context)

SV_NEG(ibv_get_async_event, void *context, void *event)
SV_NOP(ibv_ack_async_event, void *event)

SV_ERR(ibv_query_device, void *context, void *device_attr)
SV_ERR(ibv_query_port, void *context, uint8_t port_num, void *port_attr)
SV_ERR(ibv_query_gid, void *context, uint8_t port_num, int index, void *gid)
SV_ERR(ibv_query_pkey, void *context, uint8_t port_num, int index,
       uint16_t *pkey)

SV_PTR(ibv_alloc_pd, void *context)
SV_ERR(ibv_dealloc_pd, void *pd)
SV_PTR(ibv_reg_mr, void *pd, void *addr, size_t length, int access)
SV_ERR(ibv_dereg_mr, void *mr)

SV_PTR(ibv_create_cq, void *context, int cqe, void *cq_context,
       void *channel, int comp_vector)
SV_ERR(ibv_resize_cq, void *cq, int cqe)
SV_ERR(ibv_destroy_cq, void *cq)
SV_NEG(ibv_get_cq_event, void *channel, void **cq, void **cq_context)
SV_NOP(ibv_ack_cq_events, void *cq, unsigned int nevents)

SV_PTR(ibv_create_srq, void *pd, void *srq_init_attr)
SV_ERR(ibv_modify_srq, void *srq, void *srq_attr, int srq_attr_mask)
SV_ERR(ibv_query_srq, void *srq, void *srq_attr)
SV_ERR(ibv_destroy_srq, void *srq)

SV_PTR(ibv_create_qp, void *pd, void *qp_init_attr)
SV_ERR(ibv_query_qp, void *qp, void *attr, int attr_mask, void *init_attr)
SV_ERR(ibv_modify_qp, void *qp, void *attr, int attr_mask)
SV_ERR(ibv_destroy_qp, void *qp)

SV_PTR(ibv_create_ah, void *pd, void *attr)
SV_ERR(ibv_destroy_ah, void *ah)
SV_ERR(ibv_attach_mcast, void *qp, const void *gid, uint16_t lid)
SV_ERR(ibv_detach_mcast, void *qp, const void *gid, uint16_t lid)

/* Old-style provider registration: there are no providers to register. */
SV_SYMVER(sv_compat_ibv_register_driver_1_1, "ibv_register_driver@IBVERBS_1.1");
__attribute__((used)) void sv_compat_ibv_register_driver_1_1(const char *name,
							       void *init)
{
}
