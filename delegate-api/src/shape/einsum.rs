//! Einsum's equation, read against its operands' shapes: which label each axis carries,
//! the extent of every label, and the output's labels.
//!
//! Shared by the shape rule and every kernel so that all of them read an equation the
//! same way (numpy's reading, which ONNX follows): whitespace is ignored; a label is an
//! ASCII letter; `...` stands for the leading axes an operand has beyond its letters,
//! aligned from the right across operands and broadcast where an extent is 1; a label
//! repeated within one operand takes that operand's diagonal; labels left out of the
//! output are summed over. Without `->` the output is the ellipsis axes followed by the
//! labels that occur once in the whole equation, in ASCII order.

/// An equation resolved against operand shapes. Labels are numbered from 0: the ellipsis
/// axes first (the leftmost broadcast axis is 0), then the letters in order of first use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Einsum {
    /// Per operand, the label of each of its axes.
    pub inputs: Vec<Vec<usize>>,
    /// The label of each output axis.
    pub output: Vec<usize>,
    /// The extent of each label (the largest over its uses: an ellipsis axis of extent 1
    /// broadcasts).
    pub extents: Vec<usize>,
}

impl Einsum {
    /// The output's shape.
    pub fn output_shape(&self) -> Vec<usize> {
        self.output.iter().map(|&l| self.extents[l]).collect()
    }
}

/// One side of `->` split into its terms: letters and where the ellipsis stood.
struct Term {
    letters: Vec<u8>,
    /// How many letters precede the ellipsis, when there is one.
    ellipsis_at: Option<usize>,
}

/// Reads `equation` against the shapes of the operands.
pub fn parse(equation: &str, shapes: &[Vec<usize>]) -> Result<Einsum, String> {
    let compact: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match compact.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (compact.as_str(), None),
    };
    let terms = lhs.split(',').map(term).collect::<Result<Vec<_>, _>>()?;
    if terms.len() != shapes.len() {
        return Err(format!(
            "Einsum equation '{equation}' names {} operands, the node has {}",
            terms.len(),
            shapes.len()
        ));
    }
    // How many axes each operand's ellipsis stands for.
    let mut spans = Vec::with_capacity(terms.len());
    for (k, (t, shape)) in terms.iter().zip(shapes).enumerate() {
        let span = shape.len().checked_sub(t.letters.len()).ok_or_else(|| {
            format!(
                "Einsum operand {k} has rank {} but its term names {} axes",
                shape.len(),
                t.letters.len()
            )
        })?;
        if span > 0 && t.ellipsis_at.is_none() {
            return Err(format!(
                "Einsum operand {k} has rank {} but its term names {} axes and no '...'",
                shape.len(),
                t.letters.len()
            ));
        }
        spans.push(span);
    }
    let broadcast = spans.iter().copied().max().unwrap_or(0);
    let mut letters: Vec<u8> = Vec::new();
    let mut extents: Vec<Option<usize>> = vec![None; broadcast];
    let mut inputs = Vec::with_capacity(terms.len());
    let mut count = [0usize; 128];
    for (k, ((t, shape), &span)) in terms.iter().zip(shapes).zip(&spans).enumerate() {
        let mut labels = Vec::with_capacity(shape.len());
        let cut = t.ellipsis_at.unwrap_or(t.letters.len());
        for &c in &t.letters[..cut] {
            labels.push(letter_label(c, broadcast, &mut letters, &mut extents));
        }
        labels.extend(broadcast - span..broadcast);
        for &c in &t.letters[cut..] {
            labels.push(letter_label(c, broadcast, &mut letters, &mut extents));
        }
        for &c in &t.letters {
            count[c as usize] += 1;
        }
        for (axis, (&label, &extent)) in labels.iter().zip(shape).enumerate() {
            let ellipsis = label < broadcast;
            extents[label] = Some(match extents[label] {
                None => extent,
                Some(e) if e == extent => e,
                Some(e) if ellipsis && (e == 1 || extent == 1) => e.max(extent),
                Some(e) => {
                    return Err(format!(
                        "Einsum operand {k} axis {axis} has extent {extent} \
                         where its label {} has {e}",
                        label_name(label, broadcast, &letters)
                    ))
                }
            });
        }
        inputs.push(labels);
    }
    let output = match rhs {
        Some(r) => {
            let t = term(r)?;
            let mut out = Vec::with_capacity(t.letters.len() + broadcast);
            let cut = t.ellipsis_at.unwrap_or(t.letters.len());
            for (i, &c) in t.letters.iter().enumerate() {
                if i == cut {
                    out.extend(0..broadcast);
                }
                let label = letters
                    .iter()
                    .position(|&l| l == c)
                    .map(|p| p + broadcast)
                    .ok_or_else(|| {
                        format!("Einsum output label '{}' is in no operand", c as char)
                    })?;
                if out.contains(&label) {
                    return Err(format!("Einsum output label '{}' appears twice", c as char));
                }
                out.push(label);
            }
            if cut == t.letters.len() && t.ellipsis_at.is_some() {
                out.extend(0..broadcast);
            }
            out
        }
        None => {
            let mut once: Vec<u8> = letters
                .iter()
                .copied()
                .filter(|&c| count[c as usize] == 1)
                .collect();
            once.sort_unstable();
            let mut out: Vec<usize> = (0..broadcast).collect();
            out.extend(
                once.iter()
                    .map(|&c| broadcast + letters.iter().position(|&l| l == c).unwrap_or_default()),
            );
            out
        }
    };
    Ok(Einsum {
        inputs,
        output,
        extents: extents.into_iter().map(|e| e.unwrap_or(1)).collect(),
    })
}

/// Splits one term into its letters, checking that the rest is at most one `...`.
fn term(s: &str) -> Result<Term, String> {
    let mut letters = Vec::with_capacity(s.len());
    let mut ellipsis_at = None;
    let mut rest = s.as_bytes();
    while let Some(&c) = rest.first() {
        if rest.starts_with(b"...") {
            if ellipsis_at.is_some() {
                return Err(format!("Einsum term '{s}' has more than one '...'"));
            }
            ellipsis_at = Some(letters.len());
            rest = &rest[3..];
        } else if c.is_ascii_alphabetic() {
            letters.push(c);
            rest = &rest[1..];
        } else {
            return Err(format!(
                "Einsum term '{s}': '{}' is neither a letter nor '...'",
                c as char
            ));
        }
    }
    Ok(Term {
        letters,
        ellipsis_at,
    })
}

/// The label of letter `c`, numbering it on first use.
fn letter_label(
    c: u8,
    broadcast: usize,
    letters: &mut Vec<u8>,
    extents: &mut Vec<Option<usize>>,
) -> usize {
    match letters.iter().position(|&l| l == c) {
        Some(p) => p + broadcast,
        None => {
            letters.push(c);
            extents.push(None);
            broadcast + letters.len() - 1
        }
    }
}

fn label_name(label: usize, broadcast: usize, letters: &[u8]) -> String {
    match label.checked_sub(broadcast) {
        Some(i) => format!("'{}'", letters[i] as char),
        None => format!("'...' axis {label}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_and_implicit_outputs() {
        let e = parse("bij, bjk -> bik", &[vec![2, 3, 4], vec![2, 4, 5]]).unwrap();
        assert_eq!(e.inputs, vec![vec![0, 1, 2], vec![0, 2, 3]]);
        assert_eq!(e.output, vec![0, 1, 3]);
        assert_eq!(e.output_shape(), vec![2, 3, 5]);
        // Implicit: the labels used once, in ASCII order (upper case first).
        let e = parse("ba,aC", &[vec![2, 3], vec![3, 4]]).unwrap();
        assert_eq!(e.output_shape(), vec![4, 2]);
        let e = parse("i,i", &[vec![5], vec![5]]).unwrap();
        assert_eq!(e.output_shape(), Vec::<usize>::new());
    }

    #[test]
    fn ellipsis_broadcasts_and_repeats_take_diagonals() {
        let e = parse("...ii->...i", &[vec![3, 5, 4, 4]]).unwrap();
        assert_eq!(e.inputs, vec![vec![0, 1, 2, 2]]);
        assert_eq!(e.output_shape(), vec![3, 5, 4]);
        let e = parse("...ij,...jk", &[vec![1, 2, 3], vec![7, 3, 4]]).unwrap();
        assert_eq!(e.output_shape(), vec![7, 2, 4]);
        let e = parse("i...->i", &[vec![2, 3, 4]]).unwrap();
        assert_eq!(e.output_shape(), vec![2]);
    }

    #[test]
    fn mismatches_are_errors() {
        assert!(parse("ij,jk", &[vec![2, 3], vec![4, 5]]).is_err());
        assert!(parse("ij", &[vec![2, 3, 4]]).is_err());
        assert!(parse("ii", &[vec![2, 3]]).is_err());
        assert!(parse("ij->k", &[vec![2, 3]]).is_err());
        assert!(parse("ij->ii", &[vec![2, 3]]).is_err());
        assert!(parse("i,j", &[vec![2]]).is_err());
        assert!(parse("i1", &[vec![2, 3]]).is_err());
        assert!(parse("......", &[vec![2]]).is_err());
    }
}
