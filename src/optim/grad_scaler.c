/* The gradient scaler (torch.amp.GradScaler).
 *
 * Note [Gradient scaler]
 * The scale lives on the host, as a float32 value (PyTorch keeps it in a float32
 * tensor, and the growth and backoff round as float32 there too). Scaling the loss is
 * one multiplication by it, unscaling one in-place multiplication of each gradient by
 * its float32 reciprocal. The inf/NaN check stays on the gradients' device: each
 * gradient gives all(isfinite(g)), and-ed into one boolean per device and optimizer.
 * step reads those booleans back, which is the one synchronisation of an iteration;
 * update uses what step read (or reads it, when step was not called), so choosing
 * between growth and backoff costs no further transfer. Everything is made of ops, so
 * the scaler runs on every device. Per optimizer a stage is kept between updates
 * (ready, unscaled, stepped), with PyTorch's checks of the call order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch.h"
#include "ctorch/ext.h"
#include "grad_access.h"

typedef enum { STAGE_READY = 0, STAGE_UNSCALED, STAGE_STEPPED } stage_t;

typedef struct device_check {
    ct_device device;
    ct_tensor *ok; /* strong reference: a bool 0-d tensor, true while every gradient was finite */
} device_check;

typedef struct opt_state {
    const ct_optimizer *opt;
    stage_t stage;
    device_check *checks;
    int nchecks;
    bool read;      /* found_inf below holds the checks' value */
    bool found_inf;
    bool stepped;   /* the last step ran the optimizer */
} opt_state;

struct ct_grad_scaler {
    ct_grad_scaler_options o;
    float scale;
    int64_t growth_tracker;
    bool initialized; /* scale was called (PyTorch's lazily made _scale) */
    opt_state *states;
    int nstates;
};

ct_grad_scaler_options ct_grad_scaler_defaults(void) {
    ct_grad_scaler_options o;
    memset(&o, 0, sizeof o);
    o.init_scale = 65536.0;
    o.growth_factor = 2.0;
    o.backoff_factor = 0.5;
    o.growth_interval = 2000;
    o.enabled = true;
    return o;
}

ct_grad_scaler *ct_grad_scaler_new(const ct_grad_scaler_options *o) {
    ct_grad_scaler_options d = o ? *o : ct_grad_scaler_defaults();
    if (d.enabled) {
        if (!(d.growth_factor > 1.0)) {
            ct_error(CT_ERROR_VALUE, "GradScaler", "The growth factor must be > 1.0.");
            return NULL;
        }
        if (!(d.backoff_factor < 1.0)) {
            ct_error(CT_ERROR_VALUE, "GradScaler", "The backoff factor must be < 1.0.");
            return NULL;
        }
        if (!isfinite(d.init_scale)) {
            ct_error(CT_ERROR_VALUE, "GradScaler", "init_scale must be finite, got %g", d.init_scale);
            return NULL;
        }
    }
    ct_grad_scaler *s = ct_xcalloc("GradScaler", 1, sizeof *s);
    if (!s)
        return NULL;
    s->o = d;
    s->scale = (float)d.init_scale;
    return s;
}

static void clear_state(opt_state *st) {
    for (int i = 0; i < st->nchecks; i++)
        ct_release(st->checks[i].ok);
    free(st->checks);
    st->checks = NULL;
    st->nchecks = 0;
}

static void reset_states(ct_grad_scaler *s) {
    for (int i = 0; i < s->nstates; i++)
        clear_state(&s->states[i]);
    free(s->states);
    s->states = NULL;
    s->nstates = 0;
}

void ct_grad_scaler_free(ct_grad_scaler *s) {
    if (!s)
        return;
    reset_states(s);
    free(s);
}

bool ct_grad_scaler_is_enabled(const ct_grad_scaler *s) { return s && s->o.enabled; }

ct_tensor *ct_grad_scaler_scale(ct_grad_scaler *s, const ct_tensor *loss) {
    if (!s) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "GradScaler.scale", "scaler is NULL");
        return NULL;
    }
    CT_CHECK_ARG("GradScaler.scale", loss);
    if (!s->o.enabled)
        return ct_scope_adopt(ct_retain((ct_tensor *)loss));
    s->initialized = true;
    return ct_mul_scalar(loss, ct_scalar_float((double)s->scale));
}

/* The state of opt for this iteration, made on first use; NULL when out of memory. */
static opt_state *state_of(ct_grad_scaler *s, const ct_optimizer *opt) {
    for (int i = 0; i < s->nstates; i++)
        if (s->states[i].opt == opt)
            return &s->states[i];
    opt_state *p = ct_xrealloc("GradScaler", s->states, (size_t)(s->nstates + 1) * sizeof *p);
    if (!p)
        return NULL;
    s->states = p;
    opt_state *st = &p[s->nstates++];
    memset(st, 0, sizeof *st);
    st->opt = opt;
    return st;
}

static ct_status check_initialized(const ct_grad_scaler *s, const char *fn) {
    if (!s->initialized)
        return ct_error(CT_ERROR_RUNTIME, fn,
                        "Attempted %s but _scale is None.  This may indicate your script did not use "
                        "scaler.scale(loss or outputs) earlier in the iteration.",
                        fn);
    return CT_OK;
}

/* Ands ok into the check of its device. */
static ct_status record(opt_state *st, const ct_tensor *ok) {
    ct_device d = ct_tensor_device(ok);
    for (int i = 0; i < st->nchecks; i++)
        if (st->checks[i].device.type == d.type && st->checks[i].device.index == d.index) {
            ct_tensor *both = ct_logical_and(st->checks[i].ok, ok);
            if (!both)
                return ct_last_status();
            ct_release(st->checks[i].ok);
            st->checks[i].ok = ct_retain(both);
            return CT_OK;
        }
    device_check *p = ct_xrealloc("GradScaler", st->checks, (size_t)(st->nchecks + 1) * sizeof *p);
    if (!p)
        return ct_last_status();
    st->checks = p;
    p[st->nchecks++] = (device_check){d, ct_retain((ct_tensor *)ok)};
    return CT_OK;
}

static ct_status unscale_grads(ct_grad_scaler *s, ct_optimizer *opt, opt_state *st) {
    const char *fn = "GradScaler.unscale_";
    int ngroups = ct_optimizer_num_groups(opt);
    /* refuse float16 gradients before changing any */
    for (int g = 0; g < ngroups; g++)
        for (int i = 0; i < ct_optimizer_group_size(opt, g); i++) {
            ct_tensor *grad = ct_optim_grad(ct_optimizer_group_param(opt, g, i));
            if (grad && ct_tensor_dtype(grad) == CT_F16)
                return ct_error(CT_ERROR_VALUE, fn, "Attempting to unscale FP16 gradients.");
        }
    /* PyTorch: scale.double().reciprocal().float() */
    float inv = (float)(1.0 / (double)s->scale);
    bool prev = ct_set_grad_enabled(false);
    ct_status rc = CT_OK;
    for (int g = 0; g < ngroups && rc == CT_OK; g++)
        for (int i = 0; i < ct_optimizer_group_size(opt, g) && rc == CT_OK; i++) {
            ct_tensor *grad = ct_optim_grad(ct_optimizer_group_param(opt, g, i));
            if (!grad)
                continue;
            ct_scope_begin();
            ct_tensor *ok = ct_all(ct_isfinite(grad), NULL, 0, false);
            rc = ok ? record(st, ok) : ct_last_status();
            if (rc == CT_OK && !ct_mul_scalar_(grad, ct_scalar_float((double)inv)))
                rc = ct_last_status();
            ct_scope_end();
        }
    ct_set_grad_enabled(prev);
    return rc;
}

ct_status ct_grad_scaler_unscale_(ct_grad_scaler *s, ct_optimizer *opt) {
    const char *fn = "unscale_";
    if (!s || !opt)
        return ct_error(CT_ERROR_NULL_ARGUMENT, fn, "%s is NULL", !s ? "scaler" : "optimizer");
    if (!s->o.enabled)
        return CT_OK;
    ct_status rc = check_initialized(s, fn);
    if (rc != CT_OK)
        return rc;
    opt_state *st = state_of(s, opt);
    if (!st)
        return ct_last_status();
    if (st->stage == STAGE_UNSCALED)
        return ct_error(CT_ERROR_RUNTIME, fn, "unscale_() has already been called on this optimizer since the last update().");
    if (st->stage == STAGE_STEPPED)
        return ct_error(CT_ERROR_RUNTIME, fn, "unscale_() is being called after step().");
    rc = unscale_grads(s, opt, st);
    if (rc != CT_OK) {
        clear_state(st); /* the next attempt starts over */
        return rc;
    }
    st->stage = STAGE_UNSCALED;
    return CT_OK;
}

/* Reads the checks of st back from their devices (once). */
static ct_status read_checks(opt_state *st) {
    if (st->read)
        return CT_OK;
    bool found = false;
    for (int i = 0; i < st->nchecks; i++) {
        int64_t ok = 0;
        ct_status rc = ct_item_int64(st->checks[i].ok, &ok);
        if (rc != CT_OK)
            return rc;
        found |= ok == 0;
    }
    st->found_inf = found;
    st->read = true;
    return CT_OK;
}

ct_status ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt) {
    const char *fn = "step";
    if (!s || !opt)
        return ct_error(CT_ERROR_NULL_ARGUMENT, fn, "%s is NULL", !s ? "scaler" : "optimizer");
    if (!s->o.enabled)
        return ct_optimizer_step(opt);
    ct_status rc = check_initialized(s, fn);
    if (rc != CT_OK)
        return rc;
    opt_state *st = state_of(s, opt);
    if (!st)
        return ct_last_status();
    if (st->stage == STAGE_STEPPED)
        return ct_error(CT_ERROR_RUNTIME, fn, "step() has already been called since the last update().");
    if (st->stage == STAGE_READY && (rc = ct_grad_scaler_unscale_(s, opt)) != CT_OK)
        return rc;
    if (st->nchecks == 0)
        return ct_error(CT_ERROR_RUNTIME, fn, "No inf checks were recorded for this optimizer.");
    if ((rc = read_checks(st)) != CT_OK)
        return rc;
    st->stepped = false;
    if (!st->found_inf) {
        rc = ct_optimizer_step(opt);
        if (rc != CT_OK)
            return rc;
        st->stepped = true;
    }
    st->stage = STAGE_STEPPED;
    return CT_OK;
}

bool ct_grad_scaler_stepped(const ct_grad_scaler *s, const ct_optimizer *opt) {
    if (!s || !opt)
        return false;
    for (int i = 0; i < s->nstates; i++)
        if (s->states[i].opt == opt)
            return s->states[i].stepped;
    return false;
}

ct_status ct_grad_scaler_update(ct_grad_scaler *s) {
    const char *fn = "update";
    if (!s)
        return ct_error(CT_ERROR_NULL_ARGUMENT, fn, "scaler is NULL");
    if (!s->o.enabled)
        return CT_OK;
    ct_status rc = check_initialized(s, fn);
    if (rc != CT_OK)
        return rc;
    int nchecks = 0;
    bool found = false;
    for (int i = 0; i < s->nstates; i++) {
        if ((rc = read_checks(&s->states[i])) != CT_OK)
            return rc;
        nchecks += s->states[i].nchecks;
        found |= s->states[i].found_inf;
    }
    if (nchecks == 0)
        return ct_error(CT_ERROR_RUNTIME, fn, "No inf checks were recorded prior to update.");
    /* PyTorch's _amp_update_scale_, in float32 */
    if (found) {
        s->scale = (float)((double)s->scale * s->o.backoff_factor);
        s->growth_tracker = 0;
    } else if (s->growth_tracker + 1 == s->o.growth_interval) {
        float grown = (float)((double)s->scale * s->o.growth_factor);
        if (isfinite(grown))
            s->scale = grown;
        s->growth_tracker = 0;
    } else {
        s->growth_tracker++;
    }
    reset_states(s);
    return CT_OK;
}

ct_status ct_grad_scaler_update_to(ct_grad_scaler *s, double new_scale) {
    const char *fn = "update";
    if (!s)
        return ct_error(CT_ERROR_NULL_ARGUMENT, fn, "scaler is NULL");
    if (!s->o.enabled)
        return CT_OK;
    ct_status rc = check_initialized(s, fn);
    if (rc != CT_OK)
        return rc;
    if (!isfinite(new_scale) || new_scale <= 0)
        return ct_error(CT_ERROR_VALUE, fn, "new_scale must be a positive finite number, got %g", new_scale);
    s->scale = (float)new_scale;
    reset_states(s);
    return CT_OK;
}

double ct_grad_scaler_get_scale(const ct_grad_scaler *s) {
    if (!s)
        return NAN;
    if (!s->o.enabled)
        return 1.0;
    return s->initialized ? (double)s->scale : s->o.init_scale;
}

int64_t ct_grad_scaler_growth_tracker(const ct_grad_scaler *s) { return s && s->o.enabled ? s->growth_tracker : 0; }

ct_value *ct_grad_scaler_state_dict(const ct_grad_scaler *s) {
    if (!s) {
        ct_error(CT_ERROR_NULL_ARGUMENT, "GradScaler.state_dict", "scaler is NULL");
        return NULL;
    }
    ct_value *d = ct_value_new_dict();
    if (!d || !s->o.enabled)
        return d;
    if (ct_value_set(d, "scale", ct_value_new_float(ct_grad_scaler_get_scale(s))) != CT_OK ||
        ct_value_set(d, "growth_factor", ct_value_new_float(s->o.growth_factor)) != CT_OK ||
        ct_value_set(d, "backoff_factor", ct_value_new_float(s->o.backoff_factor)) != CT_OK ||
        ct_value_set(d, "growth_interval", ct_value_new_int(s->o.growth_interval)) != CT_OK ||
        ct_value_set(d, "_growth_tracker", ct_value_new_int(s->growth_tracker)) != CT_OK) {
        ct_value_free(d);
        return NULL;
    }
    return d;
}

/* A number of the dict, or an error naming the key. */
static bool get_number(const ct_value *sd, const char *key, bool integer, double *out) {
    const ct_value *v = ct_value_get(sd, key);
    ct_value_type k = v ? ct_value_kind(v) : CT_VALUE_NONE;
    if (!v || (k != CT_VALUE_INT && (integer || k != CT_VALUE_FLOAT))) {
        ct_error(CT_ERROR_VALUE, "GradScaler.load_state_dict", "state_dict needs %s '%s'",
                 integer ? "an int" : "a number", key);
        return false;
    }
    *out = k == CT_VALUE_INT ? (double)ct_value_int(v) : ct_value_float(v);
    return true;
}

ct_status ct_grad_scaler_load_state_dict(ct_grad_scaler *s, const ct_value *sd) {
    const char *fn = "GradScaler.load_state_dict";
    if (!s || !sd)
        return ct_error(CT_ERROR_NULL_ARGUMENT, fn, "%s is NULL", !s ? "scaler" : "state_dict");
    if (!s->o.enabled)
        return CT_OK;
    if (ct_value_kind(sd) != CT_VALUE_DICT)
        return ct_error(CT_ERROR_VALUE, fn, "state_dict should be a dict, got %s",
                        ct_value_type_name(ct_value_kind(sd)));
    if (ct_value_len(sd) == 0)
        return ct_error(CT_ERROR_RUNTIME, fn,
                        "The source state dict is empty, possibly because it was saved from a disabled instance "
                        "of GradScaler.");
    double scale, growth, backoff, interval, tracker;
    if (!get_number(sd, "scale", false, &scale) || !get_number(sd, "growth_factor", false, &growth) ||
        !get_number(sd, "backoff_factor", false, &backoff) || !get_number(sd, "growth_interval", true, &interval) ||
        !get_number(sd, "_growth_tracker", true, &tracker))
        return ct_last_status();
    if (!isfinite(scale) || !(growth > 1.0) || !(backoff < 1.0) || tracker < 0)
        return ct_error(CT_ERROR_VALUE, fn, "state_dict holds invalid values (scale %g, growth_factor %g, "
                        "backoff_factor %g, _growth_tracker %g)", scale, growth, backoff, tracker);
    s->o.init_scale = scale;
    s->scale = (float)scale;
    s->o.growth_factor = growth;
    s->o.backoff_factor = backoff;
    s->o.growth_interval = (int64_t)interval;
    s->growth_tracker = (int64_t)tracker;
    return CT_OK;
}
