//! The litmus parser on arbitrary input: it must return a test or a typed error, never panic;
//! and a test it accepts, explored under sequential consistency (a few thousand states at
//! most, so that a large test is a typed `TooLarge`, not a timeout), gives its outcomes or a
//! typed error: computed addresses, array indices and arithmetic on registers included.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Raw bytes exercise the UTF-8 check; the lossy text reaches the parser proper whatever
    // the bytes, so most inputs get past the first byte.
    let _ = tessera_litmus::parse_bytes(data);
    if let Ok(test) = tessera_litmus::parse(&String::from_utf8_lossy(data)) {
        let _ = tessera_litmus::sc::sc_outcomes_limited(&test, 4096);
    }
});
