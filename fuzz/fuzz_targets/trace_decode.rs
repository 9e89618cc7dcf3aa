//! The game trace's file reader on arbitrary input: a trace or a typed error, never a panic;
//! and a trace it accepts encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_workloads::quake::trace::Trace;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = Trace::decode(data) {
        assert_eq!(t.encode(), data);
    }
});
