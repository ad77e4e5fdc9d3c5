/* struct_size_internal.h — the one rule for structs that start with struct_size (SPEC §5): a field is read
 * or written only when the caller's struct_size covers all of it. */
#ifndef FP8MOE_STRUCT_SIZE_INTERNAL_H
#define FP8MOE_STRUCT_SIZE_INTERNAL_H

#include <stddef.h>

/* Bytes from the start of `type` to the end of `field`. */
#define FP8MOE_END_OF(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))
/* 1 when s (a `type*` whose struct_size is the caller's sizeof) covers field. */
#define FP8MOE_COVERS(type, s, field) ((s)->struct_size >= FP8MOE_END_OF(type, field))

#endif /* FP8MOE_STRUCT_SIZE_INTERNAL_H */
