/* drift.h — entries made by another milc (version, key or artifact format,
 * backend, CPU features): listed by `cache verify --stale`, rebuilt from
 * their stored recipe by `prewarm --stale`, never served. */
#ifndef MILC_LIB_DRIFT_H
#define MILC_LIB_DRIFT_H

#include "milc/jobs.h"

/* Whether key record rec was made by another milc: true, with what differs
 * ("milc version 0.3.0, this milc 0.4.0") in why. */
bool drift_why(const uint8_t *rec, size_t len, char *why, size_t n);
/* The recipes (direct records) of every stale entry as jobs, the costliest
 * (by its ledger's compile time) first.  0, or -1 with a message printed. */
int drift_jobs(Cache *c, JobList *out);

#endif
