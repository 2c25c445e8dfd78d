/* error.c - per-handle error messages.
 * SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "internal.h"

mla_status_t mla__fail(char *buf, mla_status_t status, const char *fmt, ...)
{
    if (buf) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, MLA_ERRMSG_LEN, fmt, ap);
        va_end(ap);
    }
    return status;
}

void mla__clear(char *buf)
{
    if (buf)
        buf[0] = '\0';
}
