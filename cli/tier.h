/* tier.h — the remote cache tier as the CLI uses it: opened from the global
 * options (--remote, --remote-key-file, --remote-readonly), and its warnings,
 * each printed once.  Read-through and write-back on the build path are the
 * library's (tier_io.c). */
#ifndef MILC_CLI_TIER_H
#define MILC_CLI_TIER_H

#include <stdbool.h>

#include "cli.h"
#include "milc/store.h"

/* Open the remote the global options name, as a Store (the library's build
 * path sees only Stores; `cache push|pull|stat` use store_redis_remote).  need_key: entries will be read or
 * written, so the team key file is required.  EXIT_OK with *out (NULL when no
 * remote is configured), or EXIT_USAGE (cmd names the command in the message: a malformed URL, no key file) /
 * EXIT_INPUT (a key file that fails its checks), the message printed. */
int tier_open(const Cli *cli, const char *cmd, bool need_key, Store **out);
/* Print the breaker's warning if one is pending, and close.  NULL is fine. */
void tier_close(Store *r);
/* Print the breaker's warning now if the remote just went down. */
void tier_warn(Store *r);

#endif

/* `milc cache push|pull [KEY...]` (all entries without KEYs) and the remote
 * part of `milc cache stat --remote`.  Each prints its result and returns an
 * exit code: 0, 1 (a KEY not there, an entry refused), 2 (a bad KEY), 3 (the
 * server failed). */
int tier_cmd_push(const Cli *cli, Cache *c, Remote *r, const char *const *keys, int nkeys);
int tier_cmd_pull(const Cli *cli, Cache *c, Remote *r, const char *const *keys, int nkeys);
int tier_cmd_stat(const Cli *cli, Remote *r);
