/* main.c — milc's entry point: global options, the command table, help,
 * and the resolution of the cache and template directories. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef MILC_BUILTIN_TEMPLATE_DIR
#define MILC_BUILTIN_TEMPLATE_DIR "mil-templates"
#endif

static const Command *const commands[] = {
    &cmd_build, &cmd_emit, &cmd_check, &cmd_fmt, &cmd_compile, &cmd_convert, &cmd_run,
    &cmd_bench, &cmd_prewarm, &cmd_cache, &cmd_templates,
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void print_usage(FILE *f) {
    fputs("usage: milc [global options] COMMAND [options]\n"
          "\n"
          "milc generates Core ML MIL programs for transformer layer chunks, compiles\n"
          "each once for its CPU backend, and caches the artifacts in LMDB.\n"
          "\n"
          "commands:\n", f);
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fputs("  help       show help for a command\n"
          "\n"
          "global options (anywhere on the line):\n"
          "  --cache-dir DIR     cache directory (default $MILC_CACHE_DIR, else\n"
          "                      $XDG_CACHE_HOME/milc, else ~/.cache/milc)\n"
          "  --template-dir DIR  extra template directory (also $MILC_TEMPLATE_PATH)\n"
          "  --json              machine-readable output on stdout\n"
          "  -q, --quiet         only errors\n"
          "  -v, --verbose       more detail\n"
          "  -h, --help          this help, or a command's with 'milc help COMMAND'\n"
          "  --version           print the version\n"
          "\n"
          "exit codes: 0 success, 1 invalid input (diagnostics printed),\n"
          "            2 usage error, 3 I/O, cache or system failure\n", f);
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
    if (e && *e) { snprintf(buf, sizeof buf, "%s/milc", e); return strdup(buf); }
    e = getenv("HOME");
    snprintf(buf, sizeof buf, "%s/.cache/milc", e && *e ? e : ".");
    return strdup(buf);
}

/* The built-in templates: installed beside the binary (PREFIX/bin/milc ->
 * PREFIX/share/milc/templates) or, in a build tree, the source directory. */
static const char *builtin_template_dir(char *buf, size_t size) {
    ssize_t n = readlink("/proc/self/exe", buf, size - 32);
    if (n > 0) {
        buf[n] = 0;
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

int main(int argc, char **argv) {
    Cli cli = {.argv0 = argv[0], .is_tty = isatty(2)};
    const char *cache_flag = NULL, *tmpl_flag = NULL;
    bool want_help = false;
    /* Pull global options out of argv wherever they stand (before a "--"),
     * so `milc build --json` and `milc --json build` both work. */
    int n = 1, cmd_at = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) { for (; i < argc; i++) argv[n++] = argv[i]; break; }
        if (strcmp(a, "--json") == 0) cli.json = true;
        else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) cli.verbosity = -1;
        else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) cli.verbosity = 1;
        else if (strcmp(a, "--version") == 0) { printf("milc %s\n", MILC_VERSION); return EXIT_OK; }
        else if ((strcmp(a, "--cache-dir") == 0 || strcmp(a, "--template-dir") == 0) && i + 1 < argc) {
            if (a[2] == 'c') cache_flag = argv[++i]; else tmpl_flag = argv[++i];
        } else if (strncmp(a, "--cache-dir=", 12) == 0) cache_flag = a + 12;
        else if (strncmp(a, "--template-dir=", 15) == 0) tmpl_flag = a + 15;
        else if ((strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) && cmd_at < 0) want_help = true;
        else {
            if (cmd_at < 0 && a[0] != '-') cmd_at = n;
            argv[n++] = argv[i];
        }
    }
    argc = n;
    if (cmd_at < 0) {
        if (want_help) { print_usage(stdout); return EXIT_OK; }
        print_usage(stderr);
        return EXIT_USAGE;
    }
    if (cmd_at != 1) {
        fprintf(stderr, "milc: unknown option '%s'\nTry 'milc --help'.\n", argv[1]);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "help") == 0) {
        if (argc < 3) { print_usage(stdout); return EXIT_OK; }
        const Command *c = find_command(argv[2]);
        if (!c) { fprintf(stderr, "milc: no command '%s'\nTry 'milc --help'.\n", argv[2]); return EXIT_USAGE; }
        c->help(stdout);
        return EXIT_OK;
    }
    const Command *c = find_command(name);
    if (!c) { fprintf(stderr, "milc: no command '%s'\nTry 'milc --help'.\n", name); return EXIT_USAGE; }
    for (int i = 2; i < argc && !c->own_help; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) { c->help(stdout); return EXIT_OK; }
    }
    if (want_help && !c->own_help) { c->help(stdout); return EXIT_OK; }
    char *cache_dir = resolve_cache_dir(cache_flag);
    char *tmpl_dirs = resolve_template_dirs(tmpl_flag);
    if (!cache_dir || !tmpl_dirs) { cli_error("out of memory"); return EXIT_SYSTEM; }
    cli.cache_dir = cache_dir;
    cli.template_dirs = tmpl_dirs;
    int rc = c->run(&cli, argc - 1, argv + 1);
    fflush(stdout);
    if (ferror(stdout)) { cli_error("cannot write output"); rc = EXIT_SYSTEM; }
    free(cache_dir);
    free(tmpl_dirs);
    return rc;
}
