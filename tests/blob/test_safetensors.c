/* test_safetensors.c — a hand-written (numpy) model read back tensor by
 * tensor, and one malformed file per rule with its exact diagnostic.
 * Run as: test_safetensors PYTHON GEN_SAFETENSORS_PY */
#include "milc/half.h"
#include "milc/safetensors.h"
#include "test.h"

#include <stdint.h>

static char dir[64];

static const char *at(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

TEST(valid_model) {
    DiagSink d;
    diag_init(&d);
    SafetensorsFile f;
    CHECK_EQ_INT(safetensors_open(&f, at("model.safetensors"), &d), 0);
    CHECK_EQ_INT(d.errors, 0);
    CHECK_EQ_INT(f.count, 7);
    CHECK_STR(safetensors_metadata(&f, "format"), "pt");
    CHECK_STR(safetensors_metadata(&f, "note"), "milc test");
    CHECK(safetensors_metadata(&f, "nope") == NULL);
    CHECK(safetensors_find(&f, "__metadata__") == NULL);
    CHECK(safetensors_find(&f, "wt") == NULL);

    const SafetensorsTensor *t = safetensors_find(&f, "wte");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->dtype, ST_DTYPE_F16);
        CHECK_EQ_INT(t->rank, 2);
        CHECK_EQ_INT(t->dims[0], 4);
        CHECK_EQ_INT(t->dims[1], 3);
        CHECK_EQ_INT(t->count, 12);
        CHECK_EQ_INT(t->nbytes, 24);
        for (int i = 0; i < 12; i++) {
            uint16_t h;
            memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
            CHECK(half_to_float(h) == (float)i / 4);
        }
    }
    t = safetensors_find(&f, "ln.bias");
    CHECK(t && t->dtype == ST_DTYPE_F32 && t->rank == 1 && t->dims[0] == 3);
    if (t) {
        float v[3];
        memcpy(v, t->data, sizeof v);
        CHECK(v[0] == 0.5f && v[1] == -1.0f && v[2] == 2.0f);
        CHECK_EQ_INT(t->offset % 8, 0); /* header padded to 8 */
        CHECK(t->aligned);
    }
    t = safetensors_find(&f, "ids");
    CHECK(t != NULL);
    if (t) {
        int32_t v[4];
        memcpy(v, t->data, sizeof v);
        CHECK(v[0] == 1 && v[1] == -2 && v[2] == 3 && v[3] == INT32_MAX);
    }
    t = safetensors_find(&f, "scalar");
    CHECK(t != NULL);
    if (t) {
        double x;
        memcpy(&x, t->data, 8);
        CHECK(t->rank == 0 && t->count == 1 && x == 3.25);
    }
    t = safetensors_find(&f, "empty");
    CHECK(t && t->dtype == ST_DTYPE_BF16 && t->count == 0 && t->nbytes == 0 && t->dims[1] == 5);
    t = safetensors_find(&f, "mask");
    CHECK(t && t->dtype == ST_DTYPE_BOOL && memcmp(t->data, "\1\0\1", 3) == 0);
    t = safetensors_find(&f, "h.0.attn.c_attn.weight");
    CHECK(t != NULL);
    if (t) {
        float v[6];
        memcpy(v, t->data, sizeof v);
        CHECK(v[0] == -1 && v[5] == 4);
        /* The data section ends exactly with the last tensor. */
        CHECK_EQ_INT(t->offset + t->nbytes, f.size);
    }
    /* Sorted by name for lookup. */
    for (size_t i = 1; i < f.count; i++) CHECK(strcmp(f.tensors[i - 1].name, f.tensors[i].name) < 0);
    safetensors_close(&f);

    CHECK_EQ_INT(safetensors_open(&f, at("empty.safetensors"), &d), 0);
    CHECK_EQ_INT(f.count, 0);
    safetensors_close(&f);
    diag_free(&d);
}

static void expect(const char *file, const char *msg) {
    DiagSink d;
    diag_init(&d);
    SafetensorsFile f;
    CHECK_EQ_INT(safetensors_open(&f, at(file), &d), -1);
    CHECK_EQ_INT(d.errors, 1);
    CHECK(f.tensors == NULL && f.bytes == NULL);
    char *out = diag_render(&d), want[512];
    snprintf(want, sizeof want, "%s: error: %s\n", at(file), msg);
    CHECK_STR(out, want);
    free(out);
    diag_free(&d);
}

TEST(malformed) {
    expect("short.safetensors", "too short for a safetensors file (5 bytes)");
    expect("hdr_past_end.safetensors", "header length 1000 runs past the end of the file (20 bytes)");
    expect("hdr_huge.safetensors", "header length 1099511627776 exceeds the 100000000-byte limit");
    expect("bad_json.safetensors", "offset 19: header JSON: ']' expected near '}'");
    expect("not_object.safetensors", "header is not a JSON object");
    expect("dup_key.safetensors", "offset 20: header JSON: duplicate object key near '\"w\"'");
    expect("bad_dtype.safetensors", "tensor 'w': unknown dtype 'F17'");
    expect("neg_shape.safetensors", "tensor 'w': 'shape' must hold non-negative integers");
    expect("float_shape.safetensors", "tensor 'w': 'shape' must hold non-negative integers");
    expect("out_of_range.safetensors", "tensor 'w': data_offsets [0, 100] outside the data section (24 bytes)");
    expect("reversed.safetensors", "tensor 'w': data_offsets [8, 0] outside the data section (8 bytes)");
    expect("size_mismatch.safetensors", "tensor 'w': data_offsets [0, 20] hold 20 bytes; shape [2, 3] of F32 needs 24");
    expect("overlap.safetensors", "tensors 'a' and 'b' overlap in the data section");
    expect("gap.safetensors", "tensor 'b': 4 unused bytes in the data section before it");
    expect("tail.safetensors", "4 unused bytes at the end of the data section");
    expect("missing_field.safetensors", "tensor 'w': missing 'data_offsets'");
    expect("extra_field.safetensors", "tensor 'w': unknown field 'foo'");
    expect("bad_meta.safetensors", "'__metadata__' value of 'a' is not a string");
    expect("rank17.safetensors", "tensor 'w': 'shape' has 17 dimensions (at most 16)");
    expect("not_entry.safetensors", "tensor 'w': entry is not an object");
    expect("overflow.safetensors", "tensor 'w': 'shape' has too many elements");
    expect("bad_offsets.safetensors", "tensor 'w': 'data_offsets' must be [begin, end] with non-negative integers");
    expect("missing.safetensors", "cannot open: No such file or directory");
}

/* Every truncation of a valid file is rejected without reading past it. */
TEST(truncations) {
    FILE *fp = fopen(at("model.safetensors"), "rb");
    CHECK(fp != NULL);
    if (!fp) return;
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    for (size_t k = 0; k < n; k++) {
        uint8_t *copy = malloc(k ? k : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, buf, k);
        DiagSink d;
        diag_init(&d);
        SafetensorsFile f;
        CHECK_EQ_INT(safetensors_parse(&f, "t", copy, k, &d), -1);
        CHECK_EQ_INT(d.errors, 1);
        diag_free(&d);
        free(copy);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    snprintf(dir, sizeof dir, "/tmp/milc-test-st-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s %s", argv[1], argv[2], dir);
    if (system(cmd) != 0) return fprintf(stderr, "generator failed: %s\n", cmd), 2;
    RUN(valid_model);
    RUN(malformed);
    RUN(truncations);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 2;
    TEST_MAIN_END();
}
