// Marks functions that are compiled for both the host and CUDA devices, so that one source of
// truth (numerics, layouts, index math) serves the CPU reference and every GPU kernel.
#pragma once

#if defined(__CUDACC__)
#define QUENCH_HD __host__ __device__ __forceinline__
#else
#define QUENCH_HD inline
#endif
