/* Stand-in for delegate-api/tests/c_plugin/relu_add_plugin.c, used by tests/abi_checks.rs
 * only while that file is absent from the checkout. It builds the same three broken
 * variants, selected by the same macros, without needing baton_delegate.h: the host reads
 * nothing of a descriptor before the handshake but its frozen prefix
 * (abi_major, abi_minor, struct_size), so the rest is padding here.
 *
 *   -DBATON_TEST_WRONG_MAJOR   descriptor declares ABI 2.0
 *   -DBATON_TEST_SHORT_STRUCT  descriptor declares struct_size 12
 *   -DBATON_TEST_NO_ENTRY      no baton_delegate_entry symbol at all
 */
#include <stdint.h>

typedef struct {
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t struct_size;
    uint32_t concurrency;
    const void *rest[32];
} prefix_only_descriptor;

#if defined(BATON_TEST_NO_ENTRY)
const void *baton_delegate_entry_misspelled(void) { return 0; }
#else
#if defined(BATON_TEST_WRONG_MAJOR)
static const prefix_only_descriptor descriptor = {2, 0, sizeof(prefix_only_descriptor), 0, {0}};
#elif defined(BATON_TEST_SHORT_STRUCT)
static const prefix_only_descriptor descriptor = {1, 0, 12, 0, {0}};
#else
#error "define BATON_TEST_WRONG_MAJOR, BATON_TEST_SHORT_STRUCT or BATON_TEST_NO_ENTRY"
#endif
const void *baton_delegate_entry(void) { return &descriptor; }
#endif
