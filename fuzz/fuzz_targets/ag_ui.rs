#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weft_fuzz::Target::AgUi.run(data));
