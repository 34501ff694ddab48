/* assert.h — always-on assertions for broken invariants (never for bad input,
 * which becomes a diagnostic).  Not compiled out by NDEBUG. */
#ifndef MILC_ASSERT_H
#define MILC_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#define MILC_ASSERT(cond)                                                                                              \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "milc: internal error: %s:%d: assertion '%s' failed\n", __FILE__, __LINE__, #cond);        \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

#endif
