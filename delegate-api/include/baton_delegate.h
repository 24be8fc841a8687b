/*
 * baton_delegate.h -- the Baton delegate ABI, version 1.2 (BATON_ABI_MAJOR 1,
 * BATON_ABI_MINOR 2); what each minor added is marked where it appears.
 *
 * A Baton delegate is a shared library that runs parts of a model graph on some backend
 * (a CPU kernel library, a GPU, an NPU driver). The host loads it at run time, asks it
 * which nodes it can run, hands it those subgraphs to compile, and executes the results.
 * Everything the two sides exchange goes through the one exported function and the plain
 * C structs declared below; no C++ type, allocator or runtime crosses the boundary, so a
 * plugin can be written in C, C++, Rust or anything else that can export a C function.
 *
 * This header is the normative text of the contract. The Rust mirror
 * (delegate-api/src/abi.rs) must agree with it byte for byte; delegate-api/tests/c_abi/
 * compiles this header and compares the size, offset and type of every field and the
 * value of every constant against the Rust definitions, so the two cannot drift apart
 * silently. Rust plugin authors normally use the safe SDK (delegate-api/src/sdk.rs),
 * which implements every rule below for them.
 *
 * Contents
 *   1. The handshake: how a host decides whether it may use a plugin
 *   2. Lifetimes: how long each pointer stays valid
 *   3. Ownership: who frees what
 *   4. Threading
 *   5. Errors and last_error
 *   6. Tensors: views, alignment, outputs
 *   7. Graphs: the BTIR bytes and how constants arrive
 *   8. The order of calls
 *   9. What this contract guarantees that common alternatives leave open
 *
 * ---------------------------------------------------------------------------------------
 * 1. The handshake
 *
 * A plugin exports exactly one symbol, BATON_ENTRY_SYMBOL ("baton_delegate_entry"), of
 * type BatonEntryFn. It takes no arguments, has no side effects a host could observe,
 * and returns the address of the plugin's BatonDescriptor (never NULL).
 *
 * The first three fields of BatonDescriptor -- abi_major, abi_minor, struct_size -- are
 * frozen: they keep their types and offsets in every future version of this ABI. A host
 * reads those 12 bytes, and nothing else, before deciding anything:
 *
 *   - abi_major different from the host's BATON_ABI_MAJOR: the plugin is refused. No
 *     other field is read and no function is called. The refusal message names both
 *     versions.
 *   - struct_size smaller than BATON_DESCRIPTOR_V1_SIZE: the plugin is refused, because
 *     every v1.0 field is mandatory.
 *   - abi_minor newer or older than the host's: accepted. Minor versions only append
 *     fields at the end of a struct and add new codes. A host reads an appended field only
 *     when struct_size shows the plugin filled it in (see BATON_DESCRIPTOR_HAS), so an
 *     old plugin in a new host and a new plugin in an old host both keep working.
 *
 * The same "grow only at the end, say how much you filled" rule applies to every struct
 * that carries a struct_size field (BatonDeviceInfo). Structs without one
 * (BatonTensorView, BatonBlob, BatonSupportAnswer, BatonOptionValue, BatonOptionSpec,
 * BatonQuantView) are fixed for the whole of major version 1.
 *
 * Every function pointer in a v1.0 descriptor must be non-NULL. A plugin with nothing to
 * do in some entry point supplies a function that does nothing.
 *
 * ---------------------------------------------------------------------------------------
 * 2. Lifetimes
 *
 *   - The descriptor, the strings it points to and its option table stay valid and
 *     unchanged from the first call of the entry function until the library is unloaded.
 *     Calling the entry function again returns the same address.
 *   - Everything the host passes to a call -- graph bytes, blob bytes, tensor views, their
 *     shape arrays, quantization arrays, option strings -- is borrowed for the duration of
 *     that call only. A plugin that needs any of it later copies it (weights belong in the
 *     blob or in the handle). The one exception is init_retained (1.2): its blob bytes
 *     and the data its constant views point at stay valid and unchanged until destroy
 *     on the handle it made.
 *   - Strings in a BatonDeviceInfo stay valid while the context that produced them lives.
 *   - The text returned by last_error stays valid until the same thread's next call into
 *     the plugin (any entry point).
 *
 * ---------------------------------------------------------------------------------------
 * 3. Ownership
 *
 * What the plugin allocates, only the plugin frees, through its own functions:
 *
 *   created by          released by           owner of the memory
 *   create              destroy_context       plugin
 *   compile (a blob)    free_blob             plugin (the host never calls free() on it)
 *   init (a handle)     destroy               plugin
 *
 * This keeps each side on its own allocator: a plugin linked against another C runtime,
 * or written in Rust, never sees the host free its memory, and vice versa. The host
 * releases every handle and every blob obtained from a context before destroying that
 * context, and destroys every context before unloading the library.
 *
 * What the host allocates -- input, output and constant buffers, shape arrays, answer
 * slots, the BatonDeviceInfo and BatonBlob it asks to be filled -- the plugin never frees.
 *
 * ---------------------------------------------------------------------------------------
 * 4. Threading
 *
 *   - The entry function may be called from any thread.
 *   - A context may be used from several threads at once: every entry point that takes a
 *     context (available, device_count, device_info, supports, compile,
 *     blob_compatibility, free_blob, init) may overlap with any other on the same context,
 *     so their implementations must be thread-safe. Only destroy_context is exclusive:
 *     nothing else runs on that context (or its handles and blobs) while it is destroyed.
 *   - A handle has no thread affinity: successive calls on it may come from different
 *     threads. The descriptor's `concurrency` field says whether calls may overlap:
 *       BATON_CONCURRENCY_SERIALIZED_PER_HANDLE: the host never runs two calls on the same
 *         handle at the same time (it serializes them); different handles may execute
 *         concurrently on different threads.
 *       BATON_CONCURRENCY_REENTRANT: execute may run on one handle from several threads
 *         at once.
 *     destroy never overlaps any other call on the same handle.
 *   - last_error is per calling thread (thread-local storage in the plugin): an error on
 *     one thread never overwrites or races with the text another thread is reading.
 *
 * ---------------------------------------------------------------------------------------
 * 5. Errors and last_error
 *
 * Every fallible entry point returns a BatonStatus. On any status other than
 * BATON_STATUS_OK the plugin leaves a human-readable explanation (NUL-terminated UTF-8)
 * that the same thread fetches with last_error(); the host copies it into its own error
 * message, so the user reads what the plugin knows ("graph: BTIR truncated at byte 96
 * while reading node inputs") rather than a bare number. last_error never returns NULL;
 * after a successful call its text is unspecified (usually the previous error).
 *
 * Nothing unwinds across this boundary. A Rust panic or a C++ exception raised inside an
 * entry point is caught there and reported as BATON_STATUS_PANIC with its message. After
 * BATON_STATUS_PANIC the host assumes the call had no effect it can rely on (outputs are
 * garbage, out-parameters were not set) and may stop using the context.
 *
 * A failed call leaves no allocation behind for the host to release: out-parameters
 * (*out_ctx, *out_blob, *out_handle) are only meaningful when the status is OK. A failed
 * execute leaves the handle usable; the host may retry or run the partition elsewhere.
 *
 * ---------------------------------------------------------------------------------------
 * 6. Tensors
 *
 * A BatonTensorView describes a dense, row-major (C order) tensor in host memory:
 *   data      the first element. Aligned to BATON_DATA_ALIGNMENT (64) bytes for every view
 *             the host passes (inputs, outputs, constants), so kernels may use aligned
 *             vector loads. NULL only when byte_len is 0.
 *   byte_len  exactly (product of shape) * (element size of dtype); no padding, no stride.
 *   dtype     a BATON_DTYPE_* code.
 *   rank      number of dimensions, 0 (a scalar holding one element) to BATON_MAX_RANK.
 *   shape     `rank` extents (int64_t, >= 0). For outputs, see below.
 *   quant     quantization parameters (kind BATON_QUANT_NONE for plain tensors).
 *
 * Inputs and constants are read-only for the plugin. Output views are preallocated by the
 * host with the shape its own shape inference expects; the plugin writes every byte of
 * every output and never more than byte_len bytes. For outputs `shape` points at
 * BATON_MAX_RANK writable int64_t slots, the first `rank` holding the expected extents.
 * A plugin whose result has another shape (it should not happen, but a plugin must not
 * hide it) writes the shape it actually produced into rank/shape; the host compares
 * rank/shape after every successful execute and refuses a result whose shape differs
 * from the expected one, naming the output.
 *
 * Bounded outputs (1.3). The ops whose output extents depend on operand values
 * (NonMaxSuppression, Unique, Compress) have outputs no caller can size before they run.
 * A plugin that sets BATON_CAP_BOUNDED_OUTPUTS may be given such a node; the graph then
 * declares each of the node's outputs with an upper bound of every extent, the view
 * arrives sized for that bound, and the plugin writes the extents it produced into
 * rank/shape (rank unchanged, each extent at most the bound; the extents that follow
 * from shapes alone exactly as declared) and the data dense in that shape from the start
 * of the buffer; bytes past it are the host's. The bounds of the value-dependent extent:
 *   NonMaxSuppression  batches * classes * min(boxes, max_output_boxes_per_class) rows,
 *                      or batches * classes * boxes when that operand is not a constant
 *                      (none when it is omitted)
 *   Unique             the count of values (or of slices along `axis`)
 *   Compress           the condition's length
 * A host may bound more loosely (it need not read a constant); a plugin accepts any
 * bound at least as large as what the node can write and declines a tighter one.
 * A host sends such a node to no other plugin; it also never gives a plugin a graph in
 * which another node reads such an output (the node's extents decide the shapes after
 * it, so the host plans what follows once it has run). A plugin may still decline the
 * node, or refuse a graph holding it with more nodes (compile: BATON_STATUS_UNSUPPORTED).
 *
 * No output view overlaps another output view or any input view.
 *
 * Graph bytes and blob bytes passed by the host carry no alignment promise: read their
 * multi-byte fields with memcpy.
 *
 * ---------------------------------------------------------------------------------------
 * 7. Graphs: BTIR
 *
 * supports and compile receive a graph serialized as BTIR, version BATON_WIRE_MAJOR.x, a
 * small little-endian format designed to be read from C with memcpy and no generated
 * code. Its normative specification is delegate-api/docs/btir.md (every field, what a
 * reader must refuse and must ignore); delegate-api/include/btir_reader.h is the public,
 * bounds-checked C reader that implements it. In short:
 *
 *   header  "BTIR", u16 major, u16 minor, u32 header_size, u32 flags, u64 data_offset
 *           (header_size: offset of the graph record from the buffer start, 24 today;
 *           readers continue there. flags: 0, unknown bits ignored, never refused.
 *           data_offset: 0 in plugin calls. A different major is refused.)
 *   str     u32 byte length, UTF-8 bytes, (4 - len % 4) % 4 zero bytes of padding
 *   graph   str name; u32 n, tensor[n]; u32 n, node[n]; u32 n, u32 input[n];
 *           u32 n, u32 output[n]
 *   tensor  str name, u32 dtype, u32 rank, dim[rank], quant, storage
 *   dim     u32 BATON_BTIR_DIM_FIXED, u64 extent | u32 BATON_BTIR_DIM_SYMBOLIC, str name
 *   quant   u32 0 | u32 1, f32 scale, i32 zero_point
 *           | u32 2, u32 axis, u32 n, f32 scale[n], i32 zero_point[n]
 *   storage u32 BATON_BTIR_STORAGE_RUNTIME
 *           | u32 BATON_BTIR_STORAGE_INLINE, u64 offset, u64 len
 *           | u32 BATON_BTIR_STORAGE_EXTERNAL, u32 index
 *   node    str name, u32 op, u32 n, u32 input[n], u32 n, u32 output[n], u32 n, attr[n]
 *   attr    str name, u32 kind, value   (BATON_BTIR_ATTR_*: i64 | f32 | u32 n, i64[n]
 *                                        | u32 n, f32[n] | str | u32 len, graph)
 *
 * A graph attribute (1.2) holds a subgraph of a control-flow node (If, Loop) as a graph
 * record of exactly `len` bytes, nested at most BATON_BTIR_MAX_GRAPH_DEPTH deep. Control
 * flow always runs on the host: a host never passes If, Loop or a graph attribute to
 * supports or compile. It cuts control-flow nodes out of the graph it asks about (their
 * outputs arrive as graph inputs) and answers for them itself. Program files on disk may
 * hold them; btir_reader.h validates and skips graph attributes.
 *
 * Tensors and nodes are referred to by their position (u32 index). Nodes are in
 * topological order, and answers[i] of supports belongs to node i. The graph's input and
 * output lists give the order of execute's input and output views. An optional input left
 * out before one that is given is a constant with zero elements (shape [0], a view of
 * byte_len 0); optional inputs left out at the end are not listed.
 *
 * Constants never travel inside the graph across this ABI. Every constant tensor (a
 * weight, a bias, a shape operand) has BATON_BTIR_STORAGE_EXTERNAL storage, and its
 * `index` selects an entry of the constant views passed beside the graph (`consts`,
 * `const_count`). Weights are thus handed over in place, 64-byte aligned, never copied
 * into the graph. INLINE storage exists for program files on disk; a host does not send
 * it to a plugin. init receives the same constant views, in the same order and with the
 * same contents, as the compile that produced the blob (their addresses may differ: the
 * blob may have been compiled in another process or on another machine).
 *
 * The host binds symbolic dimensions before partitioning, so compile only ever sees fixed
 * extents; a plugin that requires them should still check and decline in supports rather
 * than assume.
 *
 * ---------------------------------------------------------------------------------------
 * 8. The order of calls
 *
 *   entry()                          -> descriptor; the handshake of section 1
 *   create(options)                  -> context        (once per configuration)
 *     available, device_count, device_info             (any time)
 *     supports(graph)                -> one answer per node
 *     compile(device, subgraph)      -> blob           (may run ahead of time, elsewhere)
 *     blob_compatibility(blob)       -> can a stored blob be reused by this build?
 *     init(device, blob)             -> handle
 *       execute(handle, in, out)     (any number of times)
 *     destroy(handle); free_blob(blob)
 *   destroy_context(context)
 *
 * ---------------------------------------------------------------------------------------
 * 9. What this contract guarantees that common alternatives leave open
 *
 *   - Versions are checked before anything runs. The version fields sit at fixed offsets
 *     in the first 12 bytes, and the host compares them before it reads any other field
 *     or calls any function; a plugin built for another major is refused with both
 *     version numbers in the message. ExecuTorch backends, and ONNX Runtime's classic
 *     execution providers (subclasses of its C++ provider interface), are C++ objects
 *     tied to the runtime build they were compiled with, and their interfaces carry no
 *     version a loader could compare first: a mismatch surfaces, if at all, as a
 *     misbehaving virtual call.
 *   - Inputs and outputs are separate lists. execute receives the inputs and the outputs
 *     as two arrays with two counts, and the counts are checked. ExecuTorch's backend
 *     execute receives one argument array holding the inputs followed by the outputs, so
 *     the split is something each backend must work out.
 *   - Errors carry text. Every failing status comes with a per-thread message that the
 *     host puts in front of the user. ExecuTorch's backend calls return an error enum and
 *     leave the explanation, if any, to the log.
 *   - Failures are contained. No panic or exception may cross the boundary: a plugin
 *     catches its own and reports BATON_STATUS_PANIC, and the host keeps running. A C++
 *     exception escaping through a C++ plugin interface into a host built with another
 *     compiler or standard library is undefined behaviour.
 *   - Memory never changes allocator (section 3), and every lifetime is written down
 *     (section 2) rather than implied by smart pointers.
 */

#ifndef BATON_DELEGATE_H
#define BATON_DELEGATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------ */
/* Versions and fixed sizes                                                             */

/* The ABI major version. A plugin with another major is refused before any call. */
#define BATON_ABI_MAJOR 1u
/* The ABI minor version of this header. Minors only append: 1.1 added `profile`, 1.2
 * added `btir_minor`, `init_retained` and `memory`, 1.3 gave 1.2's reserved word a
 * meaning (`capabilities`, BATON_CAP_BOUNDED_OUTPUTS). */
#define BATON_ABI_MINOR 3u

/* BatonDescriptor.capabilities bits (1.3). */
/* The plugin runs the ops whose output extents depend on operand values
 * (NonMaxSuppression, Unique, Compress) given bounded outputs: see section 6. */
#define BATON_CAP_BOUNDED_OUTPUTS 1u

/* The name of the one symbol a plugin exports (type BatonEntryFn). */
#define BATON_ENTRY_SYMBOL "baton_delegate_entry"

/* The major and minor version of the BTIR graph format this ABI version carries. 1.1 added
 * op codes (BATON_OP_POW and after); a 1.0 reader refuses a graph holding one of them. 1.2
 * added the dtype codes BATON_DTYPE_F64 and after, BATON_OP_CEIL, BATON_OP_CASTLIKE, and
 * control flow (BATON_OP_IF, BATON_OP_LOOP, BATON_BTIR_ATTR_GRAPH); a host never sends
 * control flow to a plugin (see section 7). 1.3 added BATON_OP_GREATEROREQUAL and after,
 * 1.4 BATON_OP_RANGE to BATON_OP_CUMPROD, 1.5 BATON_OP_ATTENTION to BATON_OP_COL2IM,
 * BATON_OP_DFT to BATON_OP_EINSUM, BATON_OP_NONMAXSUPPRESSION to BATON_OP_LINEARATTENTION
 * and BATON_OP_CAUSALCONVWITHSTATE to BATON_OP_MELWEIGHTMATRIX. */
#define BATON_WIRE_MAJOR 1u
#define BATON_WIRE_MINOR 5u
/* How deeply BTIR subgraphs may nest; readers refuse deeper buffers. */
#define BATON_BTIR_MAX_GRAPH_DEPTH 16u

/* Size of BatonSupportAnswer.message, including its terminating NUL. */
#define BATON_SUPPORT_MESSAGE_LEN 256
/* The most dimensions a BatonTensorView may have. */
#define BATON_MAX_RANK 8
/* Alignment in bytes of every tensor data pointer the host passes. */
#define BATON_DATA_ALIGNMENT 64

/* Marks the entry function as exported from the shared library. */
#ifndef BATON_EXPORT
#if defined(_WIN32)
#define BATON_EXPORT __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define BATON_EXPORT __attribute__((visibility("default")))
#else
#define BATON_EXPORT
#endif
#endif

/* ------------------------------------------------------------------------------------ */
/* Status codes, returned by every fallible entry point                                  */

typedef int32_t BatonStatus;

/* Success. */
#define BATON_STATUS_OK 0
/* A failure; last_error() says why. */
#define BATON_STATUS_ERROR 1
/* The request is well formed but this plugin does not support it (for example, compile
 * on a subgraph it cannot lower after all). The host runs that work elsewhere. */
#define BATON_STATUS_UNSUPPORTED 2
/* An argument is invalid: a corrupt graph or blob, a wrong tensor count, a null pointer,
 * a view whose byte_len does not fit its shape. */
#define BATON_STATUS_INVALID_ARGUMENT 3
/* The plugin caught a panic or exception at its boundary; see section 5. */
#define BATON_STATUS_PANIC 4

/* ------------------------------------------------------------------------------------ */
/* Reason codes of a declined node (BatonSupportAnswer.reason_code), so that hosts and    */
/* reports can group refusals without parsing messages                                  */

/* The node is supported. */
#define BATON_REASON_NONE 0u
/* The op is not implemented by this plugin. */
#define BATON_REASON_OP 1u
/* The dtype of an operand is not supported. */
#define BATON_REASON_DTYPE 2u
/* A shape (rank, extent, symbolic dimension, broadcasting) is outside what it handles. */
#define BATON_REASON_SHAPE 3u
/* An attribute value is not supported. */
#define BATON_REASON_ATTRIBUTE 4u
/* An operand the plugin needs to be constant is computed at run time. */
#define BATON_REASON_NOT_CONSTANT 5u
/* A resource limit (memory, buffer size) would be exceeded. */
#define BATON_REASON_RESOURCE 6u
/* Anything else; the message explains. */
#define BATON_REASON_OTHER 7u

/* ------------------------------------------------------------------------------------ */
/* Concurrency of a handle (BatonDescriptor.concurrency); see section 4                  */

#define BATON_CONCURRENCY_SERIALIZED_PER_HANDLE 0u
#define BATON_CONCURRENCY_REENTRANT 1u

/* ------------------------------------------------------------------------------------ */
/* Answers of blob_compatibility                                                        */

/* The blob runs as well as a fresh compile would. */
#define BATON_COMPAT_OPTIMAL 0u
/* The blob runs, but compiling again would do better (for example, newer kernels). */
#define BATON_COMPAT_PREFER_RECOMPILE 1u
/* The blob cannot be used by this build; compile again. */
#define BATON_COMPAT_UNSUPPORTED 2u

/* ------------------------------------------------------------------------------------ */
/* Option kinds (BatonOptionSpec.kind)                                                  */

/* "true" or "false". */
#define BATON_OPTION_BOOL 0u
/* A decimal integer within [min, max]. */
#define BATON_OPTION_INT 1u
/* A decimal number within [min, max]. */
#define BATON_OPTION_FLOAT 2u
/* Any string. */
#define BATON_OPTION_STRING 3u
/* One of the '|'-separated values in `choices`. */
#define BATON_OPTION_ENUM 4u

/* ------------------------------------------------------------------------------------ */
/* Element types. The same codes are used in BTIR and in BatonTensorView.dtype.           */

#define BATON_DTYPE_F32 1u  /* IEEE binary32 */
#define BATON_DTYPE_F16 2u  /* IEEE binary16 */
#define BATON_DTYPE_I8 3u   /* int8_t */
#define BATON_DTYPE_U8 4u   /* uint8_t */
#define BATON_DTYPE_I32 5u  /* int32_t */
#define BATON_DTYPE_I64 6u  /* int64_t */
#define BATON_DTYPE_BOOL 7u /* one byte, 0 or 1 */
/* Added in wire 1.2. Every element takes a whole number of bytes: the 4- and 2-bit
 * integers one byte each, sign-extended (I4, I2) or zero-extended (U4, U2); the float8
 * formats one byte of their bit pattern; F4E2M1 one byte, its pattern in the low 4 bits. */
#define BATON_DTYPE_F64 8u         /* IEEE binary64 */
#define BATON_DTYPE_BF16 9u        /* bfloat16: the upper 16 bits of an IEEE binary32 */
#define BATON_DTYPE_I16 10u        /* int16_t */
#define BATON_DTYPE_U16 11u        /* uint16_t */
#define BATON_DTYPE_U32 12u        /* uint32_t */
#define BATON_DTYPE_U64 13u        /* uint64_t */
#define BATON_DTYPE_F8E4M3FN 14u   /* float8, bias 7, no inf, NaN S.1111.111 */
#define BATON_DTYPE_F8E4M3FNUZ 15u /* float8, bias 8, no inf, no -0, NaN 0x80 */
#define BATON_DTYPE_F8E5M2 16u     /* float8, bias 15, IEEE inf and NaN */
#define BATON_DTYPE_F8E5M2FNUZ 17u /* float8, bias 16, no inf, no -0, NaN 0x80 */
#define BATON_DTYPE_F8E8M0 18u     /* 2^(bits - 127), NaN 0xFF */
#define BATON_DTYPE_F4E2M1 19u     /* float4, bias 1, no inf or NaN; low 4 bits */
#define BATON_DTYPE_I4 20u         /* -8..7, one per byte */
#define BATON_DTYPE_U4 21u         /* 0..15, one per byte */
#define BATON_DTYPE_I2 22u         /* -2..1, one per byte */
#define BATON_DTYPE_U2 23u         /* 0..3, one per byte */

/* ------------------------------------------------------------------------------------ */
/* Operator codes, as used in BTIR nodes. Semantics, input order and attribute names     */
/* follow the ONNX operator of the same name (see delegate-api/src/ir.rs for the         */
/* differences). Codes are never reused. A later BTIR minor may add codes. A host never  */
/* sends a plugin a code newer than the BTIR minor the plugin reads: it declines such    */
/* nodes for the plugin itself, so declining stays per node. A graph a plugin cannot read */
/* at all (corrupt, or a code it should know but does not) is not a question it can      */
/* answer: supports then returns BATON_STATUS_INVALID_ARGUMENT, and the host treats every */
/* node as declined.                                                                     */

#define BATON_OP_MATMUL 1u
#define BATON_OP_GEMM 2u
#define BATON_OP_CONV 3u
#define BATON_OP_ADD 4u
#define BATON_OP_SUB 5u
#define BATON_OP_MUL 6u
#define BATON_OP_DIV 7u
#define BATON_OP_RELU 8u
#define BATON_OP_CLIP 9u
#define BATON_OP_SIGMOID 10u
#define BATON_OP_TANH 11u
#define BATON_OP_SOFTMAX 12u
#define BATON_OP_MAXPOOL 13u
#define BATON_OP_AVERAGEPOOL 14u
#define BATON_OP_GLOBALAVERAGEPOOL 15u
#define BATON_OP_RESHAPE 16u
#define BATON_OP_TRANSPOSE 17u
#define BATON_OP_CONCAT 18u
#define BATON_OP_FLATTEN 19u
#define BATON_OP_POW 20u
#define BATON_OP_SQRT 21u
#define BATON_OP_EXP 22u
#define BATON_OP_LOG 23u
#define BATON_OP_NEG 24u
#define BATON_OP_ABS 25u
#define BATON_OP_ERF 26u
#define BATON_OP_LEAKYRELU 27u
#define BATON_OP_HARDSIGMOID 28u
#define BATON_OP_HARDSWISH 29u
#define BATON_OP_GELU 30u
#define BATON_OP_LOGSOFTMAX 31u
#define BATON_OP_BATCHNORMALIZATION 32u
#define BATON_OP_LAYERNORMALIZATION 33u
#define BATON_OP_REDUCEMEAN 34u
#define BATON_OP_REDUCESUM 35u
#define BATON_OP_REDUCEMAX 36u
#define BATON_OP_EQUAL 37u
#define BATON_OP_NOT 38u
#define BATON_OP_GREATER 39u
#define BATON_OP_LESS 40u
#define BATON_OP_AND 41u
#define BATON_OP_WHERE 42u
#define BATON_OP_CAST 43u
#define BATON_OP_CEIL 44u
#define BATON_OP_SQUEEZE 50u
#define BATON_OP_UNSQUEEZE 51u
#define BATON_OP_SPLIT 52u
#define BATON_OP_SLICE 53u
#define BATON_OP_GATHER 54u
#define BATON_OP_EXPAND 55u
#define BATON_OP_PAD 56u
#define BATON_OP_TILE 57u
#define BATON_OP_SHAPE 58u
#define BATON_OP_SIZE 59u
#define BATON_OP_IDENTITY 60u
#define BATON_OP_CONSTANTOFSHAPE 61u
#define BATON_OP_CONVTRANSPOSE 62u
#define BATON_OP_RESIZE 63u
#define BATON_OP_LSTM 64u
#define BATON_OP_GRU 65u
#define BATON_OP_QUANTIZELINEAR 66u
#define BATON_OP_DEQUANTIZELINEAR 67u
#define BATON_OP_IF 68u   /* control flow: never sent to a plugin */
#define BATON_OP_LOOP 69u /* control flow: never sent to a plugin */
#define BATON_OP_CASTLIKE 70u
/* Added in wire 1.3. */
#define BATON_OP_GREATEROREQUAL 71u
#define BATON_OP_LESSOREQUAL 72u
#define BATON_OP_FLOOR 73u
#define BATON_OP_ROUND 74u
#define BATON_OP_SIGN 75u
#define BATON_OP_RECIPROCAL 76u
#define BATON_OP_MOD 77u
#define BATON_OP_ISNAN 78u
#define BATON_OP_ISINF 79u
#define BATON_OP_SIN 80u
#define BATON_OP_COS 81u
#define BATON_OP_TAN 82u
#define BATON_OP_ASIN 83u
#define BATON_OP_ACOS 84u
#define BATON_OP_ATAN 85u
#define BATON_OP_SINH 86u
#define BATON_OP_COSH 87u
#define BATON_OP_ASINH 88u
#define BATON_OP_ACOSH 89u
#define BATON_OP_ATANH 90u
#define BATON_OP_ARGMAX 91u
#define BATON_OP_ARGMIN 92u
#define BATON_OP_REDUCEMIN 93u
#define BATON_OP_REDUCEPROD 94u
#define BATON_OP_REDUCEL1 95u
#define BATON_OP_REDUCEL2 96u
#define BATON_OP_REDUCELOGSUMEXP 97u
#define BATON_OP_REDUCESUMSQUARE 98u
#define BATON_OP_CUMSUM 99u
#define BATON_OP_TRILU 100u
#define BATON_OP_GATHERELEMENTS 101u
#define BATON_OP_SCATTERELEMENTS 102u
#define BATON_OP_GATHERND 103u
#define BATON_OP_SCATTERND 104u
#define BATON_OP_DEPTHTOSPACE 105u
#define BATON_OP_SPACETODEPTH 106u
#define BATON_OP_OR 107u
#define BATON_OP_XOR 108u
#define BATON_OP_TOPK 109u
#define BATON_OP_HARDMAX 110u
/* Added in wire 1.4. */
#define BATON_OP_RANGE 111u
#define BATON_OP_ONEHOT 112u
#define BATON_OP_BITWISEAND 113u
#define BATON_OP_BITWISEOR 114u
#define BATON_OP_BITWISEXOR 115u
#define BATON_OP_BITWISENOT 116u
#define BATON_OP_BITSHIFT 117u
#define BATON_OP_CUMPROD 118u
/* Added in wire 1.5. */
#define BATON_OP_ATTENTION 119u
#define BATON_OP_ROTARYEMBEDDING 120u
#define BATON_OP_GRIDSAMPLE 121u
#define BATON_OP_AFFINEGRID 122u
#define BATON_OP_COL2IM 123u
#define BATON_OP_DFT 125u
#define BATON_OP_STFT 126u
#define BATON_OP_HANNWINDOW 127u
#define BATON_OP_HAMMINGWINDOW 128u
#define BATON_OP_BLACKMANWINDOW 129u
#define BATON_OP_EINSUM 130u
#define BATON_OP_NONMAXSUPPRESSION 131u
#define BATON_OP_UNIQUE 132u
#define BATON_OP_COMPRESS 133u
#define BATON_OP_LINEARATTENTION 134u
#define BATON_OP_CAUSALCONVWITHSTATE 136u
#define BATON_OP_DEFORMCONV 137u
#define BATON_OP_MAXUNPOOL 138u
#define BATON_OP_CONVINTEGER 139u
#define BATON_OP_MATMULINTEGER 140u
#define BATON_OP_ROIALIGN 141u
#define BATON_OP_DET 142u
#define BATON_OP_REVERSESEQUENCE 143u
#define BATON_OP_TENSORSCATTER 144u
#define BATON_OP_BITCAST 145u
#define BATON_OP_RNN 146u
#define BATON_OP_MELWEIGHTMATRIX 147u

/* ------------------------------------------------------------------------------------ */
/* BTIR record kinds (section 7)                                                        */

/* dim kinds */
#define BATON_BTIR_DIM_FIXED 0u
#define BATON_BTIR_DIM_SYMBOLIC 1u
/* quant kinds; the same values as BatonQuantView.kind */
#define BATON_BTIR_QUANT_NONE 0u
#define BATON_BTIR_QUANT_PER_TENSOR 1u
#define BATON_BTIR_QUANT_PER_AXIS 2u
/* storage kinds */
#define BATON_BTIR_STORAGE_RUNTIME 0u  /* computed while the graph runs */
#define BATON_BTIR_STORAGE_INLINE 1u   /* bytes in the data segment (program files only) */
#define BATON_BTIR_STORAGE_EXTERNAL 2u /* index of a constant view passed beside the graph */
/* attribute kinds */
#define BATON_BTIR_ATTR_INT 1u    /* i64 */
#define BATON_BTIR_ATTR_FLOAT 2u  /* f32 */
#define BATON_BTIR_ATTR_INTS 3u   /* u32 n, i64[n] */
#define BATON_BTIR_ATTR_FLOATS 4u /* u32 n, f32[n] */
#define BATON_BTIR_ATTR_STRING 5u /* str */
#define BATON_BTIR_ATTR_GRAPH 6u  /* u32 len, graph record of len bytes (1.2) */

/* ------------------------------------------------------------------------------------ */
/* Quantization kinds (BatonQuantView.kind) and device kinds (BatonDeviceInfo.kind)      */

#define BATON_QUANT_NONE 0u
#define BATON_QUANT_PER_TENSOR 1u
#define BATON_QUANT_PER_AXIS 2u

#define BATON_DEVICE_CPU 0u
#define BATON_DEVICE_GPU 1u
#define BATON_DEVICE_NPU 2u
#define BATON_DEVICE_OTHER 3u

/* ------------------------------------------------------------------------------------ */
/* Data structures                                                                      */

/* Quantization parameters of a tensor view: real = scale * (q - zero_point).
 *   kind BATON_QUANT_NONE: count 0; scales and zero_points are NULL.
 *   kind BATON_QUANT_PER_TENSOR: count 1; one scale and one zero point.
 *   kind BATON_QUANT_PER_AXIS: count = the extent of dimension `axis`; one scale and one
 *     zero point per index along that axis.
 * The arrays belong to the host and are valid for the call only. */
typedef struct BatonQuantView {
    uint32_t kind;
    uint32_t axis;
    uint32_t count;
    uint32_t reserved; /* zero */
    const float* scales;
    const int32_t* zero_points;
} BatonQuantView;

/* A tensor in host memory, borrowed for one call. See section 6 for every rule. */
typedef struct BatonTensorView {
    void* data;        /* BATON_DATA_ALIGNMENT-aligned; NULL only when byte_len is 0 */
    uint64_t byte_len; /* product(shape) * element size, exactly */
    uint32_t dtype;    /* BATON_DTYPE_* */
    uint32_t rank;     /* 0 ..= BATON_MAX_RANK */
    int64_t* shape;    /* rank extents; for outputs, BATON_MAX_RANK writable slots */
    BatonQuantView quant;
} BatonTensorView;

/* Bytes allocated by the plugin (a compiled partition). The host may store them, copy
 * them, and pass them back to init -- possibly in another process -- but only the
 * plugin's free_blob releases the allocation itself. A blob must therefore be
 * self-contained: no pointers, nothing that is only valid in the process that made it. */
typedef struct BatonBlob {
    uint8_t* data;
    uint64_t len;
} BatonBlob;

/* One device a context can run on, filled by device_info.
 *
 * Before the call the host sets struct_size to sizeof(BatonDeviceInfo) as its header
 * declares it. The plugin fills every v1.0 field, fills a field added by a later minor
 * only if the host's struct_size covers it, and on return sets struct_size to the number
 * of bytes it filled in. The strings are NUL-terminated, owned by the plugin and valid
 * while the context lives. */
typedef struct BatonDeviceInfo {
    uint32_t struct_size;
    uint32_t kind; /* BATON_DEVICE_* */
    const char* name;
    /* Driver or firmware version. Part of the host's cache keys: a blob or a probe
     * result recorded under one driver version is not trusted under another. */
    const char* driver_version;
    uint64_t memory_bytes; /* memory available to this device, 0 if unknown */
} BatonDeviceInfo;

/* The answer for one node of a supports query. */
typedef struct BatonSupportAnswer {
    uint32_t supported;   /* 1 if the plugin runs this node, else 0 */
    uint32_t reason_code; /* BATON_REASON_*; BATON_REASON_NONE when supported */
    /* Why the node was declined, NUL-terminated UTF-8 written by the plugin (truncated to
     * fit); an empty string when supported. Shown to the user in partition reports, so
     * it should name what is missing: "op Conv not implemented", "dtype f16". */
    char message[BATON_SUPPORT_MESSAGE_LEN];
} BatonSupportAnswer;

/* One configuration value passed to create. Both strings are NUL-terminated and owned by
 * the host for the duration of the call. */
typedef struct BatonOptionValue {
    const char* key;
    const char* value;
} BatonOptionValue;

/* Declaration of an option the plugin accepts. The host checks a user's configuration
 * against these declarations before create: an unknown key or an out-of-range value is
 * an error that names the key, never a silently applied default. All strings belong to
 * the plugin and live as long as the descriptor. */
typedef struct BatonOptionSpec {
    const char* name;
    uint32_t kind;     /* BATON_OPTION_* */
    uint32_t reserved; /* zero */
    const char* default_value;
    double min; /* inclusive range, for BATON_OPTION_INT and BATON_OPTION_FLOAT */
    double max;
    const char* choices; /* '|'-separated values for BATON_OPTION_ENUM, else NULL */
    const char* help;    /* one line for the user */
} BatonOptionSpec;

/* One event of a run, reported by the descriptor's `profile` function (added in 1.1):
 * a unit of work the plugin chose to time, such as one command of an NPU command stream.
 * struct_size follows the rule of section 1: the host sets it to sizeof(BatonProfileEvent)
 * of its build, the plugin fills the fields that size covers and sets it to the bytes it
 * filled. The strings belong to the plugin and stay valid until the next execute or
 * destroy on the handle. */
typedef struct BatonProfileEvent {
    uint32_t struct_size;
    uint32_t reserved;   /* zero */
    const char* name;    /* what ran, for people: "conv_3 (Conv)" */
    const char* kind;    /* the kind of work: "CONV2D", "kernel" */
    uint64_t cycles;     /* estimated or measured device cycles; 0 if unknown */
    uint64_t wall_ns;    /* wall-clock nanoseconds spent on it; 0 if unknown */
} BatonProfileEvent;

/* The host memory an executable handle holds, reported by the descriptor's `memory`
 * function (added in 1.2). struct_size follows the rule of section 1: the host sets it to
 * sizeof(BatonMemoryInfo) of its build, the plugin fills the fields that size covers and
 * sets it to the bytes it filled. Device memory is reported in BatonDeviceInfo, not here. */
typedef struct BatonMemoryInfo {
    uint32_t struct_size;
    uint32_t reserved;       /* zero */
    uint64_t scratch_bytes;  /* working memory for a run (an arena of intermediates) */
    uint64_t owned_bytes;    /* everything else the handle allocated: weights it copied
                              * or packed, tables, its own state */
    uint64_t retained_bytes; /* bytes of an init_retained blob it points into rather than
                              * copies (counted once, by the host, as the blob) */
} BatonMemoryInfo;

/* An opaque plugin context: one per loaded configuration. */
typedef void* BatonContext;
/* An opaque executable handle: one per initialised partition. */
typedef void* BatonHandle;

/* The descriptor returned by the entry function. The first three fields are frozen
 * forever (section 1). Fields after them exist as of the minor version noted; v1.0 is
 * the whole struct below, and every function pointer in it is non-NULL. */
typedef struct BatonDescriptor {
    uint32_t abi_major;   /* BATON_ABI_MAJOR the plugin was built against */
    uint32_t abi_minor;   /* BATON_ABI_MINOR the plugin was built against */
    uint32_t struct_size; /* sizeof(BatonDescriptor) in the plugin's header */

    uint32_t concurrency;     /* BATON_CONCURRENCY_* for its handles */
    const char* name;         /* the plugin's name, unique among installed plugins */
    const char* version;      /* the plugin's own version, e.g. "0.1.0" */
    const char* build_id;     /* identifies the build; part of the host's cache keys */
    uint64_t features;        /* feature bits; none are defined in v1.0, so 0 */
    uint32_t option_count;    /* entries in `options` */
    uint32_t reserved;        /* zero */
    const BatonOptionSpec* options; /* may be NULL when option_count is 0 */

    /* Creates a context from `option_count` key/value pairs (already validated by the
     * host against `options`; a careful plugin still refuses unknown keys with
     * BATON_STATUS_INVALID_ARGUMENT). On success stores the context in *out_ctx: any
     * non-NULL pointer, opaque to the host (NULL is refused as a failed create). It may
     * point at static storage, and several creates may return the same pointer (a
     * plugin with no per-configuration state); the host calls destroy_context once per
     * successful create all the same. */
    BatonStatus (*create)(const BatonOptionValue* options, uint32_t option_count,
                          BatonContext* out_ctx);

    /* Releases a context. The host has already destroyed its handles and freed its
     * blobs. NULL is ignored. */
    void (*destroy_context)(BatonContext ctx);

    /* The calling thread's last error text: NUL-terminated UTF-8, never NULL, valid until
     * this thread's next call into the plugin. */
    const char* (*last_error)(void);

    /* 1 if the context can run anything at all on this machine, else 0. A hint: the host
     * proves availability by compiling and running a small probe graph. */
    uint32_t (*available)(BatonContext ctx);

    /* The number of devices of this context (indices 0 .. count-1). */
    uint32_t (*device_count)(BatonContext ctx);

    /* Describes device `index` (see BatonDeviceInfo for the struct_size rule). */
    BatonStatus (*device_info)(BatonContext ctx, uint32_t index, BatonDeviceInfo* out);

    /* Answers, for each node of the BTIR graph `graph` (`graph_len` bytes), whether the
     * plugin runs it. `answers` has `answer_count` slots, which must equal the number of
     * nodes; answers[i] is for node i and the plugin writes every slot. `consts` are the
     * constant views the graph's EXTERNAL tensors refer to.
     *
     * Declining is an answer, not an error: the status is OK even when every node is
     * declined. A non-OK status means the question could not be answered (corrupt graph,
     * wrong answer count); the host then treats every node as declined. Be honest: a
     * declined node costs some speed, a claimed node that is then computed wrongly fails
     * conformance. */
    BatonStatus (*supports)(BatonContext ctx, const uint8_t* graph, uint64_t graph_len,
                            const BatonTensorView* consts, uint32_t const_count,
                            BatonSupportAnswer* answers, uint32_t answer_count);

    /* Compiles a BTIR subgraph, every node of which supports accepted, for device
     * `device`, into a blob stored in *out_blob (released later with free_blob).
     * All shapes are fixed. May run ahead of time on another machine with the same
     * plugin build. A plugin may still return BATON_STATUS_UNSUPPORTED, in which case the
     * host runs the subgraph elsewhere. A zero-length blob is allowed (data NULL or not,
     * len 0; free_blob still receives it): a plugin that needs nothing but the graph can
     * also return the graph bytes themselves, which are self-contained. */
    BatonStatus (*compile)(BatonContext ctx, uint32_t device, const uint8_t* graph,
                           uint64_t graph_len, const BatonTensorView* consts,
                           uint32_t const_count, BatonBlob* out_blob);

    /* Whether a stored blob can be used by this build: a BATON_COMPAT_* value. The bytes
     * may be stale or corrupt; they are examined, never trusted. */
    uint32_t (*blob_compatibility)(BatonContext ctx, const uint8_t* blob, uint64_t blob_len);

    /* Releases a blob returned by compile on this context. A blob with data NULL is
     * ignored. */
    void (*free_blob)(BatonContext ctx, BatonBlob blob);

    /* Prepares blob bytes (from compile, possibly loaded from disk) for execution on
     * `device` and stores the handle in *out_handle. `consts` are the same constant views
     * compile received (borrowed for this call only, like the blob: copy what execute
     * needs). A zero-length blob arrives with blob_len 0 and a pointer that must not be
     * read. A corrupt or foreign blob is refused with BATON_STATUS_INVALID_ARGUMENT, not
     * trusted. */
    BatonStatus (*init)(BatonContext ctx, uint32_t device, const uint8_t* blob,
                        uint64_t blob_len, const BatonTensorView* consts,
                        uint32_t const_count, BatonHandle* out_handle);

    /* Runs a partition. `inputs` follow the order of the subgraph's input list and
     * `outputs` the order of its output list; the plugin checks both counts
     * (BATON_STATUS_INVALID_ARGUMENT on a mismatch) and every view's dtype, shape and
     * byte_len. It writes every output in full; see section 6 for output shapes. */
    BatonStatus (*execute)(BatonHandle handle, const BatonTensorView* inputs,
                           uint32_t input_count, BatonTensorView* outputs,
                           uint32_t output_count);

    /* Releases a handle. NULL is ignored. */
    void (*destroy)(BatonHandle handle);

    /* ---- Added in 1.1. A host reads these only when BATON_DESCRIPTOR_HAS says so. ---- */

    /* May be NULL: the plugin reports no profile. After a successful execute on `handle`,
     * writes up to `capacity` events of that run into `events` and returns the number of
     * events the run has in all (call again with a larger array if it is more than
     * `capacity`; events == NULL with capacity 0 only counts). Never fails: a handle that
     * has not run, or whose last execute failed, has 0 events. Never overlaps another call
     * on the same handle. */
    uint32_t (*profile)(BatonHandle handle, BatonProfileEvent* events, uint32_t capacity);

    /* ---- Added in 1.2. A host reads these only when BATON_DESCRIPTOR_HAS says so. ---- */

    /* The highest minor version of the BTIR format (BATON_WIRE_MAJOR.btir_minor) this
     * plugin reads. A host passes it no graph holding a code of a later minor: a node
     * needing one is declined for it, per node, before supports is called. A plugin
     * without this field (1.0, 1.1) is taken to read BTIR 1.2. Set it (usually to
     * BATON_WIRE_MINOR): left out of a designated initializer it is 0, BTIR 1.0, and
     * every node needing a later code is declined for the plugin. */
    uint32_t btir_minor;
    /* 1.2: reserved, zero. 1.3: BATON_CAP_* bits. A host reads it only from a plugin whose
     * abi_minor is at least 3. */
    uint32_t capabilities;

    /* May be NULL (the host then calls init). The same as init, with one difference in
     * lifetime: the blob bytes, and the bytes each constant view's `data` points at, stay
     * valid, readable and unchanged until destroy on the handle this call returns (the
     * view structs themselves, their shape and quantization arrays, are still borrowed
     * for the call only). The blob is aligned to BATON_DATA_ALIGNMENT, as every view's
     * data is. A plugin may therefore keep pointers into them (packed weights in the blob,
     * an embedding table among the constants) instead of copying, which is what lets a
     * host that maps a program file run it without a second copy of its weights. A host
     * calls it only when it can keep that promise; a failed call leaves no pointer
     * behind. */
    BatonStatus (*init_retained)(BatonContext ctx, uint32_t device, const uint8_t* blob,
                                 uint64_t blob_len, const BatonTensorView* consts,
                                 uint32_t const_count, BatonHandle* out_handle);

    /* May be NULL (the plugin does not report memory). Fills *out (see BatonMemoryInfo
     * for its struct_size rule) with the host memory `handle` holds, so a host can show
     * a whole model's memory, its delegates' included. BATON_STATUS_UNSUPPORTED when the
     * plugin does not know. Never overlaps another call on the same handle. */
    BatonStatus (*memory)(BatonHandle handle, BatonMemoryInfo* out);
} BatonDescriptor;

/* The smallest struct_size a v1 host accepts: everything up to and including `destroy`. */
#define BATON_DESCRIPTOR_V1_SIZE                                                           \
    (offsetof(BatonDescriptor, destroy) + sizeof(((const BatonDescriptor*)0)->destroy))

/* The size of a 1.1 descriptor: everything up to and including `profile`. */
#define BATON_DESCRIPTOR_V1_1_SIZE                                                         \
    (offsetof(BatonDescriptor, profile) + sizeof(((const BatonDescriptor*)0)->profile))

/* The size of a 1.2 descriptor: everything up to and including `memory`. */
#define BATON_DESCRIPTOR_V1_2_SIZE                                                         \
    (offsetof(BatonDescriptor, memory) + sizeof(((const BatonDescriptor*)0)->memory))

/* Whether the plugin's descriptor `d` (a const BatonDescriptor*) filled in `field`:
 * how a host tests for a field appended in a later minor before reading it. */
#define BATON_DESCRIPTOR_HAS(d, field)                                                     \
    ((size_t)(d)->struct_size >=                                                           \
     offsetof(BatonDescriptor, field) + sizeof(((const BatonDescriptor*)0)->field))

/* The type of the entry function. */
typedef const BatonDescriptor* (*BatonEntryFn)(void);

/* The entry function every plugin exports under BATON_ENTRY_SYMBOL. */
BATON_EXPORT const BatonDescriptor* baton_delegate_entry(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BATON_DELEGATE_H */
