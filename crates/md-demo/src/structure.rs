//! Structures: a GROMACS `.gro` reader for any system (rectangular or triclinic box), the
//! molecules it implies, and replication of a box into a larger one.

use std::path::Path;

use md_halo::{PbcBox, RVec};

use crate::error::{Error, Result};

/// What a `.gro` line says an atom is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Atom {
    /// The residue number (columns 1-5; GROMACS wraps it after 99999).
    pub residue_number: i32,
    /// The residue name (columns 6-10).
    pub residue_name: String,
    /// The atom name (columns 11-15).
    pub name: String,
}

/// A system: a periodic box and its atoms, with positions wrapped into the box.
#[derive(Clone, Debug, PartialEq)]
pub struct Structure {
    /// The title line of the file.
    pub title: String,
    /// The periodic box.
    pub pbc: PbcBox,
    /// What each atom is; atom `i` has global index `i`.
    pub atoms: Vec<Atom>,
    /// Positions in nm, wrapped into the box.
    pub positions: Vec<RVec>,
    /// The molecule of each atom: consecutive atoms with the same residue number and name
    /// form one molecule (the demo's rule, which needs no topology: every water, methanol or
    /// ion is one residue; a protein becomes one molecule per residue).
    pub molecules: Vec<u32>,
}

impl Structure {
    /// Reads a GROMACS `.gro` file: title, atom count, one fixed-column line per atom and the
    /// box line (three lengths, or the nine numbers of a triclinic box). Velocities, if
    /// present, are ignored. Positions are wrapped into the box.
    ///
    /// The atom lines are read by their columns, not split at blanks, as GROMACS reads them:
    /// past atom 9999 the atom number fills its columns and touches the name, and residue
    /// numbers wrap after 99999. The width of the coordinate fields is the distance between
    /// their first two decimal points.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::Input`] naming the line for a
    /// malformed file or a box GROMACS would refuse.
    pub fn read_gro(path: &Path) -> Result<Structure> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Io { path: path.display().to_string(), problem: e.to_string() })?;
        Self::parse_gro(&text, &path.display().to_string())
    }

    /// Parses the text of a `.gro` file; `source` names it in errors.
    ///
    /// # Errors
    /// [`Error::Input`] naming the line, as for [`read_gro`](Self::read_gro).
    pub fn parse_gro(text: &str, source: &str) -> Result<Structure> {
        let bad = |line: usize, problem: String| Error::Input { file: source.to_string(), line, problem };
        let mut lines = text.lines();
        let title = lines.next().ok_or_else(|| bad(1, "the file is empty".into()))?.trim().to_string();
        let count_line = lines.next().ok_or_else(|| bad(2, "no atom count line".into()))?;
        let count: usize = count_line
            .trim()
            .parse()
            .map_err(|_| bad(2, format!("the atom count {:?} is not a number", count_line.trim())))?;
        if count > u32::MAX as usize {
            return Err(bad(2, format!("{count} atoms exceed the {} a global index can name", u32::MAX)));
        }
        // A count in the file is not trusted with memory before its lines are there.
        let mut raw = Vec::with_capacity(count.min(1 << 20));
        let mut atoms = Vec::with_capacity(count.min(1 << 20));
        let mut width = None;
        for i in 0..count {
            let number = i + 3;
            let line = lines.next().ok_or_else(|| {
                bad(number, format!("the file ends after {i} of the {count} atoms it announces"))
            })?;
            let width = match width {
                Some(width) => width,
                None => *width.insert(field_width(line).ok_or_else(|| {
                    bad(number, "no coordinates in columns 21 and on (expected %8.3f fields)".into())
                })?),
            };
            let field = |range: std::ops::Range<usize>| line.get(range).map(str::trim).unwrap_or("");
            let residue_number = field(0..5).parse::<i32>().map_err(|_| {
                bad(number, format!("the residue number {:?} in columns 1-5 is not a number", field(0..5)))
            })?;
            let name = field(10..15);
            if name.is_empty() {
                return Err(bad(number, "no atom name in columns 11-15".into()));
            }
            let mut x = [0f32; 3];
            for (d, value) in x.iter_mut().enumerate() {
                let text = line.get(20 + d * width..20 + (d + 1) * width).ok_or_else(|| {
                    bad(number, format!("the line is too short for coordinate {}", ["x", "y", "z"][d]))
                })?;
                *value = text.trim().parse().ok().filter(|v: &f32| v.is_finite()).ok_or_else(|| {
                    bad(
                        number,
                        format!("coordinate {} {:?} is not a finite number", ["x", "y", "z"][d], text.trim()),
                    )
                })?;
            }
            raw.push(x);
            atoms.push(Atom {
                residue_number,
                residue_name: field(5..10).to_string(),
                name: name.to_string(),
            });
        }
        let box_number = count + 3;
        let box_line = lines.next().ok_or_else(|| bad(box_number, "no box line after the atoms".into()))?;
        let values: Vec<f32> = box_line
            .split_whitespace()
            .map(|v| v.parse::<f32>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| bad(box_number, format!("the box line {:?} is not numbers", box_line.trim())))?;
        // The order GROMACS writes: v1(x) v2(y) v3(z) v1(y) v1(z) v2(x) v2(z) v3(x) v3(y).
        let vectors = match values.as_slice() {
            [x, y, z] => [[*x, 0.0, 0.0], [0.0, *y, 0.0], [0.0, 0.0, *z]],
            [ax, by, cz, ay, az, bx, bz, cx, cy] => [[*ax, *ay, *az], [*bx, *by, *bz], [*cx, *cy, *cz]],
            _ => {
                return Err(bad(
                    box_number,
                    format!(
                        "expected 3 box lengths or the 9 numbers of a triclinic box, found {}",
                        values.len()
                    ),
                ));
            }
        };
        let pbc = PbcBox::new(vectors).map_err(|e| bad(box_number, e.to_string()))?;
        let positions = raw.into_iter().map(|x| pbc.wrap(x)).collect();
        let molecules = molecules_of(&atoms);
        Ok(Structure { title, pbc, atoms, positions, molecules })
    }

    /// The number of atoms.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether there are no atoms.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// The system repeated `nx × ny × nz` times along the box vectors, as `gmx genconf -nbox`
    /// does. Atom `i` of copy `(p, q, r)` gets global index `((p*ny + q)*nz + r)*n + i` and is
    /// shifted by `p a + q b + r c`; each copy's molecules are molecules of their own. A skewed
    /// box replicated unevenly (a dodecahedron doubled along z, say) leans more than GROMACS
    /// allows; its vectors are then reduced to the equivalent box that does not, as GROMACS
    /// does, which describes the same periodic system.
    ///
    /// # Errors
    /// [`Error::Config`] for a count of zero or more atoms than a global index can name.
    pub fn replicate(&self, [nx, ny, nz]: [usize; 3]) -> Result<Structure> {
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
        let v = self.pbc.vectors();
        let per_copy = self.molecules.last().map_or(0, |&m| m + 1);
        // Memory is asked for before any is used, so that a replication too large for this
        // machine is an error, not an abort.
        let total = n * copies;
        let too_big = |what: &str, bytes: usize| {
            Error::Config(format!(
                "replication {nx}x{ny}x{nz} gives {total} atoms, whose {what} alone need {:.1} GiB, more \
                 than this process can allocate; replicate less",
                bytes as f64 / (1u64 << 30) as f64
            ))
        };
        let mut positions: Vec<RVec> = Vec::new();
        positions.try_reserve_exact(total).map_err(|_| too_big("positions", total * size_of::<RVec>()))?;
        let mut molecules: Vec<u32> = Vec::new();
        molecules.try_reserve_exact(total).map_err(|_| too_big("molecule numbers", total * 4))?;
        let mut atoms: Vec<Atom> = Vec::new();
        atoms.try_reserve_exact(total).map_err(|_| too_big("atom records", total * size_of::<Atom>()))?;
        for p in 0..nx {
            for q in 0..ny {
                for r in 0..nz {
                    let copy = ((p * ny + q) * nz + r) as u32;
                    let t = [p as f32, q as f32, r as f32];
                    let shift: RVec =
                        std::array::from_fn(|k| t[0] * v[0][k] + t[1] * v[1][k] + t[2] * v[2][k]);
                    positions.extend(
                        self.positions.iter().map(|x| [x[0] + shift[0], x[1] + shift[1], x[2] + shift[2]]),
                    );
                    molecules.extend(self.molecules.iter().map(|&m| copy * per_copy + m));
                    atoms.extend(self.atoms.iter().cloned());
                }
            }
        }
        let counts = [nx as f32, ny as f32, nz as f32];
        let pbc = PbcBox::new(reduced(std::array::from_fn(|d| v[d].map(|c| c * counts[d]))))
            .map_err(|e| Error::Config(format!("replication {nx}x{ny}x{nz}: {e}")))?;
        let positions = positions.into_iter().map(|x| pbc.wrap(x)).collect();
        Ok(Structure { title: format!("{} ({nx}x{ny}x{nz})", self.title), pbc, atoms, positions, molecules })
    }
}

/// The box vectors with whole multiples of earlier vectors taken off later ones until no
/// off-diagonal element exceeds half the diagonal element below it (GROMACS's limits): the
/// same lattice, so the same periodic system.
fn reduced(mut v: [RVec; 3]) -> [RVec; 3] {
    let take = |v: &mut [RVec; 3], from: usize, basis: usize, d: usize| {
        let ratio = v[from][d] as f64 / v[basis][d] as f64;
        if ratio.abs() > 0.5 {
            let k = ratio.round();
            let base = v[basis];
            for (c, b) in v[from].iter_mut().zip(base) {
                *c = (*c as f64 - k * b as f64) as f32;
            }
        }
    };
    take(&mut v, 2, 1, 1);
    take(&mut v, 2, 0, 0);
    take(&mut v, 1, 0, 0);
    v
}

/// Molecule numbers: a new molecule starts wherever the residue number or name changes.
fn molecules_of(atoms: &[Atom]) -> Vec<u32> {
    let mut molecule = 0u32;
    atoms
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if i > 0 {
                let previous = &atoms[i - 1];
                if previous.residue_number != a.residue_number || previous.residue_name != a.residue_name {
                    molecule += 1;
                }
            }
            molecule
        })
        .collect()
}

/// The width of the coordinate fields of a `.gro` atom line: the distance between the first
/// two decimal points from column 21 on, as GROMACS determines it.
fn field_width(line: &str) -> Option<usize> {
    let tail = line.get(20..)?;
    let first = tail.find('.')?;
    let second = tail[first + 1..].find('.')? + first + 1;
    Some(second - first).filter(|&w| w > 1)
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
        let s = Structure::parse_gro(SMALL, "small.gro").expect("valid file");
        assert_eq!(s.len(), 6);
        assert_eq!(s.pbc.diagonal(), [1.86206; 3]);
        assert_eq!(s.positions[0], [0.230, 0.628, 0.113]);
        assert!((s.positions[3][2] - (1.86206 - 0.996)).abs() < 1e-6, "wrapped into the box");
        assert_eq!(s.atoms[1], Atom { residue_number: 1, residue_name: "SOL".into(), name: "HW1".into() });
        assert_eq!(s.molecules, [0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn triclinic_box_lines_are_read_in_gromacs_order() {
        let text = SMALL.replace("   1.86206   1.86206   1.86206", "   4.0 4.0 2.82843 0 0 0 0 2.0 2.0");
        let s = Structure::parse_gro(&text, "dodecahedron.gro").expect("valid file");
        assert_eq!(s.pbc.vectors(), [[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [2.0, 2.0, 2.82843]]);
        assert!(!s.pbc.is_rectangular());
        for x in &s.positions {
            assert!(s.pbc.fraction(*x).iter().all(|f| (-1e-6..1.0 + 1e-6).contains(f)), "{x:?}");
        }
    }

    #[test]
    fn malformed_files_name_the_line() {
        let cases = [
            ("", "line 1", "empty"),
            ("t\n x\n", "line 2", "not a number"),
            ("t\n 2\n    1SOL     OW    1    .230    .628    .113\n", "line 4", "ends after 1 of the 2"),
            ("t\n 1\n    1SOL          1    .230    .628    .113\n 1 1 1\n", "line 3", "no atom name"),
            ("t\n 1\n    xSOL     OW    1    .230    .628    .113\n 1 1 1\n", "line 3", "residue number"),
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
            ("t\n 1\n    1SOL     OW    1    .230    .628    .113\n", "line 4", "no box line"),
            ("t\n 1\n    1SOL     OW    1    .230    .628    .113\n 1 1 1 0 0\n", "line 4", "found 5"),
            (
                "t\n 1\n    1SOL     OW    1    .230    .628    .113\n 1 1 1 0 0 0.6 0 0 0\n",
                "line 4",
                "too skewed",
            ),
            (
                "t\n 1\n    1SOL     OW    1    .230    .628    .113\n 1 1 1 0.1 0 0 0 0 0\n",
                "line 4",
                "rotate",
            ),
            ("t\n 1\n    1SOL     OW    1    .230    .628    .113\n 1 -1 1\n", "line 4", "positive"),
        ];
        for (text, line, problem) in cases {
            let message = Structure::parse_gro(text, "bad.gro").expect_err(problem).to_string();
            assert!(message.contains(&format!("bad.gro {line}")) && message.contains(problem), "{message}");
        }
    }

    #[test]
    fn replication_follows_the_index_convention_in_any_box() {
        let text = SMALL.replace("   1.86206   1.86206   1.86206", "   2.0 2.0 2.0 0 0 0.5 0 -0.4 0.3");
        for source in [SMALL.to_string(), text] {
            let s = Structure::parse_gro(&source, "small.gro").expect("valid file");
            let big = s.replicate([2, 3, 1]).expect("positive counts");
            let n = s.len();
            assert_eq!(big.len(), 6 * n);
            let v = s.pbc.vectors();
            assert_eq!(big.pbc.vectors()[1], v[1].map(|c| 3.0 * c));
            // Atom 4 of copy (1, 2, 0): index ((1*3 + 2)*1 + 0)*n + 4, shifted by a + 2b, and
            // the same point once both are wrapped.
            let g = (3 + 2) * n + 4;
            let moved: RVec = std::array::from_fn(|k| s.positions[4][k] + v[0][k] + 2.0 * v[1][k]);
            let (want, got) = (big.pbc.wrap(moved), big.positions[g]);
            assert!((0..3).all(|k| (want[k] - got[k]).abs() < 1e-5), "{want:?} {got:?}");
            assert_eq!(big.atoms[g], s.atoms[4]);
            assert_eq!(big.molecules[g], 5 * 2 + 1, "copies' molecules are their own");
        }
        let s = Structure::parse_gro(SMALL, "small.gro").expect("valid file");
        assert!(s.replicate([0, 1, 1]).is_err());
        // A dodecahedron doubled along z only: c = (d, d, ...) leans a whole box; reduced by a
        // and b it is the box GROMACS would use.
        let text = SMALL.replace("   1.86206   1.86206   1.86206", "   4.0 4.0 2.82843 0 0 0 0 2.0 2.0");
        let tall = Structure::parse_gro(&text, "dodecahedron.gro")
            .expect("valid")
            .replicate([1, 1, 2])
            .expect("reduced");
        assert_eq!(tall.pbc.vectors()[2], [0.0, 0.0, 5.65686]);
    }

    #[test]
    fn the_shipped_data_files_read() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data");
        let water = Structure::read_gro(Path::new(&format!("{dir}/spc216.gro"))).expect("spc216.gro");
        assert_eq!(water.len(), 648);
        assert_eq!(water.molecules.last(), Some(&215));
        let argon = Structure::read_gro(Path::new(&format!("{dir}/argon5832.gro"))).expect("argon5832.gro");
        assert_eq!(argon.len(), 5832);
        let missing =
            Structure::read_gro(Path::new("/nonexistent.gro")).expect_err("missing file").to_string();
        assert!(missing.contains("/nonexistent.gro"), "{missing}");
    }
}
