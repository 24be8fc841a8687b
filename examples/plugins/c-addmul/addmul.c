/*
 * c-addmul: f32 Add, Sub and Mul with numpy broadcasting, a complete Baton plugin in C11.
 * Everything else is declined with a reason. The blob is the subgraph's own BTIR bytes,
 * read again by init with the public reader; constants are copied at init (the views are
 * borrowed for the call only). Build:
 *   cc -std=c11 -O2 -shared -fPIC -I<baton>/delegate-api/include addmul.c -o libc_addmul.so
 */
#include "baton_delegate.h"
#include "btir_reader.h" /* and with it <stdio.h>, <stdlib.h>, <string.h> */

static _Thread_local char error_text[300];

static BatonStatus fail(BatonStatus status, const char* why) {
    snprintf(error_text, sizeof error_text, "c-addmul: %s", why);
    return status;
}

static const char* last_error(void) { return error_text; }

/* No options and no state: every context is the same static one (the header allows it). */
static int the_context;

static BatonStatus create(const BatonOptionValue* o, uint32_t n, BatonContext* out) {
    if (n != 0) return fail(BATON_STATUS_INVALID_ARGUMENT, "takes no options");
    (void)o;
    *out = &the_context;
    return BATON_STATUS_OK;
}

static void destroy_context(BatonContext ctx) { (void)ctx; }
static uint32_t available(BatonContext ctx) { (void)ctx; return 1; }
static uint32_t device_count(BatonContext ctx) { (void)ctx; return 1; }

static BatonStatus device_info(BatonContext ctx, uint32_t i, BatonDeviceInfo* out) {
    (void)ctx;
    if (i != 0) return fail(BATON_STATUS_INVALID_ARGUMENT, "one device only");
    /* Every field of BatonDeviceInfo is a 1.0 field, which every host's struct has. */
    *out = (BatonDeviceInfo){sizeof *out, BATON_DEVICE_CPU, "cpu (c-addmul)", "0.1.0", 0};
    return BATON_STATUS_OK;
}

/* Why node n is declined (and the reason code), or NULL when the plugin runs it. */
static const char* decline(const btir_graph* g, const btir_node* n, uint32_t* reason) {
    const btir_tensor *a, *b, *y;
    btir_bcast it;
    *reason = BATON_REASON_OP;
    if ((n->op != BATON_OP_ADD && n->op != BATON_OP_SUB && n->op != BATON_OP_MUL) ||
        n->n_inputs != 2 || n->n_outputs != 1)
        return "not implemented (Add, Sub and Mul only)";
    a = &g->tensors[btir_node_input(n, 0)];
    b = &g->tensors[btir_node_input(n, 1)];
    y = &g->tensors[btir_node_output(n, 0)];
    *reason = BATON_REASON_DTYPE;
    if (a->dtype != BATON_DTYPE_F32 || b->dtype != BATON_DTYPE_F32) return "f32 only";
    *reason = BATON_REASON_SHAPE;
    if (btir_bcast_init(&it, a, b, y) != 0) return "shapes symbolic, above rank 8 or not broadcast";
    return NULL;
}

static BatonStatus supports(BatonContext ctx, const uint8_t* graph, uint64_t len,
                            const BatonTensorView* c, uint32_t nc, BatonSupportAnswer* ans,
                            uint32_t n_ans) {
    btir_graph g;
    uint32_t i;
    (void)ctx, (void)c, (void)nc;
    if (btir_open(&g, graph, len) != 0) return fail(BATON_STATUS_INVALID_ARGUMENT, g.error);
    if (n_ans != g.n_nodes) return btir_close(&g), fail(BATON_STATUS_INVALID_ARGUMENT, "answer count");
    for (i = 0; i < n_ans; i++) {
        const char* why = decline(&g, &g.nodes[i], &ans[i].reason_code);
        ans[i].supported = why == NULL;
        if (why == NULL) ans[i].reason_code = BATON_REASON_NONE;
        snprintf(ans[i].message, BATON_SUPPORT_MESSAGE_LEN, "%s %s", btir_op_name(g.nodes[i].op),
                 why ? why : "");
    }
    btir_close(&g);
    return BATON_STATUS_OK;
}

/* The blob is the graph itself (it is self-contained: constants are view indices). */
static BatonStatus compile(BatonContext ctx, uint32_t dev, const uint8_t* graph, uint64_t len,
                           const BatonTensorView* c, uint32_t nc, BatonBlob* out) {
    (void)ctx, (void)dev, (void)c, (void)nc;
    if ((out->data = malloc(len)) == NULL) return fail(BATON_STATUS_ERROR, "out of memory");
    memcpy(out->data, graph, len);
    out->len = len;
    return BATON_STATUS_OK;
}

static uint32_t blob_compatibility(BatonContext ctx, const uint8_t* blob, uint64_t len) {
    (void)ctx;
    return len >= 4 && memcmp(blob, "BTIR", 4) == 0 ? BATON_COMPAT_OPTIMAL : BATON_COMPAT_UNSUPPORTED;
}

static void free_blob(BatonContext ctx, BatonBlob blob) { (void)ctx, free(blob.data); }

/* A handle: the blob's bytes, the graph read from them, a buffer per tensor (constants
 * copied in; the graph's inputs and outputs are the host's views at each execute). */
typedef struct { uint8_t* bytes; btir_graph g; float** val; } Exec;

static void destroy(BatonHandle h) {
    Exec* e = h;
    uint32_t i;
    if (e == NULL) return;
    for (i = 0; e->val != NULL && i < e->g.n_tensors; i++) free(e->val[i]);
    btir_close(&e->g), free(e->val), free(e->bytes), free(e);
}

static BatonStatus init(BatonContext ctx, uint32_t dev, const uint8_t* blob, uint64_t len,
                        const BatonTensorView* c, uint32_t nc, BatonHandle* out) {
    Exec* e = calloc(1, sizeof *e);
    uint32_t i;
    (void)ctx, (void)dev;
    if (e == NULL || (e->bytes = malloc(len ? len : 1)) == NULL)
        return destroy(e), fail(BATON_STATUS_ERROR, "out of memory");
    memcpy(e->bytes, blob, len);
    if (btir_open(&e->g, e->bytes, len) != 0) /* the reason is copied before e is freed */
        return fail(BATON_STATUS_INVALID_ARGUMENT, e->g.error), destroy(e), BATON_STATUS_INVALID_ARGUMENT;
    e->val = calloc(e->g.n_tensors + 1, sizeof *e->val);
    for (i = 0; e->val != NULL && i < e->g.n_tensors; i++) {
        const btir_tensor* t = &e->g.tensors[i];
        uint64_t bytes = btir_tensor_bytes(t), k = t->external_index;
        int external = t->storage == BATON_BTIR_STORAGE_EXTERNAL;
        if (bytes == UINT64_MAX || t->storage == BATON_BTIR_STORAGE_INLINE ||
            (external && (k >= nc || c[k].byte_len != bytes)) || !(e->val[i] = malloc(bytes + 4)))
            break;
        if (external) memcpy(e->val[i], c[k].data, bytes);
    }
    if (e->val == NULL || i < e->g.n_tensors)
        return destroy(e), fail(BATON_STATUS_INVALID_ARGUMENT, "bad constant views, or no memory");
    *out = e;
    return BATON_STATUS_OK;
}

/* Points the graph's input (or output) tensors at the host's views, checking each. */
static int bind(const btir_graph* g, float** v, const BatonTensorView* views, uint32_t n,
                uint32_t want, const uint8_t* ids) {
    uint32_t k;
    for (k = 0; k < n && n == want; k++) {
        const btir_tensor* t = &g->tensors[btir_id_at(ids, k)];
        if (views[k].dtype != t->dtype || views[k].byte_len != btir_tensor_bytes(t)) return -1;
        v[btir_id_at(ids, k)] = views[k].data;
    }
    return n == want ? 0 : -1;
}

static BatonStatus execute(BatonHandle h, const BatonTensorView* in, uint32_t n_in,
                           BatonTensorView* out, uint32_t n_out) {
    const Exec* e = h;
    uint32_t i;
    float** v = malloc((e->g.n_tensors + 1) * sizeof *v); /* this run's buffer per tensor */
    if (v == NULL) return fail(BATON_STATUS_ERROR, "out of memory");
    memcpy(v, e->val, e->g.n_tensors * sizeof *v);
    if (bind(&e->g, v, in, n_in, e->g.n_inputs, e->g.inputs_at) != 0 ||
        bind(&e->g, v, out, n_out, e->g.n_outputs, e->g.outputs_at) != 0)
        return free(v), fail(BATON_STATUS_INVALID_ARGUMENT, "views do not match the graph");
    for (i = 0; i < e->g.n_nodes; i++) {
        const btir_node* n = &e->g.nodes[i];
        uint32_t a = btir_node_input(n, 0), b = btir_node_input(n, 1), y = btir_node_output(n, 0);
        float* o = v[y];
        btir_bcast it;
        btir_bcast_init(&it, &e->g.tensors[a], &e->g.tensors[b], &e->g.tensors[y]);
        while (btir_bcast_next(&it))
            *o++ = n->op == BATON_OP_ADD ? v[a][it.a] + v[b][it.b]
                 : n->op == BATON_OP_SUB ? v[a][it.a] - v[b][it.b] : v[a][it.a] * v[b][it.b];
    }
    free(v);
    return BATON_STATUS_OK;
}

static const BatonDescriptor descriptor = {
    .abi_major = BATON_ABI_MAJOR, .abi_minor = BATON_ABI_MINOR,
    .struct_size = sizeof(BatonDescriptor),
    .concurrency = BATON_CONCURRENCY_SERIALIZED_PER_HANDLE,
    .name = "c-addmul", .version = "0.1.0", .build_id = "c-addmul-0.1.0",
    .btir_minor = BATON_WIRE_MINOR, /* btir_reader.h reads every code of this header */
    .create = create, .destroy_context = destroy_context, .last_error = last_error,
    .available = available, .device_count = device_count, .device_info = device_info,
    .supports = supports, .compile = compile, .blob_compatibility = blob_compatibility,
    .free_blob = free_blob, .init = init, .execute = execute, .destroy = destroy,
};

BATON_EXPORT const BatonDescriptor* baton_delegate_entry(void) { return &descriptor; }
