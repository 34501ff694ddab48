/* npy.h — NumPy .npy files, the tensors `milc run` reads and writes.
 *
 * The reader takes untrusted bytes: magic, version 1.0/2.0/3.0, the header
 * dict ('descr', 'fortran_order', 'shape'), sizes without overflow, and a
 * data section exactly shape-product × itemsize long.  Little-endian; C or
 * Fortran order (npy_open hands out C order).  The writer produces the same
 * bytes as numpy.save.
 * Errors are negative NpyStatus codes plus a message in the caller's buffer
 * (the runtime does not use the compiler's DiagSink). */
#ifndef MILC_NPY_H
#define MILC_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum NpyDType {
    NPY_DTYPE_BOOL, /* '|b1' */
    NPY_DTYPE_I8,   /* '|i1' */
    NPY_DTYPE_U8,   /* '|u1' */
    NPY_DTYPE_I16,  /* '<i2' */
    NPY_DTYPE_U16,  /* '<u2' */
    NPY_DTYPE_I32,  /* '<i4' */
    NPY_DTYPE_U32,  /* '<u4' */
    NPY_DTYPE_I64,  /* '<i8' */
    NPY_DTYPE_U64,  /* '<u8' */
    NPY_DTYPE_F16,  /* '<f2' */
    NPY_DTYPE_F32,  /* '<f4' */
    NPY_DTYPE_F64,  /* '<f8' */
    NPY_DTYPE_COUNT
} NpyDType;

typedef enum NpyStatus {
    NPY_OK = 0,
    NPY_EFORMAT = -1,      /* not a well-formed .npy file */
    NPY_EUNSUPPORTED = -2, /* well-formed, but big-endian, Fortran order, an unknown dtype, ... */
    NPY_EIO = -3,          /* open/read/write/rename failed (errno text in the message) */
    NPY_ENOMEM = -4,
    NPY_EINVAL = -5, /* bad arguments to the writer */
} NpyStatus;

enum { NPY_MAX_RANK = 16 };

typedef struct NpyArray {
    NpyDType dtype;
    int rank;                   /* 0 for a scalar */
    int64_t dims[NPY_MAX_RANK]; /* [rank], outermost first (as numpy's shape) */
    bool fortran_order;         /* data is in Fortran (column-major) order; only for rank >= 2 */
    size_t count;               /* product of dims (1 for rank 0) */
    size_t nbytes;              /* count * itemsize */
    const void *data;           /* nbytes, borrowed: see npy_read / npy_open */
} NpyArray;

/* Bytes per element, and the descr string numpy writes ("<f4", "|b1", ...). */
size_t npy_dtype_size(NpyDType t);
const char *npy_dtype_descr(NpyDType t);
/* "fp16", "fp32", "int32", "bool", ... (MIL's spelling); NULL if out of range. */
const char *npy_dtype_name(NpyDType t);
/* "invalid .npy file", ... for a status code. */
const char *npy_strerror(int status);

/* Parse a whole .npy image.  out->data points into bytes (borrowed: valid as
 * long as bytes is); it is aligned for the dtype only if bytes is 64-byte
 * aligned (numpy pads the header to 64) — use memcpy otherwise.  On failure
 * returns a negative NpyStatus and writes a message (no file name) into
 * err[errlen] (err may be NULL). */
int npy_read(const void *bytes, size_t n, NpyArray *out, char *err, size_t errlen);

/* a's elements in C (row-major) order into dst (a->nbytes): a copy when a is
 * already in C order, else the transposition of its Fortran-order data. */
void npy_to_c_order(const NpyArray *a, void *dst);

/* A .npy file read into memory.  arr.data points into that buffer, valid
 * until npy_close; always aligned for the dtype and in C order (copied when
 * the header length leaves it misaligned, or the file is in Fortran order). */
typedef struct NpyFile {
    NpyArray arr;
    void *map; /* owned buffer (the whole file), or NULL */
    size_t size;
    void *copy; /* owned aligned copy of the data, or NULL */
} NpyFile;

/* Open and validate.  Messages start with the path ("x.npy: ...").  On
 * failure f is left closed. */
int npy_open(NpyFile *f, const char *path, char *err, size_t errlen);
void npy_close(NpyFile *f);

/* The .npy header numpy.save would write for (dtype, rank, dims), padded so
 * the data starts at a multiple of 64.  Writes up to cap bytes of it into buf
 * and returns its full length (call with cap 0 to size it), or a negative
 * NpyStatus. */
long npy_header(NpyDType dtype, int rank, const int64_t *dims, char *buf, size_t cap);

/* Write an array to path through a temp file renamed into place (no partial
 * file is ever visible; the temp file is removed on error).  data holds
 * product(dims) * itemsize bytes in C order. */
int npy_write_file(const char *path, NpyDType dtype, int rank, const int64_t *dims, const void *data, char *err,
                   size_t errlen);

#endif
