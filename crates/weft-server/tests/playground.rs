//! The web playground: `/` serves the page and `/playground/…` its embedded modules, without an
//! API key even when keys are configured (the page asks for one), while the API still needs one.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;

#[tokio::test]
async fn the_page_and_its_modules_are_served_without_a_key() {
    let server = start_with(
        weather_script(),
        |b| b,
        |s| {
            s.api_keys.insert("sk-test".into(), "alice".into());
        },
    )
    .await;
    let anonymous = reqwest::Client::builder().no_proxy().build().unwrap();

    let page = anonymous.get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert!(headers["content-security-policy"].to_str().unwrap().contains("script-src 'self'"));
    let html = page.text().await.unwrap();
    assert!(html.contains("<title>Weft playground</title>"), "{html}");
    assert!(html.contains(r#"src="/playground/playground.js""#), "{html}");

    // Every module the page loads, and every module those import, is served.
    let mut pending = vec!["playground.js".to_string(), "style.css".to_string()];
    let mut seen = Vec::new();
    while let Some(file) = pending.pop() {
        if seen.contains(&file) {
            continue;
        }
        let response =
            anonymous.get(server.url(&format!("/playground/{file}"))).send().await.unwrap();
        assert_eq!(response.status(), 200, "/playground/{file}");
        let kind = response.headers()["content-type"].to_str().unwrap().to_string();
        let body = response.text().await.unwrap();
        if file.ends_with(".js") {
            assert_eq!(kind, "text/javascript; charset=utf-8");
            for line in body.lines().filter(|l| l.starts_with("import ")) {
                let from = line.rsplit(['"', '\'']).nth(1).unwrap();
                assert!(from.starts_with("./"), "{file} imports {from}");
                pending.push(from.trim_start_matches("./").to_string());
            }
        } else {
            assert_eq!(kind, "text/css; charset=utf-8");
        }
        seen.push(file);
    }
    assert!(
        seen.contains(&"client.js".to_string()) && seen.contains(&"sse.js".to_string()),
        "{seen:?}"
    );

    let missing = anonymous.get(server.url("/playground/nope.js")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let api = anonymous.get(server.url("/api/agent/sessions")).send().await.unwrap();
    assert_eq!(api.status(), 401, "the API still needs the key");
}

/// The copy this crate embeds (`playground/`) is the TypeScript client's build: its page and
/// style, and the compiled modules the page loads (`dist/playground.js` and its imports, in
/// turn), nothing else (`npm run build` in `clients/typescript` copies them).
#[test]
fn the_embedded_copy_is_the_typescript_clients_build() {
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let client = crate_dir.join("../../clients/typescript");
    if !client.exists() {
        // The crate's published package: the copy is all there is.
        return;
    }
    let read = |path: std::path::PathBuf| std::fs::read_to_string(&path).unwrap();
    let mut expected: Vec<(String, String)> = std::fs::read_dir(client.join("playground"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .map(|name| (name.clone(), read(client.join("playground").join(&name))))
        .collect();
    let mut modules = vec!["playground.js".to_string()];
    let mut next = 0;
    while let Some(name) = modules.get(next).cloned() {
        next += 1;
        let text = read(client.join("dist").join(&name));
        for import in imports(&text) {
            if !modules.contains(&import) {
                modules.push(import);
            }
        }
        expected.push((name, text));
    }
    expected.sort();
    let mut copy: Vec<(String, String)> = std::fs::read_dir(crate_dir.join("playground"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .map(|name| (name.clone(), read(crate_dir.join("playground").join(&name))))
        .collect();
    copy.sort();
    let names = |files: &[(String, String)]| files.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&copy), names(&expected), "run `npm run build` in clients/typescript");
    for ((name, copied), (_, built)) in copy.iter().zip(&expected) {
        assert!(
            copied == built,
            "playground/{name} is stale: run `npm run build` in clients/typescript"
        );
    }
}

/// The modules `text` imports by relative path (`from "./x.js"`, `import "./x.js"`).
fn imports(text: &str) -> Vec<String> {
    text.split("\"./")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name))
        .filter(|name| name.ends_with(".js") && !name.contains('/'))
        .map(str::to_string)
        .collect()
}
