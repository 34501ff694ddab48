/* genopts.h — template selection and template-parameter options shared by
 * emit, build and bench. */
#ifndef MILC_CLI_GENOPTS_H
#define MILC_CLI_GENOPTS_H

#include "cli.h"
#include "milc/gen.h"

/* --template, --model, --weights: the first entries of every generating
 * command's option table. */
#define GEN_COMMON_OPTS                                                                           \
    {"template", 't', OPT_VALUE, "NAME", "template to generate from (default gpt2)"},             \
    {"model", 'm', OPT_VALUE, "PRESET", "preset of real model shapes (gpt2, gpt2-medium, ...)"}, \
    {"weights", 'w', OPT_VALUE, "SRC", "random:SEED (default random:0) or FILE.safetensors"}

/* The template search path, split from cli->template_dirs. */
typedef struct TemplatePath {
    GenSearchPath sp;
    char *buf;
    const char **dirs;
} TemplatePath;
int tpath_init(TemplatePath *tp, const Cli *cli);
void tpath_free(TemplatePath *tp);
/* --model, else --template, else "gpt2". */
const char *cli_config_name(const Args *a);
/* Open the config, apply every extra --NAME VALUE as a template parameter in
 * order, resolve.  NULL with diagnostics in d. */
GenConfig *cli_gen_config(const GenSearchPath *sp, const Args *a, DiagSink *d);
/* The template's doc and parameters, for --help. */
void cli_template_help(const Cli *cli, FILE *f, const Args *a);

/* --no-verify / --verify-once as a BuildRequest.verify_hits value. */
int verify_policy(const Args *a);

#endif
