//! Replays the saved fuzz corpus through every target: `fuzz/corpus/TARGET/` (what the fuzzer
//! kept, minimised) and `fuzz/regressions/TARGET/` (the inputs of fixed findings). This is what
//! CI runs instead of a fuzzer: a target that panics on a saved input fails here.

use std::path::{Path, PathBuf};

use weft_fuzz::Target;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir` (none if it does not exist), sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

/// Runs `target` on every input of `dir`; the number run. A panic names the file.
fn replay(target: Target, dir: &Path) -> usize {
    let inputs = files(dir);
    for path in &inputs {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let outcome = std::panic::catch_unwind(|| target.run(&data));
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{} on {}: {message}", target.name(), path.display());
        }
    }
    inputs.len()
}

#[test]
fn every_target_has_a_corpus_and_holds_on_it() {
    let mut total = 0;
    for target in Target::ALL {
        let corpus = fuzz_dir().join("corpus").join(target.name());
        let run = replay(target, &corpus);
        assert!(run > 0, "no corpus for {} in {}", target.name(), corpus.display());
        total += run;
    }
    eprintln!("{total} corpus inputs replayed");
}

#[test]
fn every_fixed_finding_stays_fixed() {
    for target in Target::ALL {
        replay(target, &fuzz_dir().join("regressions").join(target.name()));
    }
}

#[test]
fn every_cargo_fuzz_target_is_a_target() {
    // fuzz/fuzz_targets/NAME.rs for each target, and nothing else.
    let mut names: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|p| p.file_stem()?.to_str().map(str::to_string))
        .collect();
    names.sort();
    let mut expected: Vec<String> = Target::ALL.iter().map(|t| t.name().to_string()).collect();
    expected.sort();
    assert_eq!(names, expected);
    for name in &names {
        assert_eq!(Target::from_name(name).map(Target::name), Some(name.as_str()));
    }
}
