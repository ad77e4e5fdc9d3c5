/* tma_sm90.cu — host side of the sm90 GEMMs: the driver's tensor-map encoder, looked up through cudart at
 * context creation (cudart is static and the library has no link-time libcuda dependency), and the encoding
 * of one e4m3 tensor map per operand inside run (pure host work: no allocation, no synchronization, so the
 * launch stays graph-capturable; the map travels as a __grid_constant__ kernel parameter). */
#include <cudaTypedefs.h>

#include "wgmma_sm90.cuh"

extern "C" int fp8moe_sm90_encode(void* encode_fn, CUtensorMap* map, const void* base, int rank, const uint64_t* dims,
                                  const uint64_t* strides, uint32_t box0, uint32_t box1) {
  if (encode_fn == nullptr) return static_cast<int>(cudaErrorNotSupported);
  const auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(encode_fn);
  cuuint64_t d[3], s[2];
  cuuint32_t box[3] = {box0, box1, 1}, elem[3] = {1, 1, 1};
  for (int i = 0; i < rank; ++i) d[i] = dims[i];
  for (int i = 0; i + 1 < rank; ++i) s[i] = strides[i];
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, static_cast<cuuint32_t>(rank), const_cast<void*>(base), d,
                            s, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : static_cast<int>(cudaErrorInvalidValue);
}

extern "C" int fp8moe_sm90_encode_gemm2(const fp8moe_gemm2_args* a, CUtensorMap* map_a, CUtensorMap* map_w) {
  using namespace fp8moe::sm90;
  const uint64_t rows = static_cast<uint64_t>(a->max_tiles) * kBM;
  const uint64_t da[2] = {static_cast<uint64_t>(a->I), rows}, sa[1] = {static_cast<uint64_t>(a->I)};
  const uint64_t dw[3] = {static_cast<uint64_t>(a->I), static_cast<uint64_t>(a->H), static_cast<uint64_t>(a->E_local)};
  const uint64_t sw[2] = {static_cast<uint64_t>(a->w_stride_n), static_cast<uint64_t>(a->w_stride_e)};
  const int e = fp8moe_sm90_encode(a->tma_encode, map_a, a->a2q, 2, da, sa, kBK, kBM);
  return e != 0 ? e : fp8moe_sm90_encode(a->tma_encode, map_w, a->w, 3, dw, sw, kBK, kBN);
}

extern "C" int fp8moe_prepare_gemm_sm90(void** tma_encode) {
  *tma_encode = nullptr;
  int e = fp8moe_prepare_gemm1_sm90_smem();
  if (e == 0) e = fp8moe_prepare_gemm2_sm90_smem();
  if (e == 0) e = fp8moe_prepare_gemm1_sm90_pairs_smem();
  if (e == 0) e = fp8moe_prepare_gemm2_sm90_pairs_smem();
  if (e != 0) { /* a device that refuses ~215 KiB of shared memory per block (the 128-row GEMMs) keeps the mma.sync
                 * rows; every compute capability 9.0 part allows 227 KB */
    (void)cudaGetLastError();
    return 0;
  }
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess)
    *tma_encode = fn;
  else
    (void)cudaGetLastError(); /* no encoder: the plan keeps the mma.sync rows */
  return 0;
}
