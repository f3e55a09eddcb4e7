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

/// This process's resident memory in KiB (`/proc/self/statm`), or 0 where it cannot be read.
pub fn resident_kib() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|r| r.parse::<u64>().ok()))
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    pages * page / 1024
}

/// Resident memory over a long run: taken at a mark step (step 1 000, or a tenth of a
/// shorter run, after which buffers and plans have reached their sizes) and at the end.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryTrack {
    /// The step the first figure is taken at.
    pub mark: u64,
    at_mark: u64,
    at_end: u64,
}

impl MemoryTrack {
    /// A track for a run of `steps` steps.
    pub fn new(steps: u64) -> MemoryTrack {
        MemoryTrack { mark: if steps >= 2000 { 1000 } else { steps / 10 }, ..MemoryTrack::default() }
    }

    /// Called at every step: takes the figure at the mark.
    pub fn step(&mut self, step: u64) {
        if step == self.mark {
            self.at_mark = resident_kib();
        }
    }

    /// Takes the figure at the end.
    pub fn end(&mut self) {
        self.at_end = resident_kib();
    }

    /// Prints, on PE 0, `memory path=<label> mark_step=<k> rss_kib=<r> end_rss_kib=<e>
    /// growth_pct=<g>`: the largest PE's resident memory at the mark and at the end, and the
    /// largest growth of one PE between them.
    ///
    /// # Collective
    /// Every PE calls it.
    ///
    /// # Errors
    /// As [`Runtime::max_u64`].
    pub fn report(&self, rt: &Runtime, label: &str) -> onesided::Result<()> {
        // Growth in parts per million, shrinking counted as none.
        let growth = self.at_end.saturating_sub(self.at_mark) * 1_000_000 / self.at_mark.max(1);
        let mut figures = [self.at_mark, self.at_end, growth];
        rt.max_u64(&mut figures)?;
        if rt.my_pe() == 0 {
            println!(
                "memory path={label} mark_step={} rss_kib={} end_rss_kib={} growth_pct={:.3}",
                self.mark,
                figures[0],
                figures[1],
                figures[2] as f64 / 1e4
            );
        }
        Ok(())
    }
}

/// An empty vector with room for `capacity` elements whose memory is already resident
/// (written once with `fill`): per-step records of a long run kept in it do not grow the
/// resident memory the run reports ([`MemoryTrack`]).
pub fn resident_vec<T: Copy>(capacity: usize, fill: T) -> Vec<T> {
    let mut records = vec![fill; capacity];
    records.clear();
    records
}
