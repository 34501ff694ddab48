/* cmd_compile.c — `milc compile`: MIL file → artifact file (no cache). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "milc/arena.h"
#include "milc/backend.h"
#include "milc/mil.h"
#include "milc/rt.h"
#include "program.h"

static const OptSpec compile_opts[] = {
    {"mode", 0, OPT_VALUE, "N", RT_MODES_HELP},
    {"output", 'o', OPT_VALUE, "FILE", "write the artifact here (default: FILE.milc beside the input)"},
    {"model-path", 0, OPT_VALUE, "DIR", "directory @model_path stands for (default: the file's)"},
    {"dump", 0, OPT_VALUE, "STAGE", "print the IR after STAGE as MIL text (parse, check, dce, fold, fuse)"},
    {"no-fuse", 0, OPT_FLAG, NULL, "mode 2 without pattern fusion"},
    {0},
};

static void compile_help(FILE *f) {
    fputs("usage: milc compile (FILE.mil | PKG.mlpackage | DIR) [--model-path DIR] [--mode N] [-o FILE.milc] [--dump STAGE]\n"
          "\n"
          "Check and compile a MIL program (a model.mil file, a folder holding one, or\n"
          "a .mlpackage) for the CPU backend into an artifact file:\n"
          "passes (dead code, constant folding, fusion), lowering for the compile mode,\n"
          "weights packed for the kernels.  No cache is involved; 'milc run' executes\n"
          "the result.  --dump prints the program after a stage as valid MIL text.\n\noptions:\n", f);
    print_options(f, compile_opts);
}

static int compile_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("compile", compile_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    long mode = RT_MODE_DEFAULT;
    char *dump = NULL, *outpath = NULL;
    if (a.npos != 1) { cli_usage_error("compile", "expected one FILE.mil, package or folder"); goto out_args; }
    if (args_get(&a, "mode") && !args_int("compile", "mode", args_get(&a, "mode"), 0, RT_NMODES - 1, &mode)) goto out_args;
    const char *stage = args_get(&a, "dump");
    if (stage) {
        bool known = false;
        for (const char *const *s = backend_stage_names(); *s; s++) known |= strcmp(*s, stage) == 0;
        if (!known) { cli_usage_error("compile", "--dump: no stage '%s'", stage); goto out_args; }
    }
    const char *path = a.pos[0];
    if (args_get(&a, "output")) outpath = strdup(args_get(&a, "output"));
    else {
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/') n--;
        outpath = malloc(n + 6);
        if (outpath) {
            memcpy(outpath, path, n);
            outpath[n] = 0;
            static const char *const exts[] = {".mil", ".mlpackage", ".mlmodelc"};
            for (int i = 0; i < 3; i++) {
                size_t e = strlen(exts[i]);
                if (n > e && strcmp(outpath + n - e, exts[i]) == 0) { outpath[n - e] = 0; break; }
            }
            strcat(outpath, ".milc");
        }
    }
    if (!outpath) { rc = EXIT_SYSTEM; goto out_args; }
    Arena arena;
    arena_init(&arena);
    DiagSink d;
    diag_init(&d);
    RtArtifact *art = NULL;
    BackendStats st = {0};
    long long t0 = cli_now_ns();
    PkgProgram pp;
    bool ok = pkg_load(&arena, &d, path, args_get(&a, "model-path"), &pp) == 0;
    IrProgram *p = pp.prog;
    const char *mp = pp.model_dir;
    ok = ok && mil_check(p, &(MilCheckOptions){.target = MIL_TARGET_CPU, .model_path = mp}, &d);
    double ms_check = (double)(cli_now_ns() - t0) / 1e6;
    if (ok) {
        BackendOptions bo = {.mode = (int)mode, .model_path = mp, .dump_stage = stage, .dump_out = &dump,
                             .no_fuse = args_flag(&a, "no-fuse")};
        ok = backend_compile(p, &bo, &art, &st, &d) == 0;
    } else if (stage && p && (strcmp(stage, "parse") == 0)) {
        dump = mil_print(p, NULL);
    }
    if (dump) fputs(dump, stdout);
    rc = cli_report(cli, &d);
    if (ok && rc == EXIT_OK) {
        char err[512];
        if (rt_artifact_write_file(art, outpath, err, sizeof err) != 0) {
            cli_error("%s", err);
            rc = EXIT_SYSTEM;
        } else {
            double ms = (double)(cli_now_ns() - t0) / 1e6;
            size_t bytes = rt_artifact_file_size(art);
            if (cli->json)
                cli_json_print(stdout, cli_json_obj("artifact", cli_json_str(outpath), "mode", json_integer(mode), "bytes",
                                                    json_integer((json_int_t)bytes), "ops_in", json_integer(st.ops_in),
                                                    "ops_out", json_integer(st.ops_out), "dispatches",
                                                    json_integer(st.dispatches), "ms",
                                                    cli_json_obj("check", cli_json_real(ms_check, 3), "passes",
                                                                 cli_json_real(st.ms_passes, 3), "lower",
                                                                 cli_json_real(st.ms_lower, 3), "pack",
                                                                 cli_json_real(st.ms_pack, 3), "total",
                                                                 cli_json_real(ms, 3), NULL),
                                                    NULL));
            else if (cli->verbosity >= 0)
                fprintf(stderr, "wrote %s (mode %ld, %.1f MB, %d MIL ops -> %d plan ops, %d dispatch%s per forward; %.1f ms)\n",
                        outpath, mode, (double)bytes / 1048576.0, st.ops_in, st.ops_out, st.dispatches,
                        st.dispatches == 1 ? "" : "es", ms);
        }
    } else if (rc == EXIT_OK) {
        rc = EXIT_INPUT;
    }
    if (art) rt_artifact_free(art);
    diag_free(&d);
    arena_free(&arena);
out_args:
    free(dump);
    free(outpath);
    args_free(&a);
    return rc;
}

const Command cmd_compile = {"compile", "compile a MIL file to an artifact file", compile_run, compile_help, false, false};
