//! A bounded fuzzer for the program loader: mutated `.baton` files must be refused with an
//! error or load and run; never a panic, a hang or a crash.
//!
//! Two kinds of input: random corruption as it comes (the checksums refuse it; this
//! checks the header and table reader that runs before them), and corruption with the
//! checksums recomputed ([`program::reseal`]), which reaches every structural check of the
//! reader and the loader, and the plugin's `init` on whatever blob survives.
//!
//! Bounded by `BATON_FUZZ_SECS` (default 3 s) and `BATON_FUZZ_SEED` (default a fixed
//! seed, so a plain `cargo test` is reproducible); CI runs it longer with a seed per run.
//! A crash found becomes a regression test of its own below.

mod common;

use baton_delegate_api::testing::Rng;
use common::fuzz;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_delegate_api::Tensor;
use baton_runtime_host::config::PluginConfig;
use baton_runtime_host::program::{self, LoadOptions};
use baton_runtime_host::{sample, Config, Engine};

fn engine() -> Engine {
    let mut cfg = Config {
        cache_dir: Some(std::env::temp_dir().join("baton-test-cache")),
        ..Config::default()
    };
    cfg.plugins.push(PluginConfig {
        path: Some(common::plugin("baton_backend_cpu")),
        ..Default::default()
    });
    Engine::new(cfg).unwrap()
}

/// tinynet compiled for the CPU plugin: the program the regression tests corrupt.
fn tinynet_program(engine: &Engine) -> program::Program {
    program::compile(
        engine,
        &sample::tinynet(),
        &BTreeMap::new(),
        &BTreeMap::new(),
    )
    .unwrap()
}

/// A position to mutate: half the time anywhere, half the time near the start of a
/// section picked from the table, so that the small structural sections (graph, plan,
/// partition headers, memory, shapes) are hit as often as the weights that dwarf them.
fn position(rng: &mut Rng, bytes: &[u8], width: usize) -> usize {
    let last = bytes.len() - width;
    let count = bytes
        .get(24..28)
        .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
    if rng.below(2) == 0 || count == 0 {
        return rng.below(last + 1);
    }
    let row = 64 + 32 * rng.below(count.min(64));
    let field = |at: usize| {
        bytes
            .get(at..at + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()) as usize)
    };
    let (offset, len) = (field(row + 8), field(row + 16));
    let at = offset.saturating_add(rng.below(len.clamp(1, 512)));
    at.min(last)
}

/// Reads, loads and runs `bytes`; any outcome but a panic is fine. Returns how far it got:
/// 0 refused by the reader, 1 by the loader, 2 loaded, 3 ran.
fn exercise(engine: &Engine, bytes: &[u8], verify: bool, input: &Tensor) -> usize {
    let Ok(p) = program::decode(Arc::new(bytes.to_vec()), verify) else {
        return 0;
    };
    let options = LoadOptions {
        verify,
        recompile: true,
        max_arena: 64 << 20,
    };
    let Ok(mut session) = program::load(engine, p, &options) else {
        return 1;
    };
    let shapes: Vec<Vec<usize>> = session.input_shapes().iter().map(|s| s.to_vec()).collect();
    // A mutation may declare a valid model of any size; the fuzzer feeds only small ones.
    let elements: usize = shapes.iter().map(|s| s.iter().product::<usize>()).sum();
    if elements > 1 << 20 || session.arena_plan.arena_size > 64 << 20 {
        return 2;
    }
    let inputs: Vec<Tensor> = session
        .graph
        .inputs
        .iter()
        .zip(&shapes)
        .map(|(&t, s)| {
            let dtype = session.graph.tensors[t].dtype;
            if dtype == input.dtype && *s == input.shape {
                input.clone()
            } else {
                Tensor::zeros(dtype, s)
            }
        })
        .collect();
    match session.run(&inputs) {
        Ok(_) => 3,
        Err(_) => 2,
    }
}

#[test]
fn fuzz_the_program_loader_for_a_bounded_time() {
    // Said first, so that a panic below is reported with the seed that reproduces it.
    let (budget, seed) = fuzz::budget("program");
    let engine = engine();
    // Two programs: tinynet (one partition, weights) and one with an If whose branches
    // are nested programs.
    let corpus: Vec<Vec<u8>> = [sample::tinynet(), sample::branchy()]
        .iter()
        .map(|g| {
            let p = program::compile(&engine, g, &BTreeMap::new(), &BTreeMap::new()).unwrap();
            program::encode(&p)
        })
        .collect();
    let input = sample::tinynet_input();
    let mut rng = Rng::from_state(seed | 1);
    let deadline = Instant::now() + budget;
    let mut cases = 0u64;
    let mut slowest = Duration::ZERO;
    let mut reached = [0u64; 4];
    while Instant::now() < deadline {
        let good = &corpus[rng.below(corpus.len())];
        let mut bytes = good.clone();
        for _ in 0..1 + rng.below(3) {
            if !bytes.is_empty() {
                fuzz::mutate(&mut rng, &mut bytes, &position);
            }
        }
        let sealed = rng.below(4) != 0;
        if sealed {
            program::reseal(&mut bytes);
        }
        // Unsealed corruption must never get past the checksums.
        if !sealed && bytes != *good {
            assert!(
                program::decode(Arc::new(bytes.clone()), true).is_err(),
                "seed {seed}, case {cases}: corrupted bytes passed verification"
            );
        }
        let started = Instant::now();
        reached[exercise(&engine, &bytes, sealed, &input)] += 1;
        slowest = slowest.max(started.elapsed());
        cases += 1;
    }
    eprintln!(
        "program fuzzer: {cases} cases in {budget:?}, seed {seed}, slowest {slowest:?}; \
         refused by the reader {}, by the loader {}, loaded {}, ran {}",
        reached[0], reached[1], reached[2], reached[3]
    );
    // Mutants must get past the reader into the loader and on to a run, or the fuzzer
    // tests only the first check.
    assert!(
        reached[0] > 0 && reached[1] > 0 && reached[3] > 0,
        "stages reached: {reached:?}"
    );
    // A hang is a failure too: the model is tiny, so no input should take long.
    assert!(
        slowest < Duration::from_secs(10),
        "seed {seed}: a case took {slowest:?}"
    );
}

/// Found by the fuzzer: a plan whose partition is not convex (node 1 on the host between
/// nodes 0 and 2 of one partition) made the scheduler assert. It is refused now.
#[test]
fn a_plan_with_a_cycle_between_steps_is_refused() {
    use baton_partitioner::Decision;
    let engine = engine();
    let p = tinynet_program(&engine);
    let mut p = program::decode(Arc::new(program::encode(&p)), true).unwrap();
    p.plan.partitions[0].nodes.retain(|&n| n != 1);
    p.plan.nodes[1].decision = Decision::Host;
    let e = match program::load(&engine, p, &LoadOptions::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a cyclic plan loaded"),
    };
    assert!(e.contains("cannot be scheduled"), "{e}");
}

/// Found by the fuzzer: a declared shape grown past what the op makes (4 GiB of arena for
/// tinynet) was allocated and run. Declared shapes are checked against the ops now.
#[test]
fn a_shape_the_op_does_not_make_is_refused() {
    use baton_delegate_api::Dim;
    let engine = engine();
    let p = tinynet_program(&engine);
    let mut p = program::decode(Arc::new(program::encode(&p)), true).unwrap();
    let out = p.graph.nodes[0].outputs[0];
    p.graph.tensors[out].shape[0] = Dim::Fixed(1 << 20);
    let e = match program::load(&engine, p, &LoadOptions::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a wrong shape loaded"),
    };
    assert!(e.contains("the op makes"), "{e}");
}

/// Found by the fuzzer: an arena too large to allocate aborted the process. The loader
/// refuses an arena over its limit, and a stored one larger than its tensors together.
#[test]
fn an_arena_over_the_limit_or_oversized_is_refused() {
    let engine = engine();
    let p = tinynet_program(&engine);
    let bytes = program::encode(&p);
    let tight = LoadOptions {
        max_arena: 1024,
        ..LoadOptions::default()
    };
    let p = program::decode(Arc::new(bytes.clone()), true).unwrap();
    match program::load(&engine, p, &tight) {
        Err(e) => assert!(e.to_string().contains("over the limit"), "{e}"),
        Ok(_) => panic!("an arena over the limit loaded"),
    }
    let mut p = program::decode(Arc::new(bytes), true).unwrap();
    p.memory.as_mut().unwrap().arena_size = 1 << 36;
    match program::load(&engine, p, &LoadOptions::default()) {
        Err(e) => assert!(e.to_string().contains("larger than its tensors"), "{e}"),
        Ok(_) => panic!("an oversized arena loaded"),
    }
}
