//! `weft models`, and the model registry every local run computes costs from.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail};
use weft_llm::config;
use weft_llm::models::ModelRegistry;

use crate::args::ModelsArgs;
use crate::sanitize;

/// The built-in model registry, with the overrides of `file` if one is given.
pub(crate) fn registry(file: Option<&Path>) -> anyhow::Result<Arc<ModelRegistry>> {
    let builtin = ModelRegistry::builtin();
    let Some(path) = file else { return Ok(builtin) };
    let json = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("cannot read models file {}: {e}", path.display()))?;
    let merged = builtin
        .with_overrides(&json)
        .map_err(|e| anyhow!("invalid models file {}: {e}", path.display()))?;
    Ok(Arc::new(merged))
}

/// `weft models`: one line per model.
pub(crate) fn command(args: &ModelsArgs) -> anyhow::Result<()> {
    if let Some(name) = args.provider.as_deref()
        && !config::PROVIDER_NAMES.contains(&name)
    {
        bail!("unknown provider {name:?}: expected one of {}", config::PROVIDER_NAMES.join(", "));
    }
    let registry = registry(args.models.as_deref())?;
    let wanted =
        args.provider.as_deref().map(|p| if p == "openai-responses" { "openai" } else { p });
    let mut out = BufWriter::new(io::stdout());
    let line = writeln!(
        out,
        "{:<10} {:<28} {:>8} {:>8} {:>10} {:>11} {:>9} {:>8}",
        "provider", "model", "in $/M", "out $/M", "cached $/M", "c-write $/M", "context", "max-out"
    );
    let mut result = line.and_then(|()| {
        for m in registry.list().iter().filter(|m| wanted.is_none_or(|p| m.provider == p)) {
            let p = &m.prices;
            writeln!(
                out,
                "{:<10} {:<28} {:>8} {:>8} {:>10} {:>11} {:>9} {:>8}",
                sanitize::visible(&m.provider),
                sanitize::visible(&m.id),
                p.input,
                p.output,
                p.cache_read,
                p.cache_write,
                m.context_window,
                m.max_output
            )?;
        }
        out.flush()
    });
    if matches!(&result, Err(e) if e.kind() == io::ErrorKind::BrokenPipe) {
        result = Ok(());
    }
    result.map_err(|e| anyhow!("cannot write to stdout: {e}"))
}
