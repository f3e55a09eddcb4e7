//! Writes the GROMACS comparison from the lines `scripts/gromacs-yardstick --tsv` appended:
//! the Markdown tables on standard output, the plot to a file.
//!
//! ```text
//! cargo run --release --bin yardstick-report -- docs/bench/gromacs.tsv docs/bench/gromacs.svg
//! ```

use onesided_suite::yardstick;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [tsv, plot] = args.as_slice() else {
        eprintln!("usage: yardstick-report RUNS.tsv PLOT.svg");
        std::process::exit(2)
    };
    let result = std::fs::read_to_string(tsv)
        .map_err(|e| format!("cannot read {tsv}: {e}"))
        .and_then(|text| yardstick::parse(&text).map_err(|e| format!("{tsv}: {e}")))
        .and_then(|runs| {
            if runs.is_empty() {
                return Err(format!("{tsv} holds no runs; run scripts/gromacs-yardstick --tsv {tsv} first"));
            }
            let configurations = yardstick::medians(&runs);
            std::fs::write(plot, yardstick::svg(&configurations))
                .map_err(|e| format!("cannot write {plot}: {e}"))?;
            print!("{}", yardstick::markdown(&configurations));
            Ok(())
        });
    if let Err(e) = result {
        eprintln!("yardstick-report: {e}");
        std::process::exit(1);
    }
}
