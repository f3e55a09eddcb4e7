//! The records the benchmarks keep beside criterion's results for the report: the paired
//! ratios ([`PairedRatio`]) and the launch probes ([`LaunchProbe`]), the files they are kept
//! in, how they are read and written, and the state a launch's probe puts it in.

use std::path::Path;

/// A variant's time relative to its group's reference, measured interleaved.
#[derive(Clone, Debug, PartialEq)]
pub struct PairedRatio {
    /// The group.
    pub group: String,
    /// The variant.
    pub variant: String,
    /// The reference variant (`mpi`, else `raw`).
    pub reference: String,
    /// Message size.
    pub bytes: usize,
    /// The median over rounds of (variant time / reference time).
    pub median: f64,
}

/// What a launch measured of the machine before its benchmarks, on PE 0. The MD figures fall
/// into one of two states per launch (docs/bench/RESULTS.md); each launch records these
/// machine facts beside its results, so that a report can be read against them. The
/// overwrite of memory the other PE has just read tells the states apart in the launches
/// measured so far ([`launch_state`]); the signal round trip, a local copy and the pull
/// of data the other PE has just written did not, over earlier launches.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchProbe {
    /// The benchmark groups the launch ran, space-separated.
    pub groups: String,
    /// Median time of a round trip of a signal between PE 0 and PE 1 (a cache line there
    /// and back on one node), in nanoseconds.
    pub round_trip_ns: f64,
    /// Median time of a local copy of 1 MiB on PE 0, in nanoseconds.
    pub copy_ns: f64,
    /// Median time for PE 0 to get 256 KiB that PE 1 has just written (freshly written lines
    /// crossing between the cores, as one-sided `move_f` pulls the forces its neighbour just
    /// staged), in nanoseconds.
    pub pull_ns: f64,
    /// Median time for PE 0 to overwrite 256 KiB of its own memory that PE 1 has just read
    /// (lines held in the other core's cache, which each write must invalidate there, as
    /// `move_f` writes its staging buffer after the neighbour read the last step's forces
    /// from it), in nanoseconds.
    pub overwrite_ns: f64,
}

/// Where paired ratios are kept, beside criterion's results (`CRITERION_HOME`, else
/// `target/criterion`).
pub fn paired_path() -> std::path::PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return std::path::PathBuf::from(home).join("paired-ratios.json");
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| "target".into(), std::path::PathBuf::from);
    target.join("criterion").join("paired-ratios.json")
}

/// Where launch probes are kept, beside the paired ratios.
pub fn probe_path() -> std::path::PathBuf {
    paired_path().with_file_name("launch-probes.json")
}

/// Reads a JSON list of `what` from `path`, keeping the entries `entry` can read.
fn read_list<T>(
    path: &Path,
    what: &str,
    entry: impl Fn(&serde_json::Value) -> Option<T>,
) -> Result<Vec<T>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let values: Vec<serde_json::Value> = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a list of {what}: {e}", path.display()))?;
    Ok(values.iter().filter_map(entry).collect())
}

/// Reads the paired ratios the benchmarks recorded (see [`paired_path`]).
pub fn read_paired(path: &Path) -> Result<Vec<PairedRatio>, String> {
    read_list(path, "ratios", |v| {
        Some(PairedRatio {
            group: v.get("group")?.as_str()?.to_string(),
            variant: v.get("variant")?.as_str()?.to_string(),
            reference: v.get("reference")?.as_str()?.to_string(),
            bytes: v.get("bytes")?.as_u64()? as usize,
            median: v.get("median")?.as_f64()?,
        })
    })
}

/// Reads the launch probes the benchmarks recorded (see [`probe_path`]).
pub fn read_probes(path: &Path) -> Result<Vec<LaunchProbe>, String> {
    read_list(path, "launch probes", |v| {
        Some(LaunchProbe {
            groups: v.get("groups")?.as_str()?.to_string(),
            round_trip_ns: v.get("round_trip_ns")?.as_f64()?,
            copy_ns: v.get("copy_ns")?.as_f64()?,
            // Launches recorded before the pull was probed have none.
            pull_ns: v.get("pull_ns").and_then(|p| p.as_f64()).unwrap_or(f64::NAN),
            overwrite_ns: v.get("overwrite_ns").and_then(|p| p.as_f64()).unwrap_or(f64::NAN),
        })
    })
}

/// Merges `paired` into the paired-ratio file (entries of other benchmarks are kept).
pub(crate) fn record_paired(paired: &[PairedRatio]) {
    let path = paired_path();
    let mut all = read_paired(&path).unwrap_or_default();
    for p in paired {
        all.retain(|q| !(q.group == p.group && q.variant == p.variant && q.bytes == p.bytes));
        all.push(p.clone());
    }
    let json: Vec<serde_json::Value> = all
        .iter()
        .map(|p| {
            serde_json::json!({
                "group": p.group, "variant": p.variant, "reference": p.reference,
                "bytes": p.bytes, "median": p.median,
            })
        })
        .collect();
    write_json(&path, &json);
}

/// Records `probe` in the probe file, replacing an earlier launch of the same groups.
pub(crate) fn record_probe(probe: &LaunchProbe) {
    let path = probe_path();
    let mut all = read_probes(&path).unwrap_or_default();
    all.retain(|p| p.groups != probe.groups);
    all.push(probe.clone());
    let json: Vec<serde_json::Value> = all
        .iter()
        .map(|p| {
            serde_json::json!({
                "groups": p.groups, "round_trip_ns": p.round_trip_ns, "copy_ns": p.copy_ns,
                "pull_ns": p.pull_ns, "overwrite_ns": p.overwrite_ns,
            })
        })
        .collect();
    write_json(&path, &json);
}

/// Writes `json` to `path`, creating its directory; a failure is reported, not fatal.
fn write_json(path: &std::path::Path, json: &[serde_json::Value]) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(path, serde_json::to_string_pretty(json).unwrap_or_default()) {
        eprintln!("cannot write {}: {e}", path.display());
    }
}

/// How many times a local copy of as many bytes an overwrite of bytes the other PE has just
/// read may take before the launch counts as in the slow state. In the launches measured so
/// far it took 1.0-2.2x in the fast state and 3.1-5.2x in the slow one (docs/bench/RESULTS.md).
pub const SLOW_OVERWRITE: f64 = 2.5;

/// The state a launch fell into, from its probes: `slow` when overwriting 256 KiB the other
/// PE has just read took more than [`SLOW_OVERWRITE`] times a local copy of as many bytes
/// (a quarter of the 1 MiB copy), `fast` otherwise; `-` for launches that did not measure it.
pub fn launch_state(p: &LaunchProbe) -> &'static str {
    if p.overwrite_ns.is_nan() || p.copy_ns.is_nan() {
        "-"
    } else if p.overwrite_ns > SLOW_OVERWRITE * p.copy_ns / 4.0 {
        "slow"
    } else {
        "fast"
    }
}
