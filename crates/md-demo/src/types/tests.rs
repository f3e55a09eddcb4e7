//! The parameter table's tests: built-in values against their sources, the water-model
//! rule, element fallbacks, types files and errors.

use super::*;

fn atom(residue_number: i32, residue_name: &str, name: &str) -> Atom {
    Atom { residue_number, residue_name: residue_name.to_string(), name: name.to_string() }
}

fn assign(table: &TypeTable, atoms: &[Atom]) -> Vec<(AtomParams, Origin)> {
    match table.assign_with_origins(atoms, "test.gro") {
        Ok(assigned) => assigned,
        Err(error) => panic!("{error}"),
    }
}

fn parse(text: &str) -> TypeTable {
    match TypeTable::builtin().parse(text, "types.txt") {
        Ok(table) => table,
        Err(error) => panic!("{error}"),
    }
}

fn parse_error(text: &str) -> (usize, String) {
    match TypeTable::builtin().parse(text, "types.txt") {
        Err(Error::Input { file, line, problem }) => {
            assert_eq!(file, "types.txt");
            (line, problem)
        }
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn spc_values_are_unchanged() {
    let table = TypeTable::builtin();
    let atoms = [atom(1, "SOL", "OW"), atom(1, "SOL", "HW1"), atom(1, "SOL", "HW2")];
    let assigned = assign(&table, &atoms);
    let ow = AtomParams { charge: -0.82, c6: 0.002_617_346, c12: 2.634_129e-6 };
    let hw = AtomParams { charge: 0.41, c6: 0.0, c12: 0.0 };
    assert_eq!(assigned, [(ow, Origin::Name), (hw, Origin::Name), (hw, Origin::Name)]);
    for (got, want) in assigned.iter().zip([ow, hw, hw]) {
        assert_eq!(got.0.charge.to_bits(), want.charge.to_bits());
        assert_eq!(got.0.c6.to_bits(), want.c6.to_bits());
        assert_eq!(got.0.c12.to_bits(), want.c12.to_bits());
    }
    assert_eq!(table.lookup("SOL", "OW"), Some((ow, Origin::Name)));
    assert_eq!(table.lookup("WAT", "hw2"), Some((hw, Origin::Name)));
    let argon = AtomParams { charge: 0.0, c6: 0.006_165_2, c12: 9.524_1e-6 };
    assert_eq!(table.lookup("AR", "AR"), Some((argon, Origin::Name)));
}

#[test]
fn tip4p_charge_is_on_mw() {
    let table = TypeTable::builtin();
    let mut atoms = Vec::new();
    for molecule in 1..=2 {
        for name in ["OW", "HW1", "HW2", "MW"] {
            atoms.push(atom(molecule, "SOL", name));
        }
    }
    // An SPC molecule after them keeps SPC values.
    atoms.extend([atom(3, "SOL", "OW"), atom(3, "SOL", "HW1"), atom(3, "SOL", "HW2")]);
    let assigned = assign(&table, &atoms);
    for molecule in assigned[..8].chunks(4) {
        assert_eq!(molecule[0].0.charge, 0.0);
        assert_eq!(molecule[0].0.c6, 0.002_551_9);
        assert_eq!(molecule[1].0.charge, 0.52);
        assert_eq!(molecule[2].0.charge, 0.52);
        assert_eq!(molecule[3].0, AtomParams { charge: -1.04, c6: 0.0, c12: 0.0 });
        let total: f32 = molecule.iter().map(|(params, _)| params.charge).sum();
        assert!(total.abs() < 1e-6);
    }
    assert_eq!(assigned[8].0.charge, -0.82);
    assert_eq!(assigned[9].0.charge, 0.41);
    // Without its molecule, MW has no built-in value.
    assert_eq!(table.lookup("SOL", "MW"), None);
}

#[test]
fn tip5p_charges_are_on_lone_pairs() {
    let table = TypeTable::builtin();
    let atoms: Vec<Atom> =
        ["OW", "HW1", "HW2", "LP1", "LP2"].iter().map(|name| atom(7, "SOL", name)).collect();
    let charges: Vec<f32> = assign(&table, &atoms).iter().map(|(params, _)| params.charge).collect();
    assert_eq!(charges, [0.0, 0.241, 0.241, -0.241, -0.241]);
    assert_eq!(assign(&table, &atoms)[0].0.c6, 0.002_470_012_8);
    // LP1 in a molecule without OW is not a water site.
    let ligand = [atom(1, "LIG", "C1"), atom(1, "LIG", "LP1")];
    match table.assign(&ligand, "ligand.gro") {
        Err(Error::Config(message)) => assert!(message.contains("`LP1`"), "{message}"),
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

#[test]
fn methanol_names_map() {
    let table = TypeTable::builtin();
    let atoms = [atom(1, "MeOH", "Me1"), atom(1, "MeOH", "O2"), atom(1, "MeOH", "H3")];
    let assigned = assign(&table, &atoms);
    assert!(assigned.iter().all(|&(_, origin)| origin == Origin::Residue));
    let charges: Vec<f32> = assigned.iter().map(|(params, _)| params.charge).collect();
    assert_eq!(charges, [0.176, -0.574, 0.398]);
    assert!((charges.iter().sum::<f32>()).abs() < 1e-6);
    assert_eq!(assigned[0].0.c6, 0.008_875_524);
    assert_eq!(assigned[2].0.c12, 0.0);
}

#[test]
fn protein_names_fall_back_to_elements() {
    let table = TypeTable::builtin();
    let atoms: Vec<Atom> = ["N", "H", "CA", "HA", "CB", "1HB", "C", "O", "SG"]
        .iter()
        .map(|name| atom(12, "ALA", name))
        .collect();
    let assigned = assign(&table, &atoms);
    assert!(assigned.iter().all(|&(params, origin)| origin == Origin::Element && params.charge == 0.0));
    let carbon = table.lookup("ALA", "C");
    assert_eq!(assigned[2], carbon.unwrap_or_else(|| panic!("no carbon")));
    assert_eq!(assigned[2].0.c6, 0.002_340_624_4);
    assert_eq!(assigned[5], assigned[1]);
    assert_eq!(assigned[8].0.c6, 0.009_984_006);
    // A porphyrin nitrogen named NA is nitrogen, not sodium.
    assert_eq!(table.lookup("HEM", "NA").map(|(_, origin)| origin), Some(Origin::Element));
    assert_eq!(table.lookup("HEM", "NA").map(|(params, _)| params.charge), Some(0.0));
}

#[test]
fn ions_need_their_own_residue() {
    let table = TypeTable::builtin();
    assert_eq!(table.lookup("NA", "NA").map(|(params, _)| params.charge), Some(1.0));
    assert_eq!(table.lookup("na", "Na").map(|(_, origin)| origin), Some(Origin::Residue));
    assert_eq!(table.lookup("CL", "CL").map(|(params, _)| params.charge), Some(-1.0));
    assert_eq!(table.lookup("CA", "CA").map(|(params, _)| params.charge), Some(2.0));
    assert_eq!(table.lookup("SOD", "SOD"), table.lookup("NA", "NA"));
    assert_eq!(table.lookup("POT", "POT"), table.lookup("K", "K"));
    let ions = [atom(1, "NA", "NA"), atom(2, "CL", "CL")];
    let charges: Vec<f32> = assign(&table, &ions).iter().map(|(params, _)| params.charge).collect();
    assert_eq!(charges, [1.0, -1.0]);
    // ZN outside a ZN residue starts with no fallback element.
    assert_eq!(table.lookup("PROT", "ZN"), None);
}

#[test]
fn types_file_takes_precedence() {
    let text = "# test entries\n\
                OW   -0.9  0.003  3e-6   # every residue\n\
                \n\
                sol:ow -0.7 0.002 2e-6\n\
                CA    0.1  0.004  4e-6\n\
                LIG:X1 0.25 0 0\n";
    let table = parse(text);
    let sol_ow = AtomParams { charge: -0.7, c6: 0.002, c12: 2e-6 };
    let ow = AtomParams { charge: -0.9, c6: 0.003, c12: 3e-6 };
    assert_eq!(table.lookup("SOL", "OW"), Some((sol_ow, Origin::File)));
    assert_eq!(table.lookup("HOH", "OW"), Some((ow, Origin::File)));
    // A file NAME beats built-in residue entries and elements.
    let ca = AtomParams { charge: 0.1, c6: 0.004, c12: 4e-6 };
    assert_eq!(table.lookup("CA", "CA"), Some((ca, Origin::File)));
    assert_eq!(table.lookup("ALA", "ca"), Some((ca, Origin::File)));
    assert_eq!(table.lookup("LIG", "X1").map(|(params, _)| params.charge), Some(0.25));
    assert_eq!(table.lookup("OTHER", "X1"), None);
    // File entries apply in TIP4P molecules too.
    let water = [atom(1, "SOL", "OW"), atom(1, "SOL", "HW1"), atom(1, "SOL", "HW2"), atom(1, "SOL", "MW")];
    let assigned = assign(&table, &water);
    assert_eq!(assigned[0], (sol_ow, Origin::File));
    assert_eq!(assigned[3].0.charge, -1.04);
    // A later file replaces an earlier one's entry.
    let table = match table.parse("OW -0.5 0 0\n", "more.txt") {
        Ok(table) => table,
        Err(error) => panic!("{error}"),
    };
    assert_eq!(table.lookup("HOH", "OW").map(|(params, _)| params.charge), Some(-0.5));
    assert_eq!(table.lookup("SOL", "OW"), Some((sol_ow, Origin::File)));
}

#[test]
fn malformed_lines_are_errors() {
    let (line, problem) = parse_error("# header\nOW -0.82 0.0026\n");
    assert_eq!(line, 2);
    assert!(problem.contains("NAME charge c6 c12") && problem.contains("found 3 fields"), "{problem}");
    let (line, problem) = parse_error("\n\nOW -0.82 x 1e-6\n");
    assert_eq!(line, 3);
    assert!(problem.contains("c6") && problem.contains("`x`"), "{problem}");
    assert_eq!(parse_error("OW 0 -1 0").0, 1);
    assert!(parse_error("OW 0 0 -1e-6").1.contains("c12"));
    assert!(parse_error("OW nan 0 0").1.contains("not finite"));
    assert!(parse_error("OW 0 1e99 0").1.contains("not finite"));
    assert!(parse_error(":OW 0 0 0").1.contains("RESNAME:NAME"));
    assert!(parse_error("SOL: 0 0 0").1.contains("RESNAME:NAME"));
    assert!(parse_error("A:B:C 0 0 0").1.contains("RESNAME:NAME"));
    assert!(parse_error("TOOLONG 0 0 0").1.contains("5 characters"));
    let (line, problem) = parse_error("OW 0 0 0\nHW1 0 0 0\now 1 0 0\n");
    assert_eq!(line, 3);
    assert!(problem.contains("line 1"), "{problem}");
    let message = match TypeTable::builtin().parse("X", "t.txt") {
        Err(error) => error.to_string(),
        Ok(_) => panic!("a one-field line was accepted"),
    };
    assert!(message.starts_with("t.txt line 1: ") && message.contains("found 1 field"), "{message}");
}

#[test]
fn unreadable_file_is_an_io_error() {
    let path = Path::new("/nonexistent/onesided-types.txt");
    match TypeTable::builtin().read_file(path) {
        Err(Error::Io { path, .. }) => assert!(path.contains("onesided-types.txt")),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn unknown_name_says_how_to_supply_it() {
    let table = TypeTable::builtin();
    let atoms = [atom(1, "SOL", "OW"), atom(1, "SOL", "HW1"), atom(1, "SOL", "HW2"), atom(2, "LIG", "BR1")];
    let message = match table.assign(&atoms, "box.gro") {
        Err(Error::Config(message)) => message,
        other => panic!("expected a configuration error, got {other:?}"),
    };
    for part in ["box.gro", "atom 4", "residue 2 LIG", "`BR1`", "BR1 charge c6 c12", "LIG:BR1", "--types"] {
        assert!(message.contains(part), "`{part}` missing from: {message}");
    }
    assert_eq!(table.lookup("LIG", "BR1"), None);
    let table = parse("BR1 -0.1 0.0011792356 6.5480464e-05");
    assert_eq!(table.assign(&atoms, "box.gro").map(|params| params.len()), Ok(4));
}

#[test]
fn builtin_values_are_their_sources() {
    let from_file = |text: &str| text.parse::<f32>().unwrap_or(f32::NAN);
    let from_sigma_epsilon = |sigma: f64, epsilon: f64| {
        ((4.0 * epsilon * sigma.powi(6)) as f32, (4.0 * epsilon * sigma.powi(12)) as f32)
    };
    let table = TypeTable::builtin();
    let lj =
        |residue: &str, name: &str| table.lookup(residue, name).map(|(params, _)| (params.c6, params.c12));
    let files = [
        (("MEOH", "ME1"), ("0.0088755241", "2.0852922e-05")),
        (("MEOH", "O2"), ("0.0022619536", "1.505529e-06")),
        (("NA", "NA"), ("7.2063121e-05", "2.1025e-08")),
        (("CL", "CL"), ("0.01380625", "0.0001069156")),
        (("CA", "CA"), ("0.00100489", "4.9801249e-07")),
        (("MG", "MG"), ("6.52864e-05", "3.4082244e-09")),
        (("ZN", "ZN"), ("0.0004182025", "9.4400656e-09")),
        (("X", "CH1"), ("0.0037797904", "1.1377129e-05")),
        (("X", "CH2"), ("0.0071048041", "2.5775929e-05")),
        (("X", "CH3"), ("0.0099161764", "3.3570436e-05")),
        (("X", "CH4"), ("0.01317904", "3.4363044e-05")),
        (("X", "C9"), ("0.0023406244", "3.374569e-06")),
        (("X", "N9"), ("0.0024364096", "1.692601e-06")),
        (("X", "O9"), ("0.0022619536", "7.4149321e-07")),
        (("X", "H9"), ("8.464e-05", "1.5129e-08")),
        (("X", "S9"), ("0.0099840064", "1.3075456e-05")),
        (("X", "P9"), ("0.01473796", "2.2193521e-05")),
        (("X", "OW"), ("0.002617346", "2.634129e-06")),
    ];
    for ((residue, name), (c6, c12)) in files {
        assert_eq!(lj(residue, name), Some((from_file(c6), from_file(c12))), "{residue}:{name}");
    }
    assert_eq!(lj("K", "K"), Some(from_sigma_epsilon(0.493463, 1.37235e-3)));
    let tip4p = table.lookup_in(WaterModel::Tip4p, "SOL", "OW").map(|(params, _)| (params.c6, params.c12));
    assert_eq!(tip4p, Some((from_file("0.25519e-02"), from_file("0.25104e-05"))));
    let tip5p = table.lookup_in(WaterModel::Tip5p, "SOL", "OW").map(|(params, _)| (params.c6, params.c12));
    assert_eq!(tip5p, Some(from_sigma_epsilon(0.312, 0.66944)));
}
