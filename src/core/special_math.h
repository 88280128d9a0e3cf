/* Special functions shared by the CPU loops and the CUDA kernels: digamma, the Hurwitz
 * zeta function and polygamma (Note [Digamma and polygamma]). Plain C that nvcc also
 * compiles for the device. */
#ifndef CT_SPECIAL_MATH_H
#define CT_SPECIAL_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define CT_SPECIAL_FN static inline __host__ __device__
#else
#define CT_SPECIAL_FN static inline
#endif

/* Note [Digamma and polygamma]
 * digamma(x) = d/dx log Gamma(x), in double for every float dtype.
 *  - Poles: +0 gives -inf and -0 gives +inf; negative integers (and -inf) give NaN, as
 *    in PyTorch.
 *  - Negative x reflect: psi(x) = psi(1 - x) - pi cot(pi x). cot has period pi, so it
 *    is taken of x less its nearest integer, which keeps the precision of large |x|
 *    and of x near a pole.
 *  - Positive x climb by psi(x) = psi(x + 1) - 1/x to x >= 10, where the asymptotic
 *    series log x - 1/(2x) - sum_k B_2k / (2k x^2k) with seven terms is below double
 *    rounding (the first term left out, B_16 / (16 x^16), is under 1e-16 there).
 * polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1, and digamma for n = 0. The
 * Hurwitz zeta(s, q) = sum_k (q + k)^-s by Euler-Maclaurin summation: direct terms until
 * q + k passes 9 (and at least nine of them), then the tail's integral, half the last
 * term and up to twelve Bernoulli corrections B_2j / (2j)! s (s+1) ... (s+2j-2) /
 * a^(s+2j-1). polygamma reflects negative x to 1 - x first (the derivatives of
 * psi(1 - x) - psi(x) = pi cot(pi x)), so zeta only ever sees q > 0; orders above 32
 * at negative x give NaN (CT_POLYGAMMA_REFLECT_MAX). +inf gives the limit, a signed 0. Nothing recurses and the stack
 * use is small, so the GPU runs the same code. */

/* cot(pi x) from x less its nearest integer (cot has period pi), which is exact, so x
 * near an integer keeps its relative precision; exactly 0 at halves, where tan(pi / 2)
 * in double is finite. */
CT_SPECIAL_FN double ct_cotpi_d(double x) {
    const double r = x - rint(x);
    return fabs(r) == 0.5 ? 0.0 : 1 / tan(3.14159265358979323846 * r);
}

CT_SPECIAL_FN double ct_digamma_d(double x) {
    const double pi = 3.14159265358979323846;
    if (x == 0)
        return copysign(INFINITY, -x);
    double acc = 0;
    if (x < 0) {
        if (x == floor(x))
            return NAN;
        acc = -pi * ct_cotpi_d(x);
        x = 1 - x;
    }
    while (x < 10) {
        acc -= 1 / x;
        x += 1;
    }
    double z = 1 / (x * x);
    double series =
        z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132 - z * (691.0 / 32760 - z / 12))))));
    return acc + log(x) - 0.5 / x - series;
}

/* zeta(s, q) for s > 1. */
CT_SPECIAL_FN double ct_zeta_d(double s, double q) {
    /* (2j)! / B_2j, j = 1..12 */
    const double inv_coef[12] = {12.0,
                                 -720.0,
                                 30240.0,
                                 -1209600.0,
                                 47900160.0,
                                 -1.8924375803183791606e9,
                                 7.47242496e10,
                                 -2.950130727918164224e12,
                                 1.1646782814350067249e14,
                                 -4.5979787224074726105e15,
                                 1.8152105401943546773e17,
                                 -7.1661652561756670113e18};
    const double eps = 1.1102230246251565e-16;
    if (s == 1)
        return INFINITY;
    if (!(q > 0))
        return q == floor(q) ? INFINITY : NAN;
    double sum = pow(q, -s), a = q, b = 0;
    for (int i = 0; i < 9 || a <= 9; i++) {
        a += 1;
        b = pow(a, -s);
        sum += b;
        if (fabs(b / sum) < eps)
            return sum;
    }
    sum += b * a / (s - 1) - 0.5 * b;
    double rising = 1, k = 0;
    for (int j = 0; j < 12; j++) {
        rising *= s + k;
        b /= a;
        double t = rising * b / inv_coef[j];
        sum += t;
        if (fabs(t / sum) < eps)
            break;
        rising *= s + k + 1;
        b /= a;
        k += 2;
    }
    return sum;
}

/* The largest order that negative x take by reflection (the cot polynomial's degree is
 * n + 1; its coefficients live on the stack, which a GPU thread has little of). */
#define CT_POLYGAMMA_REFLECT_MAX 32

/* polygamma(n, x), n >= 0 (the caller refuses negative n). */
CT_SPECIAL_FN double ct_polygamma_d(int64_t n, double x) {
    const double pi = 3.14159265358979323846;
    if (n == 0)
        return ct_digamma_d(x);
    if (x != x)
        return x;
    double fact = 1;
    for (int64_t k = 2; k <= n && fact < INFINITY; k++)
        fact *= (double)k;
    const double sign = n % 2 ? 1.0 : -1.0;
    if (x == INFINITY) /* the limit, (n - 1)! / x^n with psi_n's sign (PyTorch: NaN for n > 1) */
        return sign * 0.0;
    if (x == -INFINITY) /* PyTorch's values: trigamma reflects (NaN), higher orders hit zeta's pole */
        return n == 1 ? NAN : sign * INFINITY;
    if (x <= 0 && x == floor(x))
        return sign * INFINITY;
    if (x > 0 || n > 170) /* past n = 170 n! overflows: +-inf or NaN either way */
        return sign * fact * ct_zeta_d((double)n + 1, x);
    if (n > CT_POLYGAMMA_REFLECT_MAX)
        return NAN;
    /* Reflection: psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x)), where P_0(c)
     * = c and P_(k+1)(c) = -(1 + c^2) P_k'(c) (the derivatives of cot), so a negative x
     * costs no long sum and no cancellation; 1 - x > 1 goes straight to zeta. */
    double p[CT_POLYGAMMA_REFLECT_MAX + 2] = {0, 1}, c = ct_cotpi_d(x), pk = pi;
    for (int64_t k = 0; k < n; k++) {
        const int deg = (int)k + 1; /* of P_k */
        double prev = 0;
        for (int i = 0; i <= deg + 1; i++) { /* P_(k+1)[i] = -((i+1) P[i+1] + (i-1) P[i-1]) */
            double hi = i + 1 <= deg ? (i + 1) * p[i + 1] : 0, lo = i >= 1 ? (i - 1) * prev : 0;
            prev = p[i];
            p[i] = -(hi + lo);
        }
        pk *= pi;
    }
    double poly = 0;
    for (int i = (int)n + 1; i >= 0; i--)
        poly = poly * c + p[i];
    return -fact * ct_zeta_d((double)n + 1, 1 - x) - pk * poly;
}

#endif /* CT_SPECIAL_MATH_H */
