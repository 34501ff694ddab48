/* genopts.h — template selection and template-parameter options shared by
 * emit, build and bench. */
#ifndef MILC_CLI_GENOPTS_H
#define MILC_CLI_GENOPTS_H

#include "cli.h"
#include "milc/jobs.h"
#include "milc/gen.h"

/* --template, --model, --weights: the first entries of every generating
 * command's option table. */
#define GEN_COMMON_OPTS                                                                                                \
    {"template", 't', OPT_VALUE, "NAME", "template to generate from (default gpt2)"},                                  \
        {"model", 'm', OPT_VALUE, "PRESET", "preset of real model shapes (gpt2, gpt2-medium, ...)"}, {                 \
        "weights", 'w', OPT_VALUE, "SRC", "random:SEED (default random:0) or FILE.safetensors"                         \
    }

/* --model, else --template, else "gpt2". */
const char *cli_config_name(const Args *a);
/* Open the config, apply every extra --NAME VALUE as a template parameter in
 * order, resolve.  NULL with diagnostics in d. */
GenConfig *cli_gen_config(const GenSearchPath *sp, const Args *a, DiagSink *d);
/* The template's doc and parameters, for --help. */
void cli_template_help(const Cli *cli, FILE *f, const Args *a);

/* How a cache hit is checked, for every command that looks artifacts up.
 * The default checksums a hit unless it passed in this boot and nothing but
 * milc has written the cache file since (CACHE_GET_VERIFY_ONCE). */
#define VERIFY_OPTS                                                                                                    \
    {"verify", 0, OPT_FLAG, NULL, "on a hit, always recompute the artifact checksum"},                                 \
        {"verify-once", 0, OPT_FLAG, NULL,                                                                             \
         "the default: checksum a hit unless it passed since boot and the cache file is unchanged"},                   \
    {                                                                                                                  \
        "no-verify", 0, OPT_FLAG, NULL, "on a hit, skip the artifact checksum"                                         \
    }

/* --verify / --verify-once / --no-verify as a BuildRequest.verify_hits value
 * (BUILD_VERIFY_ONCE by default), and back to the flag (NULL for the default). */
int verify_policy(const Args *a);
/* At most one of them; else a usage error (printed) and false. */
bool verify_flags_ok(const char *cmd, const Args *a);
const char *verify_flag(int policy);

#endif
