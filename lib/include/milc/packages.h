/* packages.h — `build --packages DIR` and `prewarm --packages DIR`: a Core
 * ML package of every program of a request, left beside the cache for
 * whoever ships the model to a device (Core ML compiles a package, not
 * milc's artifact). */
#ifndef MILC_LIB_PACKAGES_H
#define MILC_LIB_PACKAGES_H

#include "milc/jobs.h"

/* Called for each package: its path, and whether it was written now (false:
 * it was there already). */
typedef void (*PackageFn)(void *ctx, int idx, const char *path, bool written);

/* For each of the n jobs whose key is given (keys[i] non-NULL), DIR/KEY.mlpackage
 * (KEY: the program's artifact key in hex).  The key names the program —
 * template, parameters, weights and milc — so a package already there under
 * that name is that program's, and is left as it is; a missing one is
 * generated again (a build that found its program in the cache generated
 * nothing), checked and written by pkg_write: into a temporary folder beside
 * it, then renamed into place, so a package appears whole or not at all.
 * The same program gives the same bytes (no compile mode is recorded in it:
 * modes are how milc compiles a program, not the program).  DIR is created if
 * missing.  MILC_OK, MILC_E_INPUT with diagnostics in d, or MILC_E_SYSTEM. */
int packages_leave(const TemplatePath *tp, const BuildJob *jobs, const CacheKey *const *keys, int n, const char *dir,
                   PackageFn fn, void *ctx, DiagSink *d);

#endif
