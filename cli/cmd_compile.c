/* cmd_compile.c — `milc compile`: MIL file → artifact file (no cache). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "milc/pipeline.h"
#include "program.h"

static const OptSpec compile_opts[] = {
    {"mode", 0, OPT_VALUE, "N", RT_MODES_HELP},
    {"output", 'o', OPT_VALUE, "FILE", "write the artifact here (default: FILE.milc beside the input)"},
    {"model-path", 0, OPT_VALUE, "DIR", "directory @model_path stands for (default: the file's)"},
    {"dump", 0, OPT_VALUE, "STAGE", "print the IR after STAGE as MIL text (parse, check, dce, fold, fuse)"},
    {"no-fuse", 0, OPT_FLAG, NULL, "mode 2 without pattern fusion"},
    {"function", 0, OPT_VALUE, "NAME", "the function to compile (default: main, or the program's only function)"},
    {"shape", 0, OPT_VALUE, "NAME=D0,D1,..", "the size of input NAME's flexible dimensions (each '?'; repeat per input)"},
    {0},
};

static void compile_help(FILE *f) {
    fputs("usage: milc compile (FILE.mil | PKG.mlpackage | DIR) [--function NAME] [--model-path DIR] [--mode N]\n"
          "                    [--shape NAME=D0,D1,..] [-o FILE.milc] [--dump STAGE]\n"
          "\n"
          "Check and compile a MIL program (a model.mil file, a folder holding one, or\n"
          "a .mlpackage) for the CPU backend into an artifact file:\n"
          "passes (dead code, constant folding, fusion), lowering for the compile mode,\n"
          "weights packed for the kernels.  No cache is involved; 'milc run' executes\n"
          "the result.  --dump prints the program after a stage as valid MIL text.\n"
          "An input of flexible shape (a package's range of sizes, '?' in the text)\n"
          "is compiled for the size --shape gives it.\n\noptions:\n",
          f);
    print_options(f, compile_opts);
}

/* What was written, as the command reports it. */
static void compile_print(const Cli *cli, const char *outpath, long mode, const CompileFileResult *r) {
    if (cli->json)
        cli_json_print(
            stdout,
            cli_json_obj("artifact", cli_json_str(outpath), "mode", json_integer(mode), "bytes",
                         json_integer((json_int_t)r->bytes), "ops_in", json_integer(r->ops_in), "ops_out",
                         json_integer(r->ops_out), "dispatches", json_integer(r->dispatches), "ms",
                         cli_json_obj("check", cli_json_real(r->ms_check, 3), "passes", cli_json_real(r->ms_passes, 3),
                                      "lower", cli_json_real(r->ms_lower, 3), "pack", cli_json_real(r->ms_pack, 3),
                                      "total", cli_json_real(r->ms_total, 3), NULL),
                         NULL));
    else if (cli->verbosity >= 0)
        fprintf(stderr, "wrote %s (mode %ld, %.1f MB, %d MIL ops -> %d plan ops, %d dispatch%s per forward; %.1f ms)\n",
                outpath, mode, (double)r->bytes / 1048576.0, r->ops_in, r->ops_out, r->dispatches,
                r->dispatches == 1 ? "" : "es", r->ms_total);
}

static int compile_run(Cli *cli, int argc, char **argv) {
    Args a;
    if (!args_parse("compile", compile_opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    long mode = RT_MODE_DEFAULT;
    char *outpath = NULL;
    const char *stage = args_get(&a, "dump");
    MilInputShape *shapes = NULL;
    int nshapes = 0;
    if (!cli_shapes("compile", &a, &shapes, &nshapes)) goto out;
    if (a.npos != 1) {
        cli_usage_error("compile", "expected one FILE.mil, package or folder");
        goto out;
    }
    if (args_get(&a, "mode") && !args_int("compile", "mode", args_get(&a, "mode"), 0, RT_NMODES - 1, &mode)) goto out;
    if (stage && !pipeline_stage_known(stage)) {
        cli_usage_error("compile", "--dump: no stage '%s'", stage);
        goto out;
    }
    outpath = args_get(&a, "output") ? strdup(args_get(&a, "output")) : pipeline_artifact_path(a.pos[0]);
    if (!outpath) {
        rc = EXIT_SYSTEM;
        goto out;
    }
    DiagSink d;
    diag_init(&d);
    CompileFileResult r;
    CompileFileOptions o = {.model_path = args_get(&a, "model-path"),
                            .mode = (int)mode,
                            .no_fuse = args_flag(&a, "no-fuse"),
                            .dump_stage = stage,
                            .function = args_get(&a, "function"),
                            .shapes = shapes,
                            .nshapes = nshapes};
    rc = pipeline_compile_file(a.pos[0], outpath, &o, &r, &d);
    if (r.dump) fputs(r.dump, stdout);
    int drc = cli_report(cli, &d);
    if (rc == EXIT_OK) rc = drc;
    if (rc == EXIT_OK) compile_print(cli, outpath, mode, &r);
    free(r.dump);
    diag_free(&d);
out:
    cli_shapes_free(shapes, nshapes);
    free(outpath);
    args_free(&a);
    return rc;
}

const Command cmd_compile = {"compile", "compile a MIL file to an artifact file", compile_run, compile_help, false,
                             false};
