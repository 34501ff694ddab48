/* cmd_cache.c — `milc cache ...`: inspect and maintain the artifact cache. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scratch.h"
#include "cli.h"
#include "json.h"
#include "milc/cache.h"
#include "milc/drift.h"
#include "stale.h"
#include "explain.h"
#include "milc/ledger.h"
#include "tier.h"

static const OptSpec cache_opts[] = {
    {"max-size", 0, OPT_VALUE, "SIZE", "gc: evict least-recently-used entries down to SIZE (e.g. 2G, 500M)"},
    {"evict-older-than", 0, OPT_VALUE, "AGE", "gc: evict entries unused for AGE (e.g. 30d, 12h, 90m, 3600s)"},
    {"no-compact", 0, OPT_FLAG, NULL, "gc: do not compact the file afterwards"},
    {"policy", 0, OPT_VALUE, "age|value",
     "gc: evict the least recently used first (age, the default) or the least compile time saved per byte first "
     "(value)"},
    {"repair", 0, OPT_FLAG, NULL, "verify: remove bad entries (with --stale: stale ones)"},
    {"stale", 0, OPT_FLAG, NULL, "verify: list entries another milc made (version, formats, backend, CPU features)"},
    {"set-limit", 0, OPT_VALUE, "SIZE", "stat: also set the cache's size limit (0 = none)"},
    {"zero", 0, OPT_FLAG, NULL, "stat: zero the counters after printing"},
    {"remote", 0, OPT_FLAG, NULL, "stat: the remote tier's figures instead (needs --remote URL or $MILC_REMOTE)"},
    {0},
};

static void cache_help(FILE *f) {
    fputs("usage: milc cache ls | stat | show KEY | rm KEY | gc | verify | clear\n"
          "       milc cache export FILE [KEY...] | import FILE\n"
          "       milc [--remote URL] cache push [KEY...] | pull [KEY...] | stat --remote\n"
          "       milc cache why BUILD-OPTIONS\n"
          "\n"
          "  ls        every entry: key, mode, size, created, last used, hits, and its cost\n"
          "            ledger (compile ms, last load ms, compile time saved), description\n"
          "  stat      hits (direct and full), misses, errors, entries, bytes, compile time saved\n"
          "  show KEY  one entry with its key record\n"
          "  rm KEY    remove one entry\n"
          "  gc        evict (--max-size, --evict-older-than, the stored limit; least recently\n"
          "            used first, or by --policy value the least compile time saved per byte),\n"
          "            then compact\n"
          "  verify    check every entry's bytes against its checksum\n"
          "  clear     remove every entry (also the cure for a damaged cache file)\n"
          "  export    write entries (all, or the KEYs) to a bundle file for shipping\n"
          "  import    verify a bundle completely, then add its entries\n"
          "  why       for a build's programs (same options as 'milc build'): in the cache,\n"
          "            or the nearest stored entries of the template and the key fields\n"
          "            that differ (milc version, mode, CPU features, a parameter, ...)\n"
          "  push      copy entries (all, or the KEYs) to the remote tier (needs the team key)\n"
          "  pull      copy entries (all on the remote, or the KEYs) into the local cache,\n"
          "            each authenticated (MAC) before it is stored\n"
          "\noptions:\n",
          f);
    print_options(f, cache_opts);
}

/* "500M", "2G", "1024" → bytes. */
static bool parse_size(const char *s, uint64_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return false;
    double mul = 1;
    switch (*end) {
    case 0: break;
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default: return false;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v * mul > 1.8e19) return false;
    *out = (uint64_t)(v * mul);
    return true;
}

/* "30d", "12h", "90m", "3600s", "3600" → seconds. */
static bool parse_age(const char *s, uint64_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return false;
    double mul = 1;
    switch (*end) {
    case 0:
    case 's': break;
    case 'm': mul = 60; break;
    case 'h': mul = 3600; break;
    case 'd': mul = 86400; break;
    case 'w': mul = 7 * 86400; break;
    default: return false;
    }
    if (*end && end[1]) return false;
    *out = (uint64_t)(v * mul);
    return true;
}

static void fmt_bytes(uint64_t b, char *buf, size_t n) {
    if (b >= (1ull << 30))
        snprintf(buf, n, "%.2f GB", (double)b / (1 << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, n, "%.1f MB", (double)b / (1 << 20));
    else if (b >= 1024)
        snprintf(buf, n, "%.1f kB", (double)b / 1024);
    else
        snprintf(buf, n, "%" PRIu64 " B", b);
}

static void fmt_time(uint64_t ns, char *buf, size_t n) {
    if (!ns) {
        snprintf(buf, n, "-");
        return;
    }
    time_t t = (time_t)(ns / 1000000000ull);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

typedef struct {
    const Cli *cli;
    int n;
    json_t *json; /* --json: the entries' array */
} LsCtx;

static json_t *entry_json(const CacheEntryInfo *e, const char *key, const char *created, const char *used) {
    return cli_json_obj("key", json_string(key), "description", cli_json_str(e->description), "backend",
                        cli_json_str(e->backend), "mode", json_integer(e->mode), "bytes",
                        json_integer((json_int_t)e->bytes), "sections", json_integer(e->nsections), "created",
                        json_string(created), "last_used", json_string(used), "hits", json_integer((json_int_t)e->hits),
                        "compile_ms", cli_json_real((double)e->compile_ns / 1e6, 3), "load_ms",
                        cli_json_real((double)e->load_ns / 1e6, 3), "saved_ms",
                        cli_json_real((double)e->compile_ns * (double)e->hits / 1e6, 3), "copied_sections",
                        json_integer(e->copied), NULL);
}

static int ls_entry(void *ctx, const CacheEntryInfo *e) {
    LsCtx *lc = ctx;
    char key[33], size[32], created[32], used[32];
    cache_key_hex(&e->key, key);
    fmt_bytes(e->bytes, size, sizeof size);
    fmt_time(e->created_ns, created, sizeof created);
    fmt_time(e->last_used_ns, used, sizeof used);
    if (lc->cli->json) {
        cli_json_push(lc->json, entry_json(e, key, created, used));
    } else {
        char load[16];
        snprintf(load, sizeof load, e->load_ns ? "%.1f" : "-", (double)e->load_ns / 1e6);
        if (lc->n == 0)
            printf("%-32s %4s %10s %-20s %-20s %6s %9s %8s %9s  %s\n", "KEY", "MODE", "SIZE", "CREATED", "LAST USED",
                   "HITS", "COMPILEms", "LOADms", "SAVED s", "DESCRIPTION");
        printf("%s %4d %10s %-20s %-20s %6" PRIu64 " %9.1f %8s %9.2f  ", key, e->mode, size, created, used, e->hits,
               (double)e->compile_ns / 1e6, load, (double)e->compile_ns * (double)e->hits / 1e9);
        cli_print_text(stdout, e->description); /* stored text: a bundle's maker chose it */
        putchar('\n');
    }
    lc->n++;
    return 0;
}

static const char *tag_name(uint32_t tag, char buf[5]) {
    for (int i = 0; i < 4; i++) {
        char c = (char)(tag >> (8 * (3 - i)));
        buf[i] = (c >= 32 && c < 127) ? c : '.';
    }
    buf[4] = 0;
    return buf;
}

static int show_entry(void *ctx, const CacheEntryInfo *e) {
    const Cli *cli = ctx;
    LsCtx lc = {cli, 0, json_array()};
    json_t *rec = json_array();
    ls_entry(&lc, e);
    if (!cli->json) printf("\nkey record (%zu bytes):\n", e->record_len);
    size_t pos = 0;
    uint32_t tag;
    const uint8_t *bytes;
    uint64_t len;
    int k = 0, r;
    while ((r = ckey_record_next(e->record, e->record_len, &pos, &tag, &bytes, &len)) == 1) {
        char tn[5];
        bool text = true;
        for (uint64_t i = 0; i < len; i++)
            if ((bytes[i] < 32 && bytes[i] != '\n' && bytes[i] != '\t') || bytes[i] > 126) {
                text = false;
                break;
            }
        if (cli->json) {
            char *v = malloc(2 * len + 1);
            for (uint64_t i = 0; v && i < len; i++)
                if (text)
                    v[i] = (char)bytes[i], v[i + 1] = 0;
                else
                    snprintf(v + 2 * i, 3, "%02x", bytes[i]);
            if (v && !len) v[0] = 0;
            cli_json_push(rec,
                          cli_json_obj("tag", json_string(tag_name(tag, tn)), "length", json_integer((json_int_t)len),
                                       text ? "text" : "hex", v ? cli_json_str(v) : NULL, NULL));
            free(v);
        } else {
            printf("  %s  %8" PRIu64 " bytes  ", tag_name(tag, tn), len);
            if (text && len <= 80 && !memchr(bytes, '\n', len))
                printf("%.*s\n", (int)len, (const char *)bytes);
            else if (text) {
                uint64_t lines = 0;
                for (uint64_t i = 0; i < len; i++) lines += bytes[i] == '\n';
                printf("(text, %" PRIu64 " lines; --json shows it)\n", lines);
            } else {
                for (uint64_t i = 0; i < len && i < 32; i++) printf("%02x", bytes[i]);
                printf("%s\n", len > 32 ? "..." : "");
            }
        }
        k++;
    }
    if (cli->json)
        cli_json_print(stdout, cli_json_obj("entry", lc.json, "record", rec, NULL));
    else
        json_decref(lc.json), json_decref(rec);
    if (r < 0) fprintf(stderr, "milc: warning: key record is malformed after %d items\n", k);
    return 0;
}

typedef struct {
    const Cli *cli;
    int n;
} BadCtx;
static void bad_entry(void *ctx, const CacheKey *k, const char *why) {
    BadCtx *b = ctx;
    char key[33];
    cache_key_hex(k, key);
    if (!b->cli->json) fprintf(stderr, "%s: bad: %s\n", key, why);
    b->n++;
}

static int cache_fail(Cache *c, const char *what, int rc) {
    const char *msg = c ? cache_errmsg(c) : "";
    cli_error("cache %s: %s%s%s", what, cache_strerror(rc), *msg ? ": " : "", msg);
    return rc == CACHE_EINVAL || rc == CACHE_EBUNDLE || rc == CACHE_ENOTFOUND ? EXIT_INPUT : EXIT_SYSTEM;
}

/* gc --policy value: down to max_size (else the stored limit) by value first;
 * cache_gc then only compacts (and applies --evict-older-than). */
static int gc_by_value(Cache *c, uint64_t max_size, uint64_t *ev, uint64_t *bytes) {
    CacheStats s;
    int r = cache_stat(c, &s);
    uint64_t limit = max_size ? max_size : s.max_bytes;
    if (r < 0 || !limit) return r < 0 ? r : 0; /* no size to get under: nothing to evict by value */
    return ledger_evict_by_value(c, limit, ev, bytes);
}

/* cache stat: the counters, the scratch left behind and the ledger's totals. */
static int stat_cmd(const Cli *cli, Cache *c, const Args *a, uint64_t limit) {
    int r, rc = EXIT_OK;
    if (args_get(a, "set-limit") && (r = cache_set_limit(c, limit)) < 0) return cache_fail(c, "stat", r);
    CacheStats s;
    if ((r = cache_stat(c, &s)) < 0) return cache_fail(c, "stat", r);
    uint64_t lookups = s.direct_hits + s.hits + s.misses;
    ScratchUsage su;
    scratch_sweep(cli->cache_dir, "tmp-build", 0, &su);
    LedgerTotals lt;
    if ((r = ledger_totals(c, &lt)) < 0) return cache_fail(c, "stat", r);
    char top[3][33];
    for (int i = 0; i < lt.ntop; i++) cache_key_hex(&lt.top[i], top[i]);
    if (cli->json) {
        json_t *tops = json_array();
        for (int i = 0; i < lt.ntop; i++) cli_json_push(tops, json_string(top[i]));
        cli_json_print(
            stdout,
            cli_json_obj(
                "cache_dir", cli_json_str(cli->cache_dir), "direct_hits", json_integer((json_int_t)s.direct_hits),
                "full_hits", json_integer((json_int_t)s.hits), "misses", json_integer((json_int_t)s.misses), "errors",
                json_integer((json_int_t)s.errors), "entries", json_integer((json_int_t)s.entries), "bytes",
                json_integer((json_int_t)s.bytes), "max_bytes", json_integer((json_int_t)s.max_bytes), "file_bytes",
                json_integer((json_int_t)s.file_bytes), "saved_ms", cli_json_real((double)s.saved_ns / 1e6, 3),
                "scratch_dirs", json_integer(su.dirs), "scratch_bytes", json_integer((json_int_t)su.bytes),
                "stale_scratch_dirs", json_integer(su.dead_dirs), "compile_ms_held",
                cli_json_real((double)lt.compile_ns / 1e6, 3), "saved_ms_held",
                cli_json_real((double)lt.saved_ns / 1e6, 3), "loads_recorded", json_integer((json_int_t)lt.loads),
                "load_ms_mean", cli_json_real(lt.loads ? (double)lt.load_ns / 1e6 / (double)lt.loads : 0.0, 3),
                "most_saved_per_byte", tops, NULL));
    } else {
        char b1[32], b2[32], b3[32];
        fmt_bytes(s.bytes, b1, sizeof b1);
        fmt_bytes(s.max_bytes, b2, sizeof b2);
        fmt_bytes(s.file_bytes, b3, sizeof b3);
        double pct = lookups ? 100.0 * (double)(s.direct_hits + s.hits) / (double)lookups : 0;
        printf("cache directory      %s\n", cli->cache_dir);
        printf("direct hits          %" PRIu64 "\n", s.direct_hits);
        printf("full hits            %" PRIu64 "\n", s.hits);
        printf("misses               %" PRIu64 "\n", s.misses);
        printf("hit rate             %.1f %%\n", pct);
        printf("errors               %" PRIu64 "\n", s.errors);
        printf("entries              %" PRIu64 "\n", s.entries);
        printf("artifact bytes       %s\n", b1);
        printf("size limit           %s\n", s.max_bytes ? b2 : "none");
        printf("file size            %s\n", b3);
        printf("compile time saved   %.3f s\n", (double)s.saved_ns / 1e9);
        char b4[32];
        fmt_bytes(su.bytes, b4, sizeof b4);
        printf("scratch              %s in %d build director%s (%d of dead processes: `milc cache gc` removes them)\n",
               b4, su.dirs, su.dirs == 1 ? "y" : "ies", su.dead_dirs);
        printf("compile time held    %.3f s (rebuilding every entry; %.3f s saved by them so far)\n",
               (double)lt.compile_ns / 1e9, (double)lt.saved_ns / 1e9);
        if (lt.loads)
            printf("load time            %.2f ms mean over %" PRIu64 " entries run\n",
                   (double)lt.load_ns / 1e6 / (double)lt.loads, lt.loads);
        for (int i = 0; i < lt.ntop; i++) printf("%-20s %s\n", i ? "" : "most saved per byte", top[i]);
    }
    if (args_flag(a, "zero") && (r = cache_zero_stats(c)) < 0) rc = cache_fail(c, "stat", r);
    return rc;
}

/* cache gc: evict (by value first with --policy value), compact, sweep scratch. */
static int gc_cmd(const Cli *cli, Cache *c, const Args *a, bool by_value, uint64_t max_size, uint64_t max_age) {
    int r;
    CacheGcReport g;
    uint64_t vev = 0, vbytes = 0;
    if (by_value && (r = gc_by_value(c, max_size, &vev, &vbytes)) < 0) return cache_fail(c, "gc", r);
    r = cache_gc(c, max_size, max_age, !args_flag(a, "no-compact"), &g);
    if (r < 0) return cache_fail(c, "gc", r);
    g.evicted += vev, g.evicted_bytes += vbytes;
    ScratchUsage su;
    scratch_sweep(cli->cache_dir, "tmp-build", 1, &su);
    if (cli->json)
        cli_json_print(stdout, cli_json_obj("evicted", json_integer((json_int_t)g.evicted), "evicted_bytes",
                                            json_integer((json_int_t)g.evicted_bytes), "file_before",
                                            json_integer((json_int_t)g.file_before), "file_after",
                                            json_integer((json_int_t)g.file_after), "compacted",
                                            json_boolean(g.compacted), "scratch_removed", json_integer(su.dead_dirs),
                                            "scratch_removed_bytes", json_integer((json_int_t)su.dead_bytes), NULL));
    else if (cli->verbosity >= 0) {
        char b1[32], b2[32], b3[32];
        fmt_bytes(g.evicted_bytes, b1, sizeof b1);
        fmt_bytes(g.file_before, b2, sizeof b2);
        fmt_bytes(g.file_after, b3, sizeof b3);
        printf("evicted %" PRIu64 " entries (%s); file %s -> %s%s\n", g.evicted, b1, b2, b3,
               g.compacted ? "" : " (not compacted: cache in use by another process, or --no-compact)");
        if (su.dead_dirs) {
            fmt_bytes(su.dead_bytes, b1, sizeof b1);
            printf("removed %d scratch director%s of dead builds (%s)\n", su.dead_dirs, su.dead_dirs == 1 ? "y" : "ies",
                   b1);
        }
    }
    return EXIT_OK;
}

/* cache verify [--stale] [--repair]. */
static int verify_cmd(const Cli *cli, Cache *c, const Args *a) {
    int r, rc = EXIT_OK;
    if (args_flag(a, "stale")) return drift_verify(cli, c, args_flag(a, "repair"));
    BadCtx b = {cli, 0};
    r = cache_verify(c, args_flag(a, "repair"), bad_entry, &b);
    if (r < 0) return cache_fail(c, "verify", r);
    if (cli->json)
        cli_json_print(
            stdout, cli_json_obj("bad", json_integer(r), "repaired", json_boolean(args_flag(a, "repair") && r), NULL));
    else if (cli->verbosity >= 0)
        printf("%d bad entr%s%s\n", r, r == 1 ? "y" : "ies", r && args_flag(a, "repair") ? " removed" : "");
    if (r > 0 && !args_flag(a, "repair")) rc = EXIT_INPUT;
    return rc;
}

/* cache export FILE [KEY...]. */
static int export_cmd(const Cli *cli, Cache *c, const Args *a) {
    int nk = a->npos - 2;
    CacheKey *keys = nk ? calloc((size_t)nk, sizeof *keys) : NULL;
    for (int i = 0; i < nk; i++)
        if (cache_key_parse(a->pos[2 + i], &keys[i]) != 0) {
            cli_usage_error("cache", "'%s' is not a key (32 hex digits)", a->pos[2 + i]);
            free(keys);
            return EXIT_USAGE;
        }
    int r = cache_export(c, a->pos[1], keys, nk);
    free(keys);
    if (r < 0) return cache_fail(c, "export", r);
    if (cli->json)
        cli_json_print(stdout, cli_json_obj("exported", json_integer(r), "file", cli_json_str(a->pos[1]), NULL));
    else if (cli->verbosity >= 0)
        fprintf(stderr, "exported %d entr%s to %s\n", r, r == 1 ? "y" : "ies", a->pos[1]);
    return EXIT_OK;
}

/* gc's and stat's sizes, age and policy. */
typedef struct SizeOpts {
    uint64_t max_size, max_age, limit;
    bool by_value; /* --policy value */
} SizeOpts;

/* false after a usage error (printed). */
static bool size_opts(const Args *a, SizeOpts *o) {
    memset(o, 0, sizeof *o);
    if (args_get(a, "max-size") && !parse_size(args_get(a, "max-size"), &o->max_size)) {
        cli_usage_error("cache", "--max-size: '%s' is not a size such as 500M or 2G", args_get(a, "max-size"));
        return false;
    }
    if (args_get(a, "evict-older-than") && !parse_age(args_get(a, "evict-older-than"), &o->max_age)) {
        cli_usage_error("cache", "--evict-older-than: '%s' is not an age such as 30d or 12h",
                        args_get(a, "evict-older-than"));
        return false;
    }
    const char *policy = args_get(a, "policy");
    o->by_value = policy && strcmp(policy, "value") == 0;
    if (policy && !o->by_value && strcmp(policy, "age") != 0) {
        cli_usage_error("cache", "--policy: '%s' is not age or value", policy);
        return false;
    }
    if (args_get(a, "set-limit") && !parse_size(args_get(a, "set-limit"), &o->limit)) {
        cli_usage_error("cache", "--set-limit: '%s' is not a size", args_get(a, "set-limit"));
        return false;
    }
    return true;
}

static int cache_run(Cli *cli, int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "why") == 0) return explain_cmd(cli, argc - 1, argv + 1);
    Args a;
    if (!args_parse("cache", cache_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    Cache *c = NULL;
    const char *sub = a.npos ? a.pos[0] : NULL;
    static const char *const subs[] = {"ls",    "stat",   "show",   "rm",   "gc",  "verify",
                                       "clear", "export", "import", "push", "pull"};
    static const int nargs_min[] = {0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0},
                     nargs_max[] = {0, 0, 1, 1, 0, 0, 0, 1 << 20, 1, 1 << 20, 1 << 20};
    Store *remote = NULL;
    int si = -1;
    for (int i = 0; sub && i < 11; i++)
        if (strcmp(sub, subs[i]) == 0) si = i;
    if (si < 0) {
        cli_usage_error("cache", sub ? "no subcommand '%s'" : "expected a subcommand%s", sub ? sub : "");
        goto out;
    }
    if (a.npos - 1 < nargs_min[si] || a.npos - 1 > nargs_max[si]) {
        cli_usage_error("cache", "wrong number of arguments for '%s'", sub);
        goto out;
    }
    CacheKey key;
    if ((si == 2 || si == 3) && cache_key_parse(a.pos[1], &key) != 0) {
        cli_usage_error("cache", "'%s' is not a key (32 hex digits)", a.pos[1]);
        goto out;
    }
    SizeOpts so;
    if (!size_opts(&a, &so)) goto out;
    bool want_remote = si >= 9 || (si == 1 && args_flag(&a, "remote"));
    if (want_remote && (rc = tier_open(cli, "cache", si >= 9, &remote)) != EXIT_OK) goto out;
    if (si == 1 && want_remote) {
        rc = tier_cmd_stat(cli, store_redis_remote(remote));
        goto out;
    }
    rc = EXIT_USAGE;
    char err[512] = "";
    if (si == 6) { /* clear: must work on a damaged cache, so no open. */
        int r = cache_destroy(cli->cache_dir, err, sizeof err);
        if (r != 0) {
            cli_error("cache clear: %s", err[0] ? err : cache_strerror(r));
            rc = EXIT_SYSTEM;
            goto out;
        }
        ScratchUsage su; /* builds killed outright left these; live ones stay */
        scratch_sweep(cli->cache_dir, "tmp-build", 1, &su);
        if (cli->json)
            cli_json_print(stdout,
                           cli_json_obj("cleared", json_true(), "scratch_removed", json_integer(su.dead_dirs), NULL));
        else if (cli->verbosity >= 0)
            fprintf(stderr, "cleared %s\n", cli->cache_dir);
        rc = EXIT_OK;
        goto out;
    }
    int r = cache_open(&c, cli->cache_dir, NULL, err, sizeof err);
    if (r != 0) {
        cli_cache_error(r, err);
        rc = EXIT_SYSTEM;
        goto out;
    }
    rc = EXIT_OK;
    switch (si) {
    case 0: {
        LsCtx lc = {cli, 0, json_array()};
        r = cache_ls(c, ls_entry, &lc);
        if (cli->json && r >= 0)
            cli_json_print(stdout, lc.json);
        else
            json_decref(lc.json);
        if (r < 0) rc = cache_fail(c, "ls", r);
        break;
    }
    case 1: rc = stat_cmd(cli, c, &a, so.limit); break;
    case 2:
        r = cache_show(c, &key, show_entry, cli);
        if (r < 0) rc = cache_fail(c, "show", r);
        break;
    case 3:
        r = cache_rm(c, &key);
        if (r < 0)
            rc = cache_fail(c, "rm", r);
        else if (cli->json)
            cli_json_print(stdout, cli_json_obj("removed", cli_json_str(a.pos[1]), NULL));
        break;
    case 4: rc = gc_cmd(cli, c, &a, so.by_value, so.max_size, so.max_age); break;
    case 5: rc = verify_cmd(cli, c, &a); break;
    case 7: rc = export_cmd(cli, c, &a); break;
    case 8:
        r = cache_import(c, a.pos[1]);
        if (r < 0) {
            rc = cache_fail(c, "import", r);
            break;
        }
        if (cli->json)
            cli_json_print(stdout, cli_json_obj("imported", json_integer(r), NULL));
        else if (cli->verbosity >= 0)
            fprintf(stderr, "imported %d entr%s from %s\n", r, r == 1 ? "y" : "ies", a.pos[1]);
        break;
    case 9: rc = tier_cmd_push(cli, c, store_redis_remote(remote), a.pos + 1, a.npos - 1); break;
    case 10: rc = tier_cmd_pull(cli, c, store_redis_remote(remote), a.pos + 1, a.npos - 1); break;
    }
out:
    if (c) cache_close(c);
    tier_close(remote);
    args_free(&a);
    return rc;
}

const Command cmd_cache = {"cache", "inspect and maintain the artifact cache", cache_run, cache_help, false, true};
