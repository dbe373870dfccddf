//! The model registry: prices per million tokens for each usage bucket, context window, output
//! limit and capabilities of the main models of each provider (a data file kept in the repo),
//! overridable from configuration. (Being written.)

use weft_core::Prices;

/// Known models.
#[derive(Debug, Clone, Default)]
pub struct ModelRegistry {}

impl ModelRegistry {
    /// The prices of `provider`/`model`, if known.
    pub fn prices(&self, provider: &str, model: &str) -> Option<Prices> {
        let _ = (provider, model);
        None
    }
}
