/* Unit tests of the IR and the literal machinery: hex floats against glibc's
 * %a, fp16 against the compiler's _Float16, every half through print and
 * parse, the op table decoder, the IR builders and list edits, and the
 * checker as a verifier of edited IR. */
#include "milc/mil.h"
#include "test.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

TEST(hexfloat_matches_glibc) {
    char mine[40], ref[64];
    double fixed[] = {1.0, 10.0, -0.5, 0.1, 65504.0, 1e300, -1e-300, 3.0, 0x1.fffffffffffffp+1023, 0x1p-1022};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
        snprintf(ref, sizeof ref, "%a", fixed[i]);
        CHECK_STR(mil_format_hexfloat(fixed[i], mine), ref);
    }
    for (int i = 0; i < 100000; i++) {
        uint64_t bits = next_rand();
        double v;
        memcpy(&v, &bits, sizeof v);
        if (!isnormal(v)) continue; /* glibc prints subnormals as 0x0.xxx; milc normalises */
        snprintf(ref, sizeof ref, "%a", v);
        mil_format_hexfloat(v, mine);
        if (strcmp(mine, ref) != 0) {
            CHECK_STR(mine, ref);
            break;
        }
        CHECK(strtod(mine, NULL) == v);
    }
    CHECK_STR(mil_format_hexfloat(0.0, mine), "0x0p+0");
    CHECK_STR(mil_format_hexfloat(-0.0, mine), "-0x0p+0");
    CHECK_STR(mil_format_hexfloat(INFINITY, mine), "inf");
    CHECK_STR(mil_format_hexfloat(-INFINITY, mine), "-inf");
    CHECK_STR(mil_format_hexfloat(NAN, mine), "nan");
    CHECK_STR(mil_format_hexfloat(0x1p-1074, mine), "0x1p-1074");
    CHECK(strtod("0x1p-1074", NULL) == 0x1p-1074);
}

TEST(half_conversion) {
    /* Every half survives half -> double -> half. */
    for (uint32_t h = 0; h < 65536; h++) {
        double v = ir_half_to_double((uint16_t)h);
        if (isnan(v)) continue;
        if (ir_double_to_half(v) != h) {
            CHECK_EQ_INT(ir_double_to_half(v), h);
            break;
        }
    }
    CHECK_EQ_INT(ir_double_to_half(65520.0), 0x7c00); /* ties to even: inf */
    CHECK_EQ_INT(ir_double_to_half(65519.99), 0x7bff);
    CHECK_EQ_INT(ir_double_to_half(0x1p-25), 0); /* tie between 0 and the smallest subnormal */
    CHECK_EQ_INT(ir_double_to_half(0x1.0001p-25), 1);
    CHECK_EQ_INT(ir_double_to_half(-0.0), 0x8000);
    CHECK_EQ_INT(ir_double_to_half(1.0 + 0x1p-11), 0x3c00);     /* tie to even (down) */
    CHECK_EQ_INT(ir_double_to_half(1.0 + 3 * 0x1p-11), 0x3c02); /* tie to even (up) */
#ifdef __FLT16_MAX__
    /* Independent reference: the compiler's own double -> _Float16 rounding. */
    for (int i = 0; i < 200000; i++) {
        uint64_t r = next_rand();
        double v = ldexp((double)(r >> 11) / 9007199254740992.0, (int)(r % 48) - 30) * ((r >> 7) & 1 ? -1 : 1);
        _Float16 f = (_Float16)v;
        uint16_t ref;
        memcpy(&ref, &f, 2);
        if (ir_double_to_half(v) != ref) {
            CHECK_EQ_INT(ir_double_to_half(v), ref);
            break;
        }
    }
#endif
}

/* Every finite half, as a literal, prints and parses back bit-exactly. */
TEST(every_half_round_trips) {
    size_t cap = 65536 * 24 + 512, n = 0;
    char *text = malloc(cap);
    int count = 0;
    for (uint32_t h = 0; h < 65536; h++)
        if (((h >> 10) & 0x1f) != 0x1f) count++;
    n += (size_t)sprintf(
        text,
        "program(1.3)\n{\n    func main<ios18>() {\n        tensor<fp16, [%d]> y = const()[val = tensor<fp16, [%d]>([",
        count, count);
    int k = 0;
    char buf[40];
    for (uint32_t h = 0; h < 65536; h++) {
        if (((h >> 10) & 0x1f) == 0x1f) continue;
        n += (size_t)sprintf(text + n, "%s%s", k++ ? ", " : "",
                             mil_format_hexfloat(ir_half_to_double((uint16_t)h), buf));
    }
    n += (size_t)sprintf(text + n, "])];\n    } -> (y);\n}\n");
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    IrProgram *p = mil_parse(&a, &d, "halves.mil", text, n);
    CHECK(p != NULL);
    if (p) {
        const IrLiteral *l = ir_value_const(p->funcs[0]->first->results[0]);
        k = 0;
        bool ok = true;
        for (uint32_t h = 0; h < 65536 && ok; h++) {
            if (((h >> 10) & 0x1f) == 0x1f) continue;
            ok = l->data.f16[k++] == h;
        }
        CHECK(ok);
        char *out = mil_print(p, NULL);
        CHECK(strstr(out, "0x1p-24, 0x1p-23, 0x1.8p-23") != NULL); /* subnormals print normalised */
        free(out);
    }
    arena_free(&a);
    diag_free(&d);
    free(text);
}

/* Decimal text rounds to the nearest half directly, not through a double
 * that may already sit on a tie between two halves. */
TEST(decimal_half_rounding) {
    /* 1 + 2^-11 is the tie between 1 and 1 + 2^-10; the texts lie a hair
     * above and below it but parse to that very double. */
    const char *src = "program(1.3)\n{\n    func main<ios18>() {\n"
                      "        tensor<fp16, [4]> y = const()[val = tensor<fp16, [4]>([1.00048828125000000000001, "
                      "1.00048828124999999999999, 1.00048828125, 1.00146484375])];\n    } -> (y);\n}\n";
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    IrProgram *p = mil_parse(&a, &d, "ties.mil", src, strlen(src));
    CHECK(p != NULL);
    if (p) {
        const IrLiteral *l = ir_value_const(p->funcs[0]->first->results[0]);
        CHECK_EQ_INT(l->data.f16[0], 0x3c01); /* above the tie: up */
        CHECK_EQ_INT(l->data.f16[1], 0x3c00); /* below: down */
        CHECK_EQ_INT(l->data.f16[2], 0x3c00); /* exactly the tie: to even */
        CHECK_EQ_INT(l->data.f16[3], 0x3c02); /* 1 + 3 * 2^-11, a tie: to even (up) */
    }
    arena_free(&a);
    diag_free(&d);
}

TEST(op_table) {
    MilArgSpec s[MIL_MAX_OP_ARGS];
    int n = mil_op_args(OP_LINEAR, s, MIL_MAX_OP_ARGS);
    CHECK_EQ_INT(n, 3);
    CHECK_STR(s[1].name, "weight");
    CHECK(s[1].is_const && !s[1].optional && s[1].group == 'T');
    CHECK(s[2].optional && strcmp(s[2].def, "zeros") == 0);
    MilArgSpec one;
    CHECK(mil_op_arg_spec(OP_CONCAT, "values", &one) && one.tuple);
    CHECK(mil_op_arg_spec(OP_SOFTMAX, "axis", &one) && one.dtype == IR_DT_INT32 && one.rank == 0 &&
          strcmp(one.def, "-1") == 0);
    CHECK(!mil_op_arg_spec(OP_SOFTMAX, "axes", &one));
    IrOpKind k;
    CHECK(mil_op_lookup("scaled_dot_product_attention", 28, &k) && k == OP_SCALED_DOT_PRODUCT_ATTENTION);
    CHECK(!mil_op_lookup("matmull", 7, &k));
    CHECK(mil_op_arg_spec(OP_LIST_READ, "ls", &one) && one.list && !one.any && one.dtype < 0);
    CHECK(mil_op_arg_spec(OP_MAKE_LIST, "elem_shape", &one) && one.any && one.tuple && one.is_const);
    CHECK(mil_op_arg_spec(OP_CROP_RESIZE, "roi", &one) && one.until == 17 && one.since == 15);
    CHECK(mil_op_arg_spec(OP_CROP_RESIZE, "boxes", &one) && one.until == 0 && one.since == 17);
    CHECK(mil_op_arg_spec(OP_CROP_RESIZE, "box_coordinate_mode", &one) && strcmp(one.def, "CORNERS_HEIGHT_FIRST") == 0);
    for (int i = 0; i < OP_COUNT; i++) { /* every signature decodes to known dtypes and groups */
        n = mil_op_args((IrOpKind)i, s, MIL_MAX_OP_ARGS);
        for (int j = 0; j < n; j++) CHECK(s[j].name[0] && (s[j].group || s[j].dtype >= 0 || s[j].any || s[j].list));
    }
}

/* A function's input and output names become file names in the runtime:
 * an IR built through the API with other names fails the check. */
TEST(io_names_are_identifiers) {
    static const char *const bad[] = {"../../x", "a/b", "", "x\x01", "9x"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
        for (int out = 0; out < 2; out++) {
            Arena a;
            arena_init(&a);
            IrProgram *p = ir_program_new(&a, 1, 3);
            IrFunction *f = ir_function_new(p, "main", "ios18");
            int64_t dims[] = {1, 4};
            IrValue *x = ir_function_add_input(f, out ? "x" : bad[k], ir_type_make(&a, IR_DT_FP32, 2, dims));
            IrOp *r = ir_op_new(f, OP_GELU, NULL, 1);
            ir_op_add_value(r, "x", x);
            ir_function_add_output(f, ir_op_set_result(r, 0, out ? bad[k] : "y", x->type));
            ir_op_append(f, r);
            DiagSink d;
            diag_init(&d);
            CHECK(!mil_check(p, NULL, &d));
            char *msg = diag_render(&d);
            CHECK(msg && strstr(msg, out ? "output name" : "input name") && strstr(msg, "is not an identifier"));
            free(msg);
            diag_free(&d);
            arena_free(&a);
        }
    CHECK(mil_is_identifier("x_1") && mil_is_identifier("_") && !mil_is_identifier("1x"));
}

/* Build a program through the API, the way the generator and passes do. */
TEST(build_print_edit) {
    Arena a;
    arena_init(&a);
    IrProgram *p = ir_program_new(&a, 1, 3);
    IrFunction *f = ir_function_new(p, "main", "ios18");
    int64_t dims[] = {1, 4};
    IrValue *x = ir_function_add_input(f, "x", ir_type_make(&a, IR_DT_FP16, 2, dims));
    IrOp *c = ir_op_new_const(f, "two", ir_literal_f64(&a, IR_DT_FP16, 2.0));
    ir_op_append(f, c);
    IrOp *m = ir_op_new(f, OP_MUL, NULL, 1);
    ir_op_add_value(m, "y", c->results[0]);
    ir_op_add_value(m, "x", x);
    IrValue *y = ir_op_set_result(m, 0, "y", x->type);
    ir_op_append(f, m);
    ir_function_add_output(f, y);
    DiagSink d;
    diag_init(&d);
    CHECK(mil_check(p, NULL, &d));
    char *s = mil_print(p, NULL);
    CHECK_STR(s, "program(1.3)\n{\n    func main<ios18>(tensor<fp16, [1, 4]> x) {\n"
                 "        fp16 two = const()[name = string(\"two\"), val = fp16(0x1p+1)];\n"
                 "        tensor<fp16, [1, 4]> y = mul(x = x, y = two)[name = string(\"y\")];\n"
                 "    } -> (y);\n}\n");
    free(s);
    ir_function_count_uses(f);
    CHECK_EQ_INT(x->uses, 1);
    CHECK_EQ_INT(y->uses, 1);
    int64_t ax = 0;
    double eps = 0;
    IrOp *sm = ir_op_new(f, OP_SOFTMAX, "sm", 1);
    ir_op_add_value(sm, "x", y);
    CHECK(ir_op_arg_i64(sm, "axis", &ax) && ax == -1); /* the table's default */
    IrOp *ln = ir_op_new(f, OP_LAYER_NORM, "ln", 1);
    CHECK(ir_op_arg_f64(ln, "epsilon", &eps) && eps == 1e-5);
    CHECK(!ir_op_arg_i64(ln, "axes", &ax));       /* "all" is not a number */
    CHECK(ir_op_arg_i64(m, "y", &ax) && ax == 2); /* through the const */
    /* Replace mul's use of the const with x itself, remove the const. */
    CHECK_EQ_INT(ir_value_replace_uses(f, c->results[0], x), 1);
    ir_op_remove(c);
    CHECK_EQ_INT(f->nops, 1);
    CHECK(f->first == m && f->last == m && !m->prev);
    /* Insert the const again, after its user: the verifier objects. */
    ir_op_insert_after(m, c);
    ir_op_arg(m, "y")->value = c->results[0];
    diag_free(&d);
    diag_init(&d);
    CHECK(!mil_check(p, NULL, &d));
    CHECK(d.count >= 1 && strcmp(d.items[0].msg, "'two' is used before its definition") == 0);
    ir_op_remove(c);
    ir_op_insert_before(m, c);
    diag_free(&d);
    diag_init(&d);
    CHECK(mil_check(p, NULL, &d));
    CHECK_EQ_INT(ir_value_numel(y), 4);
    diag_free(&d);
    arena_free(&a);
}

/* The text need not be NUL-terminated, and NUL bytes inside are errors. */
TEST(length_bounded_input) {
    const char *src = "program(1.3)\n{\n    func main<ios18>(fp16 x) {\n    } -> (x);\n}\nGARBAGE";
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    CHECK(mil_parse(&a, &d, "t.mil", src, strlen(src) - 7) != NULL);
    CHECK_EQ_INT(d.count, 0);
    char withnul[] = "program(1.3)\n{\0}\n";
    CHECK(mil_parse(&a, &d, "n.mil", withnul, sizeof withnul - 1) == NULL);
    CHECK(d.count == 1 && strcmp(d.items[0].msg, "unexpected byte 0x00") == 0);
    arena_free(&a);
    diag_free(&d);
}

/* list<list<list<... as deep as the input: an error at the first nested
 * list, not a recursion per level (the parser would overflow the stack). */
TEST(nested_list_types) {
    const char *head = "program(1.3)\n{\n    func main<ios17>(tensor<fp32, [2]> x) {\n        ";
    size_t depth = 200000, n = strlen(head) + 5 * depth + 1;
    char *src = malloc(n);
    strcpy(src, head);
    for (size_t i = 0; i < depth; i++) memcpy(src + strlen(head) + 5 * i, "list<", 5);
    src[n - 1] = 0;
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    CHECK(mil_parse(&a, &d, "deep.mil", src, n - 1) == NULL);
    CHECK(d.count >= 1 && strstr(d.items[0].msg, "a list holds tensors") != NULL);
    arena_free(&a);
    diag_free(&d);
    free(src);
}

/* mil_specialize: a flexible input takes the sizes given, and the checker
 * infers the shapes after it static, a declared '?' taking the inferred
 * size; a name that is no input, a wrong rank and a size that is not the
 * declared one are refused, each saying so. */
TEST(specialize_inputs) {
    const char *src = "program(1.3)\n{\n    func main<ios18>(tensor<fp32, [1, ?, 4]> x, tensor<fp32, [4]> m) {\n"
                      "        tensor<fp32, [1, ?, 4]> y = mul(x = x, y = m);\n"
                      "        tensor<fp32, [?, 4]> z = reshape(x = y, shape = tensor<int32, [2]>([-1, 4]));\n"
                      "    } -> (z);\n}\n";
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    IrProgram *p = mil_parse(&a, &d, "s.mil", src, strlen(src));
    CHECK(p != NULL);
    MilInputShape good[] = {{"x", 3, {1, 7, 4}}, {"m", 1, {4}}};
    CHECK(p && mil_specialize(p, NULL, good, 2, false, &d) && mil_check(p, &(MilCheckOptions){0}, &d));
    IrFunction *f = p ? ir_program_function(p, "main") : NULL;
    CHECK(f && f->inputs[0]->type.dims[1] == 7 && ir_value_numel(f->outputs[0]) == 28 &&
          f->outputs[0]->type.dims[0] == 7);
    CHECK_EQ_INT(d.count, 0);
    static const struct {
        MilInputShape s;
        bool only_flexible;
        const char *msg;
    } bad[] = {
        {{"w", 1, {4}}, false, "--shape w: function 'main' has no input 'w' (its inputs: 'x', 'm')"},
        {{"x", 2, {1, 7}}, false, "--shape x=[1, 7] does not fit input 'x' of shape [1, ?, 4]"},
        {{"x", 3, {2, 7, 4}}, false, "--shape x=[2, 7, 4] does not fit input 'x' of shape [1, ?, 4]"},
        {{"m", 1, {5}}, false, "--shape m=[5] does not fit input 'm' of shape [4]"},
        {{"m", 1, {5}}, true, NULL}, /* a static input: left to the binding */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        diag_free(&d);
        diag_init(&d);
        IrProgram *q = mil_parse(&a, &d, "s.mil", src, strlen(src));
        bool ok = q && mil_specialize(q, NULL, &bad[i].s, 1, bad[i].only_flexible, &d);
        CHECK(ok == (bad[i].msg == NULL));
        CHECK(!bad[i].msg || (d.count == 1 && strstr(d.items[0].msg, bad[i].msg) != NULL));
    }
    arena_free(&a);
    diag_free(&d);
}

TEST(literal_accessors) {
    Arena a;
    arena_init(&a);
    int64_t v[] = {3, -1, 7};
    IrLiteral *l = ir_literal_ints(&a, v, 3);
    int64_t out[3];
    double dout[3];
    CHECK_EQ_INT(ir_lit_to_i64(l, out, 3), 3);
    CHECK(out[1] == -1 && out[2] == 7);
    CHECK_EQ_INT(ir_lit_to_f64(l, dout, 3), 3);
    CHECK(dout[0] == 3.0);
    IrLiteral *h = ir_literal_f64(&a, IR_DT_FP16, 0.1);
    CHECK_EQ_INT(h->data.f16[0], 0x2e66);
    CHECK(ir_lit_f64(h, 0) == 0x1.998p-4);
    CHECK_STR(ir_lit_str(ir_literal_str(&a, "valid"), 0), "valid");
    CHECK(ir_lit_str(l, 0) == NULL);
    arena_free(&a);
}

int main(void) {
    RUN(hexfloat_matches_glibc);
    RUN(half_conversion);
    RUN(every_half_round_trips);
    RUN(decimal_half_rounding);
    RUN(op_table);
    RUN(build_print_edit);
    RUN(io_names_are_identifiers);
    RUN(length_bounded_input);
    RUN(literal_accessors);
    RUN(nested_list_types);
    RUN(specialize_inputs);
    TEST_MAIN_END();
}
