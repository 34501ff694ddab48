/* stamp.c — has data.mdb changed since milc last wrote it?
 *
 * Checksumming a hit costs a pass over the artifact at memory speed (160 MB
 * of GPT-2: ~8 ms, a tenth of a prefill).  CACHE_GET_VERIFY_ONCE skips that
 * pass for an entry that already passed it, as long as nothing can have
 * changed its bytes since.  What can change them:
 *
 *   - a crash or reboot (torn or rotted pages read back from disk): the
 *     mark names the boot (/proc/sys/kernel/random/boot_id);
 *   - any process writing into data.mdb (a bug, a tool, a test flipping
 *     bytes): every write updates the file's ctime, which no one can set
 *     back.  milc's own writes change it too, so after each of its write
 *     transactions milc records the ctime it left in milc.stamp; a ctime
 *     that differs from the stamp is someone else's write.
 *
 * A mark is a tag of (boot, file, epoch).  The epoch changes whenever a
 * writer finds the file not as the stamp says, which retires every mark
 * made before; a reader that finds it so trusts no mark.  What this does
 * not see: a write by another program in the moment between a milc commit
 * and its stamp (or during the commit, whose own ctime change hides it); a
 * change on disk under the page cache that comes back after eviction within
 * the same boot; and, on a kernel or file system with coarse timestamps, a
 * write within the same clock tick as milc's last (file systems without
 * sub-second ctimes are never trusted).  CACHE_GET_VERIFY and
 * cache_verify always hash. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache_impl.h"

/* milc.stamp, little-endian: "MCS1", u32 0, then u64 boot, dev, ino,
 * ctime sec, ctime nsec, epoch, then u64 XXH3-64 of the 56 bytes before. */
enum { STAMP_LEN = 64, STAMP_BYTE = (1 << 20) + 1 };
#define STAMP_MAGIC 0x3153434Du /* "MCS1" */

typedef struct {
    uint64_t boot, dev, ino, csec, cnsec, epoch;
} Stamp;

static int data_stat(Cache *c, struct stat *st) {
    int fd;
    if (c->env && mdb_env_get_fd(c->env, &fd) == 0 && fd >= 0) return fstat(fd, st) == 0 ? 0 : -1;
    return lstat(c->datapath, st) == 0 ? 0 : -1;
}

static int stamp_read(Cache *c, Stamp *s) {
    uint8_t b[STAMP_LEN];
    if (c->stampfd < 0 || pread(c->stampfd, b, STAMP_LEN, 0) != STAMP_LEN) return -1;
    if (ld32(b) != STAMP_MAGIC || XXH3_64bits(b, STAMP_LEN - 8) != ld64(b + STAMP_LEN - 8))
        return -1; /* torn or foreign */
    *s = (Stamp){ld64(b + 8), ld64(b + 16), ld64(b + 24), ld64(b + 32), ld64(b + 40), ld64(b + 48)};
    return 0;
}

static void stamp_write(Cache *c, const Stamp *s) {
    uint8_t b[STAMP_LEN] = {0};
    st32(b, STAMP_MAGIC);
    st64(b + 8, s->boot), st64(b + 16, s->dev), st64(b + 24, s->ino);
    st64(b + 32, s->csec), st64(b + 40, s->cnsec), st64(b + 48, s->epoch);
    st64(b + STAMP_LEN - 8, XXH3_64bits(b, STAMP_LEN - 8));
    /* Best effort: a stamp not written only costs checksums later. */
    if (c->stampfd >= 0 && pwrite(c->stampfd, b, STAMP_LEN, 0) != STAMP_LEN) (void)ftruncate(c->stampfd, 0);
}

/* Record data.mdb as it is now, under epoch: the state milc just left it in. */
static void stamp_record(Cache *c, uint64_t epoch) {
    struct stat st;
    if (!c->boot || data_stat(c, &st) != 0) return;
    Stamp s = {
        c->boot, (uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_ctim.tv_sec, (uint64_t)st.st_ctim.tv_nsec,
        epoch};
    stamp_write(c, &s);
}

static uint64_t tag_of(const Stamp *s) {
    uint64_t v[4] = {s->boot, s->dev, s->ino, s->epoch};
    return XXH3_64bits(v, sizeof v) | 1;
}

/* The file as the stamp describes it, by this boot, with a ctime precise
 * enough to tell writes apart. */
static int matches(const Cache *c, const Stamp *s, const struct stat *st) {
    return c->boot && s->boot == c->boot && s->dev == (uint64_t)st->st_dev && s->ino == (uint64_t)st->st_ino &&
           s->csec == (uint64_t)st->st_ctim.tv_sec && s->cnsec == (uint64_t)st->st_ctim.tv_nsec && st->st_ctim.tv_nsec;
}

uint64_t cache_clean_tag(Cache *c, CacheCtime *now) {
    struct stat st;
    Stamp s;
    if (data_stat(c, &st) != 0) {
        *now = (CacheCtime){0, 0};
        return 0;
    }
    *now = (CacheCtime){(uint64_t)st.st_ctim.tv_sec, (uint64_t)st.st_ctim.tv_nsec};
    return stamp_read(c, &s) == 0 && matches(c, &s, &st) ? tag_of(&s) : 0;
}

static int stamp_lock(Cache *c, short type, int wait) {
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = STAMP_BYTE, .l_len = 1};
    int rc;
    while ((rc = fcntl(c->lockfd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl)) != 0 && errno == EINTR) {}
    return rc;
}

int cache_stamp_hold(Cache *c) {
    if (c->stamp_locked) return -1; /* inside a write transaction: its end stamps */
    /* Never wait: a writer holds the lock through its commit, and an open
     * must not queue behind it.  Not holding it only costs a checksum. */
    if (stamp_lock(c, F_WRLCK, 0) != 0) return -1;
    struct stat st;
    Stamp s;
    if (data_stat(c, &st) == 0 && stamp_read(c, &s) == 0 && matches(c, &s, &st)) {
        c->hepoch = s.epoch;
        return 1;
    }
    stamp_lock(c, F_UNLCK, 0);
    return 0;
}

void cache_stamp_release(Cache *c, int held) {
    if (held != 1) return;
    stamp_record(c, c->hepoch);
    stamp_lock(c, F_UNLCK, 0);
}

void cache_stamp_begin(Cache *c) {
    /* Serializes milc's writers from this check to their stamp, so one
     * writer's commit is not taken for a stranger's by another. */
    c->stamp_locked = stamp_lock(c, F_WRLCK, 1) == 0;
    struct stat st;
    Stamp s = {0};
    c->wtag = 0, c->wctime = (CacheCtime){0, 0};
    if (data_stat(c, &st) != 0) return;
    c->wctime = (CacheCtime){(uint64_t)st.st_ctim.tv_sec, (uint64_t)st.st_ctim.tv_nsec};
    if (stamp_read(c, &s) != 0 || !matches(c, &s, &st)) {
        /* Someone else wrote (or no stamp yet): a new epoch retires every mark. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed[4] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid(), s.epoch};
        s.epoch = XXH3_64bits(seed, sizeof seed);
    }
    s.boot = c->boot, s.dev = (uint64_t)st.st_dev, s.ino = (uint64_t)st.st_ino;
    c->wepoch = s.epoch;
    c->wtag = c->boot && st.st_ctim.tv_nsec ? tag_of(&s) : 0;
}

void cache_stamp_end(Cache *c, int committed) {
    if (committed) stamp_record(c, c->wepoch);
    if (c->stamp_locked) stamp_lock(c, F_UNLCK, 0);
    c->stamp_locked = 0;
}
