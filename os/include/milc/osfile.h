/* osfile.h — the one place milc opens paths that come from outside, reads
 * files others may change, and publishes files atomically.  Every function
 * returns 0 or a negative errno value and writes a message naming the path
 * into err (never prints).  Depends on libc only. */
#ifndef MILC_OSFILE_H
#define MILC_OSFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What a path must be. */
enum { OS_REG = 1, OS_DIR = 2 };

/* "a FIFO", "a symbolic link", "a directory", ... for a stat mode. */
const char *os_kind(mode_t mode);

/* Open an outside path read-only without blocking (a FIFO or device must not
 * wait for a writer) and check with fstat that it is what `want` asks
 * (OS_REG and/or OS_DIR): -EINVAL "PATH is a FIFO, not a regular file"
 * otherwise.  The descriptor is close-on-exec and blocking again. */
int os_open_input(const char *path, int want, int *fd, char *err, size_t errlen);

/* Read a whole regular file into owned memory with pread: a file truncated
 * meanwhile is an error (-EIO "changed while being read"), never a SIGBUS.
 * The buffer is 64-byte aligned and NUL-terminated past *len; free it with
 * free().  max: largest size accepted (0: any), else -EFBIG. */
int os_read_file(const char *path, size_t max, void **buf, size_t *len, char *err, size_t errlen);
/* The same on an open descriptor (shown: the path for messages). */
int os_read_fd(int fd, const char *shown, size_t max, void **buf, size_t *len, char *err, size_t errlen);

/* ---- atomic publish ---------------------------------------------------------
 * A file appears complete or not at all: written to a fresh temp file in the
 * target's directory (O_EXCL|O_NOFOLLOW, a name nobody can plant in advance),
 * fsynced, renamed over the target (which replaces a symlink there rather
 * than following it), and the directory fsynced.  The temp file is created
 * with `mode` through open(), so the umask applies as for any created file. */
typedef struct OsPublish {
    int fd;
    char *path, *tmp;
    /* Set before commit for scratch nobody needs after a crash: still
     * renamed whole into place, but without the two fsyncs. */
    int nosync;
} OsPublish;

int os_publish_begin(OsPublish *p, const char *path, mode_t mode, char *err, size_t errlen);
/* Like begin, with a fixed temp name `tmp` (a stale one is removed first). */
int os_publish_begin_as(OsPublish *p, const char *path, const char *tmp, mode_t mode, char *err, size_t errlen);
int os_publish_write(OsPublish *p, const void *data, size_t n, char *err, size_t errlen);
/* fsync, rename, fsync the directory; frees p.  On failure the temp is gone. */
int os_publish_commit(OsPublish *p, char *err, size_t errlen);
/* Remove the temp file and free p (safe after any begin or commit). */
void os_publish_abort(OsPublish *p);
/* begin + write + commit of one buffer. */
int os_publish_file(const char *path, const void *data, size_t n, mode_t mode, char *err, size_t errlen);

/* A directory for files of our own: it must be a directory owned by the
 * effective user and not writable by group or others; otherwise -EPERM with a
 * message saying who owns it or what mode it has, and how to fix it. */
int os_dir_check_private(int dirfd, const char *shown, char *err, size_t errlen);
/* Create path (and missing parents, 0700) if needed, open it O_DIRECTORY and
 * check it with os_dir_check_private.  *dirfd on success. */
int os_dir_open_private(const char *path, int *dirfd, char *err, size_t errlen);
/* A name in a verified directory: absent (ENOENT: 0, *exists = 0) or a
 * regular file (0, *exists = 1); a symlink, FIFO, directory... is -EINVAL
 * with a message naming dir/name.  Never follows a link. */
int os_check_regular_at(int dirfd, const char *dir, const char *name, int *exists, char *err, size_t errlen);
/* openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode), then
 * the regular-file check; the descriptor is blocking again. */
int os_open_at(int dirfd, const char *dir, const char *name, int flags, mode_t mode, int *fd, char *err, size_t errlen);

/* mkdir that accepts an existing real directory but not a symlink or
 * anything else at path. */
int os_mkdir_real(const char *path, mode_t mode, char *err, size_t errlen);

#endif
