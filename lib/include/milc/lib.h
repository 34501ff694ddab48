/* lib.h — what the library's modules share and the public header leaves out:
 * reporting without printing, scratch directories, a clock, and the kernel
 * variant every key and load names.  A front-end header (lib/README.md):
 * for lib/, the CLI and the tests; never installed. */
#ifndef MILC_LIB_H
#define MILC_LIB_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "milc.h"
#include "milc/plan.h"

/* Where the library's messages go.  A front end installs one for the process
 * (the CLI prints "milc: error: ..."); a public API call installs its
 * handle's for the call's duration on its thread, so two handles on two
 * threads never see each other's messages.  With neither, messages are
 * dropped: the library never prints. */
typedef struct LibSink {
    void (*report)(void *ctx, int level, const char *msg); /* level: MILC_MSG_* */
    void *ctx;
} LibSink;
void lib_set_sink(const LibSink *s); /* process-wide; NULL: none */
/* Make s the calling thread's sink; returns the one it replaces (restore it
 * with lib_sink_pop). */
const LibSink *lib_sink_push(const LibSink *s);
void lib_sink_pop(const LibSink *prev);
void lib_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void lib_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Scratch directories (a build's generated program).  A process that must
 * remove them when it is killed (the CLI's signal handlers) installs its own
 * pair; the default makes ROOT/PREFIX-PID-XXXXXX with mkdtemp and removes it
 * with everything under it. */
typedef struct LibScratch {
    int (*make)(const char *root, const char *prefix, char *out, size_t n); /* 0, or -1 with errno */
    void (*remove)(const char *dir);
} LibScratch;
void lib_set_scratch(const LibScratch *s); /* NULL: the default */
int lib_scratch_make(const char *root, const char *prefix, char *out, size_t n);
void lib_scratch_remove(const char *dir);

/* "123", "64M", "2G", "1T" (K, M, G, T are powers of 1024) into bytes: the
 * CLI's sizes and a manifest's.  false if malformed or zero. */
bool lib_parse_size(const char *s, uint64_t *out);

/* Monotonic time in nanoseconds, and milliseconds since such a time. */
long long lib_now_ns(void);
double lib_ms_since(long long t0);

/* The kernel variant (RtCpu) models load with and keys name: the best this
 * CPU runs unless a front end chose another (the CLI's $MILC_CPU). */
int lib_cpu(void);
void lib_set_cpu(int cpu);

#endif
