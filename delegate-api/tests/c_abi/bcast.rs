//! The broadcasting iterator of the public C reader (`btir_bcast_*` in
//! `include/btir_reader.h`) against numpy's rules as the IR states them
//! (`shape::broadcast_shapes`) and a plain index computation.

use std::io::Write;
use std::process::{Command, Stdio};

use baton_delegate_api::shape::broadcast_shapes;

use crate::tools::{c_plugin_dir, include_flag, must_succeed, path_str};

/// The offsets into `a` and `b` of every element of `out`, computed index by index.
fn expected(a: &[usize], b: &[usize], out: &[usize]) -> String {
    let offset = |shape: &[usize], index: &[usize]| {
        let pad = out.len() - shape.len();
        shape.iter().enumerate().fold(0, |acc, (d, &e)| {
            acc * e + if e == 1 { 0 } else { index[pad + d] }
        })
    };
    let n: usize = out.iter().product();
    let mut text = String::new();
    for flat in 0..n {
        let mut index = vec![0; out.len()];
        let mut rest = flat;
        for d in (0..out.len()).rev() {
            index[d] = rest % out[d];
            rest /= out[d];
        }
        text.push_str(&format!("{}:{} ", offset(a, &index), offset(b, &index)));
    }
    text
}

fn line(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("{} {}", shape.len(), dims.join(" "))
}

#[test]
fn c_broadcasting_agrees_with_the_ir_rules() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("bcast_dump");
    let src = c_plugin_dir().join("bcast_dump.c");
    let inc = include_flag();
    let (src, exe_path) = (path_str(&src), path_str(&exe));
    let args = [
        "-std=c99", "-Wall", "-Wextra", "-Werror", &inc, src, "-o", exe_path,
    ];
    must_succeed("gcc", &args, "building bcast_dump");

    let shapes: Vec<Vec<usize>> = vec![
        vec![],
        vec![1],
        vec![3],
        vec![0],
        vec![2, 3],
        vec![2, 1],
        vec![1, 3],
        vec![4, 1, 3],
        vec![4, 2, 1],
        vec![2, 0],
        vec![1, 1, 1, 2],
    ];
    let mut cases = Vec::new();
    for a in &shapes {
        for b in &shapes {
            match broadcast_shapes(a, b) {
                Ok(out) => {
                    cases.push((
                        a.clone(),
                        b.clone(),
                        out.clone(),
                        Some(expected(a, b, &out)),
                    ));
                    // An output larger than the broadcast is refused too.
                    let mut bigger = vec![2];
                    bigger.extend(&out);
                    cases.push((a.clone(), b.clone(), bigger, None));
                }
                Err(_) => cases.push((a.clone(), b.clone(), a.clone(), None)),
            }
        }
    }
    let input: String = cases
        .iter()
        .map(|(a, b, o, _)| format!("{} {} {}\n", line(a), line(b), line(o)))
        .collect();
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(got.len(), cases.len());
    for ((a, b, o, want), got) in cases.iter().zip(got) {
        let want = want.as_deref().unwrap_or("refused");
        assert_eq!(got, want, "a {a:?} b {b:?} out {o:?}");
    }
}
