/* stale.h — `cache verify --stale`: the entries another milc made. */
#ifndef MILC_CLI_STALE_H
#define MILC_CLI_STALE_H

#include <stdbool.h>

#include "cli.h"
#include "milc/cache.h"

/* List (and with repair remove) every stale entry.  Exit code. */
int drift_verify(const Cli *cli, Cache *c, bool repair);

#endif
