//! The encoder's element-wise work (GELU, layer norm, softmax) over plain `f32` slices.
//!
//! Profiling candle's BERT on 2 cores showed these steps, not the matrix products, taking most
//! of the time: its erf-GELU calls a scalar `f64` erf per element (about a billion calls for
//! 1,400 tool texts) and its other element-wise steps run one element at a time. Here every
//! kernel is written so the compiler can vectorise it: no calls into libm (an own `exp`, erf
//! after Abramowitz & Stegun 7.1.26), no branches on data, reductions kept in 16 independent
//! lanes. Each kernel is compiled three times (AVX-512, AVX2 + FMA, the baseline) and the
//! widest one the CPU supports is picked at run time, so a plain `cargo build` gets the wide
//! instructions without `target-cpu` flags.

/// Lanes of the reductions: one AVX-512 register of `f32`.
const LANES: usize = 16;

/// Defines `pub(super) fn $name` that runs `$body` compiled for the widest instruction set
/// the CPU has. The body is an `#[inline(always)]` function, so each wrapper below gets its
/// own copy compiled with its target features.
macro_rules! dispatched {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) => $body:ident) => {
        $(#[$doc])*
        pub(super) fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                unsafe fn avx512($($arg: $ty),*) {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) {
                    $body($($arg),*)
                }
                match level() {
                    // SAFETY: `level` found these instructions supported by this CPU.
                    Level::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    Level::Avx2 => return unsafe { avx2($($arg),*) },
                    Level::Baseline => {}
                }
            }
            $body($($arg),*)
        }
    };
}

#[cfg(target_arch = "x86_64")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Avx512,
    Avx2,
    Baseline,
}

/// The widest instruction set of this CPU, detected once.
#[cfg(target_arch = "x86_64")]
fn level() -> Level {
    static LEVEL: std::sync::OnceLock<Level> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| {
        if std::arch::is_x86_feature_detected!("avx512f") {
            Level::Avx512
        } else if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            Level::Avx2
        } else {
            Level::Baseline
        }
    })
}

dispatched!(
    /// GELU with the exact (erf) form BERT uses, in place.
    fn gelu(xs: &mut [f32]) => gelu_body
);

dispatched!(
    /// Layer norm of each `gamma.len()`-wide row of `xs`, in place.
    fn layer_norm(xs: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) => layer_norm_body
);

dispatched!(
    /// Softmax of each `width`-wide row of `xs`, in place.
    fn softmax_rows(xs: &mut [f32], width: usize) => softmax_body
);

#[inline(always)]
fn gelu_body(xs: &mut [f32]) {
    for x in xs {
        *x = 0.5 * *x * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2));
    }
}

#[inline(always)]
fn layer_norm_body(xs: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let width = gamma.len();
    assert!(width > 0 && beta.len() == width && xs.len().is_multiple_of(width));
    let scale = 1.0 / width as f32;
    for row in xs.chunks_exact_mut(width) {
        let mean = sum(row) * scale;
        let mut squares = [0.0f32; LANES];
        let mut chunks = row.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (acc, &x) in squares.iter_mut().zip(chunk) {
                let d = x - mean;
                *acc += d * d;
            }
        }
        let mut variance: f32 = squares.iter().sum();
        for &x in chunks.remainder() {
            variance += (x - mean) * (x - mean);
        }
        let inv = 1.0 / (variance * scale + eps).sqrt();
        for ((x, &g), &b) in row.iter_mut().zip(gamma).zip(beta) {
            *x = (*x - mean) * inv * g + b;
        }
    }
}

#[inline(always)]
fn softmax_body(xs: &mut [f32], width: usize) {
    assert!(width > 0 && xs.len().is_multiple_of(width));
    for row in xs.chunks_exact_mut(width) {
        let mut lanes = [f32::NEG_INFINITY; LANES];
        let mut chunks = row.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (m, &x) in lanes.iter_mut().zip(chunk) {
                *m = m.max(x);
            }
        }
        let max = chunks
            .remainder()
            .iter()
            .chain(&lanes)
            .fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        for x in row.iter_mut() {
            *x = exp(*x - max);
        }
        // The largest term is exp(0) = 1, so the sum is at least 1.
        let inv = 1.0 / sum(row);
        for x in row.iter_mut() {
            *x *= inv;
        }
    }
}

/// The sum of `xs`, in 16 lanes (the order differs from a left-to-right sum only by
/// rounding).
#[inline(always)]
fn sum(xs: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (acc, &x) in lanes.iter_mut().zip(chunk) {
            *acc += x;
        }
    }
    lanes.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}

/// `e^x` within about 2 units in the last place for x in [-87, 88] (clamped outside it).
///
/// Range reduction `x = n ln 2 + r` with |r| ≤ ln 2 / 2, a degree-7 Taylor polynomial for
/// `e^r` (remainder below 1e-8 relative) and `2^n` built from its exponent bits.
#[inline(always)]
fn exp(x: f32) -> f32 {
    // Adding and subtracting 1.5 · 2^23 rounds to the nearest integer without a libm call.
    const ROUND: f32 = 12_582_912.0;
    // ln 2 split in two so that n · LN2_HI is exact for the n that occur.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * std::f32::consts::LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.0 / 5040.0;
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    // `shifted` holds n in its low mantissa bits (its bits are ROUND's plus n), so 2^n is
    // built with integer operations only: a float-to-int `as` would be scalarised for its
    // saturating semantics. n is in [-126, 127], so the biased exponent is in [1, 254].
    let biased = shifted.to_bits().wrapping_sub(ROUND.to_bits() - 127);
    let scale = f32::from_bits(biased << 23);
    p * scale
}

/// The error function within 5e-7 (Abramowitz & Stegun 7.1.26: 1.5e-7, plus `f32`
/// rounding), odd by construction.
#[inline(always)]
fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_8,
        -1.453_152,
        1.061_405_4,
    ];
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let mut poly = A[4];
    for &c in A[..4].iter().rev() {
        poly = poly * t + c;
    }
    let y = 1.0 - poly * t * exp(-a * a);
    y.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// erf by its Maclaurin series (x small) or continued fraction (x large), in f64.
    fn erf_f64(x: f64) -> f64 {
        let a = x.abs();
        let y = if a < 2.5 {
            let (mut term, mut total) = (a, a);
            for n in 1..200 {
                term *= -a * a / n as f64;
                total += term / (2 * n + 1) as f64;
            }
            total * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let mut fraction = 0.0;
            for k in (1..60).rev() {
                fraction = (k as f64 / 2.0) / (a + fraction);
            }
            1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / (a + fraction)
        };
        y.copysign(x)
    }

    #[test]
    fn exp_is_accurate_over_its_range() {
        let mut x = -87.0f32;
        while x <= 88.0 {
            let want = (x as f64).exp();
            let got = exp(x) as f64;
            assert!(
                ((got - want) / want).abs() < 3e-7,
                "exp({x}) = {got}, want {want}"
            );
            x += 0.0137;
        }
        assert_eq!(exp(0.0), 1.0);
        assert!(
            exp(-1000.0) > 0.0 && exp(1000.0).is_finite(),
            "clamped, not 0 or inf"
        );
    }

    #[test]
    fn erf_and_gelu_are_accurate() {
        let mut x = -6.0f32;
        while x <= 6.0 {
            let want = erf_f64(x as f64);
            // The formula's 1.5e-7 plus f32 rounding of the cancelling `1 - …`.
            assert!(
                (erf(x) as f64 - want).abs() < 5e-7,
                "erf({x}) = {} want {want}",
                erf(x)
            );
            x += 0.001;
        }
        let mut xs: Vec<f32> = (-4000..4000).map(|i| i as f32 * 0.0025).collect();
        let inputs = xs.clone();
        gelu(&mut xs);
        for (&x, &y) in inputs.iter().zip(&xs) {
            let want = 0.5 * x as f64 * (1.0 + erf_f64(x as f64 / 2f64.sqrt()));
            assert!(
                (y as f64 - want).abs() < 1e-6,
                "gelu({x}) = {y} want {want}"
            );
        }
    }

    #[test]
    fn every_instruction_set_computes_the_same() {
        // The dispatched kernels run the widest instruction set here; the bodies called
        // directly are the baseline build every other CPU falls back to.
        let inputs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) / 61.0).collect();
        let (mut wide, mut base) = (inputs.clone(), inputs.clone());
        gelu(&mut wide);
        gelu_body(&mut base);
        assert_close(&wide, &base);
        let (mut wide, mut base) = (inputs.clone(), inputs.clone());
        softmax_rows(&mut wide, 40);
        softmax_body(&mut base, 40);
        assert_close(&wide, &base);
        let gamma = vec![1.5f32; 40];
        let beta = vec![0.25f32; 40];
        let (mut wide, mut base) = (inputs.clone(), inputs);
        layer_norm(&mut wide, &gamma, &beta, 1e-12);
        layer_norm_body(&mut base, &gamma, &beta, 1e-12);
        assert_close(&wide, &base);
    }

    fn assert_close(a: &[f32], b: &[f32]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-6 * (1.0 + x.abs()), "{x} vs {y}");
        }
    }

    #[test]
    fn softmax_and_layer_norm_match_their_definitions() {
        let width = 37; // not a multiple of the lanes
        let mut xs: Vec<f32> = (0..width * 3)
            .map(|i| ((i * 7919) % 101) as f32 / 9.0)
            .collect();
        let inputs = xs.clone();
        softmax_rows(&mut xs, width);
        for (row, input) in xs.chunks(width).zip(inputs.chunks(width)) {
            let max = input.iter().fold(f64::MIN, |m, &x| m.max(x as f64));
            let total: f64 = input.iter().map(|&x| (x as f64 - max).exp()).sum();
            for (&y, &x) in row.iter().zip(input) {
                let want = (x as f64 - max).exp() / total;
                assert!((y as f64 - want).abs() < 1e-6);
            }
        }

        let mut xs = inputs.clone();
        let gamma: Vec<f32> = (0..width).map(|i| 1.0 + i as f32 / 10.0).collect();
        let beta: Vec<f32> = (0..width).map(|i| i as f32 / 100.0).collect();
        layer_norm(&mut xs, &gamma, &beta, 1e-12);
        for (row, input) in xs.chunks(width).zip(inputs.chunks(width)) {
            let mean = input.iter().map(|&x| x as f64).sum::<f64>() / width as f64;
            let var = input
                .iter()
                .map(|&x| (x as f64 - mean).powi(2))
                .sum::<f64>()
                / width as f64;
            for i in 0..width {
                let want = (input[i] as f64 - mean) / (var + 1e-12).sqrt() * gamma[i] as f64
                    + beta[i] as f64;
                assert!((row[i] as f64 - want).abs() < 1e-4, "{} vs {want}", row[i]);
            }
        }
    }
}
