/* arena.h — a bump allocator: one per compile, freed in one call.
 *
 * Everything the front end, checker and passes allocate for one program lives
 * in one Arena; nothing is freed piecemeal.  Memory is zeroed. */
#ifndef MILC_ARENA_H
#define MILC_ARENA_H

#include <stddef.h>

typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
    ArenaBlock *head;
    size_t used_total; /* bytes handed out, for statistics */
} Arena;

void arena_init(Arena *a);
void arena_free(Arena *a);

/* Zeroed, 16-byte aligned memory valid until arena_free().  Aborts through
 * the always-on assertion on OOM: a compile that cannot allocate cannot
 * report anything useful either. */
void *arena_alloc(Arena *a, size_t size);
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ARENA_NEW(a, T)      ((T *)arena_alloc((a), sizeof(T)))
#define ARENA_ARRAY(a, T, n) ((T *)arena_alloc((a), sizeof(T) * (size_t)(n)))

#endif
