//! Bad input, fuzzed: the `.gro` and `--types` readers and the public constructors (box, grid,
//! range, counts, PME grid, Ewald coefficient) take random truncations, mutations and extreme
//! values. None may panic; each error must name what is wrong (the file and line for a file,
//! the value for a parameter); what they accept must be usable (finite, in range).
//!
//! Every PE of a job reads the same input and builds the same objects, so a property that
//! holds here holds on every PE alike: the examples then end every PE with the same message.

use md_demo::types::TypeTable;
use md_demo::{Error, Structure};
use md_halo::{DdGrid, PbcBox};
use pme_redist::{PmeGrid, ewald_coefficient};
use proptest::prelude::*;

/// A small valid `.gro` text: `n` atoms of water-like names at `positions`, then the box.
fn gro_text(positions: &[[f32; 3]], box_line: &str) -> String {
    let mut text = format!("fuzzed\n{:5}\n", positions.len());
    for (i, x) in positions.iter().enumerate() {
        let name = ["OW", "HW1", "HW2"][i % 3];
        text.push_str(&format!(
            "{:5}{:<5}{:>5}{:5}{:8.3}{:8.3}{:8.3}\n",
            i / 3 + 1,
            "SOL",
            name,
            (i + 1) % 100_000,
            x[0],
            x[1],
            x[2]
        ));
    }
    text.push_str(box_line);
    text.push('\n');
    text
}

/// Values a parser or constructor must survive.
fn extreme_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(0.0f32),
        Just(-0.0f32),
        Just(f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        Just(f32::MAX),
        Just(f32::MIN),
        Just(f32::MIN_POSITIVE),
        Just(1e-30f32),
        -1e3f32..1e3f32,
        0.01f32..100.0f32,
    ]
}

/// Tokens that replace a piece of a file.
const TOKENS: &[&str] = &[
    "nan",
    "inf",
    "-inf",
    "1e39",
    "-0",
    "99999999999999999999",
    "",
    " ",
    "\t",
    "\u{0}",
    "é",
    "#",
    ":",
    "1,5",
    "0x10",
];

/// One mutation of `text`, on bytes (the result need not be valid UTF-8 before it is made so).
#[derive(Clone, Debug)]
enum Mutation {
    Truncate(usize),
    Replace(usize, u8),
    Insert(usize, usize),
    DropLine(usize),
    DuplicateLine(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), 0x20u8..0x7f).prop_map(|(at, b)| Mutation::Replace(at, b)),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, t)| Mutation::Insert(at, t)),
        any::<usize>().prop_map(Mutation::DropLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
    ]
}

fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for m in mutations {
        let len = bytes.len().max(1);
        match *m {
            Mutation::Truncate(at) => bytes.truncate(at % len),
            Mutation::Replace(at, b) => {
                if !bytes.is_empty() {
                    bytes[at % len] = b;
                }
            }
            Mutation::Insert(at, t) => {
                let at = (at % len).min(bytes.len());
                bytes.splice(at..at, TOKENS[t].bytes());
            }
            Mutation::DropLine(k) | Mutation::DuplicateLine(k) => {
                let mut lines: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
                let k = k % lines.len();
                if matches!(m, Mutation::DropLine(_)) {
                    lines.remove(k);
                } else {
                    let line = lines[k].clone();
                    lines.insert(k, line);
                }
                bytes = lines.join(&b'\n');
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A file error names the file and a line of it (or one past its end), and says something.
fn names_file_and_line(error: &Error, source: &str, text: &str) -> Result<(), TestCaseError> {
    match error {
        Error::Input { file, line, problem } => {
            prop_assert_eq!(file.as_str(), source);
            prop_assert!(*line >= 1 && *line <= text.lines().count() + 1, "line {} of {:?}", line, text);
            prop_assert!(!problem.trim().is_empty());
            prop_assert!(error.to_string().contains(source));
            Ok(())
        }
        other => Err(TestCaseError::fail(format!("not an input error naming the line: {other:?}"))),
    }
}

/// What a reader accepted is usable: finite positions inside a box of finite, positive size.
fn usable(structure: &Structure) -> Result<(), TestCaseError> {
    let v = structure.pbc.vectors();
    prop_assert!(v.iter().flatten().all(|c| c.is_finite()));
    prop_assert!(v[0][0] > 0.0 && v[1][1] > 0.0 && v[2][2] > 0.0);
    prop_assert_eq!(structure.positions.len(), structure.atoms.len());
    for x in &structure.positions {
        prop_assert!(x.iter().all(|c| c.is_finite()), "{:?}", x);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn gro_files_mutated_never_panic_and_errors_name_the_line(
        positions in prop::collection::vec(prop::array::uniform3(0.0f32..3.0), 0..12),
        triclinic in any::<bool>(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let box_line = if triclinic { "3.0 3.0 3.0 0.0 0.0 1.0 0.0 1.0 1.0" } else { "3.0 3.0 3.0" };
        let valid = gro_text(&positions, box_line);
        prop_assert!(Structure::parse_gro(&valid, "base.gro").is_ok(), "{}", valid);
        let text = mutate(&valid, &mutations);
        match Structure::parse_gro(&text, "fuzzed.gro") {
            Ok(structure) => usable(&structure)?,
            Err(e) => names_file_and_line(&e, "fuzzed.gro", &text)?,
        }
    }

    #[test]
    fn gro_boxes_of_extreme_values_are_refused_by_line(
        values in prop::collection::vec(extreme_f32(), 0..11),
    ) {
        let box_line: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        let text = gro_text(&[[0.5, 0.5, 0.5]], &box_line.join(" "));
        match Structure::parse_gro(&text, "box.gro") {
            Ok(structure) => usable(&structure)?,
            Err(e) => names_file_and_line(&e, "box.gro", &text)?,
        }
    }

    #[test]
    fn type_files_mutated_never_panic_and_errors_name_the_line(
        entries in prop::collection::vec(("[A-Z]{1,4}", extreme_f32(), extreme_f32(), extreme_f32()), 0..6),
        mutations in prop::collection::vec(mutation(), 0..3),
    ) {
        let mut text = String::from("# NAME charge c6 c12\n");
        for (i, (name, q, c6, c12)) in entries.iter().enumerate() {
            text.push_str(&format!("{name}{i} {q} {c6} {c12}\n"));
        }
        let text = mutate(&text, &mutations);
        match TypeTable::builtin().parse(&text, "fuzzed.types") {
            Ok(table) => {
                for line in text.lines() {
                    let Some(key) = line.split('#').next().and_then(|l| l.split_whitespace().next()) else { continue };
                    let (residue, name) = key.split_once(':').unwrap_or(("", key));
                    if let Some((params, _)) = table.lookup(residue, name) {
                        prop_assert!(params.charge.is_finite() && params.c6.is_finite() && params.c12.is_finite());
                        prop_assert!(params.c6 >= 0.0 && params.c12 >= 0.0, "{:?}", params);
                    }
                }
            }
            Err(e) => names_file_and_line(&e, "fuzzed.types", &text)?,
        }
    }

    #[test]
    fn boxes_of_any_vectors_never_panic(v in prop::array::uniform3(prop::array::uniform3(extreme_f32()))) {
        if let Ok(pbc) = PbcBox::new(v) {
            let w = pbc.vectors();
            prop_assert!(w.iter().flatten().all(|c| c.is_finite()));
            prop_assert!(w[0][0] > 0.0 && w[1][1] > 0.0 && w[2][2] > 0.0);
            let x = pbc.wrap([1.0, -1.0, 1e6]);
            prop_assert!(x.iter().all(|c| c.is_finite()));
        }
    }

    #[test]
    fn grids_of_any_counts_and_ranges_never_panic(
        dims in prop::array::uniform3(prop_oneof![Just(0usize), Just(1), 2usize..9, Just(1 << 20), Just(usize::MAX)]),
        n_pes in prop_oneof![Just(0usize), 1usize..64, Just(usize::MAX)],
        range in extreme_f32(),
        length in 0.5f32..20.0,
    ) {
        let pbc = PbcBox::rectangular([length, length * 1.5, length]).expect("a valid box");
        match DdGrid::new(dims, pbc, range, n_pes) {
            Ok(grid) => {
                prop_assert_eq!(grid.dims().iter().product::<usize>(), n_pes);
                prop_assert!(range.is_finite() && range > 0.0);
            }
            Err(e) => prop_assert!(!e.to_string().trim().is_empty()),
        }
        match DdGrid::choose(n_pes, pbc, range) {
            Ok(grid) => prop_assert_eq!(grid.dims().iter().product::<usize>(), n_pes),
            Err(e) => prop_assert!(!e.to_string().trim().is_empty()),
        }
    }

    #[test]
    fn replication_of_any_counts_never_panics(
        counts in prop::array::uniform3(prop_oneof![Just(0usize), 1usize..4, Just(1 << 16), Just(usize::MAX)]),
    ) {
        let structure = Structure::parse_gro(&gro_text(&[[0.1, 0.2, 0.3]; 3], "1.0 1.0 1.0"), "small.gro")
            .expect("a valid structure");
        let copies = counts.iter().try_fold(1usize, |p, &c| p.checked_mul(c));
        match structure.replicate(counts) {
            Ok(bigger) => prop_assert_eq!(Some(bigger.len()), copies.map(|c| 3 * c)),
            Err(e) => {
                let message = e.to_string();
                prop_assert!(message.contains("replication"), "{}", message);
            }
        }
    }

    #[test]
    fn pme_grids_of_any_spacing_and_ranks_never_panic(
        length in extreme_f32(),
        spacing in extreme_f32(),
        pes in prop::collection::vec(prop_oneof![0usize..8, Just(usize::MAX)], 0..10),
    ) {
        let vectors = [[length, 0.0, 0.0], [0.0, length, 0.0], [0.0, 0.0, length]];
        if let Err(e) = PmeGrid::new(vectors, spacing, &pes) {
            prop_assert!(!e.to_string().trim().is_empty());
        }
    }

    #[test]
    fn ewald_coefficients_of_any_cutoff_and_tolerance_never_panic(
        cutoff in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(0.0), Just(-1.0), Just(1e300), 0.1f64..3.0],
        rtol in prop_oneof![Just(f64::NAN), Just(0.0), Just(1.0), Just(2.0), Just(-1e-5), Just(1e-300), 1e-8f64..0.1],
    ) {
        match ewald_coefficient(cutoff, rtol) {
            Ok(beta) => prop_assert!(beta.is_finite() && beta > 0.0, "beta {} for {} {}", beta, cutoff, rtol),
            Err(e) => prop_assert!(!e.to_string().trim().is_empty()),
        }
    }
}

/// A grid of more domains than any job has PEs is refused before anything is sized by it
/// (a grid of `usize::MAX` domains along z once reached the allocation of its boundaries).
#[test]
fn grids_of_more_domains_than_pes_can_number_are_refused() {
    let pbc = PbcBox::rectangular([0.5, 0.75, 0.5]).expect("a valid box");
    for (dims, n_pes) in [([1, 1, usize::MAX], usize::MAX), ([1 << 16, 1 << 16, 1], 1 << 32)] {
        let e = DdGrid::new(dims, pbc, f32::MIN_POSITIVE, n_pes).expect_err("too many PEs");
        assert!(e.to_string().contains("PEs"), "{e}");
    }
}

/// One engine error across the crates: `?` takes md-halo's, pme-redist's and onesided's
/// errors into `onesided::AnyError`, which keeps each one's scope and type.
#[test]
fn crate_errors_meet_in_one_type() {
    use onesided::{AnyError, ErrorScope};
    fn halo_step() -> Result<(), AnyError> {
        DdGrid::new([0, 1, 1], PbcBox::rectangular([3.0; 3])?, 1.0, 1)?;
        Ok(())
    }
    fn mesh_step() -> Result<(), AnyError> {
        PmeGrid::new([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]], 0.12, &[])?;
        Ok(())
    }
    fn file_step() -> Result<(), AnyError> {
        std::fs::read("/nonexistent/trajectory.xtc")?;
        Ok(())
    }
    let halo = halo_step().expect_err("no domains along x");
    let want = DdGrid::new([0, 1, 1], PbcBox::rectangular([3.0; 3]).expect("box"), 1.0, 1).expect_err("same");
    assert_eq!(halo.downcast_ref::<md_halo::Error>(), Some(&want));
    assert_eq!(halo.scope(), want.scope());
    assert_eq!(halo.to_string(), want.to_string());
    let mesh = mesh_step().expect_err("no PME ranks");
    assert!(
        matches!(mesh.downcast_ref::<pme_redist::Error>(), Some(pme_redist::Error::Config(_))),
        "{mesh:?}"
    );
    assert!(mesh.downcast_ref::<md_halo::Error>().is_none());
    let file = file_step().expect_err("no such file");
    assert_eq!(file.scope(), ErrorScope::ThisPe);
    assert!(file.to_string().contains("No such file"), "{file}");
}
