/* safetensors.c — a strict .safetensors reader (see milc/safetensors.h).
 * jansson parses the JSON header; everything it describes is checked against
 * the data section before a pointer into the file is handed out. */
#include "milc/safetensors.h"
#include "readfile.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_DTYPE_COUNT] = {
    [ST_DTYPE_BOOL] = {"BOOL", 1},       [ST_DTYPE_U8] = {"U8", 1},           [ST_DTYPE_I8] = {"I8", 1},
    [ST_DTYPE_F8_E5M2] = {"F8_E5M2", 1}, [ST_DTYPE_F8_E4M3] = {"F8_E4M3", 1}, [ST_DTYPE_I16] = {"I16", 2},
    [ST_DTYPE_U16] = {"U16", 2},         [ST_DTYPE_F16] = {"F16", 2},         [ST_DTYPE_BF16] = {"BF16", 2},
    [ST_DTYPE_I32] = {"I32", 4},         [ST_DTYPE_U32] = {"U32", 4},         [ST_DTYPE_F32] = {"F32", 4},
    [ST_DTYPE_I64] = {"I64", 8},         [ST_DTYPE_U64] = {"U64", 8},         [ST_DTYPE_F64] = {"F64", 8},
};

const char *safetensors_dtype_name(SafetensorsDType t) { return (unsigned)t < ST_DTYPE_COUNT ? dtypes[t].name : NULL; }

size_t safetensors_dtype_size(SafetensorsDType t) { return (unsigned)t < ST_DTYPE_COUNT ? dtypes[t].size : 0; }

/* Non-negative JSON integer, or -1. */
static int64_t json_count(const json_t *v) {
    if (!json_is_integer(v)) return -1;
    json_int_t i = json_integer_value(v);
    return i < 0 ? -1 : (int64_t)i;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const SafetensorsTensor *)a)->name, ((const SafetensorsTensor *)b)->name);
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const SafetensorsTensor *x = *(SafetensorsTensor *const *)a, *y = *(SafetensorsTensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1; /* empty tensors first */
    return strcmp(x->name, y->name);
}

typedef struct MetaPair {
    const char *key, *value;
} MetaPair;

static int cmp_meta(const void *a, const void *b) {
    return strcmp(((const MetaPair *)a)->key, ((const MetaPair *)b)->key);
}

/* Check one tensor entry and fill t (name already set).  data_size is the
 * data section's length.  On failure writes why. */
static bool check_tensor(SafetensorsTensor *t, json_t *v, const uint8_t *data, size_t data_at, size_t data_size,
                         char *why, size_t whylen) {
    if (!json_is_object(v)) {
        snprintf(why, whylen, "entry is not an object");
        return false;
    }
    const char *key;
    json_t *field;
    json_object_foreach(v, key, field) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets")) {
            snprintf(why, whylen, "unknown field '%s'", key);
            return false;
        }
    }
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!jd || !js || !jo) {
        snprintf(why, whylen, "missing '%s'", !jd ? "dtype" : !js ? "shape" : "data_offsets");
        return false;
    }
    if (!json_is_string(jd)) {
        snprintf(why, whylen, "'dtype' is not a string");
        return false;
    }
    int dt = -1;
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (strcmp(json_string_value(jd), dtypes[i].name) == 0) dt = i;
    if (dt < 0) {
        snprintf(why, whylen, "unknown dtype '%.32s'", json_string_value(jd));
        return false;
    }
    t->dtype = (SafetensorsDType)dt;
    if (!json_is_array(js)) {
        snprintf(why, whylen, "'shape' is not an array");
        return false;
    }
    if (json_array_size(js) > ST_MAX_RANK) {
        snprintf(why, whylen, "'shape' has %zu dimensions (at most %d)", json_array_size(js), ST_MAX_RANK);
        return false;
    }
    t->rank = (int)json_array_size(js);
    size_t count = 1;
    bool overflow = false, zero = false;
    for (int i = 0; i < t->rank; i++) {
        int64_t d = json_count(json_array_get(js, (size_t)i));
        if (d < 0) {
            snprintf(why, whylen, "'shape' must hold non-negative integers");
            return false;
        }
        t->dims[i] = d;
        if (d == 0)
            zero = true;
        else if ((uint64_t)d > SIZE_MAX / count)
            overflow = true;
        else
            count *= (size_t)d;
    }
    size_t item = dtypes[dt].size;
    if (zero)
        count = 0;
    else if (overflow || count > SIZE_MAX / item) {
        snprintf(why, whylen, "'shape' has too many elements");
        return false;
    }
    t->count = count;
    t->nbytes = count * item;
    int64_t begin = -1, end = -1;
    if (json_is_array(jo) && json_array_size(jo) == 2) {
        begin = json_count(json_array_get(jo, 0));
        end = json_count(json_array_get(jo, 1));
    }
    if (begin < 0 || end < 0) {
        snprintf(why, whylen, "'data_offsets' must be [begin, end] with non-negative integers");
        return false;
    }
    if (begin > end || (uint64_t)end > data_size) {
        snprintf(why, whylen, "data_offsets [%" PRId64 ", %" PRId64 "] outside the data section (%zu bytes)", begin,
                 end, data_size);
        return false;
    }
    if ((uint64_t)(end - begin) != t->nbytes) {
        char shape[ST_MAX_RANK * 22 + 4] = "[";
        size_t k = 1;
        for (int i = 0; i < t->rank; i++)
            k += (size_t)snprintf(shape + k, sizeof shape - k, i ? ", %" PRId64 : "%" PRId64, t->dims[i]);
        snprintf(shape + k, sizeof shape - k, "]");
        snprintf(why, whylen,
                 "data_offsets [%" PRId64 ", %" PRId64 "] hold %" PRId64 " bytes; shape %s of %s needs %zu", begin, end,
                 end - begin, shape, dtypes[dt].name, t->nbytes);
        return false;
    }
    t->offset = data_at + (uint64_t)begin;
    t->data = data ? data + begin : NULL;
    t->aligned = data && (uintptr_t)t->data % item == 0;
    return true;
}

/* bytes holds the whole file, or (whole false) its length field and header
 * only: then the tensors get no data pointer.  size is the file's. */
static int parse(SafetensorsFile *f, const char *name, const void *bytes, bool whole, size_t size, DiagSink *d) {
    memset(f, 0, sizeof *f);
    SrcLoc loc = {name, 0, 0};
    const uint8_t *p = bytes;
    if (size < 8) {
        diag_error(d, loc, "too short for a safetensors file (%zu bytes)", size);
        return -1;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | p[i];
    if (n > ST_MAX_HEADER) {
        diag_error(d, loc, "header length %" PRIu64 " exceeds the %d-byte limit", n, ST_MAX_HEADER);
        return -1;
    }
    if (n > size - 8) {
        diag_error(d, loc, "header length %" PRIu64 " runs past the end of the file (%zu bytes)", n, size);
        return -1;
    }
    json_error_t jerr;
    json_t *root = json_loadb((const char *)p + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        /* jansson's position is just past the offending token; point into it. */
        diag_error(d, loc, "offset %zu: header JSON: %s",
                   (size_t)8 + (size_t)(jerr.position > 0 ? jerr.position - 1 : 0), jerr.text);
        return -1;
    }
    int rc = -1;
    SafetensorsTensor **by_offset = NULL;
    MetaPair *meta = NULL;
    if (!json_is_object(root)) {
        diag_error(d, loc, "header is not a JSON object");
        goto out;
    }
    const uint8_t *data = whole ? p + 8 + n : NULL;
    size_t data_at = 8 + (size_t)n, data_size = size - data_at;

    /* One allocation for every string, so close is two frees. */
    size_t strbytes = 0, ntensors = 0, nmeta = 0;
    const char *key;
    json_t *v;
    json_t *jmeta = json_object_get(root, "__metadata__");
    json_object_foreach(root, key, v) {
        strbytes += strlen(key) + 1;
        if (v != jmeta) ntensors++;
    }
    if (jmeta) {
        if (!json_is_object(jmeta)) {
            diag_error(d, loc, "'__metadata__' is not an object");
            goto out;
        }
        json_object_foreach(jmeta, key, v) {
            if (!json_is_string(v)) {
                diag_error(d, loc, "'__metadata__' value of '%s' is not a string", key);
                goto out;
            }
            strbytes += strlen(key) + json_string_length(v) + 2;
            nmeta++;
        }
    }
    f->strings = malloc(strbytes ? strbytes : 1);
    f->tensors = calloc(ntensors ? ntensors : 1, sizeof *f->tensors);
    by_offset = malloc((ntensors ? ntensors : 1) * sizeof *by_offset);
    meta = malloc((nmeta ? nmeta : 1) * sizeof *meta);
    f->meta = malloc((nmeta ? 2 * nmeta : 1) * sizeof *f->meta);
    if (!f->strings || !f->tensors || !by_offset || !meta || !f->meta) {
        diag_error(d, loc, "out of memory reading the header");
        goto out;
    }
    char *s = f->strings;
    char why[256];
    json_object_foreach(root, key, v) {
        if (v == jmeta) continue;
        SafetensorsTensor *t = &f->tensors[f->count];
        size_t len = strlen(key) + 1;
        t->name = memcpy(s, key, len);
        s += len;
        if (!check_tensor(t, v, data, data_at, data_size, why, sizeof why)) {
            diag_error(d, loc, "tensor '%s': %s", key, why);
            goto out;
        }
        by_offset[f->count++] = t;
    }
    if (jmeta) {
        json_object_foreach(jmeta, key, v) {
            size_t kl = strlen(key) + 1, vl = json_string_length(v) + 1;
            meta[f->meta_count].key = memcpy(s, key, kl);
            s += kl;
            /* jansson holds \u0000 out (no JSON_ALLOW_NUL): the value is one C string. */
            meta[f->meta_count].value = memcpy(s, json_string_value(v), vl);
            s += vl;
            f->meta_count++;
        }
    }

    /* The tensors must tile the data section exactly: no overlap, which
     * would alias two weights, and no gaps or tail, as the reference reader. */
    qsort(by_offset, f->count, sizeof *by_offset, cmp_tensor_offset);
    uint64_t at = data_at;
    for (size_t i = 0; i < f->count; i++) {
        const SafetensorsTensor *t = by_offset[i];
        if (t->offset < at) {
            diag_error(d, loc, "tensors '%s' and '%s' overlap in the data section", by_offset[i - 1]->name, t->name);
            goto out;
        }
        if (t->offset > at) {
            diag_error(d, loc, "tensor '%s': %" PRIu64 " unused bytes in the data section before it", t->name,
                       t->offset - at);
            goto out;
        }
        at = t->offset + t->nbytes;
    }
    if (at != size) {
        diag_error(d, loc, "%" PRIu64 " unused bytes at the end of the data section", (uint64_t)size - at);
        goto out;
    }
    qsort(f->tensors, f->count, sizeof *f->tensors, cmp_tensor_name);
    qsort(meta, f->meta_count, sizeof *meta, cmp_meta);
    for (size_t i = 0; i < f->meta_count; i++) {
        f->meta[2 * i] = meta[i].key;
        f->meta[2 * i + 1] = meta[i].value;
    }
    f->name = name;
    f->bytes = data ? p : NULL;
    f->size = size;
    rc = 0;
out:
    json_decref(root);
    free(by_offset);
    free(meta);
    if (rc != 0) safetensors_close(f);
    return rc;
}

int safetensors_parse(SafetensorsFile *f, const char *name, const void *bytes, size_t size, DiagSink *d) {
    return parse(f, name, bytes, true, size, d);
}

/* All n bytes at off, or an error: a file that ends early shrank since its
 * size was taken. */
static int pread_all(int fd, void *buf, size_t n, uint64_t off, SrcLoc loc, DiagSink *d) {
    for (size_t got = 0; got < n;) {
        ssize_t k = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            diag_syserror(d, loc, "read error: %s", strerror(errno));
            return -1;
        }
        if (k == 0) {
            diag_syserror(d, loc, "the file shrank while it was read");
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}

int safetensors_read_header(SafetensorsFile *f, const char *name, int fd, uint64_t size, DiagSink *d) {
    memset(f, 0, sizeof *f);
    SrcLoc loc = {name, 0, 0};
    uint8_t le[8] = {0};
    if (size > SIZE_MAX / 2) {
        diag_error(d, loc, "too large (%" PRIu64 " bytes)", size);
        return -1;
    }
    if (size < 8) return parse(f, name, le, false, (size_t)size, d); /* its message; le is not read */
    if (pread_all(fd, le, 8, 0, loc, d) != 0) return -1;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | le[i];
    if (n > ST_MAX_HEADER || n > size - 8) return parse(f, name, le, false, (size_t)size, d); /* its message */
    uint8_t *head = malloc((size_t)n + 8);
    if (!head) {
        diag_syserror(d, loc, "out of memory reading the header");
        return -1;
    }
    int rc = pread_all(fd, head, (size_t)n + 8, 0, loc, d);
    if (rc == 0) rc = parse(f, name, head, false, (size_t)size, d);
    free(head); /* the names were copied out */
    return rc;
}

int safetensors_open(SafetensorsFile *f, const char *path, DiagSink *d) {
    memset(f, 0, sizeof *f);
    const char *name = diag_intern(d, path);
    SrcLoc loc = {name, 0, 0};
    void *map;
    size_t size;
    if (blob_read_file(path, loc, d, &map, &size) != 0) return -1;
    if (safetensors_parse(f, name, map, size, d) != 0) {
        free(map);
        return -1;
    }
    f->mapped = true; /* the buffer is ours to free */
    return 0;
}

void safetensors_close(SafetensorsFile *f) {
    if (f->mapped) free((void *)f->bytes);
    free(f->tensors);
    free(f->meta);
    free(f->strings);
    memset(f, 0, sizeof *f);
}

const SafetensorsTensor *safetensors_find(const SafetensorsFile *f, const char *name) {
    size_t lo = 0, hi = f->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return &f->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *safetensors_metadata(const SafetensorsFile *f, const char *key) {
    size_t lo = 0, hi = f->meta_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->meta[2 * mid], key);
        if (c == 0) return f->meta[2 * mid + 1];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
