/* cmd_templates.c — `milc templates ls | show NAME`. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "genopts.h"

static void templates_help(FILE *f) {
    fputs("usage: milc templates ls\n"
          "       milc templates show NAME\n"
          "\n"
          "List the templates and presets on the search path (--template-dir,\n"
          "$MILC_TEMPLATE_PATH, the built-in directory), or show one template's\n"
          "documentation and parameters.  A user adds a template by dropping an XML\n"
          "file into a directory on the path; see mil-templates/README.md.\n",
          f);
}

static int templates_run(Cli *cli, int argc, char **argv) {
    Args a;
    static const OptSpec opts[] = {{0}};
    if (!args_parse("templates", opts, argc - 1, argv + 1, false, &a)) return EXIT_USAGE;
    int rc = EXIT_USAGE;
    const char *sub = a.npos > 0 ? a.pos[0] : NULL;
    if (!sub || (strcmp(sub, "ls") != 0 && strcmp(sub, "show") != 0)) {
        cli_usage_error("templates", "expected 'ls' or 'show NAME'");
        goto out;
    }
    if ((strcmp(sub, "ls") == 0 && a.npos != 1) || (strcmp(sub, "show") == 0 && a.npos != 2)) {
        cli_usage_error("templates", strcmp(sub, "ls") == 0 ? "'ls' takes no argument" : "'show' takes one NAME");
        goto out;
    }
    TemplatePath tp;
    if (tpath_init(&tp, cli->template_dirs) != 0) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
        goto out;
    }
    DiagSink d;
    diag_init(&d);
    if (strcmp(sub, "ls") == 0) {
        GenEntry *e = NULL;
        int n = 0;
        if (gen_list(&tp.sp, &e, &n, &d) == 0) {
            if (cli->json) {
                json_t *list = json_array();
                for (int i = 0; i < n; i++)
                    cli_json_push(list, cli_json_obj("name", cli_json_str(e[i].name), "kind",
                                                     json_string(e[i].kind == GEN_ENTRY_PRESET ? "preset" : "template"),
                                                     "template", cli_json_str(e[i].template_name), "path",
                                                     cli_json_str(e[i].path), "doc", cli_json_str(e[i].doc), NULL));
                cli_json_print(stdout, list);
            } else {
                for (int i = 0; i < n; i++) {
                    if (e[i].kind == GEN_ENTRY_PRESET)
                        printf("%-14s preset of %-8s %s\n", e[i].name, e[i].template_name, e[i].doc);
                    else
                        printf("%-14s template          %s\n", e[i].name, e[i].doc);
                }
            }
            gen_list_free(e, n);
        }
    } else {
        GenTemplate *t = gen_template_load(&tp.sp, a.pos[1], &d);
        if (t) {
            if (cli->json) {
                json_t *params = json_array();
                for (int i = 0; i < gen_template_param_count(t); i++) {
                    const GenParam *p = gen_template_param(t, i);
                    static const char *const types[] = {"int", "float", "enum", "string"};
                    cli_json_push(params,
                                  cli_json_obj("name", cli_json_str(p->name), "type", json_string(types[p->type]),
                                               "default", cli_json_str(p->default_value), "doc", cli_json_str(p->doc),
                                               NULL));
                }
                cli_json_print(stdout, cli_json_obj("name", cli_json_str(gen_template_name(t)), "path",
                                                    cli_json_str(gen_template_path(t)), "doc",
                                                    cli_json_str(gen_template_doc(t)), "params", params, NULL));
            } else {
                char *s = gen_template_describe(t);
                if (s) {
                    fputs(s, stdout);
                    free(s);
                }
            }
            gen_template_free(t);
        }
    }
    rc = cli_report(cli, &d);
    diag_free(&d);
    tpath_free(&tp);
out:
    args_free(&a);
    return rc;
}

const Command cmd_templates = {
    "templates", "list templates and presets, or show one", templates_run, templates_help, false, false};
