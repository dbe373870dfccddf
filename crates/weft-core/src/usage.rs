//! Token usage and its cost.

use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

/// Tokens used by one model call (or a sum of calls).
///
/// `input` counts non-cached input tokens for every provider; cached reads and writes are their
/// own buckets, and `total` is the sum of the four buckets. `reasoning` is informational: it is
/// part of `output` for the providers that report it.
///
/// Counts come from providers and scripts, so all arithmetic on them saturates at `u64::MAX`
/// instead of overflowing: an absurd count never panics a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    /// Non-cached input tokens.
    pub input: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read: u64,
    /// Input tokens written to the provider's cache.
    pub cache_write: u64,
    /// Reasoning tokens, when the provider reports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
    /// `input + output + cache_read + cache_write`.
    pub total: u64,
}

impl Usage {
    /// Usage from the four buckets, with `total` computed.
    pub fn new(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Self {
        Self { input, output, cache_read, cache_write, reasoning: None, total: 0 }.with_total()
    }

    /// Every input token: `input + cache_read + cache_write` (saturating at `u64::MAX`), what
    /// formats that do not split the cache call the prompt's tokens.
    pub fn total_input(&self) -> u64 {
        self.input.saturating_add(self.cache_read).saturating_add(self.cache_write)
    }

    /// The same usage with `total` recomputed from the buckets (saturating at `u64::MAX`).
    pub fn with_total(mut self) -> Self {
        self.total = self
            .input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write);
        self
    }
}

impl Add for Usage {
    type Output = Usage;
    fn add(mut self, rhs: Usage) -> Usage {
        self += rhs;
        self
    }
}

/// Bucket by bucket, saturating at `u64::MAX`.
impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Usage) {
        self.input = self.input.saturating_add(rhs.input);
        self.output = self.output.saturating_add(rhs.output);
        self.cache_read = self.cache_read.saturating_add(rhs.cache_read);
        self.cache_write = self.cache_write.saturating_add(rhs.cache_write);
        self.reasoning = match (self.reasoning, rhs.reasoning) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        self.total = self.total.saturating_add(rhs.total);
    }
}

/// What tokens cost, in US dollars, per bucket.
///
/// Every amount is finite: arithmetic that would give an infinity (absurd counts or prices)
/// clamps to `±f64::MAX`, and a NaN (a price that is not a number) counts as 0, so a cost can
/// always be serialized as JSON and summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Cost {
    /// Non-cached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
    /// The sum of the buckets.
    pub total: f64,
}

impl Cost {
    /// The cost of `usage` at `prices` (US dollars per million tokens, per bucket), finite
    /// whatever the counts and prices (see [`Cost`]).
    pub fn of(usage: &Usage, prices: &Prices) -> Self {
        // `u64 as f64` is exact up to 2^53 and rounds beyond; it never overflows. Dividing the
        // price first keeps `u64::MAX` tokens at any sane price far from `f64::MAX`.
        let per = |tokens: u64, price: f64| finite(tokens as f64 * (price / 1_000_000.0));
        let input = per(usage.input, prices.input);
        let output = per(usage.output, prices.output);
        let cache_read = per(usage.cache_read, prices.cache_read);
        let cache_write = per(usage.cache_write, prices.cache_write);
        Self {
            input,
            output,
            cache_read,
            cache_write,
            total: finite(finite(finite(input + output) + cache_read) + cache_write),
        }
    }
}

/// `x` made finite: infinities clamp to `±f64::MAX`, NaN becomes 0.
fn finite(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(-f64::MAX, f64::MAX) }
}

impl Add for Cost {
    type Output = Cost;
    fn add(mut self, rhs: Cost) -> Cost {
        self += rhs;
        self
    }
}

/// Bucket by bucket; the sums stay finite (see [`Cost`]).
impl AddAssign for Cost {
    fn add_assign(&mut self, rhs: Cost) {
        self.input = finite(self.input + rhs.input);
        self.output = finite(self.output + rhs.output);
        self.cache_read = finite(self.cache_read + rhs.cache_read);
        self.cache_write = finite(self.cache_write + rhs.cache_write);
        self.total = finite(self.total + rhs.total);
    }
}

/// A model's prices in US dollars per million tokens, per bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Prices {
    /// Non-cached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_sums() {
        let a = Usage::new(10, 5, 2, 1);
        assert_eq!(a.total, 18);
        let mut b = Usage::new(1, 1, 0, 0);
        b.reasoning = Some(3);
        let s = a + b;
        assert_eq!((s.input, s.output, s.total, s.reasoning), (11, 6, 20, Some(3)));
    }

    #[test]
    fn cost_per_bucket() {
        let prices = Prices { input: 2.0, output: 10.0, cache_read: 0.5, cache_write: 2.5 };
        let c = Cost::of(&Usage::new(1_000_000, 500_000, 2_000_000, 0), &prices);
        assert_eq!((c.input, c.output, c.cache_read, c.cache_write), (2.0, 5.0, 1.0, 0.0));
        assert_eq!(c.total, 8.0);
    }

    #[test]
    fn totals_saturate_instead_of_overflowing() {
        let u = Usage::new(u64::MAX, 1, u64::MAX - 1, 7);
        assert_eq!(u.total, u64::MAX);
        let near = Usage::new(u64::MAX - 2, 0, 0, 0);
        assert_eq!(near.total, u64::MAX - 2);
        assert_eq!(Usage::new(u64::MAX, 0, 0, 0).with_total().total, u64::MAX);
        assert_eq!(Usage::new(10, 5, 2, 1).total_input(), 13);
        assert_eq!(Usage::new(3, 0, u64::MAX, 1).total_input(), u64::MAX);
    }

    #[test]
    fn sums_saturate_bucket_by_bucket() {
        let mut big = Usage::new(u64::MAX - 1, u64::MAX, 10, u64::MAX);
        big.reasoning = Some(u64::MAX - 3);
        let mut small = Usage::new(5, 5, 5, 5);
        small.reasoning = Some(10);
        let s = big + small;
        assert_eq!(
            (s.input, s.output, s.cache_read, s.cache_write),
            (u64::MAX, u64::MAX, 15, u64::MAX)
        );
        assert_eq!((s.reasoning, s.total), (Some(u64::MAX), u64::MAX));
        let mut acc = Usage::default();
        for _ in 0..3 {
            acc += big;
        }
        assert_eq!((acc.input, acc.total, acc.reasoning), (u64::MAX, u64::MAX, Some(u64::MAX)));
        // One side without reasoning: the other's count, saturated.
        let mut plain = Usage::new(1, 1, 0, 0);
        plain += big;
        assert_eq!(plain.reasoning, Some(u64::MAX - 3));
    }

    #[test]
    fn the_cost_of_absurd_counts_is_finite() {
        let max = Usage::new(u64::MAX, u64::MAX, u64::MAX, u64::MAX);
        let prices = Prices { input: 15.0, output: 75.0, cache_read: 1.5, cache_write: 18.75 };
        let c = Cost::of(&max, &prices);
        for x in [c.input, c.output, c.cache_read, c.cache_write, c.total] {
            assert!(x.is_finite() && x > 0.0, "{c:?}");
        }
        assert!((c.output - u64::MAX as f64 * 75.0 / 1e6).abs() / c.output < 1e-12);
        // Prices so large that the products overflow f64: clamped, never infinite.
        let absurd =
            Prices { input: f64::MAX, output: f64::MAX, cache_read: 0.0, cache_write: 0.0 };
        let c = Cost::of(&max, &absurd);
        assert_eq!((c.input, c.output, c.total), (f64::MAX, f64::MAX, f64::MAX));
        // A price that is not a number counts as zero.
        let nan = Prices { input: f64::NAN, output: 1.0, ..Prices::default() };
        let c = Cost::of(&Usage::new(1_000_000, 1_000_000, 0, 0), &nan);
        assert_eq!((c.input, c.output, c.total), (0.0, 1.0, 1.0));
        // Sums of clamped costs stay finite and serialize.
        let mut sum = Cost::of(&max, &absurd);
        sum += Cost::of(&max, &absurd);
        assert_eq!(sum.total, f64::MAX);
        assert!(serde_json::to_string(&sum).is_ok_and(|j| !j.contains("null")), "{sum:?}");
        let z = Cost::of(&Usage::default(), &absurd);
        assert_eq!(z, Cost::default(), "0 tokens at any price cost 0");
    }
}
