//! Replays the minimised fuzzing corpora (fuzz/corpus/<target>/) through the same harness
//! functions the fuzzers run, so every input that once found new coverage keeps being checked by
//! plain `cargo test`, with no fuzzing toolchain. See docs/fuzzing.md.

use std::fs;
use std::path::Path;

use magnetar::protocol::fuzzing;

/// Runs `harness` on every file of `fuzz/corpus/<target>` and returns how many there were.
fn replay(target: &str, harness: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    for path in &files {
        let input = fs::read(path).expect("corpus file");
        let outcome = std::panic::catch_unwind(|| harness(&input));
        assert!(outcome.is_ok(), "{target}: {} fails its harness", path.display());
    }
    files.len()
}

#[test]
fn frames_corpus() {
    assert!(replay("frames", fuzzing::frames) > 0);
}

#[test]
fn message_corpus() {
    assert!(
        replay("message", |d| {
            fuzzing::message(d);
        }) > 0
    );
}

#[test]
fn command_corpus() {
    assert!(replay("command", fuzzing::command) > 0);
}

#[test]
fn schema_corpus() {
    assert!(replay("schema", magnetar::columnar::fuzzing::schema_payload) > 0);
}
