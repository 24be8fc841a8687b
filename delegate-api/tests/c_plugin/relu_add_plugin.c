/*
 * relu_add_plugin.c -- a complete Baton delegate written in C99 against baton_delegate.h.
 *
 * It runs Relu and same-shape Add on f32 tensors with fixed shapes, on one CPU "device",
 * and declines everything else with a reason. Small as it is, it implements every rule
 * of the ABI: the handshake, per-thread last_error, plugin-owned blobs and handles,
 * constant views, and strict checking of every count and byte length it is handed. It
 * is the plugin tests/c_abi/ loads to prove the header and the Rust host agree. It reads
 * the graph with the public reader, delegate-api/include/btir_reader.h.
 *
 * Build (what the test does):
 *     gcc -std=c99 -O2 -Wall -Wextra -Werror -shared -fPIC -I../../include \
 *         relu_add_plugin.c -o librelu_add.so
 *
 * Fault variants for the host's ABI checks, selected at build time:
 *     -DBATON_TEST_WRONG_MAJOR   the descriptor claims abi_major 2
 *     -DBATON_TEST_SHORT_STRUCT  the descriptor claims struct_size 24
 *     -DBATON_TEST_V1_0          built as against ABI 1.0: abi_minor 0 and struct_size
 *                                BATON_DESCRIPTOR_V1_SIZE (no 1.1 profile field)
 *     -DBATON_TEST_BTIR_MINOR=N  declares btir_minor N (default BATON_WIRE_MINOR), for the
 *                                host's per-node declining of codes a plugin cannot read
 *     -DBATON_TEST_NO_ENTRY      baton_delegate_entry is not exported (the descriptor is
 *                                reachable through baton_test_renamed_entry instead)
 *
 * State: apart from the thread-local error text, the plugin has no mutable global
 * state. The descriptor and its strings are constant; everything else lives in the
 * context, blob and handle objects the host owns through their release functions.
 *
 * The blob ("compiled program") is a compact, self-contained table, little-endian:
 *     "CRAB", u32 version, u32 n_tensors, u32 n_nodes, u32 n_inputs, u32 n_outputs
 *     tensor[n_tensors]: u32 role, u32 external_index, u32 rank, u32 zero,
 *                        u64 elements, i64 dims[BATON_MAX_RANK]
 *     node[n_nodes]:     u32 op, u32 input0, u32 input1 (NO_TENSOR for Relu), u32 output
 *     u32 inputs[n_inputs], u32 outputs[n_outputs]
 * init treats it as untrusted input (it may come from disk) and checks all of it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton_delegate.h"
#include "btir_reader.h"

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define PLUGIN_THREAD_LOCAL _Thread_local
#elif defined(__GNUC__) || defined(__clang__)
#define PLUGIN_THREAD_LOCAL __thread
#elif defined(_MSC_VER)
#define PLUGIN_THREAD_LOCAL __declspec(thread)
#else
#error "relu_add_plugin.c needs thread-local storage for last_error"
#endif

#define PLUGIN_NAME "c-relu-add"
#ifndef BATON_TEST_BTIR_MINOR
#define BATON_TEST_BTIR_MINOR BATON_WIRE_MINOR
#endif
#define PLUGIN_VERSION "0.1.0"
#define PLUGIN_BUILD_ID "c-relu-add-0.1.0-c99"

#define CONTEXT_MAGIC 0x43747843u /* "CxtC" */
#define HANDLE_MAGIC 0x486e6443u  /* "CdnH" */

#define BLOB_VERSION 1u
#define BLOB_HEADER_SIZE 24u
#define BLOB_TENSOR_SIZE (4u * 4u + 8u + 8u * BATON_MAX_RANK)
#define BLOB_NODE_SIZE 16u
#define NO_TENSOR 0xFFFFFFFFu

/* What a tensor of a compiled program is bound to at run time. */
enum {
    ROLE_UNUSED = 0, /* referenced by no node: no buffer */
    ROLE_INPUT = 1,  /* an input view of execute */
    ROLE_OUTPUT = 2, /* an output view of execute */
    ROLE_CONST = 3,  /* copied from a constant view at init */
    ROLE_TEMP = 4    /* an intermediate, in a buffer owned by the handle */
};

/* ------------------------------------------------------------------------------------ */
/* last_error                                                                           */

static PLUGIN_THREAD_LOCAL char t_last_error[512];

/* Messages are UTF-8, and snprintf truncates by bytes: drop a multi-byte sequence that
 * truncation cut off at the end of `s`. */
static void trim_partial_utf8(char* s) {
    size_t n = strlen(s), start = n, need;
    unsigned char lead;
    while (start > 0 && n - start < 3 && ((unsigned char)s[start - 1] & 0xC0) == 0x80) start--;
    if (start == 0) return;
    lead = (unsigned char)s[start - 1];
    if (lead < 0xC0) return; /* the last character is ASCII, or complete */
    need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    if (n - (start - 1) < need) s[start - 1] = '\0';
}

static BatonStatus fail(BatonStatus status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
    va_end(ap);
    trim_partial_utf8(t_last_error);
    return status;
}

static const char* plugin_last_error(void) {
    return t_last_error;
}

/* ------------------------------------------------------------------------------------ */
/* Little-endian stores for the blob                                                    */

static void put_u32(uint8_t* p, uint32_t v) {
    uint8_t b[4];
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
    memcpy(p, b, 4);
}

static void put_u64(uint8_t* p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

/* ------------------------------------------------------------------------------------ */
/* Context                                                                              */

typedef struct {
    uint32_t magic;
} PluginContext;

static BatonStatus check_context(BatonContext ctx, const PluginContext** out) {
    const PluginContext* c = (const PluginContext*)ctx;
    if (c == NULL) return fail(BATON_STATUS_INVALID_ARGUMENT, "null context");
    if (c->magic != CONTEXT_MAGIC) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "not a context of the " PLUGIN_NAME " plugin");
    }
    *out = c;
    return BATON_STATUS_OK;
}

static BatonStatus plugin_create(const BatonOptionValue* options, uint32_t option_count,
                                 BatonContext* out_ctx) {
    PluginContext* c;
    if (out_ctx == NULL) return fail(BATON_STATUS_INVALID_ARGUMENT, "create: out_ctx is NULL");
    if (option_count > 0) {
        const char* key = (options != NULL && options[0].key != NULL) ? options[0].key : "?";
        return fail(BATON_STATUS_INVALID_ARGUMENT,
                    "unknown option '%s' (the " PLUGIN_NAME " plugin takes no options)", key);
    }
    c = (PluginContext*)malloc(sizeof *c);
    if (c == NULL) return fail(BATON_STATUS_ERROR, "create: out of memory");
    c->magic = CONTEXT_MAGIC;
    *out_ctx = c;
    return BATON_STATUS_OK;
}

static void plugin_destroy_context(BatonContext ctx) {
    PluginContext* c = (PluginContext*)ctx;
    if (c == NULL) return;
    c->magic = 0;
    free(c);
}

static uint32_t plugin_available(BatonContext ctx) {
    const PluginContext* c;
    return check_context(ctx, &c) == BATON_STATUS_OK ? 1u : 0u;
}

static uint32_t plugin_device_count(BatonContext ctx) {
    const PluginContext* c;
    return check_context(ctx, &c) == BATON_STATUS_OK ? 1u : 0u;
}

static BatonStatus plugin_device_info(BatonContext ctx, uint32_t index, BatonDeviceInfo* out) {
    const PluginContext* c;
    BatonStatus s = check_context(ctx, &c);
    if (s != BATON_STATUS_OK) return s;
    if (out == NULL) return fail(BATON_STATUS_INVALID_ARGUMENT, "device_info: out is NULL");
    if (index != 0) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "no device %lu (the " PLUGIN_NAME
                    " plugin has 1 device)", (unsigned long)index);
    }
    /* Every field is a v1.0 field, which every v1 host has room for; a later minor that
     * appends fields would fill them only up to the host's out->struct_size. */
    out->struct_size = (uint32_t)sizeof(BatonDeviceInfo);
    out->kind = BATON_DEVICE_CPU;
    out->name = "c-relu-add cpu";
    out->driver_version = "none";
    out->memory_bytes = 0;
    return BATON_STATUS_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Checking graphs                                                                      */

/* Formats the first min(rank, BTIR_MAX_DIMS) dims of a tensor as "[1,2,3]". */
static void shape_text(const btir_tensor* t, char* buf, size_t len) {
    size_t used = 0;
    uint32_t d;
    buf[0] = '\0';
    for (d = 0; d < t->rank && d < BTIR_MAX_DIMS && used < len; d++) {
        int n;
        if (t->dims[d] == 0 && t->symbols[d].ptr != NULL) {
            n = snprintf(buf + used, len - used, "%s%.*s", d ? "," : "[",
                         (int)t->symbols[d].len, t->symbols[d].ptr);
        } else {
            n = snprintf(buf + used, len - used, "%s%llu", d ? "," : "[",
                         (unsigned long long)t->dims[d]);
        }
        if (n < 0) return;
        used += (size_t)n;
    }
    if (used < len) snprintf(buf + used, len - used, "%s", t->rank ? "]" : "[]");
}

static int same_shape(const btir_tensor* a, const btir_tensor* b) {
    uint32_t d;
    if (a->rank != b->rank) return 0;
    for (d = 0; d < a->rank && d < BTIR_MAX_DIMS; d++) {
        if (a->dims[d] != b->dims[d]) return 0;
    }
    return 1;
}

/* Checks every constant view the graph refers to: the index is in range and the view's
 * dtype, shape and byte length match the declaration. A mismatch is the host's mistake,
 * so it fails the whole call rather than declining a node. */
static BatonStatus check_constant_views(const btir_graph* g, const BatonTensorView* consts,
                                        uint32_t const_count) {
    uint32_t i, d;
    if (consts == NULL && const_count != 0) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "consts is NULL but const_count is %lu",
                    (unsigned long)const_count);
    }
    for (i = 0; i < g->n_tensors; i++) {
        const btir_tensor* t = &g->tensors[i];
        const BatonTensorView* v;
        uint64_t elements;
        if (t->storage != BATON_BTIR_STORAGE_EXTERNAL) continue;
        if (t->external_index >= const_count) {
            return fail(BATON_STATUS_INVALID_ARGUMENT,
                        "constant '%.*s' refers to view %lu, but %lu constant views were passed",
                        (int)t->name.len, t->name.ptr, (unsigned long)t->external_index,
                        (unsigned long)const_count);
        }
        v = &consts[t->external_index];
        if (v->dtype != t->dtype || v->rank != t->rank || (v->rank > 0 && v->shape == NULL)) {
            return fail(BATON_STATUS_INVALID_ARGUMENT,
                        "constant view %lu does not match tensor '%.*s' (dtype %lu rank %lu, "
                        "declared %s rank %lu)",
                        (unsigned long)t->external_index, (int)t->name.len, t->name.ptr,
                        (unsigned long)v->dtype, (unsigned long)v->rank,
                        btir_dtype_name(t->dtype), (unsigned long)t->rank);
        }
        if (btir_tensor_elements(t, &elements) != 0) continue; /* declined per node */
        for (d = 0; d < t->rank; d++) {
            if (v->shape[d] < 0 || (uint64_t)v->shape[d] != t->dims[d]) {
                return fail(BATON_STATUS_INVALID_ARGUMENT,
                            "constant view %lu: dimension %lu is %lld, tensor '%.*s' declares %llu",
                            (unsigned long)t->external_index, (unsigned long)d,
                            (long long)v->shape[d], (int)t->name.len, t->name.ptr,
                            (unsigned long long)t->dims[d]);
            }
        }
        if (elements > UINT64_MAX / btir_dtype_size(t->dtype) ||
            v->byte_len != elements * btir_dtype_size(t->dtype) ||
            (v->byte_len != 0 && v->data == NULL)) {
            return fail(BATON_STATUS_INVALID_ARGUMENT,
                        "constant view %lu: %llu bytes do not hold tensor '%.*s'",
                        (unsigned long)t->external_index, (unsigned long long)v->byte_len,
                        (int)t->name.len, t->name.ptr);
        }
    }
    return BATON_STATUS_OK;
}

/* Whether one operand of a node is something this plugin handles. */
static int check_operand(const btir_tensor* t, uint32_t* reason, char* msg, size_t len) {
    uint64_t elements;
    if (t->dtype != BATON_DTYPE_F32) {
        *reason = BATON_REASON_DTYPE;
        snprintf(msg, len, "tensor '%.*s' is %s; the C plugin handles f32 only",
                 (int)t->name.len, t->name.ptr, btir_dtype_name(t->dtype));
        return 0;
    }
    if (t->quant_kind != BATON_BTIR_QUANT_NONE) {
        *reason = BATON_REASON_DTYPE;
        snprintf(msg, len, "tensor '%.*s' is quantized; the C plugin handles plain f32 only",
                 (int)t->name.len, t->name.ptr);
        return 0;
    }
    if (t->rank > BATON_MAX_RANK) {
        *reason = BATON_REASON_SHAPE;
        snprintf(msg, len, "tensor '%.*s' has rank %lu, above %d", (int)t->name.len,
                 t->name.ptr, (unsigned long)t->rank, BATON_MAX_RANK);
        return 0;
    }
    if (!t->all_fixed) {
        *reason = BATON_REASON_SHAPE;
        snprintf(msg, len,
                 "tensor '%.*s' has a symbolic dimension; the C plugin needs fixed shapes",
                 (int)t->name.len, t->name.ptr);
        return 0;
    }
    if (btir_tensor_elements(t, &elements) != 0 || elements > SIZE_MAX / sizeof(float)) {
        *reason = BATON_REASON_RESOURCE;
        snprintf(msg, len, "tensor '%.*s' is too large", (int)t->name.len, t->name.ptr);
        return 0;
    }
    if (t->storage == BATON_BTIR_STORAGE_INLINE) {
        *reason = BATON_REASON_OTHER;
        snprintf(msg, len,
                 "constant '%.*s' is stored inline; the C plugin takes constants as views",
                 (int)t->name.len, t->name.ptr);
        return 0;
    }
    return 1;
}

/* Whether node `n` of `g` is supported; if not, sets a reason and a message. */
static int check_node(const btir_graph* g, const btir_node* n, uint32_t* reason, char* msg,
                      size_t len) {
    uint32_t want_inputs, k;
    char a[96], b[96];
    *reason = BATON_REASON_NONE;
    msg[0] = '\0';
    if (n->op == BATON_OP_RELU) {
        want_inputs = 1;
    } else if (n->op == BATON_OP_ADD) {
        want_inputs = 2;
    } else {
        *reason = BATON_REASON_OP;
        snprintf(msg, len, "op %s not implemented by the C plugin", btir_op_name(n->op));
        return 0;
    }
    if (n->n_inputs != want_inputs || n->n_outputs != 1) {
        *reason = BATON_REASON_OTHER;
        snprintf(msg, len, "%s with %lu inputs and %lu outputs", btir_op_name(n->op),
                 (unsigned long)n->n_inputs, (unsigned long)n->n_outputs);
        return 0;
    }
    if (n->n_attrs != 0) {
        btir_attr_iter it;
        btir_attr attr;
        btir_attrs(n, &it);
        *reason = BATON_REASON_ATTRIBUTE;
        if (btir_attr_next(&it, &attr)) {
            snprintf(msg, len, "attribute '%.*s' of %s is not supported by the C plugin",
                     (int)attr.name.len, attr.name.ptr, btir_op_name(n->op));
        } else {
            snprintf(msg, len, "%s has attributes", btir_op_name(n->op));
        }
        return 0;
    }
    for (k = 0; k < n->n_inputs; k++) {
        if (!check_operand(&g->tensors[btir_node_input(n, k)], reason, msg, len)) return 0;
    }
    if (!check_operand(&g->tensors[btir_node_output(n, 0)], reason, msg, len)) return 0;
    if (n->op == BATON_OP_ADD) {
        const btir_tensor* x = &g->tensors[btir_node_input(n, 0)];
        const btir_tensor* y = &g->tensors[btir_node_input(n, 1)];
        if (!same_shape(x, y)) {
            shape_text(x, a, sizeof a);
            shape_text(y, b, sizeof b);
            *reason = BATON_REASON_SHAPE;
            snprintf(msg, len, "Add operands %s and %s differ; the C plugin does not broadcast",
                     a, b);
            return 0;
        }
    }
    if (!same_shape(&g->tensors[btir_node_input(n, 0)], &g->tensors[btir_node_output(n, 0)])) {
        shape_text(&g->tensors[btir_node_input(n, 0)], a, sizeof a);
        shape_text(&g->tensors[btir_node_output(n, 0)], b, sizeof b);
        *reason = BATON_REASON_SHAPE;
        snprintf(msg, len, "%s output shape %s differs from its input shape %s",
                 btir_op_name(n->op), b, a);
        return 0;
    }
    return 1;
}

static BatonStatus open_graph(const uint8_t* graph, uint64_t graph_len, btir_graph* g) {
    if (btir_open(g, graph, graph_len) != 0) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "graph: %s", g->error);
    }
    return BATON_STATUS_OK;
}

static BatonStatus plugin_supports(BatonContext ctx, const uint8_t* graph, uint64_t graph_len,
                                   const BatonTensorView* consts, uint32_t const_count,
                                   BatonSupportAnswer* answers, uint32_t answer_count) {
    const PluginContext* c;
    btir_graph g;
    uint32_t i;
    BatonStatus s = check_context(ctx, &c);
    if (s != BATON_STATUS_OK) return s;
    if (answers == NULL && answer_count != 0) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "supports: answers is NULL");
    }
    s = open_graph(graph, graph_len, &g);
    if (s != BATON_STATUS_OK) return s;
    if (answer_count != g.n_nodes) {
        s = fail(BATON_STATUS_INVALID_ARGUMENT, "%lu answer slots for %lu nodes",
                 (unsigned long)answer_count, (unsigned long)g.n_nodes);
        goto done;
    }
    s = check_constant_views(&g, consts, const_count);
    if (s != BATON_STATUS_OK) goto done;
    for (i = 0; i < g.n_nodes; i++) {
        BatonSupportAnswer* a = &answers[i];
        memset(a->message, 0, sizeof a->message);
        a->supported = (uint32_t)check_node(&g, &g.nodes[i], &a->reason_code, a->message,
                                            sizeof a->message);
        trim_partial_utf8(a->message);
    }
done:
    btir_close(&g);
    return s;
}

/* ------------------------------------------------------------------------------------ */
/* Compiling: graph -> blob                                                             */

static BatonStatus plugin_compile(BatonContext ctx, uint32_t device, const uint8_t* graph,
                                  uint64_t graph_len, const BatonTensorView* consts,
                                  uint32_t const_count, BatonBlob* out_blob) {
    const PluginContext* c;
    btir_graph g;
    uint8_t* roles = NULL;
    uint8_t* blob = NULL;
    uint64_t size;
    uint32_t i, k;
    char msg[BATON_SUPPORT_MESSAGE_LEN];
    BatonStatus s = check_context(ctx, &c);
    if (s != BATON_STATUS_OK) return s;
    if (out_blob == NULL) return fail(BATON_STATUS_INVALID_ARGUMENT, "compile: out_blob is NULL");
    if (device != 0) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "no device %lu", (unsigned long)device);
    }
    s = open_graph(graph, graph_len, &g);
    if (s != BATON_STATUS_OK) return s;
    s = check_constant_views(&g, consts, const_count);
    if (s != BATON_STATUS_OK) goto done;

    roles = (uint8_t*)calloc(g.n_tensors ? g.n_tensors : 1, 1);
    if (roles == NULL) {
        s = fail(BATON_STATUS_ERROR, "compile: out of memory");
        goto done;
    }
    for (i = 0; i < g.n_inputs; i++) {
        uint32_t t = btir_graph_input(&g, i);
        uint32_t reason;
        if (roles[t] != ROLE_UNUSED || g.tensors[t].storage != BATON_BTIR_STORAGE_RUNTIME) {
            s = fail(BATON_STATUS_UNSUPPORTED,
                     "graph input '%.*s' is listed twice or is a constant",
                     (int)g.tensors[t].name.len, g.tensors[t].name.ptr);
            goto done;
        }
        if (!check_operand(&g.tensors[t], &reason, msg, sizeof msg)) {
            s = fail(BATON_STATUS_UNSUPPORTED, "graph input: %s", msg);
            goto done;
        }
        roles[t] = ROLE_INPUT;
    }
    for (i = 0; i < g.n_tensors; i++) {
        if (g.tensors[i].storage == BATON_BTIR_STORAGE_EXTERNAL) roles[i] = ROLE_CONST;
    }
    for (i = 0; i < g.n_nodes; i++) {
        const btir_node* n = &g.nodes[i];
        uint32_t reason;
        if (!check_node(&g, n, &reason, msg, sizeof msg)) {
            s = fail(BATON_STATUS_UNSUPPORTED, "node '%.*s' (%s): %s", (int)n->name.len,
                     n->name.ptr, btir_op_name(n->op), msg);
            goto done;
        }
        roles[btir_node_output(n, 0)] = ROLE_TEMP;
    }
    for (i = 0; i < g.n_outputs; i++) {
        uint32_t t = btir_graph_output(&g, i);
        if (roles[t] != ROLE_TEMP) {
            s = fail(BATON_STATUS_UNSUPPORTED,
                     "graph output '%.*s' is listed twice or is not computed by a node",
                     (int)g.tensors[t].name.len, g.tensors[t].name.ptr);
            goto done;
        }
        roles[t] = ROLE_OUTPUT;
    }

    size = BLOB_HEADER_SIZE + (uint64_t)g.n_tensors * BLOB_TENSOR_SIZE +
           (uint64_t)g.n_nodes * BLOB_NODE_SIZE + ((uint64_t)g.n_inputs + g.n_outputs) * 4;
    if (size > SIZE_MAX) {
        s = fail(BATON_STATUS_UNSUPPORTED, "compile: blob too large");
        goto done;
    }
    blob = (uint8_t*)calloc((size_t)size, 1);
    if (blob == NULL) {
        s = fail(BATON_STATUS_ERROR, "compile: out of memory for a %llu-byte blob",
                 (unsigned long long)size);
        goto done;
    }
    {
        uint8_t* p = blob;
        memcpy(p, "CRAB", 4);
        put_u32(p + 4, BLOB_VERSION);
        put_u32(p + 8, g.n_tensors);
        put_u32(p + 12, g.n_nodes);
        put_u32(p + 16, g.n_inputs);
        put_u32(p + 20, g.n_outputs);
        p += BLOB_HEADER_SIZE;
        for (i = 0; i < g.n_tensors; i++, p += BLOB_TENSOR_SIZE) {
            const btir_tensor* t = &g.tensors[i];
            uint64_t elements = 0;
            uint32_t d;
            if (roles[i] == ROLE_UNUSED) continue; /* all zero: rank 0, no buffer */
            btir_tensor_elements(t, &elements);     /* fixed: checked above */
            put_u32(p, roles[i]);
            put_u32(p + 4, roles[i] == ROLE_CONST ? t->external_index : NO_TENSOR);
            put_u32(p + 8, t->rank);
            put_u64(p + 16, elements);
            for (d = 0; d < t->rank; d++) put_u64(p + 24 + 8 * d, t->dims[d]);
        }
        for (i = 0; i < g.n_nodes; i++, p += BLOB_NODE_SIZE) {
            const btir_node* n = &g.nodes[i];
            put_u32(p, n->op);
            put_u32(p + 4, btir_node_input(n, 0));
            put_u32(p + 8, n->n_inputs > 1 ? btir_node_input(n, 1) : NO_TENSOR);
            put_u32(p + 12, btir_node_output(n, 0));
        }
        for (k = 0; k < g.n_inputs; k++, p += 4) put_u32(p, btir_graph_input(&g, k));
        for (k = 0; k < g.n_outputs; k++, p += 4) put_u32(p, btir_graph_output(&g, k));
    }
    out_blob->data = blob;
    out_blob->len = size;
    blob = NULL;
done:
    free(blob);
    free(roles);
    btir_close(&g);
    return s;
}

static void plugin_free_blob(BatonContext ctx, BatonBlob blob) {
    (void)ctx;
    free(blob.data);
}

/* ------------------------------------------------------------------------------------ */
/* Programs: the parsed, validated form of a blob                                       */

typedef struct {
    uint32_t role;
    uint32_t external_index;
    uint32_t rank;
    uint64_t elements;
    int64_t dims[BATON_MAX_RANK];
} ProgTensor;

typedef struct {
    uint32_t op;
    uint32_t in0, in1, out;
} ProgNode;

typedef struct {
    uint32_t n_tensors, n_nodes, n_inputs, n_outputs;
    ProgTensor* tensors;
    ProgNode* nodes;
    uint32_t* inputs;
    uint32_t* outputs;
} Program;

static void program_free(Program* p) {
    free(p->tensors);
    free(p->nodes);
    free(p->inputs);
    free(p->outputs);
    memset(p, 0, sizeof *p);
}

static int prog_same_shape(const ProgTensor* a, const ProgTensor* b) {
    return a->rank == b->rank && memcmp(a->dims, b->dims, sizeof(int64_t) * a->rank) == 0;
}

/* Parses and checks a blob. Everything is verified, since the bytes may be stale or
 * corrupt: sizes, roles, ranks, element counts, indices, shapes and the order of nodes. */
static BatonStatus program_parse(const uint8_t* blob, uint64_t len, Program* p) {
    uint64_t want;
    const uint8_t* q;
    uint32_t i, d;
    uint8_t* defined = NULL;
    BatonStatus s = BATON_STATUS_INVALID_ARGUMENT;
    memset(p, 0, sizeof *p);
    if (blob == NULL || len < BLOB_HEADER_SIZE || memcmp(blob, "CRAB", 4) != 0) {
        return fail(s, "blob: not a blob of the " PLUGIN_NAME " plugin");
    }
    if (btir_le32(blob + 4) != BLOB_VERSION) {
        return fail(s, "blob: version %lu, this build reads %u",
                    (unsigned long)btir_le32(blob + 4), BLOB_VERSION);
    }
    p->n_tensors = btir_le32(blob + 8);
    p->n_nodes = btir_le32(blob + 12);
    p->n_inputs = btir_le32(blob + 16);
    p->n_outputs = btir_le32(blob + 20);
    want = BLOB_HEADER_SIZE + (uint64_t)p->n_tensors * BLOB_TENSOR_SIZE +
           (uint64_t)p->n_nodes * BLOB_NODE_SIZE + ((uint64_t)p->n_inputs + p->n_outputs) * 4;
    if (want != len) {
        return fail(s, "blob: %llu bytes, its tables need %llu", (unsigned long long)len,
                    (unsigned long long)want);
    }
    p->tensors = (ProgTensor*)calloc(p->n_tensors ? p->n_tensors : 1, sizeof(ProgTensor));
    p->nodes = (ProgNode*)calloc(p->n_nodes ? p->n_nodes : 1, sizeof(ProgNode));
    p->inputs = (uint32_t*)calloc(p->n_inputs ? p->n_inputs : 1, sizeof(uint32_t));
    p->outputs = (uint32_t*)calloc(p->n_outputs ? p->n_outputs : 1, sizeof(uint32_t));
    defined = (uint8_t*)calloc(p->n_tensors ? p->n_tensors : 1, 1);
    if (!p->tensors || !p->nodes || !p->inputs || !p->outputs || !defined) {
        s = fail(BATON_STATUS_ERROR, "blob: out of memory");
        goto bad;
    }
    q = blob + BLOB_HEADER_SIZE;
    for (i = 0; i < p->n_tensors; i++, q += BLOB_TENSOR_SIZE) {
        ProgTensor* t = &p->tensors[i];
        uint64_t elements = 1;
        t->role = btir_le32(q);
        t->external_index = btir_le32(q + 4);
        t->rank = btir_le32(q + 8);
        t->elements = btir_le64(q + 16);
        if (t->role > ROLE_TEMP || t->rank > BATON_MAX_RANK) {
            s = fail(s, "blob: tensor %lu has role %lu rank %lu", (unsigned long)i,
                     (unsigned long)t->role, (unsigned long)t->rank);
            goto bad;
        }
        for (d = 0; d < t->rank; d++) {
            uint64_t extent = btir_le64(q + 24 + 8 * d);
            if (extent > INT64_MAX || (extent != 0 && elements > UINT64_MAX / extent)) {
                s = fail(s, "blob: tensor %lu has a bad extent", (unsigned long)i);
                goto bad;
            }
            t->dims[d] = (int64_t)extent;
            elements *= extent;
        }
        if (t->role != ROLE_UNUSED &&
            (elements != t->elements || elements > SIZE_MAX / sizeof(float))) {
            s = fail(s, "blob: tensor %lu has %llu elements, its shape %llu", (unsigned long)i,
                     (unsigned long long)t->elements, (unsigned long long)elements);
            goto bad;
        }
    }
    /* The layout is nodes, then inputs, then outputs; check them in execution order:
     * constants and inputs are defined first, each node only reads what is defined. */
    {
        const uint8_t* nodes_at = q;
        const uint8_t* inputs_at = nodes_at + (size_t)p->n_nodes * BLOB_NODE_SIZE;
        const uint8_t* outputs_at = inputs_at + (size_t)p->n_inputs * 4;
        for (i = 0; i < p->n_tensors; i++) {
            if (p->tensors[i].role == ROLE_CONST) defined[i] = 1;
        }
        for (i = 0; i < p->n_inputs; i++) {
            uint32_t t = btir_le32(inputs_at + 4 * (size_t)i);
            if (t >= p->n_tensors || p->tensors[t].role != ROLE_INPUT || defined[t]) {
                s = fail(s, "blob: bad input %lu", (unsigned long)i);
                goto bad;
            }
            p->inputs[i] = t;
            defined[t] = 1;
        }
        for (i = 0; i < p->n_nodes; i++) {
            const uint8_t* r = nodes_at + (size_t)i * BLOB_NODE_SIZE;
            ProgNode* n = &p->nodes[i];
            n->op = btir_le32(r);
            n->in0 = btir_le32(r + 4);
            n->in1 = btir_le32(r + 8);
            n->out = btir_le32(r + 12);
            if ((n->op != BATON_OP_RELU && n->op != BATON_OP_ADD) || n->in0 >= p->n_tensors ||
                n->out >= p->n_tensors || !defined[n->in0] ||
                (n->op == BATON_OP_RELU && n->in1 != NO_TENSOR) ||
                (n->op == BATON_OP_ADD && (n->in1 >= p->n_tensors || !defined[n->in1]))) {
                s = fail(s, "blob: node %lu is malformed", (unsigned long)i);
                goto bad;
            }
            if (defined[n->out] ||
                (p->tensors[n->out].role != ROLE_TEMP && p->tensors[n->out].role != ROLE_OUTPUT) ||
                !prog_same_shape(&p->tensors[n->in0], &p->tensors[n->out]) ||
                (n->op == BATON_OP_ADD &&
                 !prog_same_shape(&p->tensors[n->in1], &p->tensors[n->out]))) {
                s = fail(s, "blob: node %lu has a bad output", (unsigned long)i);
                goto bad;
            }
            defined[n->out] = 1;
        }
        for (i = 0; i < p->n_tensors; i++) {
            if ((p->tensors[i].role == ROLE_TEMP || p->tensors[i].role == ROLE_OUTPUT) &&
                !defined[i]) {
                s = fail(s, "blob: tensor %lu is never computed", (unsigned long)i);
                goto bad;
            }
        }
        for (i = 0; i < p->n_outputs; i++) {
            uint32_t t = btir_le32(outputs_at + 4 * (size_t)i);
            if (t >= p->n_tensors || p->tensors[t].role != ROLE_OUTPUT || defined[t] != 1) {
                s = fail(s, "blob: bad output %lu", (unsigned long)i);
                goto bad;
            }
            p->outputs[i] = t;
            defined[t] = 2; /* each output listed once */
        }
        for (i = 0; i < p->n_tensors; i++) {
            if (p->tensors[i].role == ROLE_OUTPUT && defined[i] != 2) {
                s = fail(s, "blob: output tensor %lu is not in the output list", (unsigned long)i);
                goto bad;
            }
        }
    }
    free(defined);
    return BATON_STATUS_OK;
bad:
    free(defined);
    program_free(p);
    return s;
}

static uint32_t plugin_blob_compatibility(BatonContext ctx, const uint8_t* blob,
                                          uint64_t blob_len) {
    const PluginContext* c;
    Program p;
    if (check_context(ctx, &c) != BATON_STATUS_OK) return BATON_COMPAT_UNSUPPORTED;
    if (program_parse(blob, blob_len, &p) != BATON_STATUS_OK) return BATON_COMPAT_UNSUPPORTED;
    program_free(&p);
    return BATON_COMPAT_OPTIMAL;
}

/* ------------------------------------------------------------------------------------ */
/* Handles                                                                              */

typedef struct {
    uint32_t magic;
    Program prog;
    float** owned; /* per tensor: the buffer of a CONST or TEMP tensor, else NULL */
    float** bound; /* per tensor: where it lives during the current execute */
} PluginHandle;

static void handle_free(PluginHandle* h) {
    uint32_t i;
    if (h == NULL) return;
    if (h->owned != NULL) {
        for (i = 0; i < h->prog.n_tensors; i++) free(h->owned[i]);
    }
    free(h->owned);
    free(h->bound);
    program_free(&h->prog);
    h->magic = 0;
    free(h);
}

static BatonStatus plugin_init(BatonContext ctx, uint32_t device, const uint8_t* blob,
                               uint64_t blob_len, const BatonTensorView* consts,
                               uint32_t const_count, BatonHandle* out_handle) {
    const PluginContext* c;
    PluginHandle* h;
    uint32_t i, d;
    BatonStatus s = check_context(ctx, &c);
    if (s != BATON_STATUS_OK) return s;
    if (out_handle == NULL) return fail(BATON_STATUS_INVALID_ARGUMENT, "init: out_handle is NULL");
    if (device != 0) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "no device %lu", (unsigned long)device);
    }
    if (consts == NULL && const_count != 0) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "init: consts is NULL");
    }
    h = (PluginHandle*)calloc(1, sizeof *h);
    if (h == NULL) return fail(BATON_STATUS_ERROR, "init: out of memory");
    h->magic = HANDLE_MAGIC;
    s = program_parse(blob, blob_len, &h->prog);
    if (s != BATON_STATUS_OK) {
        free(h);
        return s;
    }
    h->owned = (float**)calloc(h->prog.n_tensors ? h->prog.n_tensors : 1, sizeof(float*));
    h->bound = (float**)calloc(h->prog.n_tensors ? h->prog.n_tensors : 1, sizeof(float*));
    if (h->owned == NULL || h->bound == NULL) {
        handle_free(h);
        return fail(BATON_STATUS_ERROR, "init: out of memory");
    }
    for (i = 0; i < h->prog.n_tensors; i++) {
        const ProgTensor* t = &h->prog.tensors[i];
        size_t bytes = (size_t)t->elements * sizeof(float);
        if (t->role != ROLE_CONST && t->role != ROLE_TEMP) continue;
        if (bytes != 0) {
            h->owned[i] = (float*)malloc(bytes);
            if (h->owned[i] == NULL) {
                handle_free(h);
                return fail(BATON_STATUS_ERROR, "init: out of memory for %lu bytes",
                            (unsigned long)bytes);
            }
        }
        if (t->role == ROLE_CONST) {
            /* the view is borrowed for this call only: copy the values */
            const BatonTensorView* v;
            int ok;
            if (t->external_index >= const_count) {
                handle_free(h);
                return fail(BATON_STATUS_INVALID_ARGUMENT,
                            "init: the blob needs constant view %lu, %lu were passed",
                            (unsigned long)t->external_index, (unsigned long)const_count);
            }
            v = &consts[t->external_index];
            ok = v->dtype == BATON_DTYPE_F32 && v->rank == t->rank &&
                 v->byte_len == (uint64_t)bytes && (bytes == 0 || v->data != NULL) &&
                 (t->rank == 0 || v->shape != NULL);
            for (d = 0; ok && d < t->rank; d++) ok = v->shape[d] == t->dims[d];
            if (!ok) {
                handle_free(h);
                return fail(BATON_STATUS_INVALID_ARGUMENT,
                            "init: constant view %lu does not match the one given to compile",
                            (unsigned long)t->external_index);
            }
            if (bytes != 0) memcpy(h->owned[i], v->data, bytes);
        }
        h->bound[i] = h->owned[i];
    }
    *out_handle = h;
    return BATON_STATUS_OK;
}

/* Checks a view against a program tensor; `what` is "input" or "output". */
static BatonStatus check_view(const BatonTensorView* v, const ProgTensor* t, const char* what,
                              uint32_t index) {
    uint32_t d;
    uint64_t bytes = t->elements * sizeof(float);
    if (v->dtype != BATON_DTYPE_F32) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "%s %lu: dtype code %lu, expected f32 (%u)",
                    what, (unsigned long)index, (unsigned long)v->dtype, BATON_DTYPE_F32);
    }
    if (v->rank != t->rank || (v->shape == NULL && (v->rank > 0 || what[0] == 'o'))) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "%s %lu: rank %lu, expected %lu", what,
                    (unsigned long)index, (unsigned long)v->rank, (unsigned long)t->rank);
    }
    for (d = 0; d < t->rank; d++) {
        if (v->shape[d] != t->dims[d]) {
            return fail(BATON_STATUS_INVALID_ARGUMENT,
                        "%s %lu: dimension %lu is %lld, expected %lld", what,
                        (unsigned long)index, (unsigned long)d, (long long)v->shape[d],
                        (long long)t->dims[d]);
        }
    }
    if (v->byte_len != bytes) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "%s %lu: byte_len %llu, expected %llu",
                    what, (unsigned long)index, (unsigned long long)v->byte_len,
                    (unsigned long long)bytes);
    }
    if (bytes != 0 && (v->data == NULL || (uintptr_t)v->data % sizeof(float) != 0)) {
        return fail(BATON_STATUS_INVALID_ARGUMENT, "%s %lu: data is NULL or misaligned", what,
                    (unsigned long)index);
    }
    return BATON_STATUS_OK;
}

static BatonStatus plugin_execute(BatonHandle handle, const BatonTensorView* inputs,
                                  uint32_t input_count, BatonTensorView* outputs,
                                  uint32_t output_count) {
    PluginHandle* h = (PluginHandle*)handle;
    const Program* p;
    uint32_t i, d;
    if (h == NULL || h->magic != HANDLE_MAGIC) {
        return fail(BATON_STATUS_INVALID_ARGUMENT,
                    "execute: not a handle of the " PLUGIN_NAME " plugin");
    }
    p = &h->prog;
    if (input_count != p->n_inputs || (inputs == NULL && input_count != 0)) {
        return fail(BATON_STATUS_INVALID_ARGUMENT,
                    "execute: %lu inputs passed, the partition has %lu",
                    (unsigned long)input_count, (unsigned long)p->n_inputs);
    }
    if (output_count != p->n_outputs || (outputs == NULL && output_count != 0)) {
        return fail(BATON_STATUS_INVALID_ARGUMENT,
                    "execute: %lu outputs passed, the partition has %lu",
                    (unsigned long)output_count, (unsigned long)p->n_outputs);
    }
    for (i = 0; i < input_count; i++) {
        BatonStatus s = check_view(&inputs[i], &p->tensors[p->inputs[i]], "input", i);
        if (s != BATON_STATUS_OK) return s;
        h->bound[p->inputs[i]] = (float*)inputs[i].data;
    }
    for (i = 0; i < output_count; i++) {
        BatonStatus s = check_view(&outputs[i], &p->tensors[p->outputs[i]], "output", i);
        if (s != BATON_STATUS_OK) return s;
        h->bound[p->outputs[i]] = (float*)outputs[i].data;
    }
    for (i = 0; i < p->n_nodes; i++) {
        const ProgNode* n = &p->nodes[i];
        size_t count = (size_t)p->tensors[n->out].elements, k;
        const float* x = h->bound[n->in0];
        float* y = h->bound[n->out];
        if (n->op == BATON_OP_RELU) {
            for (k = 0; k < count; k++) y[k] = x[k] > 0.0f ? x[k] : 0.0f;
        } else {
            const float* z = h->bound[n->in1];
            for (k = 0; k < count; k++) y[k] = x[k] + z[k];
        }
    }
    /* report the shape produced: always the compiled one */
    for (i = 0; i < output_count; i++) {
        const ProgTensor* t = &p->tensors[p->outputs[i]];
        outputs[i].rank = t->rank;
        for (d = 0; d < t->rank; d++) outputs[i].shape[d] = t->dims[d];
    }
    return BATON_STATUS_OK;
}

static void plugin_destroy(BatonHandle handle) {
    handle_free((PluginHandle*)handle);
}

/* ------------------------------------------------------------------------------------ */
/* The descriptor and the entry point                                                   */

#if defined(BATON_TEST_WRONG_MAJOR)
#define DESCRIPTOR_MAJOR 2u
#else
#define DESCRIPTOR_MAJOR BATON_ABI_MAJOR
#endif

#if defined(BATON_TEST_SHORT_STRUCT)
#define DESCRIPTOR_SIZE 24u
#elif defined(BATON_TEST_V1_0)
#define DESCRIPTOR_SIZE ((uint32_t)BATON_DESCRIPTOR_V1_SIZE)
#else
#define DESCRIPTOR_SIZE ((uint32_t)sizeof(BatonDescriptor))
#endif

static const BatonDescriptor k_descriptor = {
    .abi_major = DESCRIPTOR_MAJOR,
#if defined(BATON_TEST_V1_0)
    .abi_minor = 0u,
#else
    .abi_minor = BATON_ABI_MINOR,
#endif
    .struct_size = DESCRIPTOR_SIZE,
    .concurrency = BATON_CONCURRENCY_SERIALIZED_PER_HANDLE,
    .name = PLUGIN_NAME,
    .version = PLUGIN_VERSION,
    .build_id = PLUGIN_BUILD_ID,
    .features = 0,
    .option_count = 0,
    .reserved = 0,
    .options = NULL,
    .create = plugin_create,
    .destroy_context = plugin_destroy_context,
    .last_error = plugin_last_error,
    .available = plugin_available,
    .device_count = plugin_device_count,
    .device_info = plugin_device_info,
    .supports = plugin_supports,
    .compile = plugin_compile,
    .blob_compatibility = plugin_blob_compatibility,
    .free_blob = plugin_free_blob,
    .init = plugin_init,
    .execute = plugin_execute,
    .destroy = plugin_destroy,
#if !defined(BATON_TEST_V1_0)
    /* 1.2: the graphs it reads; it keeps nothing of a blob, so no init_retained. */
    .btir_minor = BATON_TEST_BTIR_MINOR,
#endif
};

#if defined(BATON_TEST_NO_ENTRY)
/* The library still links and exports a function, just not the one a host looks for. */
BATON_EXPORT const BatonDescriptor* baton_test_renamed_entry(void);
BATON_EXPORT const BatonDescriptor* baton_test_renamed_entry(void) {
    return &k_descriptor;
}
#else
BATON_EXPORT const BatonDescriptor* baton_delegate_entry(void) {
    return &k_descriptor;
}
#endif
