/* remote_redis.c — the shared tier on a Redis server (remote.h): URL and key
 * file, a connection with timeouts and a breaker, and entries stored as an
 * authenticated manifest over authenticated chunks.  Everything that comes
 * back from the server is untrusted until its MAC has been checked. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "internal.h"
#include "milc/remote.h"

/* Server layout (cache/README.md, "Remote tier"). */
#define PREFIX_ENTRY  "milc:e:"
#define PREFIX_DIRECT "milc:d:"
#define PREFIX_CHUNK  "milc:c:"
static const char MAGIC_ENTRY[8] = {'M', 'I', 'L', 'C', 'R', 'M', '0', '1'};
static const char MAGIC_DIRECT[8] = {'M', 'I', 'L', 'C', 'R', 'D', '0', '1'};
static const char MAGIC_CHUNK[8] = {'M', 'I', 'L', 'C', 'R', 'C', '0', '1'};

enum {
    MAN_HDR = 112, /* fixed part of a manifest */
    MAC_BYTES = 16,
    TAG_BYTES = 16, /* crypto_onetimeauth_BYTES */
    WINDOW = 8,     /* chunks in flight per round trip */
    MANIFEST_MAX = 64 << 20,
    STAGE_TTL_S = 3600, /* unpublished chunks of a killed push expire */
    MAX_SECTIONS = 1 << 20,
    MAX_STRING = 1 << 24, /* record, description, backend */
};

struct Remote {
    RemoteOptions o;
    RemoteUrl u;
    uint8_t secret[REMOTE_SECRET_BYTES];
    int has_secret;
    redisContext *ctx;
    int down, warned;
    CacheKey refused; /* the last entry a pull refused: its push replaces it */
    int has_refused;
    int failed_locally; /* the last pull failed storing the entry locally */
    uint8_t *spare;     /* the last freed entry's buffer, kept for the next get */
    size_t spare_len;
    char warning[1024], err[512];
};

/* ---- messages and the breaker --------------------------------------------- */

static int fail(Remote *r, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(Remote *r, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return rc;
}

/* A failure of the server or the link: the handle goes down for good. */
static int trip(Remote *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int trip(Remote *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    if (!r->down && r->u.path[0])
        snprintf(r->warning, sizeof r->warning,
                 "remote cache unix://%s?db=%d is unusable, continuing with the local cache only: %s", r->u.path,
                 r->u.db, r->err);
    else if (!r->down)
        snprintf(r->warning, sizeof r->warning,
                 "remote cache %s:%d/%d is unusable, continuing with the local cache only: %s", r->u.host, r->u.port,
                 r->u.db, r->err);
    r->down = 1;
    if (r->ctx) redisFree(r->ctx);
    r->ctx = NULL;
    return CACHE_EIO;
}

const char *remote_errmsg(const Remote *r) { return r->err; }
int remote_up(const Remote *r) { return !r->down; }
int remote_readonly(const Remote *r) { return r->o.readonly; }

const char *remote_warning(Remote *r) {
    if (!r->down || r->warned) return NULL;
    r->warned = 1;
    return r->warning;
}

/* ---- URL ----------------------------------------------------------------- */

static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Percent-decode s[0..n) into out; control characters are refused. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n) return -1;
            int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
            if (h < 0 || l < 0) return -1;
            c = h * 16 + l;
            i += 2;
        }
        if (c < 0x20 || c == 0x7f || o + 1 >= cap) return -1;
        out[o++] = (char)c;
    }
    out[o] = 0;
    return 0;
}

static int parse_uint(const char *s, size_t n, long max, int *out) {
    if (n == 0 || n > 5) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max) return -1;
    *out = (int)v;
    return 0;
}

/* The URL as a message may show it: a user part (up to the last '@' after
 * the scheme, unless a socket path starts right there) is left out, since it
 * may hold the password, malformed or not. */
static int url_err(char *err, size_t errlen, const char *url, const char *why) {
    const char *rest = strstr(url, "://"), *at = strrchr(url, '@');
    int hide = rest && rest[3] != '/' && at && at > rest;
    int keep = hide ? (int)(rest + 3 - url) : (int)strlen(url);
    cache_fmt(err, errlen,
              "malformed remote URL '%.*s%s%s': %s (expected redis://[user:password@]host:port[/db] or "
              "unix://[user:password@]/path/to/socket[?db=N])",
              keep, url, hide ? "***@" : "", hide ? at + 1 : "", why);
    return CACHE_EINVAL;
}

static int parse_userinfo(const char *s, size_t n, RemoteUrl *u, const char *url, char *err, size_t errlen) {
    const char *colon = memchr(s, ':', n);
    if (!colon) return url_err(err, errlen, url, "the part before '@' must be user:password");
    if (pct_decode(s, (size_t)(colon - s), u->user, sizeof u->user) != 0 ||
        pct_decode(colon + 1, n - (size_t)(colon - s) - 1, u->pass, sizeof u->pass) != 0)
        return url_err(err, errlen, url, "bad user or password (control character, bad %XX escape, or too long)");
    if (!u->pass[0]) return url_err(err, errlen, url, "empty password");
    return 0;
}

static int parse_host(const char *s, size_t n, RemoteUrl *u, const char *url, char *err, size_t errlen) {
    int v6 = n >= 2 && s[0] == '[' && s[n - 1] == ']';
    if (v6) s++, n -= 2;
    if (n == 0 || n >= sizeof u->host) return url_err(err, errlen, url, "missing or overlong host");
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= '0' && c <= '9') || (v6 ? (hexval(c) >= 0 || c == ':' || c == '.')
                                               : ((c | 32) >= 'a' && (c | 32) <= 'z') || c == '.' || c == '-');
        if (!ok) return url_err(err, errlen, url, "bad character in host");
    }
    memcpy(u->host, s, n);
    u->host[n] = 0;
    return 0;
}

/* unix://[user:password@]/path[?db=N]: the socket of a server on this
 * host.  A path that starts right after the scheme has no user part, so it
 * may hold '@'; after a user part, the first '@' ends it. */
static int parse_unix(const char *url, RemoteUrl *u, char *err, size_t errlen) {
    const char *p = url + 7, *at = *p == '/' ? NULL : strchr(p, '@');
    if (at && parse_userinfo(p, (size_t)(at - p), u, url, err, errlen) != 0) return CACHE_EINVAL;
    const char *path = at ? at + 1 : p, *q = strchr(path, '?'), *end = q ? q : path + strlen(path);
    if (*path != '/') return url_err(err, errlen, url, "the socket path must be absolute (unix:///run/redis.sock)");
    if (pct_decode(path, (size_t)(end - path), u->path, sizeof u->path) != 0)
        return url_err(err, errlen, url, "bad socket path (control character, bad %XX escape, or too long)");
    if (u->path[1] == 0) return url_err(err, errlen, url, "missing socket path");
    if (q && (strncmp(q + 1, "db=", 3) != 0 || parse_uint(q + 4, strlen(q + 4), 65535, &u->db) != 0))
        return url_err(err, errlen, url, "only db=N, a number 0-65535, may follow '?' (nothing after it)");
    return 0;
}

int remote_url_parse(const char *url, RemoteUrl *u, char *err, size_t errlen) {
    memset(u, 0, sizeof *u);
    if (url && strncmp(url, "unix://", 7) == 0) return parse_unix(url, u, err, errlen);
    if (!url || strncmp(url, "redis://", 8) != 0)
        return url_err(err, errlen, url ? url : "", "not a redis:// or unix:// URL");
    const char *p = url + 8, *slash = strchr(p, '/'), *end = slash ? slash : p + strlen(p);
    const char *at = memchr(p, '@', (size_t)(end - p));
    if (at && memchr(at + 1, '@', (size_t)(end - at - 1)))
        return url_err(err, errlen, url, "'@' in a password must be written %40");
    if (at && parse_userinfo(p, (size_t)(at - p), u, url, err, errlen) != 0) return CACHE_EINVAL;
    const char *h = at ? at + 1 : p, *colon = NULL;
    for (const char *q = end; q > h; q--)
        if (q[-1] == ':') {
            colon = q - 1;
            break;
        } else if (q[-1] == ']')
            break;
    if (!colon) return url_err(err, errlen, url, "missing :port");
    if (parse_host(h, (size_t)(colon - h), u, url, err, errlen) != 0) return CACHE_EINVAL;
    if (parse_uint(colon + 1, (size_t)(end - colon - 1), 65535, &u->port) != 0 || u->port == 0)
        return url_err(err, errlen, url, "port is not a number 1-65535");
    if (slash && parse_uint(slash + 1, strlen(slash + 1), 65535, &u->db) != 0)
        return url_err(err, errlen, url, "database is not a number 0-65535 (nothing may follow it)");
    return 0;
}

/* ---- key file ------------------------------------------------------------ */

int remote_key_load(const char *path, uint8_t secret[REMOTE_SECRET_BYTES], char *err, size_t errlen) {
    if (sodium_init() < 0) {
        cache_fmt(err, errlen, "libsodium failed to initialize");
        return CACHE_EIO;
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        cache_fmt(err, errlen, "remote key file '%s': %s", path,
                  errno == ELOOP ? "is a symbolic link (give the file itself)" : strerror(errno));
        return errno == ENOENT || errno == ELOOP ? CACHE_EINVAL : CACHE_EIO;
    }
    struct stat st;
    int rc = CACHE_EINVAL;
    uint8_t buf[65536];
    if (fstat(fd, &st) != 0) {
        cache_fmt(err, errlen, "remote key file '%s': %s", path, strerror(errno));
        rc = CACHE_EIO;
    } else if (!S_ISREG(st.st_mode))
        cache_fmt(err, errlen, "remote key file '%s' is not a regular file", path);
    else if (st.st_uid != geteuid() && st.st_uid != 0)
        cache_fmt(err, errlen, "remote key file '%s' is owned by another user (uid %u)", path, (unsigned)st.st_uid);
    else if (st.st_mode & 077)
        cache_fmt(err, errlen,
                  "permissions %04o for remote key file '%s' are too open: it must be accessible by its owner only "
                  "(chmod 600)",
                  (unsigned)(st.st_mode & 07777), path);
    else if (st.st_size < REMOTE_SECRET_BYTES || st.st_size > (off_t)sizeof buf)
        cache_fmt(
            err, errlen,
            "remote key file '%s' holds %lld bytes: a team secret is 32 bytes to 64 KiB (e.g. head -c 32 /dev/urandom)",
            path, (long long)st.st_size);
    else {
        ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
        if (n != st.st_size) {
            cache_fmt(err, errlen, "remote key file '%s': short read", path);
            rc = CACHE_EIO;
        } else {
            crypto_generichash_state h;
            crypto_generichash_init(&h, NULL, 0, REMOTE_SECRET_BYTES);
            crypto_generichash_update(&h, (const uint8_t *)"milc remote secret v1", 21);
            crypto_generichash_update(&h, buf, (size_t)n);
            crypto_generichash_final(&h, secret, REMOTE_SECRET_BYTES);
            rc = 0;
        }
        sodium_memzero(buf, sizeof buf);
    }
    close(fd);
    return rc;
}

/* ---- open / close -------------------------------------------------------- */

int remote_open(Remote **out, const RemoteOptions *o, char *err, size_t errlen) {
    *out = NULL;
    if (sodium_init() < 0) {
        cache_fmt(err, errlen, "libsodium failed to initialize");
        return CACHE_EIO;
    }
    Remote *r = calloc(1, sizeof *r);
    if (!r) {
        cache_fmt(err, errlen, "out of memory");
        return CACHE_ENOMEM;
    }
    int rc = remote_url_parse(o->url, &r->u, err, errlen);
    if (rc != 0) {
        free(r);
        return rc;
    }
    r->o = *o;
    r->o.url = NULL; /* not kept: it may hold the password */
    if (!r->o.connect_timeout_ms) r->o.connect_timeout_ms = 1000;
    if (!r->o.io_timeout_ms) r->o.io_timeout_ms = 2000;
    if (!r->o.chunk_bytes) r->o.chunk_bytes = REMOTE_CHUNK_DEFAULT;
    if (!r->o.max_entry_bytes) r->o.max_entry_bytes = 16ull << 30;
    if (r->o.chunk_bytes < 64 || r->o.chunk_bytes > REMOTE_CHUNK_MAX) {
        cache_fmt(err, errlen, "remote chunk size %u is outside 64 B to 64 MiB", r->o.chunk_bytes);
        free(r);
        return CACHE_EINVAL;
    }
    if (o->secret) memcpy(r->secret, o->secret, REMOTE_SECRET_BYTES), r->has_secret = 1;
    r->o.secret = NULL;
    *out = r;
    return 0;
}

void remote_close(Remote *r) {
    if (!r) return;
    if (r->ctx) redisFree(r->ctx);
    free(r->spare);
    sodium_memzero(r->secret, sizeof r->secret);
    free(r);
}

/* ---- the connection ------------------------------------------------------ */

static long long mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static struct timeval tv_ms(int ms) { return (struct timeval){ms / 1000, (ms % 1000) * 1000}; }

/* redisBufferWrite with SIGPIPE held off this thread: writing to a server
 * that closed the connection fails with EPIPE (the breaker trips) instead of
 * killing the host process, which a library must never do.  A SIGPIPE that
 * was already pending stays pending; one this write raised is taken. */
static int buffer_write(redisContext *c, int *done) {
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    int was = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int rc = redisBufferWrite(c, done), saved = errno;
    if (!was && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        const struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return rc;
}

/* Send what is queued, then read one reply: it must arrive whole within the
 * I/O timeout and fit in cap bytes of buffered input; else the breaker trips
 * (a frozen server, a trickle, or something that is not Redis). */
static redisReply *get_reply(Remote *r, size_t cap) {
    redisContext *c = r->ctx;
    long long deadline = mono_ms() + r->o.io_timeout_ms;
    int done = 0;
    while (!done)
        if (buffer_write(c, &done) != REDIS_OK || mono_ms() > deadline) {
            trip(r, "sending failed: %s", c->err ? c->errstr : "no progress within the I/O timeout");
            return NULL;
        }
    void *rep = NULL;
    if (redisGetReplyFromReader(c, &rep) != REDIS_OK) goto proto;
    while (!rep) {
        if (redisBufferRead(c) != REDIS_OK) {
            if (c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
                trip(r, "no answer within %d ms", r->o.io_timeout_ms);
            else
                trip(r, "%s", c->errstr[0] ? c->errstr : "connection lost");
            return NULL;
        }
        if (c->reader->len - c->reader->pos > cap) {
            trip(r, "an answer larger than %zu bytes: not a milc remote, or not Redis", cap);
            return NULL;
        }
        if (mono_ms() > deadline) {
            trip(r, "answer not complete within %d ms", r->o.io_timeout_ms);
            return NULL;
        }
        if (redisGetReplyFromReader(c, &rep) != REDIS_OK) goto proto;
    }
    return rep;
proto:
    trip(r, "protocol error (is it a Redis server?): %s", c->errstr);
    return NULL;
}

static redisReply *command(Remote *r, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int ok = redisvAppendCommand(r->ctx, fmt, ap) == REDIS_OK;
    va_end(ap);
    if (!ok) {
        trip(r, "cannot format a command: %s", r->ctx->errstr);
        return NULL;
    }
    return get_reply(r, cap);
}

/* An error reply trips the breaker too: a server that refuses (no auth, out
 * of memory under noeviction, a read-only replica) will refuse again. */
static int expect_ok(Remote *r, redisReply *rep, const char *what) {
    if (!rep) return CACHE_EIO;
    int ok = rep->type != REDIS_REPLY_ERROR;
    if (!ok) trip(r, "%s: the server answered: %.300s", what, rep->str);
    freeReplyObject(rep);
    return ok ? 0 : CACHE_EIO;
}

static int connect_now(Remote *r) {
    if (r->down) return CACHE_EIO;
    if (r->ctx) return 0;
    struct timeval tv = tv_ms(r->o.connect_timeout_ms);
    redisContext *c =
        r->u.path[0] ? redisConnectUnixWithTimeout(r->u.path, tv) : redisConnectWithTimeout(r->u.host, r->u.port, tv);
    if (!c) return trip(r, "out of memory");
    r->ctx = c;
    if (c->err) return trip(r, "cannot connect: %s", c->errstr);
    if (redisSetTimeout(c, tv_ms(r->o.io_timeout_ms)) != REDIS_OK) return trip(r, "cannot set timeouts: %s", c->errstr);
    int rc = 0;
    if (r->u.pass[0] && r->u.user[0])
        rc = expect_ok(r, command(r, 4096, "AUTH %s %s", r->u.user, r->u.pass), "authentication");
    else if (r->u.pass[0])
        rc = expect_ok(r, command(r, 4096, "AUTH %s", r->u.pass), "authentication");
    if (rc == 0 && r->u.db) rc = expect_ok(r, command(r, 4096, "SELECT %d", r->u.db), "selecting the database");
    return rc;
}

int remote_ping(Remote *r) {
    if (connect_now(r) != 0) return CACHE_EIO;
    redisReply *rep = command(r, 4096, "PING");
    if (!rep) return CACHE_EIO;
    int ok = rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "PONG") == 0;
    freeReplyObject(rep);
    return ok ? 0 : trip(r, "PING was not answered with PONG: not a Redis server?");
}

/* ---- names and MACs ------------------------------------------------------ */

static void name_of(char *out, size_t n, const char *prefix, const CacheKey *k) {
    char hex[33];
    cache_key_hex(k, hex);
    snprintf(out, n, "%s%s", prefix, hex);
}

static void chunk_name(char *out, size_t n, const CacheKey *k, const uint8_t upload[16], uint32_t i) {
    char hex[33], up[33];
    cache_key_hex(k, hex);
    cache_key_hex((const CacheKey *)upload, up);
    snprintf(out, n, PREFIX_CHUNK "%s:%s:%u", hex, up, i);
}

static void mac_of(const Remote *r, const uint8_t *p, size_t n, uint8_t mac[MAC_BYTES]) {
    crypto_generichash(mac, MAC_BYTES, p, n, r->secret, REMOTE_SECRET_BYTES);
}

/* Chunk i of an upload is authenticated with Poly1305 under a key of its own,
 * derived from the secret, the entry key, the upload's random id and i: each
 * one-time key authenticates exactly one message, as Poly1305 requires, and a
 * chunk cannot be moved to another entry, upload or position. */
static void chunk_key(const Remote *r, const CacheKey *k, const uint8_t upload[16], uint32_t i,
                      uint8_t otk[crypto_onetimeauth_KEYBYTES]) {
    uint8_t in[8 + 16 + 16 + 4];
    memcpy(in, MAGIC_CHUNK, 8);
    memcpy(in + 8, k->b, 16);
    memcpy(in + 24, upload, 16);
    st32(in + 40, i);
    crypto_generichash(otk, crypto_onetimeauth_KEYBYTES, in, sizeof in, r->secret, REMOTE_SECRET_BYTES);
}

/* Poly1305 from OpenSSL's libcrypto where it loads, else libsodium's: the
 * same function, the same tags, so either reads what the other wrote (and a
 * check at first use makes sure).  libcrypto's x86-64 code runs at twice
 * libsodium's speed here (4.5 against 2.2 GB/s of one core's time, 54 MB in
 * 1 MB chunks, 2026-12-03), and the tags are a third of a pull's CPU time. */
typedef struct Poly {
    EVP_MAC_CTX *ossl; /* NULL: libsodium */
    crypto_onetimeauth_state st;
    int failed; /* libcrypto failed on this message: no tag */
} Poly;

static EVP_MAC *poly_mac;
static pthread_once_t poly_once = PTHREAD_ONCE_INIT;

/* libcrypto's Poly1305, if it answers a test message as libsodium does. */
static void poly_fetch(void) {
    uint8_t key[crypto_onetimeauth_KEYBYTES], msg[1000], want[TAG_BYTES], got[TAG_BYTES];
    for (size_t i = 0; i < sizeof key; i++) key[i] = (uint8_t)(i * 37 + 1);
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i * 131 + 7);
    crypto_onetimeauth(want, msg, sizeof msg, key);
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "POLY1305", NULL);
    EVP_MAC_CTX *c = mac ? EVP_MAC_CTX_new(mac) : NULL;
    size_t len = 0;
    if (c && EVP_MAC_init(c, key, sizeof key, NULL) == 1 && EVP_MAC_update(c, msg, 333) == 1 &&
        EVP_MAC_update(c, msg + 333, sizeof msg - 333) == 1 && EVP_MAC_final(c, got, &len, sizeof got) == 1 &&
        len == TAG_BYTES && memcmp(got, want, TAG_BYTES) == 0)
        poly_mac = mac, mac = NULL;
    EVP_MAC_CTX_free(c);
    EVP_MAC_free(mac);
}

static void poly_open(Poly *p) {
    pthread_once(&poly_once, poly_fetch);
    memset(p, 0, sizeof *p);
    p->ossl = poly_mac ? EVP_MAC_CTX_new(poly_mac) : NULL;
}

static void poly_close(Poly *p) {
    EVP_MAC_CTX_free(p->ossl);
    sodium_memzero(&p->st, sizeof p->st);
}

/* A message under one-time key k (each message its own key). */
static void poly_init(Poly *p, const uint8_t k[crypto_onetimeauth_KEYBYTES]) {
    p->failed = 0;
    if (p->ossl)
        p->failed = EVP_MAC_init(p->ossl, k, crypto_onetimeauth_KEYBYTES, NULL) != 1;
    else
        crypto_onetimeauth_init(&p->st, k);
}

static void poly_update(Poly *p, const uint8_t *m, size_t n) {
    if (!p->ossl)
        crypto_onetimeauth_update(&p->st, m, n);
    else if (!p->failed)
        p->failed = EVP_MAC_update(p->ossl, m, n) != 1;
}

/* The message's tag: 0, or -1 if libcrypto failed on it (no tag). */
static int poly_final(Poly *p, uint8_t tag[TAG_BYTES]) {
    size_t len = 0;
    if (!p->ossl) return crypto_onetimeauth_final(&p->st, tag), 0;
    return !p->failed && EVP_MAC_final(p->ossl, tag, &len, TAG_BYTES) == 1 && len == TAG_BYTES ? 0 : -1;
}

/* Chunk i's tag over n bytes at p: 0, or -1 (libcrypto failed). */
static int chunk_tag(const Remote *r, Poly *poly, const CacheKey *k, const uint8_t upload[16], uint32_t i,
                     const uint8_t *p, size_t n, uint8_t tag[TAG_BYTES]) {
    uint8_t otk[crypto_onetimeauth_KEYBYTES];
    chunk_key(r, k, upload, i, otk);
    poly_init(poly, otk);
    sodium_memzero(otk, sizeof otk);
    poly_update(poly, p, n);
    return poly_final(poly, tag);
}

/* ---- the manifest -------------------------------------------------------- */

/* An entry's manifest (all integers little-endian; strings carry their NUL):
 *     0 "MILCRM01"   8 u32 version 1   12 u32 nsections
 *    16 key[16]     32 upload id[16]  48 u64 created_ns  56 u64 compile_ns
 *    64 i32 mode    68 u32 record_len 72 u32 desc_len    76 u32 backend_len
 *    80 u32 nchunks 84 u32 chunk_bytes 88 u64 total bytes 96 checksum[16]
 *   112 u64 size per section, record, description, backend, a Poly1305 tag
 *       per chunk, then the MAC: keyed BLAKE2b-128 of everything before it.
 * The chunks are the sections' bytes back to back, cut every chunk_bytes. */
typedef struct Manifest {
    CacheKey key;
    const uint8_t *upload, *checksum, *sizes, *record, *tags;
    const char *desc, *backend;
    uint64_t created, compile_ns, total;
    int32_t mode;
    uint32_t nsec, rlen, dlen, blen, nchunks, chunk;
} Manifest;

static uint64_t manifest_len(uint32_t nsec, uint32_t rlen, uint32_t dlen, uint32_t blen, uint32_t nchunks) {
    return MAN_HDR + 8ull * nsec + rlen + dlen + blen + (uint64_t)TAG_BYTES * nchunks + MAC_BYTES;
}

static uint32_t chunks_of(uint64_t total, uint32_t chunk) { return (uint32_t)((total + chunk - 1) / chunk); }

static uint8_t *manifest_encode(const Remote *r, const CacheEntryInfo *e, const CacheSection *secs,
                                const uint8_t upload[16], const uint8_t *tags, size_t *len) {
    uint32_t dlen = (uint32_t)strlen(e->description) + 1, blen = (uint32_t)strlen(e->backend) + 1;
    uint32_t nch = chunks_of(e->bytes, r->o.chunk_bytes);
    *len = manifest_len(e->nsections, (uint32_t)e->record_len, dlen, blen, nch);
    uint8_t *m = malloc(*len), *p = m + MAN_HDR;
    if (!m) return NULL;
    memcpy(m, MAGIC_ENTRY, 8);
    st32(m + 8, 1), st32(m + 12, e->nsections);
    memcpy(m + 16, e->key.b, 16), memcpy(m + 32, upload, 16);
    st64(m + 48, e->created_ns), st64(m + 56, e->compile_ns);
    st32(m + 64, (uint32_t)e->mode), st32(m + 68, (uint32_t)e->record_len), st32(m + 72, dlen), st32(m + 76, blen);
    st32(m + 80, nch), st32(m + 84, r->o.chunk_bytes), st64(m + 88, e->bytes);
    memcpy(m + 96, e->checksum, 16);
    for (uint32_t i = 0; i < e->nsections; i++, p += 8) st64(p, secs[i].size);
    memcpy(p, e->record, e->record_len), p += e->record_len;
    memcpy(p, e->description, dlen), p += dlen;
    memcpy(p, e->backend, blen), p += blen;
    memcpy(p, tags, (size_t)TAG_BYTES * nch), p += (size_t)TAG_BYTES * nch;
    mac_of(r, m, (size_t)(p - m), p);
    return m;
}

static int text_ok(const uint8_t *s, uint32_t n) { return n >= 1 && s[n - 1] == 0 && !memchr(s, 0, n - 1); }

/* Check a manifest read from the server for key k: the MAC first, then every
 * count and length against the bytes and the limits.  0, or CACHE_ECORRUPT
 * with a message. */
static int manifest_decode(Remote *r, const CacheKey *k, const uint8_t *p, size_t n, Manifest *m) {
    char hex[33];
    cache_key_hex(k, hex);
    uint8_t mac[MAC_BYTES];
    if (n < MAN_HDR + MAC_BYTES || memcmp(p, MAGIC_ENTRY, 8) != 0 || ld32(p + 8) != 1)
        return fail(r, CACHE_ECORRUPT, "remote entry %s is not a milc manifest of this version", hex);
    mac_of(r, p, n - MAC_BYTES, mac);
    if (sodium_memcmp(mac, p + n - MAC_BYTES, MAC_BYTES) != 0)
        return fail(r, CACHE_ECORRUPT,
                    "remote entry %s fails its MAC: tampered with, or written under another team key; refused", hex);
    memset(m, 0, sizeof *m);
    memcpy(m->key.b, p + 16, 16);
    m->upload = p + 32, m->checksum = p + 96, m->sizes = p + MAN_HDR;
    m->created = ld64(p + 48), m->compile_ns = ld64(p + 56), m->mode = (int32_t)ld32(p + 64);
    m->nsec = ld32(p + 12), m->rlen = ld32(p + 68), m->dlen = ld32(p + 72), m->blen = ld32(p + 76);
    m->nchunks = ld32(p + 80), m->chunk = ld32(p + 84), m->total = ld64(p + 88);
    if (memcmp(m->key.b, k->b, 16) != 0 || m->nsec > MAX_SECTIONS || m->rlen > MAX_STRING || m->dlen > MAX_STRING ||
        m->blen > MAX_STRING || m->chunk < 64 || m->chunk > REMOTE_CHUNK_MAX || m->total > r->o.max_entry_bytes ||
        m->nchunks != chunks_of(m->total, m->chunk) ||
        manifest_len(m->nsec, m->rlen, m->dlen, m->blen, m->nchunks) != n)
        return fail(r, CACHE_ECORRUPT, "remote entry %s: manifest fields out of bounds", hex);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < m->nsec; i++) {
        uint64_t s = ld64(m->sizes + 8ull * i);
        if (s > m->total - sum) return fail(r, CACHE_ECORRUPT, "remote entry %s: section sizes exceed the total", hex);
        sum += s;
    }
    m->record = m->sizes + 8ull * m->nsec;
    m->desc = (const char *)m->record + m->rlen;
    m->backend = m->desc + m->dlen;
    m->tags = (const uint8_t *)m->backend + m->blen;
    CacheKey rk;
    cache_key_of(m->record, m->rlen, &rk);
    if (sum != m->total || !text_ok((const uint8_t *)m->desc, m->dlen) ||
        !text_ok((const uint8_t *)m->backend, m->blen) || memcmp(rk.b, k->b, 16) != 0)
        return fail(r, CACHE_ECORRUPT, "remote entry %s: sizes, strings or key record inconsistent", hex);
    return 0;
}

/* ---- pull ---------------------------------------------------------------- */

/* ---- reading chunks -------------------------------------------------------
 * Chunk values are read from the socket here, not through hiredis: its reader
 * takes 16 KB per read() into a stack buffer, appends that to a buffer of its
 * own, and hands out the value from there, two copies before the bytes reach
 * the caller.  Here each value goes from the socket straight to where the
 * caller wants it (the entry's buffer, or the block about to be written into
 * the local cache file) and its Poly1305 tag is computed over it there, while
 * it is in cache.  WINDOW GETs stay in flight, and each reply read asks for
 * the next chunk, so the server writes while this side checks. */
/* The tags are checked on a thread of their own while the socket is read and
 * the bytes written out (Poly1305 is a third of a pull's CPU time): jobs in
 * the order the bytes came, each a piece of one chunk. */
enum { MAC_QUEUE = 256 };
typedef struct MacJob {
    const uint8_t *p;
    size_t n;
    uint32_t chunk;
    int last; /* the chunk's final piece: check its tag */
} MacJob;
typedef struct MacThread {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    MacJob q[MAC_QUEUE];
    uint64_t queued, done, mark; /* jobs handed over, finished; queued at the last sync */
    int stop, idle, waiting;     /* idle: the thread sleeps; waiting: the stream does */
    size_t unwoken;              /* bytes queued since the thread was last woken */
    int64_t bad;                 /* the first chunk whose tag failed, or -1 */
    const Remote *r;
    const Manifest *m;
} MacThread;

typedef struct Stream {
    Remote *r;
    const Manifest *m;
    MacThread *mt;       /* NULL: tags checked here, inline */
    uint32_t asked, cur; /* GETs sent; the chunk being read (nchunks: all read) */
    uint64_t left;       /* bytes of chunk cur's value still to come; 0: its header is next */
    Poly mac;            /* without mt: chunk cur's tag, computed here */
    long long deadline;  /* of the reply being read */
    int rc;              /* the first failure: every later read returns it */
    size_t hpos, hlen;   /* hbuf[hpos, hlen): read, not yet used */
    uint8_t hbuf[256];   /* reply headers, and what came in with them */
} Stream;

/* A reply that is not what a GET of a chunk gets: the connection is out of
 * step with its requests, so it goes (the next call connects again; nothing
 * is tripped: the server works, the entry does not). */
static int stream_drop(Stream *s, int rc) {
    if (s->r->ctx) redisFree(s->r->ctx);
    s->r->ctx = NULL;
    return s->rc = rc;
}

static int stream_trip(Stream *s, const char *why) { return s->rc = trip(s->r, "%s", why); }

static int mac_queue(Stream *s, const uint8_t *p, size_t n, int last);

/* Ask for chunks until WINDOW are in flight. */
static int stream_ask(Stream *s) {
    char name[160];
    int sent = 0, done = 0;
    for (; s->asked < s->m->nchunks && s->asked - s->cur < WINDOW; s->asked++, sent = 1) {
        chunk_name(name, sizeof name, &s->m->key, s->m->upload, s->asked);
        if (redisAppendCommand(s->r->ctx, "GET %s", name) != REDIS_OK)
            return s->rc = trip(s->r, "%s", s->r->ctx->errstr);
    }
    while (sent && !done)
        if (buffer_write(s->r->ctx, &done) != REDIS_OK || mono_ms() > s->deadline)
            return s->rc = trip(s->r, "sending failed: %s",
                                s->r->ctx->err ? s->r->ctx->errstr : "no progress within the I/O timeout");
    return 0;
}

/* Up to n bytes from the socket into dst (at least one): the count, or a
 * failure (the breaker tripped).  The socket's receive timeout (the I/O
 * timeout, set at connect) ends a read from a frozen server. */
static ssize_t stream_recv(Stream *s, uint8_t *dst, size_t n) {
    for (;;) {
        if (mono_ms() > s->deadline) {
            char why[96];
            snprintf(why, sizeof why, "answer not complete within %d ms", s->r->o.io_timeout_ms);
            return stream_trip(s, why);
        }
        ssize_t got = recv(s->r->ctx->fd, dst, n, 0);
        if (got > 0) return got;
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            char why[96];
            snprintf(why, sizeof why, "no answer within %d ms", s->r->o.io_timeout_ms);
            return stream_trip(s, why);
        }
        return stream_trip(s, got == 0 ? "connection lost" : strerror(errno));
    }
}

/* Exactly n bytes into dst: what was read ahead first, then the socket. */
static int stream_take(Stream *s, uint8_t *dst, size_t n) {
    size_t have = s->hlen - s->hpos < n ? s->hlen - s->hpos : n;
    memcpy(dst, s->hbuf + s->hpos, have);
    s->hpos += have;
    for (size_t o = have; o < n;) {
        ssize_t got = stream_recv(s, dst + o, n - o);
        if (got < 0) return (int)got;
        o += (size_t)got;
    }
    return 0;
}

/* A reply's first line, without its CRLF, NUL-terminated in line. */
static int stream_line(Stream *s, char *line, size_t cap) {
    for (;;) {
        uint8_t *at = s->hbuf + s->hpos, *lf = memchr(at, '\n', s->hlen - s->hpos);
        if (lf) {
            size_t n = (size_t)(lf - at);
            if (n == 0 || at[n - 1] != '\r' || n > cap) break;
            memcpy(line, at, n - 1), line[n - 1] = 0;
            s->hpos += n + 1;
            return 0;
        }
        if (s->hlen - s->hpos >= cap) break;
        memmove(s->hbuf, at, s->hlen - s->hpos);
        s->hlen -= s->hpos, s->hpos = 0;
        ssize_t got = stream_recv(s, s->hbuf + s->hlen, sizeof s->hbuf - s->hlen);
        if (got < 0) return (int)got;
        s->hlen += (size_t)got;
    }
    return stream_trip(s, "protocol error (is it a Redis server?): a reply header that is not one");
}

static uint64_t chunk_size(const Manifest *m, uint32_t j) {
    uint64_t at = (uint64_t)j * m->chunk;
    return m->total - at < m->chunk ? m->total - at : m->chunk;
}

/* Start reading chunk cur: its header. */
static int stream_begin(Stream *s) {
    char line[64], hex[33], *end;
    s->deadline = mono_ms() + s->r->o.io_timeout_ms;
    int rc = stream_ask(s);
    if (rc == 0) rc = stream_line(s, line, sizeof line);
    if (rc) return rc;
    cache_key_hex(&s->m->key, hex);
    if (line[0] == '-') return s->rc = trip(s->r, "reading a chunk: the server answered: %.200s", line + 1);
    errno = 0;
    long long n = line[0] == '$' && line[1] ? strtoll(line + 1, &end, 10) : -2;
    if (n < -1 || errno || *end)
        return stream_trip(s,
                           "protocol error (is it a Redis server?): a GET answered with something other than a string");
    if (n == -1)
        return stream_drop(s, fail(s->r, CACHE_ENOTFOUND,
                                   "remote entry %s is not whole: chunk %u is gone (evicted or lost)", hex, s->cur));
    if ((uint64_t)n != chunk_size(s->m, s->cur))
        return stream_drop(
            s, fail(s->r, CACHE_ECORRUPT,
                    "remote entry %s: chunk %u has the wrong size (%lld bytes, not %llu): tampered or damaged; refused",
                    hex, s->cur, n, (unsigned long long)chunk_size(s->m, s->cur)));
    if (!s->mt) {
        uint8_t otk[crypto_onetimeauth_KEYBYTES];
        chunk_key(s->r, &s->m->key, s->m->upload, s->cur, otk);
        poly_init(&s->mac, otk);
        sodium_memzero(otk, sizeof otk);
    }
    s->left = (uint64_t)n;
    return 0;
}

/* Chunk cur was read whole: its CRLF, and its tag. */
static int stream_end(Stream *s) {
    uint8_t crlf[2], tag[TAG_BYTES];
    char hex[33];
    int rc = stream_take(s, crlf, 2);
    if (rc) return rc;
    if (crlf[0] != '\r' || crlf[1] != '\n')
        return stream_trip(s, "protocol error (is it a Redis server?): a string reply not ended by CRLF");
    if (!s->mt) {
        if (poly_final(&s->mac, tag) != 0 ||
            sodium_memcmp(tag, s->m->tags + (size_t)TAG_BYTES * s->cur, TAG_BYTES) != 0) {
            cache_key_hex(&s->m->key, hex);
            return stream_drop(s, fail(s->r, CACHE_ECORRUPT,
                                       "remote entry %s: chunk %u fails its MAC (tampered or damaged); refused", hex,
                                       s->cur));
        }
    }
    if (++s->cur == s->m->nchunks && s->hpos != s->hlen)
        return stream_trip(s, "protocol error (is it a Redis server?): bytes nobody asked for");
    return 0;
}

static void *mac_main(void *arg) {
    MacThread *t = arg;
    Poly st;
    poly_open(&st);
    int64_t cur = -1;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (t->done == t->queued && !t->stop) t->idle = 1, pthread_cond_wait(&t->cv, &t->mu);
        t->idle = 0;
        if (t->done == t->queued) break;
        MacJob j = t->q[t->done % MAC_QUEUE];
        int skip = t->bad >= 0;
        pthread_mutex_unlock(&t->mu);
        int failed = 0;
        if (!skip) {
            if (cur != j.chunk) {
                uint8_t otk[crypto_onetimeauth_KEYBYTES];
                chunk_key(t->r, &t->m->key, t->m->upload, j.chunk, otk);
                poly_init(&st, otk);
                sodium_memzero(otk, sizeof otk);
                cur = j.chunk;
            }
            if (j.n) poly_update(&st, j.p, j.n);
            if (j.last) {
                uint8_t tag[TAG_BYTES];
                failed = poly_final(&st, tag) != 0 ||
                         sodium_memcmp(tag, t->m->tags + (size_t)TAG_BYTES * j.chunk, TAG_BYTES) != 0;
                cur = -1;
            }
        }
        pthread_mutex_lock(&t->mu);
        if (failed && t->bad < 0) t->bad = j.chunk;
        t->done++;
        if (t->waiting) pthread_cond_broadcast(&t->cv); /* a wake-up per job would cost more than the job */
    }
    pthread_mutex_unlock(&t->mu);
    poly_close(&st);
    return NULL;
}

/* A checking thread for a pull of more than one chunk, or NULL (check inline). */
static MacThread *mac_start(const Remote *r, const Manifest *m) {
    if (m->nchunks < 2) return NULL;
    MacThread *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->r = r, t->m = m, t->bad = -1;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->tid, NULL, mac_main, t) == 0) return t;
    pthread_cond_destroy(&t->cv), pthread_mutex_destroy(&t->mu);
    free(t);
    return NULL;
}

static void mac_stop(MacThread *t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->tid, NULL);
    pthread_cond_destroy(&t->cv), pthread_mutex_destroy(&t->mu);
    free(t);
}

/* A chunk that failed its tag: the stream stops there (later replies are
 * still on their way). */
static int mac_refused(Stream *s, int64_t bad) {
    char hex[33];
    cache_key_hex(&s->m->key, hex);
    return stream_drop(s, fail(s->r, CACHE_ECORRUPT,
                               "remote entry %s: chunk %lld fails its MAC (tampered or damaged); refused", hex,
                               (long long)bad));
}

/* Hand n bytes at p (of chunk cur) to the checking thread. */
static int mac_queue(Stream *s, const uint8_t *p, size_t n, int last) {
    MacThread *t = s->mt;
    pthread_mutex_lock(&t->mu);
    while (t->queued - t->done == MAC_QUEUE) t->waiting = 1, pthread_cond_wait(&t->cv, &t->mu);
    t->waiting = 0;
    int64_t bad = t->bad;
    t->q[t->queued++ % MAC_QUEUE] = (MacJob){p, n, s->cur, last};
    t->unwoken += n;
    /* Woken per chunk or 256 KB, not per piece: a GPT-2 entry's many small
     * sections are a piece each. */
    if (t->idle && (last || t->unwoken >= (256u << 10) || t->queued - t->done > MAC_QUEUE / 2))
        t->unwoken = 0, pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return bad >= 0 ? mac_refused(s, bad) : 0;
}

/* CachePutOptions.fill_sync: wait for the jobs handed over before the
 * previous reuse (the staging half they point into is about to be written
 * again); before the commit, for all of them, and say whether every tag
 * passed; before an abort, for all of them (the bytes may be freed). */
static int stream_sync(void *ctx, int when) {
    Stream *s = ctx;
    MacThread *t = s->mt;
    if (!t) return s->rc;
    pthread_mutex_lock(&t->mu);
    uint64_t upto = when == CACHE_FILL_REUSE ? t->mark : t->queued;
    t->mark = t->queued;
    if (t->done < upto && t->idle) t->unwoken = 0, pthread_cond_broadcast(&t->cv);
    while (t->done < upto) t->waiting = 1, pthread_cond_wait(&t->cv, &t->mu);
    t->waiting = 0;
    int64_t bad = t->bad;
    pthread_mutex_unlock(&t->mu);
    if (s->rc || when == CACHE_FILL_ABORT) return s->rc;
    if (bad >= 0) return mac_refused(s, bad);
    if (when == CACHE_FILL_COMMIT && s->cur != s->m->nchunks)
        return s->rc = fail(s->r, CACHE_EINVAL, "an entry was not read to its end");
    return 0;
}

/* The next n bytes of the entry (its chunks back to back) into dst, each
 * chunk's tag checked as its last byte arrives: when this returns 0, every
 * chunk the bytes came from has passed.  0, CACHE_ENOTFOUND (a chunk is
 * gone), CACHE_ECORRUPT (a chunk has the wrong size or tag), CACHE_EIO (the
 * breaker tripped); a failure is sticky. */
static int stream_read(void *ctx, uint8_t *dst, uint64_t n) {
    Stream *s = ctx;
    while (n && !s->rc) {
        if (s->cur >= s->m->nchunks) return s->rc = fail(s->r, CACHE_EINVAL, "an entry read past its end");
        if (!s->left && stream_begin(s)) break;
        size_t take = (size_t)(n < s->left ? n : s->left);
        if (stream_take(s, dst, take)) break;
        if (s->mt) {
            if (mac_queue(s, dst, take, take == s->left)) break;
        } else {
            poly_update(&s->mac, dst, take);
        }
        dst += take, n -= take, s->left -= take;
        if (!s->left && stream_end(s)) break;
    }
    return s->rc;
}

/* Ready to read entry m's chunks: nothing may be buffered from before. */
static int stream_open(Stream *s, Remote *r, const Manifest *m) {
    memset(s, 0, offsetof(Stream, hbuf));
    s->r = r, s->m = m;
    if (r->ctx->reader->len != r->ctx->reader->pos)
        return stream_trip(s, "protocol error (is it a Redis server?): bytes nobody asked for");
    poly_open(&s->mac);
    return 0;
}

/* After a stream_open that returned 0. */
static void stream_close(Stream *s) {
    mac_stop(s->mt);
    poly_close(&s->mac);
}

/* Every chunk into buf.  Codes as stream_read. */
static int chunks_fetch(Remote *r, const Manifest *m, uint8_t *buf) {
    Stream s;
    int rc = stream_open(&s, r, m);
    if (rc) return rc;
    s.mt = mac_start(r, m);
    rc = stream_read(&s, buf, m->total);
    rc = stream_sync(&s, rc ? CACHE_FILL_ABORT : CACHE_FILL_COMMIT);
    stream_close(&s);
    return rc;
}

static int manifest_get(Remote *r, const CacheKey *k, redisReply **out) {
    char name[64];
    name_of(name, sizeof name, PREFIX_ENTRY, k);
    redisReply *rep = command(r, MANIFEST_MAX, "GET %s", name);
    *out = rep;
    if (!rep) return CACHE_EIO;
    if (rep->type == REDIS_REPLY_NIL) return CACHE_ENOTFOUND;
    if (rep->type == REDIS_REPLY_STRING) return 0;
    *out = NULL;
    if (rep->type == REDIS_REPLY_ERROR) return expect_ok(r, rep, "reading a manifest");
    freeReplyObject(rep);
    return trip(r, "a GET was answered with something other than a string");
}

static int usable(Remote *r, int writing) {
    if (!r->has_secret)
        return fail(r, CACHE_EINVAL, "no team key: entries on a shared server are not read or written unauthenticated");
    if (writing && r->o.readonly) return fail(r, CACHE_EINVAL, "the remote cache was opened read-only");
    return connect_now(r);
}

struct RemoteGot {
    RemoteEntry e;
    Remote *r;            /* takes buf back as its spare */
    redisReply *manifest; /* e's strings and record point into it */
    uint8_t *buf;         /* the sections, back to back */
    size_t buf_len;
    CacheSection *secs;
};

void remote_entry_free(RemoteEntry *e) {
    if (!e) return;
    struct RemoteGot *g = e->priv;
    if (g->buf && g->buf_len > g->r->spare_len) {
        free(g->r->spare);
        g->r->spare = g->buf, g->r->spare_len = g->buf_len;
    } else {
        free(g->buf);
    }
    free(g->secs);
    if (g->manifest) freeReplyObject(g->manifest);
    free(g);
}

/* The entry's public view over its manifest and fetched bytes. */
static int entry_view(Remote *r, struct RemoteGot *g, const Manifest *m) {
    if (!(g->secs = calloc(m->nsec ? m->nsec : 1, sizeof *g->secs))) return fail(r, CACHE_ENOMEM, "out of memory");
    uint64_t off = 0;
    for (uint32_t i = 0; i < m->nsec; i++) {
        g->secs[i] = (CacheSection){g->buf + off, ld64(m->sizes + 8ull * i)};
        off += g->secs[i].size;
    }
    g->e = (RemoteEntry){.key = m->key,
                         .record = m->record,
                         .record_len = m->rlen,
                         .description = m->desc,
                         .backend = m->backend,
                         .mode = m->mode,
                         .created_ns = m->created,
                         .compile_ns = m->compile_ns,
                         .bytes = m->total,
                         .secs = g->secs,
                         .nsecs = (int)m->nsec,
                         .priv = g};
    return 0;
}

/* An entry's bytes land in memory faulted in 2 MB at a time where the kernel
 * allows: a fresh 54 MB buffer in 4 KB pages costs 13k faults per pull.  The
 * buffer of the entry freed last is reused when it is large enough: faulting
 * in a fresh one means the kernel zeroes every page first (a quarter of a
 * pulled build's CPU time, measured on GPT-2's three 54 MB chunks). */
static uint8_t *entry_buffer(Remote *r, uint64_t size, size_t *len) {
    size_t huge = 2u << 20, n = (size_t)((size + huge) & ~(uint64_t)(huge - 1));
    if (r->spare && r->spare_len >= n) {
        uint8_t *p = r->spare;
        *len = r->spare_len, r->spare = NULL, r->spare_len = 0;
        return p;
    }
    uint8_t *p = aligned_alloc(huge, n);
    if (p) (void)madvise(p, n, MADV_HUGEPAGE);
    *len = n;
    return p;
}

/* A manifest read and checked for k (and record, if given). */
static int manifest_for(Remote *r, const CacheKey *k, const void *record, size_t record_len, redisReply **rep,
                        Manifest *m) {
    int rc = manifest_get(r, k, rep);
    if (rc == CACHE_ENOTFOUND) return fail(r, rc, "not on the remote");
    if (rc != 0) return rc;
    if ((rc = manifest_decode(r, k, (const uint8_t *)(*rep)->str, (*rep)->len, m)) != 0) return rc;
    if (record && (record_len != m->rlen || memcmp(record, m->record, record_len) != 0))
        return fail(r, CACHE_EMISMATCH, "the remote entry has another key record");
    return 0;
}

static int get_into(Remote *r, const CacheKey *k, const void *record, size_t record_len, struct RemoteGot *g) {
    Manifest m;
    int rc = manifest_for(r, k, record, record_len, &g->manifest, &m);
    if (rc != 0) return rc;
    if (!(g->buf = entry_buffer(r, m.total, &g->buf_len))) return fail(r, CACHE_ENOMEM, "out of memory");
    if ((rc = chunks_fetch(r, &m, g->buf)) != 0) return rc;
    return entry_view(r, g, &m);
}

int remote_get(Remote *r, const CacheKey *k, const void *record, size_t record_len, RemoteEntry **out) {
    *out = NULL;
    int rc = usable(r, 0);
    if (rc != 0) return rc;
    struct RemoteGot *g = calloc(1, sizeof *g);
    if (!g) return fail(r, CACHE_ENOMEM, "out of memory");
    g->e.priv = g, g->r = r;
    if ((rc = get_into(r, k, record, record_len, g)) != 0) {
        if (rc == CACHE_ECORRUPT) r->refused = *k, r->has_refused = 1;
        remote_entry_free(&g->e);
        return rc;
    }
    *out = &g->e;
    return 0;
}

/* The entry's chunks straight into the local cache: the put reads them from
 * the socket as it writes each block (CacheFillFn), checking every tag as the
 * chunk's last byte arrives, and commits only after the last one passed; a
 * chunk refused, gone or cut short aborts the put, and nothing is stored. */
static int stream_put(Remote *r, Cache *c, const Manifest *m, CachePutOptions *po) {
    Stream s;
    int rc = stream_open(&s, r, m);
    if (rc) return rc;
    CacheSection *secs = calloc(m->nsec ? m->nsec : 1, sizeof *secs);
    if (!secs) {
        stream_close(&s);
        return fail(r, CACHE_ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < m->nsec; i++) secs[i].size = ld64(m->sizes + 8ull * i);
    CacheEntryMeta meta = {.description = m->desc, .backend = m->backend, .mode = m->mode, .compile_ns = m->compile_ns};
    s.mt = mac_start(r, m);
    po->fill = stream_read, po->fill_sync = stream_sync, po->fill_ctx = &s;
    rc = cache_put_ex(c, &m->key, m->record, m->rlen, &meta, secs, (int)m->nsec, po);
    stream_close(&s);
    free(secs);
    if (s.rc) return s.rc; /* the remote's failure, worded by the stream */
    if (rc) {
        if (s.asked != s.cur || s.left) stream_drop(&s, 0); /* replies still on their way */
        r->failed_locally = 1;
        return fail(r, rc, "storing the pulled entry locally: %s: %s", cache_strerror(rc), cache_errmsg(c));
    }
    return 0;
}

/* Fetch entry k and store it locally, with the direct key po names (if
 * any) in the same transaction.  A pulled entry can be pulled again, so its
 * commit does not wait for the disk (CACHE_PUT_REFETCHABLE: a crash may cost
 * the local cache, never serve a torn entry). */
static int pull_into(Remote *r, Cache *c, const CacheKey *k, const void *record, size_t record_len,
                     CachePutOptions *po) {
    r->failed_locally = 0;
    int rc = usable(r, 0);
    if (rc != 0) return rc;
    redisReply *rep = NULL;
    Manifest m;
    po->flags |= CACHE_PUT_REFETCHABLE;
    if ((rc = manifest_for(r, k, record, record_len, &rep, &m)) == 0) rc = stream_put(r, c, &m, po);
    if (rc == CACHE_ECORRUPT && !r->failed_locally) r->refused = *k, r->has_refused = 1;
    if (rep) freeReplyObject(rep);
    return rc;
}

int remote_failed_locally(const Remote *r) { return r->failed_locally; }

int remote_pull(Remote *r, Cache *c, const CacheKey *k, const void *record, size_t record_len) {
    CachePutOptions po = {0};
    return pull_into(r, c, k, record, record_len, &po);
}

/* ---- push ---------------------------------------------------------------- */

/* The server holds entry e whole and authentic: its manifest passes and every
 * chunk has its length (a pull checks the bytes). */
static int entry_whole(Remote *r, const CacheEntryInfo *e, const redisReply *old) {
    Manifest m;
    if (manifest_decode(r, &e->key, (const uint8_t *)old->str, old->len, &m) != 0 || m.rlen != e->record_len ||
        memcmp(m.record, e->record, m.rlen) != 0)
        return 0;
    char name[160];
    int whole = 1;
    for (uint32_t j = 0; j < m.nchunks; j++) {
        chunk_name(name, sizeof name, &m.key, m.upload, j);
        if (redisAppendCommand(r->ctx, "STRLEN %s", name) != REDIS_OK) return trip(r, "%s", r->ctx->errstr);
    }
    for (uint32_t j = 0; j < m.nchunks; j++) {
        redisReply *rep = get_reply(r, 4096);
        if (!rep) return CACHE_EIO;
        uint64_t want = m.total - (uint64_t)j * m.chunk < m.chunk ? m.total - (uint64_t)j * m.chunk : m.chunk;
        if (rep->type != REDIS_REPLY_INTEGER || (uint64_t)rep->integer != want) whole = 0;
        freeReplyObject(rep);
    }
    return whole;
}

/* Chunk j's bytes: a pointer into a section when it lies in one, else
 * gathered into stage.  *si / *off walk the sections. */
static const uint8_t *chunk_bytes_at(const CacheSection *secs, int nsec, int *si, uint64_t *off, uint64_t want,
                                     uint8_t *stage) {
    while (*si < nsec && *off == secs[*si].size) (*si)++, *off = 0;
    if (*si < nsec && secs[*si].size - *off >= want) {
        const uint8_t *p = (const uint8_t *)secs[*si].data + *off;
        *off += want;
        return p;
    }
    for (uint64_t got = 0; got < want;) {
        while (*off == secs[*si].size) (*si)++, *off = 0;
        uint64_t n = secs[*si].size - *off < want - got ? secs[*si].size - *off : want - got;
        memcpy(stage + got, (const uint8_t *)secs[*si].data + *off, n);
        got += n, *off += n;
    }
    return stage;
}

/* Send every chunk under the upload's staging names, expiring, WINDOW at a
 * time, tagging each.  0 or CACHE_EIO. */
static int chunks_send(Remote *r, const CacheEntryInfo *e, const CacheSection *secs, const uint8_t upload[16],
                       uint8_t *tags) {
    uint32_t cb = r->o.chunk_bytes, nch = chunks_of(e->bytes, cb);
    uint8_t *stage = malloc(cb);
    if (!stage) return fail(r, CACHE_ENOMEM, "out of memory");
    int si = 0, rc = 0;
    uint64_t off = 0;
    char name[160];
    Poly poly;
    poly_open(&poly);
    for (uint32_t j = 0; j < nch && rc == 0; j++) {
        uint64_t want = e->bytes - (uint64_t)j * cb < cb ? e->bytes - (uint64_t)j * cb : cb;
        const uint8_t *p = chunk_bytes_at(secs, (int)e->nsections, &si, &off, want, stage);
        if (chunk_tag(r, &poly, &e->key, upload, j, p, (size_t)want, tags + (size_t)TAG_BYTES * j) != 0) {
            rc = fail(r, CACHE_ENOMEM, "computing a chunk's tag failed (libcrypto)");
            break;
        }
        chunk_name(name, sizeof name, &e->key, upload, j);
        if (redisAppendCommand(r->ctx, "SET %s %b EX %d", name, p, (size_t)want, STAGE_TTL_S) != REDIS_OK)
            rc = trip(r, "%s", r->ctx->errstr);
        if (rc == 0 && (j % WINDOW == WINDOW - 1 || j + 1 == nch))
            for (uint32_t i = 0; i <= j % WINDOW && rc == 0; i++)
                rc = expect_ok(r, get_reply(r, 4096), "storing a chunk");
    }
    poly_close(&poly);
    free(stage);
    return rc;
}

/* Publish atomically: only if the manifest is still what this push saw
 * (ARGV[1], "" for none) and every staged chunk still exists, make the chunks
 * permanent, set the manifest and drop the replaced entry's chunks.
 * 1 published, 0 another push won, -1 a staged chunk was evicted. */
static const char PUBLISH_LUA[] = "local cur = redis.call('GET', KEYS[1]) or ''\n"
                                  "if cur ~= ARGV[1] then return 0 end\n"
                                  "local n = tonumber(ARGV[3])\n"
                                  "for i = 2, n + 1 do if redis.call('EXISTS', KEYS[i]) == 0 then return -1 end end\n"
                                  "for i = 2, n + 1 do redis.call('PERSIST', KEYS[i]) end\n"
                                  "redis.call('SET', KEYS[1], ARGV[2])\n"
                                  "for i = n + 2, #KEYS do redis.call('DEL', KEYS[i]) end\n"
                                  "return 1\n";

typedef struct {
    const char **argv;
    size_t *lens;
    char *names;
    int argc;
} Argv;

static int argv_init(Argv *a, int n) {
    a->argv = calloc((size_t)n, sizeof *a->argv);
    a->lens = calloc((size_t)n, sizeof *a->lens);
    a->names = malloc((size_t)n * 160);
    a->argc = 0;
    return a->argv && a->lens && a->names ? 0 : CACHE_ENOMEM;
}
static void argv_add(Argv *a, const void *p, size_t n) { a->argv[a->argc] = p, a->lens[a->argc++] = n; }
static char *argv_name(Argv *a) { return a->names + (size_t)a->argc * 160; }
static void argv_free(Argv *a) { free(a->argv), free(a->lens), free(a->names); }

/* The chunk names of a manifest (the old one being replaced), if it is ours. */
static void add_old_chunks(Remote *r, Argv *a, const CacheKey *k, const redisReply *old) {
    Manifest m;
    if (!old || old->type != REDIS_REPLY_STRING || manifest_decode(r, k, (const uint8_t *)old->str, old->len, &m) != 0)
        return;
    for (uint32_t j = 0; j < m.nchunks; j++) {
        char *nm = argv_name(a);
        chunk_name(nm, 160, k, m.upload, j);
        argv_add(a, nm, strlen(nm));
    }
}

static int publish(Remote *r, const CacheKey *k, const uint8_t upload[16], uint32_t nch, const uint8_t *man,
                   size_t manlen, const redisReply *old, uint32_t old_nch) {
    Argv a;
    int rc = argv_init(&a, 8 + (int)nch + (int)old_nch);
    char mname[64], nkeys[16], nnew[16];
    if (rc != 0) {
        argv_free(&a);
        return fail(r, rc, "out of memory");
    }
    name_of(mname, sizeof mname, PREFIX_ENTRY, k);
    argv_add(&a, "EVAL", 4), argv_add(&a, PUBLISH_LUA, sizeof PUBLISH_LUA - 1), argv_add(&a, nkeys, 0);
    argv_add(&a, mname, strlen(mname));
    for (uint32_t j = 0; j < nch; j++) {
        char *nm = argv_name(&a);
        chunk_name(nm, 160, k, upload, j);
        argv_add(&a, nm, strlen(nm));
    }
    add_old_chunks(r, &a, k, old);
    snprintf(nkeys, sizeof nkeys, "%d", a.argc - 3), a.lens[2] = strlen(nkeys);
    snprintf(nnew, sizeof nnew, "%u", nch);
    int have_old = old && old->type == REDIS_REPLY_STRING;
    argv_add(&a, have_old ? old->str : "", have_old ? (size_t)old->len : 0);
    argv_add(&a, man, manlen), argv_add(&a, nnew, strlen(nnew));
    redisReply *rep = NULL;
    if (redisAppendCommandArgv(r->ctx, a.argc, a.argv, a.lens) != REDIS_OK)
        rc = trip(r, "%s", r->ctx->errstr);
    else if (!(rep = get_reply(r, 4096)))
        rc = CACHE_EIO;
    else if (rep->type != REDIS_REPLY_INTEGER) {
        rc = expect_ok(r, rep, "publishing");
        rep = NULL;
        if (!rc) rc = trip(r, "publishing: unexpected answer");
    } else
        rc = rep->integer == 1 ? 0
             : rep->integer == 0
                 ? 1
                 : fail(r, CACHE_EFULL,
                        "a chunk was evicted before the entry was published: the server is short of memory");
    if (rep) freeReplyObject(rep);
    argv_free(&a);
    return rc;
}

/* Drop this upload's staged chunks (another push won).  Best effort. */
static void unstage(Remote *r, const CacheKey *k, const uint8_t upload[16], uint32_t nch) {
    char name[160];
    for (uint32_t j = 0; j < nch && !r->down; j++) {
        chunk_name(name, sizeof name, k, upload, j);
        redisReply *rep = command(r, 4096, "DEL %s", name);
        if (rep) freeReplyObject(rep);
    }
}

static int push_entry(Remote *r, const CacheEntryInfo *e, const CacheSection *secs, const redisReply *old) {
    if (e->bytes > r->o.max_entry_bytes) return fail(r, CACHE_EINVAL, "entry larger than the remote's entry limit");
    uint32_t nch = chunks_of(e->bytes, r->o.chunk_bytes), old_nch = 0;
    uint8_t upload[16], *tags = malloc((size_t)TAG_BYTES * nch + 1), *man = NULL;
    Manifest om;
    if (old && old->type == REDIS_REPLY_STRING &&
        manifest_decode(r, &e->key, (const uint8_t *)old->str, old->len, &om) == 0)
        old_nch = om.nchunks;
    if (!tags) return fail(r, CACHE_ENOMEM, "out of memory");
    randombytes_buf(upload, sizeof upload);
    size_t manlen;
    int rc = chunks_send(r, e, secs, upload, tags);
    if (rc == 0 && !(man = manifest_encode(r, e, secs, upload, tags, &manlen)))
        rc = fail(r, CACHE_ENOMEM, "out of memory");
    if (rc == 0) rc = publish(r, &e->key, upload, nch, man, manlen, old, old_nch);
    if (rc == 1 || rc == CACHE_EFULL) unstage(r, &e->key, upload, nch);
    free(man);
    free(tags);
    return rc;
}

/* Push entry e with its sections unless the server holds it whole. */
static int push_unless_whole(Remote *r, const CacheEntryInfo *e, const CacheSection *secs) {
    redisReply *old = NULL;
    int rc = manifest_get(r, &e->key, &old);
    if (rc == CACHE_ENOTFOUND || rc == 0) {
        int refused = r->has_refused && memcmp(r->refused.b, e->key.b, 16) == 0;
        int whole = rc == 0 && !refused ? entry_whole(r, e, old) : 0;
        rc = whole == 1 ? 1 : r->down ? CACHE_EIO : push_entry(r, e, secs, old);
    }
    if (old) freeReplyObject(old);
    return rc;
}

int remote_push(Remote *r, Cache *c, const CacheKey *k) {
    int rc = usable(r, 1);
    if (rc != 0) return rc;
    CacheHit *hit;
    if ((rc = cache_get(c, k, NULL, 0, CACHE_GET_NOTOUCH | CACHE_GET_VERIFY_ONCE, &hit)) != 0)
        return fail(r, rc, "the local entry cannot be read: %s", cache_strerror(rc));
    const CacheSection *secs;
    int nsec;
    if ((rc = cache_hit_sections(hit, &secs, &nsec)) != 0)
        fail(r, rc, "out of memory");
    else
        rc = push_unless_whole(r, cache_hit_info(hit), secs);
    cache_hit_release(hit);
    return rc;
}

int remote_put(Remote *r, const CacheKey *k, const void *record, size_t record_len, const CacheEntryMeta *m,
               const CacheSection *secs, int nsecs) {
    int rc = usable(r, 1);
    if (rc != 0) return rc;
    CacheKey rk;
    if (!record || nsecs < 0 || (nsecs && !secs) || record_len > MAX_STRING || (uint64_t)nsecs > MAX_SECTIONS)
        return fail(r, CACHE_EINVAL, "remote_put: a key record and valid sections are required");
    cache_key_of(record, record_len, &rk);
    if (memcmp(rk.b, k->b, 16) != 0) return fail(r, CACHE_EINVAL, "remote_put: the key is not the hash of the record");
    static const CacheEntryMeta none;
    if (!m) m = &none;
    CacheEntryInfo e = {.key = *k,
                        .description = m->description ? m->description : "",
                        .backend = m->backend ? m->backend : "",
                        .mode = m->mode,
                        .nsections = (uint32_t)nsecs,
                        .compile_ns = m->compile_ns,
                        .record = record,
                        .record_len = record_len};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    e.created_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    for (int i = 0; i < nsecs; i++) e.bytes += secs[i].size;
    if (strlen(e.description) > MAX_STRING || strlen(e.backend) > MAX_STRING)
        return fail(r, CACHE_EINVAL, "remote_put: description or producer too long");
    if ((rc = cache_sections_checksum(secs, nsecs, e.checksum)) != 0) return fail(r, rc, "out of memory");
    return push_unless_whole(r, &e, secs);
}

/* Entry k's manifest, which must be there: 0 and *rep (the caller frees
 * it), or CACHE_ENOTFOUND with a message, or the failure. */
static int manifest_present(Remote *r, const CacheKey *k, redisReply **rep) {
    int rc = manifest_get(r, k, rep);
    if (rc == 0) return 0;
    if (*rep) freeReplyObject(*rep); /* the nil answer */
    *rep = NULL;
    return rc == CACHE_ENOTFOUND ? fail(r, rc, "not on the remote") : rc;
}

int remote_info(Remote *r, const CacheKey *k, CacheEntryFn fn, void *ctx) {
    int rc = usable(r, 0);
    if (rc != 0) return rc;
    redisReply *rep = NULL;
    if ((rc = manifest_present(r, k, &rep)) != 0) return rc;
    Manifest m;
    if ((rc = manifest_decode(r, k, (const uint8_t *)rep->str, rep->len, &m)) == 0) {
        CacheEntryInfo e = {.key = m.key,
                            .description = m.desc,
                            .backend = m.backend,
                            .mode = m.mode,
                            .nsections = m.nsec,
                            .bytes = m.total,
                            .created_ns = m.created,
                            .compile_ns = m.compile_ns,
                            .record = m.record,
                            .record_len = m.rlen};
        memcpy(e.checksum, m.checksum, 16);
        rc = fn(ctx, &e);
    }
    freeReplyObject(rep);
    return rc;
}

int remote_rm(Remote *r, const CacheKey *k) {
    int rc = usable(r, 1);
    if (rc != 0) return rc;
    redisReply *old = NULL;
    if ((rc = manifest_present(r, k, &old)) != 0) return rc;
    Manifest m;
    uint32_t nch = manifest_decode(r, k, (const uint8_t *)old->str, old->len, &m) == 0 ? m.nchunks : 0;
    Argv a;
    char mname[64];
    if ((rc = argv_init(&a, 2 + (int)nch)) != 0) {
        argv_free(&a);
        freeReplyObject(old);
        return fail(r, rc, "out of memory");
    }
    name_of(mname, sizeof mname, PREFIX_ENTRY, k);
    argv_add(&a, "DEL", 3), argv_add(&a, mname, strlen(mname));
    /* The manifest goes first (in the same command): a reader never sees it
     * without its chunks.  A damaged manifest's chunks are left to whoever
     * replaces it (its push deletes them) or to the server's eviction. */
    add_old_chunks(r, &a, k, old);
    redisReply *rep = NULL;
    if (redisAppendCommandArgv(r->ctx, a.argc, a.argv, a.lens) != REDIS_OK)
        rc = trip(r, "%s", r->ctx->errstr);
    else if (!(rep = get_reply(r, 4096)))
        rc = CACHE_EIO;
    else if (rep->type != REDIS_REPLY_INTEGER) {
        rc = expect_ok(r, rep, "removing an entry");
        rep = NULL;
        if (!rc) rc = trip(r, "removing: unexpected answer");
    }
    if (rep) freeReplyObject(rep);
    argv_free(&a);
    freeReplyObject(old);
    return rc;
}

/* ---- direct keys --------------------------------------------------------- */

/* "MILCRD01", direct key, artifact key, u32 record length, record, MAC. */
int remote_push_direct(Remote *r, const CacheKey *dkey, const void *drecord, size_t drecord_len, const CacheKey *akey) {
    int rc = usable(r, 1);
    if (rc != 0) return rc;
    if (drecord_len > MAX_STRING) return fail(r, CACHE_EINVAL, "direct record too long");
    size_t n = 44 + drecord_len + MAC_BYTES;
    uint8_t *v = malloc(n);
    if (!v) return fail(r, CACHE_ENOMEM, "out of memory");
    memcpy(v, MAGIC_DIRECT, 8), memcpy(v + 8, dkey->b, 16), memcpy(v + 24, akey->b, 16);
    st32(v + 40, (uint32_t)drecord_len);
    memcpy(v + 44, drecord, drecord_len);
    mac_of(r, v, n - MAC_BYTES, v + n - MAC_BYTES);
    char name[64];
    name_of(name, sizeof name, PREFIX_DIRECT, dkey);
    rc = expect_ok(r, command(r, 4096, "SET %s %b", name, v, n), "storing a direct key");
    free(v);
    return rc;
}

static int direct_decode(Remote *r, const CacheKey *dkey, const redisReply *rep, const void *drec, size_t dlen,
                         CacheKey *akey) {
    const uint8_t *v = (const uint8_t *)rep->str;
    size_t n = rep->len;
    uint8_t mac[MAC_BYTES];
    if (n < 44 + MAC_BYTES || memcmp(v, MAGIC_DIRECT, 8) != 0)
        return fail(r, CACHE_ECORRUPT, "a remote direct key is not in milc's format; refused");
    mac_of(r, v, n - MAC_BYTES, mac);
    if (sodium_memcmp(mac, v + n - MAC_BYTES, MAC_BYTES) != 0)
        return fail(r, CACHE_ECORRUPT, "a remote direct key fails its MAC (tampered, or another team key); refused");
    if (memcmp(v + 8, dkey->b, 16) != 0 || ld32(v + 40) != n - 44 - MAC_BYTES)
        return fail(r, CACHE_ECORRUPT, "a remote direct key is inconsistent; refused");
    if (ld32(v + 40) != dlen || memcmp(v + 44, drec, dlen) != 0)
        return fail(r, CACHE_EMISMATCH, "the remote direct key has another record");
    memcpy(akey->b, v + 24, 16);
    return 0;
}

int remote_resolve_direct(Remote *r, const CacheKey *dkey, const void *drecord, size_t drecord_len, CacheKey *akey) {
    int rc = usable(r, 0);
    if (rc != 0) return rc;
    char name[64];
    name_of(name, sizeof name, PREFIX_DIRECT, dkey);
    redisReply *rep = command(r, 1u << 26, "GET %s", name);
    if (!rep) return CACHE_EIO;
    if (rep->type == REDIS_REPLY_NIL)
        rc = fail(r, CACHE_ENOTFOUND, "not on the remote");
    else if (rep->type != REDIS_REPLY_STRING) {
        rc = expect_ok(r, rep, "reading a direct key");
        rep = NULL;
        if (!rc) rc = trip(r, "unexpected answer");
    } else
        rc = direct_decode(r, dkey, rep, drecord, drecord_len, akey);
    if (rep) freeReplyObject(rep);
    return rc;
}

int remote_pull_direct(Remote *r, Cache *c, const CacheKey *dkey, const void *drecord, size_t drecord_len,
                       CacheKey *akey) {
    CacheKey ak;
    r->failed_locally = 0;
    int rc = remote_resolve_direct(r, dkey, drecord, drecord_len, &ak);
    if (rc != 0) return rc;
    if (akey) *akey = ak;
    CacheHit *hit;
    int have = cache_get(c, &ak, NULL, 0, CACHE_GET_NOTOUCH, &hit) == 0;
    if (have) cache_hit_release(hit);
    CachePutOptions po = {.dkey = dkey, .drecord = drecord, .drecord_len = drecord_len};
    if (!have) return pull_into(r, c, &ak, NULL, 0, &po);
    if ((rc = cache_direct_put(c, dkey, drecord, drecord_len, &ak)) != 0) {
        r->failed_locally = 1;
        return fail(r, rc, "storing the pulled direct key locally: %s", cache_errmsg(c));
    }
    return 0;
}

/* ---- listing and statistics ---------------------------------------------- */

/* One SCAN pass over pattern; fn per key name. */
static int scan(Remote *r, const char *pattern, int (*fn)(void *ctx, const char *name, size_t len), void *ctx) {
    char cursor[32] = "0";
    do {
        redisReply *rep = command(r, 1u << 24, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (!rep) return CACHE_EIO;
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
            rep->element[0]->len >= sizeof cursor || rep->element[1]->type != REDIS_REPLY_ARRAY) {
            if (rep->type == REDIS_REPLY_ERROR) return expect_ok(r, rep, "SCAN");
            freeReplyObject(rep);
            return trip(r, "SCAN answered in an unexpected shape");
        }
        memcpy(cursor, rep->element[0]->str, rep->element[0]->len + 1);
        int stop = 0;
        for (size_t i = 0; i < rep->element[1]->elements && !stop; i++) {
            const redisReply *e = rep->element[1]->element[i];
            if (e->type == REDIS_REPLY_STRING) stop = fn(ctx, e->str, e->len);
        }
        freeReplyObject(rep);
        if (stop) return stop;
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

typedef struct {
    int (*fn)(void *ctx, const CacheKey *k);
    void *ctx;
} ListCtx;

static int list_one(void *ctx, const char *name, size_t len) {
    ListCtx *l = ctx;
    CacheKey k;
    char hex[33];
    size_t pl = sizeof PREFIX_ENTRY - 1;
    if (len != pl + 32) return 0;
    memcpy(hex, name + pl, 32), hex[32] = 0;
    return cache_key_parse(hex, &k) == 0 ? l->fn(l->ctx, &k) : 0;
}

int remote_list(Remote *r, int (*fn)(void *ctx, const CacheKey *k), void *ctx) {
    int rc = connect_now(r);
    return rc != 0 ? rc : scan(r, PREFIX_ENTRY "*", list_one, &(ListCtx){fn, ctx});
}

static int count_one(void *ctx, const char *name, size_t len) {
    RemoteStats *s = ctx;
    if (len > 7 && memcmp(name, PREFIX_ENTRY, 7) == 0)
        s->entries++;
    else if (len > 7 && memcmp(name, PREFIX_DIRECT, 7) == 0)
        s->directs++;
    else if (len > 7 && memcmp(name, PREFIX_CHUNK, 7) == 0)
        s->chunks++;
    else
        s->other_keys++;
    return 0;
}

/* "name:value\r\n" in an INFO text. */
static void info_field(const char *info, const char *name, char *out, size_t n) {
    size_t l = strlen(name);
    out[0] = 0;
    for (const char *p = info; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, name, l) == 0 && p[l] == ':') {
            size_t k = strcspn(p + l + 1, "\r\n");
            snprintf(out, n, "%.*s", (int)(k < n ? k : n - 1), p + l + 1);
            return;
        }
}

int remote_stat(Remote *r, RemoteStats *s) {
    memset(s, 0, sizeof *s);
    int rc = connect_now(r);
    if (rc != 0 || (rc = scan(r, "*", count_one, s)) != 0) return rc;
    redisReply *rep = command(r, 1u << 20, "INFO");
    if (!rep) return CACHE_EIO;
    if (rep->type != REDIS_REPLY_STRING) {
        int e = expect_ok(r, rep, "INFO");
        return e ? e : trip(r, "INFO: unexpected answer");
    }
    char v[64];
    info_field(rep->str, "used_memory", v, sizeof v), s->used_memory = strtoull(v, NULL, 10);
    info_field(rep->str, "maxmemory", v, sizeof v), s->maxmemory = strtoull(v, NULL, 10);
    info_field(rep->str, "evicted_keys", v, sizeof v), s->evicted_keys = strtoull(v, NULL, 10);
    info_field(rep->str, "redis_version", s->version, sizeof s->version);
    info_field(rep->str, "maxmemory_policy", s->policy, sizeof s->policy);
    freeReplyObject(rep);
    return 0;
}

/* ---- for fuzzing ----------------------------------------------------------- */

int remote_manifest_check(const uint8_t secret[REMOTE_SECRET_BYTES], const void *buf, size_t len, char *err,
                          size_t errlen) {
    Remote r = {.o = {.max_entry_bytes = 16ull << 30}};
    memcpy(r.secret, secret, REMOTE_SECRET_BYTES);
    CacheKey k;
    Manifest m;
    if (len < 32) {
        cache_fmt(err, errlen, "too short");
        return CACHE_ECORRUPT;
    }
    memcpy(k.b, (const uint8_t *)buf + 16, 16);
    int rc = manifest_decode(&r, &k, buf, len, &m);
    cache_fmt(err, errlen, "%s", rc ? r.err : "");
    return rc;
}

/* Chunk replies read from a socket as a pull reads them, for an entry whose
 * bytes are payload[0, total) cut into chunks of `chunk` bytes (their tags
 * under secret): 0 only if the bytes came back whole and equal.  For fuzzing
 * the reply reader (the input is what a server sends). */
int remote_chunks_check(const uint8_t secret[REMOTE_SECRET_BYTES], uint32_t chunk, const uint8_t *payload,
                        uint32_t total, const void *replies, size_t len, char *err, size_t errlen) {
    Remote r = {.o = {.io_timeout_ms = 10000, .max_entry_bytes = 16ull << 30}};
    memcpy(r.secret, secret, REMOTE_SECRET_BYTES);
    Manifest m = {.chunk = chunk ? chunk : 1, .total = total};
    m.nchunks = chunks_of(total, m.chunk);
    static const uint8_t upload[16];
    m.upload = upload;
    uint8_t *tags = malloc((size_t)TAG_BYTES * m.nchunks + 1), *buf = malloc(total + 1);
    int sv[2], rc = CACHE_ENOMEM;
    if (!tags || !buf || len > (32u << 10) || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) goto out;
    /* Tagged by libsodium: the reader's Poly1305 (libcrypto's) must agree. */
    for (uint32_t j = 0; j < m.nchunks; j++) {
        uint8_t otk[crypto_onetimeauth_KEYBYTES];
        chunk_key(&r, &m.key, upload, j, otk);
        crypto_onetimeauth(tags + (size_t)TAG_BYTES * j, payload + (size_t)j * m.chunk, (size_t)chunk_size(&m, j), otk);
    }
    m.tags = tags;
    if ((size_t)write(sv[1], replies, len) != len || shutdown(sv[1], SHUT_WR) != 0 ||
        !(r.ctx = redisConnectFd(sv[0]))) {
        close(sv[0]), close(sv[1]);
        rc = CACHE_EIO;
        goto out;
    }
    rc = r.ctx->err ? CACHE_EIO : chunks_fetch(&r, &m, buf);
    if (rc == 0 && memcmp(buf, payload, total) != 0) rc = fail(&r, CACHE_EINVAL, "accepted bytes that differ");
    if (r.ctx) redisFree(r.ctx);
    close(sv[1]);
out:
    cache_fmt(err, errlen, "%s", rc ? r.err : "");
    free(tags), free(buf);
    return rc;
}
