/* file_impl.h — what the os module's files share and nobody else sees. */
#ifndef MILC_OS_FILE_IMPL_H
#define MILC_OS_FILE_IMPL_H

#include <stddef.h>

/* snprintf into err (NULL-safe); returns rc. */
int os_errf(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* fstat-check an O_NONBLOCK descriptor against want and make it blocking. */
int os_fd_check(int fd, const char *shown, int want, char *err, size_t errlen);

#endif
