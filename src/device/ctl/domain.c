// SPDX-License-Identifier: MIT
/*
 * Resource domains: the daemon's side of all three APIs (seed 000's domain
 * index, seed 001's ibv_exp_res_domain, upstream's thread domain; the
 * library maps each onto one DOMAIN object).
 *
 * A domain is a claim on a doorbell page and its engine thread. While the
 * device has a page no domain holds, a new domain gets it to itself
 * ("dedicated"): its QPs are served by an engine that serves nothing else,
 * in parallel with the other engines. Once every page is held, a new domain
 * shares the least used page (not a failure), unless it asked for a page of
 * its own (SV_DOMAIN_DEDICATED, FORCE_LOW_LATENCY): then ENOMEM. A page so
 * claimed is never shared while its domain lives (sharers go elsewhere,
 * page 0 when every page is taken that way). The
 * thread model is the library's business (which locks post and poll take);
 * the message model picks the engine's policy (exec/engine.c).
 */
#include <errno.h>
#include <stdlib.h>

#include "device/sv_dev.h"

int sv_cmd_create_domain(struct sv_req *r)
{
	const struct sv_cmd_create_domain *a = &r->cmd->u.create_domain;
	struct sv_domain *d;
	bool dedicated;
	int ret;

	if (a->msg_model >= SV_MSG_MAX) {
		r->why = "unknown message model";
		return -EINVAL;
	}
	if (a->flags & ~SV_DOMAIN_DEDICATED) {
		r->why = "unknown domain flags";
		return -EINVAL;
	}
	if (sv_dev.ndomains >= SV_MAX_DOMAINS) {
		r->why = "max domains reached";
		return -ENOMEM;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->engine = sv_engine_claim(a->msg_model,
				    (a->flags & SV_DOMAIN_DEDICATED) != 0,
				    &dedicated);
	if (!d->engine) {
		free(d);
		r->why = "no doorbell page can be dedicated";
		return -ENOMEM;
	}
	ret = sv_client_add_obj(r, SV_OBJ_DOMAIN, d, &d->handle);
	if (ret) {
		sv_engine_release(d->engine);
		free(d);
		return ret;
	}
	d->owner = r->client;
	d->msg_model = a->msg_model;
	d->dedicated = dedicated;
	sv_dev.ndomains++;
	r->rsp->u.domain = (struct sv_rsp_domain){
		.handle = d->handle,
		.db_index = sv_engine_index(d->engine),
		.dedicated = dedicated,
	};
	return 0;
}

void sv_domain_destroy(struct sv_domain *d)
{
	sv_engine_release(d->engine);
	sv_dev.ndomains--;
	free(d);
}

int sv_cmd_destroy_domain(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_domain *d = sv_req_obj(r, h, SV_OBJ_DOMAIN);

	if (!d)
		return -EINVAL;
	if (d->refs) {
		r->why = "domain in use";
		return -EBUSY;
	}
	sv_client_del_obj(r->client, SV_OBJ_DOMAIN, h);
	sv_domain_destroy(d);
	return 0;
}
