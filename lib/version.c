/* version.c - run-time version and build information.
 * SPDX-License-Identifier: MIT */
#include "config.h"

#include "internal.h"

#ifndef MLA_CUDA_VERSION_STRING
#define MLA_CUDA_VERSION_STRING "none"
#endif
#ifndef MLA_CUDA_ARCHS_STRING
#define MLA_CUDA_ARCHS_STRING ""
#endif
#ifdef MLA_HAVE_CUDA
#define MLA_BACKENDS "cpu,cuda"
#else
#define MLA_BACKENDS "cpu"
#endif

#ifdef MLA_KERNEL_TRACE
#define MLA_TRACE_INFO " trace"
#else
#define MLA_TRACE_INFO ""
#endif

unsigned mla_version_number(void)
{
    return MLA_VERSION_NUMBER;
}

const char *mla_version_string(void)
{
    return MLA_VERSION_STRING;
}

const char *mla_build_info(void)
{
    return "version=" MLA_VERSION_STRING " cuda=" MLA_CUDA_VERSION_STRING
           " archs=" MLA_CUDA_ARCHS_STRING " backends=" MLA_BACKENDS MLA_TRACE_INFO;
}
