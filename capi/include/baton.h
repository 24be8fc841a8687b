/*
 * baton.h -- the Baton runtime's C API, version 1.0 (BATON_API_MAJOR 1, BATON_API_MINOR 0).
 *
 * This is the API a program uses to run models on Baton: create an engine (the configured
 * plugins, loaded and proven by probe), load a model (.baton program, .btir or .onnx),
 * make a session (the model compiled for bound dimensions or for bounds), and run it on
 * buffers the caller owns, once or step by step with carried state. It is separate from
 * baton_delegate.h, the contract between the host and its plugins: a program that embeds
 * Baton includes this header and links libbaton (libbaton.so or libbaton.a, built by the
 * baton-capi crate), and never sees the delegate ABI.
 *
 * Versions follow the delegate header's rule. A new minor only appends: new functions, new
 * status codes, new dtype codes. No struct of this header changes size or layout within a
 * major version. A program checks, once, that the library it runs against has its major:
 *
 *     if ((baton_api_version() >> 16) != BATON_API_MAJOR) { ... refuse ... }
 *
 * Status and errors. Every function that can fail returns a BatonResult (named apart from
 * the delegate ABI's BatonStatus, so that both headers may be included together): BATON_OK (0) or
 * one of the BATON_ERROR_* codes. The message of the calling thread's last failure is
 * baton_last_error(); it stays valid until the same thread's next failing call. Nothing
 * unwinds across this boundary: an internal panic is caught and returned as
 * BATON_ERROR_INTERNAL. A NULL pointer where one is required, a handle of the wrong kind,
 * an index past a count or a buffer of the wrong size is an error, not undefined
 * behaviour; a dangling pointer (a handle used after its free) cannot be detected.
 *
 * Ownership. Every handle a baton_*_create or baton_model_load returns is freed by its
 * baton_*_free (NULL is accepted and ignored). A session keeps its engine alive: the
 * engine and model may be freed while sessions made from them are still in use. Strings
 * and arrays the library returns (names, plan rows, device rows) belong to the handle they
 * came from and stay valid until it is freed.
 *
 * Threads. A handle is used by one thread at a time; different sessions may run on
 * different threads at once.
 *
 * Buffers. Tensors are dense and row-major. baton_session_run reads each input buffer once
 * (into the session's arena) and writes each output once (from the arena into the buffer
 * the caller lends): no other copy is made and nothing is allocated per run on that path.
 */
#ifndef BATON_H
#define BATON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------ */
/* Versions and limits                                                                  */

/* The major version: a library of another major is not compatible with this header. */
#define BATON_API_MAJOR 1u
/* The minor version of this header; minors only append. */
#define BATON_API_MINOR 0u
/* The most dimensions a tensor of this API has: the delegate ABI's limit, defined the same
 * (token for token) so that both headers may be included together. */
#define BATON_MAX_RANK 8

/* ------------------------------------------------------------------------------------ */
/* Status codes                                                                         */

typedef int32_t BatonResult;

#define BATON_OK 0
/* A NULL pointer, a handle of the wrong kind, text that is not UTF-8, an index past a
 * count, an unknown dtype code, a state or dimension name the model does not have. */
#define BATON_ERROR_INVALID_ARGUMENT 1
/* The config: unreadable, not valid TOML, an unknown key, an option a plugin refuses, a
 * plugin marked `required` that is unusable. */
#define BATON_ERROR_CONFIG 2
/* The model file: unreadable, of an unknown format, malformed, or a program that does
 * not load. */
#define BATON_ERROR_MODEL 3
/* The inputs of a run or the dims of a session: a wrong dtype, shape, count or buffer
 * size, a dimension unbound or above its bound. */
#define BATON_ERROR_INPUT 4
/* An output buffer smaller than its output: the BatonTensor's `size` says how many bytes
 * it needs. */
#define BATON_ERROR_BUFFER_TOO_SMALL 5
/* A plugin failed (loading, a call) in a way the config's fallback rules do not absorb. */
#define BATON_ERROR_PLUGIN 6
/* Any other failure while compiling or running (a node the host cannot run, a size over
 * a limit). */
#define BATON_ERROR_RUNTIME 7
/* A bug in Baton, caught at the boundary (a panic); the message says where. */
#define BATON_ERROR_INTERNAL 8

/* ------------------------------------------------------------------------------------ */
/* Element types: the same codes as the delegate ABI's BATON_DTYPE_* (baton_delegate.h),  */
/* defined here only when that header has not been included.                            */

#ifndef BATON_DTYPE_F32
#define BATON_DTYPE_F32 1u
#define BATON_DTYPE_F16 2u
#define BATON_DTYPE_I8 3u
#define BATON_DTYPE_U8 4u
#define BATON_DTYPE_I32 5u
#define BATON_DTYPE_I64 6u
#define BATON_DTYPE_BOOL 7u
#define BATON_DTYPE_F64 8u
#define BATON_DTYPE_BF16 9u
#define BATON_DTYPE_I16 10u
#define BATON_DTYPE_U16 11u
#define BATON_DTYPE_U32 12u
#define BATON_DTYPE_U64 13u
#endif

/* ------------------------------------------------------------------------------------ */
/* Handles                                                                              */

typedef struct BatonEngine BatonEngine;
typedef struct BatonModel BatonModel;
typedef struct BatonSession BatonSession;

/* ------------------------------------------------------------------------------------ */
/* Plain structs                                                                        */

/* A declared (model) or bound (session) tensor. */
typedef struct BatonTensorInfo {
    const char *name;
    uint32_t dtype;                        /* a BATON_DTYPE_* code */
    uint32_t rank;
    int64_t shape[BATON_MAX_RANK];         /* each extent; -1 where the axis is symbolic */
    const char *dim_names[BATON_MAX_RANK]; /* the symbolic dimension's name, else NULL */
} BatonTensorInfo;

/* A tensor lent to a run. For an input, the caller fills every field and `size` is the
 * byte length of `data` (exactly the shape's). For an output, the caller sets `data` and
 * `size` (the buffer's capacity in bytes); a successful run writes `dtype`, `rank`,
 * `shape` and sets `size` to the bytes written. */
typedef struct BatonTensor {
    uint32_t dtype;
    uint32_t rank;
    int64_t shape[BATON_MAX_RANK];
    void *data;
    size_t size;
} BatonTensor;

/* A value for a symbolic dimension: a binding (baton_session_create) or an upper bound
 * (baton_session_create_bounded). */
typedef struct BatonDim {
    const char *name;
    int64_t value;
} BatonDim;

/* A state carried from an output of one step to an input of the next. */
typedef struct BatonStatePair {
    const char *input;
    const char *output;
} BatonStatePair;

/* Where one node runs, and why (the rows `baton plan` prints). */
typedef struct BatonPlanRow {
    const char *node;   /* the node's name */
    const char *op;     /* its op, as ONNX names it */
    const char *target; /* the backend that runs it, or "host" */
    int64_t partition;  /* its partition's index, -1 on the host */
    const char *reason; /* why it runs there (sentences joined by "; ") */
} BatonPlanRow;

/* A configured plugin: a backend that came up, or one that did not (`usable` 0, `device`
 * empty, `detail` the reason). */
typedef struct BatonDeviceRow {
    const char *backend; /* the name the config and the plan use */
    const char *plugin;  /* the plugin's own name and version, or its file */
    const char *device;  /* the device's name */
    int32_t usable;      /* 1 when its probe passed and partitions may go to it */
    int32_t required;    /* 1 when the config marks it `required` */
    const char *detail;  /* the probe's verdict, or why it did not come up */
} BatonDeviceRow;

/* One output of one delegated partition against the reference executor
 * (baton_session_check; `baton run --check`). */
typedef struct BatonCheckRow {
    int64_t partition;      /* the partition's index in the plan */
    const char *backend;    /* the plugin that ran it */
    int64_t nodes;          /* its node count */
    const char *output;     /* the output tensor's name */
    uint32_t dtype;         /* a BATON_DTYPE_* code */
    uint32_t passed;        /* 1 when every element is within tolerance */
    double max_abs;         /* the largest absolute error */
    double max_rel;         /* the largest relative error (elements with a nonzero reference) */
    uint64_t max_ulp;       /* the largest distance in units in the last place */
    uint64_t past;          /* elements past tolerance */
    uint64_t elements;
    double tolerance_abs;   /* the conformance kit's [model] rule for the dtype */
    double tolerance_rel;
    uint64_t tolerance_ulp;
    const char *first_node; /* the partition's first node past tolerance, NULL when none */
    const char *first_op;   /* its op, NULL when none */
} BatonCheckRow;

/* ------------------------------------------------------------------------------------ */
/* Functions                                                                            */

/* (BATON_API_MAJOR << 16) | BATON_API_MINOR of the library. */
uint32_t baton_api_version(void);

/* The message of this thread's last failed call ("" when none failed). Never NULL. */
const char *baton_last_error(void);

/* An engine from a config file (TOML; relative plugin paths are relative to the file),
 * or, when `config_path` is NULL, with no plugins: everything runs on the host's portable
 * kernels. */
BatonResult baton_engine_create(const char *config_path, BatonEngine **out);

/* An engine from config text; relative plugin paths are relative to `base_dir` (NULL: the
 * current directory). */
BatonResult baton_engine_create_from_string(const char *config_toml, const char *base_dir,
                                            BatonEngine **out);

void baton_engine_free(BatonEngine *engine);

/* The configured plugins: those that came up, in priority order, then those that did
 * not. */
BatonResult baton_engine_device_count(const BatonEngine *engine, size_t *out);
BatonResult baton_engine_device(const BatonEngine *engine, size_t index, BatonDeviceRow *out);

/* A model file: a compiled .baton program, a .btir graph or an .onnx model. */
BatonResult baton_model_load(const char *path, BatonModel **out);
void baton_model_free(BatonModel *model);

/* The model's declared inputs and outputs, symbolic dimensions by name. */
BatonResult baton_model_input_count(const BatonModel *model, size_t *out);
BatonResult baton_model_output_count(const BatonModel *model, size_t *out);
BatonResult baton_model_input(const BatonModel *model, size_t index, BatonTensorInfo *out);
BatonResult baton_model_output(const BatonModel *model, size_t index, BatonTensorInfo *out);

/* A session of `model` on `engine` with each symbolic dimension bound (`dims`, `n_dims`
 * entries; NULL and 0 for a model without any). A name the model does not have is
 * refused. */
BatonResult baton_session_create(BatonEngine *engine, BatonModel *model, const BatonDim *dims,
                                 size_t n_dims, BatonSession **out);

/* A session for every binding up to `bounds`: memory is planned once at the bounds, and
 * each run takes inputs of any extents within them (compiled per binding, cached). Every
 * symbolic dimension of the inputs needs a bound. Runs of a bounded session copy their
 * inputs once more, and it cannot stream. */
BatonResult baton_session_create_bounded(BatonEngine *engine, BatonModel *model,
                                         const BatonDim *bounds, size_t n_bounds,
                                         BatonSession **out);

void baton_session_free(BatonSession *session);

/* The session's inputs and outputs, with the bound extents (a bounded session: as
 * declared). */
BatonResult baton_session_input_count(const BatonSession *session, size_t *out);
BatonResult baton_session_output_count(const BatonSession *session, size_t *out);
BatonResult baton_session_input(const BatonSession *session, size_t index, BatonTensorInfo *out);
BatonResult baton_session_output(const BatonSession *session, size_t index,
                                 BatonTensorInfo *out);

/* Runs the model once: `inputs` in the model's input order, `outputs` in its output order,
 * every one of each given. */
BatonResult baton_session_run(BatonSession *session, const BatonTensor *inputs, size_t n_inputs,
                              BatonTensor *outputs, size_t n_outputs);

/* Starts carrying state (again, from zeros): after this, baton_session_step runs the model
 * with each pair's input taken from its output of the previous step. */
BatonResult baton_session_stream(BatonSession *session, const BatonStatePair *pairs,
                                 size_t n_pairs);

/* One step: `inputs` are the inputs that are not state, `outputs` the outputs that are
 * not state, each in model order. A failed step leaves the state as it was. */
BatonResult baton_session_step(BatonSession *session, const BatonTensor *inputs,
                               size_t n_inputs, BatonTensor *outputs, size_t n_outputs);

/* Puts every state back to zeros. */
BatonResult baton_session_reset_state(BatonSession *session);

/* Runs the model's delegated partitions also on the reference executor with the same
 * inputs (as `baton run --check`): each partition runs on its plugin with the reference's
 * values of its inputs, its outputs are compared with the reference's, and where one is
 * past tolerance, prefixes of the partition find its first node past tolerance. `*n_rows`
 * is set to the row count (one per partition and output), read with
 * baton_session_check_row; the rows stay valid until the next check or the session's free.
 * A bounded session cannot check (BATON_ERROR_INVALID_ARGUMENT). */
BatonResult baton_session_check(BatonSession *session, const BatonTensor *inputs,
                                size_t n_inputs, size_t *n_rows);
BatonResult baton_session_check_row(const BatonSession *session, size_t index,
                                    BatonCheckRow *out);

/* Where each node runs and why, one row per node in the model's node order. A bounded
 * session is planned per binding at run time: it has no plan to give here
 * (BATON_ERROR_INVALID_ARGUMENT). */
BatonResult baton_session_plan_size(const BatonSession *session, size_t *out);
BatonResult baton_session_plan_row(const BatonSession *session, size_t index,
                                   BatonPlanRow *out);

#ifdef __cplusplus
}
#endif

#endif /* BATON_H */
