//! Token usage and its cost.

use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

/// Tokens used by one model call (or a sum of calls).
///
/// `input` counts non-cached input tokens for every provider; cached reads and writes are their
/// own buckets, and `total` is the sum of the four buckets. `reasoning` is informational: it is
/// part of `output` for the providers that report it.
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

    /// The same usage with `total` recomputed from the buckets.
    pub fn with_total(mut self) -> Self {
        self.total = self.input + self.output + self.cache_read + self.cache_write;
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

impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Usage) {
        self.input += rhs.input;
        self.output += rhs.output;
        self.cache_read += rhs.cache_read;
        self.cache_write += rhs.cache_write;
        self.reasoning = match (self.reasoning, rhs.reasoning) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.total += rhs.total;
    }
}

/// What tokens cost, in US dollars, per bucket.
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
    /// The cost of `usage` at `prices` (US dollars per million tokens, per bucket).
    pub fn of(usage: &Usage, prices: &Prices) -> Self {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        let input = per(usage.input, prices.input);
        let output = per(usage.output, prices.output);
        let cache_read = per(usage.cache_read, prices.cache_read);
        let cache_write = per(usage.cache_write, prices.cache_write);
        Self {
            input,
            output,
            cache_read,
            cache_write,
            total: input + output + cache_read + cache_write,
        }
    }
}

impl Add for Cost {
    type Output = Cost;
    fn add(mut self, rhs: Cost) -> Cost {
        self += rhs;
        self
    }
}

impl AddAssign for Cost {
    fn add_assign(&mut self, rhs: Cost) {
        self.input += rhs.input;
        self.output += rhs.output;
        self.cache_read += rhs.cache_read;
        self.cache_write += rhs.cache_write;
        self.total += rhs.total;
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
}
