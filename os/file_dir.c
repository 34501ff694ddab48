/* file_dir.c — directories milc keeps its own files in (the cache): owned by
 * the user and writable by nobody else, and nothing in them followed. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_impl.h"
#include "milc/osfile.h"

int os_dir_check_private(int dirfd, const char *shown, char *err, size_t errlen) {
    struct stat st;
    if (fstat(dirfd, &st) != 0) return os_errf(err, errlen, -errno, "cannot stat %s: %s", shown, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return os_errf(err, errlen, -ENOTDIR, "%s is %s, not a directory", shown, os_kind(st.st_mode));
    if (st.st_uid != geteuid())
        return os_errf(err, errlen, -EPERM,
                       "directory %s is owned by uid %u, not by you (uid %u): its owner could make milc overwrite "
                       "your files; use a directory of your own (--cache-dir DIR)",
                       shown, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return os_errf(err, errlen, -EPERM,
                       "directory %s is writable by %s (mode %04o): they could make milc overwrite your files; "
                       "run `chmod go-w %s` or use another directory",
                       shown, (st.st_mode & S_IWOTH) ? "other users" : "its group", (unsigned)(st.st_mode & 07777),
                       shown);
    return 0;
}

/* mkdir -p with mode 0700 for what is created. */
static int mkdirs(const char *path, char *err, size_t errlen) {
    char *p = strdup(path);
    if (!p) return os_errf(err, errlen, -ENOMEM, "out of memory");
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char save = *s;
        *s = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            os_errf(err, errlen, -e, "cannot create directory %s: %s", p, strerror(e));
            free(p);
            return -e;
        }
        *s = save;
        if (!save) break;
    }
    free(p);
    return 0;
}

int os_dir_open_private(const char *path, int *dirfd, char *err, size_t errlen) {
    *dirfd = -1;
    int rc = mkdirs(path, err, errlen);
    if (rc) return rc;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOTDIR) return os_errf(err, errlen, -e, "%s is not a directory", path);
        return os_errf(err, errlen, -e, "cannot open directory %s: %s", path, strerror(e));
    }
    if ((rc = os_dir_check_private(fd, path, err, errlen)) != 0) {
        close(fd);
        return rc;
    }
    *dirfd = fd;
    return 0;
}

static int not_regular(const char *dir, const char *name, mode_t mode, char *err, size_t errlen) {
    return os_errf(err, errlen, -EINVAL,
                   "%s/%s is %s, not a regular file; milc does not follow or open anything else in its own "
                   "directory: remove it",
                   dir, name, os_kind(mode));
}

int os_check_regular_at(int dirfd, const char *dir, const char *name, int *exists, char *err, size_t errlen) {
    struct stat st;
    int dummy;
    if (!exists) exists = &dummy;
    *exists = 0;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return 0;
        return os_errf(err, errlen, -errno, "cannot stat %s/%s: %s", dir, name, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) return not_regular(dir, name, st.st_mode, err, errlen);
    *exists = 1;
    return 0;
}

int os_open_at(int dirfd, const char *dir, const char *name, int flags, mode_t mode, int *fd, char *err,
               size_t errlen) {
    *fd = -1;
    int f = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
    if (f < 0) {
        int e = errno;
        struct stat st;
        /* ELOOP is what O_NOFOLLOW says about a link; ENXIO a FIFO without a reader. */
        if ((e == ELOOP || e == ENXIO || e == EISDIR) && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return not_regular(dir, name, st.st_mode, err, errlen);
        return os_errf(err, errlen, -e, "cannot open %s/%s: %s", dir, name, strerror(e));
    }
    struct stat st;
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
        int rc = not_regular(dir, name, st.st_mode, err, errlen);
        close(f);
        return rc;
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    return 0;
}
