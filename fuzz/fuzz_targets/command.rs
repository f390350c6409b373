//! The `command` harness of `magnetar::protocol::fuzzing`; see docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = magnetar::protocol::fuzzing::command(data);
});
