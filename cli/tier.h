/* tier.h — the remote cache tier as the CLI uses it: opened from the global
 * options (--remote, --remote-key-file, --remote-readonly), read-through and
 * write-back for the build path, and its warnings, each printed once. */
#ifndef MILC_CLI_TIER_H
#define MILC_CLI_TIER_H

#include <stdbool.h>

#include "cli.h"
#include "milc/remote.h"

/* Open the remote the global options name.  need_key: entries will be read or
 * written, so the team key file is required.  EXIT_OK with *out (NULL when no
 * remote is configured), or EXIT_USAGE (cmd names the command in the message: a malformed URL, no key file) /
 * EXIT_INPUT (a key file that fails its checks), the message printed. */
int tier_open(const Cli *cli, const char *cmd, bool need_key, Remote **out);
/* Print the breaker's warning if one is pending, and close.  NULL is fine. */
void tier_close(Remote *r);
/* Print the breaker's warning now if the remote just went down. */
void tier_warn(Remote *r);

/* Read-through, on a local miss: bring the entry (or the direct key's mapping
 * and its entry) from the remote into cache c.  true when c now holds it.
 * A refused entry (a MAC or size check failed) is a warning and a miss. */
bool tier_pull(Remote *r, Cache *c, const CacheKey *k, const void *rec, size_t rlen);
bool tier_pull_direct(Remote *r, Cache *c, const CacheKey *dkey, const void *drec, size_t dlen);
/* Write-back after a local store: the entry, then its direct key (if dkey). */
void tier_push(Remote *r, Cache *c, const CacheKey *k, const CacheKey *dkey, const void *drec, size_t dlen);

#endif

/* `milc cache push|pull [KEY...]` (all entries without KEYs) and the remote
 * part of `milc cache stat --remote`.  Each prints its result and returns an
 * exit code: 0, 1 (a KEY not there, an entry refused), 2 (a bad KEY), 3 (the
 * server failed). */
int tier_cmd_push(const Cli *cli, Cache *c, Remote *r, const char *const *keys, int nkeys);
int tier_cmd_pull(const Cli *cli, Cache *c, Remote *r, const char *const *keys, int nkeys);
int tier_cmd_stat(const Cli *cli, Remote *r);
