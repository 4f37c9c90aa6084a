// SPDX-License-Identifier: MIT
/*
 * The daemon's log: one line per event, what it refused and why.
 *
 * Bounded, because every refusal writes a line and a client decides how many
 * refusals it earns:
 *  - rate: each kind of message (its format, and for sv_log_client its
 *    client and kind) has a token bucket (SV_LOG_KEY_* lines, or
 *    SV_LOG_CLIENT_* for a client's), and all of them share one of
 *    SV_LOG_ALL_BURST refilled at SV_LOG_ALL_RATE; what neither lets through
 *    is counted, and the count is written as "N similar messages
 *    suppressed" before the next line of that kind or within a second or so
 *    (sv_log_tick);
 *  - first of a kind: the first line of each kind (format and kind, whoever
 *    the client) is always written, whatever the buckets hold, so the reason
 *    of the first refusal of each kind is never lost;
 *  - size: a log file past its cap (--log-max-bytes) is renamed FILE.1
 *    (only a regular file: a log at /dev/null or on a pipe is left as it is)
 *    (replacing the previous one) and a new FILE begun: at most twice the
 *    cap on disk.
 * Engine and wire threads log too: one mutex, a leaf, guards all of it.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "device/sv_dev.h"

/* a kind of the device's own (sv_log): generous, tests wait for them */
#define SV_LOG_KEY_BURST 50u
#define SV_LOG_KEY_RATE  20u      /* lines a second, per kind */
/* a kind about one client (sv_log_client): what a client can provoke */
#define SV_LOG_CLIENT_BURST 10u
#define SV_LOG_CLIENT_RATE  2u
#define SV_LOG_ALL_BURST 500u
#define SV_LOG_ALL_RATE  100u     /* lines a second, all kinds */
#define SV_LOG_KEYS      512u     /* rate buckets (direct-mapped) */
#define SV_LOG_SEEN      1024u    /* kinds seen (direct-mapped) */
#define SV_LOG_MIN_CAP   4096ull

int sv_log_level = SV_LOG_INFO;
uint64_t sv_log_max_bytes = SV_LOG_DEFAULT_MAX_BYTES;

struct bucket {
	const char *fmt;           /* NULL: free */
	const void *kind;
	uint64_t client;
	double tokens;
	uint64_t last_ns;          /* last refill */
	uint64_t suppressed;       /* not yet reported */
	uint64_t since_ns;         /* first suppression not yet reported */
};

static struct {
	pthread_mutex_t lock;
	int fd;
	char path[512];            /* "" when logging to stderr */
	uint64_t size;             /* bytes in the current file */
	bool stderr_is_log;        /* stderr was opened on the same file */
	bool rotatable;            /* a regular file: FILE.1 when full */
	struct bucket all;
	struct bucket keys[SV_LOG_KEYS];
	struct {
		const char *fmt;
		const void *kind;
	} seen[SV_LOG_SEEN];
	uint64_t pending;          /* buckets with suppressed > 0 */
	uint64_t total_suppressed; /* since start, for tests and stat */
} lg = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = STDERR_FILENO,
	 .all = { .tokens = SV_LOG_ALL_BURST } };

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;

	return !fstat(a, &sa) && !fstat(b, &sb) && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int sv_log_open(const char *path)
{
	/* never through a link: in a folder another user could write, it
	 * would point the daemon's lines at a file of the user's choosing */
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
		      O_CLOEXEC, 0600);
	struct stat st;

	if (fd < 0)
		return -1;
	pthread_mutex_lock(&lg.lock);
	lg.fd = fd;
	snprintf(lg.path, sizeof(lg.path), "%s", path);
	lg.size = fstat(fd, &st) ? 0 : (uint64_t)st.st_size;
	/* only a regular file is rotated: never rename a device (a log at
	 * /dev/null, as the fuzz targets keep theirs) or a pipe */
	lg.rotatable = !fstat(fd, &st) && S_ISREG(st.st_mode);
	/* the spawner points the daemon's stderr at its log: keep them one */
	lg.stderr_is_log = same_file(fd, STDERR_FILENO);
	pthread_mutex_unlock(&lg.lock);
	return 0;
}

/* FILE -> FILE.1, a new FILE (lock held). On any failure the old file
 * stays and is truncated instead: the cap holds either way. */
static void rotate(void)
{
	char old[sizeof(lg.path) + 4];
	int fd;

	snprintf(old, sizeof(old), "%s.1", lg.path);
	if (rename(lg.path, old) == 0) {
		/* a new file of our own: whatever took the name in between
		 * (a link) is not opened */
		fd = open(lg.path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND |
			  O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			if (lg.stderr_is_log)
				dup2(fd, STDERR_FILENO);
			close(lg.fd);
			lg.fd = fd;
			lg.size = 0;
			return;
		}
	}
	if (ftruncate(lg.fd, 0) == 0)
		lg.size = 0;
}

/* Write one line (lock held), rotating first if it would pass the cap. */
static void put(const char *line, size_t n)
{
	uint64_t cap = sv_log_max_bytes;

	if (lg.path[0] && cap && lg.rotatable) {
		if (cap < SV_LOG_MIN_CAP)
			cap = SV_LOG_MIN_CAP;
		if (lg.size + n > cap)
			rotate();
	}
	if (write(lg.fd, line, n) > 0)
		lg.size += n;
}

/* "HH:MM:SS.mmm softverbsd[PID] LEVEL: " into line: its length. */
static int prefix(char *line, size_t len, int level)
{
	static const char *const lvl[] = { "error", "warn", "info", "debug" };
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	return snprintf(line, len, "%02d:%02d:%02d.%03ld softverbsd[%d] %s: ",
			tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			(int)getpid(), lvl[level]);
}

/* Report b's suppressed count, if any (lock held). */
static void report(struct bucket *b)
{
	char line[512];
	int n;

	if (!b->suppressed)
		return;
	n = prefix(line, sizeof(line), SV_LOG_WARN);
	if (b->client)
		n += snprintf(line + n, sizeof(line) - (size_t)n - 1,
			      "client %llu: ", (unsigned long long)b->client);
	n += snprintf(line + n, sizeof(line) - (size_t)n - 1,
		      "%llu similar messages suppressed (\"%.120s\")",
		      (unsigned long long)b->suppressed, b->fmt);
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	put(line, (size_t)n);
	b->suppressed = 0;
	lg.pending--;
}

static void refill(struct bucket *b, uint64_t now, double rate, double burst)
{
	b->tokens += (double)(now - b->last_ns) * rate / 1e9;
	if (b->tokens > burst)
		b->tokens = burst;
	b->last_ns = now;
}

static size_t hash(const char *fmt, const void *kind, uint64_t client)
{
	uint64_t h = (uint64_t)(uintptr_t)fmt * 0x9e3779b97f4a7c15ull;

	h ^= (uint64_t)(uintptr_t)kind * 0xc2b2ae3d27d4eb4full;
	h ^= client * 0x165667b19e3779f9ull;
	return (size_t)(h ^ (h >> 29));
}

/* Is this the first line of its kind? (lock held) */
static bool first_of_kind(const char *fmt, const void *kind)
{
	size_t i = hash(fmt, kind, 0) % SV_LOG_SEEN;

	if (lg.seen[i].fmt == fmt && lg.seen[i].kind == kind)
		return false;
	lg.seen[i].fmt = fmt;
	lg.seen[i].kind = kind;
	return true;
}

/* May a line of this kind go out now? Counts it when not (lock held). */
static bool admit(const char *fmt, const void *kind, uint64_t client,
		  uint64_t now)
{
	struct bucket *b = &lg.keys[hash(fmt, kind, client) % SV_LOG_KEYS];
	bool first = first_of_kind(fmt, kind);

	if (b->fmt != fmt || b->kind != kind || b->client != client) {
		report(b); /* the slot's previous kind: its count first */
		*b = (struct bucket){ .fmt = fmt, .kind = kind, .client = client,
				      .tokens = client ? SV_LOG_CLIENT_BURST :
							 SV_LOG_KEY_BURST,
				      .last_ns = now };
	}
	if (client)
		refill(b, now, SV_LOG_CLIENT_RATE, SV_LOG_CLIENT_BURST);
	else
		refill(b, now, SV_LOG_KEY_RATE, SV_LOG_KEY_BURST);
	refill(&lg.all, now, SV_LOG_ALL_RATE, SV_LOG_ALL_BURST);
	if (first || (b->tokens >= 1.0 && lg.all.tokens >= 1.0)) {
		if (b->tokens >= 1.0)
			b->tokens -= 1.0;
		if (lg.all.tokens >= 1.0)
			lg.all.tokens -= 1.0;
		report(b);
		return true;
	}
	if (!b->suppressed++) {
		lg.pending++;
		b->since_ns = now;
	}
	lg.total_suppressed++;
	return false;
}

static void vlog(const struct sv_client *c, const void *kind, int level,
		 const char *fmt, va_list ap)
{
	char line[1024];
	int n, m;

	if (level > sv_log_level)
		return;
	pthread_mutex_lock(&lg.lock);
	if (!admit(fmt, kind, c ? c->id : 0, mono_ns())) {
		pthread_mutex_unlock(&lg.lock);
		return;
	}
	n = prefix(line, sizeof(line), level);
	if (c)
		n += snprintf(line + n, sizeof(line) - (size_t)n - 1,
			      "client %llu (pid %d): ",
			      (unsigned long long)c->id, (int)c->pid);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	put(line, (size_t)n);
	pthread_mutex_unlock(&lg.lock);
}

void sv_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(NULL, NULL, level, fmt, ap);
	va_end(ap);
}

void sv_log_client(const struct sv_client *c, const void *kind, int level,
		   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(c, kind, level, fmt, ap);
	va_end(ap);
}

bool sv_log_tick(void)
{
	uint64_t now = mono_ns();
	bool left;

	pthread_mutex_lock(&lg.lock);
	for (size_t i = 0; lg.pending && i < SV_LOG_KEYS; i++)
		if (lg.keys[i].suppressed &&
		    now - lg.keys[i].since_ns >= 1000000000ull)
			report(&lg.keys[i]);
	left = lg.pending != 0;
	pthread_mutex_unlock(&lg.lock);
	return left;
}

void sv_log_flush(void)
{
	pthread_mutex_lock(&lg.lock);
	for (size_t i = 0; lg.pending && i < SV_LOG_KEYS; i++)
		report(&lg.keys[i]);
	pthread_mutex_unlock(&lg.lock);
}

uint64_t sv_log_suppressed(void)
{
	uint64_t n;

	pthread_mutex_lock(&lg.lock);
	n = lg.total_suppressed;
	pthread_mutex_unlock(&lg.lock);
	return n;
}
