/* SPDX-License-Identifier: MIT */
#ifndef SV_TOOLS_TOOL_H
#define SV_TOOLS_TOOL_H

#include <stddef.h>

int sv_tool_sibling(const char *rel, char *buf, size_t len);
int sv_tool_devinfo(int argc, char **argv);
int sv_tool_stat(int argc, char **argv);
/* top.c */
int sv_tool_top(int argc, char **argv);
int sv_tool_serve(const char *addr);
/* inject.c */
int sv_tool_inject(int argc, char **argv);
/* why.c */
int sv_tool_why(int argc, char **argv);
/* nsview.c: softverbs run --ns: a user and mount namespace with the
 * view mounted at the kernel's paths; 0, or -errno (said on stderr) */
int sv_tool_ns_enter(void);
/* capture.c */
int sv_tool_capture(int argc, char **argv);

#endif
