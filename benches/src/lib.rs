//! Criterion benchmarks of Baton live in `benches/`; run them with `cargo bench -p baton-benches`.
