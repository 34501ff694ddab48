/* main.c — milc's entry point: global options, the command table, help,
 * and the resolution of the cache and template directories. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "scratch.h"
#include "cli.h"
#include "milc/lib.h"
#include "milc/ossys.h"
#include "milc/rt.h"

#ifndef MILC_BUILTIN_TEMPLATE_DIR
#define MILC_BUILTIN_TEMPLATE_DIR "mil-templates"
#endif

static const Command *const commands[] = {
    &cmd_build, &cmd_emit,  &cmd_check,    &cmd_fmt,     &cmd_compile, &cmd_convert,
    &cmd_run,   &cmd_bench, &cmd_estimate, &cmd_prewarm, &cmd_cache,   &cmd_templates,
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void print_usage(FILE *f) {
    fputs("usage: milc [global options] COMMAND [options]\n"
          "\n"
          "milc generates Core ML MIL programs for transformer layer chunks, compiles\n"
          "each once for its CPU backend, and caches the artifacts in LMDB.\n"
          "\n"
          "commands:\n",
          f);
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fputs("  help       show help for a command\n"
          "\n"
          "global options (anywhere on the line):\n"
          "  --cache-dir DIR     cache directory (default $MILC_CACHE_DIR, else\n"
          "                      $XDG_CACHE_HOME/milc, else ~/.cache/milc; with none\n"
          "                      of these, commands that use the cache refuse to run)\n"
          "  --template-dir DIR  extra template directory (also $MILC_TEMPLATE_PATH)\n"
          "  --max-memory SIZE   the most memory one program may need: its weights\n"
          "                      (emit, build), a run's arena and scratch (run), a\n"
          "                      template's generated text x 32; K, M, G or T suffix\n"
          "                      (default: half the RAM, or of `ulimit -v` if lower)\n"
          "  --remote URL        shared cache tier behind the local one (also $MILC_REMOTE):\n"
          "                      redis://[user:password@]host:port[/db]\n"
          "  --remote-key-file F the team secret that authenticates remote entries\n"
          "                      (also $MILC_REMOTE_KEY_FILE; mode 600, 32+ bytes)\n"
          "  --remote-readonly   read from the remote tier, never write to it\n"
          "  --json              machine-readable output on stdout\n"
          "  -q, --quiet         only errors\n"
          "  -v, --verbose       more detail\n"
          "  -h, --help          this help, or a command's with 'milc help COMMAND'\n"
          "  --version           print the version\n"
          "\n"
          "environment: MILC_CPU=avx512|avx2|neon|scalar forces a kernel variant\n"
          "             (default: the best this CPU runs; one it lacks is a usage error)\n"
          "\n"
          "exit codes: 0 success, 1 invalid input (diagnostics printed),\n"
          "            2 usage error, 3 I/O, cache or system failure\n",
          f);
}

static const Command *find_command(const char *name) {
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0) return commands[i];
    return NULL;
}

static char *resolve_cache_dir(const char *flag) {
    if (flag) return strdup(flag);
    const char *e = getenv("MILC_CACHE_DIR");
    if (e && *e) return strdup(e);
    char buf[4096];
    e = getenv("XDG_CACHE_HOME");
    if (e && *e) {
        snprintf(buf, sizeof buf, "%s/milc", e);
        return strdup(buf);
    }
    e = getenv("HOME");
    /* Without a home there is no per-user place: never the current directory. */
    if (!e || !*e) return strdup("");
    snprintf(buf, sizeof buf, "%s/.cache/milc", e);
    return strdup(buf);
}

/* The built-in templates: installed beside the binary (PREFIX/bin/milc ->
 * PREFIX/share/milc/templates) or, in a build tree, the source directory. */
static const char *builtin_template_dir(char *buf, size_t size) {
    if (os_exe_path(buf, size - 32) == 0) {
        char *slash = strrchr(buf, '/');
        if (slash) {
            strcpy(slash, "/../share/milc/templates");
            if (access(buf, R_OK) == 0) return buf;
        }
    }
    return MILC_BUILTIN_TEMPLATE_DIR;
}

static char *resolve_template_dirs(const char *flag) {
    /* Search order (first match wins): the built-in directory, --template-dir,
     * $MILC_TEMPLATE_PATH.  Built-ins come first so a name like "gpt2" always
     * means milc's own template; a user's file adds new names. */
    char exe[4096];
    const char *builtin = builtin_template_dir(exe, sizeof exe);
    const char *env = getenv("MILC_TEMPLATE_PATH");
    if (env && !*env) env = NULL;
    size_t n = strlen(builtin) + (flag ? strlen(flag) : 0) + (env ? strlen(env) : 0) + 4;
    char *s = malloc(n);
    if (!s) return NULL;
    snprintf(s, n, "%s%s%s%s%s", builtin, flag ? ":" : "", flag ? flag : "", env ? ":" : "", env ? env : "");
    return s;
}

/* Half of physical memory, or of the address-space limit (`ulimit -v`) when
 * that is lower: a request needing more is refused before it allocates. */
static uint64_t default_max_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : (uint64_t)8 << 30;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < ram)
        ram = (uint64_t)rl.rlim_cur;
    return ram / 2;
}

/* The library's messages, as the CLI prints its own. */
static void print_msg(void *ctx, int level, const char *msg) {
    (void)ctx;
    fprintf(stderr, "milc: %s: %s\n", level == MILC_MSG_WARNING ? "warning" : "error", msg);
}

/* $MILC_CPU picks the kernel variant; one this CPU lacks (or this build does
 * not carry) is refused here, before anything runs, not met as a SIGILL. */
static int resolve_cpu(void) {
    const char *e = getenv("MILC_CPU");
    RtCpu v = RT_CPU_AUTO;
    char err[256];
    if (e && *e && (rt_cpu_parse(e, &v, err, sizeof err) || rt_cpu_check(v, err, sizeof err))) {
        fprintf(stderr, "milc: MILC_CPU=%s: %s\n", e, err);
        return -1;
    }
    lib_set_cpu((int)(v == RT_CPU_AUTO ? rt_cpu_best() : v));
    return 0;
}

int main(int argc, char **argv) {
    Cli cli = {.argv0 = argv[0], .is_tty = isatty(2), .max_memory = default_max_memory()};
    const char *maxmem_flag = NULL;
    const char *cache_flag = NULL, *tmpl_flag = NULL;
    bool want_help = false;
    /* Pull global options out of argv wherever they stand (before a "--"),
     * so `milc build --json` and `milc --json build` both work. */
    int n = 1, cmd_at = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            for (; i < argc; i++) argv[n++] = argv[i];
            break;
        }
        if (strcmp(a, "--json") == 0)
            cli.json = true;
        else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0)
            cli.verbosity = -1;
        else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0)
            cli.verbosity = 1;
        else if (strcmp(a, "--version") == 0) {
            printf("milc %s\n", MILC_VERSION);
            return EXIT_OK;
        } else if (strcmp(a, "--remote-readonly") == 0)
            cli.remote_readonly = true;
        /* Bare `--remote` (no URL after it) is `cache stat --remote`'s flag. */
        else if (strcmp(a, "--remote") == 0 && i + 1 < argc && argv[i + 1][0] != '-')
            cli.remote = argv[++i];
        else if (strncmp(a, "--remote=", 9) == 0)
            cli.remote = a + 9;
        else if (strcmp(a, "--remote-key-file") == 0 && i + 1 < argc)
            cli.remote_key = argv[++i];
        else if (strncmp(a, "--remote-key-file=", 18) == 0)
            cli.remote_key = a + 18;
        else if ((strcmp(a, "--cache-dir") == 0 || strcmp(a, "--template-dir") == 0) && i + 1 < argc) {
            if (a[2] == 'c')
                cache_flag = argv[++i];
            else
                tmpl_flag = argv[++i];
        } else if (strcmp(a, "--max-memory") == 0 && i + 1 < argc)
            maxmem_flag = argv[++i];
        else if (strncmp(a, "--max-memory=", 13) == 0)
            maxmem_flag = a + 13;
        else if (strncmp(a, "--cache-dir=", 12) == 0)
            cache_flag = a + 12;
        else if (strncmp(a, "--template-dir=", 15) == 0)
            tmpl_flag = a + 15;
        else if ((strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) && cmd_at < 0)
            want_help = true;
        else {
            if (cmd_at < 0 && a[0] != '-') cmd_at = n;
            argv[n++] = argv[i];
        }
    }
    argc = n;
    if (maxmem_flag && !lib_parse_size(maxmem_flag, &cli.max_memory)) {
        fprintf(stderr, "milc: --max-memory wants a size such as 4G, not '%s'\nTry 'milc --help'.\n", maxmem_flag);
        return EXIT_USAGE;
    }
    if (cmd_at < 0) {
        if (want_help) {
            print_usage(stdout);
            return EXIT_OK;
        }
        print_usage(stderr);
        return EXIT_USAGE;
    }
    if (cmd_at != 1) {
        fprintf(stderr, "milc: unknown option '%s'\nTry 'milc --help'.\n", argv[1]);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "help") == 0) {
        if (argc < 3) {
            print_usage(stdout);
            return EXIT_OK;
        }
        const Command *c = find_command(argv[2]);
        if (!c) {
            fprintf(stderr, "milc: no command '%s'\nTry 'milc --help'.\n", argv[2]);
            return EXIT_USAGE;
        }
        c->help(stdout);
        return EXIT_OK;
    }
    const Command *c = find_command(name);
    if (!c) {
        fprintf(stderr, "milc: no command '%s'\nTry 'milc --help'.\n", name);
        return EXIT_USAGE;
    }
    if (resolve_cpu() != 0) return EXIT_USAGE;
    for (int i = 2; i < argc && !c->own_help; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            c->help(stdout);
            return EXIT_OK;
        }
    }
    if (want_help && !c->own_help) {
        c->help(stdout);
        return EXIT_OK;
    }
    char *cache_dir = resolve_cache_dir(cache_flag);
    char *tmpl_dirs = resolve_template_dirs(tmpl_flag);
    if (!cache_dir || !tmpl_dirs) {
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    if (!*cache_dir && c->uses_cache) {
        cli_error("no cache directory: HOME is not set, nor MILC_CACHE_DIR or XDG_CACHE_HOME; pass --cache-dir DIR");
        free(cache_dir), free(tmpl_dirs);
        return EXIT_USAGE;
    }
    cli.cache_dir = cache_dir;
    if (!cli.remote && getenv("MILC_REMOTE") && *getenv("MILC_REMOTE")) cli.remote = getenv("MILC_REMOTE");
    if (!cli.remote_key && getenv("MILC_REMOTE_KEY_FILE") && *getenv("MILC_REMOTE_KEY_FILE"))
        cli.remote_key = getenv("MILC_REMOTE_KEY_FILE");
    cli.template_dirs = tmpl_dirs;
    scratch_install_handlers();
    lib_set_sink(&(LibSink){print_msg, NULL});
    lib_set_scratch(&(LibScratch){scratch_make, scratch_remove});
    int rc = c->run(&cli, argc - 1, argv + 1);
    fflush(stdout);
    if (ferror(stdout)) {
        cli_error("cannot write output");
        rc = EXIT_SYSTEM;
    }
    free(cache_dir);
    free(tmpl_dirs);
    return rc;
}
