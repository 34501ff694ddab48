/* unsynced.c — the marker of commits that did not wait for the disk
 * (CACHE_PUT_REFETCHABLE), and what an open after a crash does with it.
 *
 * A commit without a sync leaves data pages and the meta page that names
 * them to the kernel's writeback, in any order: after an OS crash the file
 * may name pages that never reached the disk, and LMDB's free list may be
 * as torn as the tree (a later put would then write over live entries).
 * Nothing inside the file can tell such a state from a good one, so the
 * marker sits outside it: `milc.unsynced`, holding the boot tag, created
 * and made durable before the first such commit, removed after the next
 * durable commit (whose sync covers every page written before it).  A
 * marker of another boot at open means a crash may have torn the file: the
 * open starts the cache afresh.  A marker of this boot means only that a
 * process exited before a durable commit: the page cache holds every
 * commit, nothing is lost.
 *
 * Writers hold the stamp lock (stamp.c) across their transaction, so the
 * check-and-create here and the remove after a durable commit never
 * interleave with another process's commit. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_impl.h"

static const char MARKER[] = "milc.unsynced";

int cache_unsynced_mark(Cache *c) {
    struct stat st;
    if (!c->boot || c->dirfd < 0) return -1; /* a crash could not be told from a reboot */
    if (fstatat(c->dirfd, MARKER, &st, AT_SYMLINK_NOFOLLOW) == 0) return S_ISREG(st.st_mode) ? 0 : -1;
    int fd = openat(c->dirfd, MARKER, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    uint8_t b[8];
    st64(b, c->boot);
    int ok = write(fd, b, sizeof b) == (ssize_t)sizeof b && fsync(fd) == 0;
    close(fd);
    if (!ok || fsync(c->dirfd) != 0) {
        unlinkat(c->dirfd, MARKER, 0);
        return -1;
    }
    return 0;
}

int cache_unsynced_present(Cache *c) {
    struct stat st;
    return c->boot && c->dirfd >= 0 && fstatat(c->dirfd, MARKER, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

void cache_unsynced_clear(Cache *c) {
    if (c->dirfd >= 0) unlinkat(c->dirfd, MARKER, 0);
}

/* At open, with milc.lock held exclusively (no other handle is open). */
int cache_unsynced_recover(Cache *c, char *err, size_t errlen) {
    int fd = openat(c->dirfd, MARKER, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    uint8_t b[8];
    int same = read(fd, b, sizeof b) == (ssize_t)sizeof b && c->boot && ld64(b) == c->boot;
    close(fd);
    if (same) return 0;
    static const char *const files[] = {"data.mdb", "lock.mdb", "milc.stamp"};
    for (int i = 0; i < 3; i++)
        if (unlinkat(c->dirfd, files[i], 0) != 0 && errno != ENOENT) {
            cache_fmt(err, errlen, "cannot remove %s/%s (written without a sync before a restart): %s", c->dir,
                      files[i], strerror(errno));
            return CACHE_EIO;
        }
    unlinkat(c->dirfd, MARKER, 0);
    fsync(c->dirfd);
    c->restarted = 1;
    return 0;
}
