/* program.c — the front end every file-taking command shares: read the
 * program from its container, check it, print the diagnostics. */
#include <string.h>

#include "program.h"

int cli_load_program(Cli *cli, const char *path, const char *model_path, MilTarget target, bool werror, Arena *arena,
                     PkgProgram *out) {
    DiagSink d;
    diag_init(&d);
    d.warn_as_error = werror;
    bool ok = pkg_load(arena, &d, path, model_path, out) == 0;
    if (ok) {
        MilCheckOptions o = {.target = target, .model_path = out->model_dir};
        ok = mil_check(out->prog, &o, &d);
    }
    int rc = cli_report(cli, &d);
    bool failed = diag_failed(&d) || !ok;
    int sys = d.system_errors;
    diag_free(&d);
    if (failed) return sys ? EXIT_SYSTEM : EXIT_INPUT;
    return rc;
}

bool cli_is_program(const char *path) {
    PkgKind k = pkg_kind(path);
    size_t n = strlen(path);
    return k == PKG_KIND_MIL_DIR || k == PKG_KIND_MLPACKAGE || (k == PKG_KIND_MIL && n > 4 && strcmp(path + n - 4, ".mil") == 0);
}
