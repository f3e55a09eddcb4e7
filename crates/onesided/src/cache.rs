//! The cache of a calibration's choice: a file per shape of job (implementation, PE count,
//! nodes, their hosts, how the PEs of a node reach each other's memory), which the next run
//! of the same shape reads instead of measuring again. The exchanges' links and the
//! all-to-all's algorithm are cached alike.

use std::path::PathBuf;

use crate::agree::Fnv1a;
use crate::env;
use crate::error::Result;
use crate::runtime::Runtime;

impl Runtime {
    /// The cache file for this job's calibration of `what` (PE 0's path; `None` where no
    /// cache directory can be found): its name holds `what`, the implementation, the PE
    /// count, the nodes, a hash of their host names and how the PEs of a node reach each
    /// other's memory ([`SameNodeAccess`](crate::SameNodeAccess)).
    ///
    /// # Collective
    /// One reduction over the world.
    pub(crate) fn collective_cache_file(&self, what: &str) -> Result<Option<PathBuf>> {
        use mpi::collective::SystemOperation;
        use mpi::traits::CommunicatorCollectives;
        // One term per node, from its first PE: the host's hash and a count.
        let leader = self.node_pes().first() == Some(&self.my_pe());
        let host = crate::launch::host_name();
        let mine = if leader { [Fnv1a::new().bytes(host.as_bytes()).finish() >> 12, 1] } else { [0, 0] };
        let mut sum = [0u64; 2];
        crate::watchdog::watch("MPI_Allreduce (the host set)", None, || {
            self.world().all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum())
        });
        let dir = std::env::var_os(env::CACHE_DIR)
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("onesided")))
            .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/onesided")));
        let access = match self.same_node_access() {
            crate::SameNodeAccess::ImplementationMapping => "mapped",
            crate::SameNodeAccess::SharedHeaps => "shared",
            crate::SameNodeAccess::LibraryCalls(_) => "calls",
        };
        Ok(dir.map(|d| {
            d.join(format!(
                "{what}-{:?}-{}pes-{}nodes-{:013x}-{access}.txt",
                self.implementation(),
                self.n_pes(),
                sum[1],
                sum[0] & ((1 << 52) - 1)
            ))
        }))
    }
}

/// The value of the line `KEY VALUE` of a cache file.
pub(crate) fn read_choice(file: &std::path::Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| Some(l.strip_prefix(key)?.strip_prefix(' ')?.trim().to_string()))
}

/// Writes `KEY VALUE` and the `notes` (as comments) to a cache file; whether it could.
pub(crate) fn write_choice(file: &std::path::Path, key: &str, value: &str, notes: &[String]) -> bool {
    let mut text = format!("{key} {value}\n");
    for note in notes {
        text.push_str(&format!("# {note}\n"));
    }
    let parent_made = file.parent().is_none_or(|d| std::fs::create_dir_all(d).is_ok());
    // Written beside and renamed, so that a concurrent reader never sees half a file.
    let temporary = file.with_extension(format!("tmp{}", std::process::id()));
    parent_made && std::fs::write(&temporary, text).is_ok() && std::fs::rename(&temporary, file).is_ok()
}
