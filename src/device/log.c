// SPDX-License-Identifier: MIT
/* The daemon's log: one line per event, what it refused and why. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "device/sv_dev.h"

int sv_log_level = SV_LOG_INFO;
static int log_fd = STDERR_FILENO;

int sv_log_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	log_fd = fd;
	return 0;
}

void sv_log(int level, const char *fmt, ...)
{
	static const char *const lvl[] = { "error", "warn", "info", "debug" };
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, m;

	if (level > sv_log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld softverbsd[%d] %s: ",
		     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		     (int)getpid(), lvl[level]);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(log_fd, line, (size_t)n) < 0) {
		/* nowhere left to say it */
	}
}
