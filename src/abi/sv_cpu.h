/* SPDX-License-Identifier: MIT */
/*
 * A spin-wait hint for the busy loops of the library and the daemon.
 */
#ifndef SV_ABI_CPU_H
#define SV_ABI_CPU_H

static inline void sv_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif
