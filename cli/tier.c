/* tier.c — the remote tier for the CLI's commands (tier.h).  The build path
 * calls only tier_pull*, tier_push: a remote failure is never a build
 * failure, only a warning and the local path. */
#include <stdlib.h>
#include <string.h>

#include "tier.h"

int tier_open(const Cli *cli, const char *cmd, bool need_key, Remote **out) {
    *out = NULL;
    if (!cli->remote) {
        if (cli->remote_readonly) { cli_usage_error(cmd, "--remote-readonly without --remote (or $MILC_REMOTE)"); return EXIT_USAGE; }
        return EXIT_OK;
    }
    char err[600] = "";
    RemoteUrl u;
    if (remote_url_parse(cli->remote, &u, err, sizeof err) != 0) { cli_usage_error(cmd, "%s", err); return EXIT_USAGE; }
    uint8_t secret[REMOTE_SECRET_BYTES];
    bool have = cli->remote_key != NULL;
    if (!have && need_key) {
        cli_usage_error(cmd, "--remote needs --remote-key-file (or $MILC_REMOTE_KEY_FILE): entries on a shared "
                                "server are read and written only under a team key (see cache/README.md)");
        return EXIT_USAGE;
    }
    int r;
    if (have && (r = remote_key_load(cli->remote_key, secret, err, sizeof err)) != 0) {
        cli_error("%s", err);
        return r == CACHE_EIO ? EXIT_SYSTEM : EXIT_INPUT;
    }
    const char *ms = getenv("MILC_REMOTE_TIMEOUT_MS"); /* tests and slow links */
    int io = ms && *ms ? atoi(ms) : 0;
    const char *cb = getenv("MILC_REMOTE_CHUNK"); /* bytes per chunk pushed */
    long chunk = cb && *cb ? atol(cb) : 0;
    RemoteOptions o = {.url = cli->remote, .secret = have ? secret : NULL, .readonly = cli->remote_readonly,
                       .io_timeout_ms = io > 0 ? io : 0, .connect_timeout_ms = io > 0 ? io : 0,
                       .chunk_bytes = chunk > 0 && chunk <= REMOTE_CHUNK_MAX ? (uint32_t)chunk : 0};
    r = remote_open(out, &o, err, sizeof err);
    memset(secret, 0, sizeof secret);
    if (r != 0) { cli_usage_error(cmd, "%s", err); return EXIT_USAGE; }
    return EXIT_OK;
}

void tier_warn(Remote *r) {
    const char *w = r ? remote_warning(r) : NULL;
    if (w) fprintf(stderr, "milc: warning: %s\n", w);
}

void tier_close(Remote *r) {
    tier_warn(r);
    remote_close(r);
}

/* A refused entry is worth a line; a plain miss or a downed remote is not
 * (the breaker says that once). */
static bool pulled(Remote *r, int rc) {
    if (rc == CACHE_ECORRUPT) fprintf(stderr, "milc: warning: %s; building it here\n", remote_errmsg(r));
    else if (rc != 0 && rc != CACHE_ENOTFOUND && rc != CACHE_EMISMATCH && rc != CACHE_EIO)
        fprintf(stderr, "milc: warning: remote cache: %s\n", remote_errmsg(r));
    tier_warn(r);
    return rc == 0;
}

bool tier_pull(Remote *r, Cache *c, const CacheKey *k, const void *rec, size_t rlen) {
    return r && remote_up(r) && pulled(r, remote_pull(r, c, k, rec, rlen));
}

bool tier_pull_direct(Remote *r, Cache *c, const CacheKey *dkey, const void *drec, size_t dlen) {
    return r && remote_up(r) && pulled(r, remote_pull_direct(r, c, dkey, drec, dlen, NULL));
}

void tier_push(Remote *r, Cache *c, const CacheKey *k, const CacheKey *dkey, const void *drec, size_t dlen) {
    if (!r || !remote_up(r) || remote_readonly(r)) return;
    int rc = remote_push(r, c, k);
    if (rc >= 0 && dkey) rc = remote_push_direct(r, dkey, drec, dlen, k);
    if (rc < 0 && rc != CACHE_EIO) fprintf(stderr, "milc: warning: remote cache: push failed: %s\n", remote_errmsg(r));
    tier_warn(r);
}
