/* tpath.c — the template search path, and how names compare. */
#include <stdlib.h>
#include <string.h>

#include "milc/jobs.h"

int tpath_init(TemplatePath *tp, const char *dirs) {
    memset(tp, 0, sizeof *tp);
    tp->buf = strdup(dirs);
    if (!tp->buf) return -1;
    int n = 1;
    for (const char *p = tp->buf; *p; p++) n += *p == ':';
    tp->dirs = calloc((size_t)n, sizeof(char *));
    if (!tp->dirs) {
        free(tp->buf);
        return -1;
    }
    for (char *tok = strtok(tp->buf, ":"); tok; tok = strtok(NULL, ":")) tp->dirs[tp->sp.count++] = tok;
    tp->sp.dirs = tp->dirs;
    if (!(tp->sp.loaded = gen_template_set_new())) {
        free(tp->buf);
        free(tp->dirs);
        return -1;
    }
    return 0;
}

void tpath_free(TemplatePath *tp) {
    gen_template_set_free(tp->sp.loaded);
    free(tp->buf);
    free(tp->dirs);
    memset(tp, 0, sizeof *tp);
}

bool lib_name_eq(const char *a, const char *b) {
    for (;; a++, b++) {
        char ca = *a == '_' ? '-' : *a, cb = *b == '_' ? '-' : *b;
        if (ca != cb) return false;
        if (!ca) return true;
    }
}
