/* A minimal CUDA translation unit: proves nvcc, the runtime and the link are wired
 * before any real kernel exists. */
#include <cuda_runtime.h>

#include "probe.h"

#ifndef CT_CUDA_ARCHS
#define CT_CUDA_ARCHS "unknown"
#endif

static __global__ void probe_arch_kernel(int *out) {
#ifdef __CUDA_ARCH__
    *out = __CUDA_ARCH__;
#endif
}

extern "C" int ct_cuda_probe_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no GPU is not an error here */
        return 0;
    }
    return n;
}

extern "C" int ct_cuda_probe_runtime_version(void) {
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess)
        return 0;
    return v;
}

extern "C" int ct_cuda_probe_device_arch(void) {
    if (ct_cuda_probe_device_count() == 0)
        return 0;
    int *d = NULL;
    int arch = 0;
    if (cudaMalloc(&d, sizeof *d) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cudaMemset(d, 0, sizeof *d);
    probe_arch_kernel<<<1, 1>>>(d);
    /* A device no compiled image fits fails the launch: report 0. */
    if (cudaGetLastError() != cudaSuccess || cudaMemcpy(&arch, d, sizeof arch, cudaMemcpyDeviceToHost) != cudaSuccess)
        arch = 0;
    cudaFree(d);
    (void)cudaGetLastError();
    return arch;
}

extern "C" const char *ct_cuda_probe_archs(void) {
    return CT_CUDA_ARCHS;
}
