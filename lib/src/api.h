/* api.h — what the public interface's files share (api.c, api_model.c). */
#ifndef MILC_LIB_API_H
#define MILC_LIB_API_H

#include "milc/jobs.h"
#include "milc/lib.h"
#include "milc.h"
#include "milc/model.h"

struct MilcCache {
    Store *store; /* the local LMDB cache (store_lmdb_open) */
    TemplatePath tp;
    char *dir; /* also where builds make their scratch directories */
    MilcCacheOptions o;
};

/* An entry point's frame: the thread's messages go to milc_last_error from
 * api_begin to api_end (which returns rc). */
typedef struct ApiCall {
    const LibSink *prev;
} ApiCall;
void api_begin(ApiCall *k);
int api_end(ApiCall *k, int rc);
/* Report d's diagnostics (rendered) as the call's message, free d; rc. */
int api_diags(DiagSink *d, int rc);
/* MILC_VERIFY_* as a BUILD_VERIFY_* policy. */
int api_verify_policy(int verify);

#endif
