/* tier_cmd.c — `milc cache push`, `pull` and `stat --remote`: moving entries
 * between the local cache and the remote tier on request (tier.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tier.h"
#include "json.h"

typedef struct {
    CacheKey *v;
    int n, cap;
} KeyList;

static int keys_add(void *ctx, const CacheKey *k) {
    KeyList *l = ctx;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        CacheKey *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return CACHE_ENOMEM;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = *k;
    return 0;
}

static int ls_add(void *ctx, const CacheEntryInfo *e) { return keys_add(ctx, &e->key); }

/* The server failed: its message is the error (the breaker's warning would
 * only repeat it). */
static int down(Remote *r) {
    cli_error("remote cache: %s", remote_errmsg(r));
    (void)remote_warning(r);
    return EXIT_SYSTEM;
}

/* The KEYs given, else every key of the source (the local cache, or the remote). */
static int collect(Cache *c, Remote *r, const char *const *keys, int nkeys, KeyList *out) {
    for (int i = 0; i < nkeys; i++) {
        CacheKey k;
        if (cache_key_parse(keys[i], &k) != 0) {
            cli_usage_error("cache", "'%s' is not a key (32 hex digits)", keys[i]);
            return EXIT_USAGE;
        }
        if (keys_add(out, &k) != 0) {
            cli_error("out of memory");
            return EXIT_SYSTEM;
        }
    }
    if (nkeys) return EXIT_OK;
    int rc = c ? cache_ls(c, ls_add, out) : remote_list(r, keys_add, out);
    if (rc == 0) return EXIT_OK;
    if (!c) return down(r);
    cli_error("listing the local cache: %s", cache_errmsg(c));
    return EXIT_SYSTEM;
}

static int need(const Cli *cli, Remote *r, const char *what) {
    (void)cli;
    if (!r) {
        cli_usage_error("cache", "'cache %s' needs --remote URL (or $MILC_REMOTE)", what);
        return EXIT_USAGE;
    }
    if (remote_ping(r) != 0) return down(r);
    return EXIT_OK;
}

static void summary(const Cli *cli, const char *verb, int done, int skipped, int failed) {
    if (cli->json)
        cli_json_print(stdout, cli_json_obj(verb, json_integer(done), "already", json_integer(skipped), "failed",
                                            json_integer(failed), NULL));
    else if (cli->verbosity >= 0)
        printf("%s %d, already there %d, failed %d\n", verb, done, skipped, failed);
}

int tier_cmd_push(const Cli *cli, Cache *c, Remote *r, const char *const *keys, int nkeys) {
    int rc = need(cli, r, "push");
    if (rc != EXIT_OK) return rc;
    if (remote_readonly(r)) {
        cli_usage_error("cache", "'cache push' with --remote-readonly");
        return EXIT_USAGE;
    }
    KeyList l = {0};
    int done = 0, skipped = 0, failed = 0;
    if ((rc = collect(c, r, keys, nkeys, &l)) == EXIT_OK)
        for (int i = 0; i < l.n; i++) {
            int p = remote_push(r, c, &l.v[i]);
            char hex[33];
            cache_key_hex(&l.v[i], hex);
            if (p >= 0) {
                p ? skipped++ : done++;
                continue;
            }
            failed++;
            if (p == CACHE_EIO) {
                rc = down(r);
                break;
            }
            cli_error("push %s: %s", hex, remote_errmsg(r));
            if (rc == EXIT_OK) rc = p == CACHE_ENOTFOUND ? EXIT_INPUT : EXIT_SYSTEM;
        }
    free(l.v);
    summary(cli, "pushed", done, skipped, failed);
    return rc;
}

static bool have_local(Cache *c, const CacheKey *k) {
    CacheHit *h;
    if (cache_get(c, k, NULL, 0, CACHE_GET_NOTOUCH | CACHE_GET_VERIFY_ONCE, &h) != 0) return false;
    cache_hit_release(h);
    return true;
}

int tier_cmd_pull(const Cli *cli, Cache *c, Remote *r, const char *const *keys, int nkeys) {
    int rc = need(cli, r, "pull");
    if (rc != EXIT_OK) return rc;
    KeyList l = {0};
    int done = 0, skipped = 0, failed = 0;
    if ((rc = collect(NULL, r, keys, nkeys, &l)) == EXIT_OK)
        for (int i = 0; i < l.n; i++) {
            if (have_local(c, &l.v[i])) {
                skipped++;
                continue;
            }
            int p = remote_pull(r, c, &l.v[i], NULL, 0);
            char hex[33];
            cache_key_hex(&l.v[i], hex);
            if (p == 0) {
                done++;
                continue;
            }
            failed++;
            if (p == CACHE_EIO) {
                rc = down(r);
                break;
            }
            cli_error("pull %s: %s", hex, remote_errmsg(r));
            if (rc == EXIT_OK) rc = CACHE_IS_MISS(p) ? EXIT_INPUT : EXIT_SYSTEM;
        }
    free(l.v);
    summary(cli, "pulled", done, skipped, failed);
    return rc;
}

int tier_cmd_stat(const Cli *cli, Remote *r) {
    int rc = need(cli, r, "stat --remote");
    if (rc != EXIT_OK) return rc;
    RemoteStats s;
    if (remote_stat(r, &s) != 0) return down(r);
    if (cli->json)
        cli_json_print(
            stdout,
            cli_json_obj("remote",
                         cli_json_obj("entries", json_integer((json_int_t)s.entries), "direct_keys",
                                      json_integer((json_int_t)s.directs), "chunks", json_integer((json_int_t)s.chunks),
                                      "other_keys", json_integer((json_int_t)s.other_keys), "used_memory",
                                      json_integer((json_int_t)s.used_memory), "maxmemory",
                                      json_integer((json_int_t)s.maxmemory), "evicted_keys",
                                      json_integer((json_int_t)s.evicted_keys), "redis_version",
                                      cli_json_str(s.version), "maxmemory_policy", cli_json_str(s.policy), NULL),
                         NULL));
    else {
        printf("remote entries       %" PRIu64 "\n", s.entries);
        printf("remote direct keys   %" PRIu64 "\n", s.directs);
        printf("remote chunks        %" PRIu64 "\n", s.chunks);
        printf("other keys           %" PRIu64 "\n", s.other_keys);
        printf("server memory        %.1f MB of %s%.1f MB (policy %s), %" PRIu64 " keys evicted\n",
               (double)s.used_memory / 1048576.0, s.maxmemory ? "" : "unlimited ", (double)s.maxmemory / 1048576.0,
               s.policy, s.evicted_keys);
        printf("redis version        %s\n", s.version);
    }
    return EXIT_OK;
}
