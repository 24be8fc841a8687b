/*
 * bcast_dump.c -- a test driver for the broadcasting iterator of btir_reader.h
 * (btir_bcast_init / btir_bcast_next), run by tests/c_abi/bcast.rs.
 *
 * Reads cases from stdin, one per line: "RA a... RB b... RO o..." (ranks, then extents),
 * and prints for each either "refused" or the operand offsets of every output element,
 * "ia:ib ia:ib ...", on one line.
 */
#include "btir_reader.h"

static int read_tensor(btir_tensor* t) {
    uint32_t d;
    memset(t, 0, sizeof *t);
    if (scanf("%u", &t->rank) != 1 || t->rank > BTIR_MAX_DIMS) return -1;
    t->all_fixed = 1;
    for (d = 0; d < t->rank; d++) {
        unsigned long long e;
        if (scanf("%llu", &e) != 1) return -1;
        t->dims[d] = e;
    }
    return 0;
}

int main(void) {
    btir_tensor a, b, o;
    while (read_tensor(&a) == 0 && read_tensor(&b) == 0 && read_tensor(&o) == 0) {
        btir_bcast it;
        if (btir_bcast_init(&it, &a, &b, &o) != 0) {
            printf("refused\n");
            continue;
        }
        while (btir_bcast_next(&it)) printf("%llu:%llu ", (unsigned long long)it.a, (unsigned long long)it.b);
        printf("\n");
    }
    return 0;
}
