// SPDX-License-Identifier: MIT
/*
 * alloc_count.so: an LD_PRELOAD'able malloc interposer that counts every
 * malloc, calloc, realloc, posix_memalign, aligned_alloc (and memalign,
 * valloc, pvalloc, reallocarray) and every free of a non-NULL pointer, then
 * hands the call to glibc's own allocator (__libc_*: no dlsym, which would
 * itself allocate).
 *
 * With $SV_ALLOC_COUNT_DIR set, the counters live in a shared 4 KiB file
 * DIR/alloc.PID that another process can map and read (test_noalloc reads
 * the daemon's this way); a child made by fork() counts privately until it
 * execs (it is not the process that file names).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc_count.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static struct sv_alloc_counts private_counts = { .magic = SV_ALLOC_MAGIC };
static struct sv_alloc_counts *counts = &private_counts;

#define COUNT(field) __atomic_fetch_add(&counts->field, 1, __ATOMIC_RELAXED)

const volatile struct sv_alloc_counts *sv_alloc_counts(void)
{
	return counts;
}

static void after_fork_child(void)
{
	memset(&private_counts, 0, sizeof(private_counts));
	private_counts.magic = SV_ALLOC_MAGIC;
	private_counts.pid = (uint32_t)getpid();
	counts = &private_counts;
}

/* DIR/alloc.PID without snprintf (which may allocate). */
static size_t make_path(char *buf, size_t size, const char *dir, pid_t pid)
{
	static const char name[] = "/alloc.";
	char digits[16];
	size_t n = strlen(dir), k = 0;
	unsigned int p = (unsigned int)pid;

	do {
		digits[k++] = (char)('0' + p % 10);
		p /= 10;
	} while (p);
	if (n + sizeof(name) + k >= size)
		return 0;
	memcpy(buf, dir, n);
	memcpy(buf + n, name, sizeof(name) - 1);
	n += sizeof(name) - 1;
	while (k)
		buf[n++] = digits[--k];
	buf[n] = 0;
	return n;
}

__attribute__((constructor)) static void alloc_count_init(void)
{
	const char *dir = getenv("SV_ALLOC_COUNT_DIR");
	struct sv_alloc_counts *shared;
	char path[4096];
	int fd;

	private_counts.pid = (uint32_t)getpid();
	pthread_atfork(NULL, NULL, after_fork_child);
	if (!dir || !*dir || !make_path(path, sizeof(path), dir, getpid()))
		return;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (ftruncate(fd, 4096) == 0) {
		shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED,
			      fd, 0);
		if (shared != MAP_FAILED) {
			*shared = private_counts;
			counts = shared;
		}
	}
	close(fd);
}

void *malloc(size_t n)
{
	COUNT(malloc);
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	COUNT(calloc);
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	COUNT(realloc);
	return __libc_realloc(p, n);
}

void *reallocarray(void *p, size_t n, size_t size)
{
	size_t bytes;

	COUNT(realloc);
	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, bytes);
}

void free(void *p)
{
	if (p)
		COUNT(free);
	__libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	COUNT(memalign);
	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	p = __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
	COUNT(memalign);
	return __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
	COUNT(memalign);
	return __libc_memalign(align, n);
}

void *valloc(size_t n)
{
	COUNT(malloc);
	return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), n);
}

void *pvalloc(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	COUNT(malloc);
	return __libc_memalign(pg, n ? (n + pg - 1) & ~(pg - 1) : pg);
}
