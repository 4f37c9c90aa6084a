// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for RDMA netlink (src/device/nl: nl.c's request rules,
 * dumps and queue, nldev.c's commands): request datagrams as the preload
 * passes them (struct sv_nl_req on a connection's request socket), served
 * by sv_nl_input and sv_nl_output as evloop.c's loop serves them, on a
 * connection made as the preload makes one (a socket pair's end in the
 * hello). The device is fuzz_dev.c's.
 *
 * Input: records, each
 *   ctl (1)   bit 0 NETLINK_CAP_ACK, bit 1 NETLINK_EXT_ACK, bit 2 read
 *             every answer after this record (else they wait, and the
 *             daemon's queue and dumps continue later), bit 3 the
 *             record's magic is wrong (the connection must go)
 *   len (2)   little-endian; then len bytes: the netlink datagram
 * Every answer must be netlink messages that fill their datagram exactly,
 * each of a type the kernel would send (NLMSG_ERROR, NLMSG_DONE or an
 * NLDEV command's); at the end every dump must end, and the connection
 * close with nothing left.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "abi/sv_nl.h"
#include "abi/sv_sock.h"
#include "device/nl/nl.h"
#include "fuzz_dev.h"

static char dir[40], sock_path[64], nl_path[80];

static void cleanup(void)
{
	sv_nl_stop();
	rmdir(dir);
}

static void init(void)
{
	if (dir[0])
		return;
	fz_dev_init(false);
	snprintf(dir, sizeof(dir), "/tmp/fuzz-nl-XXXXXX");
	FZ_CHECK(mkdtemp(dir) != NULL);
	snprintf(sock_path, sizeof(sock_path), "%s/control", dir);
	snprintf(nl_path, sizeof(nl_path), "%s/%s", dir, SV_NL_SOCK_NAME);
	FZ_CHECK(sv_nl_start(sock_path) == 0);
	atexit(cleanup);
}

/* Every answer waiting on the program's end: well formed. */
static void drain(int fd)
{
	static uint8_t buf[65536];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		size_t at = 0;

		while (at < (size_t)n) {
			struct nlmsghdr h;

			FZ_CHECK((size_t)n - at >= NLMSG_HDRLEN);
			memcpy(&h, buf + at, sizeof(h));
			FZ_CHECK(h.nlmsg_len >= NLMSG_HDRLEN &&
				 h.nlmsg_len <= (size_t)n - at);
			FZ_CHECK(h.nlmsg_type == NLMSG_ERROR ||
				 h.nlmsg_type == NLMSG_DONE ||
				 (h.nlmsg_type >> 10) == RDMA_NL_NLDEV);
			at += NLMSG_ALIGN(h.nlmsg_len);
		}
		FZ_CHECK(at == NLMSG_ALIGN((size_t)n));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sv_nl_hello h = { SV_NL_MAGIC, SV_NL_VERSION };
	static uint8_t rec[SV_NL_REQ_HDR + SV_NL_MAX_REQ];
	struct sv_nl_conn *c;
	struct sv_nl_done done;
	int req, pair[2], fd = -1;
	bool alive = true;

	init();
	req = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	FZ_CHECK(req >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", nl_path);
	FZ_CHECK(connect(req, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	FZ_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
	c = sv_nl_accept();
	FZ_CHECK(c != NULL);
	FZ_CHECK(sv_send_msg(req, &h, sizeof(h), pair[1], 0) == 0);
	close(pair[1]);
	FZ_CHECK(sv_nl_input(c));
	FZ_CHECK(sv_recv_msg(req, &h, sizeof(h), &fd, 0) == sizeof(h));
	FZ_CHECK(h.magic == SV_NL_MAGIC);

	while (alive && size >= 3) {
		uint8_t ctl = data[0];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;
		struct sv_nl_req q = { .magic = SV_NL_MAGIC, .portid = 4242 };

		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		if (len > SV_NL_MAX_REQ)
			len = SV_NL_MAX_REQ;
		q.flags = (ctl & 1 ? SV_NL_F_CAP_ACK : 0) |
			  (ctl & 2 ? SV_NL_F_EXT_ACK : 0);
		q.len = (uint32_t)len;
		if (ctl & 8)
			q.magic ^= 1;
		memcpy(rec, &q, sizeof(q));
		memcpy(rec + SV_NL_REQ_HDR, data, len);
		data += len;
		size -= len;
		FZ_CHECK(send(req, rec, SV_NL_REQ_HDR + len, 0) ==
			 (ssize_t)(SV_NL_REQ_HDR + len));
		alive = sv_nl_input(c);
		if (ctl & 8) {
			FZ_CHECK(!alive);
			break;
		}
		if (!alive)
			break;     /* a program that never reads: dropped */
		FZ_CHECK(recv(req, &done, sizeof(done), MSG_DONTWAIT) == sizeof(done));
		FZ_CHECK(done.magic == SV_NL_MAGIC && done.ret == 0);
		if (ctl & 4) {
			drain(pair[0]);
			alive = sv_nl_output(c);
			FZ_CHECK(alive);
		}
	}
	/* read everything: every dump ends */
	for (int i = 0; alive && sv_nl_wants_out(c); i++) {
		FZ_CHECK(i < 100000);
		drain(pair[0]);
		alive = sv_nl_output(c);
		FZ_CHECK(alive);
	}
	drain(pair[0]);
	sv_nl_close(c);
	FZ_CHECK(sv_nl_nconns() == 0);
	close(pair[0]);
	close(req);
	if (fd >= 0)
		close(fd);
	return 0;
}
