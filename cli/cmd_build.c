/* cmd_build.c — `milc build`: generate, check, compile and store chunks, or
 * find them in the cache.  --chunk K cuts a whole model into chunks of K
 * layers; a template parameter given as a comma list (--seq 1,8,16) builds
 * every value. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "json.h"
#include "genopts.h"
#include "explain.h"
#include "milc/jobs.h"
#include "milc/packages.h"
#include "milc/request.h"
#include "tier.h"

static const OptSpec build_opts[] = {
    GEN_COMMON_OPTS,
    {"mode", 0, OPT_VALUE, "N[,N]", RT_MODES_HELP},
    {"chunk", 0, OPT_VALUE, "K|auto",
     "build the whole model in chunks of K layers; auto: as deep as --max-chunk-bytes allows"},
    {"max-chunk-bytes", 0, OPT_VALUE, "SIZE",
     "--chunk auto: the most weight bytes one chunk may hold (default 1G; K, M, G, T suffixes)"},
    {"whole", 0, OPT_FLAG, NULL, "also the embedding and the LM head (--part embed, head): token ids to logits"},
    {"packages", 0, OPT_VALUE, "DIR", "also leave each program as a Core ML package, DIR/KEY.mlpackage"},
    {"jobs", 'j', OPT_VALUE, "N",
     "1: each program made and stored in turn; 2 (the default on 2+ CPUs): one stored while the next is made"},
    VERIFY_OPTS,
    {"explain", 0, OPT_FLAG, NULL,
     "for each program not in the cache, first show the nearest stored entries and the key fields that differ"},
    {"help", 'h', OPT_FLAG, NULL, "this help, with the template's parameters"},
    {0},
};

static void build_usage(FILE *f) {
    fputs("usage: milc build [--template NAME | --model PRESET] [--mode N] [--chunk K|auto] [--whole]\n"
          "                  [--weights SRC] [--PARAM VALUE[,VALUE...] ...]\n"
          "\n"
          "Generate, check, compile and cache transformer chunks; a chunk already in the\n"
          "cache is found without compiling (a direct hit skips generation too, and a\n"
          "repeated request, through its note, reads no template).  Prints each chunk's\n"
          "key, hit or miss, and a timing breakdown.  Defaults: the gpt2 template and\n"
          "preset, random weights (seed 0), mode 2.\n"
          "  milc build --layers 4 --mode 2                 one 4-layer GPT-2 chunk\n"
          "  milc build --model gpt2 --chunk 4              all 12 layers as 3 chunks\n"
          "  milc build --model gpt2 --chunk 4 --phase decode --seq 1,8,16\n"
          "  milc build --model gpt2 --chunk 4 --whole      embedding, 3 chunks, head\n"
          "  milc build --model llama-3.2-1b --chunk auto --max-chunk-bytes 512M\n"
          "                                                 chunks as deep as 512 MiB of weights allow\n"
          "\noptions:\n",
          f);
    print_options(f, build_opts);
}

static void build_help(FILE *f) { build_usage(f); }

static const char *outcome_name(BuildOutcome o) {
    return o == BUILD_HIT_DIRECT ? "hit (direct)" : o == BUILD_HIT_FULL ? "hit (full)" : "miss";
}

static uint64_t split_max(uint64_t max_bytes) { return max_bytes ? max_bytes : JOBS_DEFAULT_MAX_CHUNK_BYTES; }

/* --chunk auto: the split chosen, per parameter combination. */
static void print_split(const JobList *jobs, uint64_t max_bytes) {
    for (int i = 0; i < jobs->nsplits; i++) {
        const JobSplit *sp = &jobs->splits[i];
        printf("split%s%s: %d chunks of at most %.1f MiB of weights (--max-chunk-bytes %llu)\n",
               sp->label[0] ? " " : "", sp->label, sp->n, (double)split_max(max_bytes) / 1048576.0,
               (unsigned long long)split_max(max_bytes));
        for (int k = 0; k < sp->n; k++)
            printf("    layers %ld-%ld  %ld layers, %.1f MiB\n", sp->v[k].first, sp->v[k].first + sp->v[k].layers - 1,
                   sp->v[k].layers, (double)sp->v[k].weight_bytes / 1048576.0);
    }
}

static json_t *split_json(const JobList *jobs, uint64_t max_bytes) {
    json_t *arr = json_array();
    for (int i = 0; i < jobs->nsplits; i++) {
        const JobSplit *sp = &jobs->splits[i];
        json_t *chunks = json_array();
        for (int k = 0; k < sp->n; k++)
            cli_json_push(chunks, cli_json_obj("first_layer", json_integer(sp->v[k].first), "layers",
                                               json_integer(sp->v[k].layers), "weight_bytes",
                                               json_integer((json_int_t)sp->v[k].weight_bytes), NULL));
        cli_json_push(arr, cli_json_obj("combination", cli_json_str(sp->label), "max_chunk_bytes",
                                        json_integer((json_int_t)split_max(max_bytes)), "chunks", chunks, NULL));
    }
    return arr;
}

typedef struct {
    const Cli *cli;
    int printed;
    json_t *builds;        /* --json */
    CacheKey *keys;        /* --packages: each job's key, by index */
    const CacheKey **have; /* [i] = &keys[i] once job i is built or found */
    int nkeys;
    uint64_t max_chunk; /* --chunk auto: its ceiling, for the split */
    json_t *split;      /* --chunk auto --json: the split reported */
} Printer;

/* RequestOptions.on_split: --chunk auto's split, before the builds (from the
 * request note when it holds it: no template read). */
static void report_split(void *ctx, const JobList *splits) {
    Printer *pr = ctx;
    if (pr->cli->json) {
        json_decref(pr->split);
        pr->split = split_json(splits, pr->max_chunk);
    } else if (pr->cli->verbosity >= 0) {
        print_split(splits, pr->max_chunk);
    }
}

/* JSON: the builds array opens with the first result, so a request that
 * fails before any prints its diagnostics alone. */
static void print_result(void *ctx, int idx, const char *label, const BuildResult *r) {
    Printer *pr = ctx;
    const Cli *cli = pr->cli;
    if (pr->keys && idx >= 0 && idx < pr->nkeys) pr->keys[idx] = r->key, pr->have[idx] = &pr->keys[idx];
    char key[33];
    cache_key_hex(&r->key, key);
    if (cli->json) {
        if (!pr->printed++) pr->builds = json_array();
        json_t *ms = cli_json_obj("lookup", cli_json_real(r->ms_lookup, 3), "generate",
                                  cli_json_real(r->ms_generate, 3), "check", cli_json_real(r->ms_check, 3), "passes",
                                  cli_json_real(r->ms_passes, 3), "lower", cli_json_real(r->ms_lower, 3), "store",
                                  cli_json_real(r->ms_store, 3), "total", cli_json_real(r->ms_total, 3), NULL);
        cli_json_push(pr->builds, cli_json_obj("key", json_string(key), "outcome",
                                               json_string(r->outcome == BUILD_MISS         ? "miss"
                                                           : r->outcome == BUILD_HIT_DIRECT ? "direct_hit"
                                                                                            : "full_hit"),
                                               "chunk", cli_json_str(label), "artifact_bytes",
                                               json_integer((json_int_t)r->artifact_bytes), "checksummed",
                                               json_boolean(r->checksummed), "note", json_boolean(r->from_note),
                                               "remote", json_boolean(r->from_remote), "ms", ms, NULL));
        return;
    }
    if (cli->verbosity < 0) return;
    printf("%s  %-12s %s\n", key, r->from_remote ? "hit (remote)" : outcome_name(r->outcome), label);
    if (r->outcome == BUILD_MISS)
        printf("    generate %.1f ms, parse+check %.1f ms, passes %.1f ms, lower+pack %.1f ms, store %.1f ms; "
               "total %.1f ms, %.1f MB\n",
               r->ms_generate, r->ms_check, r->ms_passes, r->ms_lower, r->ms_store, r->ms_total,
               (double)r->artifact_bytes / 1048576.0);
    else
        printf("    %s %.2f ms%s, total %.2f ms, %.1f MB\n", r->checksummed ? "lookup+checksum" : "lookup",
               r->ms_lookup,
               r->outcome == BUILD_HIT_FULL ? " (generated to find the program)"
               : r->from_note               ? " (request note)"
                                            : "",
               r->ms_total, (double)r->artifact_bytes / 1048576.0);
}

/* --chunk K|auto and --max-chunk-bytes SIZE (auto's alone); false after a
 * usage error. */
static bool build_chunk_opts(const Args *a, long *chunk, uint64_t *max_bytes) {
    const char *v = args_get(a, "chunk"), *m = args_get(a, "max-chunk-bytes");
    if (v && strcmp(v, "auto") == 0)
        *chunk = JOBS_CHUNK_AUTO;
    else if (v) {
        char *end;
        long k = strtol(v, &end, 10);
        if (end == v || *end || k < 1 || k > 4096) {
            cli_usage_error("build", "--chunk wants a number of layers in [1, 4096] or 'auto', not '%s'", v);
            return false;
        }
        *chunk = k;
    }
    if (m && *chunk != JOBS_CHUNK_AUTO) {
        cli_usage_error("build", "--max-chunk-bytes sizes the chunks of --chunk auto; give --chunk auto too");
        return false;
    }
    if (m && !lib_parse_size(m, max_bytes)) {
        cli_usage_error("build", "--max-chunk-bytes wants a size such as 512M or 1G, not '%s'", m);
        return false;
    }
    return true;
}

typedef struct {
    const Cli *cli;
    const JobList *jobs;
    json_t *list; /* --json */
} PackagePrinter;

static void print_package(void *ctx, int idx, const char *path, bool written) {
    PackagePrinter *pp = ctx;
    const char *label = pp->jobs->v[idx].label[0] ? pp->jobs->v[idx].label : pp->jobs->v[idx].config;
    if (pp->list)
        cli_json_push(pp->list, cli_json_obj("chunk", cli_json_str(label), "path", cli_json_str(path), "written",
                                             json_boolean(written), NULL));
    else if (pp->cli->verbosity >= 0)
        printf("package %s  %s%s\n", path, label, written ? "" : " (already there)");
}

/* --packages DIR: every program of the request as DIR/KEY.mlpackage. */
static int build_packages(const Cli *cli, const TemplatePath *tp, const JobList *jobs, const Printer *pr,
                          const char *dir, json_t **list, DiagSink *d) {
    PackagePrinter pp = {cli, jobs, cli->json ? json_array() : NULL};
    int rc = packages_leave(tp, jobs->v, pr->have, jobs->n, dir, print_package, &pp, d);
    *list = pp.list;
    return rc;
}

/* --explain: the jobs' explanations before they are built (on stderr with
 * --json, whose stdout is the builds' document). */
static int build_explain(Cache *c, const TemplatePath *tp, const JobSpec *spec, const JobList *expanded, bool json,
                         DiagSink *d) {
    JobList own = {0};
    int rc = expanded || jobs_expand(tp, spec, &own, d) == 0 ? EXIT_OK : EXIT_INPUT;
    if (rc == EXIT_OK) rc = explain_jobs(c, tp, expanded ? expanded : &own, false, json ? stderr : stdout, d);
    jobs_free(&own);
    return rc;
}

static int build_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("build", build_opts, argc - 1, argv + 1, true, &a)) return EXIT_USAGE;
    if (!verify_flags_ok("build", &a)) {
        args_free(&a);
        return EXIT_USAGE;
    }
    int rc = EXIT_USAGE;
    if (args_flag(&a, "help")) {
        build_usage(stdout);
        cli_template_help(cli, stdout, &a);
        args_free(&a);
        return EXIT_OK;
    }
    long chunk = 0;
    Store *remote = NULL;
    if (a.npos) {
        cli_usage_error("build", "unexpected argument '%s'", a.pos[0]);
        goto out_args;
    }
    uint64_t max_chunk = 0;
    if (!build_chunk_opts(&a, &chunk, &max_chunk)) goto out_args;
    long overlap = 0;
    if (args_get(&a, "jobs") && !args_int("build", "jobs", args_get(&a, "jobs"), 1, 2, &overlap)) goto out_args;
    const char *modes = args_get(&a, "mode");
    for (const char *p = modes; p && *p; p += p[1] ? 2 : 1)
        if (*p < '0' || *p > '9' || !rt_mode(*p - '0') || (p[1] && (p[1] != ',' || !p[2]))) {
            cli_usage_error("build", "--mode: '%s' is not a list of compile modes (%s)", modes,
                            RT_MODE_TABLE(RT_MODE_HELP_) + 1);
            goto out_args;
        }

    if ((rc = tier_open(cli, "build", true, &remote)) != EXIT_OK) goto out_args;
    rc = EXIT_USAGE;
    TemplatePath tp;
    if (tpath_init(&tp, cli->template_dirs) != 0) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
        goto out_args;
    }
    DiagSink d;
    diag_init(&d);
    Cache *c = NULL;
    Printer pr = {.cli = cli}; /* set before the first goto out */
    Store *s = NULL;           /* the build path's view of c */
    JobSpec spec = {.config = cli_config_name(&a),
                    .weights = args_get(&a, "weights"),
                    .modes = modes,
                    .chunk = chunk,
                    .max_chunk_bytes = max_chunk,
                    .whole = args_flag(&a, "whole"),
                    .extra = a.extra,
                    .nextra = a.nextra};
    char err[512] = "";
    /* Where there is no cache yet there is no request note either: expand
     * the request before the cache is made, so one that cannot be built (an
     * unknown parameter, a bad value) leaves no new, empty cache behind, and
     * hand the jobs on rather than expand them twice. */
    JobList jobs = {0};
    const JobList *expanded = NULL;
    struct stat st;
    /* --chunk auto's split is reported by build_request (report_split), from
     * the request note when it is there. */
    const char *packages = args_get(&a, "packages");
    if (packages || stat(cli->cache_dir, &st) != 0) {
        if (jobs_expand(&tp, &spec, &jobs, &d) != 0) {
            rc = cli_report(cli, &d);
            if (rc == EXIT_OK) rc = EXIT_INPUT;
            goto out;
        }
        expanded = &jobs;
    }
    int r = cache_open(&c, cli->cache_dir, NULL, err, sizeof err);
    if (r != 0) {
        cli_cache_error(r, err);
        rc = EXIT_SYSTEM;
        goto out;
    }
    if (args_flag(&a, "explain") && (rc = build_explain(c, &tp, &spec, expanded, cli->json, &d)) != EXIT_OK) {
        (void)cli_report(cli, &d);
        goto out;
    }
    if (packages && (!(pr.keys = calloc((size_t)jobs.n + 1, sizeof *pr.keys)) ||
                     !(pr.have = calloc((size_t)jobs.n + 1, sizeof *pr.have)))) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
        goto out;
    }
    pr.nkeys = jobs.n;
    pr.max_chunk = max_chunk;
    if (!(s = store_lmdb_wrap(c))) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
        goto out;
    }
    rc = build_request(s, &tp, &spec,
                       &(RequestOptions){.verify_hits = verify_policy(&a),
                                         .tmp_root = cli->cache_dir,
                                         .jobs = expanded,
                                         .max_memory = cli->max_memory,
                                         .remote = remote,
                                         .overlap = (int)overlap,
                                         .on_split = chunk == JOBS_CHUNK_AUTO ? report_split : NULL},
                       print_result, &pr, &d);
    json_t *pkgs = NULL;
    if (rc == EXIT_OK && packages) rc = build_packages(cli, &tp, &jobs, &pr, packages, &pkgs, &d);
    if (cli->json && pr.printed) {
        json_t *doc = cli_json_obj("builds", pr.builds, NULL);
        if (pr.split) json_object_set_new(doc, "split", pr.split), pr.split = NULL;
        if (pkgs) json_object_set_new(doc, "packages", pkgs), pkgs = NULL;
        cli_json_print(stdout, doc);
    }
    json_decref(pkgs);
    int drc = cli_report(cli, &d);
    if (rc == EXIT_OK) rc = drc;
out:
    json_decref(pr.split);
    free(pr.keys);
    free(pr.have);
    jobs_free(&jobs);
    store_close(s);
    if (c) cache_close(c);
    diag_free(&d);
    tpath_free(&tp);
out_args:
    tier_close(remote);
    args_free(&a);
    return rc;
}

const Command cmd_build = {"build", "generate, compile and cache transformer chunks", build_run, build_help, true,
                           true};
