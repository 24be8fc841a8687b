/*
 * btir_dump.c -- a test driver for btir_reader.h (delegate-api/include, the public reader), run by tests/c_abi/btir_reader.rs.
 *
 *   btir_dump dump FILE       prints everything the reader extracts from one BTIR
 *                             buffer, one record per line, or "error <why>"
 *   btir_dump verdicts FILE   FILE holds records (u64 little-endian length, bytes); for
 *                             each, prints "ok" or "err <why>"
 *
 * Each buffer is copied into a heap block of exactly its length before it is read, so
 * that, built with -fsanitize=address, any read past the end aborts the run.
 *
 * Floats are printed as their bit patterns in hex, so the comparison is exact.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btir_reader.h"

static uint8_t* read_file(const char* path, size_t* len) {
    FILE* f = fopen(path, "rb");
    uint8_t* buf = NULL;
    size_t cap = 0, n = 0;
    if (f == NULL) return NULL;
    for (;;) {
        size_t got;
        if (n == cap) {
            uint8_t* bigger;
            cap = cap ? cap * 2 : 4096;
            bigger = (uint8_t*)realloc(buf, cap);
            if (bigger == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = bigger;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    *len = n;
    return buf;
}

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* FNV-1a over a byte range: how inline constant bytes are compared. */
static uint64_t fnv1a(const uint8_t* p, uint64_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    uint64_t i;
    for (i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void print_ids(const char* label, const uint8_t* at, uint32_t n) {
    uint32_t k;
    printf("%s=[", label);
    for (k = 0; k < n; k++) printf("%s%lu", k ? "," : "", (unsigned long)btir_id_at(at, k));
    printf("]");
}

static void dump(const btir_graph* g, const uint8_t* buf) {
    uint32_t i, k;
    printf("graph name=%.*s major=%u minor=%u tensors=%lu nodes=%lu\n", (int)g->name.len,
           g->name.ptr, (unsigned)g->major, (unsigned)g->minor, (unsigned long)g->n_tensors,
           (unsigned long)g->n_nodes);
    for (i = 0; i < g->n_tensors; i++) {
        const btir_tensor* t = &g->tensors[i];
        printf("tensor %lu name=%.*s dtype=%lu rank=%lu dims=[", (unsigned long)i,
               (int)t->name.len, t->name.ptr, (unsigned long)t->dtype, (unsigned long)t->rank);
        for (k = 0; k < t->rank && k < BTIR_MAX_DIMS; k++) {
            if (t->symbols[k].ptr != NULL) {
                printf("%ssym:%.*s", k ? "," : "", (int)t->symbols[k].len, t->symbols[k].ptr);
            } else {
                printf("%s%llu", k ? "," : "", (unsigned long long)t->dims[k]);
            }
        }
        printf("] fixed=%d quant=%lu", t->all_fixed, (unsigned long)t->quant_kind);
        if (t->quant_kind != BATON_BTIR_QUANT_NONE) {
            printf(" axis=%lu scales=[", (unsigned long)t->quant_axis);
            for (k = 0; k < t->quant_count; k++) {
                printf("%s%08lx", k ? "," : "",
                       (unsigned long)btir_le32(t->quant_scales + 4 * (size_t)k));
            }
            printf("] zero_points=[");
            for (k = 0; k < t->quant_count; k++) {
                uint32_t u = btir_le32(t->quant_zero_points + 4 * (size_t)k);
                int32_t z;
                memcpy(&z, &u, sizeof z);
                printf("%s%ld", k ? "," : "", (long)z);
            }
            printf("]");
        }
        printf(" storage=%lu", (unsigned long)t->storage);
        if (t->storage == BATON_BTIR_STORAGE_EXTERNAL) {
            printf(" external=%lu", (unsigned long)t->external_index);
        } else if (t->storage == BATON_BTIR_STORAGE_INLINE) {
            printf(" inline_len=%llu inline_fnv=%016llx", (unsigned long long)t->inline_len,
                   (unsigned long long)fnv1a(buf + t->inline_offset, t->inline_len));
        }
        printf("\n");
    }
    for (i = 0; i < g->n_nodes; i++) {
        const btir_node* n = &g->nodes[i];
        btir_attr_iter it;
        btir_attr a;
        printf("node %lu name=%.*s op=%lu ", (unsigned long)i, (int)n->name.len, n->name.ptr,
               (unsigned long)n->op);
        print_ids("in", n->inputs_at, n->n_inputs);
        printf(" ");
        print_ids("out", n->outputs_at, n->n_outputs);
        printf(" attrs=%lu\n", (unsigned long)n->n_attrs);
        btir_attrs(n, &it);
        while (btir_attr_next(&it, &a)) {
            printf("attr %.*s ", (int)a.name.len, a.name.ptr);
            switch (a.kind) {
            case BATON_BTIR_ATTR_INT:
                printf("int=%lld", (long long)a.i);
                break;
            case BATON_BTIR_ATTR_FLOAT:
                printf("float=%08lx", (unsigned long)bits_of(a.f));
                break;
            case BATON_BTIR_ATTR_INTS:
                printf("ints=[");
                for (k = 0; k < a.count; k++) {
                    printf("%s%lld", k ? "," : "", (long long)btir_attr_int_at(&a, k));
                }
                printf("]");
                break;
            case BATON_BTIR_ATTR_FLOATS:
                printf("floats=[");
                for (k = 0; k < a.count; k++) {
                    printf("%s%08lx", k ? "," : "",
                           (unsigned long)bits_of(btir_attr_float_at(&a, k)));
                }
                printf("]");
                break;
            case BATON_BTIR_ATTR_GRAPH:
                printf("graph");
                break;
            default:
                printf("str=%.*s", (int)a.s.len, a.s.ptr);
                break;
            }
            printf("\n");
        }
    }
    print_ids("inputs", g->inputs_at, g->n_inputs);
    printf("\n");
    print_ids("outputs", g->outputs_at, g->n_outputs);
    printf("\n");
}

/* Reads one buffer from a copy of exactly its size. Returns 0 if it is valid. */
static int check_one(const uint8_t* bytes, size_t len, int print) {
    uint8_t* copy = (uint8_t*)malloc(len ? len : 1);
    btir_graph g;
    int rc;
    if (copy == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    if (len) memcpy(copy, bytes, len);
    rc = btir_open(&g, copy, len);
    if (rc != 0) {
        /* A message may quote a corrupt name: one line per verdict, whatever it holds. */
        char* ch;
        for (ch = g.error; *ch != '\0'; ch++) {
            if (*ch == '\n' || *ch == '\r') *ch = ' ';
        }
        printf("%s %s\n", print ? "error" : "err", g.error);
    } else if (print) {
        dump(&g, copy);
    } else {
        printf("ok\n");
    }
    btir_close(&g);
    free(copy);
    return rc;
}

int main(int argc, char** argv) {
    uint8_t* data;
    size_t len = 0;
    if (argc != 3) {
        fprintf(stderr, "usage: %s dump|verdicts FILE\n", argv[0]);
        return 2;
    }
    data = read_file(argv[2], &len);
    if (data == NULL) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 2;
    }
    if (strcmp(argv[1], "dump") == 0) {
        check_one(data, len, 1);
    } else if (strcmp(argv[1], "verdicts") == 0) {
        size_t pos = 0;
        while (pos < len) {
            uint64_t n;
            if (len - pos < 8) {
                fprintf(stderr, "truncated record header\n");
                return 2;
            }
            n = btir_le64(data + pos);
            pos += 8;
            if (n > len - pos) {
                fprintf(stderr, "truncated record\n");
                return 2;
            }
            check_one(data + pos, (size_t)n, 0);
            pos += (size_t)n;
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    free(data);
    return 0;
}
