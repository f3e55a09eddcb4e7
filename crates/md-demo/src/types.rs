//! The demo force field's non-bonded parameters: a charge (e), a Lennard-Jones C6
//! (kJ mol⁻¹ nm⁶) and a C12 (kJ mol⁻¹ nm¹²) for every atom of a GROMACS `.gro` structure.
//!
//! The demo field exists to give the communication something physical to carry, not to be a
//! real force field: it has no bonded terms, the element fallback below gives zero charges, and
//! GROMOS's pair-specific C12 values are not reproduced.
//!
//! # Lookup
//!
//! Atom and residue names are matched exactly but ignoring ASCII case (`Me1` and `ME1` are the
//! same name); surrounding blanks are ignored. The parameters of an atom are the first found of:
//!
//! 1. a types-file entry `RESNAME:NAME` ([`Origin::File`]);
//! 2. a types-file entry `NAME` ([`Origin::File`]);
//! 3. a built-in entry for the residue and atom name ([`Origin::Residue`]);
//! 4. a built-in entry for the atom name ([`Origin::Name`]), the water model's sites first
//!    (see below);
//! 5. the element of the atom name ([`Origin::Element`]).
//!
//! Per-atom values are self parameters: the force kernel combines them geometrically,
//! `C6ᵢⱼ = √(C6ᵢ C6ⱼ)` and `C12ᵢⱼ = √(C12ᵢ C12ⱼ)`. That is GROMOS's rule for C6 and, for
//! values converted from OPLS-AA's σ and ε (both combined geometrically there), exact.
//!
//! # Water models
//!
//! SPC, TIP4P and TIP5P use the same names `OW`, `HW1` and `HW2` (and GROMACS's structure files
//! all use residue `SOL`), so [`TypeTable::assign`] decides per molecule, a molecule being a run
//! of consecutive atoms with the same residue number and residue name:
//!
//! - a molecule with an `OW` and an `MW` is TIP4P: `OW`, `HW1`, `HW2` and `MW` get TIP4P values
//!   (the charge sits on the massless site `MW`, `OW` is uncharged);
//! - otherwise, a molecule with an `OW` and an `LP1` or `LP2` is TIP5P: `OW`, `HW1`, `HW2`,
//!   `LP1` and `LP2` get TIP5P values;
//! - anything else uses the plain names, where `OW`, `HW1` and `HW2` are SPC.
//!
//! `MW`, `LP1` and `LP2` have no built-in values outside such a molecule (other molecules use
//! these names for other sites). [`TypeTable::lookup`], which sees one atom without its molecule,
//! gives the plain-name (SPC) values. Types-file entries take precedence in every molecule.
//!
//! # Ions
//!
//! An ion's atom name is also a common atom name (`CA` is the α carbon of every amino acid,
//! `NA` a porphyrin nitrogen), so ions are built-in only where the residue name equals the atom
//! name, as GROMACS's `ions.itp` files and CHARMM-GUI name them: `NA`, `K`, `CL`, `CA`, `MG`,
//! `ZN`, and `SOD`, `POT`, `CLA`, `CAL` (the last four share the values of Na⁺, K⁺, Cl⁻, Ca²⁺).
//!
//! # Element fallback
//!
//! The element is the first character of the atom name after any leading digits (`1HB` is
//! hydrogen, `CA` carbon). Carbon, nitrogen, oxygen, hydrogen, sulfur and phosphorus get GROMOS
//! 43a1 Lennard-Jones values and a **zero charge**; other elements have no fallback. A name
//! whose first letter belongs to a longer element symbol (chlorine `CL1`, for instance) is taken
//! by its first letter: give such atoms in a types file.
//!
//! # Built-in table
//!
//! Sources are files of GROMACS 2022's `share/gromacs/top` directory; `ffnonbonded.itp` types
//! give C6 and C12, the molecule files charges.
//!
//! - SPC water, `OW`, `HW1`, `HW2`: `gromos43a1.ff/spc.itp`, type `OW` of
//!   `gromos43a1.ff/ffnonbonded.itp`.
//! - TIP4P water, `OW`, `HW1`, `HW2`, `MW` in a TIP4P molecule: `gromos43a1.ff/tip4p.itp`,
//!   type `OWT4`.
//! - TIP5P water, `OW`, `HW1`, `HW2`, `LP1`, `LP2` in a TIP5P molecule: `oplsaa.ff/tip5p.itp`,
//!   type `opls_118`.
//! - Methanol, `MEOH:ME1`, `MEOH:O2`, `MEOH:H3`: `gromos43a1.ff/methanol.itp` (its GROMOS96
//!   charges), types `CMet`, `OMet`, `H`.
//! - Argon, `AR`: σ = 0.34 nm, ε = 0.99774 kJ/mol, uncharged.
//! - Ions `NA:NA`, `CL:CL`, `CA:CA`, `MG:MG`, `ZN:ZN`: `gromos43a1.ff/ions.itp`, types `NA+`,
//!   `CL-`, `CA2+`, `MG2+`, `ZN2+`; `K:K`: `oplsaa.ff/ions.itp`, type `opls_408` (GROMOS 43a1
//!   has no potassium); `SOD:SOD`, `POT:POT`, `CLA:CLA`, `CAL:CAL` as Na⁺, K⁺, Cl⁻, Ca²⁺.
//! - United-atom `CH1`, `CH2`, `CH3`, `CH4`: GROMOS 43a1 types of the same names, uncharged.
//! - Element fallback C, N, O, H, S, P: GROMOS 43a1 types `C`, `N`, `O`, `HC`, `S`, `P`,
//!   uncharged.
//!
//! Each value is the `f32` nearest to the source's number (written with the fewest digits
//! that give that `f32`), or to 4εσ⁶ and 4εσ¹² where the source gives σ and ε; SPC's C6 and
//! argon's values are the rounded ones given in the table's comments.
//!
//! The structures in that directory (`spc216.gro`, `tip4p.gro`, `tip5p.gro`,
//! `gromos43a1.ff/methanol216.gro`) map completely. All-atom structures map through the element
//! fallback, with zero charges.
//!
//! # The types file
//!
//! A types file (`--types FILE`) gives parameters for atoms the built-in table lacks, or
//! replaces built-in ones. One entry per line, whitespace separated:
//!
//! ```text
//! # NAME or RESNAME:NAME   charge (e)   c6 (kJ mol^-1 nm^6)   c12 (kJ mol^-1 nm^12)
//! CL1        -0.1    0.0087647044   1.5295921e-05   # a ligand's chlorine (GROMOS type CL)
//! LIG:C1      0.05   0.0023406244   3.374569e-06    # C1 of residue LIG only
//! ```
//!
//! `NAME` applies in every residue, `RESNAME:NAME` only in that residue; names are at most five
//! characters, as in a `.gro` file, and case-insensitive. `#` starts a comment; blank lines are
//! ignored. Values must be finite numbers, C6 and C12 non-negative. A name given twice in one
//! file is an error; a later file replaces an earlier file's entry.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::structure::Atom;

/// Non-bonded parameters of one atom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AtomParams {
    /// Charge in e.
    pub charge: f32,
    /// Lennard-Jones C6 in kJ mol⁻¹ nm⁶, the atom's self value.
    pub c6: f32,
    /// Lennard-Jones C12 in kJ mol⁻¹ nm¹², the atom's self value.
    pub c12: f32,
}

/// Where a parameter came from (for the example's printout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A types-file entry, `RESNAME:NAME` or `NAME`.
    File,
    /// A built-in entry for the residue and atom name (methanol, ions).
    Residue,
    /// A built-in entry for the atom name (water, argon, united atoms), including the sites of a
    /// TIP4P or TIP5P molecule.
    Name,
    /// The element fallback: Lennard-Jones values by element, zero charge.
    Element,
}

const fn params(charge: f32, c6: f32, c12: f32) -> AtomParams {
    AtomParams { charge, c6, c12 }
}

/// Na⁺: charge from `gromos43a1.ff/ions.itp`, type `NA+` of `gromos43a1.ff/ffnonbonded.itp`.
const SODIUM: AtomParams = params(1.0, 7.206_312e-5, 2.1025e-8);
/// K⁺: charge from `oplsaa.ff/ions.itp`; type `opls_408` of `oplsaa.ff/ffnonbonded.itp`,
/// σ = 0.493463 nm, ε = 0.00137235 kJ/mol, as C6 = 4εσ⁶ and C12 = 4εσ¹².
const POTASSIUM: AtomParams = params(1.0, 7.925_970_4e-5, 1.144_405_7e-6);
/// Cl⁻: charge from `gromos43a1.ff/ions.itp`, type `CL-` of `gromos43a1.ff/ffnonbonded.itp`.
const CHLORIDE: AtomParams = params(-1.0, 0.013_806_25, 1.069_156e-4);
/// Ca²⁺: charge from `gromos43a1.ff/ions.itp`, type `CA2+` of `gromos43a1.ff/ffnonbonded.itp`.
const CALCIUM: AtomParams = params(2.0, 0.001_004_89, 4.980_124_9e-7);
/// Mg²⁺: charge from `gromos43a1.ff/ions.itp`, type `MG2+` of `gromos43a1.ff/ffnonbonded.itp`.
const MAGNESIUM: AtomParams = params(2.0, 6.528_64e-5, 3.408_224_4e-9);
/// Zn²⁺: charge from `gromos43a1.ff/ions.itp`, type `ZN2+` of `gromos43a1.ff/ffnonbonded.itp`.
const ZINC: AtomParams = params(2.0, 4.182_025e-4, 9.440_066e-9);

/// Built-in entries for a residue and atom name, upper case.
const BY_RESIDUE: &[(&str, &str, AtomParams)] = &[
    // Methanol, residue `MeOH` of `gromos43a1.ff/methanol216.gro`. Charges from the GROMOS96
    // branch of `gromos43a1.ff/methanol.itp` (`gromos43a1.ff/forcefield.itp` defines
    // `_FF_GROMOS96`); Lennard-Jones from types `CMet`, `OMet` and `H` of
    // `gromos43a1.ff/ffnonbonded.itp`.
    ("MEOH", "ME1", params(0.176, 0.008_875_524, 2.085_292_2e-5)),
    ("MEOH", "O2", params(-0.574, 0.002_261_953_6, 1.505_529e-6)),
    ("MEOH", "H3", params(0.398, 0.0, 0.0)),
    // Ions, where the residue name equals the atom name (GROMACS `ions.itp` names).
    ("NA", "NA", SODIUM),
    ("K", "K", POTASSIUM),
    ("CL", "CL", CHLORIDE),
    ("CA", "CA", CALCIUM),
    ("MG", "MG", MAGNESIUM),
    ("ZN", "ZN", ZINC),
    // The same ions under CHARMM-GUI's residue and atom names.
    ("SOD", "SOD", SODIUM),
    ("POT", "POT", POTASSIUM),
    ("CLA", "CLA", CHLORIDE),
    ("CAL", "CAL", CALCIUM),
];

/// Built-in entries for an atom name in any residue, upper case.
const BY_NAME: &[(&str, AtomParams)] = &[
    // SPC water (`gromos43a1.ff/spc.itp`: charges −0.82 and +0.41). Lennard-Jones of type `OW`
    // of `gromos43a1.ff/ffnonbonded.itp` (C6 0.0026173456 to seven significant digits,
    // C12 2.634129e-06); hydrogens have none (type `H`).
    ("OW", params(-0.82, 0.002_617_346, 2.634_129e-6)),
    ("HW1", params(0.41, 0.0, 0.0)),
    ("HW2", params(0.41, 0.0, 0.0)),
    // Argon, uncharged: σ = 0.34 nm, ε = 0.99774 kJ/mol (ε/k = 120 K), C6 = 4εσ⁶ and
    // C12 = 4εσ¹² to five significant digits.
    ("AR", params(0.0, 0.006_165_2, 9.524_1e-6)),
    // GROMOS united-atom CH1 to CH4, uncharged: types of the same names of
    // `gromos43a1.ff/ffnonbonded.itp`.
    ("CH1", params(0.0, 0.003_779_790_4, 1.137_712_9e-5)),
    ("CH2", params(0.0, 0.007_104_804_1, 2.577_593e-5)),
    ("CH3", params(0.0, 0.009_916_176, 3.357_043_6e-5)),
    ("CH4", params(0.0, 0.013_179_04, 3.436_304_4e-5)),
];

/// TIP4P water sites. Charges from `gromos43a1.ff/tip4p.itp` (the same in
/// `oplsaa.ff/tip4p.itp`); Lennard-Jones of type `OWT4` of `gromos43a1.ff/ffnonbonded.itp`
/// (OPLS-AA's `opls_113`, σ = 0.315365 nm, ε = 0.648520 kJ/mol, gives the same values).
const TIP4P: &[(&str, AtomParams)] = &[
    ("OW", params(0.0, 0.002_551_9, 2.510_4e-6)),
    ("HW1", params(0.52, 0.0, 0.0)),
    ("HW2", params(0.52, 0.0, 0.0)),
    ("MW", params(-1.04, 0.0, 0.0)),
];

/// TIP5P water sites. Charges from `oplsaa.ff/tip5p.itp`; Lennard-Jones of type `opls_118` of
/// `oplsaa.ff/ffnonbonded.itp`, σ = 0.312 nm, ε = 0.66944 kJ/mol, as C6 = 4εσ⁶ and C12 = 4εσ¹².
const TIP5P: &[(&str, AtomParams)] = &[
    ("OW", params(0.0, 0.002_470_012_8, 2.278_383_1e-6)),
    ("HW1", params(0.241, 0.0, 0.0)),
    ("HW2", params(0.241, 0.0, 0.0)),
    ("LP1", params(-0.241, 0.0, 0.0)),
    ("LP2", params(-0.241, 0.0, 0.0)),
];

/// The element fallback, uncharged: types `C`, `N`, `O`, `HC` (the hydrogen on carbon, so that
/// uncharged hydrogens still repel), `S` and `P` of `gromos43a1.ff/ffnonbonded.itp`.
const BY_ELEMENT: &[(u8, AtomParams)] = &[
    (b'C', params(0.0, 0.002_340_624_4, 3.374_569e-6)),
    (b'N', params(0.0, 0.002_436_409_6, 1.692_601e-6)),
    (b'O', params(0.0, 0.002_261_953_6, 7.414_932_1e-7)),
    (b'H', params(0.0, 8.464e-5, 1.5129e-8)),
    (b'S', params(0.0, 0.009_984_006, 1.307_545_6e-5)),
    (b'P', params(0.0, 0.014_737_96, 2.219_352e-5)),
];

/// An atom's parameters and where they came from, if it has any.
type Found = Option<(AtomParams, Origin)>;

/// The longest atom or residue name a `.gro` file can hold.
const MAX_NAME: usize = 5;

/// Which water model a molecule is, for the names its sites share with SPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum WaterModel {
    /// Not a four- or five-site water: plain names apply (`OW`, `HW1`, `HW2` are SPC).
    Plain,
    /// TIP4P: has `OW` and `MW`.
    Tip4p,
    /// TIP5P: has `OW` and `LP1` or `LP2`.
    Tip5p,
}

impl WaterModel {
    /// The model of one molecule's atoms.
    fn of(molecule: &[Atom]) -> WaterModel {
        let has = |name: &str| molecule.iter().any(|atom| atom.name.trim().eq_ignore_ascii_case(name));
        if !has("OW") {
            WaterModel::Plain
        } else if has("MW") {
            WaterModel::Tip4p
        } else if has("LP1") || has("LP2") {
            WaterModel::Tip5p
        } else {
            WaterModel::Plain
        }
    }

    /// The sites whose built-in values this model replaces.
    fn sites(self) -> &'static [(&'static str, AtomParams)] {
        match self {
            WaterModel::Plain => &[],
            WaterModel::Tip4p => TIP4P,
            WaterModel::Tip5p => TIP5P,
        }
    }
}

/// The parameter table: the built-in entries plus those of any types files.
#[derive(Clone, Debug)]
pub struct TypeTable {
    /// Types-file entries `RESNAME:NAME`, keys upper case.
    by_residue: HashMap<(String, String), AtomParams>,
    /// Types-file entries `NAME`, keys upper case.
    by_name: HashMap<String, AtomParams>,
}

impl TypeTable {
    /// The built-in table (see the module documentation for its entries and sources).
    pub fn builtin() -> TypeTable {
        TypeTable { by_residue: HashMap::new(), by_name: HashMap::new() }
    }

    /// Adds the entries of a types file; they take precedence over the built-in ones and over
    /// those of files read before.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the file cannot be read, [`Error::Input`] if a line is malformed.
    pub fn read_file(self, path: &Path) -> Result<TypeTable> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|error| Error::Io { path: name.clone(), problem: error.to_string() })?;
        self.parse(&text, &name)
    }

    /// As [`read_file`](TypeTable::read_file), from text; `source` names it in errors.
    ///
    /// # Errors
    ///
    /// [`Error::Input`] naming the first malformed line (1-based) and what was expected there.
    pub fn parse(mut self, text: &str, source: &str) -> Result<TypeTable> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut by_residue: HashMap<(String, String), (AtomParams, usize)> = HashMap::new();
        let mut by_name: HashMap<String, (AtomParams, usize)> = HashMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let error = |problem: String| Error::Input { file: source.to_string(), line, problem };
            let content = raw.split_once('#').map_or(raw, |(before, _)| before);
            let fields: Vec<&str> = content.split_whitespace().collect();
            if fields.is_empty() {
                continue;
            }
            let &[key, charge, c6, c12] = fields.as_slice() else {
                return Err(error(format!(
                    "expected `NAME charge c6 c12` or `RESNAME:NAME charge c6 c12` (4 fields), found {} \
                     field{}",
                    fields.len(),
                    if fields.len() == 1 { "" } else { "s" }
                )));
            };
            let params = AtomParams {
                charge: value(charge, "charge (e)", false).map_err(error)?,
                c6: value(c6, "c6 (kJ mol^-1 nm^6)", true).map_err(error)?,
                c12: value(c12, "c12 (kJ mol^-1 nm^12)", true).map_err(error)?,
            };
            match key.split_once(':') {
                Some((residue, name)) => {
                    let residue = entry_name(residue, "residue name", key).map_err(error)?;
                    let name = entry_name(name, "atom name", key).map_err(error)?;
                    if let Some((_, first)) = by_residue.insert((residue, name), (params, line)) {
                        return Err(error(format!("`{key}` is already given on line {first}")));
                    }
                }
                None => {
                    let name = entry_name(key, "atom name", key).map_err(error)?;
                    if let Some((_, first)) = by_name.insert(name, (params, line)) {
                        return Err(error(format!("`{key}` is already given on line {first}")));
                    }
                }
            }
        }
        self.by_residue.extend(by_residue.into_iter().map(|(key, (params, _))| (key, params)));
        self.by_name.extend(by_name.into_iter().map(|(key, (params, _))| (key, params)));
        Ok(self)
    }

    /// The parameters of one atom and where they came from, or `None`.
    ///
    /// This sees one atom without its molecule: `OW`, `HW1` and `HW2` get SPC values, and the
    /// TIP4P and TIP5P sites `MW`, `LP1` and `LP2` have no built-in values;
    /// [`assign`](TypeTable::assign) decides the water model per molecule.
    pub fn lookup(&self, residue_name: &str, atom_name: &str) -> Option<(AtomParams, Origin)> {
        self.lookup_in(WaterModel::Plain, residue_name, atom_name)
    }

    /// Parameters for every atom; the first atom that cannot be mapped is an error.
    /// `source` names the structure file.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the first atom without parameters (its 1-based index in the
    /// file, residue number and name, and atom name) and how to give them in a types file.
    pub fn assign(&self, atoms: &[Atom], source: &str) -> Result<Vec<AtomParams>> {
        Ok(self.assign_with_origins(atoms, source)?.into_iter().map(|(params, _)| params).collect())
    }

    /// As [`assign`](TypeTable::assign), with where each atom's parameters came from.
    ///
    /// # Errors
    ///
    /// As [`assign`](TypeTable::assign).
    pub fn assign_with_origins(&self, atoms: &[Atom], source: &str) -> Result<Vec<(AtomParams, Origin)>> {
        let mut assigned = Vec::with_capacity(atoms.len());
        let mut known: HashMap<(WaterModel, &str, &str), Found> = HashMap::new();
        let same_molecule =
            |a: &Atom, b: &Atom| a.residue_number == b.residue_number && a.residue_name == b.residue_name;
        for molecule in atoms.chunk_by(same_molecule) {
            let model = WaterModel::of(molecule);
            for atom in molecule {
                let found = *known
                    .entry((model, atom.residue_name.as_str(), atom.name.as_str()))
                    .or_insert_with(|| self.lookup_in(model, &atom.residue_name, &atom.name));
                match found {
                    Some(entry) => assigned.push(entry),
                    None => return Err(unmapped(source, assigned.len() + 1, atom)),
                }
            }
        }
        Ok(assigned)
    }

    /// The lookup of the module documentation, for an atom of a molecule of the given model.
    fn lookup_in(
        &self,
        model: WaterModel,
        residue_name: &str,
        atom_name: &str,
    ) -> Option<(AtomParams, Origin)> {
        let residue = residue_name.trim();
        let name = atom_name.trim();
        if !self.by_residue.is_empty() {
            let key = (residue.to_ascii_uppercase(), name.to_ascii_uppercase());
            if let Some(&params) = self.by_residue.get(&key) {
                return Some((params, Origin::File));
            }
        }
        if !self.by_name.is_empty()
            && let Some(&params) = self.by_name.get(&name.to_ascii_uppercase())
        {
            return Some((params, Origin::File));
        }
        let by_residue = BY_RESIDUE.iter().find(|(entry_residue, entry_name, _)| {
            entry_residue.eq_ignore_ascii_case(residue) && entry_name.eq_ignore_ascii_case(name)
        });
        if let Some(&(_, _, params)) = by_residue {
            return Some((params, Origin::Residue));
        }
        let by_name = model.sites().iter().chain(BY_NAME).find(|(entry, _)| entry.eq_ignore_ascii_case(name));
        if let Some(&(_, params)) = by_name {
            return Some((params, Origin::Name));
        }
        let element = name.bytes().find(|byte| !byte.is_ascii_digit())?.to_ascii_uppercase();
        BY_ELEMENT.iter().find(|&&(entry, _)| entry == element).map(|&(_, params)| (params, Origin::Element))
    }
}

/// One number of a types-file line: finite, and non-negative if `non_negative`.
fn value(text: &str, what: &str, non_negative: bool) -> Result<f32, String> {
    let number: f32 = text.parse().map_err(|_| format!("{what} `{text}` is not a number"))?;
    if !number.is_finite() {
        return Err(format!("{what} `{text}` is not finite"));
    }
    if non_negative && number < 0.0 {
        return Err(format!("{what} `{text}` is negative; c6 and c12 must be >= 0"));
    }
    Ok(number)
}

/// A residue or atom name of a types-file entry `key`, upper case.
fn entry_name(name: &str, what: &str, key: &str) -> Result<String, String> {
    let expected = "expected `NAME` or `RESNAME:NAME` before the values";
    if name.is_empty() || name.contains(':') {
        return Err(format!("{expected}, found `{key}`"));
    }
    if name.chars().count() > MAX_NAME {
        let within = if name == key { String::new() } else { format!(" in `{key}`") };
        return Err(format!(
            "{what} `{name}`{within} is longer than the {MAX_NAME} characters a .gro file holds"
        ));
    }
    Ok(name.to_ascii_uppercase())
}

/// The error for an atom without parameters, `index` 1-based.
fn unmapped(source: &str, index: usize, atom: &Atom) -> Error {
    let residue = atom.residue_name.trim();
    let name = atom.name.trim();
    let qualified = if residue.is_empty() {
        String::new()
    } else {
        format!(" or `{residue}:{name} charge c6 c12` (this residue only)")
    };
    Error::Config(format!(
        "{source}: atom {index} (residue {} {residue}, atom name `{name}`) has no non-bonded parameters: \
         neither a types file nor the built-in table has an entry for it, and its name does not start \
         with C, N, O, H, S or P, the elements with fallback values. Give it a line \
         `{name} charge c6 c12` (any residue){qualified}, with the charge in e, c6 in kJ mol^-1 nm^6 \
         and c12 in kJ mol^-1 nm^12, in a file passed with --types FILE",
        atom.residue_number
    ))
}

#[cfg(test)]
mod tests;
