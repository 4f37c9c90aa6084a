// SPDX-License-Identifier: MIT
/*
 * The bottom two layers of the engine (engine.h): pure helpers with no
 * device state (timer tables, range checks, the GRH builder, the
 * scatter/gather walker) and memory access (sv_mem_copy: bytes between
 * iovec lists of any two processes through a bounce buffer), plus the
 * clock and the wait on another engine's sequence word. Nothing here knows
 * a device object; WQE execution (exec_int.h) is built on top.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "abi/sv_cpu.h"
#include "device/exec/engine.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

/* ================= pure helpers ================= */

uint64_t sv_rnr_timer_ns(uint8_t code)
{
	/* IBA table 45, in units of 10 us */
	static const uint32_t t10us[32] = {
		65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
		256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192,
		12288, 16384, 24576, 32768, 49152,
	};

	return (uint64_t)t10us[code & 31] * 10000u;
}

uint64_t sv_ack_timeout_ns(uint8_t timeout)
{
	if (timeout == 0)
		return UINT64_MAX;
	if (timeout > 31)
		timeout = 31;
	return 4096ull << timeout;
}

uint32_t sv_mtu_bytes(uint32_t mtu)
{
	if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096)
		return 0;
	return 256u << (mtu - IBV_MTU_256);
}

bool sv_range_ok(uint64_t base, uint64_t size, uint64_t addr, uint64_t len)
{
	if (addr < base || len > size)
		return false;
	return addr - base <= size - len;
}

uint16_t sv_ip_csum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t sum = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)b[i] << 8 | b[i + 1];
	if (len & 1)
		sum += (uint32_t)b[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

bool sv_gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					    0xff, 0xff };

	return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void sv_grh_build(uint8_t out[SV_GRH_BYTES], const uint8_t sgid[16],
		  const uint8_t dgid[16], uint8_t traffic_class,
		  uint32_t flow_label, uint8_t hop_limit, uint32_t payload,
		  bool imm)
{
	/* what follows the network header on the wire: UDP, BTH, DETH,
	 * ImmDt, the payload, ICRC */
	uint32_t l4 = 8 + 12 + 8 + (imm ? 4 : 0) + payload + 4;
	uint8_t hop = hop_limit ? hop_limit : 64;

	memset(out, 0, SV_GRH_BYTES);
	if (l4 > 0xffff - 20)
		l4 = 0xffff - 20;       /* cannot happen below the MTU */
	if (sv_gid_is_v4(sgid)) {
		uint8_t *ip = out + 20;

		ip[0] = 0x45;                   /* version 4, 5 words */
		ip[1] = traffic_class;
		put16(ip + 2, 20 + l4);
		/* id 0; flags: don't fragment */
		ip[6] = 0x40;
		ip[8] = hop;
		ip[9] = 17;                     /* UDP */
		memcpy(ip + 12, sgid + 12, 4);
		memcpy(ip + 16, dgid + 12, 4);
		put16(ip + 10, sv_ip_csum(ip, 20));
		return;
	}
	out[0] = (uint8_t)(0x60 | traffic_class >> 4);
	out[1] = (uint8_t)(traffic_class << 4 | ((flow_label >> 16) & 0xf));
	put16(out + 2, flow_label & 0xffff);
	put16(out + 4, l4);
	out[6] = 17;                            /* RoCEv2: UDP */
	out[7] = hop;
	memcpy(out + 8, sgid, 16);
	memcpy(out + 24, dgid, 16);
}

uint8_t sv_grh_wc_sl(const uint8_t sgid[16])
{
	return sv_gid_is_v4(sgid) ? SV_WC_SL_ROCEV2_IPV4 : SV_WC_SL_ROCEV2_IPV6;
}

bool sv_iov_seek(const struct iovec *iov, unsigned int n,
		 struct sv_iov_cur *cur, uint64_t off)
{
	while (off) {
		size_t left;

		if (cur->idx >= n)
			return false;
		left = iov[cur->idx].iov_len - cur->off;
		if (off < left) {
			cur->off += off;
			return true;
		}
		off -= left;
		cur->idx++;
		cur->off = 0;
	}
	return true;
}

size_t sv_iov_take(const struct iovec *iov, unsigned int n,
		   struct sv_iov_cur *cur, size_t max, struct iovec *out,
		   unsigned int outmax, unsigned int *nout)
{
	size_t got = 0;
	unsigned int k = 0;

	while (got < max && k < outmax && cur->idx < n) {
		size_t left = iov[cur->idx].iov_len - cur->off;
		size_t take = left < max - got ? left : max - got;

		if (!take) {            /* an empty or finished piece */
			cur->idx++;
			cur->off = 0;
			continue;
		}
		out[k].iov_base = (char *)iov[cur->idx].iov_base + cur->off;
		out[k].iov_len = take;
		k++;
		got += take;
		cur->off += take;
		if (cur->off == iov[cur->idx].iov_len) {
			cur->idx++;
			cur->off = 0;
		}
	}
	*nout = k;
	return got;
}

/* ================= memory access ================= */


/* Move len bytes between buf (this process) and the memory at cur of m:
 * into buf, or out of it when write. false on any failure. Inlined into
 * each caller, where write is a constant. */
static inline __attribute__((always_inline)) bool
mem_xfer(const struct sv_mem *m, struct sv_iov_cur *cur, void *buf, size_t len,
	 bool write)
{
	struct iovec win[SV_IOV_WINDOW];
	size_t done = 0;

	while (done < len) {
		unsigned int k;
		size_t n = sv_iov_take(m->iov, m->niov, cur, len - done, win,
				       SV_IOV_WINDOW, &k);
		struct iovec local = { (char *)buf + done, n };
		ssize_t r;

		if (!n)
			return false;   /* the list ran out */
		if (m->pid == 0) {
			for (unsigned int i = 0; i < k; i++) {
				char *b = (char *)buf + done;

				if (write)
					memcpy(win[i].iov_base, b,
					       win[i].iov_len);
				else
					memcpy(b, win[i].iov_base,
					       win[i].iov_len);
				done += win[i].iov_len;
			}
			continue;
		}
		r = write ? process_vm_writev(m->pid, &local, 1, win, k, 0)
			  : process_vm_readv(m->pid, &local, 1, win, k, 0);
		if (r < 0 || (size_t)r != n)
			return false;
		done += n;
	}
	return true;
}

/* One side in this process, the other in another: no bounce, one
 * process_vm_readv or _writev per window of iovecs. */
static int mem_direct(const struct sv_mem *dst, struct sv_iov_cur dc,
		      const struct sv_mem *src, struct sv_iov_cur sc,
		      uint64_t len)
{
	struct iovec ws[SV_IOV_WINDOW], wd[SV_IOV_WINDOW];

	while (len) {
		struct sv_iov_cur sc0 = sc;
		unsigned int ks, kd;
		size_t ns = sv_iov_take(src->iov, src->niov, &sc, len, ws,
					SV_IOV_WINDOW, &ks);
		size_t nd = sv_iov_take(dst->iov, dst->niov, &dc, ns, wd,
					SV_IOV_WINDOW, &kd);
		ssize_t r;

		if (!ns)
			return SV_COPY_SRC_FAULT;
		if (!nd)
			return SV_COPY_DST_FAULT;
		if (nd < ns) {
			/* the destination's window ends first: as much of
			 * the source (it held nd bytes already) */
			sc = sc0;
			ns = sv_iov_take(src->iov, src->niov, &sc, nd, ws,
					 SV_IOV_WINDOW, &ks);
		}
		if (dst->pid == 0) {
			r = process_vm_readv(src->pid, wd, kd, ws, ks, 0);
			if (r < 0 || (size_t)r != nd)
				return SV_COPY_SRC_FAULT;
		} else {
			r = process_vm_writev(dst->pid, ws, ks, wd, kd, 0);
			if (r < 0 || (size_t)r != nd)
				return SV_COPY_DST_FAULT;
		}
		len -= nd;
	}
	return SV_COPY_OK;
}

int sv_mem_copy(const struct sv_mem *dst, uint64_t dst_off,
		const struct sv_mem *src, uint64_t src_off, uint64_t len,
		void *bounce, size_t bounce_bytes)
{
	struct sv_iov_cur sc = { 0, 0 }, dc = { 0, 0 };

	if (!len)
		return SV_COPY_OK;
	if (!sv_iov_seek(src->iov, src->niov, &sc, src_off))
		return SV_COPY_SRC_FAULT;
	if (!sv_iov_seek(dst->iov, dst->niov, &dc, dst_off))
		return SV_COPY_DST_FAULT;
	if ((dst->pid == 0) != (src->pid == 0))
		return mem_direct(dst, dc, src, sc, len);
	while (len) {
		size_t chunk = len < bounce_bytes ? (size_t)len : bounce_bytes;

		if (!mem_xfer(src, &sc, bounce, chunk, false))
			return SV_COPY_SRC_FAULT;
		if (!mem_xfer(dst, &dc, bounce, chunk, true))
			return SV_COPY_DST_FAULT;
		len -= chunk;
	}
	return SV_COPY_OK;
}

void sv_seq_wait(const uint32_t *seq, uint32_t seen)
{
	unsigned int spins = 0;

	/* the work ends by itself (bytes between two processes): nothing it
	 * waits for is the waiter's */
	while (__atomic_load_n(seq, __ATOMIC_ACQUIRE) == seen) {
		if (++spins < 64)
			sv_cpu_relax();
		else
			sched_yield();
	}
}

uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool sv_proc_gone(pid_t pid, int pidfd)
{
	struct iovec l, r = { .iov_base = NULL, .iov_len = 1 };
	struct pollfd p;
	char b;

	if (pidfd >= 0) {
		p.fd = pidfd;
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, 0) == 1)
			return true;
	} else if (kill(pid, 0) < 0 && errno == ESRCH) {
		return true;
	}
	/*
	 * A killed process gives up its memory (exit_mm) before the pidfd
	 * says it exited (exit_notify): in between, its copies fail and a
	 * process_vm_readv of it fails ESRCH (no mm), where a live process's
	 * fails EFAULT (address 0).
	 */
	l.iov_base = &b;
	l.iov_len = 1;
	return process_vm_readv(pid, &l, 1, &r, 1, 0) < 0 && errno == ESRCH;
}
