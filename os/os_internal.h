/* os_internal.h — private to the os layer: which flavour of each service
 * this build takes (MILC_OS_PORTABLE forces the POSIX fallbacks). */
#ifndef MILC_OS_INTERNAL_H
#define MILC_OS_INTERNAL_H

#include "milc/ossys.h"

#if defined(MILC_OS_PORTABLE)
#define OS_LINUX 0
#define OS_MACOS 0
#elif defined(__linux__)
#define OS_LINUX 1
#define OS_MACOS 0
#elif defined(__APPLE__)
#define OS_LINUX 0
#define OS_MACOS 1
#else
#define OS_LINUX 0
#define OS_MACOS 0
#endif

#endif
