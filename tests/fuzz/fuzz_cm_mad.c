// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the CM's wire format (src/device/cm/mad.c): the
 * bytes are tried as a MAD, as a RoCEv2 datagram to QP1 (whose MAD is then
 * tried too) and as the RDMA CM header. Nothing may crash or read outside
 * the input (ASan, UBSan), and what decodes must survive the round trip:
 * encode gives bytes that decode, strictly, to the same struct, and encode
 * again to the same bytes; input that decodes strictly is exactly what
 * encode writes. A broken property aborts, which libFuzzer reports as a
 * crash.
 *
 * The same file, with replay.c instead of libFuzzer, replays the seed
 * corpus in every build (ctest fuzz_cm_mad_seeds).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cm/mad.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { \
		if (!(cond)) { \
			fprintf(stderr, "fuzz_cm_mad: %s:%d: %s\n", \
				__FILE__, __LINE__, #cond); \
			abort(); \
		} \
	} while (0)

static void check_cma(const uint8_t *priv, size_t len)
{
	struct sv_cma_hdr h, g;
	uint8_t b[SV_CMA_HDR_BYTES];

	if (sv_cma_hdr_parse(priv, len, &h) != 0)
		return;
	CHECK(h.ip_version == 4 || h.ip_version == 6);
	CHECK(sv_cma_hdr_build(b, &h) == 0);
	CHECK(sv_cma_hdr_parse(b, sizeof(b), &g) == 0);
	CHECK(memcmp(&h, &g, sizeof(h)) == 0);
}

static void check_mad(const uint8_t *buf, size_t len)
{
	struct sv_cm_mad m, d;
	uint8_t e[SV_MAD_BYTES], e2[SV_MAD_BYTES];
	const struct sv_cm_attrinfo *a;
	int ret = sv_cm_decode(buf, len, 0, &m);

	CHECK(ret <= 0 && ret > -SV_CM_E_COUNT);
	CHECK(sv_cm_strerror(ret) != NULL);
	if (ret != 0) {
		CHECK(sv_cm_decode(buf, len, SV_CM_DECODE_STRICT, &d) != 0);
		return;
	}
	a = sv_cm_attr(m.attr_id);
	CHECK(a != NULL);
	CHECK(sv_cm_encode(&m, e) == 0);
	memset(&d, 0xa5, sizeof(d));
	CHECK(sv_cm_decode(e, sizeof(e), SV_CM_DECODE_STRICT, &d) == 0);
	CHECK(memcmp(&m, &d, sizeof(m)) == 0);
	CHECK(sv_cm_encode(&d, e2) == 0);
	CHECK(memcmp(e, e2, sizeof(e)) == 0);
	if (sv_cm_decode(buf, len, SV_CM_DECODE_STRICT, &d) == 0)
		CHECK(memcmp(buf, e, sizeof(e)) == 0);
	else
		CHECK(memcmp(buf, e, sizeof(e)) != 0);

	switch (m.attr_id) {
	case SV_CM_ATTR_REQ:
		check_cma(m.req.private_data, sizeof(m.req.private_data));
		break;
	case SV_CM_ATTR_SIDR_REQ:
		check_cma(m.sidr_req.private_data,
			  sizeof(m.sidr_req.private_data));
		break;
	case SV_CM_ATTR_REJ:
		CHECK(m.rej.reject_info_length <= SV_CM_REJ_ARI);
		(void)sv_cm_rej_reason_name(m.rej.reason);
		break;
	default:
		break;
	}
}

/* The addresses the seed datagrams were built for (test_cm_mad). */
static void seed_ip(struct sv_roce_ip *ip)
{
	static const uint8_t src[16] = { [10] = 0xff, [11] = 0xff,
					 10, 77, 0, 12 };
	static const uint8_t dst[16] = { [10] = 0xff, [11] = 0xff,
					 10, 77, 0, 11 };

	memset(ip, 0, sizeof(*ip));
	memcpy(ip->src, src, 16);
	memcpy(ip->dst, dst, 16);
	ip->sport = sv_roce_sport(SV_GSI_QPN, SV_GSI_QPN);
	ip->dport = SV_ROCE_PORT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sv_roce_ip ip;
	struct sv_roce_pkt p;
	const uint8_t *mad;
	int ret;

	check_mad(data, size);
	check_cma(data, size);

	seed_ip(&ip);
	ret = sv_cm_dgram_parse(data, size, &ip, &p, &mad);
	CHECK(ret == 0 || ret == -EINVAL || ret == -EBADMSG);
	if (ret == -EBADMSG)
		ret = sv_cm_dgram_parse(data, size, NULL, &p, &mad);
	if (ret == 0) {
		CHECK(mad >= data && mad + SV_MAD_BYTES <= data + size);
		CHECK(p.dqpn == SV_GSI_QPN && p.qkey == SV_GSI_QKEY);
		check_mad(mad, SV_MAD_BYTES);
	}
	return 0;
}
