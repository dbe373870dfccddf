//! For random agent runs, decoding what an encoder wrote gives back the same texts, thinking,
//! tool calls, tool results, pending calls and final status: native, Loom (both forms), AceAI.

use proptest::prelude::*;
use weft_conformance::{random, render, scenarios};
use weft_core::AgentEvent;
use weft_protocol::transcript::Transcript;
use weft_protocol::{Protocol, aceai, loom, native};

fn check(events: &[AgentEvent]) -> Result<(), TestCaseError> {
    let expected = Transcript::from_events(events);
    let native = native::decode(&render(Protocol::Native, events));
    prop_assert_eq!(native.as_ref().ok(), Some(&expected), "native: {:?}", native.as_ref().err());
    for protocol in [Protocol::Loom, Protocol::LoomExport] {
        let decoded = loom::decode(&render(protocol, events));
        prop_assert_eq!(
            decoded.as_ref().ok(),
            Some(&expected),
            "{}: {:?}",
            protocol,
            decoded.as_ref().err()
        );
    }
    let aceai = aceai::decode(&render(Protocol::Aceai, events));
    prop_assert_eq!(aceai.as_ref().ok(), Some(&expected), "aceai: {:?}", aceai.as_ref().err());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_runs_round_trip(script in random::arb_script()) {
        let events = random::play_blocking(script);
        check(&events)?;
    }
}

#[test]
fn scenarios_round_trip() {
    for name in scenarios::ALL {
        let events = scenarios::scenario_blocking(name);
        if let Err(e) = check(&events) {
            panic!("{name}: {e}");
        }
    }
}
