/* explain.c — `milc build --explain` and `milc cache why`: the library's
 * comparison of a request's direct record with the stored ones (explain_scan)
 * shown as text or JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain.h"
#include "json.h"
#include "genopts.h"

static void print_job(const Explain *s, const char *label, bool hit, json_t *out, FILE *f) {
    bool json = out != NULL;
    char hex[33];
    if (json) {
        json_t *near = json_array();
        for (int i = 0; i < s->nbest; i++) {
            const ExplainDiff *df = &s->best[i].diff;
            json_t *differs = json_array();
            for (int k = 0; k < df->count && k < EXPLAIN_MAX_FIELDS; k++)
                cli_json_push(differs,
                              cli_json_obj("field", cli_json_str(df->f[k].field), "stored",
                                           cli_json_str(df->f[k].stored), "asked", cli_json_str(df->f[k].asked), NULL));
            cache_key_hex(&s->best[i].akey, hex);
            cli_json_push(near, cli_json_obj("key", json_string(hex), "present", json_boolean(s->best[i].present),
                                             "differs", differs, NULL));
        }
        cli_json_push(out, cli_json_obj("job", cli_json_str(label), "hit", json_boolean(hit), "nearest", near, NULL));
        return;
    }
    if (hit) {
        fprintf(f, "%s: in the cache\n", label);
        return;
    }
    fprintf(f, "%s: not in the cache; ", label);
    if (!s->nbest) {
        fprintf(f, "no stored entry of template %.*s\n", (int)s->tl, s->tmpl);
        return;
    }
    fprintf(f, "nearest stored entries of template %.*s (stored -> asked):\n", (int)s->tl, s->tmpl);
    for (int i = 0; i < s->nbest; i++) {
        cache_key_hex(&s->best[i].akey, hex);
        fprintf(f, "  %s  %d %s: %s%s\n", hex, s->best[i].diff.count,
                s->best[i].diff.count == 1 ? "field differs" : "fields differ",
                s->best[i].diff.count ? s->best[i].diff.text : "none",
                s->best[i].present ? "" : " (its artifact is gone: evicted or removed)");
    }
}

static int explain_job(Cache *c, const TemplatePath *tp, const BuildJob *j, json_t *out, FILE *f, DiagSink *d) {
    Explain e;
    int rc = explain_scan(c, tp, j, &e, d);
    if (rc == EXIT_OK) print_job(&e, j->label[0] ? j->label : j->config, e.hit, out, f);
    return rc;
}

int explain_jobs(Cache *c, const TemplatePath *tp, const JobList *jobs, bool json, FILE *f, DiagSink *d) {
    int rc = EXIT_OK;
    json_t *out = json ? json_array() : NULL;
    for (int i = 0; i < jobs->n && rc == EXIT_OK; i++) rc = explain_job(c, tp, &jobs->v[i], out, f, d);
    if (json) cli_json_print(stdout, cli_json_obj("explain", out, NULL));
    return rc;
}

static const OptSpec why_opts[] = {
    GEN_COMMON_OPTS,
    {"mode", 0, OPT_VALUE, "N[,N]", RT_MODES_HELP},
    {"chunk", 0, OPT_VALUE, "K", "the whole model in chunks of K layers"},
    {0},
};

int explain_cmd(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("cache", why_opts, argc - 1, argv + 1, true, &a)) return EXIT_USAGE;
    long chunk = 0;
    int rc = EXIT_USAGE;
    if (a.npos) {
        cli_usage_error("cache", "why: unexpected argument '%s'", a.pos[0]);
        args_free(&a);
        return rc;
    }
    if (args_get(&a, "chunk") && !args_int("cache", "chunk", args_get(&a, "chunk"), 1, 4096, &chunk)) {
        args_free(&a);
        return rc;
    }
    TemplatePath tp;
    DiagSink d;
    diag_init(&d);
    JobList jobs = {0};
    Cache *c = NULL;
    char err[512] = "";
    JobSpec spec = {.config = cli_config_name(&a),
                    .weights = args_get(&a, "weights"),
                    .modes = args_get(&a, "mode"),
                    .chunk = chunk,
                    .extra = a.extra,
                    .nextra = a.nextra};
    if (tpath_init(&tp, cli->template_dirs) != 0) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
        goto out;
    }
    if (jobs_expand(&tp, &spec, &jobs, &d) != 0)
        rc = EXIT_INPUT;
    else if (cache_open(&c, cli->cache_dir, NULL, err, sizeof err) != 0) {
        cli_error("%s", err);
        rc = EXIT_SYSTEM;
    } else
        rc = explain_jobs(c, &tp, &jobs, cli->json, stdout, &d);
    int drc = cli_report(cli, &d);
    if (rc == EXIT_OK) rc = drc;
    tpath_free(&tp);
out:
    if (c) cache_close(c);
    jobs_free(&jobs);
    diag_free(&d);
    args_free(&a);
    return rc;
}
