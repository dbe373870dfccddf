//! What the workspace's own tests share.
//!
//! **A test that cannot run its real component fails**, unless the caller opted out of that
//! component explicitly: `WEFT_ALLOW_SKIP=postgres,browser` (a comma-separated list of
//! [`COMPONENTS`], or `all`). A skipped test says so on stderr and, when `WEFT_SKIP_LOG` names a
//! file, appends a line to it (`component<TAB>test<TAB>why`), from which the README's test
//! command (`scripts/test.sh`) prints what was skipped. The Node suites follow the same rule
//! (`clients/*/test/skip.*`).

use std::io::Write;

/// The components a test may need that a machine may lack, as `WEFT_ALLOW_SKIP` names them.
pub const COMPONENTS: [&str; 8] =
    ["postgres", "node", "browser", "runtimes", "mcp", "python", "phoenix", "tmpfs"];

/// Whether the caller let tests needing `component` skip (`WEFT_ALLOW_SKIP`).
pub fn skip_allowed(component: &str) -> bool {
    allowed_in(std::env::var("WEFT_ALLOW_SKIP").ok().as_deref().unwrap_or(""), component)
}

fn allowed_in(list: &str, component: &str) -> bool {
    list.split(',').map(str::trim).any(|c| c == component || c == "all")
}

/// `test` cannot run: `component` is missing (`why` says what to do). Panics unless the caller
/// allowed that component to be skipped; otherwise says so on stderr and in `WEFT_SKIP_LOG`,
/// and returns (the test then returns without asserting anything).
#[track_caller]
pub fn skip(component: &str, test: &str, why: &str) {
    assert!(COMPONENTS.contains(&component), "unknown component {component:?}");
    assert!(
        skip_allowed(component),
        "{test} cannot run: {why}\n(set WEFT_ALLOW_SKIP={component} to let it skip; \
         `scripts/test.sh` sets up every component)"
    );
    eprintln!("\n!!! SKIPPED {test} ({component}): {why}\n");
    if let Some(path) = std::env::var_os("WEFT_SKIP_LOG").filter(|p| !p.is_empty()) {
        let line = format!("{component}\t{test}\t{}\n", why.replace(['\t', '\n'], " "));
        // One write of a short line to a file opened for appending: lines of tests running at
        // once do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(error) = written {
            panic!("cannot record the skip in {}: {error}", path.to_string_lossy());
        }
    }
}

/// The tests' Postgres database (`WEFT_TEST_POSTGRES_URL`), or `None` once [`skip`] allowed
/// `test` to skip without it.
#[track_caller]
pub fn postgres_url(test: &str) -> Option<String> {
    match std::env::var("WEFT_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            skip(
                "postgres",
                test,
                "WEFT_TEST_POSTGRES_URL is not set (eval \"$(bash .ci/postgres.sh)\" sets it)",
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::allowed_in;

    #[test]
    fn only_the_components_named_or_all_may_skip() {
        assert!(allowed_in("postgres,browser", "browser"));
        assert!(allowed_in(" postgres , browser ", "postgres"));
        assert!(allowed_in("all", "python"));
        assert!(!allowed_in("", "postgres"));
        assert!(!allowed_in("postgresql", "postgres"));
        assert!(!allowed_in("browser", "postgres"));
    }
}
