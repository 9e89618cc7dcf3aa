//! The litmus parser on arbitrary input: it must return a test or a typed error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Raw bytes exercise the UTF-8 check; the lossy text reaches the parser proper whatever
    // the bytes, so most inputs get past the first byte.
    let _ = tessera_litmus::parse_bytes(data);
    let _ = tessera_litmus::parse(&String::from_utf8_lossy(data));
});
