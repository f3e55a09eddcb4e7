//! The start-up failures users hit, found and named on every PE, and the report of what each
//! node got.
//!
//! [`Runtime::init`](crate::Runtime::init) runs these checks, each ending the start on every
//! PE with an error that names the fix rather than leaving a hang, a crash or a silently wrong
//! job:
//!
//! 1. **Before the libraries start**: a launcher that started several processes (it says so
//!    in `SLURM_STEP_NUM_TASKS`, `OMPI_COMM_WORLD_SIZE` or `PMI_SIZE`) but gave this one no
//!    process-management interface to join them by (no `PMIX_RANK`, `PMI_RANK`, `PMI_FD`,
//!    `OMPI_COMM_WORLD_RANK`): each process would start as a job of one PE (`srun` without
//!    `--mpi=pmix`), [`Error::Launch`](crate::Error::Launch).
//! 2. **Once MPI is up and before OpenSHMEM starts**, in one reduction over MPI: address-space
//!    randomisation where Sandia OpenSHMEM reaches the PEs of a node through CMA (its loaded
//!    library imports `process_vm_writev`), which would abort every PE at its first barrier
//!    ([`Error::AddressRandomisation`](crate::Error::AddressRandomisation)).
//! 3. **Once OpenSHMEM has started**: its PE count against the launcher's count and against
//!    MPI's world (a library that found no process manager starts alone), agreed in one
//!    reduction before any PE acts on it, [`Error::Launch`](crate::Error::Launch).
//! 4. **Before the first symmetric allocation**, in one reduction over MPI of two words per
//!    setting: PEs that disagree on the OpenSHMEM or MPI library, the heap size, the library's
//!    settings or the transport ([`Error::SettingsDiffer`](crate::Error::SettingsDiffer),
//!    naming the lowest PE that differs from PE 0).
//!
//! Each refuses only what it can be sure of: a Slurm step's count counts only for the process
//! the step started (`SLURM_TASK_PID`), and the first check stands aside for an MPI that might
//! join through Slurm's own PMI library (an Open MPI with its `s1` or `s2` component, or
//! another MPI), leaving the case to the third.
//!
//! The symmetric heap is checked at every allocation: one that cannot fit what is already in
//! use on any PE plus what is asked fails on every PE before the implementation is asked
//! ([`Error::HeapTooSmall`](crate::Error::HeapTooSmall), with a size that fits;
//! [`HeapStatus`]); the implementation's own failure stays
//! [`Error::HeapExhausted`](crate::Error::HeapExhausted).
//!
//! [`StartReport::collective_gather`] gathers the rest, the library, heap, transport and mapping
//! each node got, for the `onesided-doctor` program (run it under the launcher) and the one
//! line the examples print first.

use std::fmt;

use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::datatype::PartitionMut;
use mpi::topology::{Color, Communicator};

use crate::error::Result;
use crate::layout::SameNodeAccess;
use crate::raw::HeapStatus;
use crate::runtime::Runtime;
pub use crate::startup::{LAUNCH_SIZE_VARIABLES, PROCESS_MANAGER_VARIABLES};
use crate::startup::{address_randomised, implementation_name, library_uses_cma, mpi_library_name};

/// What one node got, as its lowest PE saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport {
    /// The node's host name.
    pub host: String,
    /// Its PEs, in increasing order.
    pub pes: Vec<usize>,
    /// The rest, one `key: value` line each: the transport, how its PEs reach each other's
    /// memory, the cores, address-space randomisation.
    pub lines: Vec<String>,
}

/// The doctor's report: one line for the whole job, and (on PE 0) what each node got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartReport {
    /// The job in one line: PEs, nodes, libraries, heap, transport, same-node access.
    pub summary: String,
    /// Every node, in the order of their lowest PEs, on PE 0; empty on the other PEs.
    pub nodes: Vec<NodeReport>,
}

impl fmt::Display for StartReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.summary)?;
        for node in &self.nodes {
            writeln!(f, "node {} (PEs {}):", node.host, pe_ranges(&node.pes))?;
            for line in &node.lines {
                writeln!(f, "  {line}")?;
            }
        }
        Ok(())
    }
}

/// `0-3,6,8-9`.
fn pe_ranges(pes: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < pes.len() {
        let mut j = i;
        while j + 1 < pes.len() && pes[j + 1] == pes[j] + 1 {
            j += 1;
        }
        parts.push(if j > i { format!("{}-{}", pes[i], pes[j]) } else { pes[i].to_string() });
        i = j + 1;
    }
    parts.join(",")
}

/// The transport this PE was given, from the settings the implementation reads.
fn transport() -> String {
    let var = |name: &str| std::env::var(name).ok();
    if cfg!(shmem_sos) {
        let provider = var("SHMEM_OFI_PROVIDER")
            .map(|p| format!("libfabric SHMEM_OFI_PROVIDER={p}"))
            .or_else(|| var("FI_PROVIDER").map(|p| format!("libfabric FI_PROVIDER={p}")))
            .unwrap_or_else(|| "libfabric's first provider (SHMEM_OFI_PROVIDER unset)".to_string());
        let cma = if library_uses_cma() { "CMA" } else { "the provider (no CMA)" };
        format!("{provider}, within a node {cma}")
    } else {
        let spml = var("OMPI_MCA_spml").unwrap_or_else(|| "ucx".to_string());
        let tls = var("UCX_TLS").map_or_else(|| "UCX_TLS unset".to_string(), |t| format!("UCX_TLS={t}"));
        let devices = var("UCX_NET_DEVICES").map(|d| format!(", UCX_NET_DEVICES={d}")).unwrap_or_default();
        format!("spml {spml}, {tls}{devices}")
    }
}

impl StartReport {
    /// What the job got: one line for the whole job, and on PE 0 one entry per node (host,
    /// PEs, transport, same-node access, cores, address-space randomisation), gathered from
    /// the lowest PE of each node. The examples print the line first; the `onesided-doctor`
    /// program prints it all.
    ///
    /// # Collective
    /// Every PE calls it. PE 0 receives one short entry per node; the other PEs send at most
    /// one and keep nothing.
    pub fn collective_gather(rt: &Runtime) -> Result<StartReport> {
        let world = rt.world();
        let node_pes = rt.node_pes();
        let leader = node_pes.first() == Some(&rt.my_pe());
        let mut nodes = 0u64;
        world.all_reduce_into(&u64::from(leader), &mut nodes, SystemOperation::sum());
        let mut widest = 0u64;
        world.all_reduce_into(&(node_pes.len() as u64), &mut widest, SystemOperation::max());
        let heap = HeapStatus::now();
        let per_node = if nodes as usize * widest as usize == rt.n_pes() {
            format!("{widest} per node")
        } else {
            format!("up to {widest} per node")
        };
        let setting = match std::env::var(heap.variable) {
            Ok(value) => format!("{}={value}", heap.variable),
            Err(_) => format!("{} unset", heap.variable),
        };
        let transport = transport();
        let summary = format!(
            "{} PEs on {nodes} node{} ({per_node}); {} with {}; heap {} ({setting}); transport {}; \
             between PEs of a node: {}",
            rt.n_pes(),
            if nodes == 1 { "" } else { "s" },
            implementation_name(),
            mpi_library_name(),
            heap.capacity.map_or("unreadable".to_string(), |c| format!("{} MiB", c >> 20)),
            transport,
            rt.same_node_access(),
        );
        let leaders = world.split_by_color(if leader { Color::with_value(0) } else { Color::undefined() });
        let mut reports = Vec::new();
        if let Some(leaders) = leaders {
            let mine = node_entry(rt, &transport).into_bytes();
            let root = leaders.process_at_rank(0);
            if leaders.rank() == 0 {
                let mut counts = vec![0i32; leaders.size() as usize];
                root.gather_into_root(&(mine.len() as i32), &mut counts[..]);
                let displs: Vec<i32> =
                    counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c))).collect();
                let mut bytes = vec![0u8; counts.iter().map(|&c| c as usize).sum()];
                {
                    let mut partition = PartitionMut::new(&mut bytes[..], &counts[..], &displs[..]);
                    root.gather_varcount_into_root(&mine[..], &mut partition);
                }
                for (&start, &count) in displs.iter().zip(&counts) {
                    let text = String::from_utf8_lossy(&bytes[start as usize..(start + count) as usize])
                        .into_owned();
                    reports.push(parse_node_entry(&text));
                }
            } else {
                root.gather_into(&(mine.len() as i32));
                root.gather_varcount_into(&mine[..]);
            }
        }
        Ok(StartReport { summary, nodes: reports })
    }
}

/// This node's entry, as lines: host, PEs, then `key: value` lines (`transport` as
/// [`transport`] gave it).
fn node_entry(rt: &Runtime, transport: &str) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let randomisation = if address_randomised() { "on" } else { "off" };
    let pes: Vec<String> = rt.node_pes().iter().map(|pe| pe.to_string()).collect();
    let access: &SameNodeAccess = rt.same_node_access();
    [
        crate::launch::host_name(),
        pes.join(" "),
        format!("transport: {transport}"),
        format!("between its PEs: {access}"),
        format!(
            "cores this PE may run on: {cores}; PEs share cores: {}",
            if rt.oversubscribed() { "yes (waits sleep between polls)" } else { "no" }
        ),
        format!("address-space randomisation: {randomisation}"),
        format!("wait timeout: {:?}", rt.wait_timeout()),
    ]
    .join("\n")
}

/// The inverse of [`node_entry`].
fn parse_node_entry(text: &str) -> NodeReport {
    let mut lines = text.lines();
    let host = lines.next().unwrap_or("").to_string();
    let pes = lines.next().unwrap_or("").split_whitespace().filter_map(|p| p.parse().ok()).collect();
    NodeReport { host, pes, lines: lines.map(str::to_string).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pe_lists_are_written_as_ranges() {
        assert_eq!(pe_ranges(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(pe_ranges(&[5]), "5");
        assert_eq!(pe_ranges(&[]), "");
    }

    #[test]
    fn node_entries_survive_the_gather() {
        let text = "node1\n4 5 6\ntransport: x\nbetween its PEs: y";
        let node = parse_node_entry(text);
        assert_eq!(node.host, "node1");
        assert_eq!(node.pes, vec![4, 5, 6]);
        assert_eq!(node.lines, vec!["transport: x", "between its PEs: y"]);
    }
}
