/* mil_check_driver [--parse] FILE: parse and check FILE (CPU target), print
 * every diagnostic as "line:col: level: message" lines; exit 0 when clean, 1
 * when not, 2 when the file cannot be read.  Used by shapes_ref.py, which
 * compares the checker's shape rules against NumPy / PyTorch.  With --parse
 * only parse (exit 0: the text parses): agree.py tells a file the checker
 * never saw from one it accepted. */
#include "milc/mil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    bool parse_only = argc == 3 && strcmp(argv[1], "--parse") == 0;
    if (argc != 2 && !parse_only) return 2;
    if (parse_only) argv++;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) return 2;
    fclose(f);
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    d.max_errors = 1 << 30;
    IrProgram *p = mil_parse(&a, &d, argv[1], text, (size_t)n);
    if (p && !parse_only) mil_check(p, NULL, &d);
    for (int i = 0; i < d.count; i++)
        printf("%d:%d: %s: %s\n", d.items[i].loc.line, d.items[i].loc.col,
               d.items[i].level == DIAG_ERROR ? "error" : "warning", d.items[i].msg);
    int failed = diag_failed(&d);
    arena_free(&a);
    diag_free(&d);
    free(text);
    return failed ? 1 : 0;
}
