/* SPDX-License-Identifier: MIT */
/*
 * Reaching the daemon, and the embedded default: when none answers, start
 * one (softverbsd --idle-exit) and wait for its socket. Shared by the
 * library (its first ibv_get_device_list) and the preload library (its
 * first look at the device view), so both start a daemon the same way.
 */
#ifndef SV_ABI_SPAWN_H
#define SV_ABI_SPAWN_H

#include <stdbool.h>

#define SV_CONNECT_TIMEOUT_MS 10000
#define SV_DEFAULT_IDLE_EXIT  "5"

/* Connect to the socket at path: the descriptor (close-on-exec) or -errno. */
int sv_sock_connect(const char *path);

/* May a daemon be started? Not when $SOFTVERBS_NO_AUTOSTART is set (and
 * not "0"). */
bool sv_autostart_allowed(void);

/*
 * Start a daemon for path, detached (no zombie, no SIGCHLD, none of the
 * caller's descriptors), and wait (until deadline_ms, CLOCK_MONOTONIC) for
 * its report on a pipe (softverbsd --ready-fd): 0 once it serves path (or
 * found another daemon serving it), else -errno, with the daemon's reason in
 * msg (a daemon that cannot serve path has exited by then: none is left
 * behind). -ETIMEDOUT: no report in time. A default per-user folder that
 * is not the user's (sv_sock_dir_check) starts nothing: -EPERM and why.
 */
int sv_spawn_daemon(const char *path, long deadline_ms, char *msg,
		    size_t msglen);

/*
 * A connection to the daemon at path. greet(fd, arg) runs on each new
 * connection: 0 keeps it; -ENOTCONN or -EIO (a daemon on its way out
 * closed on us) tries again; any other error fails. With autostart, a
 * daemon is started while none answers, for up to SV_CONNECT_TIMEOUT_MS.
 * The descriptor, or -errno. Fails at once, saying why on stderr, where
 * waiting cannot help: -EACCES when the device at path belongs to another
 * uid (the socket refuses us, or the daemon answers HELLO with -EACCES), or
 * the error of a started daemon that cannot serve path; -EPERM, before
 * anything is sent, when path lies in a default per-user folder that is not
 * the user's or its daemon runs as another uid (sv_sock_dir_check,
 * sv_sock_peer_check, checked before greet runs).
 */
int sv_daemon_open(const char *path, bool autostart,
		   int (*greet)(int fd, void *arg), void *arg);

#endif
