/* Diagnostics render as file:line:col, the source line and a caret. */
#include "milc/arena.h"
#include "milc/diag.h"
#include "test.h"

TEST(render_with_caret) {
    DiagSink s;
    diag_init(&s);
    const char *f = diag_add_source(&s, "a.mil", "line one\n  bad thing\n", 21);
    diag_error(&s, ((SrcLoc){f, 2, 3}), "unknown op '%s'", "bad");
    char *out = diag_render(&s);
    CHECK_STR(out, "a.mil:2:3: error: unknown op 'bad'\n      bad thing\n      ^\n");
    CHECK(diag_failed(&s));
    free(out);
    diag_free(&s);
}

TEST(no_source_no_caret) {
    DiagSink s;
    diag_init(&s);
    diag_warn(&s, ((SrcLoc){diag_intern(&s, "w.bin"), 0, 0}), "odd");
    char *out = diag_render(&s);
    CHECK_STR(out, "w.bin: warning: odd\n");
    CHECK(!diag_failed(&s));
    s.warn_as_error = true;
    CHECK(diag_failed(&s));
    free(out);
    diag_free(&s);
}

TEST(error_cap) {
    DiagSink s;
    diag_init(&s);
    s.max_errors = 3;
    for (int i = 0; i < 10; i++) diag_error(&s, ((SrcLoc){0}), "e%d", i);
    CHECK_EQ_INT(s.count, 3);
    CHECK(s.truncated);
    diag_free(&s);
}

TEST(arena) {
    Arena a;
    arena_init(&a);
    char *p = arena_alloc(&a, 10);
    CHECK(((unsigned long)p & 15) == 0);
    char *big = arena_alloc(&a, 1 << 20);
    big[(1 << 20) - 1] = 1;
    CHECK_STR(arena_printf(&a, "%d-%s", 4, "x"), "4-x");
    arena_free(&a);
}

int main(void) {
    RUN(render_with_caret);
    RUN(no_source_no_caret);
    RUN(error_cap);
    RUN(arena);
    TEST_MAIN_END();
}
