/* manifest.c — one line of a prewarm manifest: `milc build` options, '#'
 * comments, errors at file:line:col.  Kept apart from the command so the
 * fuzzer can drive it (tests/fuzz/fuzz_manifest.c). */
#include <stdlib.h>
#include <string.h>

#include "milc/jobs.h"
#include "milc/manifest.h"

int manifest_parse_line(char *text, SrcLoc loc, ManifestLine *ln, DiagSink *d) {
    memset(ln, 0, sizeof *ln);
    char *p = text;
    int errors = d->errors;
    SrcLoc max_at = loc;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (!*p || *p == '#') break;
        SrcLoc at = {loc.file, loc.line, (int)(p - text) + 1};
        char *tok = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r') p++;
        if (*p) *p++ = 0;
        if (strncmp(tok, "--", 2) != 0 || !tok[2]) {
            diag_error(d, at, "expected an option such as --model NAME, found '%s'", tok);
            break;
        }
        char *name = tok + 2, *val = strchr(name, '=');
        if (val)
            *val++ = 0;
        else {
            while (*p == ' ' || *p == '\t' || *p == '\r') p++;
            if (!*p || *p == '#') {
                diag_error(d, at, "option '--%s' needs a value", name);
                break;
            }
            val = p;
            while (*p && *p != ' ' && *p != '\t' && *p != '\r') p++;
            if (*p) *p++ = 0;
        }
        if (lib_name_eq(name, "model") || lib_name_eq(name, "template"))
            ln->config = val;
        else if (lib_name_eq(name, "weights"))
            ln->weights = val;
        else if (lib_name_eq(name, "mode"))
            ln->modes = val;
        else if (lib_name_eq(name, "chunk")) {
            char *end;
            ln->chunk = strcmp(val, "auto") == 0 ? JOBS_CHUNK_AUTO : strtol(val, &end, 10);
            if (ln->chunk != JOBS_CHUNK_AUTO && (*end || ln->chunk < 1 || ln->chunk > 4096))
                diag_error(d, at, "--chunk wants a whole number >= 1 or 'auto', not '%s'", val);
        } else if (lib_name_eq(name, "max-chunk-bytes")) {
            if (!lib_parse_size(val, &ln->max_chunk_bytes))
                diag_error(d, at, "--max-chunk-bytes wants a size such as 512M or 1G, not '%s'", val);
            max_at = at;
        } else {
            ln->extra = realloc(ln->extra, sizeof(MilcParam) * (size_t)(ln->nextra + 1));
            ln->extra[ln->nextra++] = (MilcParam){name, val};
        }
    }
    if (ln->max_chunk_bytes && ln->chunk != JOBS_CHUNK_AUTO && d->errors == errors)
        diag_error(d, max_at, "--max-chunk-bytes sizes the chunks of --chunk auto; give --chunk auto too");
    return d->errors > errors ? -1 : 0;
}

void manifest_line_free(ManifestLine *ln) {
    free(ln->extra);
    memset(ln, 0, sizeof *ln);
}

JobSpec manifest_line_spec(const ManifestLine *ln, SrcLoc loc) {
    return (JobSpec){.config = ln->config,
                     .weights = ln->weights,
                     .modes = ln->modes,
                     .chunk = ln->chunk,
                     .max_chunk_bytes = ln->max_chunk_bytes,
                     .extra = ln->extra,
                     .nextra = ln->nextra,
                     .loc = loc};
}
