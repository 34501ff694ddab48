/* arena.c — bump allocator in growing blocks. */
#include "milc/arena.h"
#include "milc/assert.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ArenaBlock {
    ArenaBlock *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

enum { ARENA_MIN_BLOCK = 64 * 1024 };

void arena_init(Arena *a) {
    a->head = NULL;
    a->used_total = 0;
}

void arena_free(Arena *a) {
    ArenaBlock *b = a->head;
    while (b) {
        ArenaBlock *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used_total = 0;
}

void *arena_alloc(Arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    ArenaBlock *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t cap = size > ARENA_MIN_BLOCK ? size : ARENA_MIN_BLOCK;
        /* Grow geometrically so a large program does not make many blocks. */
        if (b && cap < b->size * 2 && b->size < (64u << 20)) cap = b->size * 2;
        MILC_ASSERT(cap < SIZE_MAX - sizeof(ArenaBlock));
        b = malloc(sizeof(ArenaBlock) + cap);
        MILC_ASSERT(b != NULL);
        b->size = cap;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    a->used_total += size;
    memset(p, 0, size);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
    char *p = arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    MILC_ASSERT(n >= 0);
    char *p = arena_alloc(a, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}
