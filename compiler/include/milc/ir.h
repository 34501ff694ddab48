/* ir.h — the typed SSA IR: what the MIL parser builds, the checker types, the
 * passes rewrite, the printer writes back and the CPU lowering reads.
 *
 * Ownership: every object here (program, functions, ops, values, literals,
 * strings, dims) lives in the Arena the program was created with and dies with
 * it; nothing is freed piecemeal.  Pointers between objects are plain borrows.
 *
 * Shape of the IR
 *   IrProgram  version (major.minor), attributes (buildInfo dict), functions
 *   IrFunction name, opset, inputs (IrValue), a doubly linked op list, outputs
 *   IrOp       kind (from the op table, ops.h), named arguments, attributes
 *              (the statement's [name = ...] is op->name, not an attribute),
 *              results (IrValue)
 *   IrValue    one SSA value: name, type (dtype + dims, '?' = IR_DIM_DYNAMIC),
 *              the SrcLoc that defined it, its defining op (NULL for inputs)
 *   IrLiteral  typed exact data (fp16 as its bit pattern), a BLOBFILE weight
 *              reference, or a dict (buildInfo)
 *
 * Scalar dialect rule (printing): a program whose version is exactly 1.0 writes
 * every rank-0 type and literal in the tensor form (`tensor<int32, []>(-1)`);
 * every other version writes the bare-dtype form (`int32(-1)`).  Both forms
 * parse to the same IR (a rank-0 IrType), so the choice is the program's, not
 * each value's, and print -> parse -> print is the identity.
 */
#ifndef MILC_IR_H
#define MILC_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "milc/arena.h"
#include "milc/diag.h"
#include "milc/ops.h"

/* X(enum suffix, MIL name, bits per element) */
#define MILC_DTYPES(X)                                                                                                 \
    X(BOOL, "bool", 8)                                                                                                 \
    X(INT4, "int4", 4)                                                                                                 \
    X(INT8, "int8", 8)                                                                                                 \
    X(INT16, "int16", 16)                                                                                              \
    X(INT32, "int32", 32)                                                                                              \
    X(INT64, "int64", 64)                                                                                              \
    X(UINT1, "uint1", 1)                                                                                               \
    X(UINT2, "uint2", 2)                                                                                               \
    X(UINT3, "uint3", 3)                                                                                               \
    X(UINT4, "uint4", 4)                                                                                               \
    X(UINT6, "uint6", 6)                                                                                               \
    X(UINT8, "uint8", 8)                                                                                               \
    X(UINT16, "uint16", 16)                                                                                            \
    X(UINT32, "uint32", 32)                                                                                            \
    X(UINT64, "uint64", 64)                                                                                            \
    X(FP16, "fp16", 16)                                                                                                \
    X(FP32, "fp32", 32)                                                                                                \
    X(FP64, "fp64", 64)                                                                                                \
    X(STRING, "string", 0)

typedef enum IrDType {
#define X(e, n, b) IR_DT_##e,
    MILC_DTYPES(X)
#undef X
        IR_DT_COUNT
} IrDType;

const char *ir_dtype_name(IrDType t);
/* Look a dtype up by its MIL name (not NUL-terminated); false if unknown. */
bool ir_dtype_from_name(const char *s, size_t len, IrDType *out);
unsigned ir_dtype_bits(IrDType t); /* 0 for string */
bool ir_dtype_is_float(IrDType t); /* fp16 fp32 fp64 */
bool ir_dtype_is_int(IrDType t);   /* every signed and unsigned integer type */
bool ir_dtype_is_unsigned(IrDType t);
/* Representable integer range of an integer dtype (uint64: hi = INT64_MAX,
 * its larger values are carried as their bit pattern; see IrLiteral). */
void ir_dtype_int_range(IrDType t, int64_t *lo, int64_t *hi);

enum { IR_DIM_DYNAMIC = -1 }; /* a '?' dimension */

/* A tensor type.  rank 0 is a scalar. dims[rank] (arena; NULL when rank 0).
 * A list (list<tensor<...>, N>, what make_list builds) is its element type
 * with list set and its length (IR_DIM_DYNAMIC: grows at run time). */
typedef struct IrType {
    IrDType dtype;
    int rank;
    int64_t *dims;
    bool state; /* state<tensor<...>>: a mutable state (ios18), read by read_state */
    bool list;  /* list<tensor<...>, list_len>: the list ops' value */
    int64_t list_len;
} IrType;

bool ir_type_equal(const IrType *a, const IrType *b);
/* Element count, or -1 when a dimension is dynamic (or the count overflows). */
int64_t ir_type_numel(const IrType *t);
/* A copy of t whose dims live in a. */
IrType ir_type_copy(Arena *a, const IrType *t);
IrType ir_type_make(Arena *a, IrDType dt, int rank, const int64_t *dims);
/* "tensor<fp16, [1, ?, 4]>" (always the tensor form; states and lists
 * wrapped: "list<tensor<fp16, [2]>, ?>") into buf; returns buf. */
char *ir_type_format(const IrType *t, char *buf, size_t size);
/* "[1, ?, 4]" into buf; returns buf. */
char *ir_dims_format(const int64_t *dims, int rank, char *buf, size_t size);

typedef enum IrLitKind {
    IR_LIT_DATA,     /* elements in data, count = numel(type) */
    IR_LIT_BLOBFILE, /* weights in a MILBlob file: blob_path, blob_offset */
    IR_LIT_DICT,     /* keys[i] -> values[i], both rank-1 IR_LIT_DATA literals */
} IrLitKind;

/* A literal, exact as written.  Element storage by dtype:
 *   bool                 data.b   (uint8_t 0/1)
 *   every integer type   data.i   (int64_t; uint64 holds its bit pattern)
 *   fp16                 data.f16 (the IEEE half bit pattern, so hex floats
 *                                  round-trip bit-exactly)
 *   fp32 / fp64          data.f32 / data.f64
 *   string               data.s   (NUL-terminated, arena)
 * Elements are in row-major order. */
typedef struct IrLiteral {
    IrLitKind kind;
    IrType type; /* DICT: dtype = value dtype, rank 1, dims[0] = pairs */
    SrcLoc loc;
    size_t count;
    union {
        uint8_t *b;
        int64_t *i;
        uint16_t *f16;
        float *f32;
        double *f64;
        const char **s;
        void *raw;
    } data;
    const char *blob_path;  /* BLOBFILE: as written, e.g. "@model_path/weights/weight.bin" */
    uint64_t blob_offset;   /* BLOBFILE: offset of the 64-byte record (MIL.md) */
    struct IrLiteral *keys; /* DICT */
    struct IrLiteral *values;
} IrLiteral;

/* A DATA literal of type t (dims copied) with zeroed storage for numel(t)
 * elements; t must have no dynamic dimension. */
IrLiteral *ir_literal_new(Arena *a, const IrType *t);
/* Convenience constructors for scalars and int32 vectors. */
IrLiteral *ir_literal_i64(Arena *a, IrDType dt, int64_t v);
IrLiteral *ir_literal_f64(Arena *a, IrDType dt, double v); /* fp16 rounds to nearest even */
IrLiteral *ir_literal_bool(Arena *a, bool v);
IrLiteral *ir_literal_str(Arena *a, const char *s);
IrLiteral *ir_literal_ints(Arena *a, const int64_t *v, int n); /* int32[n] */
/* Element i converted: integers, bools and floats to int64 (floats truncate)
 * or double; strings give 0.  i < count; DATA literals only. */
int64_t ir_lit_i64(const IrLiteral *l, size_t i);
double ir_lit_f64(const IrLiteral *l, size_t i);
/* Element i of a string literal, NULL for any other dtype. */
const char *ir_lit_str(const IrLiteral *l, size_t i);
/* Copy up to max elements as int64 (or double) into out; returns the element
 * count, or -1 if l is not a DATA literal of a numeric or bool dtype. */
long ir_lit_to_i64(const IrLiteral *l, int64_t *out, size_t max);
long ir_lit_to_f64(const IrLiteral *l, double *out, size_t max);

/* IEEE binary16 <-> double; to-half rounds to nearest even. */
double ir_half_to_double(uint16_t h);
uint16_t ir_double_to_half(double v);

typedef struct IrOp IrOp;
typedef struct IrBlock IrBlock;
typedef struct IrFunction IrFunction;
typedef struct IrProgram IrProgram;

typedef struct IrValue {
    const char *name;
    IrType type;
    SrcLoc loc;       /* where the value was defined (its name in the source) */
    IrOp *def;        /* NULL for a function input */
    int result_index; /* which result of def */
    int uses;         /* set by ir_function_count_uses(); stale after edits */
    IrBlock *block;   /* the nested block defining it (an input or op result there); NULL at function level */
    void *aux;        /* free for a pass */
} IrValue;

typedef enum IrArgKind {
    IR_ARG_VALUE,   /* x = v */
    IR_ARG_TUPLE,   /* values = (a, b, c) */
    IR_ARG_LITERAL, /* axis = int32(0) */
} IrArgKind;

typedef struct IrArg {
    const char *name;
    SrcLoc loc; /* of the argument name */
    IrArgKind kind;
    IrValue *value;  /* VALUE */
    IrValue **items; /* TUPLE: nitems values */
    int nitems;
    IrLiteral *lit; /* LITERAL */
} IrArg;

typedef struct IrAttr {
    const char *name;
    SrcLoc loc;
    IrLiteral *lit;
} IrAttr;

struct IrOp {
    IrOpKind kind;
    const char *name; /* the statement's [name = string("...")] */
    SrcLoc loc;       /* of the op name */
    IrArg *args;      /* nargs, in source order (the printer sorts) */
    int nargs, cap_args;
    IrAttr *attrs; /* nattrs, other than name; a const's val is here */
    int nattrs, cap_attrs;
    IrValue **results;
    int nresults;
    IrOp *prev, *next; /* in fn's op list, or block's when nested */
    IrFunction *fn;
    IrBlock *block;   /* the nested block holding the op; NULL at function level */
    IrBlock **blocks; /* nested blocks: cond's two branches, while_loop's cond and body */
    int nblocks;
    void *aux; /* free for a pass */
};

/* A nested block (control flow): inputs of its own (while_loop's loop
 * variables), ops, outputs.  Its ops see the values of the enclosing blocks
 * and function; its values are not seen outside it. */
struct IrBlock {
    SrcLoc loc;
    IrOp *parent;
    IrValue **inputs;
    int ninputs, cap_inputs;
    IrOp *first, *last;
    int nops;
    IrValue **outputs;
    SrcLoc *output_locs;
    int noutputs, cap_outputs;
};

struct IrFunction {
    const char *name;
    const char *opset;     /* "ios18" (CoreML8 is read as ios18) */
    int opset_version;     /* 15..18, 0 if the opset is unknown */
    const char *attr_text; /* "[FlexibleShapeInformation = ...]" as written, or NULL */
    SrcLoc loc;
    IrValue **inputs;
    int ninputs, cap_inputs;
    IrOp *first, *last; /* doubly linked, in program order */
    int nops;
    IrValue **outputs;
    SrcLoc *output_locs;
    int noutputs, cap_outputs;
    IrProgram *prog;
};

struct IrProgram {
    int major, minor; /* program(major.minor) */
    IrAttr *attrs;    /* program attributes, e.g. buildInfo (a DICT literal) */
    int nattrs, cap_attrs;
    IrFunction **funcs;
    int nfuncs, cap_funcs;
    const char *file; /* name used in SrcLocs (owned by the DiagSink or caller) */
    Arena *arena;     /* where everything of this program is allocated */
};

/* True when rank-0 values print in the tensor form (program version 1.0). */
bool ir_program_tensor_scalars(const IrProgram *p);

/* ---- building (used by the parser, the generator and passes) ---- */
IrProgram *ir_program_new(Arena *a, int major, int minor);
void ir_program_set_attr(IrProgram *p, const char *name, IrLiteral *lit);
IrFunction *ir_function_new(IrProgram *p, const char *name, const char *opset);
IrFunction *ir_program_function(const IrProgram *p, const char *name); /* NULL if none */
/* The function a compile or run means: the one named, else "main", else a
 * program's only function (a multifunction package names its own; a single
 * function may be called anything).  NULL if none. */
IrFunction *ir_program_entry(const IrProgram *p, const char *name);
IrValue *ir_function_add_input(IrFunction *f, const char *name, IrType type);
void ir_function_add_output(IrFunction *f, IrValue *v);
/* A detached op with nresults result values (names and types set by the
 * caller through ir_op_set_result).  name is copied. */
IrOp *ir_op_new(IrFunction *f, IrOpKind kind, const char *name, int nresults);
IrValue *ir_op_set_result(IrOp *op, int i, const char *name, IrType type);
IrArg *ir_op_add_value(IrOp *op, const char *name, IrValue *v);
IrArg *ir_op_add_literal(IrOp *op, const char *name, IrLiteral *lit);
IrArg *ir_op_add_tuple(IrOp *op, const char *name, IrValue **items, int n);
IrAttr *ir_op_set_attr(IrOp *op, const char *name, IrLiteral *lit); /* replaces */
/* A const op defining name with value lit, result typed lit->type. */
IrOp *ir_op_new_const(IrFunction *f, const char *name, IrLiteral *lit);

/* A new empty nested block of op (appended to op->blocks). */
IrBlock *ir_op_add_block(IrOp *op);
IrValue *ir_block_add_input(IrBlock *b, const char *name, IrType type);
void ir_block_add_output(IrBlock *b, IrValue *v, SrcLoc loc);
void ir_block_append(IrBlock *b, IrOp *op);

/* ---- the op list ---- */
void ir_op_append(IrFunction *f, IrOp *op);
void ir_op_insert_before(IrOp *pos, IrOp *op);
void ir_op_insert_after(IrOp *pos, IrOp *op);
/* Unlink op from its function (its memory stays in the arena). */
void ir_op_remove(IrOp *op);
#define IR_FOR_EACH_OP(op, fn) for (IrOp *op = (fn)->first; op; op = op->next)

/* ---- queries ---- */
/* The argument called name, or NULL. */
IrArg *ir_op_arg(const IrOp *op, const char *name);
IrAttr *ir_op_attr(const IrOp *op, const char *name);
/* The constant data behind argument name: an inline literal, or the val of
 * the const op defining the value.  NULL if absent or not constant. */
const IrLiteral *ir_op_arg_const(const IrOp *op, const char *name);
/* The const val literal if v is defined by a const op, else NULL. */
const IrLiteral *ir_value_const(const IrValue *v);
/* Scalar or vector argument values with the op table's default when the
 * argument is absent.  false if the argument is present but not constant or
 * not numeric, or absent with no numeric default. */
bool ir_op_arg_i64(const IrOp *op, const char *name, int64_t *out);
bool ir_op_arg_f64(const IrOp *op, const char *name, double *out);
/* Element count of a value's type, -1 if dynamic. */
int64_t ir_value_numel(const IrValue *v);
/* Recount every value's uses (arguments, tuple items, function outputs;
 * in nested blocks too, block outputs counting as uses). */
void ir_function_count_uses(IrFunction *f);
/* Point every use of old (arguments, tuples, outputs) at new; returns uses changed. */
int ir_value_replace_uses(IrFunction *f, IrValue *old_v, IrValue *new_v);

#endif
