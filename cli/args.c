/* args.c — a small getopt_long without the global state: long options with
 * --name VALUE and --name=VALUE, short flags, '--' ends options, and (for
 * template parameters) unknown long options collected as extras. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "milc/jobs.h"

bool opt_name_eq(const char *a, const char *b) { return lib_name_eq(a, b); }

static bool opt_name_eqn(const char *a, size_t n, const char *b) {
    for (size_t i = 0; i < n; i++, b++) {
        char ca = a[i] == '_' ? '-' : a[i], cb = *b == '_' ? '-' : *b;
        if (ca != cb) return false;
    }
    return *b == 0;
}

static void push(OptHit **v, int *n, OptHit h) {
    *v = realloc(*v, sizeof(OptHit) * (size_t)(*n + 1));
    if (!*v) {
        perror("milc");
        exit(EXIT_SYSTEM);
    }
    (*v)[(*n)++] = h;
}

bool args_parse(const char *cmd, const OptSpec *specs, int argc, char **argv, bool allow_extra, Args *out) {
    memset(out, 0, sizeof *out);
    out->pos = calloc((size_t)argc + 1, sizeof(char *));
    if (!out->pos) {
        perror("milc");
        exit(EXIT_SYSTEM);
    }
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == 0) {
            out->pos[out->npos++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
            const OptSpec *s = NULL;
            for (const OptSpec *p = specs; p && p->name; p++)
                if (opt_name_eqn(name, nlen, p->name)) {
                    s = p;
                    break;
                }
            if (!s && !allow_extra) {
                cli_usage_error(cmd, "unknown option '--%.*s'", (int)nlen, name);
                goto fail;
            }
            const char *val = NULL;
            if (!s || s->kind == OPT_VALUE) {
                if (eq)
                    val = eq + 1;
                else if (i + 1 < argc)
                    val = argv[++i];
                else {
                    cli_usage_error(cmd, "option '--%.*s' needs a value", (int)nlen, name);
                    goto fail;
                }
            } else if (eq) {
                cli_usage_error(cmd, "option '--%s' takes no value", s->name);
                goto fail;
            }
            if (s)
                push(&out->hits, &out->nhits, (OptHit){s, s->name, val});
            else {
                char *nm = strndup(name, nlen);
                if (!nm || nlen == 0) {
                    cli_usage_error(cmd, "bad option '%s'", a);
                    free(nm);
                    goto fail;
                }
                out->extra = realloc(out->extra, sizeof(MilcParam) * (size_t)(out->nextra + 1));
                if (!out->extra) {
                    perror("milc");
                    exit(EXIT_SYSTEM);
                }
                out->extra[out->nextra++] = (MilcParam){nm, val};
            }
            continue;
        }
        /* Short options: each char a flag, or the last takes a value. */
        for (const char *c = a + 1; *c; c++) {
            const OptSpec *s = NULL;
            for (const OptSpec *p = specs; p && p->name; p++)
                if (p->shortname == *c) {
                    s = p;
                    break;
                }
            if (!s) {
                cli_usage_error(cmd, "unknown option '-%c'", *c);
                goto fail;
            }
            if (s->kind == OPT_FLAG) {
                push(&out->hits, &out->nhits, (OptHit){s, s->name, NULL});
                continue;
            }
            const char *val = c[1] ? c + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val) {
                cli_usage_error(cmd, "option '-%c' needs a value", *c);
                goto fail;
            }
            push(&out->hits, &out->nhits, (OptHit){s, s->name, val});
            break;
        }
    }
    return true;
fail:
    /* Callers return at once on failure; leave nothing for them to free. */
    args_free(out);
    return false;
}

void args_free(Args *a) {
    free(a->hits);
    free(a->pos);
    for (int i = 0; i < a->nextra; i++) free((char *)a->extra[i].name);
    free(a->extra);
    memset(a, 0, sizeof *a);
}

const char *args_get(const Args *a, const char *name) {
    const char *v = NULL;
    for (int i = 0; i < a->nhits; i++)
        if (opt_name_eq(a->hits[i].spec->name, name)) v = a->hits[i].value ? a->hits[i].value : "";
    return v;
}

bool args_flag(const Args *a, const char *name) { return args_get(a, name) != NULL; }

bool args_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        cli_usage_error(cmd, "--%s: '%s' is not a whole number in [%ld, %ld]", opt, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

void print_options(FILE *f, const OptSpec *specs) {
    for (const OptSpec *p = specs; p && p->name; p++) {
        char left[64];
        if (p->shortname)
            snprintf(left, sizeof left, "-%c, --%s%s%s", p->shortname, p->name, p->metavar ? " " : "",
                     p->metavar ? p->metavar : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", p->name, p->metavar ? " " : "", p->metavar ? p->metavar : "");
        fprintf(f, "  %-28s %s\n", left, p->help);
    }
}
