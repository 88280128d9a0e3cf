/* Which internal functions a separately loaded backend may call.
 *
 * Note [Backend interface]
 * The CUDA backend is a shared object of its own (libctorch_cuda.so, loaded at run
 * time by src/registry.c) and calls internal functions of the layers below it: the
 * core (tensors, storages, the allocator and device interfaces), the dispatcher's
 * registration and the meta layer (kernels, stubs, shape rules). The internal headers
 * that declare them wrap their declarations in CT_BACKEND_BEGIN / CT_BACKEND_END,
 * which give those symbols default visibility: libctorch.so exports them, still under
 * the ct_ prefix. They are ctorch's backend interface, which a backend is built
 * against together with the library it loads into; they are not the public API, and
 * no public header declares them. Everything else stays hidden. */
#ifndef CT_CORE_BACKEND_API_H
#define CT_CORE_BACKEND_API_H

#if defined(__GNUC__)
#define CT_BACKEND_BEGIN _Pragma("GCC visibility push(default)")
#define CT_BACKEND_END _Pragma("GCC visibility pop")
#else
#define CT_BACKEND_BEGIN
#define CT_BACKEND_END
#endif

#endif /* CT_CORE_BACKEND_API_H */
