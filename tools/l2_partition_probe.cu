/* l2_partition_probe — which SMs share an L2 partition, as the library measures it at context creation where the
 * pair kernel's partitioned claims are asked for (kernels/l2_partition.cu, docs/GPU.md "L2 partitions"), with every
 * reading printed: per SM its cycles per dependent L2 load ('+': the group across the fabric from CTA 0's SM), the
 * widest gap and the map. The measurement runs `runs` times; CTA 0 lands on whichever SM the launch gives it, so a
 * run's map is the first's or its complement (the groups are the same), which the last line checks.
 *   l2_partition_probe [runs, default 3] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"
#include "probe_check.h"

enum { kMaxSms = 32 * FP8MOE_SM_PARTITION_WORDS };

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int runs = argc > 1 ? atoi(argv[1]) : 3;
  uint32_t first[FP8MOE_SM_PARTITION_WORDS];
  int same = 0, complement = 0;
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (int r = 0; r < runs; ++r) {
    uint32_t map[FP8MOE_SM_PARTITION_WORDS];
    int32_t found = 0;
    static fp8moe_l2_partition_readings rd;
    CHECK_CUDA(static_cast<cudaError_t>(fp8moe_l2_partition_map(map, &found, &rd)));
    unsigned by_sm[kMaxSms];
    memset(by_sm, 0, sizeof by_sm);
    for (int i = 0; i < rd.ctas; ++i)
      if (rd.sm[i] < static_cast<unsigned>(kMaxSms)) by_sm[rd.sm[i]] = rd.cycles[i];
    printf("run %d: %d CTAs, CTA 0 on SM %u, widest gap %u cycles (upper group from %u), %s\n", r, rd.ctas,
           rd.ctas ? rd.sm[0] : 0u, rd.gap, rd.cut, found ? "map found" : "no map");
    for (int s = 0; s < rd.ctas; ++s)
      printf("%s%3d:%4u%c", s % 8 ? "  " : "\n  ", s, by_sm[s], (map[s >> 5] >> (s & 31)) & 1u ? '+' : ' ');
    printf("\n  map:");
    for (int w = 0; w < FP8MOE_SM_PARTITION_WORDS; ++w) printf(" %08x", map[w]);
    printf("\n");
    if (r == 0) memcpy(first, map, sizeof first);
    int eq = 1, comp = 1;
    for (int s = 0; s < rd.ctas; ++s) {
      const uint32_t a = (first[s >> 5] >> (s & 31)) & 1u, b = (map[s >> 5] >> (s & 31)) & 1u;
      eq &= a == b;
      comp &= a != b;
    }
    same += found && eq;
    complement += found && comp;
  }
  printf("of %d runs: %d the first's map, %d its complement\n", runs, same, complement);
  return same + complement == runs ? 0 : 1;
}
