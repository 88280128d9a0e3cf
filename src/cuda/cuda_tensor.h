/* Tensor-level entry points of the CUDA backend: its device interface (copies, fills,
 * element reads; Note [Device interface] in src/core/device.h) and kernel helpers. */
#ifndef CT_CUDA_TENSOR_H
#define CT_CUDA_TENSOR_H

#include "cuda/cuda_rt.h"
#include "tensor_impl.h"

/* dst = src converted, both on CUDA devices; src_strides: src's element strides
 * broadcast to dst's shape. */
ct_status ct_cuda_copy_into(ct_tensor *dst, const ct_tensor *src, const int64_t *src_strides);
/* copy_ between a CUDA tensor and a tensor elsewhere (CPU, or another CUDA device):
 * moves src to dst's device, then copies there. */
ct_status ct_cuda_copy_cross(ct_tensor *dst, const ct_tensor *src);
/* to(device) when t or device is CUDA: a contiguous copy on device. */
ct_tensor *ct_cuda_to_device(const ct_tensor *t, ct_device device);
/* Writes the esize-byte value at every element of t (on CUDA). */
ct_status ct_cuda_fill(ct_tensor *t, const void *value, size_t esize);
/* Copies the element elem_offset elements past t's first one to host memory out. */
ct_status ct_cuda_read_element(const ct_tensor *t, int64_t elem_offset, void *out);
/* A check's one-element flag (int64: -1 when no element failed; int32: 0), read back;
 * during a capture, checked on the device instead (Note [Checks under capture] in
 * runtime.cu) and *out set to the ok value. */
ct_status ct_cuda_read_flag(const ct_tensor *flag, void *out, const char *op);
/* Registers the CUDA device interface with the core (Note [Device interface]). */
void ct_cuda_register_device(void);
/* Builds a kernel description over nt operands (outermost dim first, byte strides),
 * dropping size-1 dims and merging dims contiguous in every operand. */
void ct_cuda_desc_build(ct_cuda_iter_desc *d, int nt, int ndim, const int64_t *shape, char *const *data,
                        const int64_t strides[][CT_MAX_DIMS]);

#endif
