//! The `schema` harness of `magnetar::columnar::fuzzing`; see docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    magnetar::columnar::fuzzing::schema_payload(data);
});
