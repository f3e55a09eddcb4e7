//! The molecular system: a GROMACS `.gro` reader, atom kinds with charges and Lennard-Jones
//! parameters, and replication of a box into a larger one.

use std::path::Path;

use crate::error::{Error, Result};

/// A position, velocity or force, in nm, nm/ps or kJ mol⁻¹ nm⁻¹ (GROMACS's `rvec` of floats).
pub type RVec = [f32; 3];

/// What an atom is: its charge and Lennard-Jones parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AtomKind {
    /// The atom name in `.gro` files.
    pub name: &'static str,
    /// Charge in e.
    pub charge: f32,
    /// Lennard-Jones C6 in kJ mol⁻¹ nm⁶.
    pub c6: f32,
    /// Lennard-Jones C12 in kJ mol⁻¹ nm¹².
    pub c12: f32,
    /// Part of an SPC water molecule (OW, HW1, HW2, in that order): pairs within one
    /// molecule are excluded.
    pub water: bool,
}

/// The atom kinds the reader knows: SPC water (Berendsen et al. 1981: σ = 0.316557 nm,
/// ε = 0.650194 kJ/mol on oxygen, charges −0.82 and +0.41 e) and argon (σ = 0.34 nm,
/// ε = 0.99774 kJ/mol, uncharged).
pub const KINDS: &[AtomKind] = &[
    AtomKind { name: "OW", charge: -0.82, c6: 0.002_617_346, c12: 2.634_129e-6, water: true },
    AtomKind { name: "HW1", charge: 0.41, c6: 0.0, c12: 0.0, water: true },
    AtomKind { name: "HW2", charge: 0.41, c6: 0.0, c12: 0.0, water: true },
    AtomKind { name: "AR", charge: 0.0, c6: 0.006_165_2, c12: 9.524_1e-6, water: false },
];

/// Index into [`KINDS`].
pub type KindId = u8;

/// The kinds of a water molecule's atoms, in order.
const WATER: [KindId; 3] = [0, 1, 2];

/// A system: a rectangular periodic box and its atoms, with positions wrapped into the box.
#[derive(Clone, Debug, PartialEq)]
pub struct System {
    /// The title line of the file.
    pub title: String,
    /// Box edge lengths in nm.
    pub box_size: RVec,
    /// Positions in nm, wrapped into `[0, box)`; atom `i` has global index `i`.
    pub positions: Vec<RVec>,
    /// Kind of each atom, an index into [`KINDS`].
    pub kinds: Vec<KindId>,
}

impl System {
    /// Reads a GROMACS `.gro` file: title, atom count, one fixed-column line per atom and the
    /// box line. Velocities, if present, are ignored. Positions are wrapped into the box.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::Input`] naming the line for a
    /// malformed file, an unknown atom name or a triclinic box.
    pub fn read_gro(path: &Path) -> Result<System> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Io { path: path.display().to_string(), problem: e.to_string() })?;
        Self::parse_gro(&text, &path.display().to_string())
    }

    /// Parses the text of a `.gro` file; `source` names it in errors.
    pub fn parse_gro(text: &str, source: &str) -> Result<System> {
        let bad = |line: usize, problem: String| Error::Input { file: source.to_string(), line, problem };
        let mut lines = text.lines();
        let title = lines.next().ok_or_else(|| bad(1, "the file is empty".into()))?.trim().to_string();
        let count_line = lines.next().ok_or_else(|| bad(2, "no atom count line".into()))?;
        let count: usize = count_line
            .trim()
            .parse()
            .map_err(|_| bad(2, format!("the atom count {:?} is not a number", count_line.trim())))?;
        // A count in the file is not trusted with memory before its lines are there.
        let mut raw = Vec::with_capacity(count.min(1 << 20));
        let mut kinds = Vec::with_capacity(count.min(1 << 20));
        let mut width = None;
        for i in 0..count {
            let number = i + 3;
            let line = lines.next().ok_or_else(|| {
                bad(number, format!("the file ends after {i} of the {count} atoms it announces"))
            })?;
            let width = *width.get_or_insert(field_width(line).ok_or_else(|| {
                bad(number, "no coordinates in columns 21 and on (expected %8.3f fields)".into())
            })?);
            let name = line.get(10..15).map(str::trim).unwrap_or("");
            let kind = KINDS.iter().position(|k| k.name.eq_ignore_ascii_case(name)).ok_or_else(|| {
                let known: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
                bad(number, format!("unknown atom name {name:?}; known: {}", known.join(", ")))
            })?;
            let mut x = [0f32; 3];
            for (d, value) in x.iter_mut().enumerate() {
                let field = line.get(20 + d * width..20 + (d + 1) * width).ok_or_else(|| {
                    bad(number, format!("the line is too short for coordinate {}", ["x", "y", "z"][d]))
                })?;
                *value = field.trim().parse().ok().filter(|v: &f32| v.is_finite()).ok_or_else(|| {
                    bad(
                        number,
                        format!(
                            "coordinate {} {:?} is not a finite number",
                            ["x", "y", "z"][d],
                            field.trim()
                        ),
                    )
                })?;
            }
            // Exclusions take a water molecule to be three atoms OW, HW1, HW2 starting at a
            // multiple of three (as in every SPC box, and in any replication of one).
            if KINDS[kind].water && KINDS[WATER[i % 3] as usize].name != KINDS[kind].name {
                return Err(bad(
                    number,
                    format!(
                        "atom {} is {} where a water molecule (OW, HW1, HW2 at indices 3k, 3k+1, \
                         3k+2) needs {}; put each molecule's atoms in that order, water first",
                        i + 1,
                        KINDS[kind].name,
                        KINDS[WATER[i % 3] as usize].name
                    ),
                ));
            }
            raw.push(x);
            kinds.push(kind as KindId);
        }
        let box_number = count + 3;
        let box_line = lines.next().ok_or_else(|| bad(box_number, "no box line after the atoms".into()))?;
        let values: Vec<f32> = box_line
            .split_whitespace()
            .map(|v| v.parse::<f32>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| bad(box_number, format!("the box line {:?} is not numbers", box_line.trim())))?;
        let box_size = match values.as_slice() {
            [x, y, z] => [*x, *y, *z],
            [x, y, z, rest @ ..] if rest.len() == 6 => {
                if rest.iter().any(|&v| v != 0.0) {
                    return Err(bad(
                        box_number,
                        "the box is triclinic; only rectangular boxes are supported".into(),
                    ));
                }
                [*x, *y, *z]
            }
            _ => return Err(bad(box_number, format!("expected 3 box lengths, found {}", values.len()))),
        };
        if box_size.iter().any(|&l| !(l > 0.0 && l.is_finite())) {
            return Err(bad(box_number, format!("box lengths must be positive, got {box_size:?}")));
        }
        let positions = raw.into_iter().map(|x| wrap(x, box_size)).collect();
        Ok(System { title, box_size, positions, kinds })
    }

    /// The number of atoms.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether there are no atoms.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// The system repeated `nx × ny × nz` times along x, y and z, as `gmx genconf -nbox`
    /// does. Atom `i` of copy `(a, b, c)` gets global index `((a*ny + b)*nz + c)*n + i` and is
    /// shifted by `(a*Lx, b*Ly, c*Lz)`.
    pub fn replicate(&self, [nx, ny, nz]: [usize; 3]) -> Result<System> {
        if nx == 0 || ny == 0 || nz == 0 {
            return Err(Error::Config(format!(
                "replication {nx}x{ny}x{nz} needs at least one copy per dimension"
            )));
        }
        let n = self.len();
        let copies = nx
            .checked_mul(ny)
            .and_then(|c| c.checked_mul(nz))
            .filter(|c| c.checked_mul(n).is_some_and(|atoms| atoms <= u32::MAX as usize))
            .ok_or_else(|| {
                Error::Config(format!(
                    "replication {nx}x{ny}x{nz} of {n} atoms exceeds the {} atoms a global index can name",
                    u32::MAX
                ))
            })?;
        let mut positions = Vec::with_capacity(n * copies);
        for a in 0..nx {
            for b in 0..ny {
                for c in 0..nz {
                    let shift = [a as f32, b as f32, c as f32];
                    positions.extend(
                        self.positions
                            .iter()
                            .map(|x| std::array::from_fn(|d| x[d] + shift[d] * self.box_size[d])),
                    );
                }
            }
        }
        let box_size =
            [self.box_size[0] * nx as f32, self.box_size[1] * ny as f32, self.box_size[2] * nz as f32];
        let positions = positions.into_iter().map(|x| wrap(x, box_size)).collect();
        let kinds = (0..copies).flat_map(|_| self.kinds.iter().copied()).collect();
        Ok(System { title: format!("{} ({nx}x{ny}x{nz})", self.title), box_size, positions, kinds })
    }
}

/// The kind of an atom.
pub fn kind(id: KindId) -> &'static AtomKind {
    &KINDS[id as usize]
}

/// The width of the coordinate fields of a `.gro` atom line: the distance between the first
/// two decimal points from column 21 on, as GROMACS determines it.
fn field_width(line: &str) -> Option<usize> {
    let tail = line.get(20..)?;
    let first = tail.find('.')?;
    let second = tail[first + 1..].find('.')? + first + 1;
    Some(second - first).filter(|&w| w > 1)
}

/// `x` wrapped into `[0, box)` in every dimension.
pub fn wrap(x: RVec, box_size: RVec) -> RVec {
    std::array::from_fn(|d| {
        let l = box_size[d];
        let mut v = x[d] - (x[d] / l).floor() * l;
        // Rounding can leave v == l for values just below 0.
        if v >= l {
            v -= l;
        }
        if v < 0.0 { 0.0 } else { v }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r"two waters
    6
    1SOL     OW    1    .230    .628    .113
    1SOL    HW1    2    .137    .626    .150
    1SOL    HW2    3    .231    .589    .021
    2SOL     OW    4    .225    .275   -.996
    2SOL    HW1    5    .260    .258   -.905
    2SOL    HW2    6    .137    .230  -1.005
   1.86206   1.86206   1.86206
";

    #[test]
    fn reads_and_wraps() {
        let s = System::parse_gro(SMALL, "small.gro").expect("valid file");
        assert_eq!(s.len(), 6);
        assert_eq!(s.box_size, [1.86206; 3]);
        assert_eq!(s.positions[0], [0.230, 0.628, 0.113]);
        assert!((s.positions[3][2] - (1.86206 - 0.996)).abs() < 1e-6, "wrapped into the box");
        assert_eq!(kind(s.kinds[0]).charge, -0.82);
        assert_eq!(kind(s.kinds[1]).name, "HW1");
    }

    #[test]
    fn malformed_files_name_the_line() {
        let cases = [
            ("", "line 1", "empty"),
            ("t\n x\n", "line 2", "not a number"),
            ("t\n 2\n    1SOL     OW    1    .230    .628    .113\n", "line 4", "ends after 1 of the 2"),
            (
                "t\n 1\n    1SOL     XX    1    .230    .628    .113\n 1 1 1\n",
                "line 3",
                "unknown atom name \"XX\"",
            ),
            (
                "t\n 1\n    1SOL     OW    1    .230    abc     .113\n 1 1 1\n",
                "line 3",
                "not a finite number",
            ),
            (
                "t\n 1\n    1SOL     OW    1    .230    NaN     .113\n 1 1 1\n",
                "line 3",
                "not a finite number",
            ),
            ("t\n 1\n    1SOL    HW1    1    .230    .628    .113\n 1 1 1\n", "line 3", "needs OW"),
            ("t\n 1\n    1SOL     OW    1    .230    .628    .113\n", "line 4", "no box line"),
            (
                "t\n 1\n    1SOL     OW    1    .230    .628    .113\n 1 1 1 0 0 0.5 0 0 0\n",
                "line 4",
                "triclinic",
            ),
            ("t\n 1\n    1SOL     OW    1    .230    .628    .113\n 1 -1 1\n", "line 4", "positive"),
        ];
        for (text, line, problem) in cases {
            let message = System::parse_gro(text, "bad.gro").expect_err(problem).to_string();
            assert!(message.contains(&format!("bad.gro {line}")) && message.contains(problem), "{message}");
        }
    }

    #[test]
    fn replication_follows_the_index_convention() {
        let s = System::parse_gro(SMALL, "small.gro").expect("valid file");
        let big = s.replicate([2, 3, 1]).expect("positive counts");
        let n = s.len();
        assert_eq!(big.len(), 6 * n);
        assert_eq!(big.box_size, [2.0 * 1.86206, 3.0 * 1.86206, 1.86206]);
        // Atom 4 of copy (1, 2, 0): index ((1*3 + 2)*1 + 0)*n + 4, shifted by (Lx, 2 Ly, 0).
        let ([ny, nz], [a, b, c]) = ([3, 1], [1, 2, 0]);
        let g = ((a * ny + b) * nz + c) * n + 4;
        let expected = [s.positions[4][0] + 1.86206, s.positions[4][1] + 2.0 * 1.86206, s.positions[4][2]];
        for (d, want) in expected.iter().enumerate() {
            assert!((big.positions[g][d] - want).abs() < 1e-5, "dimension {d}");
        }
        assert_eq!(big.kinds[g], s.kinds[4]);
        assert!(s.replicate([0, 1, 1]).is_err());
    }

    #[test]
    fn the_shared_data_files_read() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data");
        let water = System::read_gro(Path::new(&format!("{dir}/spc216.gro"))).expect("spc216.gro");
        assert_eq!(water.len(), 648);
        assert_eq!(water.kinds.iter().filter(|&&k| kind(k).name == "OW").count(), 216);
        let argon = System::read_gro(Path::new(&format!("{dir}/argon5832.gro"))).expect("argon5832.gro");
        assert_eq!(argon.len(), 5832);
        assert!(argon.positions.iter().all(|x| (0..3).all(|d| x[d] >= 0.0 && x[d] < argon.box_size[d])));
        let missing = System::read_gro(Path::new("/nonexistent.gro")).expect_err("missing file").to_string();
        assert!(missing.contains("/nonexistent.gro"), "{missing}");
    }
}
