/* explain.h — why a build misses, shown (`milc build --explain`,
 * `milc cache why`). */
#ifndef MILC_CLI_EXPLAIN_H
#define MILC_CLI_EXPLAIN_H

#include <stdio.h>

#include "cli.h"
#include "milc/keyrec.h"

/* For every job: whether its direct key is in the cache and, if not, the
 * nearest stored direct keys of the same template with the key fields that
 * differ (stored -> asked).  Text on f, or JSON on stdout when json.
 * EXIT_OK, or EXIT_INPUT with diagnostics in d. */
int explain_jobs(Cache *c, const TemplatePath *tp, const JobList *jobs, bool json, FILE *f, DiagSink *d);

/* `milc cache why BUILD-OPTIONS`: argv[0] is "why". */
int explain_cmd(Cli *cli, int argc, char **argv);

#endif
