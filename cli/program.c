/* program.c — the front end every file-taking command shares: read the
 * program from its container, check it, print the diagnostics. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "milc/pipeline.h"
#include "program.h"

int cli_load_program_with(Cli *cli, const char *path, const ProgramLoadOptions *o, Arena *arena, PkgProgram *out,
                          DiagSink *d) {
    int rc = pipeline_load_program_with(arena, path, o, out, d);
    int drc = cli_report(cli, d);
    diag_clear(d);
    return rc != EXIT_OK ? rc : drc;
}

int cli_load_program(Cli *cli, const char *path, const char *model_path, MilTarget target, bool werror, Arena *arena,
                     PkgProgram *out, DiagSink *d) {
    d->warn_as_error = werror;
    int rc = cli_load_program_with(cli, path, &(ProgramLoadOptions){.model_path = model_path, .target = target},
                                   arena, out, d);
    d->warn_as_error = false;
    return rc;
}

bool cli_shapes(const char *cmd, const Args *a, MilInputShape **out, int *n) {
    *n = 0;
    *out = calloc((size_t)a->nhits + 1, sizeof **out);
    if (!*out) {
        cli_error("out of memory");
        return false;
    }
    for (int i = 0; i < a->nhits; i++) {
        if (strcmp(a->hits[i].spec->name, "shape") != 0) continue;
        const char *v = a->hits[i].value, *eq = strchr(v, '=');
        MilInputShape *s = &(*out)[(*n)++];
        bool ok = eq && eq > v;
        const char *at = eq ? eq + 1 : v;
        while (ok) {
            char *end;
            errno = 0;
            long long d = strtoll(at, &end, 10);
            ok = end != at && errno == 0 && d >= 1 && d <= (1LL << 31) && s->rank < 16 && (*end == ',' || !*end);
            if (ok) s->dims[s->rank++] = d;
            if (!ok || !*end) break;
            at = end + 1;
        }
        if (!ok) {
            cli_usage_error(cmd, "--shape '%s': want NAME=D0,D1,... (each size from 1 to 2^31)", v);
            cli_shapes_free(*out, *n - 1);
            *out = NULL;
            return false;
        }
        if (!(s->name = strndup(v, (size_t)(eq - v)))) {
            cli_error("out of memory");
            cli_shapes_free(*out, *n - 1);
            *out = NULL;
            return false;
        }
    }
    return true;
}

void cli_shapes_free(MilInputShape *s, int n) {
    for (int i = 0; s && i < n; i++) free((char *)s[i].name);
    free(s);
}

bool cli_is_program(const char *path) {
    PkgKind k = pkg_kind(path);
    size_t n = strlen(path);
    return k == PKG_KIND_MIL_DIR || k == PKG_KIND_MLPACKAGE ||
           (k == PKG_KIND_MIL && n > 4 && strcmp(path + n - 4, ".mil") == 0);
}
