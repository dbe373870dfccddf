//! No import circle between the files of a crate: every workspace crate's modules are read with
//! `syn`, each file's references to other modules of its crate (`use` lines and qualified
//! paths, re-exports followed to the file that defines the name) become arrows, and a circle
//! among the arrows fails the test with the files and the names that tie them.
//!
//! Arrows: a `use` or a path `crate::…`, `super::…`, `self::…` or `child::…` (a module the file
//! declares) that names something another file defines. Not arrows: what a module takes from
//! its own descendants (it owns them: `lib.rs` may use every module below it), the re-exports of
//! a facade (`pub use` in `lib.rs` / a `mod.rs`, followed to the defining file instead), and
//! anything under `#[cfg(test)]`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Circles allowed for a while (while one is taken apart), each as its sorted files relative
/// to the crate's `src/`: none today. The test fails on any other circle, and on one of these
/// that is gone (so that the list only shrinks).
const KNOWN: &[(&str, &[&str])] = &[];

/// A crate's modules: module path (`["machine"]`, `["modes", "tot"]`) → file.
struct Crate {
    name: String,
    src: PathBuf,
    modules: BTreeMap<Vec<String>, PathBuf>,
    /// Per file: the names it re-exports (`pub use a::B as C` → `C` → `[a, B]`, absolute).
    reexports: BTreeMap<PathBuf, BTreeMap<String, Vec<String>>>,
    /// Per file: its parsed syntax and its module path.
    files: BTreeMap<PathBuf, (Vec<String>, syn::File)>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| l.tokens.to_string().contains("test"))
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// The directory a file's child modules live in.
fn child_dir(file: &Path) -> PathBuf {
    let name = file.file_name().unwrap().to_str().unwrap();
    if matches!(name, "lib.rs" | "main.rs" | "mod.rs") {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    }
}

/// Expands a use tree into absolute-or-relative paths (the leaf `*` kept as a segment), with
/// the name each is imported as.
fn expand(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            expand(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            if name != "self" {
                path.push(name.clone());
            }
            let alias =
                if name == "self" { prefix.last().cloned().unwrap_or_default() } else { name };
            out.push((path, alias));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((path, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => {
            let mut path = prefix.clone();
            path.push("*".into());
            out.push((path, "*".into()));
        }
        syn::UseTree::Group(g) => {
            for item in &g.items {
                expand(item, prefix, out);
            }
        }
    }
}

impl Crate {
    fn read(dir: &Path) -> Option<Crate> {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = ").map(|n| n.trim_matches('"').to_string()))?;
        let src = dir.join("src");
        let root = [src.join("lib.rs"), src.join("main.rs")].into_iter().find(|p| p.exists())?;
        let mut krate = Crate {
            name,
            src,
            modules: BTreeMap::new(),
            reexports: BTreeMap::new(),
            files: BTreeMap::new(),
        };
        krate.load(Vec::new(), &root);
        Some(krate)
    }

    fn load(&mut self, module: Vec<String>, file: &Path) {
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        self.modules.insert(module.clone(), file.to_path_buf());
        for item in &parsed.items {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
                && !is_cfg_test(&m.attrs)
            {
                let name = m.ident.to_string();
                let dir = child_dir(file);
                let child = match path_attr(&m.attrs) {
                    Some(path) => file.parent().unwrap().join(path),
                    None => {
                        let flat = dir.join(format!("{name}.rs"));
                        if flat.exists() { flat } else { dir.join(&name).join("mod.rs") }
                    }
                };
                let mut path = module.clone();
                path.push(name);
                self.load(path, &child);
            }
        }
        self.files.insert(file.to_path_buf(), (module, parsed));
    }

    /// Makes `path` (as written in module `module`) absolute: `None` when it leaves the crate.
    fn absolute(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        match first.as_str() {
            "crate" => Some(path[1..].to_vec()),
            "self" => Some(module.iter().chain(&path[1..]).cloned().collect()),
            "super" => {
                let mut base = module.to_vec();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                Some(base.into_iter().chain(rest.iter().cloned()).collect())
            }
            child => {
                let mut candidate = module.to_vec();
                candidate.push(child.to_string());
                self.modules
                    .contains_key(&candidate)
                    .then(|| module.iter().chain(path).cloned().collect())
            }
        }
    }

    /// The file that defines what absolute `path` names (re-exports followed).
    fn resolve(&self, path: &[String], depth: usize) -> Option<PathBuf> {
        let mut module_len = 0;
        for len in (0..=path.len()).rev() {
            if self.modules.contains_key(&path[..len]) {
                module_len = len;
                break;
            }
        }
        let file = &self.modules[&path[..module_len]];
        if let Some(name) = path.get(module_len)
            && depth < 8
            && let Some(target) = self.reexports.get(file).and_then(|r| r.get(name))
        {
            let mut next = target.clone();
            next.extend(path[module_len + 1..].iter().cloned());
            return self.resolve(&next, depth + 1).or_else(|| Some(file.clone()));
        }
        Some(file.clone())
    }

    fn collect_reexports(&mut self) {
        let mut all = BTreeMap::new();
        for (file, (module, parsed)) in &self.files {
            let mut map = BTreeMap::new();
            for item in &parsed.items {
                if let syn::Item::Use(u) = item
                    && !matches!(u.vis, syn::Visibility::Inherited)
                {
                    let mut out = Vec::new();
                    expand(&u.tree, &mut Vec::new(), &mut out);
                    for (path, alias) in out {
                        if let Some(abs) = self.absolute(module, &path)
                            && alias != "*"
                        {
                            map.insert(alias, abs);
                        }
                    }
                }
            }
            all.insert(file.clone(), map);
        }
        self.reexports = all;
    }

    /// Arrows: file → file → the names that tie them.
    fn arrows(&self) -> BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>> {
        let mut arrows: BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>> = BTreeMap::new();
        for (file, (module, parsed)) in &self.files {
            let facade = matches!(
                file.file_name().and_then(|n| n.to_str()),
                Some("lib.rs" | "mod.rs" | "main.rs")
            );
            let mut paths = Paths { out: Vec::new() };
            for item in &parsed.items {
                match item {
                    syn::Item::Use(u) if facade && !matches!(u.vis, syn::Visibility::Inherited) => {
                    }
                    syn::Item::Use(u) => {
                        let mut out = Vec::new();
                        expand(&u.tree, &mut Vec::new(), &mut out);
                        paths.out.extend(out.into_iter().map(|(p, _)| p));
                    }
                    syn::Item::Mod(m) if is_cfg_test(&m.attrs) => {}
                    syn::Item::Mod(m) if m.content.is_none() => {}
                    other => {
                        if !item_is_cfg_test(other) {
                            paths.visit_item(other);
                        }
                    }
                }
            }
            for path in paths.out {
                let path: Vec<String> = path.into_iter().filter(|s| s != "*").collect();
                let Some(abs) = self.absolute(module, &path) else { continue };
                let Some(target) = self.resolve(&abs, 0) else { continue };
                // A module owns its descendants: its arrows down to them are containment.
                let below = self.files.get(&target).is_some_and(|(inner, _)| {
                    inner.len() > module.len() && inner.starts_with(module)
                });
                if target != *file && !below {
                    let name = path.last().cloned().unwrap_or_default();
                    arrows.entry(file.clone()).or_default().entry(target).or_default().insert(name);
                }
            }
        }
        arrows
    }

    fn relative(&self, file: &Path) -> String {
        file.strip_prefix(&self.src).unwrap_or(file).display().to_string()
    }
}

fn item_is_cfg_test(item: &syn::Item) -> bool {
    match item {
        syn::Item::Fn(f) => is_cfg_test(&f.attrs),
        syn::Item::Impl(i) => is_cfg_test(&i.attrs),
        syn::Item::Const(c) => is_cfg_test(&c.attrs),
        syn::Item::Static(s) => is_cfg_test(&s.attrs),
        syn::Item::Struct(s) => is_cfg_test(&s.attrs),
        syn::Item::Enum(e) => is_cfg_test(&e.attrs),
        syn::Item::Mod(m) => is_cfg_test(&m.attrs),
        _ => false,
    }
}

/// Every path of at least two segments in an item (types, expressions, patterns, nested uses).
struct Paths {
    out: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() >= 2 && path.leading_colon.is_none() {
            self.out.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        // Paths inside attributes (`#[openapi(paths(routes::execute))]`) are tokens to syn.
        if let syn::Meta::List(list) = &attr.meta {
            self.tokens(list.tokens.clone());
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        syn::visit::visit_macro(self, mac);
        self.tokens(mac.tokens.clone());
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut out = Vec::new();
        expand(&u.tree, &mut Vec::new(), &mut out);
        self.out.extend(out.into_iter().map(|(p, _)| p));
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

impl Paths {
    /// The paths (`a::b::c`) in a token stream, nested groups included.
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let tokens: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                proc_macro2::TokenTree::Ident(first) => {
                    let mut path = vec![first.to_string()];
                    let mut j = i + 1;
                    while let (
                        Some(proc_macro2::TokenTree::Punct(a)),
                        Some(proc_macro2::TokenTree::Punct(b)),
                        Some(proc_macro2::TokenTree::Ident(next)),
                    ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        path.push(next.to_string());
                        j += 3;
                    }
                    if path.len() >= 2 {
                        self.out.push(path);
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(arrows: &BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        arrows: &'a BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        next: usize,
        found: Vec<Vec<PathBuf>>,
    }
    fn connect<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(targets) = s.arrows.get(v) {
            for w in targets.keys() {
                if !s.index.contains_key(w) {
                    connect(s, w);
                    let low = s.low[v].min(s.low[w]);
                    s.low.insert(v, low);
                } else if s.on_stack.contains(w) {
                    let low = s.low[v].min(s.index[w]);
                    s.low.insert(v, low);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        arrows,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in arrows.keys() {
        if !state.index.contains_key(v) {
            connect(&mut state, v);
        }
    }
    state.found
}

fn workspace_crates() -> Vec<Crate> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.push(root.join("examples"));
    dirs.sort();
    dirs.iter().filter_map(|d| Crate::read(d)).collect()
}

#[test]
fn no_crate_has_an_import_circle_between_its_files() {
    let mut found = Vec::new();
    let mut seen_known = BTreeSet::new();
    for mut krate in workspace_crates() {
        krate.collect_reexports();
        let arrows = krate.arrows();
        for circle in circles(&arrows) {
            let files: Vec<String> = circle.iter().map(|f| krate.relative(f)).collect();
            if let Some(known) = KNOWN.iter().find(|(c, fs)| *c == krate.name && *fs == files) {
                seen_known.insert(known.0.to_string() + ":" + &known.1.join(","));
                continue;
            }
            let mut why = String::new();
            for from in &circle {
                for (to, names) in arrows.get(from).into_iter().flatten() {
                    if circle.contains(to) {
                        let names: Vec<&str> = names.iter().map(String::as_str).collect();
                        why += &format!(
                            "\n    {} -> {}: {}",
                            krate.relative(from),
                            krate.relative(to),
                            names.join(", ")
                        );
                    }
                }
            }
            found.push(format!("{}: {}{why}", krate.name, files.join(", ")));
        }
    }
    let gone: Vec<String> = KNOWN
        .iter()
        .map(|(c, fs)| c.to_string() + ":" + &fs.join(","))
        .filter(|k| !seen_known.contains(k))
        .collect();
    assert!(found.is_empty(), "import circles between files:\n  {}", found.join("\n  "));
    assert!(gone.is_empty(), "circles listed as known are gone; take them off KNOWN: {gone:?}");
}

/// The check finds a circle where there is one (so that its silence means something).
#[test]
fn the_check_sees_a_circle() {
    let dir = tempfile_dir();
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("m")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"probe\"\n").unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod m;\npub use m::C;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::C;\npub struct A(C);\n").unwrap();
    std::fs::write(src.join("m/mod.rs"), "mod c;\npub use c::C;\n").unwrap();
    std::fs::write(src.join("m/c.rs"), "pub struct C(Box<crate::a::A>);\n").unwrap();
    let mut krate = Crate::read(&dir).unwrap();
    krate.collect_reexports();
    let found = circles(&krate.arrows());
    let files: Vec<Vec<String>> =
        found.iter().map(|c| c.iter().map(|f| krate.relative(f)).collect()).collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(files, [["a.rs", "m/c.rs"]]);
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-import-circles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
