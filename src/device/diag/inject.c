// SPDX-License-Identifier: MIT
/*
 * Fault injection on demand (softverbs inject; docs/DESIGN.md "Fault
 * injection"): faults a real NIC gives only by accident, made to happen
 * now or on the next N occasions, each with the effect a program would see
 * on hardware:
 *
 *   a command failing with a chosen errno (ENOMEM from ibv_create_qp);
 *   an RNR NAK for a message that needs a receive WQE (RC: the requester
 *   retries rnr_retry times, then IBV_WC_RNR_RETRY_EXC_ERR);
 *   a remote access error for an RDMA or atomic request (the requester's
 *   IBV_WC_REM_ACCESS_ERR, both QPs in ERR);
 *   a fatal QP (ERR and IBV_EVENT_QP_FATAL);
 *   the port going down and up (IBV_EVENT_PORT_ERR / PORT_ACTIVE to every
 *   context, and the port's state as ibv_query_port reads it);
 *   drops, duplicates, reordering and corruption of RoCEv2 packets (the
 *   seeded injector of net.c and net_tx.c, set at run time).
 *
 * Everything runs under the device lock. Every injection is logged and
 * counted (the counts come with every INJECT response).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "device/ctl/direct.h"
#include "device/exec/exec_int.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

#define CMD_FAULTS 16

/* what: the command (SV_CMD_*); err: the errno it fails with */
static struct sv_inj_fault cmd_fault[CMD_FAULTS];
static uint32_t cmd_armed;         /* entries with count > 0 */

/* Arm count of (what, pid) in tab[n] (armed: its entries with a count):
 * the same fault again is re-armed, else a free entry taken. The entry,
 * or NULL when every one is armed. */
static struct sv_inj_fault *arm_slot(struct sv_inj_fault *tab, unsigned int n,
				     uint32_t *armed,
				     const struct sv_cmd_inject *a,
				     uint32_t what)
{
	struct sv_inj_fault *f = NULL;

	for (unsigned int i = 0; i < n; i++) {
		if (tab[i].count && tab[i].what == what &&
		    tab[i].pid == a->pid) {
			f = &tab[i];
			break;
		}
		if (!tab[i].count && !f)
			f = &tab[i];
	}
	if (!f)
		return NULL;
	if (!f->count)
		(*armed)++;
	f->what = what;
	f->pid = a->pid;
	f->count = a->count;
	return f;
}

bool sv_inject_cmd_armed(void)
{
	return cmd_armed != 0;
}

int sv_inject_cmd(const struct sv_client *c, unsigned int op)
{
	for (unsigned int i = 0; i < CMD_FAULTS; i++) {
		struct sv_inj_fault *f = &cmd_fault[i];

		if (!f->count || f->what != op ||
		    (f->pid && f->pid != (uint32_t)c->pid))
			continue;
		if (!--f->count)
			cmd_armed--;
		sv_inj_done[SV_INJ_CMD]++;
		sv_log(SV_LOG_INFO, "inject: %s of client %llu (pid %d) "
		       "fails with %s (%u more armed)", sv_cmd_name(op),
		       (unsigned long long)c->id, (int)c->pid,
		       strerror(f->err), f->count);
		return -f->err;
	}
	return 0;
}

static void port_event(uint32_t type)
{
	struct sv_event ev = {
		.magic = SV_PROTO_MAGIC, .type = type, .port_num = 1,
	};

	for (struct sv_client *c = sv_dev.clients.next; c != &sv_dev.clients;
	     c = c->next)
		if (!c->dead && c->async_fd >= 0 &&
		    send(c->async_fd, &ev, sizeof(ev),
			 MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			sv_log(SV_LOG_DEBUG, "client %llu: port event dropped",
			       (unsigned long long)c->id);
}

static int arm_cmd(struct sv_req *r, const struct sv_cmd_inject *a)
{
	struct sv_inj_fault *f;

	if (!a->op || a->op >= SV_CMD_MAX || a->op == SV_CMD_INJECT ||
	    a->op == SV_CMD_HELLO || a->err <= 0 || a->err > 4095) {
		r->why = "a command other than HELLO and INJECT, and a positive errno";
		return -EINVAL;
	}
	f = arm_slot(cmd_fault, CMD_FAULTS, &cmd_armed, a, a->op);
	if (!f) {
		r->why = "every command fault slot is armed";
		return -ENOSPC;
	}
	f->err = a->err;
	return 0;
}

/*
 * Responder faults of a process (pid) or of the whole device (pid 0): the
 * next count messages to any of its QPs. A QP's own faults go first
 * (sv_qp.inj_*); these are looked up only while one is armed (sv_inj_wide,
 * read by the engines under the device lock; taken in exec/wq.c).
 */
static int arm_wide(struct sv_req *r, const struct sv_cmd_inject *a)
{
	if (!arm_slot(sv_inj_wide_tab, SV_INJ_WIDE, &sv_inj_wide, a, a->kind)) {
		r->why = "every process or device fault slot is armed";
		return -ENOSPC;
	}
	return 0;
}

/* Take qp off the direct path, with its peer on this host: the initiator
 * must ask the device, which then answers with the fault. (A QP's entry
 * without the direct path also keeps initiators that connect to it later
 * off: the library checks both ends.) */
static void no_direct(struct sv_qp *qp)
{
	struct sv_qp *peer = qp->roce ? NULL :
			     sv_qp_lookup(qp->attr.dest_qp_num);

	qp->direct_off = true;
	sv_direct_qp(qp);
	if (peer && peer->attr.dest_qp_num == qp->qpn) {
		peer->direct_off = true;
		sv_direct_qp(peer);
	}
}

/* wire SPEC pid=P: the local QPs (by qpn_tab slot) whose packets the
 * wire's faults touch, the QPs of wire_pid (0: none) */
#define QP_SLOTS (sizeof(sv_dev.qpn_tab) / sizeof(sv_dev.qpn_tab[0]))
static uint8_t wire_qps[QP_SLOTS / 8];
static uint32_t wire_pid;

static void wire_qp_mark(uint32_t qpn, bool on)
{
	uint32_t i = qpn & (QP_SLOTS - 1);
	uint8_t *b = &wire_qps[i >> 3];
	uint8_t v = __atomic_load_n(b, __ATOMIC_RELAXED);

	v = on ? (uint8_t)(v | 1u << (i & 7)) : (uint8_t)(v & ~(1u << (i & 7)));
	__atomic_store_n(b, v, __ATOMIC_RELAXED);
}

void sv_inject_qp_new(struct sv_qp *qp)
{
	if (wire_pid && qp->owner && qp->owner->pid == (pid_t)wire_pid)
		wire_qp_mark(qp->qpn, true);
	/* a fault armed for its process (or the device) reaches it at the
	 * device: no direct path */
	for (unsigned int i = 0; sv_inj_wide && i < SV_INJ_WIDE; i++)
		if (sv_inj_wide_tab[i].count &&
		    sv_inj_reaches(sv_inj_wide_tab[i].pid, qp))
			qp->direct_off = true;
}

void sv_inject_qp_gone(const struct sv_qp *qp)
{
	if (wire_pid)
		wire_qp_mark(qp->qpn, false);
}

/* The wire's faults for spec, for the QPs of pid (0: every packet). */
static int wire_set(const char *spec, uint32_t pid)
{
	wire_pid = pid;
	for (uint32_t i = 0; i < QP_SLOTS; i++) {
		const struct sv_qp *qp = sv_dev.qpn_tab[i];

		wire_qp_mark(i, pid && qp && qp->owner &&
				qp->owner->pid == (pid_t)pid);
	}
	return sv_roce_inject(spec, pid ? wire_qps : NULL);
}

static void clear_all(void)
{
	memset(cmd_fault, 0, sizeof(cmd_fault));
	cmd_armed = 0;
	memset(sv_inj_wide_tab, 0, sizeof(sv_inj_wide_tab));
	sv_inj_wide = 0;
	for (uint32_t i = 0; i < sizeof(sv_dev.qpn_tab) /
				 sizeof(sv_dev.qpn_tab[0]); i++)
		if (sv_dev.qpn_tab[i])
			sv_dev.qpn_tab[i]->inj_rnr =
				sv_dev.qpn_tab[i]->inj_access =
				sv_dev.qpn_tab[i]->inj_lose = 0;
	if (sv_roce_running())
		(void)wire_set(NULL, 0);
	/* and a port taken down comes up again */
	if (sv_dev.port.state != IBV_PORT_ACTIVE) {
		sv_dev.port.state = IBV_PORT_ACTIVE;
		sv_dev.port.phys_state = 5;
		port_event(IBV_EVENT_PORT_ACTIVE);
	}
}

/* The kind, the QP it names (*qpp, else NULL: a process or the device)
 * and a count where the kind takes one. */
static int inject_check(struct sv_req *r, const struct sv_cmd_inject *a,
			struct sv_qp **qpp)
{
	struct sv_qp *qp = NULL;

	if (a->rsvd || !a->kind || a->kind >= SV_INJ_KIND_MAX) {
		r->why = "no such kind of fault";
		return -EINVAL;
	}
	if ((a->kind == SV_INJ_RNR || a->kind == SV_INJ_ACCESS ||
	     a->kind == SV_INJ_FATAL || a->kind == SV_INJ_LOSE) && a->qpn) {
		if (a->pid) {
			r->why = "a QP or a process, not both";
			return -EINVAL;
		}
		qp = sv_qp_lookup(a->qpn);
		if (!qp || qp->qpn != a->qpn) {
			r->why = "no such qp";
			return -EINVAL;
		}
	}
	if ((a->kind == SV_INJ_CMD || a->kind == SV_INJ_RNR ||
	     a->kind == SV_INJ_ACCESS || a->kind == SV_INJ_LOSE) &&
	    !a->count) {
		r->why = "a count of at least 1";
		return -EINVAL;
	}
	*qpp = qp;
	return 0;
}

/* RNR, access or lose faults of a process, or of the device: its QPs,
 * those it makes later too, reach the device for it. */
static int inject_wide(struct sv_req *r, const struct sv_cmd_inject *a)
{
	int ret;

	ret = arm_wide(r, a);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < QP_SLOTS; i++)
		if (sv_dev.qpn_tab[i] && !sv_dev.qpn_tab[i]->opened &&
		    sv_inj_reaches(a->pid, sv_dev.qpn_tab[i]))
			no_direct(sv_dev.qpn_tab[i]);
	return 0;
}

/* fatal pid=P: every QP of the process not yet in ERR. */
static int inject_fatal_pid(struct sv_req *r, const struct sv_cmd_inject *a)
{
	unsigned int n = 0;

	if (!a->pid) {
		r->why = "fatal takes a QP or a process";
		return -EINVAL;
	}
	for (uint32_t i = 0; i < QP_SLOTS; i++) {
		struct sv_qp *q = sv_dev.qpn_tab[i];

		if (q && !q->opened && sv_inj_reaches(a->pid, q) &&
		    q->state != IBV_QPS_ERR) {
			sv_qp_error(q, IBV_EVENT_QP_FATAL);
			n++;
		}
	}
	if (!n) {
		r->why = "that process has no QP out of the error state";
		return -ENOENT;
	}
	sv_inj_done[SV_INJ_FATAL] += n;
	return 0;
}

/* port up=0/1: the port's state, and the event to every context. */
static int inject_port(struct sv_req *r, const struct sv_cmd_inject *a)
{
	if (a->up > 1) {
		r->why = "up is 0 or 1";
		return -EINVAL;
	}
	sv_inj_done[SV_INJ_PORT]++;
	sv_dev.port.state = a->up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	sv_dev.port.phys_state = a->up ? 5 : 3; /* LinkUp, Disabled */
	port_event(a->up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR);
	return 0;
}

/* wire SPEC: the RoCEv2 injector's faults. */
static int inject_wire(struct sv_req *r, const struct sv_cmd_inject *a)
{
	int ret;

	if (!memchr(a->spec, 0, sizeof(a->spec))) {
		r->why = "the spec is not terminated";
		return -EINVAL;
	}
	ret = wire_set(a->spec, a->pid);
	if (ret)
		r->why = ret == -ENODEV ? "no RoCEv2 port" :
		 "not seed=N,drop=P,dup=P,reorder=P,corrupt=P,"
		 "delay=US,qp=N";
	else
		sv_inj_done[SV_INJ_WIRE]++;
	return ret;
}

/* Every other fault: of one QP (qp), of the commands, the port or the
 * wire, or all cleared. */
static int inject_one(struct sv_req *r, const struct sv_cmd_inject *a,
		      struct sv_qp *qp)
{
	int ret = 0;

	switch (a->kind) {
	case SV_INJ_CMD:
		ret = arm_cmd(r, a);
		break;
	case SV_INJ_RNR:
	case SV_INJ_ACCESS:
		if (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_XRC_RECV) {
			r->why = "RNR and access faults are an RC responder's";
			return -EINVAL;
		}
		if (a->kind == SV_INJ_RNR)
			qp->inj_rnr = a->count;
		else
			qp->inj_access = a->count;
		no_direct(qp);
		break;
	case SV_INJ_LOSE:
		if (qp->roce) {
			r->why = "a QP across RoCEv2 loses packets with "
				 "`wire drop=P,qp=N`";
			return -EINVAL;
		}
		if (qp->type == IBV_QPT_XRC_SEND) {
			r->why = "lose is a responder's: name the XRC target";
			return -EINVAL;
		}
		qp->inj_lose = a->count;
		no_direct(qp);
		break;
	case SV_INJ_FATAL:
		sv_inj_done[SV_INJ_FATAL]++;
		sv_qp_error(qp, IBV_EVENT_QP_FATAL);
		break;
	case SV_INJ_PORT:
		ret = inject_port(r, a);
		break;
	case SV_INJ_WIRE:
		ret = inject_wire(r, a);
		break;
	case SV_INJ_CLEAR:
		clear_all();
		break;
	default:
		break;
	}
	return ret;
}

/* The answer: what was injected, what is armed. */
static void inject_answer(const struct sv_cmd_inject *a,
			  struct sv_rsp_inject *o)
{
	if (a->kind != SV_INJ_QUERY)
		sv_log(SV_LOG_INFO, "inject: kind %u armed or done (qpn %#x, "
		       "pid %u, count %u)", a->kind, a->qpn, a->pid, a->count);
	memcpy(o->done, sv_inj_done, sizeof(o->done));
	o->armed = cmd_armed + sv_inj_wide;
	for (uint32_t i = 0; i < sizeof(sv_dev.qpn_tab) /
				 sizeof(sv_dev.qpn_tab[0]); i++)
		if (sv_dev.qpn_tab[i] && (sv_dev.qpn_tab[i]->inj_rnr ||
					  sv_dev.qpn_tab[i]->inj_access ||
					  sv_dev.qpn_tab[i]->inj_lose))
			o->armed++;
}

int sv_cmd_inject(struct sv_req *r)
{
	const struct sv_cmd_inject *a = &r->cmd->u.inject;
	struct sv_qp *qp;
	int ret;

	ret = inject_check(r, a, &qp);
	if (ret)
		return ret;
	if (!qp && (a->kind == SV_INJ_RNR || a->kind == SV_INJ_ACCESS ||
		    a->kind == SV_INJ_LOSE))
		ret = inject_wide(r, a);
	else if (!qp && a->kind == SV_INJ_FATAL)
		ret = inject_fatal_pid(r, a);
	else
		ret = inject_one(r, a, qp);
	if (ret)
		return ret;
	inject_answer(a, &r->rsp->u.inject);
	return 0;
}
