//! Makes a run's events reproducible: random ids become `run-1`, `step-1` … in order of first
//! appearance, and clock readings become 0.

use std::collections::HashMap;

use serde_json::Value;
use weft_core::AgentEvent;

const CLOCK_KEYS: [&str; 3] = ["timestamp", "startedAt", "latencyMs"];
const ID_KEYS: [(&str, &str); 2] = [("runId", "run"), ("stepId", "step")];

/// The events with ids and times normalized.
pub fn normalize(events: &[AgentEvent]) -> Vec<AgentEvent> {
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut counters: HashMap<&str, usize> = HashMap::new();
    events
        .iter()
        .map(|event| {
            let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
            walk(&mut value, &mut ids, &mut counters);
            serde_json::from_value(value).unwrap_or_else(|_| event.clone())
        })
        .collect()
}

fn walk(
    value: &mut Value,
    ids: &mut HashMap<String, String>,
    counters: &mut HashMap<&'static str, usize>,
) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if CLOCK_KEYS.contains(&key.as_str()) && v.is_u64() {
                    *v = Value::from(0);
                } else if let Some((_, prefix)) = ID_KEYS.iter().find(|(k, _)| k == key)
                    && let Value::String(id) = v
                {
                    let next = ids.entry(id.clone()).or_insert_with(|| {
                        let n = counters.entry(prefix).or_insert(0);
                        *n += 1;
                        format!("{prefix}-{n}")
                    });
                    *id = next.clone();
                } else {
                    walk(v, ids, counters);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| walk(v, ids, counters)),
        _ => {}
    }
}
