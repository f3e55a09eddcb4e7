//! What the examples share on their command line: parsing option values with errors that
//! name the option and the value given, and starting as PEs.

use onesided::{Collectives, Runtime};

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

/// Writes a line to standard error in one write: every PE's error goes through the launcher
/// to the same terminal, where `eprintln!`'s pieces could interleave mid-line
/// (`PE halo_exchange: PE 4: ... 1: ...`).
pub use onesided::launch::say;

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
        say(&format!("{name}: {e}"));
        std::process::exit(1)
    });
    // The doctor's one line (`onesided-doctor` prints the whole report).
    match onesided::StartReport::collective_gather(&rt) {
        Ok(report) if rt.my_pe() == 0 => println!("{name}: {}", report.summary),
        Ok(_) => {}
        Err(e) => say(&format!("{name}: PE {}: no start-up report: {e}", rt.my_pe())),
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

/// Gives the allocator's free pages back to the system (glibc's `malloc_trim`): after a
/// phase that frees much (a repartition), so that resident memory follows the memory in use.
pub fn return_free_memory() {
    // SAFETY: malloc_trim has no preconditions; it only releases memory no allocation holds.
    unsafe { libc::malloc_trim(0) };
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

/// The bytes this process's allocator has handed out and not had back, in KiB (glibc's
/// `mallinfo2`: in-use chunks of every arena plus mapped blocks): what the program holds,
/// apart from what the allocator keeps free for later.
pub fn heap_in_use_kib() -> u64 {
    // SAFETY: mallinfo2 has no preconditions; it reads the allocator's counters under its
    // locks.
    let info = unsafe { libc::mallinfo2() };
    (info.uordblks as u64 + info.hblkhd as u64) / 1024
}

/// Resident memory over a long run: taken at a mark step (step 1 000, or a tenth of a
/// shorter run, after which buffers and plans have reached their sizes), every mark steps
/// after it, and at the last step (before the run's closing checks, which gather the whole
/// system); beside each, the heap the program holds ([`heap_in_use_kib`]),
/// which tells a leak (both grow) from the allocator keeping freed memory (only the resident
/// figure moves).
#[derive(Clone, Debug, Default)]
pub struct MemoryTrack {
    /// The step the first figure is taken at.
    pub mark: u64,
    /// The last step, the one the last figure is taken at.
    pub last: u64,
    /// (resident KiB, heap in use KiB) at the mark, every mark steps after it, and at the
    /// last step.
    samples: Vec<[u64; 2]>,
}

impl MemoryTrack {
    /// A track for a run whose steps are numbered up to `last`.
    pub fn new(last: u64) -> MemoryTrack {
        let mark = if last >= 2000 { 1000 } else { (last / 10).max(1) };
        // Room for every sample up front, so that taking one allocates nothing.
        MemoryTrack { mark, last, samples: Vec::with_capacity((last / mark) as usize + 2) }
    }

    /// Called at every step, after its work and before any closing check: takes a sample at
    /// the mark, every mark steps after it, and at the last step.
    pub fn step(&mut self, step: u64) {
        if (step >= self.mark && step.is_multiple_of(self.mark)) || step == self.last {
            self.samples.push([resident_kib(), heap_in_use_kib()]);
        }
    }

    /// Prints, on PE 0, `memory path=<label> mark_step=<k> rss_kib=<r> end_rss_kib=<e>
    /// growth_pct=<g> heap_kib=<h> end_heap_kib=<he> heap_growth_pct=<hg> rss_series_kib=<..>
    /// heap_series_kib=<..>`: the largest PE's resident memory at the mark and at the last step, the
    /// largest growth of one PE between them, the same for the heap in use, and both at every
    /// sample (the largest PE's, comma-separated).
    ///
    /// # Collective
    /// Every PE calls it, after the same number of steps.
    ///
    /// # Errors
    /// As [`Runtime::max_u64`].
    pub fn report(&self, rt: &Runtime, label: &str) -> onesided::Result<()> {
        let (Some(first), Some(last)) = (self.samples.first(), self.samples.last()) else {
            return Ok(());
        };
        // Growth in parts per million, shrinking counted as none.
        let growth = |k: usize| last[k].saturating_sub(first[k]) * 1_000_000 / first[k].max(1);
        let mut figures = vec![growth(0), growth(1)];
        figures.extend(self.samples.iter().flatten());
        rt.max_u64(&mut figures)?;
        if rt.my_pe() == 0 {
            let n = self.samples.len();
            let series =
                |k: usize| (0..n).map(|i| figures[2 + 2 * i + k].to_string()).collect::<Vec<_>>().join(",");
            println!(
                "memory path={label} mark_step={} rss_kib={} end_rss_kib={} growth_pct={:.3} \
                 heap_kib={} end_heap_kib={} heap_growth_pct={:.3} rss_series_kib={} heap_series_kib={}",
                self.mark,
                figures[2],
                figures[2 * n],
                figures[0] as f64 / 1e4,
                figures[3],
                figures[2 * n + 1],
                figures[1] as f64 / 1e4,
                series(0),
                series(1)
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
