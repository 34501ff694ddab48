/* safetensors.h — read Hugging Face .safetensors weight files (a weight
 * source for the generator).
 *
 * Layout: uint64 LE header length N, N bytes of JSON
 *   {"name": {"dtype": "F16", "shape": [768, 2304], "data_offsets": [begin, end]},
 *    ..., "__metadata__": {"k": "v"}}
 * then the data section; offsets are relative to its start.  The reader treats
 * the file as untrusted and checks it as strictly as the reference library:
 * JSON shape, known dtypes, offsets inside the data section, end - begin equal
 * to numel × itemsize, tensors neither overlapping nor leaving gaps. */
#ifndef MILC_SAFETENSORS_H
#define MILC_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "milc/diag.h"

typedef enum SafetensorsDType {
    ST_DTYPE_BOOL,
    ST_DTYPE_U8,
    ST_DTYPE_I8,
    ST_DTYPE_F8_E5M2,
    ST_DTYPE_F8_E4M3,
    ST_DTYPE_I16,
    ST_DTYPE_U16,
    ST_DTYPE_F16,
    ST_DTYPE_BF16,
    ST_DTYPE_I32,
    ST_DTYPE_U32,
    ST_DTYPE_F32,
    ST_DTYPE_I64,
    ST_DTYPE_U64,
    ST_DTYPE_F64,
    ST_DTYPE_COUNT
} SafetensorsDType;

enum { ST_MAX_RANK = 16, ST_MAX_HEADER = 100000000 /* as the reference reader */ };

typedef struct SafetensorsTensor {
    const char *name; /* owned by the file; valid until safetensors_close */
    SafetensorsDType dtype;
    int rank;
    int64_t dims[ST_MAX_RANK];
    size_t count;     /* product of dims (1 for rank 0) */
    size_t nbytes;    /* count × itemsize = end - begin */
    uint64_t offset;  /* of the data, from the start of the file */
    const void *data; /* into the file's bytes; valid until safetensors_close (NULL: header only) */
    bool aligned;     /* data is aligned for the dtype (else read it with memcpy) */
} SafetensorsTensor;

typedef struct SafetensorsFile {
    const char *name;     /* for diagnostics (sink-owned or the caller's) */
    const uint8_t *bytes; /* the whole file (mapped, or the caller's memory) */
    size_t size;
    size_t count;               /* tensors */
    SafetensorsTensor *tensors; /* sorted by name (malloc'd) */
    size_t meta_count;
    const char **meta; /* __metadata__ as key, value, key, value ... sorted by key */
    char *strings;     /* owns every name and metadata string */
    bool mapped;
} SafetensorsFile;

/* Map and validate a file.  On failure adds one error naming the file (and
 * the tensor, when one is at fault), returns -1 and leaves f closed. */
int safetensors_open(SafetensorsFile *f, const char *path, DiagSink *d);
/* The same on memory the caller owns and keeps alive. */
int safetensors_parse(SafetensorsFile *f, const char *name, const void *bytes, size_t size, DiagSink *d);
/* The header only, of the open file fd whose size is size, read by pread:
 * every check above against that size, the data left unread (each
 * tensor's data NULL, bytes NULL: the caller preads data at offset).  For
 * a checkpoint of gigabytes that must not be held in memory whole. */
int safetensors_read_header(SafetensorsFile *f, const char *name, int fd, uint64_t size, DiagSink *d);
void safetensors_close(SafetensorsFile *f);

/* The tensor called name, or NULL.  O(log n). */
const SafetensorsTensor *safetensors_find(const SafetensorsFile *f, const char *name);
/* A __metadata__ value, or NULL. */
const char *safetensors_metadata(const SafetensorsFile *f, const char *key);

/* "F16", "BF16", ... as in the file; bytes per element. */
const char *safetensors_dtype_name(SafetensorsDType t);
size_t safetensors_dtype_size(SafetensorsDType t);

#endif
