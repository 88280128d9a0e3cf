/* The kernel of the factory, random and fill ops on every backend: it unpacks a call
 * of src/api/factories.c's wrappers and runs the core implementation
 * (src/core/factory.h), which moves data through the device interface of the device
 * it writes (Note [Device interface] in src/core/device.h). */
#include "core/factory.h"
#include "dispatch/call.h"
#include "meta/kernels.h"

/* Note [Factories as ops]
 * The tensors a program makes from arguments alone go through the dispatcher like
 * every other op, so that a capture at a dispatch key (the LOGGING key, a TRACE
 * kernel, an override) sees a whole training step: the weights it initialises, the
 * zeros it accumulates into, the dropout masks it draws, the fills, the device moves.
 * Two families of ops.def hold them, both served by the one kernel below:
 *
 *   FACTORY  the result's values depend on the call's arguments only: empty,
 *            empty_strided, full, arange, linspace, logspace, eye, and fill_ (in place;
 *            zero_ is fill_ with 0);
 *   RANDOM   the same, drawn from the default generator: rand, randn, randint, randperm,
 *            and in place uniform_, normal_, bernoulli_ (bernoulli with a tensor of
 *            probabilities is functional). Each call reserves counters of the generator
 *            (Note [Random streams] in src/core/random.c) when its kernel runs, so a
 *            replay must restore the generator's state first, and two random calls do
 *            not commute.
 *
 * to_device is a COPY op (ct_core_kernel, views.c). zeros, ones and scalar_tensor are
 * full with their value, and the *_like functions read a tensor's shape, dtype and
 * device and call the factory: a capture sees the factory with the shape it got.
 * rand and randn are ops of their own, not empty followed by uniform_/normal_: a
 * capture sees one functional node whose values are a function of the generator state,
 * with no fresh buffer and in-place write to functionalize.
 *
 * A factory has no tensor input to take a backend key from, so its call carries the
 * device it creates on (ct_call.device, "Device device" in its schema), and
 * ct_call_keyset adds that device's backend key (to_device carries its target the same
 * way, so a move to or from a GPU runs at the GPU's key). The CPU, META and CUDA
 * backends register this kernel at their keys, and the core function does what the
 * device needs: no data on META, a CPU computation copied over for the sequences and
 * integer draws on a GPU, the device's fill and Philox loops otherwise.
 *
 * The factories have no tensor input, so autograd never sees them. The in-place ones
 * are differentiable as in PyTorch's derivatives.yaml (the overwritten value gets a
 * zero gradient), which also gives PyTorch's refusal of an in-place op on a leaf that
 * requires grad outside no_grad (nn.init writes under ct_set_grad_enabled(false)). */

/* float argument i (the wrappers pack doubles as float scalars) */
#define F(i) ct_scalar_to_double(c->s[(i)])

static ct_tensor *make(const ct_call *c) {
    const int64_t *k = c->ints;
    int n = c->nints;
    ct_device dev = c->device;
    switch (c->op) {
    case CT_OP_empty: return ct_empty_impl(k, n, c->dtype, dev);
    case CT_OP_empty_strided: return ct_empty_strided_impl(k, k + n / 2, n / 2, c->dtype, dev);
    case CT_OP_full: return ct_full_impl(k, n, c->s[0], c->dtype, dev);
    case CT_OP_arange: return ct_arange_impl(c->s[0], c->s[1], c->s[2], c->dtype, dev);
    case CT_OP_linspace: return ct_linspace_impl(F(0), F(1), k[0], c->dtype, dev);
    case CT_OP_logspace: return ct_logspace_impl(F(0), F(1), k[0], F(2), c->dtype, dev);
    case CT_OP_eye: return ct_eye_impl(k[0], k[1], c->dtype, dev);
    case CT_OP_rand: return ct_rand_impl(k, n, c->dtype, dev);
    case CT_OP_randn: return ct_randn_impl(k, n, c->dtype, dev);
    case CT_OP_randint: return ct_randint_impl(k[0], k[1], k + 2, n - 2, c->dtype, dev);
    case CT_OP_randperm: return ct_randperm_impl(k[0], c->dtype, dev);
    case CT_OP_bernoulli: return ct_bernoulli_impl(c->in[0]);
    default: break;
    }
    ct_error(CT_ERROR_RUNTIME, ct_op_name(c->op), "not a functional factory or random op");
    return NULL;
}

static ct_tensor *write(const ct_call *c) {
    ct_tensor *t = c->out[0];
    switch (c->op) {
    case CT_OP_fill: return ct_fill_impl(t, c->s[0]);
    case CT_OP_uniform: return ct_uniform_impl(t, F(0), F(1));
    case CT_OP_normal: return ct_normal_impl(t, F(0), F(1));
    case CT_OP_bernoulli: return ct_bernoulli_scalar_impl(t, F(0));
    default: break;
    }
    ct_error(CT_ERROR_RUNTIME, ct_op_name(c->op), "not an in-place fill or random op");
    return NULL;
}

ct_status ct_factory_kernel(ct_keyset ks, ct_call *call, void *user_data) {
    (void)ks, (void)user_data;
    if (call->mode == CT_CALL_INPLACE)
        return write(call) ? CT_OK : ct_last_status(); /* the reference stays with the scope */
    if (call->mode != CT_CALL_FUNCTIONAL)
        return ct_error(CT_ERROR_RUNTIME, ct_op_name(call->op), "has no out= form");
    ct_tensor *r = make(call);
    return r ? ct_call_set_output(call, 0, r) : ct_last_status();
}
