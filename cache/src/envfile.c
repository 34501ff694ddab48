/* envfile.c — sanity checks on data.mdb before LMDB maps it.  LMDB trusts its
 * meta pages: a truncated file makes it fault (SIGBUS) and a garbled meta page
 * can send it anywhere.  We read both meta pages with pread and check what can
 * be checked cheaply: magic, version, page size (equal in both), last page vs.
 * file size, and the two database records (flags, depth, root).  Layout (LMDB 0.9, 64-bit), per meta page:
 *   page header 16 bytes, then MDB_meta: u32 magic 0xBEEFC0DE, u32 version 1,
 *   ptr address, size mapsize, MDB_db dbs[2] (48 bytes each: u32 pad (= page
 *   size in dbs[0]), u16 flags, u16 depth, 4 x u64 counts, u64 root),
 *   u64 last_pg, u64 txnid. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

enum {
    META_OFF = 16, /* PAGEHDRSZ */
    M_MAGIC = 0,
    M_VERSION = 4,
    M_DBS = 24,
    DB_SIZE = 48,
    DB_PAD = 0,
    DB_FLAGS = 4,
    DB_DEPTH = 6,
    DB_ROOT = 40,
    M_LAST_PG = 120,
    M_TXNID = 128,
    META_SIZE = 136,
};
#define LMDB_MAGIC 0xBEEFC0DEu
#define P_INVALID  (~(uint64_t)0)
enum { MDB_INTEGERKEY_FLAG = 0x08, MAX_DEPTH = 32 /* LMDB's cursor stack */ };

/* An MDB_db record (in a meta page or a named database's node) as LMDB will
 * trust it: persistent flags exactly what it or we create (a record claiming
 * sorted duplicates makes LMDB assert in mdb_cursor_init), an empty tree with
 * no depth, a depth LMDB's cursor stack holds, a root inside the used pages.
 * NULL if sane, else why not. */
static const char *db_record_bad(const uint8_t *db, unsigned want_flags, uint64_t last) {
    unsigned flags = db[DB_FLAGS] | db[DB_FLAGS + 1] << 8, depth = db[DB_DEPTH] | db[DB_DEPTH + 1] << 8;
    uint64_t root = ld64(db + DB_ROOT);
    if (flags != want_flags) return "unexpected database flags";
    if (root == P_INVALID) return depth ? "empty tree with a depth" : NULL;
    if (root < 2 || root > last) return "root page out of range";
    if (depth == 0 || depth > MAX_DEPTH) return "bad tree depth";
    return NULL;
}

static int damaged(char *err, size_t errlen, const char *path, const char *dir, const char *why) {
    cache_fmt(err, errlen, "cache file %s is damaged (%s); cache_destroy or deleting the directory %s starts afresh",
              path, why, dir);
    return CACHE_ECORRUPT;
}

int cache_envfile_check(const char *path, const char *dir, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* checked regular by the caller */
    if (fd < 0) {
        if (errno == ENOENT) return 0; /* a new cache */
        cache_fmt(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return CACHE_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        cache_fmt(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return CACHE_EIO;
    }
    int rc = 0;
    uint64_t fsize = (uint64_t)st.st_size;
    uint8_t m[2][META_SIZE];
    char why[160];
    if (fsize == 0) goto leave; /* LMDB initializes an empty file */
    if (pread(fd, m[0], META_SIZE, META_OFF) != META_SIZE) {
        rc = damaged(err, errlen, path, dir, "truncated: no meta page");
        goto leave;
    }
    uint64_t psize = ld32(m[0] + M_DBS + DB_PAD);
    if (psize < 512 || psize > 65536 || (psize & (psize - 1))) {
        snprintf(why, sizeof why, "bad page size %llu in meta page 0", (unsigned long long)psize);
        rc = damaged(err, errlen, path, dir, why);
        goto leave;
    }
    if (fsize < 2 * psize || pread(fd, m[1], META_SIZE, (off_t)psize + META_OFF) != META_SIZE) {
        rc = damaged(err, errlen, path, dir, "truncated: second meta page missing");
        goto leave;
    }
    uint64_t npages = fsize / psize;
    for (int i = 0; i < 2; i++) {
        const uint8_t *p = m[i];
        uint64_t last = ld64(p + M_LAST_PG);
        if (ld32(p + M_MAGIC) != LMDB_MAGIC) {
            snprintf(why, sizeof why, "bad magic in meta page %d", i);
        } else if (ld32(p + M_VERSION) != 1) {
            snprintf(why, sizeof why, "unknown LMDB format version %u in meta page %d", ld32(p + M_VERSION), i);
        } else if (ld32(p + M_DBS + DB_PAD) != psize) {
            /* LMDB takes the page size from the newer meta page. */
            snprintf(why, sizeof why, "meta page %d: page size %u differs from meta page 0's", i,
                     ld32(p + M_DBS + DB_PAD));
        } else if (ld64(p + M_TXNID) != 0 && (ld64(p + M_TXNID) & 1) != (uint64_t)i) {
            /* LMDB writes transaction t's meta to page t & 1 and its readers
             * look there; the newer meta on the other page would have them
             * read a tree no check here has seen. */
            snprintf(why, sizeof why, "meta page %d holds transaction %llu, which belongs on page %d", i,
                     (unsigned long long)ld64(p + M_TXNID), (int)(ld64(p + M_TXNID) & 1));
        } else if (last < 1 || last >= npages) {
            snprintf(why, sizeof why, "meta page %d says %llu pages, file has %llu (truncated?)", i,
                     (unsigned long long)(last + 1), (unsigned long long)npages);
        } else {
            why[0] = 0;
            /* LMDB creates the free list with integer keys, the main DB plain. */
            for (int d = 0; d < 2 && !why[0]; d++) {
                const char *bad = db_record_bad(p + M_DBS + d * DB_SIZE, d ? 0 : MDB_INTEGERKEY_FLAG, last);
                if (bad) snprintf(why, sizeof why, "meta page %d: %s tree: %s", i, d ? "main" : "free-list", bad);
            }
        }
        if (why[0]) {
            rc = damaged(err, errlen, path, dir, why);
            goto leave;
        }
    }
leave:
    close(fd);
    return rc;
}

/* ---- B-tree walk ----------------------------------------------------------
 * LMDB asserts or faults on a garbled branch or leaf page (a bad node offset,
 * child page number or overflow count).  Before any tree is touched through
 * the map we walk every tree of the snapshot with pread and bounds-check what
 * LMDB will follow: page numbers and flags, node offsets and sizes, child and
 * overflow page numbers.  Reads only tree pages (a small fraction of the file),
 * not overflow data.  Page layout: u64 pgno, u16 pad, u16 flags, u16 lower,
 * u16 upper (or u32 page count for overflow), then u16 node offsets; a node is
 * u16 lo, u16 hi, u16 flags, u16 key size, key, data. */
enum { P_BRANCH = 1, P_LEAF = 2, P_OVERFLOW = 4, F_BIGDATA = 1, F_SUBDATA = 2, PAGEHDR = 16, NODEHDR = 8 };

typedef struct Walk {
    int fd;
    uint64_t psize, last;
    uint8_t *page; /* one page per tree level: page + level * psize */
    uint8_t *used; /* per byte of a page: covered by a node yet? */
    uint64_t visited, budget;
    char why[160];
} Walk;

static int walk_read(Walk *w, uint64_t pgno, uint8_t *buf, uint64_t n) {
    if (pgno < 2 || pgno > w->last) {
        snprintf(w->why, sizeof w->why, "page number %llu out of range", (unsigned long long)pgno);
        return -1;
    }
    if (pread(w->fd, buf, (size_t)n, (off_t)(pgno * w->psize)) != (ssize_t)n) {
        snprintf(w->why, sizeof w->why, "page %llu unreadable", (unsigned long long)pgno);
        return -1;
    }
    if (ld64(buf) != pgno) {
        snprintf(w->why, sizeof w->why, "page %llu has a wrong page number", (unsigned long long)pgno);
        return -1;
    }
    return 0;
}

/* A free-list value: u64 count n, then n page numbers, all in range (LMDB
 * hands these pages out to writers).  LMDB reserves these records before it
 * fills them and may leave some with room to spare (count below capacity,
 * even 0, the rest unwritten), so only the first n entries are checked. */
static int walk_idl(Walk *w, const uint8_t *v, uint64_t size) {
    uint64_t n = size >= 8 ? ld64(v) : 0;
    if (size < 8 || size % 8 || n > size / 8 - 1) return -1;
    for (uint64_t i = 1; i <= n; i++)
        if (ld64(v + 8 * i) < 2 || ld64(v + 8 * i) > w->last) return -1;
    return 0;
}

/* The tree rooted at pgno, depth levels deep.  main_db: 1 for the main DB,
 * whose leaves may hold named sub-databases (walked recursively), -1 for the
 * free list, 0 for a named DB. */
static int walk_tree(Walk *w, uint64_t pgno, unsigned depth, unsigned level, int main_db) {
    if (level >= depth || level >= 32) {
        snprintf(w->why, sizeof w->why, "tree deeper than its recorded depth %u", depth);
        return -1;
    }
    if (++w->visited > w->budget) {
        snprintf(w->why, sizeof w->why, "more tree pages than the file holds (a cycle?)");
        return -1;
    }
    uint8_t *pg = w->page + level * w->psize;
    if (walk_read(w, pgno, pg, w->psize)) return -1;
    unsigned flags = pg[10] | pg[11] << 8, lower = pg[12] | pg[13] << 8, upper = pg[14] | pg[15] << 8;
    int leaf = level + 1 == depth;
    if ((flags & (P_BRANCH | P_LEAF | P_OVERFLOW)) != (leaf ? P_LEAF : P_BRANCH) || (flags & 0x60) || lower < PAGEHDR ||
        lower > upper || upper > w->psize || (lower - PAGEHDR) % 2) {
        snprintf(w->why, sizeof w->why, "page %llu has a bad header", (unsigned long long)pgno);
        return -1;
    }
    unsigned nkeys = (lower - PAGEHDR) / 2;
    if (nkeys == 0) {
        snprintf(w->why, sizeof w->why, "page %llu is empty", (unsigned long long)pgno);
        return -1;
    }
    /* LMDB packs nodes edge to edge from upper to the page end and memmoves
     * them by their sizes on every insert or delete: overlapping nodes or
     * gaps would make it scribble, so they must tile that range exactly. */
    memset(w->used, 0, (size_t)w->psize);
    uint64_t covered = 0;
    for (unsigned i = 0; i < nkeys; i++) {
        unsigned off = pg[PAGEHDR + 2 * i] | pg[PAGEHDR + 2 * i + 1] << 8;
        if (off < upper || off + NODEHDR > w->psize) goto bad_node;
        const uint8_t *nd = pg + off;
        uint64_t nsize = NODEHDR + (uint64_t)(nd[6] | nd[7] << 8);
        if (leaf)
            nsize += (nd[4] & F_BIGDATA) ? 8 : (uint64_t)(nd[0] | nd[1] << 8 | nd[2] << 16 | (uint64_t)nd[3] << 24);
        nsize += nsize & 1;
        if (off + nsize > w->psize) goto bad_node;
        for (uint64_t b = off; b < off + nsize; b++) {
            if (w->used[b]) goto bad_node;
            w->used[b] = 1;
        }
        covered += nsize;
    }
    if (covered != w->psize - upper) goto bad_node;
    for (unsigned i = 0; i < nkeys; i++) {
        /* Recursion uses deeper levels of w->page only, so pg stays intact. */
        unsigned off = pg[PAGEHDR + 2 * i] | pg[PAGEHDR + 2 * i + 1] << 8;
        if (off < upper || off + NODEHDR > w->psize) goto bad_node;
        const uint8_t *nd = pg + off;
        uint64_t lo = nd[0] | nd[1] << 8, hi = nd[2] | nd[3] << 8, nflags = nd[4] | nd[5] << 8;
        uint64_t ksize = nd[6] | nd[7] << 8;
        if (off + NODEHDR + ksize > w->psize) goto bad_node;
        if (!leaf) {
            uint64_t child = lo | hi << 16 | nflags << 32;
            if (walk_tree(w, child, depth, level + 1, main_db)) return -1;
            continue;
        }
        uint64_t dsize = lo | hi << 16;
        const uint8_t *data = nd + NODEHDR + ksize;
        /* A database record on an overflow page would escape the checks below. */
        if (nflags & ~(uint64_t)(F_BIGDATA | F_SUBDATA) || ((nflags & F_SUBDATA) && !main_db) ||
            nflags == (F_BIGDATA | F_SUBDATA))
            goto bad_node;
        if (nflags & F_BIGDATA) {
            if (off + NODEHDR + ksize + 8 > w->psize) goto bad_node;
            uint64_t ov = ld64(data);
            uint8_t hdr[PAGEHDR];
            if (walk_read(w, ov, hdr, PAGEHDR)) return -1;
            uint64_t npages = ld32(hdr + 12);
            if ((hdr[10] & (P_BRANCH | P_LEAF | P_OVERFLOW)) != P_OVERFLOW || npages == 0 ||
                npages > w->last + 1 - ov || dsize > npages * w->psize - PAGEHDR) {
                snprintf(w->why, sizeof w->why, "overflow page %llu has a bad header", (unsigned long long)ov);
                return -1;
            }
            if (main_db < 0) {
                uint8_t *v = malloc((size_t)dsize + 1);
                int bad = !v || pread(w->fd, v, (size_t)dsize, (off_t)(ov * w->psize + PAGEHDR)) != (ssize_t)dsize ||
                          walk_idl(w, v, dsize);
                free(v);
                if (bad) goto bad_node;
            }
            continue;
        }
        if (off + NODEHDR + ksize + dsize > w->psize) goto bad_node;
        if (main_db < 0 && (ksize != 8 || walk_idl(w, data, dsize))) goto bad_node;
        if (nflags & F_SUBDATA) {
            if (dsize != DB_SIZE) goto bad_node;
            /* Every named database is ours, created with no flags. */
            const char *bad = db_record_bad(data, 0, w->last);
            if (bad) {
                snprintf(w->why, sizeof w->why, "database record on page %llu: %s", (unsigned long long)pgno, bad);
                return -1;
            }
            uint64_t root = ld64(data + DB_ROOT);
            unsigned d = data[DB_DEPTH] | data[DB_DEPTH + 1] << 8;
            /* A named database's tree: pages are walked into a fresh stack. */
            if (root != P_INVALID) {
                Walk sub = *w;
                sub.page = malloc((size_t)(w->psize * 32));
                if (!sub.page) return -1;
                int rc = walk_tree(&sub, root, d, 0, 0);
                w->visited = sub.visited;
                memcpy(w->why, sub.why, sizeof w->why);
                free(sub.page);
                if (rc) return -1;
                memset(w->used, 0, (size_t)w->psize); /* not needed again for this page */
            }
        }
    }
    return 0;
bad_node:
    snprintf(w->why, sizeof w->why, "page %llu has a bad node", (unsigned long long)pgno);
    return -1;
}

int cache_envfile_walk(const char *path, const char *dir, uint64_t txnid, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* checked regular by the caller */
    if (fd < 0) {
        cache_fmt(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return CACHE_EIO;
    }
    struct stat st;
    uint8_t m[2][META_SIZE];
    int rc = 0;
    Walk w = {.fd = fd};
    if (fstat(fd, &st) != 0 || pread(fd, m[0], META_SIZE, META_OFF) != META_SIZE) {
        rc = damaged(err, errlen, path, dir, "meta page unreadable");
        goto leave;
    }
    w.psize = ld32(m[0] + M_DBS + DB_PAD);
    if (pread(fd, m[1], META_SIZE, (off_t)w.psize + META_OFF) != META_SIZE) {
        rc = damaged(err, errlen, path, dir, "meta page unreadable");
        goto leave;
    }
    /* The meta of our snapshot, where LMDB's readers look for it: page
     * txnid & 1.  Metas alternate, so it is still there while our read
     * transaction lives... unless two commits happened since; then the caller
     * retries. */
    const uint8_t *meta = m[txnid & 1];
    if (ld64(meta + M_TXNID) != txnid) {
        rc = CACHE_EBUSY;
        goto leave;
    }
    w.last = ld64(meta + M_LAST_PG);
    w.budget = (uint64_t)st.st_size / w.psize + 1;
    w.page = malloc((size_t)(w.psize * 32));
    w.used = malloc((size_t)w.psize);
    if (!w.page || !w.used) {
        rc = CACHE_ENOMEM;
        goto leave;
    }
    for (int d = 0; d < 2 && !rc; d++) {
        const uint8_t *db = meta + M_DBS + d * DB_SIZE;
        uint64_t root = ld64(db + DB_ROOT);
        unsigned depth = db[DB_DEPTH] | db[DB_DEPTH + 1] << 8;
        /* This snapshot's meta may be newer than the one open checked. */
        const char *bad = db_record_bad(db, d ? 0 : MDB_INTEGERKEY_FLAG, w.last);
        if (bad) snprintf(w.why, sizeof w.why, "%s", bad);
        if (bad || (root != P_INVALID && walk_tree(&w, root, depth, 0, d == 1 ? 1 : -1))) {
            char why[200];
            snprintf(why, sizeof why, "%s tree: %s", d ? "main" : "free-list", w.why);
            rc = damaged(err, errlen, path, dir, why);
        }
    }
leave:
    free(w.page);
    free(w.used);
    close(fd);
    return rc;
}
