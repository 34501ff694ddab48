/* stale.c — `cache verify --stale [--repair]`: the entries another milc made
 * (drift_why), listed and removed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "milc/drift.h"
#include "stale.h"

typedef struct {
    const Cli *cli;
    CacheKey *keys;
    int n, cap;
    json_t *json; /* --json: the stale entries */
} StaleList;

static int stale_entry(void *ctx, const CacheEntryInfo *e) {
    StaleList *s = ctx;
    char why[512], hex[33];
    if (!drift_why(e->record, e->record_len, why, sizeof why)) return 0;
    cache_key_hex(&e->key, hex);
    if (s->cli->json)
        cli_json_push(s->json, cli_json_obj("key", json_string(hex), "why", cli_json_str(why), NULL));
    else
        printf("%s: stale: %s\n", hex, why);
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        CacheKey *k = realloc(s->keys, (size_t)s->cap * sizeof *k);
        if (!k) return CACHE_ENOMEM;
        s->keys = k;
    }
    s->keys[s->n++] = e->key;
    return 0;
}

int drift_verify(const Cli *cli, Cache *c, bool repair) {
    StaleList s = {cli, NULL, 0, 0, json_array()};
    int r = cache_ls(c, stale_entry, &s), removed = 0;
    for (int i = 0; r == 0 && repair && i < s.n; i++) removed += cache_rm(c, &s.keys[i]) == 0;
    if (cli->json)
        cli_json_print(stdout, cli_json_obj("stale", s.json, "removed", json_integer(removed), NULL));
    else if (json_decref(s.json), cli->verbosity >= 0)
        printf("%d stale entr%s%s\n", s.n, s.n == 1 ? "y" : "ies", repair ? " removed" : "");
    free(s.keys);
    if (r != 0) {
        cli_error("cache verify: %s", cache_errmsg(c));
        return EXIT_SYSTEM;
    }
    return EXIT_OK;
}
