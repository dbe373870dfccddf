//! Source files and functions stay small enough to read: every `.rs` file under a workspace
//! crate's `src/` (`crates/*/src`, and `examples/src` if there is one) has at most
//! [`MAX_FILE_LINES`] lines, and every function in it (a free `fn`, a method of an `impl`, a
//! trait's default method, a function nested in another) at most [`MAX_FN_LINES`].
//!
//! A function's length is counted with `syn`'s spans, from the line of its `fn` keyword to the
//! line of its body's closing brace: its doc comment and attributes are not counted.
//!
//! What is over a limit today is listed in [`KNOWN`] with its size, and may only shrink: the
//! test fails when a listed file or function grew, and when one is back within its limit (or
//! gone), so that its entry is taken off and the list only gets shorter.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The most lines a source file may have.
const MAX_FILE_LINES: usize = 800;

/// The most lines a function may have, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 100;

/// What is over a limit today: (path from the workspace root, function or `""` for the whole
/// file, its size in lines). A function is named as [`Sizes`] names it: `name`, `Type::name`
/// for a method, `Trait::name` for a default method, `module::name` inside an inline module,
/// `outer::name` for a function nested in another. Entries may only shrink; take one off once
/// it is within its limit.
const KNOWN: &[(&str, &str, usize)] = &[];

/// A file or function over its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Oversize {
    /// The file, from the workspace root.
    path: String,
    /// The function, `""` for the whole file.
    function: String,
    /// Its size in lines.
    lines: usize,
}

impl Oversize {
    /// The limit it is over.
    fn limit(&self) -> usize {
        if self.function.is_empty() { MAX_FILE_LINES } else { MAX_FN_LINES }
    }

    /// The file, or the file and the function, as the failures name it.
    fn what(&self) -> String {
        if self.function.is_empty() {
            self.path.clone()
        } else {
            format!("{}: fn {}", self.path, self.function)
        }
    }
}

/// Collects every function's length in one file, named by where it is.
struct Sizes {
    /// The names around the current item: inline modules, impl types, traits, outer functions.
    scope: Vec<String>,
    /// (qualified name, lines) of every function.
    functions: Vec<(String, usize)>,
}

impl Sizes {
    /// Notes one function's length, from its `fn` keyword to its body's closing brace.
    fn record(&mut self, name: &syn::Ident, fn_token: &syn::token::Fn, block: &syn::Block) {
        let start = fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        let mut qualified = self.scope.clone();
        qualified.push(name.to_string());
        self.functions.push((qualified.join("::"), end + 1 - start));
    }

    /// Visits what is inside `name` (a module, a type's impl, a trait, a function).
    fn within(&mut self, name: String, visit: impl FnOnce(&mut Self)) {
        self.scope.push(name);
        visit(self);
        self.scope.pop();
    }
}

/// The name an impl block's methods are qualified with: its self type's last path segment
/// (`impl` for a type that has none, such as a slice or a tuple).
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        syn::Type::Reference(r) => Some(type_name(&r.elem)),
        _ => None,
    }
    .unwrap_or_else(|| "impl".to_string())
}

impl<'ast> Visit<'ast> for Sizes {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.within(m.ident.to_string(), |s| syn::visit::visit_item_mod(s, m));
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        self.within(type_name(&i.self_ty), |s| syn::visit::visit_item_impl(s, i));
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.within(t.ident.to_string(), |s| syn::visit::visit_item_trait(s, t));
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.record(&f.sig.ident, &f.sig.fn_token, &f.block);
        self.within(f.sig.ident.to_string(), |s| syn::visit::visit_item_fn(s, f));
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.record(&f.sig.ident, &f.sig.fn_token, &f.block);
        self.within(f.sig.ident.to_string(), |s| syn::visit::visit_impl_item_fn(s, f));
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.record(&f.sig.ident, &f.sig.fn_token, block);
        }
        self.within(f.sig.ident.to_string(), |s| syn::visit::visit_trait_item_fn(s, f));
    }
}

/// What in one source file (`path` names it in the answer) is over a limit.
fn oversizes(path: &str, text: &str) -> Vec<Oversize> {
    let parsed = syn::parse_file(text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut sizes = Sizes { scope: Vec::new(), functions: Vec::new() };
    sizes.visit_file(&parsed);
    let mut found = Vec::new();
    let lines = text.lines().count();
    if lines > MAX_FILE_LINES {
        found.push(Oversize { path: path.to_string(), function: String::new(), lines });
    }
    for (function, lines) in sizes.functions {
        if lines > MAX_FN_LINES {
            found.push(Oversize { path: path.to_string(), function, lines });
        }
    }
    found
}

/// Why the sizes found fail the test against `known` (nothing: they pass): a file or function
/// over its limit and not known, a known one that grew, a known one now within its limit or gone.
fn problems(found: &[Oversize], known: &[(&str, &str, usize)]) -> Vec<String> {
    let mut problems = Vec::new();
    for o in found {
        match known.iter().find(|(p, f, _)| *p == o.path && *f == o.function) {
            None => problems.push(format!(
                "{} is {} lines, over the limit of {}: split it (or, for now, add \
                 (\"{}\", \"{}\", {}) to KNOWN in crates/weft-core/tests/sizes.rs)",
                o.what(),
                o.lines,
                o.limit(),
                o.path,
                o.function,
                o.lines
            )),
            Some((_, _, size)) if o.lines > *size => problems.push(format!(
                "{} is {} lines, more than the {size} KNOWN allows: known oversizes may only \
                 shrink",
                o.what(),
                o.lines
            )),
            Some(_) => {}
        }
    }
    for &(path, function, size) in known {
        if !found.iter().any(|o| o.path == path && o.function == function) {
            let what = Oversize { path: path.into(), function: function.into(), lines: size };
            problems.push(format!(
                "{} is now within its limit of {} lines (or gone): remove (\"{path}\", \
                 \"{function}\", {size}) from KNOWN in crates/weft-core/tests/sizes.rs",
                what.what(),
                what.limit()
            ));
        }
    }
    problems
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `.rs` file under the workspace crates' `src/`, from the workspace root.
fn workspace_sources(root: &Path) -> Vec<(String, PathBuf)> {
    let mut srcs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .collect();
    srcs.push(root.join("examples").join("src"));
    let mut files = Vec::new();
    for src in srcs.iter().filter(|s| s.is_dir()) {
        rust_files(src, &mut files);
    }
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|f| {
            let relative = f.strip_prefix(root).unwrap().to_str().unwrap().replace('\\', "/");
            (relative, f)
        })
        .collect();
    named.sort();
    named
}

#[test]
fn files_and_functions_stay_within_their_limits() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sources = workspace_sources(&root);
    assert!(sources.iter().any(|(p, _)| p == "crates/weft-core/src/lib.rs"), "no sources found");
    let mut found = Vec::new();
    for (path, file) in &sources {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{path}: {e}"));
        found.extend(oversizes(path, &text));
    }
    for o in &found {
        if let Some((_, _, size)) = KNOWN.iter().find(|(p, f, _)| *p == o.path && *f == o.function)
            && o.lines < *size
        {
            eprintln!(
                "note: {} shrank to {} lines: lower its KNOWN size from {size}",
                o.what(),
                o.lines
            );
        }
    }
    let problems = problems(&found, KNOWN);
    assert!(problems.is_empty(), "size limits:\n  {}", problems.join("\n  "));
}

/// A source file with one function whose `fn` line and closing brace are `lines` apart
/// (inclusive), as a method of `Thing`, after a doc comment and an attribute.
fn source_with_method(lines: usize) -> String {
    let body = "        let _ = 1;\n".repeat(lines - 2);
    let head = "struct Thing;\n\nimpl Thing {\n    /// Long.\n    #[inline]\n";
    format!("{head}    fn long(&self) {{\n{body}    }}\n}}\n")
}

#[test]
fn the_check_fails_on_a_long_function_and_on_a_stale_known_entry() {
    let path = "crates/x/src/lib.rs";
    // 100 lines is the limit; doc comments and attributes do not count.
    assert_eq!(oversizes(path, &source_with_method(100)), []);
    let found = oversizes(path, &source_with_method(101));
    let long = Oversize { path: path.into(), function: "Thing::long".into(), lines: 101 };
    assert_eq!(found, [long]);
    let unknown = problems(&found, &[]);
    assert_eq!(unknown.len(), 1);
    assert!(unknown[0].contains("fn Thing::long is 101 lines"), "{unknown:?}");
    // Known at its size (or bigger): fine; known smaller: it grew.
    assert_eq!(problems(&found, &[(path, "Thing::long", 101)]), Vec::<String>::new());
    assert_eq!(problems(&found, &[(path, "Thing::long", 120)]), Vec::<String>::new());
    let grew = problems(&found, &[(path, "Thing::long", 100)]);
    assert!(grew.len() == 1 && grew[0].contains("may only shrink"), "{grew:?}");
    // Known but within its limit now: the entry must go.
    let within = oversizes(path, &source_with_method(100));
    let stale = problems(&within, &[(path, "Thing::long", 101)]);
    assert!(stale.len() == 1 && stale[0].contains("remove"), "{stale:?}");
    // A long file, nested names.
    let file = format!("mod inner {{\n    fn f() {{\n{}    }}\n}}\n", "\n".repeat(850));
    let found = oversizes(path, &file);
    let names: Vec<(&str, usize)> = found.iter().map(|o| (o.function.as_str(), o.lines)).collect();
    assert_eq!(names, [("", 854), ("inner::f", 852)]);
}
