//! Writes the seed inputs of every target into `corpus/<target>/seed-<n>` (run from `fuzz/`).
//! Seeds come from the crate's own encoders, so the fuzzers start from valid frames.

use std::fs;
use std::path::Path;

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut counts = std::collections::HashMap::new();
    for (target, input) in magnetar::protocol::fuzzing::seeds() {
        let n = counts.entry(target).or_insert(0);
        *n += 1;
        let dir = root.join(target);
        fs::create_dir_all(&dir)?;
        fs::write(dir.join(format!("seed-{n}")), input)?;
    }
    let dir = root.join("schema");
    fs::create_dir_all(&dir)?;
    for (n, input) in magnetar::columnar::fuzzing::seeds().into_iter().enumerate() {
        fs::write(dir.join(format!("seed-{}", n + 1)), input)?;
    }
    println!("{counts:?}");
    Ok(())
}
