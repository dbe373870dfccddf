//! Game of 24, three ways: `io` (the answer straight away), `react` (chain of thought: think,
//! then answer) and `tot` (tree of thoughts: candidate steps proposed, scored, acted on, with
//! backtracking). Puzzles are generated and checked by a solver in this example (no data
//! download); each run prints, per puzzle and method, whether the answer is right, the model
//! calls made and their cost, then the success rate of each method.
//!
//! ```sh
//! cargo run -p weft-examples --example game24                      # faux provider, scripted
//! cargo run -p weft-examples --example game24 -- --provider openai --model gpt-4o-mini --puzzles 20
//! ```
//!
//! With the faux provider every model call is scripted from the solver's solution (io answers
//! with a plausible but wrong sum on odd puzzles, to show the checker at work): it shows the
//! harness, not a model. With a real provider (keys and base URLs from the environment, as for
//! `weft run`) it reproduces the tree-of-thoughts paper's comparison on that model.

mod puzzle;

use std::sync::Arc;

use anyhow::{Context, bail};
use weft_agent::{Agent, Mode, SessionOptions, TotOptions};
use weft_core::Input;
use weft_llm::Provider;
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

use puzzle::{Puzzle, Rng, check};

const METHODS: [&str; 3] = ["io", "react", "tot"];

struct Args {
    provider: String,
    model: Option<String>,
    puzzles: usize,
    seed: u64,
}

fn args() -> anyhow::Result<Args> {
    let mut args = Args { provider: "faux".into(), model: None, puzzles: 5, seed: 24 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--provider" => args.provider = value()?,
            "--model" => args.model = Some(value()?),
            "--puzzles" => args.puzzles = value()?.parse()?,
            "--seed" => args.seed = value()?.parse()?,
            other => bail!("unknown flag {other}: --provider P --model M --puzzles N --seed S"),
        }
    }
    Ok(args)
}

fn prompt(method: &str, p: &Puzzle) -> String {
    let numbers = format!("{} {} {} {}", p[0], p[1], p[2], p[3]);
    match method {
        "io" => format!(
            "Use the numbers {numbers} once each with + - * / and parentheses to make 24. \
             Reply with the expression only."
        ),
        "react" => format!(
            "Use the numbers {numbers} once each with + - * / and parentheses to make 24. \
             Think step by step, then end with a line `Answer: <expression>`."
        ),
        _ => format!(
            "Game of 24 with the numbers {numbers}: use each once with + - * / and parentheses to \
             make 24. When you have it, end with a line `Answer: <expression>`."
        ),
    }
}

/// The faux script of one run: what a model that knows `solution` would say.
fn script(method: &str, p: &Puzzle, solution: &str, odd: bool) -> FauxScript {
    let wrong = format!("{} + {} + {} + {}", p[0], p[1], p[2], p[3]);
    let turns = match method {
        "io" => vec![FauxTurn::text(if odd { wrong.clone() } else { solution.to_string() })],
        "react" => vec![FauxTurn::text(format!(
            "Let me try combining the largest numbers first.\nAnswer: {solution}"
        ))],
        _ => vec![
            FauxTurn::text(
                serde_json::json!([format!("Try {wrong}"), format!("Try {solution}")]).to_string(),
            ),
            FauxTurn::text("[0.2, 0.9]"),
            FauxTurn::text(format!("{solution} = 24\nAnswer: {solution}")),
        ],
    };
    FauxScript::new(turns.into_iter().map(|t| t.with_usage(60, 20)))
}

fn real_provider(name: &str) -> anyhow::Result<Arc<dyn Provider>> {
    use weft_llm::config;
    use weft_llm::http::HttpClient;
    let settings = config::settings_from_process_env(name)?;
    let (timeouts, retry) = config::http_from_process_env()?;
    let client = HttpClient::new(timeouts, retry)?;
    Ok(config::provider_from_settings(name, settings, client)?)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let faux = args.provider == "faux";
    let shared = if faux { None } else { Some(real_provider(&args.provider)?) };
    let model = match (&args.model, faux) {
        (Some(m), _) => m.clone(),
        (None, true) => "faux".into(),
        (None, false) => bail!("--provider {} needs --model ID", args.provider),
    };
    let mut rng = Rng::new(args.seed);
    let mut totals = [(0usize, 0u64, 0f64); 3];
    println!("{:<16} {:<6} {:>4} {:>6} {:>10}", "puzzle", "method", "ok", "calls", "cost $");
    for i in 0..args.puzzles {
        let (p, solution) = rng.puzzle();
        for (m, method) in METHODS.iter().enumerate() {
            let provider: Arc<dyn Provider> = match &shared {
                Some(p) => p.clone(),
                None => Arc::new(FauxProvider::new(script(method, &p, &solution, i % 2 == 1))),
            };
            let agent =
                Agent::builder_shared(provider).model(model.clone()).max_turns(8).build()?;
            let mode = (*method == "tot").then(|| {
                Mode::Tot(TotOptions {
                    breadth: 2,
                    depth: 2,
                    max_model_calls: 12,
                    ..TotOptions::default()
                })
            });
            let session =
                agent.create_session(SessionOptions { mode, ..Default::default() }).await?;
            let result =
                agent.execute(&session, Input::text(prompt(method, &p))).await?.result().await;
            let answer = result.response().final_output;
            let ok = check(&p, &answer);
            let calls = result.steps.len() as u64;
            let cost = result.cost.total;
            println!(
                "{:<16} {:<6} {:>4} {:>6} {:>10.6}",
                format!("{p:?}"),
                method,
                if ok { "yes" } else { "no" },
                calls,
                cost
            );
            totals[m].0 += usize::from(ok);
            totals[m].1 += calls;
            totals[m].2 += cost;
        }
    }
    println!();
    let n = args.puzzles.max(1);
    for (m, method) in METHODS.iter().enumerate() {
        let (ok, calls, cost) = totals[m];
        println!(
            "{method:<6} success {ok}/{n} ({:.0}%), {:.1} model calls and ${:.6} per puzzle",
            100.0 * ok as f64 / n as f64,
            calls as f64 / n as f64,
            cost / n as f64
        );
    }
    if faux {
        // The scripted run checks itself: the scripts are right except io's on odd puzzles.
        let wrong_io = args.puzzles / 2;
        anyhow::ensure!(
            totals[1].0 == args.puzzles && totals[2].0 == args.puzzles,
            "react and tot must solve every scripted puzzle"
        );
        anyhow::ensure!(totals[0].0 == args.puzzles - wrong_io, "io fails exactly the odd puzzles");
        anyhow::ensure!(totals[2].1 == 3 * args.puzzles as u64, "tot: expand, evaluate, answer");
    }
    Ok(())
}
