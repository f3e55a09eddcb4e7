//! The GROMACS comparison report: reads the lines `scripts/gromacs-yardstick --tsv` appends,
//! takes the median of repeated runs of each configuration, and writes the side-by-side tables
//! and a plot.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// GROMACS's names for the phases of a PME step (its log's cycle accounting), in the order
/// of the step, under which the examples report theirs.
pub const PME_PHASES: [&str; 7] = [
    "PME redist. X",
    "PME spread",
    "PME 3D-FFT",
    "PME 3D-FFT Comm.",
    "PME solve Elec",
    "PME gather",
    "PME redist. F",
];

/// The per-step phases of one program's MD step, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Phases {
    /// Coordinates out (GROMACS's Comm. coord.; the examples' move_x).
    pub comm_coord: f64,
    /// Waiting for the slowest rank before the forces go back.
    pub wait: f64,
    /// Forces back, without the wait (the examples' move_f).
    pub comm_f: f64,
    /// The force kernel.
    pub force: f64,
    /// The pair search, as a mean per step.
    pub search: f64,
    /// The whole step.
    pub step: f64,
}

impl Phases {
    /// The share of the step spent moving coordinates and forces, the wait left out.
    pub fn communication_share(&self) -> f64 {
        (self.comm_coord + self.comm_f) / self.step
    }
}

/// The PME redistribution of one configuration, in microseconds per step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pme {
    /// The PME grid, `NXxNYxNZ`.
    pub grid: String,
    /// GROMACS's PME redist. X/F.
    pub gromacs: f64,
    /// The example's redistribution plus force return on each path.
    pub get: f64,
    /// As `get`, one-sided put.
    pub put: f64,
    /// As `get`, MPI.
    pub mpi: f64,
    /// GROMACS's whole PME mesh part of the step.
    pub gromacs_mesh: f64,
    /// GROMACS's whole step with PME.
    pub gromacs_step: f64,
}

/// One run of the yardstick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    /// Atoms in the system.
    pub atoms: u64,
    /// Ranks (PEs).
    pub pes: u64,
    /// The domain grid, `NX,NY,NZ`.
    pub grid: String,
    /// The demo force kernel's instruction set.
    pub kernel: String,
    /// GROMACS 2022 with reaction field.
    pub gromacs: Phases,
    /// The halo example, one-sided.
    pub onesided: Phases,
    /// The halo example, MPI.
    pub mpi: Phases,
    /// With `--pme`.
    pub pme: Option<Pme>,
}

/// Parses the yardstick's lines; blank lines and lines starting with `#` are skipped.
///
/// # Errors
/// A line with too few fields or a field that is not a number, naming the line.
pub fn parse(text: &str) -> Result<Vec<Run>, String> {
    let mut runs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != 22 && fields.len() != 29 {
            return Err(format!("line {}: {} fields, expected 22 or 29", n + 1, fields.len()));
        }
        let number = |i: usize| -> Result<f64, String> {
            fields[i]
                .parse()
                .map_err(|_| format!("line {}: field {} is {:?}, not a number", n + 1, i + 1, fields[i]))
        };
        let phases = |first: usize| -> Result<Phases, String> {
            Ok(Phases {
                comm_coord: number(first)?,
                wait: number(first + 1)?,
                comm_f: number(first + 2)?,
                force: number(first + 3)?,
                search: number(first + 4)?,
                step: number(first + 5)?,
            })
        };
        runs.push(Run {
            atoms: number(0)? as u64,
            pes: number(1)? as u64,
            grid: fields[2].to_string(),
            kernel: fields[3].to_string(),
            gromacs: phases(4)?,
            onesided: phases(10)?,
            mpi: phases(16)?,
            pme: if fields.len() == 29 {
                Some(Pme {
                    grid: fields[22].to_string(),
                    gromacs: number(23)?,
                    get: number(24)?,
                    put: number(25)?,
                    mpi: number(26)?,
                    gromacs_mesh: number(27)?,
                    gromacs_step: number(28)?,
                })
            } else {
                None
            },
        });
    }
    Ok(runs)
}

/// The median of `values` (the mean of the middle two for an even count; NaN for none).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        0.5 * (values[n / 2 - 1] + values[n / 2])
    }
}

fn median_phases(all: &[&Phases]) -> Phases {
    let m = |f: fn(&Phases) -> f64| median(all.iter().map(|p| f(p)).collect());
    Phases {
        comm_coord: m(|p| p.comm_coord),
        wait: m(|p| p.wait),
        comm_f: m(|p| p.comm_f),
        force: m(|p| p.force),
        search: m(|p| p.search),
        step: m(|p| p.step),
    }
}

/// The median of every field over the runs of each configuration (atoms, ranks), with the
/// number of runs, in order of ranks and then atoms.
pub fn medians(runs: &[Run]) -> Vec<(Run, usize)> {
    let mut groups: BTreeMap<(u64, u64), Vec<&Run>> = BTreeMap::new();
    for run in runs {
        groups.entry((run.pes, run.atoms)).or_default().push(run);
    }
    groups
        .into_values()
        .map(|group| {
            let first = group[0];
            let with_pme: Vec<&Pme> = group.iter().filter_map(|r| r.pme.as_ref()).collect();
            let m = |f: fn(&Pme) -> f64| median(with_pme.iter().map(|p| f(p)).collect());
            let run = Run {
                atoms: first.atoms,
                pes: first.pes,
                grid: first.grid.clone(),
                kernel: first.kernel.clone(),
                gromacs: median_phases(&group.iter().map(|r| &r.gromacs).collect::<Vec<_>>()),
                onesided: median_phases(&group.iter().map(|r| &r.onesided).collect::<Vec<_>>()),
                mpi: median_phases(&group.iter().map(|r| &r.mpi).collect::<Vec<_>>()),
                pme: (!with_pme.is_empty()).then(|| Pme {
                    grid: with_pme[0].grid.clone(),
                    gromacs: m(|p| p.gromacs),
                    get: m(|p| p.get),
                    put: m(|p| p.put),
                    mpi: m(|p| p.mpi),
                    gromacs_mesh: m(|p| p.gromacs_mesh),
                    gromacs_step: m(|p| p.gromacs_step),
                }),
            };
            (run, group.len())
        })
        .collect()
}

fn us(v: f64) -> String {
    if v >= 1000.0 { format!("{:.2} ms", v / 1000.0) } else { format!("{v:.1} µs") }
}

/// The side-by-side tables, Markdown.
pub fn markdown(configurations: &[(Run, usize)]) -> String {
    let mut s = String::new();
    s.push_str(
        "### Halo exchange and force, reaction field\n\n\
         | atoms | ranks (grid) | runs | phase per step | GROMACS | onesided | MPI | onesided / GROMACS |\n\
         |---:|---|---:|---|---:|---:|---:|---:|\n",
    );
    for (run, n) in configurations {
        let (g, o, m) = (&run.gromacs, &run.onesided, &run.mpi);
        let rows: [(&str, f64, f64, f64); 7] = [
            ("Comm. coord.", g.comm_coord, o.comm_coord, m.comm_coord),
            ("Wait + Comm. F", g.wait + g.comm_f, o.wait + o.comm_f, m.wait + m.comm_f),
            ("  of which waiting", g.wait, o.wait, m.wait),
            ("  Comm. F alone", g.comm_f, o.comm_f, m.comm_f),
            ("Force", g.force, o.force, m.force),
            ("Neighbor search", g.search, o.search, m.search),
            ("Step", g.step, o.step, m.step),
        ];
        for (i, (name, gv, ov, mv)) in rows.iter().enumerate() {
            let head = if i == 0 {
                format!("{} | {} ({}) | {n}", run.atoms, run.pes, run.grid)
            } else {
                " | | ".to_string()
            };
            // GROMACS's force return alone is an estimate and may come out at zero.
            let ratio = if *gv > 0.0 { format!("{:.2}x", ov / gv) } else { "–".to_string() };
            let _ = writeln!(s, "| {head} | {name} | {} | {} | {} | {ratio} |", us(*gv), us(*ov), us(*mv));
        }
        let _ = writeln!(
            s,
            "| | | | communication share | {:.1} % | {:.1} % | {:.1} % | |",
            100.0 * g.communication_share(),
            100.0 * o.communication_share(),
            100.0 * m.communication_share()
        );
    }
    if configurations.iter().any(|(r, _)| r.pme.is_some()) {
        s.push_str(
            "\n### PME redistribution, coordinates out and forces back\n\n\
             | atoms | ranks | PME grid | GROMACS PME redist. X/F | onesided-get | onesided-put | MPI | best one-sided / GROMACS | GROMACS PME mesh | GROMACS step |\n\
             |---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for (run, _) in configurations {
            if let Some(p) = &run.pme {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} | {:.2}x | {} | {} |",
                    run.atoms,
                    run.pes,
                    p.grid,
                    us(p.gromacs),
                    us(p.get),
                    us(p.put),
                    us(p.mpi),
                    p.get.min(p.put) / p.gromacs,
                    us(p.gromacs_mesh),
                    us(p.gromacs_step)
                );
            }
        }
    }
    s
}

/// One configuration's bars: its label and the GROMACS, one-sided and MPI values.
type Bars = (String, [f64; 3]);

/// Bars per configuration: halo communication (coordinates out plus forces back, without the
/// wait) and, where measured, the PME redistribution, for GROMACS, one-sided and MPI.
pub fn svg(configurations: &[(Run, usize)]) -> String {
    let panels: Vec<(&str, Vec<Bars>)> = vec![
        (
            "Halo: Comm. coord. + Comm. F per step (wait excluded)",
            configurations
                .iter()
                .map(|(r, _)| {
                    let c = |p: &Phases| p.comm_coord + p.comm_f;
                    (
                        format!("{} atoms, {} ranks", r.atoms, r.pes),
                        [c(&r.gromacs), c(&r.onesided), c(&r.mpi)],
                    )
                })
                .collect(),
        ),
        (
            "PME redist. X/F per step",
            configurations
                .iter()
                .filter_map(|(r, _)| {
                    r.pme.as_ref().map(|p| {
                        (format!("{} atoms, {} ranks", r.atoms, r.pes), [p.gromacs, p.get.min(p.put), p.mpi])
                    })
                })
                .collect(),
        ),
    ];
    let names = ["GROMACS 2022", "onesided", "MPI"];
    let colours = ["#7f7f7f", "#1f77b4", "#d62728"];
    let (w, left, bar, gap, top) = (760.0, 190.0, 12.0, 14.0, 50.0);
    let panel_height = |n: usize| 30.0 + n as f64 * (3.0 * bar + gap);
    let h = top + panels.iter().map(|(_, rows)| panel_height(rows.len()) + 30.0).sum::<f64>() + 20.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h:.0}" viewBox="0 0 {w} {h:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h:.0}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">Per-step communication: GROMACS 2022 against onesided and MPI</text>"#,
        w / 2.0
    );
    for (i, (name, colour)) in names.iter().zip(colours).enumerate() {
        let x = left + 160.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="32" width="12" height="12" fill="{colour}"/><text x="{}" y="42">{name}</text>"#,
            x + 18.0
        );
    }
    let mut y = top + 10.0;
    for (title, rows) in &panels {
        if rows.is_empty() {
            continue;
        }
        let max = rows.iter().flat_map(|r| r.1).fold(1e-9, f64::max);
        let scale = (w - left - 90.0) / max;
        let _ = writeln!(s, r#"<text x="10" y="{:.1}" font-size="13">{title}</text>"#, y + 12.0);
        y += 24.0;
        for (label, values) in rows {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#,
                left - 8.0,
                y + 1.5 * bar + 4.0
            );
            for (k, v) in values.iter().enumerate() {
                let yy = y + k as f64 * bar;
                let _ = writeln!(
                    s,
                    r#"<rect x="{left}" y="{yy:.1}" width="{:.1}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="10">{}</text>"#,
                    (v * scale).max(1.0),
                    bar - 2.0,
                    colours[k],
                    left + (v * scale).max(1.0) + 4.0,
                    yy + bar - 3.0,
                    us(*v)
                );
            }
            y += 3.0 * bar + gap;
        }
        y += 30.0;
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "17496\t2\t2,1,1\tAVX-512\t39.8\t166.8\t216.2\t4955.2\t1268.7\t7253.7\t32.2\t89.8\t40.4\t5321.4\t2473.8\t7957.5\t34.4\t1374.9\t75.4\t5552.4\t2587.8\t9624.9";

    #[test]
    fn parses_lines_with_and_without_pme_and_takes_medians() {
        let pme = "\t48x48x48\t631.8\t176.3\t157.3\t182.0\t2408.0\t12736.3";
        let text = format!("# comment\n{LINE}{pme}\n{}\n\n{LINE}\n", LINE.replace("\t39.8\t", "\t50.0\t"));
        let runs = parse(&text).expect("valid");
        assert_eq!(runs.len(), 3);
        assert_eq!(runs[0].onesided.force, 5321.4);
        assert_eq!(runs[0].pme.as_ref().map(|p| p.put), Some(157.3));
        assert!(runs[1].pme.is_none());
        let m = medians(&runs);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].1, 3);
        // The median of 39.8, 50.0 and 39.8.
        assert_eq!(m[0].0.gromacs.comm_coord, 39.8);
        assert_eq!(m[0].0.pme.as_ref().map(|p| p.grid.as_str()), Some("48x48x48"));
        let table = markdown(&m);
        assert!(
            table.contains("| 17496 | 2 (2,1,1) | 3 | Comm. coord. | 39.8 µs | 32.2 µs | 34.4 µs | 0.81x |")
        );
        assert!(table.contains("| 17496 | 2 | 48x48x48 | 631.8 µs"));
        assert!(svg(&m).contains("17496 atoms, 2 ranks"));
    }

    #[test]
    fn a_short_or_garbled_line_is_named() {
        assert!(parse("1\t2\t3").unwrap_err().contains("line 1: 3 fields"));
        let bad = LINE.replace("\t4955.2\t", "\tfast\t");
        assert!(parse(&bad).unwrap_err().contains("field 8 is \"fast\""));
    }
}
