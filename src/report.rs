//! The benchmark report (`cargo run --bin bench-report`): reads criterion's results under
//! `target/criterion`, prints a Markdown table of each group with the ratio of every variant
//! to the group's reference (MPI where the group has it, otherwise the C library called
//! directly), and draws time against message size as SVG, into `docs/bench/`. A ratio is the
//! paired one where the benchmarks measured it ([`PairedRatio`], variant and reference
//! interleaved), else the ratio of the two medians, marked `~`: compare variants within one
//! run, since whole runs drift. The launch probes ([`LaunchProbe`]) come as a table, one row
//! per launch with the state it fell into.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::records::{LaunchProbe, PairedRatio, launch_state};

/// One measured point: the median time of a benchmark id `group/variant/bytes`.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The criterion group.
    pub group: String,
    /// The variant (criterion's function id).
    pub variant: String,
    /// The message size in bytes (criterion's parameter).
    pub bytes: u64,
    /// The median time per iteration, in nanoseconds.
    pub median_ns: f64,
    /// Whether `bytes` is a byte count (criterion recorded a byte throughput) rather than
    /// another size, such as atoms.
    pub is_bytes: bool,
}

/// Reads every `<id>/new/benchmark.json` with its `estimates.json` under `criterion_dir`.
/// Ids whose parameter is not a byte count are skipped.
pub fn read_criterion(criterion_dir: &Path) -> Result<Vec<Point>, String> {
    let mut points = Vec::new();
    let mut stack = vec![criterion_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "new") {
                    if let Some(point) = read_point(&path)? {
                        points.push(point);
                    }
                } else {
                    stack.push(path);
                }
            }
        }
    }
    points.sort_by(|a, b| (&a.group, a.bytes, &a.variant).cmp(&(&b.group, b.bytes, &b.variant)));
    Ok(points)
}

fn read_point(new_dir: &Path) -> Result<Option<Point>, String> {
    let read = |name: &str| -> Result<Option<serde_json::Value>, String> {
        let path = new_dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("{} is not criterion JSON: {e}", path.display())),
            Err(_) => Ok(None),
        }
    };
    let (Some(benchmark), Some(estimates)) = (read("benchmark.json")?, read("estimates.json")?) else {
        return Ok(None);
    };
    let text = |key: &str| benchmark.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let (Some(group), Some(variant), Some(bytes)) =
        (text("group_id"), text("function_id"), text("value_str"))
    else {
        return Ok(None);
    };
    let Ok(bytes) = bytes.parse::<u64>() else {
        return Ok(None);
    };
    let median_ns = estimates
        .pointer("/median/point_estimate")
        .and_then(|v| v.as_f64())
        .ok_or_else(|| format!("{} has no median", new_dir.display()))?;
    let is_bytes = benchmark.pointer("/throughput/Bytes").is_some();
    Ok(Some(Point { group, variant, bytes, median_ns, is_bytes }))
}

/// The launch probes as a Markdown table, one row per launch (benchmark binary), the groups
/// it ran first, with the state each launch fell into ([`launch_state`]).
pub fn probes_markdown(probes: &[LaunchProbe]) -> String {
    let mut out = String::from(
        "### launches\n\n| groups | signal round trip PE 0 <-> PE 1 | local copy of 1 MiB | get of 256 KiB PE 1 just wrote | overwrite of 256 KiB PE 1 just read | state |\n|---|---:|---:|---:|---:|---|\n",
    );
    let or_dash = |ns: f64| if ns.is_nan() { "-".to_string() } else { format_time(ns) };
    for p in probes {
        let (pull, overwrite) = (or_dash(p.pull_ns), or_dash(p.overwrite_ns));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {pull} | {overwrite} | {} |",
            p.groups,
            format_time(p.round_trip_ns),
            format_time(p.copy_ns),
            launch_state(p)
        );
    }
    out.push('\n');
    out
}

/// The points of one group: variant -> bytes -> median ns.
type Table = BTreeMap<String, BTreeMap<u64, f64>>;

fn by_group(points: &[Point]) -> BTreeMap<String, Table> {
    let mut groups: BTreeMap<String, Table> = BTreeMap::new();
    for p in points {
        groups
            .entry(p.group.clone())
            .or_default()
            .entry(p.variant.clone())
            .or_default()
            .insert(p.bytes, p.median_ns);
    }
    groups
}

/// The variant a group's ratios are taken against: `mpi`, else `raw`, else none.
pub fn reference(variants: &[&str]) -> Option<&'static str> {
    ["mpi", "raw"].into_iter().find(|r| variants.contains(r))
}

/// The reference of one variant: two-way variants (`…-2way`) are compared with `mpi-2way`
/// where the group has it, overlapped ones (`…-overlap`) with their path's blocking variant,
/// the others with the group's [`reference`](fn@reference).
pub fn reference_of(variant: &str, variants: &[&str]) -> Option<&'static str> {
    if variant.ends_with("-2way") && variant != "mpi-2way" && variants.contains(&"mpi-2way") {
        return Some("mpi-2way");
    }
    // An overlapped step against the blocking step of its path.
    if let Some(base) = variant.strip_suffix("-overlap") {
        return ["onesided", "mpi"].into_iter().find(|b| *b == base && variants.contains(b));
    }
    reference(variants).filter(|r| *r != variant)
}

/// A time in nanoseconds, readable: `86 ns`, `1.36 µs`, `201 µs`, `1.20 ms`.
pub fn format_time(ns: f64) -> String {
    let (value, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if value >= 100.0 {
        format!("{value:.0} {unit}")
    } else if value >= 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.2} {unit}")
    }
}

/// A byte count: `8 B`, `4 KiB`, `4 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// A row of the README's headline table: what is compared, the benchmark group and
/// variant (against the group's `mpi`), and the sizes it is quoted at.
struct Headline {
    label: &'static str,
    group: &'static str,
    variant: &'static str,
    sizes: &'static [u64],
    atoms: bool,
}

/// The rows of the README's headline table.
const HEADLINES: &[Headline] = &[
    Headline {
        label: "ping-pong, put with signal against `MPI_Send`/`MPI_Recv`",
        group: "pingpong",
        variant: "onesided",
        sizes: &[8, 4096, 4 << 20],
        atoms: false,
    },
    Headline {
        label: "send-receive, offset swap against `MPI_Sendrecv`",
        group: "sendrecv",
        variant: "onesided-put",
        sizes: &[8, 4096, 4 << 20],
        atoms: false,
    },
    Headline {
        label: "all-to-all, ordered one-sided against `MPI_Alltoall`",
        group: "alltoall",
        variant: "ordered-onesided",
        sizes: &[8, 4096, 256 << 10],
        atoms: false,
    },
    Headline {
        label: "halo `move_x`",
        group: "halo_move_x",
        variant: "onesided",
        sizes: &[20736, 97200],
        atoms: true,
    },
    Headline {
        label: "halo `move_f`",
        group: "halo_move_f",
        variant: "onesided",
        sizes: &[20736, 97200],
        atoms: true,
    },
    Headline {
        label: "PME redistribution and forces back",
        group: "pme_redist",
        variant: "onesided-put-in-place",
        sizes: &[20736, 97200],
        atoms: true,
    },
    Headline {
        label: "whole PME step (redistribution, spread, FFTs, solve, gather)",
        group: "pme_step",
        variant: "onesided",
        sizes: &[20736, 97200],
        atoms: true,
    },
];

/// The README's table of headline ratios, one-sided against MPI, from a run's paired ratios
/// (`–` where the run has none).
pub fn headline(paired: &[PairedRatio]) -> String {
    let mut out = String::from("| exchange | size | one-sided / MPI |\n|---|---:|---:|\n");
    for row in HEADLINES {
        let ratio = |size: u64| {
            paired
                .iter()
                .find(|p| {
                    p.group == row.group
                        && p.variant == row.variant
                        && p.reference == "mpi"
                        && p.bytes as u64 == size
                })
                .map_or("–".to_string(), |p| format!("{:.2}x", p.median))
        };
        let size = |size: u64| if row.atoms { group_digits(size) } else { format_bytes(size) };
        let sizes: Vec<String> = row.sizes.iter().map(|&s| size(s)).collect();
        let ratios: Vec<String> = row.sizes.iter().map(|&s| ratio(s)).collect();
        let unit = if row.atoms { " atoms" } else { "" };
        let _ = writeln!(out, "| {} | {}{unit} | {} |", row.label, sizes.join(" / "), ratios.join(" / "));
    }
    out
}

/// `20736` as `20 736`.
fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// The Markdown report: one table per group, criterion's medians and the ratio of each
/// variant to the group's reference (below 1 means faster). Where a paired ratio was measured
/// (variant and reference interleaved, see the bench module) it is shown; otherwise the
/// ratio of the two medians, marked with `~`.
pub fn markdown(points: &[Point], paired: &[PairedRatio]) -> String {
    let mut out = String::new();
    for (group, table) in by_group(points) {
        let variants: Vec<&str> = table.keys().map(String::as_str).collect();
        // Variants first, the references they are compared with last.
        let is_reference = |v: &str| variants.iter().any(|o| reference_of(o, &variants) == Some(v));
        let mut columns: Vec<&str> = variants.iter().copied().filter(|v| !is_reference(v)).collect();
        columns.extend(variants.iter().copied().filter(|v| is_reference(v)));
        let ratios: Vec<(&str, &str)> =
            columns.iter().filter_map(|v| reference_of(v, &variants).map(|r| (*v, r))).collect();
        let _ = writeln!(out, "### {group}\n");
        let mut header = String::from("| size |");
        let mut rule = String::from("|---:|");
        for v in &columns {
            let _ = write!(header, " {v} |");
            rule.push_str("---:|");
        }
        for (v, r) in &ratios {
            let _ = write!(header, " {v} / {r} |");
            rule.push_str("---:|");
        }
        let _ = writeln!(out, "{header}\n{rule}");
        let mut sizes: Vec<u64> = table.values().flat_map(|m| m.keys().copied()).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let in_bytes = points.iter().filter(|p| p.group == group).all(|p| p.is_bytes);
        for bytes in sizes {
            let size = if in_bytes { format_bytes(bytes) } else { bytes.to_string() };
            let mut row = format!("| {size} |");
            for v in &columns {
                match table[*v].get(&bytes) {
                    Some(&ns) => {
                        let _ = write!(row, " {} |", format_time(ns));
                    }
                    None => row.push_str(" – |"),
                }
            }
            for (v, r) in &ratios {
                let measured = paired.iter().find(|p| {
                    p.group == group && p.variant == *v && p.reference == *r && p.bytes as u64 == bytes
                });
                match (measured, table[*v].get(&bytes), table[*r].get(&bytes)) {
                    (Some(p), _, _) => {
                        let _ = write!(row, " {:.2}x |", p.median);
                    }
                    (None, Some(a), Some(b)) if *b > 0.0 => {
                        let _ = write!(row, " ~{:.2}x |", a / b);
                    }
                    _ => row.push_str(" – |"),
                }
            }
            let _ = writeln!(out, "{row}");
        }
        out.push('\n');
    }
    out
}

const COLOURS: &[&str] = &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"];

/// An SVG plot of time against message size, both logarithmic, one line per variant.
pub fn svg(group: &str, points: &[Point]) -> Option<String> {
    let in_bytes = points.iter().filter(|p| p.group == group).all(|p| p.is_bytes);
    let x_label = if in_bytes { "message size" } else { "size (atoms)" };
    svg_labelled(group, points, &format!("{group}: median time per operation"), x_label)
}

/// [`svg`] with its own title and horizontal axis label.
pub fn svg_labelled(group: &str, points: &[Point], title: &str, x_label: &str) -> Option<String> {
    let table = by_group(points).remove(group)?;
    let in_bytes = points.iter().filter(|p| p.group == group).all(|p| p.is_bytes);
    let size_label = |n: u64| if in_bytes { format_bytes(n) } else { n.to_string() };
    let all: Vec<(u64, f64)> = table.values().flat_map(|m| m.iter().map(|(b, t)| (*b, *t))).collect();
    let (w, h, left, right, top, bottom) = (720.0, 440.0, 80.0, 170.0, 40.0, 60.0);
    let x_min = all.iter().map(|p| (p.0.max(1) as f64).log2()).fold(f64::INFINITY, f64::min);
    let x_max = all.iter().map(|p| (p.0.max(1) as f64).log2()).fold(f64::NEG_INFINITY, f64::max);
    let y_min = all.iter().map(|p| p.1.max(1e-3).log10()).fold(f64::INFINITY, f64::min).floor();
    let y_max = all.iter().map(|p| p.1.max(1e-3).log10()).fold(f64::NEG_INFINITY, f64::max).ceil();
    let x_span = (x_max - x_min).max(1.0);
    let y_span = (y_max - y_min).max(1.0);
    let px = |bytes: u64| left + ((bytes.max(1) as f64).log2() - x_min) / x_span * (w - left - right);
    let py = |ns: f64| top + (y_max - ns.max(1e-3).log10()) / y_span * (h - top - bottom);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{title}</text>"#,
        (left + w - right) / 2.0
    );
    for decade in (y_min as i32)..=(y_max as i32) {
        let y = py(10f64.powi(decade));
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            w - right,
            left - 6.0,
            y + 4.0,
            format_time(10f64.powi(decade)).replace(".00", "").replace(".0", "")
        );
    }
    let mut sizes: Vec<u64> = all.iter().map(|p| p.0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for bytes in &sizes {
        let x = px(*bytes);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            h - bottom,
            h - bottom + 18.0,
            size_label(*bytes)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        (left + w - right) / 2.0,
        h - 14.0,
        x_label
    );
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{:.1}" height="{:.1}" fill="none" stroke="#333"/>"##,
        w - left - right,
        h - top - bottom
    );
    for (i, (variant, series)) in table.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let path: Vec<String> = series.iter().map(|(b, t)| format!("{:.1},{:.1}", px(*b), py(*t))).collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for (b, t) in series {
            let _ = writeln!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"/>"#, px(*b), py(*t));
        }
        let ly = top + 10.0 + 20.0 * i as f64;
        let lx = w - right + 15.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{colour}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{variant}</text>"#,
            lx + 24.0,
            lx + 30.0,
            ly + 4.0
        );
    }
    s.push_str("</svg>\n");
    Some(s)
}

/// The groups present in `points`, in order.
pub fn groups(points: &[Point]) -> Vec<String> {
    by_group(points).into_keys().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headline_quotes_the_paired_ratios_and_marks_what_is_missing() {
        let paired = [
            PairedRatio {
                group: "halo_move_x".into(),
                variant: "onesided".into(),
                reference: "mpi".into(),
                bytes: 20736,
                median: 0.2412,
            },
            PairedRatio {
                group: "pingpong".into(),
                variant: "onesided".into(),
                reference: "mpi".into(),
                bytes: 4 << 20,
                median: 0.571,
            },
        ];
        let table = headline(&paired);
        assert!(table.contains("| halo `move_x` | 20 736 / 97 200 atoms | 0.24x / – |"), "{table}");
        assert!(table.contains("| 8 B / 4 KiB / 4 MiB | – / – / 0.57x |"), "{table}");
        assert_eq!(group_digits(4096), "4 096");
        assert_eq!(group_digits(97200), "97 200");
    }
    use crate::records::read_probes;

    fn point(group: &str, variant: &str, bytes: u64, ns: f64) -> Point {
        Point { group: group.into(), variant: variant.into(), bytes, median_ns: ns, is_bytes: true }
    }

    #[test]
    fn ratios_are_taken_against_mpi_then_raw() {
        let points = vec![
            point("pingpong", "onesided", 8, 86.0),
            point("pingpong", "mpi", 8, 361.0),
            point("pingpong", "onesided", 4096, 622.0),
            point("put", "onesided", 8, 41.0),
            point("put", "raw", 8, 40.0),
        ];
        let paired = vec![PairedRatio {
            group: "pingpong".into(),
            variant: "onesided".into(),
            reference: "mpi".into(),
            bytes: 8,
            median: 0.31,
        }];
        let report = markdown(&points, &paired);
        let has = |line: &str| assert!(report.contains(line), "{line:?} missing from\n{report}");
        has("| size | onesided | mpi | onesided / mpi |");
        // The paired ratio wins over the ratio of medians (0.24x here).
        has("| 8 B | 86.0 ns | 361 ns | 0.31x |");
        has("| 4 KiB | 622 ns | – | – |");
        has("| size | onesided | raw | onesided / raw |");
        // Without a paired measurement, the ratio of medians, marked.
        has("| 8 B | 41.0 ns | 40.0 ns | ~1.02x |");
    }

    #[test]
    fn launch_probes_are_read_and_listed() {
        let path = std::env::temp_dir().join(format!("launch-probes-{}.json", std::process::id()));
        let json = r#"[{"groups": "halo_move_x halo_move_f", "round_trip_ns": 104.6, "copy_ns": 50700.0},
                       {"groups": "pme_redist", "round_trip_ns": 90.0, "copy_ns": 52000.0, "pull_ns": 14100.0,
                        "overwrite_ns": 9300.0},
                       {"groups": "broken"}]"#;
        std::fs::write(&path, json).expect("written");
        let probes = read_probes(&path).expect("read");
        let _ = std::fs::remove_file(&path);
        assert_eq!(probes.len(), 2, "the entry without figures is skipped");
        let table = probes_markdown(&probes);
        assert!(table.contains("| halo_move_x halo_move_f | 105 ns | 50.7 µs | - | - | - |"), "{table}");
        assert!(table.contains("| pme_redist | 90.0 ns | 52.0 µs | 14.1 µs | 9.30 µs | fast |"), "{table}");
        // Slow: the overwrite takes more than 2.5 local copies of as many bytes (13 µs here).
        let slow = LaunchProbe { overwrite_ns: 41_300.0, ..probes[1].clone() };
        assert_eq!(launch_state(&slow), "slow");
        assert_eq!(launch_state(&probes[1]), "fast");
        assert!(read_probes(&path).unwrap_err().contains("cannot read"));
    }

    #[test]
    fn units() {
        assert_eq!(format_time(86.04), "86.0 ns");
        assert_eq!(format_time(1360.0), "1.36 µs");
        assert_eq!(format_time(201_365.0), "201 µs");
        assert_eq!(format_bytes(4 << 20), "4 MiB");
        assert_eq!(format_bytes(65536), "64 KiB");
        assert_eq!(format_bytes(8), "8 B");
    }

    #[test]
    fn svg_has_a_line_per_variant() {
        let points = vec![
            point("sendrecv", "onesided-put", 8, 90.0),
            point("sendrecv", "onesided-put", 4096, 600.0),
            point("sendrecv", "mpi", 8, 400.0),
            point("sendrecv", "mpi", 4096, 7000.0),
        ];
        let plot = svg("sendrecv", &points).expect("the group exists");
        assert_eq!(plot.matches("<polyline").count(), 2);
        assert!(plot.contains(">onesided-put</text>") && plot.contains(">mpi</text>"));
        assert!(plot.starts_with("<svg") && plot.ends_with("</svg>\n"));
        assert!(svg("absent", &points).is_none());
    }
}
