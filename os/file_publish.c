/* file_publish.c — the one atomic-publish helper: every file milc writes for
 * others to read (artifacts, bundles, weights, model.mil, outputs, the
 * compacted cache file) goes through a fresh temp file and a rename. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "file_impl.h"
#include "milc/osfile.h"

/* The directory part of path ("." for a bare name). */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static int fsync_dir_of(const char *path) {
    char *dir = dir_of(path);
    if (!dir) return -ENOMEM;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -errno;
    /* Some file systems cannot fsync a directory (EINVAL): nothing to wait for. */
    int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -errno;
    close(fd);
    return rc;
}

static int open_tmp(OsPublish *p, mode_t mode, char *err, size_t errlen) {
    p->fd = open(p->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (p->fd >= 0) return 0;
    return os_errf(err, errlen, -errno, "cannot create %s: %s", p->tmp, strerror(errno));
}

int os_publish_begin(OsPublish *p, const char *path, mode_t mode, char *err, size_t errlen) {
    static atomic_uint seq;
    *p = (OsPublish){.fd = -1, .path = strdup(path)};
    size_t n = strlen(path) + 64;
    p->tmp = malloc(n);
    if (!p->path || !p->tmp) {
        os_publish_abort(p);
        return os_errf(err, errlen, -ENOMEM, "out of memory");
    }
    const char *base = strrchr(path, '/');
    int dirlen = base ? (int)(base - path + 1) : 0;
    base = base ? base + 1 : path;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* A name nobody can guess and plant first; O_EXCL refuses one that is there. */
    for (int tries = 0; tries < 64; tries++) {
        unsigned r = (unsigned)ts.tv_nsec ^ (unsigned)atomic_fetch_add(&seq, 1) * 2654435761u ^ (unsigned)tries << 20;
        snprintf(p->tmp, n, "%.*s.%s.tmp-%d-%08x", dirlen, path, base, (int)getpid(), r);
        int rc = open_tmp(p, mode, err, errlen);
        if (rc != -EEXIST) {
            if (rc) os_publish_abort(p);
            return rc;
        }
    }
    os_publish_abort(p);
    return os_errf(err, errlen, -EEXIST, "cannot create a temp file beside %s", path);
}

int os_publish_begin_as(OsPublish *p, const char *path, const char *tmp, mode_t mode, char *err, size_t errlen) {
    *p = (OsPublish){.fd = -1, .path = strdup(path), .tmp = strdup(tmp)};
    if (!p->path || !p->tmp) {
        os_publish_abort(p);
        return os_errf(err, errlen, -ENOMEM, "out of memory");
    }
    /* unlink never follows a link: a planted one goes, its target untouched. */
    if (unlink(tmp) != 0 && errno != ENOENT) {
        int e = errno;
        os_publish_abort(p);
        return os_errf(err, errlen, -e, "cannot remove stale %s: %s", tmp, strerror(e));
    }
    int rc = open_tmp(p, mode, err, errlen);
    if (rc) os_publish_abort(p);
    return rc;
}

int os_publish_write(OsPublish *p, const void *data, size_t n, char *err, size_t errlen) {
    const char *s = data;
    while (n) {
        ssize_t w = write(p->fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            return os_errf(err, errlen, -e, "cannot write %s: %s", p->tmp, strerror(e));
        }
        s += w, n -= (size_t)w;
    }
    return 0;
}

int os_publish_commit(OsPublish *p, char *err, size_t errlen) {
    int rc = 0;
    if (!p->nosync && fsync(p->fd) != 0)
        rc = os_errf(err, errlen, -errno, "cannot write %s: %s", p->tmp, strerror(errno));
    if (close(p->fd) != 0 && !rc) rc = os_errf(err, errlen, -errno, "cannot write %s: %s", p->tmp, strerror(errno));
    p->fd = -1;
    if (!rc && rename(p->tmp, p->path) != 0)
        rc = os_errf(err, errlen, -errno, "cannot rename %s to %s: %s", p->tmp, p->path, strerror(errno));
    if (!rc) {
        free(p->tmp);
        p->tmp = NULL; /* published: nothing left to remove */
        int e = p->nosync ? 0 : fsync_dir_of(p->path);
        if (e) rc = os_errf(err, errlen, e, "cannot sync the directory of %s: %s", p->path, strerror(-e));
    }
    os_publish_abort(p);
    return rc;
}

void os_publish_abort(OsPublish *p) {
    if (p->fd >= 0) close(p->fd);
    if (p->tmp) unlink(p->tmp);
    free(p->tmp);
    free(p->path);
    *p = (OsPublish){.fd = -1};
}

int os_publish_file(const char *path, const void *data, size_t n, mode_t mode, char *err, size_t errlen) {
    OsPublish p;
    int rc = os_publish_begin(&p, path, mode, err, errlen);
    if (rc) return rc;
    if ((rc = os_publish_write(&p, data, n, err, errlen)) != 0) {
        os_publish_abort(&p);
        return rc;
    }
    return os_publish_commit(&p, err, errlen);
}
