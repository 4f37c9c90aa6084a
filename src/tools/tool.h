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
/* capture.c */
int sv_tool_capture(int argc, char **argv);

#endif
