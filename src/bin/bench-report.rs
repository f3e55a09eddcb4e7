//! Prints the benchmark report as Markdown and writes one SVG plot per group.
//!
//! ```text
//! cargo run --release --bin bench-report -- [--criterion DIR] [--plots DIR] [GROUP...]
//! ```
//! `--criterion` defaults to `target/criterion`; `--plots` (default `docs/bench`) receives
//! `<group>.svg`. Groups given by name limit the report to them. `--headline` prints only the
//! README's table of headline ratios; `--medians` only each benchmark's median, a line
//! `group/variant/size<TAB>nanoseconds` each, for scripts that build their own tables.

use std::path::PathBuf;

use onesided_suite::{records, report};

fn main() {
    if let Err(e) = run() {
        eprintln!("bench-report: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut criterion = PathBuf::from("target/criterion");
    let mut plots = PathBuf::from("docs/bench");
    let mut only = Vec::new();
    let mut headline = false;
    let mut medians = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--criterion" => criterion = args.next().ok_or("--criterion needs a directory")?.into(),
            "--plots" => plots = args.next().ok_or("--plots needs a directory")?.into(),
            "--headline" => headline = true,
            "--medians" => medians = true,
            "-h" | "--help" => {
                println!(
                    "usage: bench-report [--criterion DIR] [--plots DIR] [--headline] [--medians] [GROUP...]"
                );
                return Ok(());
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            group => only.push(group.to_string()),
        }
    }
    if headline {
        let paired = records::read_paired(&criterion.join("paired-ratios.json"))?;
        print!("{}", report::headline(&paired));
        return Ok(());
    }
    let mut points = report::read_criterion(&criterion)?;
    if !only.is_empty() {
        points.retain(|p| only.contains(&p.group));
    }
    if points.is_empty() {
        return Err(format!("no results under {}; run `cargo bench` first", criterion.display()));
    }
    if medians {
        for p in &points {
            println!("{}/{}/{}\t{}", p.group, p.variant, p.bytes, p.median_ns);
        }
        return Ok(());
    }
    let paired = records::read_paired(&criterion.join("paired-ratios.json")).unwrap_or_default();
    print!("{}", report::markdown(&points, &paired));
    let probes = records::read_probes(&criterion.join("launch-probes.json")).unwrap_or_default();
    if !probes.is_empty() {
        print!("{}", report::probes_markdown(&probes));
    }
    println!(
        "Times are criterion's medians. Ratios are medians of {} rounds in which the variant and \
         its reference ran alternately (`~`: ratio of the two medians, where no paired \
         measurement exists).",
        15
    );
    std::fs::create_dir_all(&plots).map_err(|e| format!("cannot create {}: {e}", plots.display()))?;
    for group in report::groups(&points) {
        let svg = report::svg(&group, &points).expect("the group has points");
        let path = plots.join(format!("{group}.svg"));
        std::fs::write(&path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
