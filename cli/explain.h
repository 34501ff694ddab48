/* explain.h — why a build misses: its direct record against the stored ones
 * of the same template, field by field (`milc build --explain`,
 * `milc cache why`). */
#ifndef MILC_CLI_EXPLAIN_H
#define MILC_CLI_EXPLAIN_H

#include <stdio.h>

#include "jobs.h"

/* A key record's items, as ckey_record_next gives them (explain.c). */
enum { KEYREC_MAX_FIELDS = 32 };
typedef struct KeyField {
    uint32_t tag;
    const uint8_t *p;
    uint64_t n;
} KeyField;
typedef struct KeyRecord {
    KeyField f[KEYREC_MAX_FIELDS];
    int n;
} KeyRecord;
/* 0, or -1 if rec holds no well-formed item. */
int keyrec_parse(const uint8_t *rec, size_t len, KeyRecord *r);
const KeyField *keyrec_field(const KeyRecord *r, uint32_t tag);
/* The value of NAME (nl bytes) in a parameters item ("k=v\n..."). */
bool keyrec_param(const KeyField *parm, const char *name, size_t nl, const char **v, size_t *vl);
/* What a field is called ("milc version") and its value for display. */
const char *keyrec_label(uint32_t tag);
void keyrec_show(const KeyField *f, uint32_t tag, char *out, size_t n);

/* For every job of spec: whether its direct key is in the cache and, if not,
 * the (at most 3) nearest stored direct keys of the same template with the
 * key fields that differ (stored → asked).  Text on f, or JSON on stdout
 * when json.  EXIT_OK, or EXIT_INPUT with diagnostics in d. */
int explain_jobs(Cache *c, const TemplatePath *tp, const JobList *jobs, bool json, FILE *f, DiagSink *d);

/* `milc cache why BUILD-OPTIONS`: argv[0] is "why". */
int explain_cmd(Cli *cli, int argc, char **argv);

#endif
