//! What the examples share on their command line: parsing option values with errors that
//! name the option and the value given, and starting as PEs.

use onesided::Runtime;

use crate::launch;

/// A positive whole number for `flag`.
pub fn positive(flag: &str, value: &str) -> Result<u64, String> {
    value
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or(format!("{flag} needs a positive number, got {value:?}"))
}

/// A positive length in nm for `flag`.
pub fn length(flag: &str, value: &str) -> Result<f32, String> {
    value
        .parse::<f32>()
        .ok()
        .filter(|l| l.is_finite() && *l > 0.0)
        .ok_or(format!("{flag} needs a positive length in nm, got {value:?}"))
}

/// Three positive counts such as `2,2,1` for `flag`.
pub fn triple(flag: &str, value: &str) -> Result<[usize; 3], String> {
    let numbers: Option<Vec<usize>> =
        value.split(',').map(|p| p.trim().parse().ok().filter(|&n| n > 0)).collect();
    match numbers.as_deref() {
        Some([a, b, c]) => Ok([*a, *b, *c]),
        _ => Err(format!("{flag} needs three positive counts like 2,2,1, got {value:?}")),
    }
}

/// Writes `line` and a newline to standard error in one write. Every PE's error goes through
/// the launcher to the same terminal: `eprintln!` writes each formatted piece on its own, so
/// two PEs' lines could interleave mid-line (`PE halo_exchange: PE 4: ... 1: ...`).
pub fn say(line: &str) {
    use std::io::Write;
    let whole = format!("{line}\n");
    // Nothing better to do with a failure to write an error message.
    let _ = std::io::stderr().write_all(whole.as_bytes());
}

/// Starts program `name` as a PE: the options parsed by `parse` (an error is printed with its
/// usage and the program exits with status 2, before any PE starts), `pes` PEs launched when
/// the program was not started under the launcher (unbound from cores when it runs `threads`
/// threads), and the runtime initialised (a failure ends the program with status 1).
pub fn start<T>(
    name: &str,
    parse: impl FnOnce() -> Result<T, String>,
    pes: impl FnOnce(&T) -> usize,
    threads: impl FnOnce(&T) -> usize,
) -> (T, Runtime) {
    let options = parse().unwrap_or_else(|e| {
        eprintln!("{name}: {e}");
        std::process::exit(2)
    });
    launch::ensure_launched_with(pes(&options), threads(&options) > 1);
    let rt = Runtime::init().unwrap_or_else(|e| {
        eprintln!("{name}: {e}");
        std::process::exit(1)
    });
    if rt.my_pe() == 0 {
        let (major, minor) = rt.spec_version();
        println!(
            "{name}: {} PEs, {:?} OpenSHMEM {major}.{minor}; between PEs of a node: {}",
            rt.n_pes(),
            rt.implementation(),
            rt.same_node_access()
        );
    }
    (options, rt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_and_errors_name_the_flag() {
        assert_eq!(positive("--steps", "12"), Ok(12));
        assert_eq!(positive("--steps", "0").unwrap_err(), "--steps needs a positive number, got \"0\"");
        assert!(positive("--steps", "-3").is_err());
        assert_eq!(length("--cutoff", "0.9"), Ok(0.9));
        assert!(length("--cutoff", "NaN").is_err());
        assert!(length("--cutoff", "-1").unwrap_err().contains("--cutoff"));
        assert_eq!(triple("--grid", "2, 2,1"), Ok([2, 2, 1]));
        assert!(triple("--grid", "2,2").is_err());
        assert!(triple("--replicate", "2,0,1").unwrap_err().starts_with("--replicate needs"));
    }
}
