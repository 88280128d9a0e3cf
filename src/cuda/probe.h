/* Proof that the CUDA toolchain is wired into the build: what was compiled and what
 * the machine has. Only built when CMake enables CUDA (CT_HAVE_CUDA). */
#ifndef CT_CUDA_PROBE_H
#define CT_CUDA_PROBE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices the runtime sees; 0 when there is no GPU or no driver. */
int ct_cuda_probe_device_count(void);
/* The CUDA runtime version as major*1000 + minor*10 (13000 for 13.0). */
int ct_cuda_probe_runtime_version(void);
/* __CUDA_ARCH__ of the kernel image that runs on device 0 (900 for sm_90), or 0 when
 * no device can run one. Launches one tiny kernel. */
int ct_cuda_probe_device_arch(void);
/* The architectures nvcc compiled for, as CMake's list ("90"). */
const char *ct_cuda_probe_archs(void);

#ifdef __cplusplus
}
#endif
#endif
