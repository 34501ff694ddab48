/* blob.h — the MILBlob storage file (weights/weight.bin), version 2.
 *
 * Layout (all little-endian, everything 64-byte aligned, gaps zero):
 *   offset 0: header, 64 bytes: uint32 count, uint32 version (= 2), 56 zero bytes
 *   per blob at a 64-aligned offset M: a 64-byte record
 *     uint32 sentinel (0xDEADBEEF), uint32 dtype, uint64 size_in_bytes,
 *     uint64 data_offset (= M + 64, absolute), uint64 padding_bits, 32 zero bytes
 *   then size_in_bytes of data; the next record starts at round_up(end, 64).
 * A BLOBFILE(offset = M) in MIL names the record at M, not the data.
 *
 * The reader treats the file as untrusted: every field is checked before use.
 */
#ifndef MILC_BLOB_H
#define MILC_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "milc/diag.h"

/* dtype codes of the record's dtype field. */
typedef enum MilBlobDType {
    MILBLOB_FP16 = 1,
    MILBLOB_FP32 = 2,
    MILBLOB_UINT8 = 3,
    MILBLOB_INT8 = 4,
    MILBLOB_BF16 = 5,
    MILBLOB_INT16 = 6,
    MILBLOB_UINT16 = 7,
    MILBLOB_INT4 = 8,
    MILBLOB_UINT1 = 9,
    MILBLOB_UINT2 = 10,
    MILBLOB_UINT4 = 11,
    MILBLOB_UINT3 = 12,
    MILBLOB_UINT6 = 13,
    MILBLOB_INT32 = 14,
    MILBLOB_UINT32 = 15,
    MILBLOB_FP8E4M3 = 16,
    MILBLOB_FP8E5M2 = 17,
} MilBlobDType;

enum { MILBLOB_VERSION = 2, MILBLOB_ALIGN = 64, MILBLOB_SENTINEL = 0xDEADBEEFu };

/* Bits per element of a dtype code; 0 for an unknown code. */
unsigned milblob_dtype_bits(uint32_t dtype);
/* "fp16", "int32", ...; NULL for an unknown code. */
const char *milblob_dtype_name(uint32_t dtype);

typedef struct MilBlobRecord {
    uint64_t offset;      /* of the 64-byte record (what BLOBFILE names) */
    uint32_t dtype;       /* MilBlobDType */
    uint64_t size;        /* bytes of data */
    uint64_t data_offset; /* = offset + 64 */
    uint64_t padding_bits;
    const uint8_t *data; /* into the file's bytes; valid until milblob_close */
} MilBlobRecord;

typedef struct MilBlobFile {
    const char *name;     /* for diagnostics (owned by the DiagSink or caller) */
    const uint8_t *bytes; /* the whole file (mapped, or the caller's memory) */
    size_t size;
    uint32_t count;         /* blobs in the file */
    MilBlobRecord *records; /* count of them, in file order (malloc'd) */
    bool mapped;            /* bytes is memory this struct owns (milblob_open read it) */
} MilBlobFile;

/* Map and validate a weight file: header, every record's sentinel, dtype,
 * alignment, bounds, size consistent with dtype, no overlaps.  On failure
 * adds an error naming the file and byte offset, returns -1, and leaves f
 * closed.  0 on success. */
int milblob_open(MilBlobFile *f, const char *path, DiagSink *d);
/* The same on memory the caller owns and keeps alive (fuzzing, tests). */
int milblob_parse(MilBlobFile *f, const char *name, const void *bytes, size_t size, DiagSink *d);
/* Validate a weight file as milblob_open does, reading only the header,
 * the records and the padding between blobs (by pread): memory and time do
 * not grow with the data.  Every record's data is NULL and bytes is NULL: for
 * a reader that needs the layout only (the checker). */
int milblob_open_records(MilBlobFile *f, const char *path, DiagSink *d);
void milblob_close(MilBlobFile *f);
/* The record whose metadata starts at offset, or NULL. */
const MilBlobRecord *milblob_find(const MilBlobFile *f, uint64_t offset);

/* XXH3-128 over (dtype, size, padding_bits, bytes) of every record in file
 * order: the weights' part of a cache key.  Offsets are implied by the order,
 * so two files with the same blobs have the same digest.  out is the hash in
 * canonical (big-endian) byte order. */
void milblob_file_digest(const MilBlobFile *f, uint8_t out[16]);

/* Streaming writer.  Writes PATH.tmp.XXXXXX beside PATH and renames it over
 * PATH on finish, so a crash or error never leaves a partial weight file. */
typedef struct MilBlobWriter MilBlobWriter;

/* NULL on failure (error added to d). */
MilBlobWriter *milblob_writer_open(const char *path, DiagSink *d);
/* The file is scratch (a build's): published whole but not fsynced. */
void milblob_writer_scratch(MilBlobWriter *w);
/* Append a blob; returns the record offset to put in BLOBFILE(offset = ...).
 * Errors (bad dtype, size not a whole number of elements, I/O, OOM) are
 * sticky: the call returns UINT64_MAX and milblob_writer_finish reports the
 * first one.  Sub-byte dtypes are written with padding_bits = 0. */
uint64_t milblob_writer_add(MilBlobWriter *w, uint32_t dtype, const void *data, uint64_t size);
/* Append a blob whose bytes the caller fills in place: returns a pointer to
 * size writable bytes (valid until the next writer call) and the record
 * offset in *offset.  Lets a generator produce weights without a copy.
 * NULL (and *offset = UINT64_MAX) after a sticky error. */
void *milblob_writer_reserve(MilBlobWriter *w, uint32_t dtype, uint64_t size, uint64_t *offset);
/* The most milblob_writer_take hands out at a time. */
enum { MILBLOB_TAKE_MAX = 1u << 20 };
/* Append a blob of size bytes whose data the caller then supplies in order,
 * piece by piece, through milblob_writer_take: the writer's memory stays
 * bounded (a few MiB) whatever the blob's size.  Returns the record offset,
 * or UINT64_MAX after a sticky error.  Writing anything else (or finishing)
 * before all size bytes were taken is a sticky error. */
uint64_t milblob_writer_begin(MilBlobWriter *w, uint32_t dtype, uint64_t size);
/* The next n bytes (n <= MILBLOB_TAKE_MAX and <= what the blob begun last
 * still lacks) of that blob, for the caller to fill before its next writer
 * call.  NULL after a sticky error (n too large included). */
void *milblob_writer_take(MilBlobWriter *w, size_t n);
/* The digest milblob_file_digest gives for the file written so far, made as
 * the bytes went by (no read back).  Call before finish. */
void milblob_writer_digest(MilBlobWriter *w, uint8_t out[16]);
/* Write the header, flush, rename into place.  Frees w.  0 or -1. */
int milblob_writer_finish(MilBlobWriter *w, DiagSink *d);
/* Discard everything written; frees w. */
void milblob_writer_abort(MilBlobWriter *w);

/* A weight file made in memory, no file at all: a build compiles its
 * weights and throws them away, so they need not go through the page cache
 * (where a chunk's weights cost a second copy of them, and the first chunk
 * the price of memory never touched before). */
typedef struct MilBlobImage {
    uint8_t *bytes; /* the file's bytes (milblob_parse them), size of them */
    size_t size;
    size_t maplen; /* of the mapping behind them */
} MilBlobImage;
/* A writer into memory laid out for exactly size bytes of file (a generator
 * knows its layout): pieces taken are the file's own bytes, never copied.
 * Writing past size is a sticky error. */
MilBlobWriter *milblob_writer_open_mem(uint64_t size, DiagSink *d);
/* fn(ctx, n) is called before the in-memory writer touches n more bytes
 * (in steps of about a MiB), and may wait: a build that overlaps the store
 * of one program with the making of the next holds the two to one budget. */
typedef void (*MilBlobGrowFn)(void *ctx, uint64_t n);
void milblob_writer_on_grow(MilBlobWriter *w, MilBlobGrowFn fn, void *ctx);
/* Finish into *out (the caller frees it with milblob_image_free).  Frees w.
 * 0, or -1 with the writer's sticky error added to d. */
int milblob_writer_finish_mem(MilBlobWriter *w, MilBlobImage *out, DiagSink *d);
void milblob_image_free(MilBlobImage *m);
/* The bytes [p, p + n) of the image will not be read again: their whole
 * pages go back to the OS (and read as zeros after). */
void milblob_image_discard(const MilBlobImage *m, const void *p, size_t n);

#endif
