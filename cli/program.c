/* program.c — the front end every file-taking command shares: read the
 * program from its container, check it, print the diagnostics. */
#include <string.h>

#include "milc/pipeline.h"
#include "program.h"

int cli_load_program(Cli *cli, const char *path, const char *model_path, MilTarget target, bool werror, Arena *arena,
                     PkgProgram *out, DiagSink *d) {
    d->warn_as_error = werror;
    int rc = pipeline_load_program(arena, path, model_path, target, out, d);
    int drc = cli_report(cli, d);
    diag_clear(d);
    d->warn_as_error = false;
    return rc != EXIT_OK ? rc : drc;
}

bool cli_is_program(const char *path) {
    PkgKind k = pkg_kind(path);
    size_t n = strlen(path);
    return k == PKG_KIND_MIL_DIR || k == PKG_KIND_MLPACKAGE ||
           (k == PKG_KIND_MIL && n > 4 && strcmp(path + n - 4, ".mil") == 0);
}
