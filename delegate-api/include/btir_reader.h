/*
 * btir_reader.h -- the public, bounds-checked reader of BTIR graphs for C and C++ plugins.
 *
 * BTIR is the serialized graph that supports and compile receive. Its normative
 * specification is delegate-api/docs/btir.md (byte layout, versions, what every field
 * means, what a reader must refuse and what it must ignore); baton_delegate.h section 7
 * summarises it, and delegate-api/src/wire.rs is the Rust reader and writer. This reader is
 * header-only C99 with no dependencies beyond the C library; include it after (or instead
 * of) baton_delegate.h, from one or several translation units (every function is static).
 *
 *   - It never reads outside the buffer it is given: every read goes through one bounds
 *     check, and multi-byte values are assembled from bytes copied with memcpy, so the
 *     buffer needs no alignment and the host's byte order does not matter.
 *   - It accepts exactly what the Rust decoder (wire::decode) accepts, and returns an
 *     error with a byte offset for anything else: truncation, unknown codes, counts
 *     larger than the buffer could hold, strings that are not UTF-8, tensor indices out
 *     of range, inline data outside the buffer, and graphs that are not in topological
 *     order or define a tensor twice. delegate-api/tests/c_abi/btir_reader.rs checks the
 *     two verdicts agree on thousands of corrupted buffers, under AddressSanitizer.
 *   - It allocates two arrays (tensors and nodes), bounded by the buffer length; strings,
 *     id lists and attribute values stay in the caller's buffer and are read in place.
 *   - Graph attributes (BTIR 1.2: the subgraphs of If and Loop, which a host never sends
 *     to a plugin) are validated like the top-level graph, recursively up to
 *     BATON_BTIR_MAX_GRAPH_DEPTH, and then skipped: btir_attr_next reports them with their
 *     bytes (values_at, count) but this reader exposes no parsed form of them.
 *   - For element-wise kernels it offers numpy broadcasting as an iterator over the
 *     output (btir_bcast_init / btir_bcast_next), which also tells supports whether two
 *     shapes broadcast to a third.
 *
 * Usage:
 *
 *     btir_graph g;
 *     if (btir_open(&g, bytes, len) != 0) { report(g.error); return; }
 *     for (uint32_t i = 0; i < g.n_nodes; i++) {
 *         const btir_node* n = &g.nodes[i];
 *         const btir_tensor* x = &g.tensors[btir_node_input(n, 0)];
 *         ...
 *     }
 *     btir_close(&g);
 *
 * The btir_graph refers into the buffer, which must outlive it: a plugin that keeps the
 * graph past the call (in init's handle) keeps its own copy of the bytes.
 * examples/plugins/c-addmul/addmul.c is a complete plugin built on this reader.
 */
#ifndef BTIR_READER_H
#define BTIR_READER_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton_delegate.h"

#if defined(__GNUC__) || defined(__clang__)
#define BTIR_FN static __attribute__((unused))
#else
#define BTIR_FN static
#endif

/* How many dimensions of a tensor are stored in btir_tensor (more are parsed past). */
#define BTIR_MAX_DIMS BATON_MAX_RANK
/* Size of the fixed header of version 1.0. */
#define BTIR_HEADER_SIZE 24u
/* Size of the error text buffer. */
#define BTIR_ERROR_LEN 256

/* A string inside the buffer: `len` bytes of UTF-8, not NUL-terminated. */
typedef struct {
    const char* ptr;
    uint32_t len;
} btir_str;

typedef struct {
    btir_str name;
    uint32_t dtype; /* BATON_DTYPE_* */
    uint32_t rank;  /* the real rank; may exceed BTIR_MAX_DIMS */
    int all_fixed;  /* 1 if every dimension has a fixed extent */
    /* The first min(rank, BTIR_MAX_DIMS) dimensions: extents of fixed dimensions (0 for
     * symbolic ones) and the names of symbolic ones (len 0 for fixed ones). */
    uint64_t dims[BTIR_MAX_DIMS];
    btir_str symbols[BTIR_MAX_DIMS];
    uint32_t quant_kind;              /* BATON_BTIR_QUANT_* */
    uint32_t quant_axis;              /* PER_AXIS */
    uint32_t quant_count;             /* 1 for PER_TENSOR, n for PER_AXIS */
    const uint8_t* quant_scales;      /* quant_count little-endian f32 */
    const uint8_t* quant_zero_points; /* quant_count little-endian i32 */
    uint32_t storage;                 /* BATON_BTIR_STORAGE_* */
    uint32_t external_index;          /* EXTERNAL: index of the constant view */
    uint64_t inline_offset;           /* INLINE: offset of the bytes from the buffer start */
    uint64_t inline_len;              /* INLINE: number of bytes */
} btir_tensor;

typedef struct {
    btir_str name;
    uint32_t op; /* BATON_OP_* */
    uint32_t n_inputs;
    uint32_t n_outputs;
    uint32_t n_attrs;
    const uint8_t* inputs_at;  /* n_inputs little-endian u32 tensor indices, checked */
    const uint8_t* outputs_at; /* n_outputs little-endian u32 tensor indices, checked */
    const uint8_t* attrs_at;   /* the n_attrs attribute records, already validated */
    size_t attrs_len;
} btir_node;

typedef struct {
    uint16_t major;
    uint16_t minor;
    uint32_t flags;
    uint64_t data_offset;
    btir_str name;
    uint32_t n_tensors;
    uint32_t n_nodes;
    uint32_t n_inputs;
    uint32_t n_outputs;
    btir_tensor* tensors;      /* n_tensors entries, allocated by btir_open */
    btir_node* nodes;          /* n_nodes entries, allocated by btir_open */
    const uint8_t* inputs_at;  /* n_inputs little-endian u32 tensor indices */
    const uint8_t* outputs_at; /* n_outputs little-endian u32 tensor indices */
    char error[BTIR_ERROR_LEN]; /* why btir_open failed */
} btir_graph;

/* One attribute, as produced by btir_attr_next. */
typedef struct {
    btir_str name;
    uint32_t kind;            /* BATON_BTIR_ATTR_* */
    int64_t i;                /* INT */
    float f;                  /* FLOAT */
    uint32_t count;           /* INTS, FLOATS: number of values; GRAPH: bytes */
    const uint8_t* values_at; /* INTS: count i64; FLOATS: count f32 (little-endian);
                                 GRAPH: the graph record (already validated) */
    btir_str s;               /* STRING */
} btir_attr;

/* ------------------------------------------------------------------------------------ */
/* Little-endian loads. Every load copies the bytes first: no alignment is assumed.      */

BTIR_FN uint16_t btir_le16(const uint8_t* p) {
    uint8_t b[2];
    memcpy(b, p, 2);
    return (uint16_t)(b[0] | (b[1] << 8));
}

BTIR_FN uint32_t btir_le32(const uint8_t* p) {
    uint8_t b[4];
    memcpy(b, p, 4);
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) |
           ((uint32_t)b[3] << 24);
}

BTIR_FN uint64_t btir_le64(const uint8_t* p) {
    return (uint64_t)btir_le32(p) | ((uint64_t)btir_le32(p + 4) << 32);
}

BTIR_FN float btir_lef32(const uint8_t* p) {
    uint32_t bits = btir_le32(p);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The k-th u32 of a checked id list. */
BTIR_FN uint32_t btir_id_at(const uint8_t* list, uint32_t k) {
    return btir_le32(list + 4 * (size_t)k);
}

BTIR_FN uint32_t btir_node_input(const btir_node* n, uint32_t k) {
    return btir_id_at(n->inputs_at, k);
}

BTIR_FN uint32_t btir_node_output(const btir_node* n, uint32_t k) {
    return btir_id_at(n->outputs_at, k);
}

BTIR_FN uint32_t btir_graph_input(const btir_graph* g, uint32_t k) {
    return btir_id_at(g->inputs_at, k);
}

BTIR_FN uint32_t btir_graph_output(const btir_graph* g, uint32_t k) {
    return btir_id_at(g->outputs_at, k);
}

/* ------------------------------------------------------------------------------------ */
/* Names, for messages                                                                  */

BTIR_FN const char* btir_dtype_name(uint32_t dtype) {
    static const char* const names[] = {
        "?",        "f32",        "f16",    "i8",         "u8",     "i32",    "i64",  "bool",
        "f64",      "bf16",       "i16",    "u16",        "u32",    "u64",    "f8e4m3fn",
        "f8e4m3fnuz", "f8e5m2",   "f8e5m2fnuz", "f8e8m0", "f4e2m1", "i4",     "u4",   "i2",
        "u2"};
    return dtype < sizeof names / sizeof names[0] ? names[dtype] : "?";
}

BTIR_FN uint32_t btir_dtype_size(uint32_t dtype) {
    static const uint32_t sizes[] = {0, 4, 2, 1, 1, 4, 8, 1, 8, 2, 2, 2,
                                     4, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    return dtype < sizeof sizes / sizeof sizes[0] ? sizes[dtype] : 0;
}

/* The IR name of an op code ("Conv"), or "?" for a code this header does not know. */
BTIR_FN const char* btir_op_name(uint32_t op) {
    static const char* const names[] = {
        "?", "MatMul", "Gemm", "Conv", "Add", "Sub", "Mul", "Div", "Relu", "Clip", "Sigmoid",
        "Tanh", "Softmax", "MaxPool", "AveragePool", "GlobalAveragePool", "Reshape",
        "Transpose", "Concat", "Flatten", "Pow", "Sqrt", "Exp", "Log", "Neg", "Abs", "Erf",
        "LeakyRelu", "HardSigmoid", "HardSwish", "Gelu", "LogSoftmax", "BatchNormalization",
        "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "Equal", "Not",
        "Greater", "Less", "And", "Where", "Cast", "Ceil", "?", "?", "?", "?", "?", "Squeeze",
        "Unsqueeze", "Split", "Slice", "Gather", "Expand", "Pad", "Tile", "Shape", "Size",
        "Identity", "ConstantOfShape", "ConvTranspose", "Resize", "LSTM", "GRU",
        "QuantizeLinear", "DequantizeLinear", "If", "Loop", "CastLike", "GreaterOrEqual",
        "LessOrEqual", "Floor", "Round", "Sign", "Reciprocal", "Mod", "IsNaN", "IsInf", "Sin",
        "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "ArgMax",
        "ArgMin", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp",
        "ReduceSumSquare", "CumSum", "Trilu", "GatherElements", "ScatterElements", "GatherND",
        "ScatterND", "DepthToSpace", "SpaceToDepth", "Or", "Xor", "TopK", "Hardmax", "Range",
        "OneHot", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift",
        "CumProd", "Attention", "RotaryEmbedding"};
    /* BTIR 1.5 codes, which leave gaps for codes other minors may fill. */
    switch (op) {
    case BATON_OP_GRIDSAMPLE: return "GridSample";
    case BATON_OP_DFT: return "DFT";
    case BATON_OP_STFT: return "STFT";
    case BATON_OP_HANNWINDOW: return "HannWindow";
    case BATON_OP_HAMMINGWINDOW: return "HammingWindow";
    case BATON_OP_BLACKMANWINDOW: return "BlackmanWindow";
    case BATON_OP_EINSUM: return "Einsum";
    case BATON_OP_NONMAXSUPPRESSION: return "NonMaxSuppression";
    case BATON_OP_UNIQUE: return "Unique";
    case BATON_OP_COMPRESS: return "Compress";
    case BATON_OP_LINEARATTENTION: return "LinearAttention";
    case BATON_OP_COL2IM: return "Col2Im";
    case BATON_OP_CAUSALCONVWITHSTATE: return "CausalConvWithState";
    case BATON_OP_DEFORMCONV: return "DeformConv";
    case BATON_OP_MAXUNPOOL: return "MaxUnpool";
    case BATON_OP_CONVINTEGER: return "ConvInteger";
    case BATON_OP_MATMULINTEGER: return "MatMulInteger";
    case BATON_OP_BITCAST: return "BitCast";
    case BATON_OP_RNN: return "RNN";
    case BATON_OP_MELWEIGHTMATRIX: return "MelWeightMatrix";
    case BATON_OP_AFFINEGRID: return "AffineGrid";
    case BATON_OP_REVERSESEQUENCE: return "ReverseSequence";
    case BATON_OP_TENSORSCATTER: return "TensorScatter";
    case BATON_OP_DET: return "Det";
    case BATON_OP_ROIALIGN: return "RoiAlign";
    default: break;
    }
    return op < sizeof names / sizeof names[0] ? names[op] : "?";
}

/* ------------------------------------------------------------------------------------ */
/* The cursor: the one place that checks bounds                                         */

typedef struct {
    const uint8_t* buf;
    size_t len;
    size_t pos;
    char* err; /* BTIR_ERROR_LEN bytes, or NULL */
} btir_cursor;

BTIR_FN int btir_fail(btir_cursor* c, const char* fmt, ...) {
    if (c->err != NULL) {
        int n = snprintf(c->err, BTIR_ERROR_LEN, "BTIR invalid at byte %lu: ",
                         (unsigned long)c->pos);
        if (n > 0 && n < BTIR_ERROR_LEN) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->err + n, (size_t)(BTIR_ERROR_LEN - n), fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

/* Takes the next `n` bytes, or fails without moving. */
BTIR_FN int btir_take(btir_cursor* c, uint64_t n, const char* what, const uint8_t** out) {
    if (n > (uint64_t)(c->len - c->pos)) {
        if (c->err != NULL) {
            snprintf(c->err, BTIR_ERROR_LEN, "BTIR truncated at byte %lu while reading %s",
                     (unsigned long)c->pos, what);
        }
        return -1;
    }
    if (out != NULL) {
        *out = c->buf + c->pos;
    }
    c->pos += (size_t)n;
    return 0;
}

BTIR_FN int btir_u16(btir_cursor* c, const char* what, uint16_t* v) {
    const uint8_t* p;
    if (btir_take(c, 2, what, &p) != 0) return -1;
    *v = btir_le16(p);
    return 0;
}

BTIR_FN int btir_u32(btir_cursor* c, const char* what, uint32_t* v) {
    const uint8_t* p;
    if (btir_take(c, 4, what, &p) != 0) return -1;
    *v = btir_le32(p);
    return 0;
}

BTIR_FN int btir_u64(btir_cursor* c, const char* what, uint64_t* v) {
    const uint8_t* p;
    if (btir_take(c, 8, what, &p) != 0) return -1;
    *v = btir_le64(p);
    return 0;
}

/* A count of elements that take at least `min_size` bytes each: a count the rest of the
 * buffer cannot hold is refused before anything is allocated or looped over. */
BTIR_FN int btir_count(btir_cursor* c, const char* what, uint32_t min_size, uint32_t* n) {
    if (btir_u32(c, what, n) != 0) return -1;
    if ((uint64_t)*n * min_size > (uint64_t)(c->len - c->pos)) {
        return btir_fail(c, "%s %lu exceeds the buffer", what, (unsigned long)*n);
    }
    return 0;
}

/* Strict UTF-8, as Rust's str::from_utf8 accepts it: no overlong forms, no surrogates,
 * nothing above U+10FFFF. */
BTIR_FN int btir_utf8_valid(const uint8_t* s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        size_t extra;
        uint8_t lo = 0x80, hi = 0xBF; /* range of the second byte */
        size_t k;
        if (b < 0x80) {
            i++;
            continue;
        }
        if (b >= 0xC2 && b <= 0xDF) {
            extra = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
            extra = 2;
            if (b == 0xE0) lo = 0xA0;
            if (b == 0xED) hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            extra = 3;
            if (b == 0xF0) lo = 0x90;
            if (b == 0xF4) hi = 0x8F;
        } else {
            return 0;
        }
        if (n - i - 1 < extra) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (k = 2; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        }
        i += extra + 1;
    }
    return 1;
}

BTIR_FN int btir_str_read(btir_cursor* c, const char* what, btir_str* s) {
    uint32_t n;
    const uint8_t* p;
    if (btir_count(c, what, 1, &n) != 0) return -1;
    if (btir_take(c, n, what, &p) != 0) return -1;
    if (!btir_utf8_valid(p, n)) return btir_fail(c, "%s is not UTF-8", what);
    if (btir_take(c, (4 - n % 4) % 4, what, NULL) != 0) return -1; /* padding */
    s->ptr = (const char*)p;
    s->len = n;
    return 0;
}

/* A list of `n` tensor indices, each below `n_tensors`. */
BTIR_FN int btir_ids(btir_cursor* c, const char* what, uint32_t n_tensors, uint32_t* n,
                     const uint8_t** at) {
    uint32_t k;
    if (btir_count(c, what, 4, n) != 0) return -1;
    if (btir_take(c, (uint64_t)*n * 4, what, at) != 0) return -1;
    for (k = 0; k < *n; k++) {
        uint32_t id = btir_id_at(*at, k);
        if (id >= n_tensors) {
            return btir_fail(c, "%s: tensor index %lu out of range (%lu tensors)", what,
                             (unsigned long)id, (unsigned long)n_tensors);
        }
    }
    return 0;
}

/* Reads one attribute record. */
BTIR_FN int btir_attr_read(btir_cursor* c, btir_attr* a) {
    memset(a, 0, sizeof *a);
    if (btir_str_read(c, "attribute name", &a->name) != 0) return -1;
    if (btir_u32(c, "attribute kind", &a->kind) != 0) return -1;
    switch (a->kind) {
    case BATON_BTIR_ATTR_INT: {
        uint64_t v;
        if (btir_u64(c, "int attribute", &v) != 0) return -1;
        memcpy(&a->i, &v, sizeof v);
        return 0;
    }
    case BATON_BTIR_ATTR_FLOAT: {
        const uint8_t* p;
        if (btir_take(c, 4, "float attribute", &p) != 0) return -1;
        a->f = btir_lef32(p);
        return 0;
    }
    case BATON_BTIR_ATTR_INTS:
        if (btir_count(c, "ints length", 8, &a->count) != 0) return -1;
        return btir_take(c, (uint64_t)a->count * 8, "ints", &a->values_at);
    case BATON_BTIR_ATTR_FLOATS:
        if (btir_count(c, "floats length", 4, &a->count) != 0) return -1;
        return btir_take(c, (uint64_t)a->count * 4, "floats", &a->values_at);
    case BATON_BTIR_ATTR_STRING:
        return btir_str_read(c, "string attribute", &a->s);
    case BATON_BTIR_ATTR_GRAPH:
        if (btir_count(c, "graph length", 1, &a->count) != 0) return -1;
        return btir_take(c, a->count, "graph", &a->values_at);
    default:
        return btir_fail(c, "attribute '%.*s' has unknown kind %lu", (int)a->name.len,
                         a->name.ptr, (unsigned long)a->kind);
    }
}

/* The k-th value of an INTS or FLOATS attribute (k < count). */
BTIR_FN int64_t btir_attr_int_at(const btir_attr* a, uint32_t k) {
    uint64_t v = btir_le64(a->values_at + 8 * (size_t)k);
    int64_t i;
    memcpy(&i, &v, sizeof i);
    return i;
}

BTIR_FN float btir_attr_float_at(const btir_attr* a, uint32_t k) {
    return btir_lef32(a->values_at + 4 * (size_t)k);
}

/* Iterates over a node's attributes (already validated by btir_open):
 *
 *     btir_attr_iter it; btir_attr a;
 *     btir_attrs(node, &it);
 *     while (btir_attr_next(&it, &a)) { ... }
 */
typedef struct {
    btir_cursor c;
    uint32_t left;
} btir_attr_iter;

BTIR_FN void btir_attrs(const btir_node* n, btir_attr_iter* it) {
    it->c.buf = n->attrs_at;
    it->c.len = n->attrs_len;
    it->c.pos = 0;
    it->c.err = NULL;
    it->left = n->n_attrs;
}

BTIR_FN int btir_attr_next(btir_attr_iter* it, btir_attr* a) {
    if (it->left == 0 || btir_attr_read(&it->c, a) != 0) return 0;
    it->left--;
    return 1;
}

/* Number of elements of a tensor with a fixed shape of at most BTIR_MAX_DIMS dimensions.
 * Returns 0 and sets *out, or -1 if a dimension is symbolic, the rank is too large or the
 * product overflows 64 bits. */
BTIR_FN int btir_tensor_elements(const btir_tensor* t, uint64_t* out) {
    uint64_t n = 1;
    uint32_t d;
    if (!t->all_fixed || t->rank > BTIR_MAX_DIMS) return -1;
    for (d = 0; d < t->rank; d++) {
        if (t->dims[d] != 0 && n > UINT64_MAX / t->dims[d]) return -1;
        n *= t->dims[d];
    }
    *out = n;
    return 0;
}

/* Bytes of a tensor with a fixed shape of at most BTIR_MAX_DIMS dimensions (elements
 * times the element size): what the byte_len of its view must be. UINT64_MAX when the
 * shape is symbolic, the rank too large or the size overflows (no view has that length). */
BTIR_FN uint64_t btir_tensor_bytes(const btir_tensor* t) {
    uint64_t n, size = btir_dtype_size(t->dtype);
    if (btir_tensor_elements(t, &n) != 0 || (n != 0 && size > UINT64_MAX / n)) return UINT64_MAX;
    return n * size;
}

/* ------------------------------------------------------------------------------------ */
/* Broadcasting (numpy rules, as the IR's element-wise ops use them)                     */

/* Iterates over the elements of `out`, in row-major order, giving for each the offsets
 * (in elements) of the elements of `a` and `b` it is computed from:
 *
 *     btir_bcast it;
 *     if (btir_bcast_init(&it, a, b, out) != 0) decline...;
 *     float* o = out_data;
 *     while (btir_bcast_next(&it)) *o++ = x[it.a] + y[it.b];
 *
 * Dimensions are aligned from the right; a dimension `a` lacks, or has of extent 1, stays
 * at offset 0 (it is repeated along the output's). */
typedef struct {
    uint64_t a, b; /* offsets of the current element's operands */
    uint32_t rank;
    int started;
    uint64_t left; /* output elements not yet visited */
    uint64_t dims[BTIR_MAX_DIMS], idx[BTIR_MAX_DIMS];
    uint64_t step_a[BTIR_MAX_DIMS], step_b[BTIR_MAX_DIMS];
} btir_bcast;

/* The extent of t along output dimension d of an output of rank `rank` (1 if t lacks it). */
BTIR_FN uint64_t btir_bcast_dim(const btir_tensor* t, uint32_t rank, uint32_t d) {
    return d + t->rank < rank ? 1 : t->dims[d + t->rank - rank];
}

/* Element strides of t read as an output of the given rank and dims; 0 where t repeats. */
BTIR_FN int btir_bcast_steps(const btir_tensor* t, uint32_t rank, const uint64_t* dims,
                             uint64_t* steps) {
    uint64_t step = 1;
    uint32_t d;
    if (!t->all_fixed || t->rank > rank) return -1;
    for (d = rank; d-- > 0;) {
        uint64_t e = btir_bcast_dim(t, rank, d);
        if (e != dims[d] && e != 1) return -1;
        steps[d] = e == 1 ? 0 : step;
        step *= e;
    }
    return 0;
}

/* Sets up the iteration. -1 when a shape is symbolic or above BTIR_MAX_DIMS, or `out` is
 * not exactly the broadcast of `a` and `b` (for supports: decline the node). */
BTIR_FN int btir_bcast_init(btir_bcast* it, const btir_tensor* a, const btir_tensor* b,
                            const btir_tensor* out) {
    uint32_t d;
    memset(it, 0, sizeof *it);
    if (btir_tensor_elements(out, &it->left) != 0) return -1;
    it->rank = out->rank;
    memcpy(it->dims, out->dims, sizeof it->dims);
    if (btir_bcast_steps(a, it->rank, it->dims, it->step_a) != 0 ||
        btir_bcast_steps(b, it->rank, it->dims, it->step_b) != 0)
        return -1;
    for (d = 0; d < it->rank; d++) {
        uint64_t ea = btir_bcast_dim(a, it->rank, d), eb = btir_bcast_dim(b, it->rank, d);
        if (it->dims[d] != (ea == 1 ? eb : ea)) return -1;
    }
    return 0;
}

/* Moves to the next output element (the first, on the first call): 1, with it->a and it->b
 * set; 0 when every element has been visited. */
BTIR_FN int btir_bcast_next(btir_bcast* it) {
    uint32_t d;
    if (it->left == 0) return 0;
    for (d = it->rank; it->started && d-- > 0;) {
        it->a += it->step_a[d];
        it->b += it->step_b[d];
        if (++it->idx[d] < it->dims[d]) break;
        it->a -= it->step_a[d] * it->dims[d];
        it->b -= it->step_b[d] * it->dims[d];
        it->idx[d] = 0;
    }
    it->started = 1;
    it->left--;
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* Records                                                                              */

/* `total_len` is the length of the whole buffer (the data segment follows every graph). */
BTIR_FN int btir_tensor_read(btir_cursor* c, uint64_t data_offset, uint64_t total_len,
                             btir_tensor* t) {
    uint32_t d;
    uint64_t bytes; /* dtype size times every fixed extent, as wire.rs computes it */
    int bytes_overflow = 0;
    memset(t, 0, sizeof *t);
    if (btir_str_read(c, "tensor name", &t->name) != 0) return -1;
    if (btir_u32(c, "dtype", &t->dtype) != 0) return -1;
    if (t->dtype < BATON_DTYPE_F32 || t->dtype > BATON_DTYPE_U2) {
        return btir_fail(c, "tensor '%.*s': unknown dtype code %lu", (int)t->name.len,
                         t->name.ptr, (unsigned long)t->dtype);
    }
    if (btir_count(c, "rank", 8, &t->rank) != 0) return -1;
    bytes = btir_dtype_size(t->dtype);
    t->all_fixed = 1;
    for (d = 0; d < t->rank; d++) {
        uint32_t kind;
        uint64_t extent = 0;
        btir_str symbol = {NULL, 0};
        if (btir_u32(c, "dim kind", &kind) != 0) return -1;
        if (kind == BATON_BTIR_DIM_FIXED) {
            if (btir_u64(c, "dim", &extent) != 0) return -1;
            if (extent != 0 && bytes > UINT64_MAX / extent) {
                bytes_overflow = 1;
            } else {
                bytes *= extent;
            }
        } else if (kind == BATON_BTIR_DIM_SYMBOLIC) {
            if (btir_str_read(c, "dim symbol", &symbol) != 0) return -1;
            t->all_fixed = 0;
        } else {
            return btir_fail(c, "tensor '%.*s': dim kind %lu", (int)t->name.len, t->name.ptr,
                             (unsigned long)kind);
        }
        if (d < BTIR_MAX_DIMS) {
            t->dims[d] = extent;
            t->symbols[d] = symbol;
        }
    }
    if (btir_u32(c, "quant kind", &t->quant_kind) != 0) return -1;
    switch (t->quant_kind) {
    case BATON_BTIR_QUANT_NONE:
        break;
    case BATON_BTIR_QUANT_PER_TENSOR:
        t->quant_count = 1;
        if (btir_take(c, 4, "scale", &t->quant_scales) != 0) return -1;
        if (btir_take(c, 4, "zero point", &t->quant_zero_points) != 0) return -1;
        break;
    case BATON_BTIR_QUANT_PER_AXIS:
        if (btir_u32(c, "quant axis", &t->quant_axis) != 0) return -1;
        if (btir_count(c, "quant count", 8, &t->quant_count) != 0) return -1;
        if (btir_take(c, (uint64_t)t->quant_count * 4, "scales", &t->quant_scales) != 0)
            return -1;
        if (btir_take(c, (uint64_t)t->quant_count * 4, "zero points",
                      &t->quant_zero_points) != 0)
            return -1;
        break;
    default:
        return btir_fail(c, "tensor '%.*s': quant kind %lu", (int)t->name.len, t->name.ptr,
                         (unsigned long)t->quant_kind);
    }
    if (btir_u32(c, "storage kind", &t->storage) != 0) return -1;
    switch (t->storage) {
    case BATON_BTIR_STORAGE_RUNTIME:
        break;
    case BATON_BTIR_STORAGE_INLINE: {
        uint64_t off, len;
        if (btir_u64(c, "data offset", &off) != 0) return -1;
        if (btir_u64(c, "data len", &len) != 0) return -1;
        /* data_offset + off + len <= buffer length, without overflow */
        if (data_offset == 0 || off > UINT64_MAX - data_offset ||
            len > UINT64_MAX - (data_offset + off) || data_offset + off + len > total_len) {
            return btir_fail(c, "tensor '%.*s': data [%llu, +%llu) lies outside the data segment",
                             (int)t->name.len, t->name.ptr, (unsigned long long)off,
                             (unsigned long long)len);
        }
        t->inline_offset = data_offset + off;
        t->inline_len = len;
        break;
    }
    case BATON_BTIR_STORAGE_EXTERNAL:
        if (btir_u32(c, "external index", &t->external_index) != 0) return -1;
        break;
    default:
        return btir_fail(c, "tensor '%.*s': storage kind %lu", (int)t->name.len, t->name.ptr,
                         (unsigned long)t->storage);
    }
    /* The checks wire.rs makes: inline bytes fit the shape, per-axis counts fit the axis. */
    if (t->storage == BATON_BTIR_STORAGE_INLINE && t->all_fixed &&
        (bytes_overflow || bytes != t->inline_len)) {
        return btir_fail(c, "tensor '%.*s': %llu data bytes do not fit its shape",
                         (int)t->name.len, t->name.ptr, (unsigned long long)t->inline_len);
    }
    if (t->quant_kind == BATON_BTIR_QUANT_PER_AXIS) {
        if (t->quant_axis >= t->rank) {
            return btir_fail(c, "tensor '%.*s': quantization axis %lu beyond rank %lu",
                             (int)t->name.len, t->name.ptr, (unsigned long)t->quant_axis,
                             (unsigned long)t->rank);
        }
        if (t->quant_axis < BTIR_MAX_DIMS && t->symbols[t->quant_axis].len == 0 &&
            t->symbols[t->quant_axis].ptr == NULL && t->dims[t->quant_axis] != t->quant_count) {
            return btir_fail(c, "tensor '%.*s': %lu per-axis scales for an axis of extent %llu",
                             (int)t->name.len, t->name.ptr, (unsigned long)t->quant_count,
                             (unsigned long long)t->dims[t->quant_axis]);
        }
    }
    return 0;
}

BTIR_FN int btir_subgraph_check(btir_cursor* c, const btir_attr* a, uint64_t data_offset,
                                uint64_t total_len, uint32_t depth);

BTIR_FN int btir_node_read(btir_cursor* c, uint32_t n_tensors, uint64_t data_offset,
                           uint64_t total_len, uint32_t depth, btir_node* n) {
    uint32_t k;
    size_t start;
    memset(n, 0, sizeof *n);
    if (btir_str_read(c, "node name", &n->name) != 0) return -1;
    if (btir_u32(c, "op", &n->op) != 0) return -1;
    if (!((n->op >= BATON_OP_MATMUL && n->op <= BATON_OP_FLATTEN) ||
          (n->op >= BATON_OP_POW && n->op <= BATON_OP_CEIL) ||
          (n->op >= BATON_OP_SQUEEZE && n->op <= BATON_OP_COL2IM) ||
          (n->op >= BATON_OP_DFT && n->op <= BATON_OP_LINEARATTENTION) ||
          (n->op >= BATON_OP_CAUSALCONVWITHSTATE && n->op <= BATON_OP_MELWEIGHTMATRIX))) {
        return btir_fail(c, "node '%.*s': unknown op code %lu", (int)n->name.len, n->name.ptr,
                         (unsigned long)n->op);
    }
    if (btir_ids(c, "node inputs", n_tensors, &n->n_inputs, &n->inputs_at) != 0) return -1;
    if (btir_ids(c, "node outputs", n_tensors, &n->n_outputs, &n->outputs_at) != 0) return -1;
    /* an attribute takes at least 12 bytes: name length, kind, a 4-byte value */
    if (btir_count(c, "attribute count", 12, &n->n_attrs) != 0) return -1;
    start = c->pos;
    for (k = 0; k < n->n_attrs; k++) {
        btir_attr a;
        size_t at = c->pos;
        uint32_t kind;
        btir_str name;
        /* The nesting limit is checked before the length is read, as wire.rs does. */
        if (btir_str_read(c, "attribute name", &name) != 0) return -1;
        if (btir_u32(c, "attribute kind", &kind) != 0) return -1;
        if (kind == BATON_BTIR_ATTR_GRAPH && depth >= BATON_BTIR_MAX_GRAPH_DEPTH) {
            return btir_fail(c, "node '%.*s': subgraph '%.*s' is nested deeper than %u levels",
                             (int)n->name.len, n->name.ptr, (int)name.len, name.ptr,
                             (unsigned)BATON_BTIR_MAX_GRAPH_DEPTH);
        }
        c->pos = at;
        if (btir_attr_read(c, &a) != 0) return -1;
        if (a.kind == BATON_BTIR_ATTR_GRAPH &&
            btir_subgraph_check(c, &a, data_offset, total_len, depth + 1) != 0)
            return -1;
    }
    n->attrs_at = c->buf + start;
    n->attrs_len = c->pos - start;
    return 0;
}

/* The structural rules of Graph::validate: every tensor a node reads is a graph input, a
 * constant or the output of an earlier node; no tensor is defined twice; every graph
 * output is defined. */
BTIR_FN int btir_check_order(btir_graph* g) {
    uint8_t* defined = (uint8_t*)calloc(g->n_tensors ? g->n_tensors : 1, 1);
    uint32_t i, k;
    int rc = -1;
    if (defined == NULL) {
        snprintf(g->error, BTIR_ERROR_LEN, "BTIR: out of memory");
        return -1;
    }
    for (k = 0; k < g->n_inputs; k++) defined[btir_graph_input(g, k)] = 1;
    for (i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].storage != BATON_BTIR_STORAGE_RUNTIME) defined[i] = 1;
    }
    for (i = 0; i < g->n_nodes; i++) {
        const btir_node* n = &g->nodes[i];
        for (k = 0; k < n->n_inputs; k++) {
            const btir_tensor* t = &g->tensors[btir_node_input(n, k)];
            if (!defined[btir_node_input(n, k)]) {
                snprintf(g->error, BTIR_ERROR_LEN,
                         "BTIR graph invalid: node '%.*s' reads tensor '%.*s' before it is "
                         "produced (nodes must be in topological order)",
                         (int)n->name.len, n->name.ptr, (int)t->name.len, t->name.ptr);
                goto done;
            }
        }
        for (k = 0; k < n->n_outputs; k++) {
            const btir_tensor* t = &g->tensors[btir_node_output(n, k)];
            if (defined[btir_node_output(n, k)]) {
                snprintf(g->error, BTIR_ERROR_LEN,
                         "BTIR graph invalid: node '%.*s' writes tensor '%.*s', which is "
                         "already defined",
                         (int)n->name.len, n->name.ptr, (int)t->name.len, t->name.ptr);
                goto done;
            }
            defined[btir_node_output(n, k)] = 1;
        }
    }
    for (k = 0; k < g->n_outputs; k++) {
        if (!defined[btir_graph_output(g, k)]) {
            snprintf(g->error, BTIR_ERROR_LEN,
                     "BTIR graph invalid: graph output %lu is never produced",
                     (unsigned long)btir_graph_output(g, k));
            goto done;
        }
    }
    rc = 0;
done:
    free(defined);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* Opening and closing                                                                  */

/* Releases what btir_open allocated. Safe to call twice, and after a failed btir_open. */
BTIR_FN void btir_close(btir_graph* g) {
    free(g->tensors);
    free(g->nodes);
    g->tensors = NULL;
    g->nodes = NULL;
}

BTIR_FN int btir_graph_read(btir_graph* g, btir_cursor* c, uint64_t total_len, uint32_t depth);

BTIR_FN int btir_open_inner(btir_graph* g, btir_cursor* c) {
    const uint8_t* magic;
    uint32_t header_size;
    if (btir_take(c, 4, "magic", &magic) != 0) return -1;
    if (memcmp(magic, "BTIR", 4) != 0) {
        snprintf(g->error, BTIR_ERROR_LEN,
                 "not a Baton IR buffer (magic %02x %02x %02x %02x, expected \"BTIR\")",
                 magic[0], magic[1], magic[2], magic[3]);
        return -1;
    }
    if (btir_u16(c, "major", &g->major) != 0 || btir_u16(c, "minor", &g->minor) != 0) return -1;
    if (g->major != BATON_WIRE_MAJOR) {
        snprintf(g->error, BTIR_ERROR_LEN,
                 "IR wire format %u.%u is not readable by this reader (reads %u.x)",
                 (unsigned)g->major, (unsigned)g->minor, (unsigned)BATON_WIRE_MAJOR);
        return -1;
    }
    if (btir_u32(c, "header_size", &header_size) != 0) return -1;
    if (btir_u32(c, "flags", &g->flags) != 0) return -1;
    if (btir_u64(c, "data_offset", &g->data_offset) != 0) return -1;
    if (header_size < BTIR_HEADER_SIZE || header_size > c->len) {
        return btir_fail(c, "header_size %lu", (unsigned long)header_size);
    }
    c->pos = header_size; /* a later minor may have a longer header: skip what we do not know */
    return btir_graph_read(g, c, c->len, 0);
}

/* Reads a graph record at nesting `depth` into g (whose data_offset is set) and checks its
 * order. Anything after the output list (fields of a later minor, the data segment) is not
 * read here. */
BTIR_FN int btir_graph_read(btir_graph* g, btir_cursor* c, uint64_t total_len, uint32_t depth) {
    uint32_t i;
    if (btir_str_read(c, "graph name", &g->name) != 0) return -1;

    /* a tensor takes at least 20 bytes: name length, dtype, rank, quant kind, storage */
    if (btir_count(c, "tensor count", 20, &g->n_tensors) != 0) return -1;
    g->tensors = (btir_tensor*)calloc(g->n_tensors ? g->n_tensors : 1, sizeof(btir_tensor));
    if (g->tensors == NULL) {
        return btir_fail(c, "out of memory for %lu tensors", (unsigned long)g->n_tensors);
    }
    for (i = 0; i < g->n_tensors; i++) {
        if (btir_tensor_read(c, g->data_offset, total_len, &g->tensors[i]) != 0) return -1;
    }

    /* a node takes at least 20 bytes: name length, op, three counts */
    if (btir_count(c, "node count", 20, &g->n_nodes) != 0) return -1;
    g->nodes = (btir_node*)calloc(g->n_nodes ? g->n_nodes : 1, sizeof(btir_node));
    if (g->nodes == NULL) {
        return btir_fail(c, "out of memory for %lu nodes", (unsigned long)g->n_nodes);
    }
    for (i = 0; i < g->n_nodes; i++) {
        if (btir_node_read(c, g->n_tensors, g->data_offset, total_len, depth, &g->nodes[i]) != 0)
            return -1;
    }

    if (btir_ids(c, "graph inputs", g->n_tensors, &g->n_inputs, &g->inputs_at) != 0) return -1;
    if (btir_ids(c, "graph outputs", g->n_tensors, &g->n_outputs, &g->outputs_at) != 0) return -1;
    return btir_check_order(g);
}

/* Validates the subgraph held by graph attribute `a` (read from cursor c): a graph record
 * that fills exactly the attribute's bytes. */
BTIR_FN int btir_subgraph_check(btir_cursor* c, const btir_attr* a, uint64_t data_offset,
                                uint64_t total_len, uint32_t depth) {
    btir_graph sub;
    btir_cursor sc;
    int rc;
    memset(&sub, 0, sizeof sub);
    sub.data_offset = data_offset;
    sc.buf = c->buf;
    sc.pos = (size_t)(a->values_at - c->buf);
    sc.len = sc.pos + a->count;
    sc.err = sub.error;
    rc = btir_graph_read(&sub, &sc, total_len, depth);
    if (rc == 0 && sc.pos != sc.len) {
        rc = btir_fail(&sc, "subgraph '%.*s' ends %lu bytes before its length", (int)a->name.len,
                       a->name.ptr, (unsigned long)(sc.len - sc.pos));
    }
    btir_close(&sub);
    if (rc != 0 && c->err != NULL) {
        memcpy(c->err, sub.error, BTIR_ERROR_LEN);
    }
    return rc;
}

/* Reads and validates `len` bytes at `data`. Returns 0 on success; otherwise -1 with the
 * reason in g->error (and nothing left to free, though btir_close is harmless). */
BTIR_FN int btir_open(btir_graph* g, const void* data, uint64_t len) {
    btir_cursor c;
    memset(g, 0, sizeof *g);
    if (data == NULL && len != 0) {
        snprintf(g->error, BTIR_ERROR_LEN, "BTIR buffer is NULL but %llu bytes long",
                 (unsigned long long)len);
        return -1;
    }
    if (len > (uint64_t)SIZE_MAX) {
        snprintf(g->error, BTIR_ERROR_LEN, "BTIR buffer of %llu bytes is too large",
                 (unsigned long long)len);
        return -1;
    }
    c.buf = (const uint8_t*)data;
    c.len = (size_t)len;
    c.pos = 0;
    c.err = g->error;
    if (btir_open_inner(g, &c) != 0) {
        btir_close(g);
        return -1;
    }
    return 0;
}

#endif /* BTIR_READER_H */
