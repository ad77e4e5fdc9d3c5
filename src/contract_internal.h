/* contract_internal.h — the capability/contract table: the one source of truth that query_capabilities
 * hands out, that validation checks against and that the tests iterate. Adding a routing method, format,
 * activation or dtype is a row in contract.c (plus its kernels). */
#ifndef FP8MOE_CONTRACT_INTERNAL_H
#define FP8MOE_CONTRACT_INTERNAL_H

#include <stdint.h>

#include "fp8moe.h"
#include "tensor_internal.h"

/* Rows by id; NULL when the id is not in the table (unknown or never assigned). */
const fp8moe_routing_method_info* fp8moe_contract_routing_method(int32_t id);
const fp8moe_quant_format_info* fp8moe_contract_quant_format(int32_t id);
const fp8moe_activation_info* fp8moe_contract_activation(int32_t id);
const fp8moe_argument_info* fp8moe_contract_argument(int32_t arg_id);
const fp8moe_limits* fp8moe_contract_limits(void);

/* 1 when internal dtype dt is in the argument's accepted set. */
int32_t fp8moe_contract_accepts_dtype(const fp8moe_argument_info* arg, fp8moe_dt dt);
/* Writes "float32, bfloat16, float16" (the argument's accepted set) into buf. */
void fp8moe_contract_dtype_list(const fp8moe_argument_info* arg, char* buf, size_t size);

/* Fills the table part of caps (counts, arrays, limits) up to caps->struct_size. */
void fp8moe_contract_fill(fp8moe_capabilities* caps);

#endif /* FP8MOE_CONTRACT_INTERNAL_H */
