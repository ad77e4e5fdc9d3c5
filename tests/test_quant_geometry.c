/* test_quant_geometry.c — the quantization geometry rows of the contract table (src/contract.c) are
 * consistent with the public format rows and with what the kernels assume: every format has a geometry;
 * block activation groups and weight blocks share their K step, which divides the format's k_multiple (so
 * every validated H and I holds whole groups); and the requantization each geometry resolves to. Links
 * contract.c directly (internal table; no plugin, no GPU). */
#include <stdio.h>
#include <string.h>

#include "contract_internal.h"
#include "plugin_host.h"
#include "quant_geometry_internal.h"

int main(void) {
  fp8moe_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  fp8moe_contract_fill(&caps);
  EXPECT(caps.quant_format_count >= 3, "the three FP8 formats, got %u", (unsigned)caps.quant_format_count);
  for (uint32_t i = 0; i < caps.quant_format_count; ++i) {
    const fp8moe_quant_format_info* f = &caps.quant_formats[i];
    const fp8moe_quant_geometry* g = fp8moe_contract_quant_geometry(f->id);
    EXPECT(g != NULL, "%s has a geometry row", f->name);
    if (!g) continue;
    EXPECT(g->act >= FP8MOE_GRAN_TENSOR && g->act <= FP8MOE_GRAN_BLOCK && g->weight >= FP8MOE_GRAN_TENSOR &&
               g->weight <= FP8MOE_GRAN_BLOCK,
           "%s: granularities in range", f->name);
    EXPECT((g->act == FP8MOE_GRAN_BLOCK) == (g->act_k > 0), "%s: act_k set exactly for block activations", f->name);
    EXPECT((g->weight == FP8MOE_GRAN_BLOCK) == (g->w_n > 0 && g->w_k > 0), "%s: w_n, w_k set exactly for blocks",
           f->name);
    if (g->weight == FP8MOE_GRAN_BLOCK) {
      EXPECT(g->act == FP8MOE_GRAN_BLOCK && g->act_k == g->w_k,
             "%s: block weights pair with 1 x w_k activation groups (the GEMMs promote per K block)", f->name);
      EXPECT(f->k_multiple % g->w_k == 0 && f->k_multiple % g->w_n == 0,
             "%s: k_multiple %d holds whole %dx%d blocks", f->name, (int)f->k_multiple, (int)g->w_n, (int)g->w_k);
    }
    EXPECT(fp8moe_act_scales_per_row(g, 7168) == (g->act == FP8MOE_GRAN_BLOCK ? 7168 / g->act_k : g->act == FP8MOE_GRAN_ROW),
           "%s: scales per row", f->name);
    const int32_t rq_dyn = fp8moe_requant_of(g, 0), rq_static = fp8moe_requant_of(g, 1);
    if (g->act == FP8MOE_GRAN_TENSOR)
      EXPECT(rq_dyn == FP8MOE_REQUANT_TENSOR && rq_static == FP8MOE_REQUANT_STATIC, "%s: per-tensor requant", f->name);
    else
      EXPECT(rq_dyn == rq_static && rq_dyn == (g->act == FP8MOE_GRAN_BLOCK ? FP8MOE_REQUANT_GROUP : FP8MOE_REQUANT_ROW),
             "%s: dynamic group/row requant whatever a2_static says", f->name);
  }
  EXPECT(fp8moe_contract_quant_geometry(-1) == NULL && fp8moe_contract_quant_geometry(1000) == NULL,
         "unknown ids have no geometry");
  const fp8moe_quant_geometry* b = fp8moe_contract_quant_geometry(FP8MOE_QUANT_FP8_BLOCK128);
  EXPECT(b && b->act_k == 128 && b->w_n == 128 && b->w_k == 128, "FP8_BLOCK128 is 1x128 / 128x128");
  return test_finish("test_quant_geometry", test_checks_run);
}
