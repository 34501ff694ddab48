/* keyrec.h — why a build misses: its direct record against the stored ones
 * of the same template, field by field (`milc build --explain`,
 * `milc cache why`). */
#ifndef MILC_LIB_KEYREC_H
#define MILC_LIB_KEYREC_H

#include <stdio.h>

#include "milc/jobs.h"

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

/* Why a job's direct key misses: the (at most EXPLAIN_NEAREST) stored direct
 * keys of the same template nearest to it, each with the key fields that
 * differ (stored -> asked). */
enum { EXPLAIN_NEAREST = 3 };
enum { EXPLAIN_MAX_FIELDS = 16 };
typedef struct ExplainDiff {
    int count;       /* fields that differ (the first EXPLAIN_MAX_FIELDS in f) */
    char text[1024]; /* "seq 64 -> 32, milc version 0.3 -> 0.4" */
    struct {
        char field[80], stored[80], asked[80];
    } f[EXPLAIN_MAX_FIELDS];
} ExplainDiff;
typedef struct ExplainNear {
    CacheKey akey;
    ExplainDiff diff;
    bool present; /* its artifact is still stored */
} ExplainNear;
typedef struct Explain {
    bool hit;       /* the direct key is there: nothing to explain */
    char tmpl[256]; /* the template's name (tl bytes) */
    size_t tl;
    ExplainNear best[EXPLAIN_NEAREST];
    int nbest;
} Explain;
/* MILC_OK with out filled, MILC_E_INPUT (diagnostics in d) or MILC_E_SYSTEM. */
int explain_scan(Cache *c, const TemplatePath *tp, const BuildJob *j, Explain *out, DiagSink *d);

#endif
