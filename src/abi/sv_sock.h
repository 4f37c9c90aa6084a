/* SPDX-License-Identifier: MIT */
/*
 * Where the control socket lives, and moving one fixed-size message with at
 * most one file descriptor over it. Shared by the library, the daemon and the
 * softverbs tool.
 */
#ifndef SV_ABI_SOCK_H
#define SV_ABI_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "abi/sv_cmd.h"

#define SV_SOCK_NAME "control"
#define SV_LOCK_SUFFIX ".lock"     /* the lock is the socket's path + this */
#define SV_LOG_NAME  "softverbsd.log"

/* The control socket's path: $SOFTVERBS_SOCKET, else
 * $XDG_RUNTIME_DIR/softverbs/control, else /run/softverbs/control for root,
 * else /tmp/softverbs-UID/control. 0 or -ENAMETOOLONG. */
int sv_sock_path(char *buf, size_t len);

/*
 * Whose folder holds the socket at path (docs/DESIGN.md, "The socket
 * folder"):
 *  - SV_SOCK_USER: a default per-user folder of this euid,
 *    /tmp/softverbs-EUID or $XDG_RUNTIME_DIR/softverbs (whoever named the
 *    path): it must be the user's own, and so must the daemon on it;
 *  - SV_SOCK_SYSTEM: /run/softverbs, the system daemon's;
 *  - SV_SOCK_NAMED: any other path, named by the user ($SOFTVERBS_SOCKET,
 *    --socket): its daemon may be of another uid (a shared daemon).
 */
enum sv_sock_kind { SV_SOCK_NAMED, SV_SOCK_USER, SV_SOCK_SYSTEM };
enum sv_sock_kind sv_sock_kind(const char *path);

/*
 * For a socket in a default per-user folder (SV_SOCK_USER): is that folder
 * the user's? It must be a folder, not a link, owned by the effective uid
 * and writable by no one else (not group- or other-writable), as ssh and
 * tmux ask of theirs. 0 when it is, or when path is of another kind; else
 * -errno and why in msg, naming the folder's owner and mode: -EPERM for a
 * folder that is not the user's, -ENOENT where there is none yet (the
 * daemon or the autostart makes it), or lstat's error.
 */
int sv_sock_dir_check(const char *path, char *msg, size_t len);

/*
 * Before anything is sent on fd, a connection to the socket at path: may
 * its daemon be talked to? On a socket of a default per-user folder
 * (SV_SOCK_USER) the daemon's uid (SO_PEERCRED) must be the user's own;
 * any uid serves a socket the user named or the system one. 0, or -EPERM
 * and why in msg, naming the daemon's uid and pid (or why its uid is not
 * known).
 */
int sv_sock_peer_check(int fd, const char *path, char *msg, size_t len);

/* The folder that holds path (the lock and log live beside the socket). */
int sv_sock_dir(const char *path, char *dir, size_t len);

/*
 * Path of a file that belongs to the socket at path and lies beside it:
 * DIR/name for the default socket name (DIR/control), DIR/BASE.name for any
 * other (DIR/BASE), so that two sockets in one folder share nothing (their
 * logs, device views and rdma_cm sockets).
 */
int sv_sock_sibling(const char *path, const char *name, char *buf, size_t len);

/* The lock a daemon holds for its whole life: PATH.lock (DIR/control.lock
 * for the default name). It holds the daemon's pid. One per socket. */
int sv_sock_lock_path(const char *path, char *buf, size_t len);

/* Send len bytes as one message, with fd attached when fd >= 0.
 * Returns 0 or -errno (-EAGAIN with MSG_DONTWAIT in flags). */
int sv_send_msg(int sock, const void *buf, size_t len, int fd, int flags);

/* Receive one message into buf. Returns its real length (which may exceed
 * len: the rest was discarded), 0 on EOF, or -errno. *fd receives an
 * attached descriptor or -1; any further descriptors are closed. */
ssize_t sv_recv_msg(int sock, void *buf, size_t len, int *fd, int flags);

/* One exchange: send cmd (with fd_in when >= 0), receive its response and
 * check that it is one (size, magic, seq, op). 0 and *status set to the
 * response's status (0 or -errno); *fd_out (if fd_out) receives an attached
 * descriptor on success only. -ENOTCONN when the daemon has gone, -EIO for
 * any other failure of the exchange itself. skip_stale: one response that
 * is not this command's (left by a process that died between its command
 * and its response, on a socket processes share) is dropped, not an error. */
int sv_call(int sock, const struct sv_cmd *cmd, int fd_in, struct sv_rsp *rsp,
	    int *status, int *fd_out, bool skip_stale);

/* A response received whole (its seq and op checked): *status its status
 * (0 or -errno; anything else -EIO), and the attached fd (or -1) to
 * *fd_out on success when fd_out is given, else closed. */
void sv_rsp_take(const struct sv_rsp *rsp, int fd, int *status, int *fd_out);

#endif
