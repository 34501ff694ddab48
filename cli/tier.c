/* tier.c — opening the remote tier from the CLI's options (tier.h).  The
 * build path's read-through and write-back are the library's (tier_io.c); the
 * warnings are printed here. */
#include <stdlib.h>
#include <string.h>

#include "tier.h"

int tier_open(const Cli *cli, const char *cmd, bool need_key, Store **out) {
    *out = NULL;
    if (!cli->remote) {
        if (cli->remote_readonly) {
            cli_usage_error(cmd, "--remote-readonly without --remote (or $MILC_REMOTE)");
            return EXIT_USAGE;
        }
        return EXIT_OK;
    }
    char err[600] = "";
    RemoteUrl u;
    if (remote_url_parse(cli->remote, &u, err, sizeof err) != 0) {
        cli_usage_error(cmd, "%s", err);
        return EXIT_USAGE;
    }
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
    RemoteOptions o = {.url = cli->remote,
                       .secret = have ? secret : NULL,
                       .readonly = cli->remote_readonly,
                       .io_timeout_ms = io > 0 ? io : 0,
                       .connect_timeout_ms = io > 0 ? io : 0,
                       .chunk_bytes = chunk > 0 && chunk <= REMOTE_CHUNK_MAX ? (uint32_t)chunk : 0};
    r = store_redis_open(out, &o, err, sizeof err);
    memset(secret, 0, sizeof secret);
    if (r != 0) {
        cli_usage_error(cmd, "%s", err);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

void tier_warn(Store *r) {
    const char *w = r ? store_notice(r) : NULL;
    if (w) fprintf(stderr, "milc: warning: %s\n", w);
}

void tier_close(Store *r) {
    tier_warn(r);
    store_close(r);
}
