/* cli.h — what the milc executable's commands share: the global context,
 * option parsing, output helpers and the exit codes of DESIGN.md.
 * The CLI is the only code that touches argv, the environment, stdout and exit. */
#ifndef MILC_CLI_H
#define MILC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "milc.h"
#include "milc/diag.h"

/* Exit codes (documented in `milc --help` and the README). */
enum {
    EXIT_OK = 0,
    EXIT_INPUT = 1,  /* invalid input; diagnostics were printed */
    EXIT_USAGE = 2,  /* bad command line */
    EXIT_SYSTEM = 3, /* I/O, cache or system failure */
};

typedef struct Cli {
    const char *argv0;
    const char *cache_dir;     /* resolved from --cache-dir / env / home */
    const char *template_dirs; /* ':'-separated: --template-dir, $MILC_TEMPLATE_PATH, built-in */
    bool json;                 /* --json */
    int verbosity;             /* -q = -1, default 0, -v = 1 */
    bool is_tty;               /* stderr is a terminal: progress bars allowed */
    uint64_t max_memory;       /* --max-memory: the most one program's weights, a
                                  run's arena and scratch, or a template's
                                  generated text may take (cli_default_max_memory) */
    const char *remote;        /* --remote URL, else $MILC_REMOTE; NULL = no remote tier */
    const char *remote_key;    /* --remote-key-file F, else $MILC_REMOTE_KEY_FILE */
    bool remote_readonly;      /* --remote-readonly */
} Cli;

/* ---- option parsing ----------------------------------------------------- */

typedef enum { OPT_FLAG, OPT_VALUE } OptKind;

typedef struct OptSpec {
    const char *name; /* long name without "--" ("model-path"); '_' and '-' match each other */
    char shortname;   /* 0 if none */
    OptKind kind;
    const char *metavar; /* for help: "DIR" */
    const char *help;
} OptSpec;

/* One parsed option occurrence or positional argument. */
typedef struct OptHit {
    const OptSpec *spec; /* NULL for positionals and for extras */
    const char *name;    /* extras: the name as written, without "--" */
    const char *value;   /* NULL for flags */
} OptHit;

typedef struct Args {
    OptHit *hits;
    int nhits;
    const char **pos;
    int npos;
    MilcParam *extra; /* --NAME VALUE options not in the table (when allowed) */
    int nextra;
} Args;

/* Parse argv[0..argc) against specs (terminated by a {0} entry).  When
 * allow_extra, unknown "--name value" / "--name=value" pairs go to extra
 * (template parameters).  Returns false after printing a usage error. */
bool args_parse(const char *cmd, const OptSpec *specs, int argc, char **argv, bool allow_extra, Args *out);
void args_free(Args *a);
/* The last value of an option (NULL if absent); flags return "" when set. */
const char *args_get(const Args *a, const char *name);
bool args_flag(const Args *a, const char *name);
/* Names are compared with '-' and '_' as the same character. */
bool opt_name_eq(const char *a, const char *b);
/* Parse a whole decimal integer within [lo, hi]; prints a usage error if not. */
bool args_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);

void print_options(FILE *f, const OptSpec *specs);

/* ---- output ------------------------------------------------------------- */

/* Print and clear a diagnostic sink on stderr (or as JSON on stdout with
 * --json).  Returns EXIT_INPUT if it held errors, else EXIT_OK. */
int cli_report(const Cli *cli, DiagSink *d);
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A failure of the cache with its message, and the cure in the CLI's words
 * where there is one (a damaged file: `milc cache clear`). */
void cli_cache_error(int rc, const char *msg);
void cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Read a whole file into malloc'd memory (NUL-terminated); NULL + message on error. */
char *cli_read_file(const char *path, size_t *len);
/* Write bytes to path atomically (temp + rename).  0 or -1 with a message printed. */
int cli_write_file(const char *path, const void *data, size_t len);
/* Remove dir and everything under it, not following links; best effort.
 * Only for directories this process made (a scratch or bench tree). */
void cli_rm_tree(const char *dir);
/* Print stored text (a description from a cache or a bundle) for a human on
 * a terminal: control characters (C0, DEL, C1: \r, \n, ESC, OSC, CSI...) and
 * bytes that are not UTF-8 come out as visible escapes (\n, \r, \t, \e,
 * \xHH), and a backslash as \\, so no stored byte can move the cursor, set a
 * title or forge a line. */
void cli_print_text(FILE *f, const char *s);
/* Monotonic time in nanoseconds. */
long long cli_now_ns(void);
/* Milliseconds since t0 (a cli_now_ns value). */
double cli_ms_since(long long t0);

/* ---- commands ------------------------------------------------------------ */

typedef struct Command {
    const char *name;
    const char *summary;
    int (*run)(Cli *cli, int argc, char **argv); /* argv[0] is the command name */
    void (*help)(FILE *f);
    bool own_help;   /* the command handles --help itself (template-aware help) */
    bool uses_cache; /* needs a cache directory (refused when none can be found) */
} Command;

extern const Command cmd_check, cmd_fmt, cmd_emit, cmd_templates, cmd_compile, cmd_run, cmd_build, cmd_cache,
    cmd_prewarm, cmd_bench, cmd_estimate, cmd_convert;

#endif
