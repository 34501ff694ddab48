/* file.c — opening outside paths without blocking or following what we must
 * not follow, and reading files others may change with pread, so truncation
 * under us is an error instead of a SIGBUS. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_impl.h"
#include "milc/osfile.h"

int os_errf(char *err, size_t errlen, int rc, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *os_kind(mode_t mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    return "not a file";
}

static const char *wanted(int want) {
    return want == OS_DIR ? "a directory" : want == OS_REG ? "a regular file" : "a regular file or directory";
}

/* After an O_NONBLOCK open: the file is what was asked for, and reads block
 * again (O_NONBLOCK only kept the open from waiting). */
int os_fd_check(int fd, const char *shown, int want, char *err, size_t errlen) {
    struct stat st;
    if (fstat(fd, &st) != 0) return os_errf(err, errlen, -errno, "cannot stat %s: %s", shown, strerror(errno));
    int ok = ((want & OS_REG) && S_ISREG(st.st_mode)) || ((want & OS_DIR) && S_ISDIR(st.st_mode));
    if (!ok) return os_errf(err, errlen, -EINVAL, "%s is %s, not %s", shown, os_kind(st.st_mode), wanted(want));
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return 0;
}

int os_open_input(const char *path, int want, int *fd, char *err, size_t errlen) {
    *fd = -1;
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (want == OS_DIR ? O_DIRECTORY : 0));
    if (f < 0) return os_errf(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
    int rc = os_fd_check(f, path, want, err, errlen);
    if (rc) {
        close(f);
        return rc;
    }
    *fd = f;
    return 0;
}

int os_read_fd(int fd, const char *shown, size_t max, void **buf, size_t *len, char *err, size_t errlen) {
    *buf = NULL, *len = 0;
    struct stat st;
    if (fstat(fd, &st) != 0) return os_errf(err, errlen, -errno, "cannot stat %s: %s", shown, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return os_errf(err, errlen, -EINVAL, "%s is %s, not a regular file", shown, os_kind(st.st_mode));
    size_t n = (size_t)st.st_size;
    if ((max && n > max) || (uint64_t)st.st_size >= SIZE_MAX - 64)
        return os_errf(err, errlen, -EFBIG, "%s is too large (%llu bytes)", shown, (unsigned long long)st.st_size);
    uint8_t *b = aligned_alloc(64, (n + 64) & ~(size_t)63);
    if (!b) return os_errf(err, errlen, -ENOMEM, "out of memory reading %s (%zu bytes)", shown, n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, b + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            free(b);
            if (!e) return os_errf(err, errlen, -EIO, "%s changed while being read (it shrank)", shown);
            return os_errf(err, errlen, -e, "cannot read %s: %s", shown, strerror(e));
        }
        got += (size_t)r;
    }
    /* A file that grew meanwhile is being written: what we hold may be torn. */
    if (fstat(fd, &st) == 0 && (size_t)st.st_size != n) {
        free(b);
        return os_errf(err, errlen, -EIO, "%s changed while being read", shown);
    }
    b[n] = 0;
    *buf = b, *len = n;
    return 0;
}

int os_read_file(const char *path, size_t max, void **buf, size_t *len, char *err, size_t errlen) {
    int fd;
    *buf = NULL, *len = 0;
    int rc = os_open_input(path, OS_REG, &fd, err, errlen);
    if (rc) return rc;
    rc = os_read_fd(fd, path, max, buf, len, err, errlen);
    close(fd);
    return rc;
}

int os_mkdir_real(const char *path, mode_t mode, char *err, size_t errlen) {
    if (mkdir(path, mode) == 0) return 0;
    if (errno != EEXIST) return os_errf(err, errlen, -errno, "cannot create directory %s: %s", path, strerror(errno));
    struct stat st;
    if (lstat(path, &st) != 0) return os_errf(err, errlen, -errno, "cannot stat %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return os_errf(err, errlen, -EEXIST, "%s is %s, not a directory (milc does not write through links)", path,
                       os_kind(st.st_mode));
    return 0;
}
