/*
 * embed-c: a C program that embeds Baton through libbaton (capi/include/baton.h).
 *
 * Usage: embed-c MODEL [CONFIG.toml]
 *
 * Loads MODEL (.baton, .btir or .onnx), lists its inputs and outputs, binds every symbolic
 * dimension to 1, fills each f32 input with a fixed ramp, runs the model once on buffers
 * this program owns, and prints where each node ran and the first values of each output.
 * Without CONFIG everything runs on the host's portable kernels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"

#define CHECK(call)                                                                         \
    do {                                                                                    \
        BatonResult status_ = (call);                                                       \
        if (status_ != BATON_OK) {                                                          \
            fprintf(stderr, "embed-c: %s failed (status %d): %s\n", #call, (int)status_,   \
                    baton_last_error());                                                    \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static void print_info(const char *what, const BatonTensorInfo *info) {
    uint32_t k;
    printf("%s %s: dtype %u [", what, info->name, info->dtype);
    for (k = 0; k < info->rank; k++) {
        if (info->dim_names[k] != NULL) {
            printf("%s%s", k ? ", " : "", info->dim_names[k]);
        } else {
            printf("%s%lld", k ? ", " : "", (long long)info->shape[k]);
        }
    }
    printf("]\n");
}

static size_t elements(const BatonTensorInfo *info) {
    size_t n = 1;
    uint32_t k;
    for (k = 0; k < info->rank; k++) {
        n *= (size_t)info->shape[k];
    }
    return n;
}

int main(int argc, char **argv) {
    BatonEngine *engine = NULL;
    BatonModel *model = NULL;
    BatonSession *session = NULL;
    BatonDim dims[16];
    size_t n_dims = 0, n_in = 0, n_out = 0, n_rows = 0, n_dev = 0, i, k;
    BatonTensor *inputs, *outputs;

    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [CONFIG.toml]\n", argv[0]);
        return 2;
    }
    if ((baton_api_version() >> 16) != BATON_API_MAJOR) {
        fprintf(stderr, "embed-c: libbaton API %u.x, this program needs %u.x\n",
                baton_api_version() >> 16, BATON_API_MAJOR);
        return 1;
    }
    CHECK(baton_engine_create(argc > 2 ? argv[2] : NULL, &engine));
    CHECK(baton_engine_device_count(engine, &n_dev));
    for (i = 0; i < n_dev; i++) {
        BatonDeviceRow d;
        CHECK(baton_engine_device(engine, i, &d));
        printf("device %s (%s): %s, %s\n", d.backend, d.plugin, d.device,
               d.usable ? "usable" : "not usable");
    }

    CHECK(baton_model_load(argv[1], &model));
    CHECK(baton_model_input_count(model, &n_in));
    CHECK(baton_model_output_count(model, &n_out));
    for (i = 0; i < n_in; i++) {
        BatonTensorInfo info;
        CHECK(baton_model_input(model, i, &info));
        print_info("input", &info);
        for (k = 0; k < info.rank; k++) {
            size_t j, seen = 0;
            if (info.dim_names[k] == NULL) continue;
            for (j = 0; j < n_dims; j++) seen |= strcmp(dims[j].name, info.dim_names[k]) == 0;
            if (!seen && n_dims < 16) {
                dims[n_dims].name = info.dim_names[k];
                dims[n_dims].value = 1;
                n_dims++;
            }
        }
    }
    CHECK(baton_session_create(engine, model, dims, n_dims, &session));

    CHECK(baton_session_plan_size(session, &n_rows));
    for (i = 0; i < n_rows; i++) {
        BatonPlanRow row;
        CHECK(baton_session_plan_row(session, i, &row));
        printf("node %s (%s) on %s\n", row.node, row.op, row.target);
    }

    inputs = calloc(n_in, sizeof(BatonTensor));
    outputs = calloc(n_out, sizeof(BatonTensor));
    if (inputs == NULL || outputs == NULL) return 1;
    for (i = 0; i < n_in; i++) {
        BatonTensorInfo info;
        size_t n;
        float *data;
        CHECK(baton_session_input(session, i, &info));
        if (info.dtype != BATON_DTYPE_F32) {
            fprintf(stderr, "embed-c: input %s is not f32; this example feeds f32 only\n",
                    info.name);
            return 1;
        }
        n = elements(&info);
        data = malloc(n * sizeof(float) + 1);
        if (data == NULL) return 1;
        for (k = 0; k < n; k++) data[k] = (float)((k * 37) % 101) / 50.0f - 1.0f;
        inputs[i].dtype = info.dtype;
        inputs[i].rank = info.rank;
        memcpy(inputs[i].shape, info.shape, sizeof info.shape);
        inputs[i].data = data;
        inputs[i].size = n * sizeof(float);
    }
    for (i = 0; i < n_out; i++) {
        BatonTensorInfo info;
        CHECK(baton_session_output(session, i, &info));
        /* An f64 or i64 output takes 8 bytes an element: room for the widest. */
        outputs[i].size = elements(&info) * 8;
        outputs[i].data = malloc(outputs[i].size + 1);
        if (outputs[i].data == NULL) return 1;
    }

    CHECK(baton_session_run(session, inputs, n_in, outputs, n_out));

    for (i = 0; i < n_out; i++) {
        BatonTensorInfo info;
        size_t n;
        CHECK(baton_session_output(session, i, &info));
        printf("output %s: dtype %u, rank %u, %zu bytes:", info.name, outputs[i].dtype,
               outputs[i].rank, outputs[i].size);
        if (outputs[i].dtype == BATON_DTYPE_F32) {
            const float *v = outputs[i].data;
            n = outputs[i].size / sizeof(float);
            for (k = 0; k < n && k < 8; k++) printf(" %.6g", v[k]);
            if (n > 8) printf(" ...");
        }
        printf("\n");
    }

    for (i = 0; i < n_in; i++) free(inputs[i].data);
    for (i = 0; i < n_out; i++) free(outputs[i].data);
    free(inputs);
    free(outputs);
    baton_session_free(session);
    baton_model_free(model);
    baton_engine_free(engine);
    return 0;
}
