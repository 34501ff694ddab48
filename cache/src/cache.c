/* cache.c — the LMDB store: open/validate, put, zero-copy get, direct keys,
 * batched hit statistics, eviction, verify, gc with compaction.  The on-disk
 * layout (named databases, value formats, locking) is described in
 * cache/README.md; the comments here say why the code is the way it is. */
/* _GNU_SOURCE (fallocate, F_OFD_SETLKW, MADV_POPULATE_*) comes from the build. */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "milc/ossys.h"
#include "cache_impl.h"
#include "milc/osfile.h"

/* ---- small helpers ------------------------------------------------------ */

static void seterr(Cache *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void seterr(Cache *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

const char *cache_errmsg(const Cache *c) { return c ? c->err : ""; }

uint64_t cache_now(Cache *c) {
    if (c->opt.now_ns) return c->opt.now_ns(c->opt.now_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int is_lmdb_rc(int rc) { return rc > 0 || (rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE); }

/* The symbolic name of the errno values a store meets on a full or failing
 * disk, so a message says which one it was ("" for others). */
static const char *errno_tag(int e) {
    switch (e) {
    case ENOSPC: return " (ENOSPC)";
    case EIO: return " (EIO)";
    case EDQUOT: return " (EDQUOT)";
    case EFBIG: return " (EFBIG)";
    case EROFS: return " (EROFS)";
    default: return "";
    }
}

/* Turn an LMDB/errno code into a CACHE_E* code with a message.  Damage found
 * by LMDB gets the same cure as damage found by our own checks. */
int cache_lmdb_err(Cache *c, int rc, const char *what) {
    if (!is_lmdb_rc(rc)) return rc; /* already ours */
    switch (rc) {
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
    case MDB_BAD_TXN:
        seterr(c, "cache file %s is damaged (%s: %s); cache_destroy or deleting the directory %s starts afresh",
               c->datapath, what, mdb_strerror(rc), c->dir);
        return CACHE_ECORRUPT;
    case MDB_MAP_FULL: seterr(c, "%s: cache map full", what); return CACHE_EFULL;
    case ENOMEM: seterr(c, "%s: out of memory", what); return CACHE_ENOMEM;
    default:
        seterr(c, "%s on %s: %s%s", what, c->datapath, mdb_strerror(rc), errno_tag(rc));
        return rc > 0 ? CACHE_EIO : CACHE_ELMDB;
    }
}

static MDB_val mval(const void *p, size_t n) { return (MDB_val){.mv_size = n, .mv_data = (void *)p}; }

/* Disk space a file takes: data.mdb is sparse with WRITEMAP (as long as the map). */
static uint64_t file_size(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/* ---- counters ----------------------------------------------------------- */

static const char *const ctr_names[CTR_COUNT] = {
    [CTR_HITS] = "hits",     [CTR_DIRECT_HITS] = "direct_hits", [CTR_MISSES] = "misses",
    [CTR_ERRORS] = "errors", [CTR_SAVED_NS] = "saved_ns",       [CTR_ENTRIES] = "entries",
    [CTR_BYTES] = "bytes",   [CTR_MAX_BYTES] = "max_bytes",
};

static uint64_t ctr_get(Cache *c, MDB_txn *txn, int id) {
    MDB_val k = mval(ctr_names[id], strlen(ctr_names[id])), v;
    if (mdb_get(txn, c->db_count, &k, &v) != 0 || v.mv_size != 8) return 0;
    return ld64(v.mv_data);
}

static int ctr_set(Cache *c, MDB_txn *txn, int id, uint64_t val) {
    uint8_t le[8];
    st64(le, val);
    MDB_val k = mval(ctr_names[id], strlen(ctr_names[id])), v = mval(le, 8);
    return mdb_put(txn, c->db_count, &k, &v, 0);
}

/* Counts that go below zero (after a lost update) clamp rather than wrap. */
static int ctr_add(Cache *c, MDB_txn *txn, int id, int64_t delta) {
    if (!delta) return 0;
    uint64_t v = ctr_get(c, txn, id);
    v = delta < 0 && (uint64_t)-delta > v ? 0 : v + (uint64_t)delta;
    return ctr_set(c, txn, id, v);
}

/* ---- environment -------------------------------------------------------- */

static int flock_retry(int fd, int op) {
    int rc;
    while ((rc = flock(fd, op)) != 0 && errno == EINTR) {}
    return rc;
}

static const char *const db_names[] = {"meta", "data", "usage", "direct", "counters", "notes"};
enum { NDBS = sizeof db_names / sizeof db_names[0] };

static int txn_begin(Cache *c, unsigned flags, MDB_txn **txn);
static int reserve_disk(Cache *c, uint64_t need);

static int open_dbs(Cache *c) {
    MDB_dbi *dbis[NDBS] = {&c->db_meta, &c->db_data, &c->db_usage, &c->db_direct, &c->db_count, &c->db_notes};
    /* Try read-only first: creating needs a write transaction (and an fsync),
     * which would tax every open in the hit path. */
    for (int create = 0; create < 2; create++) {
        MDB_txn *txn;
        int rc = create ? reserve_disk(c, 64 * c->psize) : 0;
        if (!rc) rc = txn_begin(c, create ? 0 : MDB_RDONLY, &txn);
        if (rc) return rc;
        int missing = 0;
        for (int i = 0; i < NDBS && !rc; i++) {
            rc = mdb_dbi_open(txn, db_names[i], create ? MDB_CREATE : 0, dbis[i]);
            if (rc == MDB_NOTFOUND && !create) missing = 1, rc = 0;
        }
        if (rc || missing) {
            mdb_txn_abort(txn);
            if (rc) return cache_lmdb_err(c, rc, "mdb_dbi_open");
            continue;
        }
        rc = mdb_txn_commit(txn);
        return rc ? cache_lmdb_err(c, rc, "mdb_txn_commit") : 0;
    }
    return CACHE_ELMDB;
}

static void env_close(Cache *c) {
    if (c->env) mdb_env_close(c->env);
    c->env = NULL;
    c->mapaddr = NULL;
}

/* ---- the writable map ------------------------------------------------------
 * With WRITEMAP, LMDB ftruncates data.mdb to the map size whenever it maps
 * (open, growth, adopting another process's growth).  Each process picks its
 * own size, so one that opens with a smaller map would cut the file under a
 * writer that just grew it — and that writer's next store into the cut pages
 * is a SIGBUS.  Hence the map lock, an OFD lock on a byte of milc.lock (apart
 * from the flock that guards compaction): mapping takes it shared and never
 * maps less than the file; growing takes it exclusively. */
enum { MAPLOCK_BYTE = 1 << 20 };

static int maplock(Cache *c, short type) {
    if (!c->writemap) return 0;
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = MAPLOCK_BYTE, .l_len = 1};
    int rc;
    while ((rc = fcntl(c->lockfd, F_OFD_SETLKW, &fl)) != 0 && errno == EINTR) {}
    if (rc) seterr(c, "cannot lock %s: %s", c->lockpath, strerror(errno));
    return rc ? CACHE_EIO : 0;
}

static uint64_t fd_size(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Where LMDB mapped the file (mdb_env_info tells only with FIXEDMAP): any
 * value of the main database lies in a leaf page, and every page starts with
 * its own page number, so base = page start - pgno * page size.  Checked
 * against the two meta pages; NULL if anything does not fit.  *resized is set
 * if another process grew the file beyond the map meanwhile. */
static uint8_t *map_base(Cache *c, int *resized) {
    if (c->psize != (uint64_t)sysconf(_SC_PAGESIZE)) return NULL; /* page starts not map-aligned */
    MDB_txn *txn;
    MDB_dbi main_db;
    MDB_val k = mval(db_names[0], strlen(db_names[0])), v;
    uint8_t *base = NULL;
    /* Not txn_begin: adopting a resize remaps, which lands here again. */
    int rc = mdb_txn_begin(c->env, NULL, MDB_RDONLY, &txn);
    if (rc == MDB_MAP_RESIZED) *resized = 1;
    if (rc) return NULL;
    if (mdb_dbi_open(txn, NULL, 0, &main_db) == 0 && mdb_get(txn, main_db, &k, &v) == 0) {
        uint8_t *page = (uint8_t *)((uintptr_t)v.mv_data & ~(uintptr_t)(c->psize - 1));
        uint64_t pgno = ld64(page);
        if (pgno >= 2 && pgno < c->mapsize / c->psize) {
            base = page - pgno * c->psize;
            if (ld64(base) != 0 || ld64(base + c->psize) != 1 || ld32(base + 16) != 0xBEEFC0DEu) base = NULL;
        }
    }
    mdb_txn_abort(txn);
    return base;
}

/* After LMDB (re)mapped: note where, and make the map read-only until the
 * next write transaction, so a stray write through a hit pointer faults
 * (as it would in LMDB's read-only map without WRITEMAP).  Returns 1 if the
 * file already grew beyond the new map (remap again), else 0. */
static int map_note(Cache *c) {
    MDB_envinfo info;
    int resized = 0;
    mdb_env_info(c->env, &info);
    c->mapsize = info.me_mapsize;
    c->mapaddr = c->writemap ? map_base(c, &resized) : NULL;
    if (c->mapaddr) {
        if (!(cache_tune & CACHE_TUNE_NO_MPROTECT)) mprotect(c->mapaddr, (size_t)c->mapsize, PROT_READ);
        /* Pages read in through the map (after a reboot, say) then come as
         * 2 MB folios mapped by one PMD each, as a put leaves them (see
         * Stage).  A hint: without transparent huge pages nothing changes. */
        os_huge_hint(c->mapaddr, (size_t)c->mapsize);
    }
    return resized;
}

unsigned cache_tune;

static void map_writable(Cache *c, int on) {
    if (c->writemap && c->mapaddr && !(cache_tune & CACHE_TUNE_NO_MPROTECT))
        mprotect(c->mapaddr, (size_t)c->mapsize, on ? PROT_READ | PROT_WRITE : PROT_READ);
}

/* Remap at newsize (0 = what the meta page records), never below the file
 * (with WRITEMAP): under the map lock.  No transaction of this handle may be
 * live.  Growth by others between the remap and map_note is adopted too. */
static int remap(Cache *c, uint64_t newsize, short locktype) {
    for (int tries = 0; tries < 16; tries++) {
        int rc = maplock(c, locktype), fd;
        if (rc) return rc;
        if (c->writemap && mdb_env_get_fd(c->env, &fd) == 0 && fd_size(fd) > newsize) newsize = fd_size(fd);
        /* LMDB unmaps before it extends the file for a larger map, and a
         * failed extension (a file-size limit) leaves it without a map:
         * extend the file first, and fail here with LMDB untouched. */
        if (c->writemap && newsize && mdb_env_get_fd(c->env, &fd) == 0 && fd_size(fd) < newsize &&
            ftruncate(fd, (off_t)newsize) != 0) {
            int e = errno;
            maplock(c, F_UNLCK);
            seterr(c, "cannot grow %s to %llu bytes: %s%s", c->datapath, (unsigned long long)newsize, strerror(e),
                   errno_tag(e));
            return CACHE_EIO;
        }
        int held = cache_stamp_hold(c);
        rc = mdb_env_set_mapsize(c->env, (size_t)newsize);
        cache_stamp_release(c, held);
        maplock(c, F_UNLCK);
        if (rc) {
            c->broken = 1; /* LMDB may hold no map now: no transaction may begin */
            return cache_lmdb_err(c, rc, "mdb_env_set_mapsize");
        }
        if (!map_note(c)) return 0;
        newsize = 0, locktype = F_RDLCK;
    }
    seterr(c, "%s keeps growing under this process; try again", c->datapath);
    return CACHE_EBUSY;
}

/* Reserve disk blocks for every page a write transaction may touch: the
 * used part of the file plus room for `need` more bytes.  Pages written
 * through a WRITEMAP map into a hole get their blocks at fault time, and a
 * full disk there is a SIGBUS; fallocate turns it into ENOSPC here.  Blocks
 * already allocated cost nothing; LMDB reuses free pages before it extends.
 * LMDB's copy path (no WRITEMAP) gets the same: there a full disk is a short
 * write at commit, which LMDB reports as EIO. */
static int reserve_disk(Cache *c, uint64_t need) {
    MDB_envinfo info;
    int fd;
    mdb_env_info(c->env, &info);
    if (mdb_env_get_fd(c->env, &fd) != 0) return 0;
    uint64_t end = ((uint64_t)info.me_last_pgno + 1) * c->psize + need + 16 * c->psize;
    if (end > c->mapsize) end = c->mapsize;
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)end) == 0) return 0;
    int e = errno;
    if (e == EOPNOTSUPP || e == ENOSYS) return 0; /* no holes to fill there */
    seterr(c, "cannot reserve %llu bytes of disk for %s: %s%s", (unsigned long long)end, c->datapath, strerror(e),
           errno_tag(e));
    return CACHE_EIO;
}

/* LMDB creates lock.mdb sparse and writes its header and reader slots through
 * a map: on a full disk that is a SIGBUS.  A lock file we create gets its
 * blocks first (LMDB then truncates it to its size), or the open fails with
 * CACHE_EIO.  An existing lock.mdb is never opened here: LMDB holds a POSIX
 * (per-process) lock on it, and closing any descriptor of the file drops it;
 * the next opener would think itself alone and reinitialize the mutexes under
 * live transactions. */
enum { LOCKFILE_BYTES = 128 << 10 }; /* LMDB needs 64 KiB for 1024 readers */

static int lockfile_create(Cache *c) {
    int fd = openat(c->dirfd, "lock.mdb", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return 0; /* exists (checked by env_files_check), or LMDB will say why it cannot create it */
    int rc = fallocate(fd, 0, 0, LOCKFILE_BYTES) == 0 || errno == EOPNOTSUPP || errno == ENOSYS ? 0 : errno;
    close(fd);
    if (!rc) return 0;
    seterr(c, "cannot create %s/lock.mdb: %s", c->dir, strerror(rc));
    return CACHE_EIO;
}

/* LMDB opens data.mdb and lock.mdb by name and would follow a planted link
 * (writing its lock header or a 1 GiB map into the target) or block on a
 * FIFO.  Each must be absent or a regular file, checked without following. */
static int env_files_check(Cache *c) {
    static const char *const names[] = {"data.mdb", "lock.mdb"};
    for (int i = 0; i < 2; i++)
        if (os_check_regular_at(c->dirfd, c->dir, names[i], NULL, c->err, sizeof c->err) != 0) return CACHE_EIO;
    return 0;
}

/* After LMDB's open: the data.mdb it holds is the regular file at that name
 * (not something swapped in between the check and its open). */
static int env_files_recheck(Cache *c) {
    struct stat held, named;
    int fd = -1;
    if (env_files_check(c) != 0) return CACHE_EIO;
    if (mdb_env_get_fd(c->env, &fd) != 0 || fstat(fd, &held) != 0 ||
        fstatat(c->dirfd, "data.mdb", &named, AT_SYMLINK_NOFOLLOW) != 0 || held.st_ino != named.st_ino ||
        held.st_dev != named.st_dev) {
        seterr(c, "%s changed while it was opened; milc opens only the regular file in its directory", c->datapath);
        return CACHE_EIO;
    }
    return 0;
}

/* The directory LMDB is given: the verified descriptor's /proc name where
 * there is one, so LMDB opens its files in that directory even if a path
 * component above it is renamed meanwhile. */
static void env_dir(const Cache *c, char *buf, size_t n) {
    snprintf(buf, n, "/proc/self/fd/%d", c->dirfd);
    struct stat a, b;
    if (stat(buf, &a) != 0 || fstat(c->dirfd, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev)
        snprintf(buf, n, "%s", c->dir);
}

/* envfile.c reads LMDB's meta and B-tree pages itself, and the store path
 * writes into values LMDB reserved: both are LMDB 0.9's file format.  Any
 * other LMDB is refused here, before it maps anything, rather than misread. */
static int lmdb_version_check(Cache *c) {
    int major, minor, patch;
    mdb_version(&major, &minor, &patch);
    if (cache_lmdb_known(major, minor) && cache_lmdb_known(MDB_VERSION_MAJOR, MDB_VERSION_MINOR)) return 0;
    seterr(c, "LMDB %d.%d.%d (built with %d.%d.%d) is not supported: the cache reads LMDB 0.9's file format itself",
           major, minor, patch, MDB_VERSION_MAJOR, MDB_VERSION_MINOR, MDB_VERSION_PATCH);
    return CACHE_ELMDB;
}

static int env_open(Cache *c) {
    int rc = lmdb_version_check(c);
    if (!rc) rc = env_files_check(c);
    if (!rc) rc = cache_envfile_check(c->datapath, c->dir, c->err, sizeof c->err);
    if (!rc) rc = lockfile_create(c);
    if (rc) return rc;
    if ((rc = mdb_env_create(&c->env)) != 0) return cache_lmdb_err(c, rc, "mdb_env_create");
    mdb_env_set_maxdbs(c->env, 8);
    mdb_env_set_maxreaders(c->env, 1024);
    /* NOTLS: read transactions belong to CacheHits, not threads, so one thread
     * may hold several hits. */
    c->writemap = !c->opt.no_writemap;
    unsigned flags = MDB_NOTLS | (c->opt.no_sync ? MDB_NOSYNC : 0) | (c->opt.meta_sync ? 0 : MDB_NOMETASYNC) |
                     (c->writemap ? MDB_WRITEMAP : 0);
    if ((rc = maplock(c, F_RDLCK)) != 0) {
        env_close(c);
        return rc;
    }
    struct stat st;
    uint64_t map = c->opt.map_size;
    if (c->writemap && stat(c->datapath, &st) == 0 && (uint64_t)st.st_size > map) map = (uint64_t)st.st_size;
    mdb_env_set_mapsize(c->env, (size_t)map);
    int held = cache_stamp_hold(c);
    char edir[64 + 4096];
    env_dir(c, edir, sizeof edir);
    rc = mdb_env_open(c->env, edir, flags, 0600);
    cache_stamp_release(c, held);
    maplock(c, F_UNLCK);
    if (rc) {
        rc = cache_lmdb_err(c, rc, "mdb_env_open");
        env_close(c);
        return rc;
    }
    if ((rc = env_files_recheck(c)) != 0) {
        env_close(c);
        return rc;
    }
    int dead = 0;
    mdb_reader_check(c->env, &dead); /* slots of killed processes pin old pages */
    MDB_stat ms;
    mdb_env_stat(c->env, &ms);
    c->psize = ms.ms_psize;
    for (int tries = 0;; tries++) {
        /* Walk the trees inside a read transaction, so writers in other
         * processes cannot recycle the pages under the walk. */
        MDB_txn *txn;
        if ((rc = txn_begin(c, MDB_RDONLY, &txn)) != 0) break;
        rc = cache_envfile_walk(c->datapath, c->dir, mdb_txn_id(txn), c->err, sizeof c->err);
        mdb_txn_abort(txn);
        if (rc != CACHE_EBUSY || tries == 8) break;
    }
    if (rc) {
        env_close(c);
        return rc;
    }
    MDB_envinfo info;
    mdb_env_info(c->env, &info);
    c->mapsize = info.me_mapsize;
    /* The map is writable here (unless a resize was adopted: then txn_begin
     * unprotects it for the write transaction that creates the databases). */
    if ((rc = open_dbs(c)) == 0 && map_note(c)) rc = remap(c, 0, F_RDLCK);
    if (rc) env_close(c);
    return rc;
}

/* A tag for this boot of the machine (never 0), or 0 where the kernel does
 * not say: CACHE_GET_VERIFY_ONCE then verifies every time. */
static uint64_t boot_tag(void) {
    char id[128];
    return os_boot_id(id, sizeof id) == 0 ? XXH3_64bits(id, strlen(id)) | 1 : 0;
}

int cache_open(Cache **out, const char *dir, const CacheOptions *opt, char *err, size_t errlen) {
    *out = NULL;
    if (!dir || !*dir) {
        cache_fmt(err, errlen, "no cache directory given");
        return CACHE_EINVAL;
    }
    int dirfd, rc = os_dir_open_private(dir, &dirfd, err, errlen);
    if (rc) return rc == -ENOMEM ? CACHE_ENOMEM : CACHE_EIO;
    Cache *c = calloc(1, sizeof *c);
    if (!c) {
        close(dirfd);
        return CACHE_ENOMEM;
    }
    c->dirfd = dirfd, c->lockfd = -1, c->stampfd = -1;
    if (opt) c->opt = *opt;
    if (!c->opt.map_size) c->opt.map_size = (uint64_t)1 << 30;
    if (!c->opt.chunk_bytes) c->opt.chunk_bytes = (uint64_t)64 << 20;
    if (c->opt.chunk_bytes > ((uint64_t)1 << 30)) c->opt.chunk_bytes = (uint64_t)1 << 30;
    c->opt.chunk_bytes = (c->opt.chunk_bytes + 63) & ~(uint64_t)63;
    if (!c->opt.whole_bytes || c->opt.whole_bytes > ((uint64_t)1 << 30)) c->opt.whole_bytes = (uint64_t)1 << 30;
    if (c->opt.whole_bytes < c->opt.chunk_bytes) c->opt.whole_bytes = c->opt.chunk_bytes;
    c->opt.whole_bytes &= ~(uint64_t)63;
    c->dir = strdup(dir);
    size_t n = strlen(dir) + 32;
    c->datapath = malloc(n);
    c->lockpath = malloc(n);
    if (!c->dir || !c->datapath || !c->lockpath) {
        cache_close(c);
        return CACHE_ENOMEM;
    }
    snprintf(c->datapath, n, "%s/data.mdb", dir);
    snprintf(c->lockpath, n, "%s/milc.lock", dir);
    if (os_open_at(dirfd, dir, "milc.lock", O_RDWR | O_CREAT, 0600, &c->lockfd, err, errlen) != 0) {
        cache_close(c);
        return CACHE_EIO;
    }
    c->boot = boot_tag();
    /* Alone (the lock taken exclusively without waiting), look for commits
     * of an earlier boot that never reached the disk (unsynced.c).  A
     * process that holds the lock shared did that when it opened. */
    if (flock(c->lockfd, LOCK_EX | LOCK_NB) == 0 && (rc = cache_unsynced_recover(c, err, errlen)) != 0) {
        cache_close(c);
        return rc;
    }
    if (flock_retry(c->lockfd, LOCK_SH) != 0) {
        cache_fmt(err, errlen, "cannot lock %s: %s", c->lockpath, strerror(errno));
        cache_close(c);
        return CACHE_EIO;
    }
    /* Without a stamp every hit is checksummed: correct, only slower; but
     * something other than a file there is refused like any other. */
    if (os_open_at(dirfd, dir, "milc.stamp", O_RDWR | O_CREAT, 0600, &c->stampfd, err, errlen) == -EINVAL) {
        cache_close(c);
        return CACHE_EIO;
    }
    if ((rc = env_open(c)) != 0) {
        cache_fmt(err, errlen, "%s", c->err);
        cache_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void cache_close(Cache *c) {
    if (!c) return;
    CACHE_ASSERT(c->live_hits == 0);
    if (c->env && c->npend) cache_flush(c);
    env_close(c);
    if (c->lockfd >= 0) close(c->lockfd);
    if (c->stampfd >= 0) close(c->stampfd);
    if (c->dirfd >= 0) close(c->dirfd);
    free(c->stage);
    free(c->dir);
    free(c->datapath);
    free(c->lockpath);
    free(c);
}

int cache_destroy(const char *dir, char *err, size_t errlen) {
    char p[4096];
    snprintf(p, sizeof p, "%s/milc.lock", dir);
    int fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0 && flock_retry(fd, LOCK_EX | LOCK_NB) != 0) {
        cache_fmt(err, errlen, "cache %s is in use by another process", dir);
        close(fd);
        return CACHE_EBUSY;
    }
    static const char *const files[] = {"data.mdb",   "lock.mdb",      "data.mdb.compact",
                                        "milc.stamp", "milc.unsynced", "milc.lock"};
    int rc = 0;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (unlink(p) != 0 && errno != ENOENT && !rc) {
            cache_fmt(err, errlen, "cannot remove %s: %s", p, strerror(errno));
            rc = CACHE_EIO;
        }
    }
    if (fd >= 0) close(fd);
    return rc;
}

/* ---- transactions ------------------------------------------------------- */

/* Another process grew the file beyond our map: remap.  Remapping moves every
 * pointer a live CacheHit handed out, so it is refused while one exists. */
static int adopt_resize(Cache *c) {
    if (c->live_hits) {
        seterr(c, "another process grew the cache; release all hits of this handle first");
        return CACHE_EFULL;
    }
    return remap(c, 0, F_RDLCK); /* 0: the size the meta page records (or the file's, if larger) */
}

static int grow(Cache *c, uint64_t hint) {
    if (c->live_hits) {
        seterr(c, "cache map full (%llu bytes) and cannot grow while this handle holds a hit",
               (unsigned long long)c->mapsize);
        return CACHE_EFULL;
    }
    uint64_t want = c->mapsize * 2;
    while (want < c->mapsize + hint + hint / 4) want *= 2;
    int rc = remap(c, want, F_WRLCK);
    if (!rc) c->grows++;
    return rc;
}

/* Every transaction of the module begins here (map_base excepted): when
 * another process grew the file beyond our map, LMDB refuses any transaction
 * with MDB_MAP_RESIZED until we adopt the new size, which needs no live
 * transaction in this handle (true of every caller but a get beside a live
 * hit, which gets CACHE_EFULL).  A write transaction gets a writable map. */
static int txn_begin(Cache *c, unsigned flags, MDB_txn **txn) {
    int write = !(flags & MDB_RDONLY);
    if (c->broken) {
        seterr(c, "the cache handle of %s lost its map in a failed remap; open the cache again", c->dir);
        return CACHE_EIO;
    }
    for (int tries = 0; tries < 16; tries++) {
        if (write) map_writable(c, 1);
        int rc = mdb_txn_begin(c->env, NULL, flags, txn);
        if (rc == 0) return 0;
        if (write) map_writable(c, 0);
        if (rc != MDB_MAP_RESIZED) return cache_lmdb_err(c, rc, "mdb_txn_begin");
        if ((rc = adopt_resize(c)) != 0) return rc;
    }
    seterr(c, "%s keeps growing under this process; try again", c->datapath);
    return CACHE_EBUSY;
}

int cache_read_txn(Cache *c, MDB_txn **txn) { return txn_begin(c, MDB_RDONLY, txn); }

/* Write the batched hit statistics inside txn. */
static int flush_pending_in(Cache *c, MDB_txn *txn) {
    int rc = 0;
    for (int i = 0; i < c->npend && !rc; i++) {
        Pending *p = &c->pend[i];
        MDB_val k = mval(p->key.b, 16), v;
        /* Only touch entries that still exist: an rm must not be undone. */
        if (mdb_get(txn, c->db_usage, &k, &v) != 0 || v.mv_size < USAGE_MIN) continue;
        uint8_t u[USAGE_LEN];
        uint64_t last = ld64(v.mv_data), mark = v.mv_size >= USAGE_MARK ? ld64((uint8_t *)v.mv_data + 16) : 0;
        uint64_t load = p->load_ns ? p->load_ns : v.mv_size >= USAGE_LEN ? ld64((uint8_t *)v.mv_data + 24) : 0;
        /* A verification still speaks for the bytes if nothing wrote the
         * file since it began (stamp.c). */
        if (p->verified && c->wtag && p->vctime.sec == c->wctime.sec && p->vctime.nsec == c->wctime.nsec)
            mark = c->wtag;
        st64(u, p->last_used > last ? p->last_used : last);
        st64(u + 8, ld64((uint8_t *)v.mv_data + 8) + p->hits);
        st64(u + 16, mark);
        st64(u + 24, load);
        v = mval(u, USAGE_LEN);
        rc = mdb_put(txn, c->db_usage, &k, &v, 0);
    }
    for (int i = 0; i < CTR_COUNT && !rc; i++)
        if (c->pctr[i]) rc = ctr_add(c, txn, i, (int64_t)c->pctr[i]);
    return rc;
}

/* Run body in a write transaction, flushing pending statistics with it.
 * Handles growth by other processes (MAP_RESIZED) and a full map (grow by at
 * least grow_hint and rerun body from scratch, so bodies must not depend on
 * state from a failed attempt). */
static int write_txn(Cache *c, TxnBody body, void *arg, uint64_t grow_hint, const char *what);

static int kv_body(Cache *c, MDB_txn *txn, void *arg);

/* A commit that waits for the disk makes every earlier one durable too
 * (LMDB syncs the whole file), so the marker of unsynced ones goes; one that
 * does not wait needs the marker first, or it waits after all.  While the
 * marker stands, a commit of what the caller derives again (statistics, a
 * direct key, a note) does not wait either: it would wait for every pulled
 * byte (the hits after a pull flush at close, the caller notes its request),
 * and the marker already covers it. */
int cache_write_txn(Cache *c, TxnBody body, void *arg, uint64_t grow_hint, const char *what) {
    cache_stamp_begin(c);
    int light = !body || body == kv_body; /* statistics, a direct key, a note: all derived again */
    int nosync = !c->opt.no_sync && c->stamp_locked &&
                 (c->txn_refetch ? cache_unsynced_mark(c) == 0 : light && cache_unsynced_present(c));
    c->txn_refetch = 0;
    if (nosync) mdb_env_set_flags(c->env, MDB_NOSYNC, 1);
    int rc = write_txn(c, body, arg, grow_hint, what);
    if (nosync)
        mdb_env_set_flags(c->env, MDB_NOSYNC, 0);
    else if (rc == 0 && !c->opt.no_sync && c->stamp_locked)
        cache_unsynced_clear(c);
    cache_stamp_end(c, rc == 0);
    return rc;
}

/* LMDB reports a short write as EIO, and a write cut short is most often a
 * file-size limit (RLIMIT_FSIZE) or a full disk, which it would not name:
 * if one of them leaves no room for what the commit needed, say that one. */
static int short_write_cause(Cache *c, uint64_t need) {
    int fd;
    struct rlimit rl;
    struct statvfs vs;
    if (mdb_env_get_fd(c->env, &fd) != 0) return EIO;
    uint64_t size = fd_size(fd);
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && size + need > (uint64_t)rl.rlim_cur)
        return EFBIG;
    if (fstatvfs(fd, &vs) == 0 && (uint64_t)vs.f_bavail * vs.f_frsize < need) return ENOSPC;
    return EIO;
}

static int write_txn(Cache *c, TxnBody body, void *arg, uint64_t grow_hint, const char *what) {
    for (int attempt = 0; attempt < 16; attempt++) {
        /* Grow before, not after: a body that hits MDB_MAP_FULL has copied
         * its bytes for nothing and must copy them all again.  The free list
         * may have had room, so this can grow early; the map is address
         * space, and the file's unused tail a hole. */
        MDB_envinfo info;
        mdb_env_info(c->env, &info);
        uint64_t need = grow_hint + grow_hint / 16 + 64 * c->psize;
        int rc = 0;
        if (!c->live_hits && ((uint64_t)info.me_last_pgno + 1) * c->psize + need > c->mapsize) rc = grow(c, need);
        if (!rc) rc = reserve_disk(c, need);
        if (rc) return rc;
        MDB_txn *txn;
        uint64_t map0 = c->mapsize;
        if ((rc = txn_begin(c, 0, &txn)) != 0) return rc;
        if (c->mapsize != map0) {
            /* Another process's growth was adopted: size and reserve again
             * for the file as it is now. */
            mdb_txn_abort(txn);
            map_writable(c, 0);
            continue;
        }
        rc = flush_pending_in(c, txn);
        if (!rc && body) rc = body(c, txn, arg);
        if (!rc) {
            rc = mdb_txn_commit(txn);
        } else {
            mdb_txn_abort(txn);
        }
        map_writable(c, 0);
        if (rc == EIO) rc = short_write_cause(c, grow_hint);
        if (rc == MDB_MAP_FULL) {
            if ((rc = grow(c, grow_hint)) != 0) return rc;
            continue;
        }
        if (rc) return cache_lmdb_err(c, rc, what);
        c->npend = 0;
        memset(c->pctr, 0, sizeof c->pctr);
        return 0;
    }
    seterr(c, "%s: map growth did not converge", what);
    return CACHE_EFULL;
}

int cache_flush(Cache *c) { return cache_write_txn(c, NULL, NULL, 0, "flush statistics"); }

static void pend_hit(Cache *c, const CacheKey *k, int direct, uint64_t compile_ns, const CacheHit *h) {
    c->pctr[direct ? CTR_DIRECT_HITS : CTR_HITS]++;
    c->pctr[CTR_SAVED_NS] += compile_ns;
    uint64_t now = cache_now(c);
    for (int i = 0; i < c->npend; i++)
        if (!memcmp(c->pend[i].key.b, k->b, 16)) {
            c->pend[i].hits++, c->pend[i].last_used = now;
            if (h->verified) c->pend[i].verified = 1, c->pend[i].vctime = h->vctime;
            return;
        }
    if (c->npend == PENDING_MAX) return; /* flushed at release; losing a touch is harmless */
    c->pend[c->npend++] =
        (Pending){.key = *k, .last_used = now, .hits = 1, .verified = h->verified, .vctime = h->vctime};
}

void cache_record_load(Cache *c, const CacheKey *k, uint64_t load_ns) {
    for (int i = 0; i < c->npend; i++)
        if (!memcmp(c->pend[i].key.b, k->b, 16)) {
            c->pend[i].load_ns = load_ns ? load_ns : 1;
            return;
        }
    if (c->npend < PENDING_MAX) c->pend[c->npend++] = (Pending){.key = *k, .load_ns = load_ns ? load_ns : 1};
}

/* ---- entry values -------------------------------------------------------- */

int cache_entry_parse(const void *data, size_t size, EntryView *e, char *why, size_t whylen) {
    const uint8_t *p = data;
    if (size < ENTRY_HDR || ld32(p) != ENTRY_MAGIC) {
        cache_fmt(why, whylen, "bad entry header");
        return CACHE_ECORRUPT;
    }
    if (ld32(p + 4) != ENTRY_VERSION) { /* an older milc's entry: a miss, rebuilt by the next put */
        cache_fmt(why, whylen, "entry format version %u, this milc reads %u", ld32(p + 4), (unsigned)ENTRY_VERSION);
        return CACHE_ECORRUPT;
    }
    e->created = ld64(p + 8), e->compile_ns = ld64(p + 16), e->total = ld64(p + 24);
    e->mode = (int32_t)ld32(p + 32), e->nsec = ld32(p + 36), e->nchunks = ld32(p + 40);
    e->bound = ld32(p + 44), e->checksum = p + 48;
    uint32_t rlen = ld32(p + 64), dlen = ld32(p + 68), blen = ld32(p + 72);
    uint64_t want = ENTRY_HDR + (uint64_t)e->nsec * 16 + rlen + dlen + 1 + blen + 1;
    /* nchunks bounds an allocation on every hit: no more values than sections
     * plus the pieces of split ones. */
    if (want != size || e->bound < 64 || e->bound % 64 || e->nchunks > e->nsec + e->total / e->bound + 1) {
        cache_fmt(why, whylen, "entry header sizes do not add up");
        return CACHE_ECORRUPT;
    }
    e->sectab = p + ENTRY_HDR;
    e->record = e->sectab + (size_t)e->nsec * 16, e->rlen = rlen;
    e->desc = (const char *)e->record + rlen;
    e->backend = e->desc + dlen + 1;
    if (e->desc[dlen] || e->backend[blen] || memchr(e->desc, 0, dlen) || memchr(e->backend, 0, blen)) {
        cache_fmt(why, whylen, "entry strings not terminated");
        return CACHE_ECORRUPT;
    }
    /* Every section must lie within the chunks the entry claims. */
    uint64_t sum = 0;
    for (uint32_t i = 0; i < e->nsec; i++) {
        uint32_t ch = ld32(e->sectab + 16 * i), off = ld32(e->sectab + 16 * i + 4);
        uint64_t sz = ld64(e->sectab + 16 * i + 8);
        sum += sz;
        if (sz == 0) continue;
        uint64_t pieces = off == 0 ? (sz + e->bound - 1) / e->bound : 1;
        if (sz > e->total || ch >= e->nchunks || pieces > e->nchunks - ch || off % 64 ||
            (pieces == 1 && (uint64_t)off + sz > e->bound)) {
            cache_fmt(why, whylen, "section %u out of bounds", i);
            return CACHE_ECORRUPT;
        }
    }
    if (sum != e->total) {
        cache_fmt(why, whylen, "section sizes do not add up");
        return CACHE_ECORRUPT;
    }
    return 0;
}

static void data_key(uint8_t dk[20], const CacheKey *k, uint32_t chunk) {
    memcpy(dk, k->b, 16);
    /* Big-endian so a key's chunks are adjacent and in order in the B-tree. */
    dk[16] = (uint8_t)(chunk >> 24), dk[17] = (uint8_t)(chunk >> 16), dk[18] = (uint8_t)(chunk >> 8),
    dk[19] = (uint8_t)chunk;
}

/* Bytes each chunk must hold, from the section table. */
static void chunk_needs(const EntryView *e, uint64_t *need) {
    memset(need, 0, sizeof *need * e->nchunks);
    for (uint32_t i = 0; i < e->nsec; i++) {
        uint32_t ch = ld32(e->sectab + 16 * i), off = ld32(e->sectab + 16 * i + 4);
        uint64_t sz = ld64(e->sectab + 16 * i + 8);
        if (!sz) continue;
        if ((uint64_t)off + sz <= e->bound) {
            if (need[ch] < off + sz) need[ch] = off + sz;
            continue;
        }
        for (uint64_t done = 0; done < sz; done += e->bound, ch++) {
            uint64_t piece = sz - done < e->bound ? sz - done : e->bound;
            if (need[ch] < piece) need[ch] = piece;
        }
    }
}

static void fill_info(CacheEntryInfo *info, const CacheKey *k, const EntryView *e, const MDB_val *usage) {
    memset(info, 0, sizeof *info);
    info->key = *k;
    info->description = e->desc, info->backend = e->backend;
    info->mode = e->mode, info->nsections = e->nsec, info->bytes = e->total;
    info->created_ns = e->created, info->compile_ns = e->compile_ns;
    info->record = e->record, info->record_len = e->rlen;
    memcpy(info->checksum, e->checksum, 16);
    for (uint32_t i = 0; i < e->nsec; i++)
        info->copied += ld32(e->sectab + 16 * i + 4) + ld64(e->sectab + 16 * i + 8) > e->bound;
    info->last_used_ns = e->created;
    if (usage && usage->mv_size >= USAGE_MIN) {
        info->last_used_ns = ld64(usage->mv_data);
        info->hits = ld64((uint8_t *)usage->mv_data + 8);
        info->load_ns = usage->mv_size >= USAGE_LEN ? ld64((uint8_t *)usage->mv_data + 24) : 0;
    }
}

/* Empty sections point here so every section pointer is non-NULL and aligned. */
static _Alignas(64) const uint8_t empty_section[64];

void cache_hit_free(CacheHit *h) {
    if (!h) return;
    if (h->heap)
        for (uint32_t i = 0; i < h->nsec; i++) free(h->heap[i]);
    free(h->heap);
    free(h->secs);
    free(h->chunkp);
    free(h->chunksz);
    free(h);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/* Map every page of the artifact's values now: one call per value instead of
 * a fault per page or folio on first touch.  The caller reads them all next
 * (checksum, or the runtime), so nothing is wasted.  Best effort: a kernel
 * without MADV_POPULATE_READ gets a readahead hint instead. */
static void populate(const CacheHit *h, uint64_t psize) {
    for (uint32_t i = 0; i < h->nchunks; i++) {
        uintptr_t a = (uintptr_t)h->chunkp[i] & ~(uintptr_t)(psize - 1);
        size_t n = (size_t)((uintptr_t)h->chunkp[i] + h->chunksz[i] - a);
        if (madvise((void *)a, n, MADV_POPULATE_READ) != 0 && errno == EINVAL) madvise((void *)a, n, MADV_WILLNEED);
    }
}

/* The entry checksum computed over the stored pieces, without materializing
 * split sections; on every core (checksum.c), each thread mapping its
 * pieces' pages in one call each before it reads them.  0, or CACHE_ENOMEM
 * (no checksum computed). */
static int hit_checksum(const CacheHit *h, const EntryView *e, uint8_t out[16]) {
    uint32_t npieces = 0;
    for (uint32_t i = 0; i < h->nsec; i++) {
        uint64_t sz = h->secs[i].size;
        npieces += h->secs[i].data || !sz ? 1 : (uint32_t)((sz + h->bound - 1) / h->bound);
    }
    CachePiece *pieces = malloc((npieces ? npieces : 1) * sizeof *pieces);
    uint32_t *first = malloc((h->nsec + 1) * sizeof *first);
    int rc = CACHE_ENOMEM;
    if (pieces && first) {
        uint32_t np = 0;
        for (uint32_t i = 0; i < h->nsec; i++) {
            uint64_t sz = h->secs[i].size;
            first[i] = np;
            if (h->secs[i].data || !sz) {
                pieces[np++] = (CachePiece){h->secs[i].data, sz};
                continue;
            }
            uint32_t ch = ld32(e->sectab + 16 * i);
            for (uint64_t done = 0; done < sz; done += h->bound, ch++) {
                uint64_t piece = sz - done < h->bound ? sz - done : h->bound;
                pieces[np++] = (CachePiece){h->chunkp[ch], piece};
            }
        }
        first[h->nsec] = np;
        rc = cache_pieces_checksum(pieces, first, h->nsec, 1, out);
    }
    free(pieces), free(first);
    return rc;
}

/* Load entry k within txn into a new CacheHit (txn not owned by it yet). */
int cache_load(Cache *c, MDB_txn *txn, const CacheKey *k, const void *rec, size_t rlen, unsigned flags,
               CacheHit **out) {
    *out = NULL;
    MDB_val key = mval(k->b, 16), v, u;
    int rc = mdb_get(txn, c->db_meta, &key, &v);
    if (rc == MDB_NOTFOUND) return CACHE_ENOTFOUND;
    if (rc) return cache_lmdb_err(c, rc, "mdb_get");
    EntryView e;
    char why[128];
    if (cache_entry_parse(v.mv_data, v.mv_size, &e, why, sizeof why) != 0) {
        seterr(c, "entry is damaged: %s", why);
        return CACHE_ECORRUPT;
    }
    if (rec && (rlen != e.rlen || memcmp(rec, e.record, rlen) != 0)) {
        seterr(c, "stored key record differs from the caller's (hash collision or an input missing from the key)");
        return CACHE_EMISMATCH;
    }
    CacheHit *h = calloc(1, sizeof *h);
    if (!h) return CACHE_ENOMEM;
    h->c = c, h->nsec = e.nsec, h->nchunks = e.nchunks, h->bound = e.bound;
    h->secs = calloc(e.nsec ? e.nsec : 1, sizeof *h->secs);
    h->chunkp = calloc(e.nchunks ? e.nchunks : 1, sizeof *h->chunkp);
    h->chunksz = calloc(e.nchunks ? e.nchunks : 1, sizeof *h->chunksz);
    if (!h->secs || !h->chunkp || !h->chunksz) {
        cache_hit_free(h);
        return CACHE_ENOMEM;
    }
    chunk_needs(&e, h->chunksz);
    for (uint32_t i = 0; i < e.nchunks; i++) {
        uint8_t dk[20];
        data_key(dk, k, i);
        MDB_val dkv = mval(dk, 20), dv;
        rc = mdb_get(txn, c->db_data, &dkv, &dv);
        if (rc && rc != MDB_NOTFOUND) {
            cache_hit_free(h);
            return cache_lmdb_err(c, rc, "mdb_get");
        }
        /* Alignment is our promise; LMDB keeps it for values on overflow pages,
         * which is why put pads every value past half a page. */
        if (rc == MDB_NOTFOUND || dv.mv_size < h->chunksz[i] || ((uintptr_t)dv.mv_data & 15)) {
            seterr(c, "entry is damaged: value %u %s", i, rc ? "missing" : "too short or misaligned");
            cache_hit_free(h);
            return CACHE_ECORRUPT;
        }
        h->chunkp[i] = dv.mv_data;
        h->chunksz[i] = dv.mv_size;
    }
    for (uint32_t i = 0; i < e.nsec; i++) {
        uint32_t ch = ld32(e.sectab + 16 * i), off = ld32(e.sectab + 16 * i + 4);
        uint64_t sz = ld64(e.sectab + 16 * i + 8);
        h->secs[i].size = sz;
        if (!sz)
            h->secs[i].data = empty_section;
        else if ((uint64_t)off + sz <= e.bound)
            h->secs[i].data = h->chunkp[ch] + off;
        else
            h->split++; /* materialized by cache_hit_sections */
    }
    rc = mdb_get(txn, c->db_usage, &key, &u);
    int verify = (flags & (CACHE_GET_VERIFY | CACHE_GET_VERIFY_ONCE)) != 0;
    CacheCtime ct = {0, 0};
    uint64_t clean = verify ? cache_clean_tag(c, &ct) : 0;
    if (verify && !(flags & CACHE_GET_VERIFY)) /* passed already, and nothing wrote the file since? */
        verify = !(clean && rc == 0 && u.mv_size >= USAGE_MARK && ld64((uint8_t *)u.mv_data + 16) == clean);
    if (!verify && (flags & CACHE_GET_POPULATE)) populate(h, c->psize);
    if (verify) {
        h->vctime = ct;
        uint8_t sum[16];
        if (hit_checksum(h, &e, sum) != 0) {
            cache_hit_free(h);
            return CACHE_ENOMEM;
        }
        if (memcmp(sum, e.checksum, 16) != 0) {
            seterr(c, "entry checksum mismatch: stored bytes are damaged");
            cache_hit_free(h);
            return CACHE_ECORRUPT;
        }
        h->verified = 1;
    }
    fill_info(&h->info, k, &e, rc == 0 ? &u : NULL);
    h->info.checked = h->verified;
    h->sectab = e.sectab;
    *out = h;
    return 0;
}

int cache_hit_sections(CacheHit *h, const CacheSection **secs, int *nsecs) {
    if (h->split) {
        if (!h->heap && !(h->heap = calloc(h->nsec, sizeof *h->heap))) return CACHE_ENOMEM;
        for (uint32_t i = 0; i < h->nsec; i++) {
            if (h->secs[i].data) continue;
            uint64_t sz = h->secs[i].size;
            uint8_t *buf = aligned_alloc(64, (size_t)((sz + 63) & ~(uint64_t)63));
            if (!buf) return CACHE_ENOMEM;
            uint32_t ch = ld32(h->sectab + 16 * i);
            for (uint64_t done = 0; done < sz; done += h->bound, ch++) {
                uint64_t piece = sz - done < h->bound ? sz - done : h->bound;
                memcpy(buf + done, h->chunkp[ch], (size_t)piece);
            }
            h->heap[i] = buf;
            h->secs[i].data = buf;
        }
        h->split = 0;
    }
    *secs = h->secs;
    *nsecs = (int)h->nsec;
    return 0;
}

const CacheEntryInfo *cache_hit_info(const CacheHit *h) { return &h->info; }

void cache_hit_release(CacheHit *h) {
    if (!h) return;
    Cache *c = h->c;
    if (h->txn) {
        mdb_txn_abort(h->txn);
        c->live_hits--;
    }
    cache_hit_free(h);
    /* Statistics are best-effort: a failed flush keeps them pending. */
    if (c->npend >= FLUSH_EVERY && !c->live_hits) cache_flush(c);
}

static int get_common(Cache *c, const CacheKey *lookup, const void *rec, size_t rlen, unsigned flags, CacheHit **hit,
                      int direct, CacheKey *akey_out) {
    *hit = NULL;
    if (!c || !lookup || (rlen && !rec)) return CACHE_EINVAL;
    c->err[0] = 0;
    MDB_txn *txn;
    int rc = cache_read_txn(c, &txn);
    if (rc) return rc;
    CacheKey akey = *lookup;
    if (direct) {
        MDB_val k = mval(lookup->b, 16), v;
        rc = mdb_get(txn, c->db_direct, &k, &v);
        if (rc == 0 && (v.mv_size != 16 + rlen || (rec && memcmp((uint8_t *)v.mv_data + 16, rec, rlen))))
            rc = CACHE_EMISMATCH, seterr(c, "stored direct record differs from the caller's");
        else if (rc == MDB_NOTFOUND)
            rc = CACHE_ENOTFOUND;
        else if (rc == 0)
            memcpy(akey.b, v.mv_data, 16);
        if (rc == 0 && akey_out) *akey_out = akey;
        if (rc == 0) rc = cache_load(c, txn, &akey, NULL, 0, flags, hit);
    } else {
        rc = cache_load(c, txn, &akey, rec, rlen, flags, hit);
    }
    if (rc) {
        mdb_txn_abort(txn);
        if (!(flags & CACHE_GET_NOTOUCH)) {
            /* A direct miss is not a miss yet: the full lookup that follows decides. */
            if (rc == CACHE_ECORRUPT)
                c->pctr[CTR_ERRORS]++;
            else if (!direct && !(flags & CACHE_GET_COUNT_DIRECT) && CACHE_IS_MISS(rc))
                c->pctr[CTR_MISSES]++;
        }
        return rc;
    }
    (*hit)->txn = txn;
    c->live_hits++;
    if (!(flags & CACHE_GET_NOTOUCH))
        pend_hit(c, &akey, direct || (flags & CACHE_GET_COUNT_DIRECT), (*hit)->info.compile_ns, *hit);
    return 0;
}

int cache_get(Cache *c, const CacheKey *k, const void *record, size_t record_len, unsigned flags, CacheHit **hit) {
    return get_common(c, k, record, record_len, flags, hit, 0, NULL);
}

int cache_get_direct(Cache *c, const CacheKey *dkey, const void *drecord, size_t drecord_len, unsigned flags,
                     CacheHit **hit, CacheKey *akey) {
    return get_common(c, dkey, drecord, drecord_len, flags, hit, 1, akey);
}

/* ---- put ----------------------------------------------------------------- */

/* Remove key's entry (metadata, usage, every chunk) inside txn.  *bytes gets
 * its artifact size.  MDB_NOTFOUND if there was no metadata. */
int cache_del_entry(Cache *c, MDB_txn *txn, const CacheKey *k, uint64_t *bytes) {
    MDB_val key = mval(k->b, 16), v;
    uint64_t total = 0;
    int rc = mdb_get(txn, c->db_meta, &key, &v), had = rc == 0;
    if (rc && rc != MDB_NOTFOUND) return rc;
    if (had) {
        EntryView e;
        if (cache_entry_parse(v.mv_data, v.mv_size, &e, NULL, 0) == 0) total = e.total;
        if ((rc = mdb_del(txn, c->db_meta, &key, NULL)) != 0) return rc;
    }
    if ((rc = mdb_del(txn, c->db_usage, &key, NULL)) != 0 && rc != MDB_NOTFOUND) return rc;
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(txn, c->db_data, &cur)) != 0) return rc;
    uint8_t dk[20];
    data_key(dk, k, 0);
    MDB_val ck = mval(dk, 20), cv;
    /* Seek afresh after each delete rather than trust cursor state across it. */
    while ((rc = mdb_cursor_get(cur, &ck, &cv, MDB_SET_RANGE)) == 0 && ck.mv_size == 20 &&
           !memcmp(ck.mv_data, k->b, 16)) {
        if ((rc = mdb_cursor_del(cur, 0)) != 0) break;
        ck = mval(dk, 20);
    }
    mdb_cursor_close(cur);
    if (rc && rc != MDB_NOTFOUND) return rc;
    if (!had) return MDB_NOTFOUND;
    if (bytes) *bytes = total;
    if ((rc = ctr_add(c, txn, CTR_ENTRIES, -1)) != 0) return rc;
    return ctr_add(c, txn, CTR_BYTES, -(int64_t)total);
}

typedef struct LruItem {
    CacheKey key;
    uint64_t last_used;
} LruItem;

static int lru_cmp(const void *a, const void *b) {
    const LruItem *x = a, *y = b;
    if (x->last_used != y->last_used) return x->last_used < y->last_used ? -1 : 1;
    return memcmp(x->key.b, y->key.b, 16);
}

/* Evict entries last used before age_cut, then least-recently-used ones while
 * artifact bytes exceed limit (0 = none); never keep (may be NULL). */
int cache_evict_in(Cache *c, MDB_txn *txn, uint64_t limit, uint64_t age_cut, const CacheKey *keep, uint64_t *nev,
                   uint64_t *bytes_ev) {
    uint64_t bytes = ctr_get(c, txn, CTR_BYTES);
    *nev = *bytes_ev = 0;
    if ((!limit || bytes <= limit) && !age_cut) return 0;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(txn, c->db_usage, &cur);
    if (rc) return rc;
    size_t n = 0, cap = 64;
    LruItem *items = malloc(cap * sizeof *items);
    MDB_val k, v;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && items; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 16 || v.mv_size < USAGE_MIN || (keep && !memcmp(k.mv_data, keep->b, 16))) continue;
        if (n == cap) {
            LruItem *ni = realloc(items, (cap *= 2) * sizeof *items);
            if (!ni) break;
            items = ni;
        }
        memcpy(items[n].key.b, k.mv_data, 16);
        items[n++].last_used = ld64(v.mv_data);
    }
    mdb_cursor_close(cur);
    if (!items) return ENOMEM;
    if (rc != MDB_NOTFOUND && rc != 0) {
        free(items);
        return rc;
    }
    qsort(items, n, sizeof *items, lru_cmp);
    rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (items[i].last_used >= age_cut && (!limit || bytes <= limit)) break;
        uint64_t b = 0;
        rc = cache_del_entry(c, txn, &items[i].key, &b);
        if (rc == MDB_NOTFOUND) rc = 0;
        bytes = b > bytes ? 0 : bytes - b;
        ++*nev, *bytes_ev += b;
    }
    free(items);
    return rc;
}

typedef struct PutJob {
    const CacheKey *key;
    uint8_t *meta; /* its checksum is filled in by put_body unless have_sum */
    int have_sum;
    size_t meta_len;
    const CacheSection *secs;
    const EntryView *e;
    const uint64_t *valsz; /* per chunk */
    uint64_t limit;
    uint64_t now;
    const CachePutOptions *po; /* its direct key, if any, goes in with the entry */
    int filled;                /* po->fill has been called: its bytes cannot be had again */
} PutJob;

/* Bytes bound for values reserved in the map.  With WRITEMAP they go in
 * with pwrite at their file offset, not memcpy through the map: a store into
 * an unfilled page of a shared mapping first faults the page in for reading,
 * and the kernel's readahead then zero-fills folios far past what is written
 * (three quarters of a put's CPU time, measured).  pwrite of whole pages
 * allocates page-cache folios without reading or zeroing them, and the map
 * sees them (one page cache).
 *
 * Each 2 MB block of the file is gathered here and written with one pwrite:
 * the page cache then holds it as one 2 MB folio, which a hit's map takes
 * as one PMD entry.  Written piecewise (a section, a gap, the next section)
 * the same bytes became folios of 4-256 KB, and mapping a 160 MB model took
 * 41k page-table entries: 7-13 ms to populate and 1.5 ms to unmap, against
 * 0.2 ms and 0.04 ms as 80 PMDs — and the TLB misses of every later read. */
enum { COPY_BLOCK = 2 << 20 };

typedef struct Stage {
    Cache *c;
    int fd;                      /* -1: no WRITEMAP, copy into LMDB's buffers */
    uint8_t *buf;                /* COPY_BLOCK bytes: one half of c->stage */
    uint64_t blk;                /* file offset of the block staged, UINT64_MAX: none */
    size_t lo, hi;               /* staged: buf[lo, hi) = file [blk + lo, blk + hi) */
    const CachePutOptions *sync; /* a fill that reads its bytes after handing them
                                    over (fill_sync): the halves alternate */
    int writeback;               /* the commit waits for the disk: start it on each
                                    block written (os_start_writeback), so the
                                    commit's sync waits for the last ones only */
} Stage;

static int stage_flush(Stage *s) {
    for (size_t o = s->lo; o < s->hi;) {
        ssize_t w = pwrite(s->fd, s->buf + o, s->hi - o, (off_t)(s->blk + o));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        o += (size_t)w;
    }
    if (s->writeback) os_start_writeback(s->fd, s->blk + s->lo, s->hi - s->lo);
    s->blk = UINT64_MAX, s->lo = s->hi = 0;
    if (!s->sync) return 0;
    s->buf = s->buf == s->c->stage ? s->c->stage + COPY_BLOCK : s->c->stage;
    return s->sync->fill_sync(s->sync->fill_ctx, CACHE_FILL_REUSE);
}

/* Before a value's blocks are written: drop what the page cache already
 * holds of its whole 2 MB blocks.  LMDB's own page writes through the map
 * fault in pages nearby with readahead, small zero folios over megabytes
 * of the hole a later value is reserved in; written into, they stay small
 * (measured: ~4 MB after every value, ~30 MB of a 160 MB model).  Those
 * pages are clean and unused (the value is reserved, nothing reads it). */
static void stage_clear(Stage *s, const uint8_t *val, uint64_t n) {
    if (s->fd < 0) return;
    uint64_t lo = (uint64_t)(val - s->c->mapaddr), hi = lo + n;
    lo = (lo + COPY_BLOCK - 1) & ~(uint64_t)(COPY_BLOCK - 1), hi &= ~(uint64_t)(COPY_BLOCK - 1);
    if (hi > lo) posix_fadvise(s->fd, (off_t)lo, (off_t)(hi - lo), POSIX_FADV_DONTNEED);
}

/* Where a value's bytes come from: the caller's memory, or its fill. */
typedef struct Source {
    const uint8_t *src;        /* NULL: po's fill, or without one zeros */
    const CachePutOptions *po; /* the put's options (NULL: none) */
    int consume;               /* src's pages are handed back once copied (CACHE_PUT_CONSUME) */
} Source;

/* n bytes of the source into dst, then into the checksum while in cache. */
static int source_copy(const Source *from, uint8_t *dst, size_t n, XXH3_state_t *st) {
    if (from->src) {
        memcpy(dst, from->src, n);
        if (from->consume) { /* whole pages inside only */
            os_mem_discard((void *)from->src, n);
            if (from->po->consumed) from->po->consumed(from->po->consumed_ctx, n);
        }
    } else if (from->po && from->po->fill) {
        int rc = from->po->fill(from->po->fill_ctx, dst, n);
        if (rc) return rc;
    } else {
        memset(dst, 0, n);
        return 0;
    }
    if (st) XXH3_128bits_update(st, dst, n);
    return 0;
}

/* Store n bytes at dst, a value reserved in the map (or, without WRITEMAP,
 * in LMDB's staging page), folding them into the checksum while they are in
 * cache: one pass over the caller's bytes.  No source writes zeros. */
static int put_from(Stage *s, uint8_t *dst, Source from, uint64_t n, XXH3_state_t *st) {
    if (s->fd < 0) return source_copy(&from, dst, (size_t)n, st);
    for (uint64_t o = 0; o < n;) {
        uint64_t fo = (uint64_t)(dst + o - s->c->mapaddr), blk = fo & ~(uint64_t)(COPY_BLOCK - 1);
        size_t at = (size_t)(fo - blk);
        int rc;
        if ((s->blk != blk || at != s->hi) && (rc = stage_flush(s)) != 0) return rc;
        if (s->blk != blk) s->blk = blk, s->lo = s->hi = at;
        size_t b = (size_t)(n - o < COPY_BLOCK - at ? n - o : COPY_BLOCK - at);
        if ((rc = source_copy(&from, s->buf + at, b, st)) != 0) return rc;
        if (from.src) from.src += b;
        s->hi = at + b;
        o += b;
        if (s->hi == COPY_BLOCK && (rc = stage_flush(s)) != 0) return rc;
    }
    return 0;
}

static int put_bytes(Stage *s, uint8_t *dst, const uint8_t *src, uint64_t n, XXH3_state_t *st) {
    return put_from(s, dst, (Source){src, NULL, 0}, n, st);
}

/* A direct key's value: the artifact key, then the direct record. */
static int direct_in(Cache *c, MDB_txn *txn, const CacheKey *dkey, const void *drec, size_t dlen,
                     const CacheKey *akey) {
    uint8_t *val = malloc(16 + dlen);
    if (!val) return ENOMEM;
    memcpy(val, akey->b, 16);
    if (dlen) memcpy(val + 16, drec, dlen);
    MDB_val k = mval(dkey->b, 16), v = mval(val, 16 + dlen);
    int rc = mdb_put(txn, c->db_direct, &k, &v, 0);
    free(val);
    return rc;
}

static int put_entry(Cache *c, MDB_txn *txn, PutJob *j) {
    const CachePutOptions *fill = j->po && j->po->fill ? j->po : NULL;
    int consume = !fill && j->po && (j->po->flags & CACHE_PUT_CONSUME);
    if ((fill || consume) && j->filled) {
        seterr(c, "store entry: the cache map had to grow while the entry's bytes were streamed in; store it again");
        return CACHE_EFULL;
    }
    int rc = cache_del_entry(c, txn, j->key, NULL);
    if (rc && rc != MDB_NOTFOUND) return rc;
    /* Copy each section into the values reserved for it (through the
     * 2 MB write-combining Stage with WRITEMAP); zero the gaps so stored
     * bytes never depend on heap garbage.  The checksum (checksum.c) is
     * built on the way, one section digest at a time. */
    XXH3_state_t sum, sec, *st = j->have_sum ? NULL : &sec;
    if (st) XXH3_128bits_reset(&sum);
    uint8_t *val = NULL;
    uint64_t pos = 0, vsz = 0;
    uint32_t cur = UINT32_MAX;
    unsigned envf = 0;
    mdb_env_get_flags(c->env, &envf); /* MDB_NOSYNC: no_sync, or a put that waits for no disk */
    Stage sg = {c, -1, NULL, UINT64_MAX, 0, 0, fill && fill->fill_sync ? fill : NULL, !(envf & MDB_NOSYNC)};
    if (!c->mapaddr || (cache_tune & CACHE_TUNE_NO_PWRITE) || mdb_env_get_fd(c->env, &sg.fd) != 0) sg.fd = -1;
    if (sg.fd >= 0 && !c->stage && !(c->stage = aligned_alloc(64, 2 * COPY_BLOCK))) return ENOMEM;
    sg.buf = c->stage;
    for (uint32_t i = 0; i < j->e->nsec; i++) {
        uint32_t ch = ld32(j->e->sectab + 16 * i), off = ld32(j->e->sectab + 16 * i + 4);
        uint64_t sz = j->secs[i].size, done = 0;
        if (st) XXH3_128bits_reset(st);
        while (done < sz) {
            uint64_t piece = sz - done < j->e->bound ? sz - done : j->e->bound;
            if (ch != cur) {
                if (val && (rc = put_bytes(&sg, val + pos, NULL, vsz - pos, NULL)) != 0) return rc;
                /* Without WRITEMAP the next put may spill (write out and
                 * free) the pages earlier values were filled into: a fill
                 * still reading them finishes first (two calls: all of it). */
                if (val && sg.fd < 0 && fill && fill->fill_sync &&
                    ((rc = fill->fill_sync(fill->fill_ctx, CACHE_FILL_REUSE)) != 0 ||
                     (rc = fill->fill_sync(fill->fill_ctx, CACHE_FILL_REUSE)) != 0))
                    return rc;
                uint8_t dk[20];
                data_key(dk, j->key, ch);
                MDB_val k = mval(dk, 20), v = mval(NULL, j->valsz[ch]);
                if ((rc = mdb_put(txn, c->db_data, &k, &v, MDB_RESERVE)) != 0) return rc;
                val = v.mv_data, vsz = j->valsz[ch], pos = 0, cur = ch;
                stage_clear(&sg, val, vsz);
            }
            uint64_t at = done ? 0 : off;
            j->filled |= fill != NULL || consume;
            if ((rc = put_bytes(&sg, val + pos, NULL, at - pos, NULL)) != 0 ||
                (rc = put_from(&sg, val + at,
                               (Source){fill ? NULL : (const uint8_t *)j->secs[i].data + done, j->po, consume},
                               piece,
                               st)) != 0)
                return rc;
            pos = at + piece;
            done += piece;
            if (done < sz) ch++;
        }
        if (st) {
            uint8_t d[16];
            cache_checksum_digest(st, d);
            cache_checksum_add(&sum, sz, d);
        }
    }
    if (val && (rc = put_bytes(&sg, val + pos, NULL, vsz - pos, NULL)) != 0) return rc;
    if (sg.fd >= 0 && (rc = stage_flush(&sg)) != 0) return rc;
    if (fill && fill->fill_sync && (rc = fill->fill_sync(fill->fill_ctx, CACHE_FILL_COMMIT)) != 0) return rc;
    if (st) cache_checksum_digest(&sum, j->meta + 48);
    MDB_val k = mval(j->key->b, 16), v = mval(j->meta, j->meta_len);
    if ((rc = mdb_put(txn, c->db_meta, &k, &v, 0)) != 0) return rc;
    /* A checksum built from the bytes as copied into place counts as a
     * passed verification (for CACHE_GET_VERIFY_ONCE). */
    uint8_t u[USAGE_LEN];
    st64(u, j->now), st64(u + 8, 0), st64(u + 16, st ? c->wtag : 0), st64(u + 24, 0);
    v = mval(u, USAGE_LEN);
    if ((rc = mdb_put(txn, c->db_usage, &k, &v, 0)) != 0) return rc;
    if ((rc = ctr_add(c, txn, CTR_ENTRIES, 1)) != 0) return rc;
    if ((rc = ctr_add(c, txn, CTR_BYTES, (int64_t)j->e->total)) != 0) return rc;
    if (j->po && j->po->dkey && (rc = direct_in(c, txn, j->po->dkey, j->po->drecord, j->po->drecord_len, j->key)) != 0)
        return rc;
    uint64_t limit = j->limit ? j->limit : ctr_get(c, txn, CTR_MAX_BYTES), nev, bev;
    return limit ? cache_evict_in(c, txn, limit, 0, j->key, &nev, &bev) : 0;
}

/* The transaction's body.  A failed one is aborted next, which frees the
 * pages a fill without WRITEMAP wrote into: the fill is told first. */
static int put_body(Cache *c, MDB_txn *txn, void *arg) {
    PutJob *j = arg;
    int rc = put_entry(c, txn, j);
    if (rc && j->filled && j->po->fill && j->po->fill_sync) j->po->fill_sync(j->po->fill_ctx, CACHE_FILL_ABORT);
    return rc;
}

/* The entry's bound (its header's "chunk bound"): the largest section up to
 * whole_bytes, rounded to 64, or chunk_bytes if none is larger.  Every
 * reader, also an older milc's, takes a section that fits in the bound as
 * lying in one value, so a put may raise the bound per entry without a new
 * format: a large section is then one value, mapped by a hit, not copied. */
static uint64_t entry_bound(const Cache *c, const CacheSection *secs, int nsecs) {
    uint64_t bound = c->opt.chunk_bytes;
    for (int i = 0; i < nsecs; i++) {
        uint64_t sz = (secs[i].size + 63) & ~(uint64_t)63;
        if (sz > bound && sz <= c->opt.whole_bytes) bound = sz;
    }
    return bound;
}

int cache_put_at(Cache *c, const CacheKey *k, const void *record, size_t rlen, const CacheEntryMeta *m,
                 const CacheSection *secs, int nsecs, uint64_t created, const uint8_t *checksum,
                 const CachePutOptions *po) {
    if (!c || !k || (rlen && !record) || nsecs < 0 || (nsecs && !secs) || rlen > UINT32_MAX) return CACHE_EINVAL;
    if (po && po->dkey && po->drecord_len && !po->drecord) return CACHE_EINVAL;
    c->err[0] = 0;
    static const CacheEntryMeta none;
    if (!m) m = &none;
    const char *desc = m->description ? m->description : "", *backend = m->backend ? m->backend : "";
    size_t dlen = strlen(desc), blen = strlen(backend);
    uint64_t pack = c->opt.chunk_bytes, bound = entry_bound(c, secs, nsecs), total = 0;
    /* Lay sections out: each at a 64-byte offset in the current value while it
     * fits in chunk_bytes, else in a fresh value; one larger than that gets a
     * value of its own, and one larger than the bound values of its own
     * (bound bytes each, the last shared with what follows). */
    size_t mlen = ENTRY_HDR + (size_t)nsecs * 16 + rlen + dlen + 1 + blen + 1;
    uint8_t *meta = calloc(1, mlen);
    if (!meta) return CACHE_ENOMEM;
    uint8_t *tab = meta + ENTRY_HDR;
    uint32_t nchunks = 0;
    uint64_t fill = 0;
    for (int i = 0; i < nsecs; i++) {
        uint64_t sz = secs[i].size, o = (fill + 63) & ~(uint64_t)63;
        uint32_t ch = 0;
        total += sz;
        if (sz && !secs[i].data && !(po && po->fill)) {
            free(meta);
            return CACHE_EINVAL;
        }
        if (!sz) {
            o = 0;
        } else if (sz <= pack) {
            if (!nchunks || o + sz > pack)
                ch = nchunks++, o = 0;
            else
                ch = nchunks - 1;
            fill = o + sz;
        } else if (sz <= bound) {
            ch = nchunks++, o = 0;
            fill = sz;
        } else {
            uint64_t pieces = (sz + bound - 1) / bound;
            ch = nchunks, o = 0;
            nchunks += (uint32_t)pieces;
            fill = sz - (pieces - 1) * bound;
        }
        st32(tab + 16 * i, ch), st32(tab + 16 * i + 4, (uint32_t)o), st64(tab + 16 * i + 8, sz);
    }
    uint64_t now = cache_now(c);
    st32(meta, ENTRY_MAGIC), st32(meta + 4, ENTRY_VERSION);
    st64(meta + 8, created ? created : now), st64(meta + 16, m->compile_ns), st64(meta + 24, total);
    st32(meta + 32, (uint32_t)m->mode), st32(meta + 36, (uint32_t)nsecs), st32(meta + 40, nchunks);
    st32(meta + 44, (uint32_t)bound);
    /* Without a given checksum, put_body computes it while it copies. */
    if (checksum) memcpy(meta + 48, checksum, 16);
    st32(meta + 64, (uint32_t)rlen), st32(meta + 68, (uint32_t)dlen), st32(meta + 72, (uint32_t)blen);
    uint8_t *p = tab + (size_t)nsecs * 16;
    if (rlen) memcpy(p, record, rlen);
    memcpy(p + rlen, desc, dlen + 1);
    memcpy(p + rlen + dlen + 1, backend, blen + 1);

    EntryView e;
    int rc = cache_entry_parse(meta, mlen, &e, NULL, 0);
    CACHE_ASSERT(rc == 0);
    uint64_t *valsz = calloc(nchunks ? nchunks : 1, sizeof *valsz);
    if (!valsz) {
        free(meta);
        return CACHE_ENOMEM;
    }
    chunk_needs(&e, valsz);
    /* Values longer than half a page go to overflow pages, which LMDB starts
     * 16 bytes past a page boundary: that is where the alignment comes from. */
    for (uint32_t i = 0; i < nchunks; i++)
        if (valsz[i] < c->psize / 2) valsz[i] = c->psize / 2;
    PutJob job = {.key = k,
                  .meta = meta,
                  .have_sum = checksum != NULL,
                  .meta_len = mlen,
                  .secs = secs,
                  .e = &e,
                  .valsz = valsz,
                  .limit = c->opt.max_bytes,
                  .now = now,
                  .po = po};
    c->txn_refetch = po && (po->flags & CACHE_PUT_REFETCHABLE);
    uint64_t dextra = po && po->dkey ? po->drecord_len + 4096 : 0;
    rc = cache_write_txn(c, put_body, &job, total + mlen + dextra + (uint64_t)nchunks * c->psize, "store entry");
    free(valsz);
    free(meta);
    return rc;
}

int cache_put(Cache *c, const CacheKey *k, const void *record, size_t record_len, const CacheEntryMeta *m,
              const CacheSection *secs, int nsecs) {
    return cache_put_at(c, k, record, record_len, m, secs, nsecs, 0, NULL, NULL);
}

int cache_put_ex(Cache *c, const CacheKey *k, const void *record, size_t record_len, const CacheEntryMeta *m,
                 const CacheSection *secs, int nsecs, const CachePutOptions *po) {
    return cache_put_at(c, k, record, record_len, m, secs, nsecs, 0, NULL, po);
}

/* One value under a 16-byte key in a small-value database (direct, notes). */
typedef struct KvJob {
    MDB_dbi dbi;
    const CacheKey *key;
    const uint8_t *val;
    size_t len;
} KvJob;

static int kv_body(Cache *c, MDB_txn *txn, void *arg) {
    (void)c;
    KvJob *j = arg;
    MDB_val k = mval(j->key->b, 16), v = mval(j->val, j->len);
    return mdb_put(txn, j->dbi, &k, &v, 0);
}

int cache_direct_put(Cache *c, const CacheKey *dkey, const void *drecord, size_t drecord_len, const CacheKey *akey) {
    if (!c || !dkey || !akey || (drecord_len && !drecord)) return CACHE_EINVAL;
    uint8_t *val = malloc(16 + drecord_len);
    if (!val) return CACHE_ENOMEM;
    memcpy(val, akey->b, 16);
    if (drecord_len) memcpy(val + 16, drecord, drecord_len);
    KvJob j = {c->db_direct, dkey, val, 16 + drecord_len};
    int rc = cache_write_txn(c, kv_body, &j, 16 + drecord_len + 4096, "store direct key");
    free(val);
    return rc;
}

/* ---- notes ---------------------------------------------------------------
 * Value: u32 LE record length ‖ record ‖ the caller's bytes. */

int cache_note_put(Cache *c, const CacheKey *k, const void *record, size_t record_len, const void *value,
                   size_t value_len) {
    if (!c || !k || (record_len && !record) || (value_len && !value) || record_len > CACHE_NOTE_MAX ||
        value_len > CACHE_NOTE_MAX)
        return CACHE_EINVAL;
    uint8_t *v = malloc(4 + record_len + value_len + 1);
    if (!v) return CACHE_ENOMEM;
    st32(v, (uint32_t)record_len);
    if (record_len) memcpy(v + 4, record, record_len);
    if (value_len) memcpy(v + 4 + record_len, value, value_len);
    KvJob j = {c->db_notes, k, v, 4 + record_len + value_len};
    int rc = cache_write_txn(c, kv_body, &j, j.len + 4096, "store note");
    free(v);
    return rc;
}

int cache_note_get(Cache *c, const CacheKey *k, const void *record, size_t record_len, void **value,
                   size_t *value_len) {
    *value = NULL, *value_len = 0;
    if (!c || !k || (record_len && !record)) return CACHE_EINVAL;
    c->err[0] = 0;
    MDB_txn *txn;
    int rc = cache_read_txn(c, &txn);
    if (rc) return rc;
    MDB_val key = mval(k->b, 16), v;
    rc = mdb_get(txn, c->db_notes, &key, &v);
    if (rc == MDB_NOTFOUND) {
        rc = CACHE_ENOTFOUND;
    } else if (rc) {
        rc = cache_lmdb_err(c, rc, "mdb_get");
    } else {
        const uint8_t *p = v.mv_data;
        if (v.mv_size < 4 || ld32(p) != record_len || v.mv_size - 4 < record_len ||
            (record_len && memcmp(p + 4, record, record_len) != 0)) {
            rc = CACHE_EMISMATCH, seterr(c, "stored note record differs from the caller's");
        } else {
            size_t n = v.mv_size - 4 - record_len;
            if (!(*value = malloc(n + 1)))
                rc = CACHE_ENOMEM;
            else
                memcpy(*value, p + 4 + record_len, n), *value_len = n;
        }
    }
    mdb_txn_abort(txn);
    return rc;
}

static int limit_body(Cache *c, MDB_txn *txn, void *arg) { return ctr_set(c, txn, CTR_MAX_BYTES, *(uint64_t *)arg); }

int cache_set_limit(Cache *c, uint64_t max_bytes) {
    return cache_write_txn(c, limit_body, &max_bytes, 4096, "set size limit");
}

/* ---- maintenance ----------------------------------------------------------- */

static int ls_range(Cache *c, const CacheKey *only, CacheEntryFn fn, void *ctx) {
    MDB_txn *txn;
    int rc = cache_read_txn(c, &txn), stop = 0;
    if (rc) return rc;
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(txn, c->db_meta, &cur)) != 0) {
        mdb_txn_abort(txn);
        return cache_lmdb_err(c, rc, "mdb_cursor_open");
    }
    MDB_val k = only ? mval(only->b, 16) : mval(NULL, 0), v;
    int found = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, only ? MDB_SET_KEY : MDB_FIRST); rc == 0 && !stop;
         rc = only ? MDB_NOTFOUND : mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        EntryView e;
        if (k.mv_size != 16 || cache_entry_parse(v.mv_data, v.mv_size, &e, NULL, 0) != 0) continue;
        CacheKey key;
        memcpy(key.b, k.mv_data, 16);
        MDB_val uk = mval(key.b, 16), u;
        CacheEntryInfo info;
        fill_info(&info, &key, &e, mdb_get(txn, c->db_usage, &uk, &u) == 0 ? &u : NULL);
        found = 1;
        stop = fn(ctx, &info);
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    if (stop) return stop;
    if (rc != MDB_NOTFOUND && rc != 0) return cache_lmdb_err(c, rc, "mdb_cursor_get");
    return only && !found ? CACHE_ENOTFOUND : 0;
}

int cache_ls(Cache *c, CacheEntryFn fn, void *ctx) { return ls_range(c, NULL, fn, ctx); }

int cache_show(Cache *c, const CacheKey *k, CacheEntryFn fn, void *ctx) { return ls_range(c, k, fn, ctx); }

int cache_stat(Cache *c, CacheStats *s) {
    memset(s, 0, sizeof *s);
    MDB_txn *txn;
    int rc = cache_read_txn(c, &txn);
    if (rc) return rc;
    uint64_t v[CTR_COUNT];
    for (int i = 0; i < CTR_COUNT; i++) v[i] = ctr_get(c, txn, i) + c->pctr[i];
    mdb_txn_abort(txn);
    s->hits = v[CTR_HITS], s->direct_hits = v[CTR_DIRECT_HITS], s->misses = v[CTR_MISSES];
    s->errors = v[CTR_ERRORS], s->saved_ns = v[CTR_SAVED_NS], s->entries = v[CTR_ENTRIES];
    s->bytes = v[CTR_BYTES];
    s->max_bytes = c->opt.max_bytes ? c->opt.max_bytes : v[CTR_MAX_BYTES];
    s->file_bytes = file_size(c->datapath);
    s->map_bytes = c->mapsize;
    s->restarted = c->restarted;
    return 0;
}

static int zero_body(Cache *c, MDB_txn *txn, void *arg) {
    static const int ids[] = {CTR_HITS, CTR_DIRECT_HITS, CTR_MISSES, CTR_ERRORS, CTR_SAVED_NS};
    int rc = 0;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0] && !rc; i++) rc = ctr_set(c, txn, ids[i], 0);
    return rc;
}

int cache_zero_stats(Cache *c) { return cache_write_txn(c, zero_body, NULL, 4096, "zero statistics"); }

static int rm_body(Cache *c, MDB_txn *txn, void *arg) {
    int rc = cache_del_entry(c, txn, arg, NULL);
    return rc == MDB_NOTFOUND ? CACHE_ENOTFOUND : rc;
}

int cache_rm(Cache *c, const CacheKey *k) { return cache_write_txn(c, rm_body, (void *)k, 1 << 20, "remove entry"); }

static int clear_body(Cache *c, MDB_txn *txn, void *arg) {
    MDB_dbi dbs[] = {c->db_meta, c->db_data, c->db_usage, c->db_direct, c->db_notes};
    int rc = 0;
    for (int i = 0; i < 5 && !rc; i++) rc = mdb_drop(txn, dbs[i], 0);
    /* Keep the configured limit; everything else starts from zero. */
    uint64_t limit = ctr_get(c, txn, CTR_MAX_BYTES);
    if (!rc) rc = mdb_drop(txn, c->db_count, 0);
    if (!rc && limit) rc = ctr_set(c, txn, CTR_MAX_BYTES, limit);
    return rc;
}

int cache_clear(Cache *c) {
    c->npend = 0;
    memset(c->pctr, 0, sizeof c->pctr);
    return cache_write_txn(c, clear_body, NULL, 1 << 20, "clear cache");
}

typedef struct KeyList {
    CacheKey *keys;
    size_t n, cap;
} KeyList;

static int collect_key(void *ctx, const CacheEntryInfo *e) {
    KeyList *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        CacheKey *nk = realloc(l->keys, cap * sizeof *nk);
        if (!nk) return CACHE_ENOMEM;
        l->keys = nk, l->cap = cap;
    }
    l->keys[l->n++] = e->key;
    return 0;
}

/* All metadata keys, also of entries whose metadata does not parse. */
static int all_keys(Cache *c, KeyList *l) {
    MDB_txn *txn;
    int rc = cache_read_txn(c, &txn);
    if (rc) return rc;
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(txn, c->db_meta, &cur)) == 0) {
        MDB_val k, v;
        for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            if (k.mv_size != 16) continue;
            CacheEntryInfo info;
            memcpy(info.key.b, k.mv_data, 16);
            if ((rc = collect_key(l, &info)) != 0) break;
        }
        mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
    return rc == MDB_NOTFOUND ? 0 : cache_lmdb_err(c, rc, "scan entries");
}

typedef struct VerifyJob {
    const CacheKey *bad;
    size_t nbad;
    uint64_t entries, bytes;
} VerifyJob;

static int verify_body(Cache *c, MDB_txn *txn, void *arg) {
    VerifyJob *j = arg;
    int rc = 0;
    for (size_t i = 0; i < j->nbad && !rc; i++) {
        uint64_t b;
        rc = cache_del_entry(c, txn, &j->bad[i], &b);
        if (rc == MDB_NOTFOUND) rc = 0;
    }
    if (!rc) rc = ctr_set(c, txn, CTR_ENTRIES, j->entries);
    if (!rc) rc = ctr_set(c, txn, CTR_BYTES, j->bytes);
    return rc;
}

int cache_verify(Cache *c, int repair, CacheBadFn fn, void *ctx) {
    KeyList l = {0};
    int rc = all_keys(c, &l);
    CacheKey *bad = rc ? NULL : malloc((l.n ? l.n : 1) * sizeof *bad);
    size_t nbad = 0;
    uint64_t entries = 0, bytes = 0;
    if (!rc && !bad) rc = CACHE_ENOMEM;
    for (size_t i = 0; i < l.n && !rc; i++) {
        /* One read transaction per entry, so a long verify never pins a
         * snapshot of the whole cache. */
        MDB_txn *txn;
        if ((rc = cache_read_txn(c, &txn)) != 0) break;
        CacheHit *h;
        int lr = cache_load(c, txn, &l.keys[i], NULL, 0, CACHE_GET_VERIFY, &h);
        if (lr == 0) {
            entries++, bytes += h->info.bytes;
            cache_hit_free(h);
        } else if (lr == CACHE_ECORRUPT) {
            bad[nbad++] = l.keys[i];
            if (fn) fn(ctx, &l.keys[i], c->err);
        } else if (lr != CACHE_ENOTFOUND) { /* removed meanwhile: fine */
            rc = lr;
        }
        mdb_txn_abort(txn);
    }
    /* Only a repair writes: verify must run on a full disk, where a write
     * transaction cannot reserve its pages, and on a cache others are using. */
    if (!rc && repair) {
        VerifyJob j = {bad, nbad, entries, bytes};
        rc = cache_write_txn(c, verify_body, &j, 1 << 20, "verify");
    }
    free(bad);
    free(l.keys);
    return rc ? rc : (int)nbad;
}

/* ---- gc and compaction ----------------------------------------------------- */

typedef struct GcJob {
    uint64_t limit, age_cut, nev, bev;
} GcJob;

static int gc_body(Cache *c, MDB_txn *txn, void *arg) {
    GcJob *j = arg;
    uint64_t limit = j->limit ? j->limit : c->opt.max_bytes ? c->opt.max_bytes : ctr_get(c, txn, CTR_MAX_BYTES);
    int rc = cache_evict_in(c, txn, limit, j->age_cut, NULL, &j->nev, &j->bev);
    return rc ? rc : mdb_drop(txn, c->db_notes, 0);
}

/* Rewrite data.mdb without free pages.  We must be the only process with the
 * environment open (exclusive flock), and we reopen afterwards; the lock file
 * lock.mdb is removed too, so the next opener initializes it from the new file. */
static int compact(Cache *c, int *done) {
    *done = 0;
    env_close(c);
    int rc = 0;
    if (flock_retry(c->lockfd, LOCK_EX | LOCK_NB) != 0) {
        /* A failed conversion may have dropped our shared lock: take it again. */
        if (flock_retry(c->lockfd, LOCK_SH) != 0) {
            seterr(c, "cannot lock %s: %s", c->lockpath, strerror(errno));
            return CACHE_EIO;
        }
        return env_open(c);
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.compact", c->datapath);
    if ((rc = env_open(c)) != 0) goto relock;
    /* A stale data.mdb.compact (a crash) or a link planted there is removed,
     * not followed: the publish helper unlinks it and creates a fresh one. */
    OsPublish pub;
    if (os_publish_begin_as(&pub, c->datapath, tmp, 0600, c->err, sizeof c->err) != 0) {
        rc = CACHE_EIO;
        goto relock;
    }
    rc = mdb_env_copyfd2(c->env, pub.fd, MDB_CP_COMPACT);
    env_close(c);
    if (rc) {
        rc = cache_lmdb_err(c, rc, "compact");
        os_publish_abort(&pub);
        goto relock;
    }
    if (os_publish_commit(&pub, c->err, sizeof c->err) != 0) {
        rc = CACHE_EIO;
        goto relock;
    }
    unlinkat(c->dirfd, "lock.mdb", 0);
    *done = 1;
relock:
    env_close(c);
    if (flock_retry(c->lockfd, LOCK_SH) != 0) {
        seterr(c, "cannot lock %s: %s", c->lockpath, strerror(errno));
        return CACHE_EIO;
    }
    int orc = env_open(c);
    return rc ? rc : orc;
}

int cache_gc(Cache *c, uint64_t max_bytes, uint64_t max_age_s, int compact_file, CacheGcReport *r) {
    CacheGcReport tmp;
    if (!r) r = &tmp;
    memset(r, 0, sizeof *r);
    if (c->live_hits) {
        seterr(c, "gc needs every hit of this handle released");
        return CACHE_EBUSY;
    }
    r->file_before = file_size(c->datapath);
    uint64_t now = cache_now(c);
    GcJob j = {.limit = max_bytes};
    if (max_age_s) j.age_cut = now > max_age_s * 1000000000u ? now - max_age_s * 1000000000u : 0;
    int rc = cache_write_txn(c, gc_body, &j, 1 << 20, "evict");
    if (rc) return rc;
    r->evicted = j.nev, r->evicted_bytes = j.bev;
    if (compact_file && (rc = compact(c, &r->compacted)) != 0) return rc;
    r->file_after = file_size(c->datapath);
    return 0;
}
