//! Every environment variable the crate reads or names, in one place.
//!
//! | variable | read by | meaning |
//! |---|---|---|
//! | [`WAIT_TIMEOUT`] `ONESIDED_WAIT_TIMEOUT` | [`Runtime::init`](crate::Runtime::init) | seconds a wait may take before it returns [`Error::WaitTimeout`]; default [`DEFAULT_WAIT_TIMEOUT`] |
//! | [`DIRECT`] `ONESIDED_DIRECT` | [`Runtime::init`](crate::Runtime::init) | `1` (default): puts, gets and signals to PEs whose memory the library maps into this process (`shmem_ptr`: same node, shared-memory transport) are plain copies and stores; `0`: always call the library |
//! | [`OVERSUBSCRIBED`] `ONESIDED_OVERSUBSCRIBED` | [`Runtime::init`](crate::Runtime::init) | `1`: waits sleep between polls once they have spun a while, so that PEs sharing a core run; `0`: they yield; unset: `1` where the node's PEs outnumber its online cores ([`Runtime::oversubscribed`](crate::Runtime::oversubscribed)) |
//! | [`NODE_HEAP`] `ONESIDED_NODE_HEAP` | [`Runtime::init`](crate::Runtime::init) with Sandia OpenSHMEM | `auto` (default): where the implementation maps no PE of the node (`shmem_ptr` is NULL without XPMEM), share the heaps of the node's PEs so that the direct path works, if the libfabric provider copies with the CPU ([`Runtime::same_node_access`](crate::Runtime::same_node_access) says what came of it); `1`: share whatever the provider, and fail if sharing fails; `0`: never |
//! | [`TRANSPORT`] `ONESIDED_TRANSPORT` | [`Runtime::collective_links`](crate::Runtime::collective_links), at the first [`Path::Auto`](crate::Path::Auto) exchange | `auto` (default): the transports to same-node and other-node PEs from the cache of an earlier calibration, else calibrated now; `calibrate`: calibrated now; a transport for every link (`onesided-put`, `onesided-get`, `mpi`, `mpi-rma`), or `same-node=T,other-node=T`; either followed by `; from BYTES: LINKS` ranges of message sizes |
//! | [`CACHE_DIR`] `ONESIDED_CACHE_DIR` | the same | where calibrations are cached; default `$XDG_CACHE_HOME/onesided`, else `~/.cache/onesided` |
//! | [`OSHMEM_HEAP_SIZE`] `SHMEM_SYMMETRIC_HEAP_SIZE` | Open MPI's OSHMEM | symmetric heap per PE, e.g. `2G`; default 256 MiB |
//! | [`SOS_HEAP_SIZE`] `SHMEM_SYMMETRIC_SIZE` | Sandia OpenSHMEM | symmetric heap per PE, e.g. `2G`; default 512 MiB |
//! | [`SMA_HEAP_SIZE`] `SMA_SYMMETRIC_SIZE` | both, when their own is unset | the heap size under its older name |
//! | [`OMPI_OSC`] `OMPI_MCA_osc` | [`Runtime::init`](crate::Runtime::init) with OSHMEM | must be `ucx`: with Open MPI's default one-sided component every OSHMEM program crashes in `shmem_finalize` |
//!
//! `scripts/pe-run` in the repository sets what the launcher needs (`OMPI_MCA_osc=ucx`, the
//! root permissions, oversubscription).

use std::time::Duration;

use crate::error::{Error, Result};

/// Seconds (a decimal number) a wait may take before it fails with a diagnosis.
pub const WAIT_TIMEOUT: &str = "ONESIDED_WAIT_TIMEOUT";

/// The wait timeout when [`WAIT_TIMEOUT`] is not set.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// `0` turns off transfers through the shared-memory mapping of same-node PEs.
pub const DIRECT: &str = "ONESIDED_DIRECT";

/// `1` or `0` says whether PEs share cores (more PEs than cores on the machine), overriding
/// what [`Runtime::init`](crate::Runtime::init) finds out from the node's PEs and cores.
pub const OVERSUBSCRIBED: &str = "ONESIDED_OVERSUBSCRIBED";

/// `auto`, `1` or `0`: whether the library shares the symmetric heaps of a node's PEs itself
/// where the implementation maps none of them (Sandia OpenSHMEM without XPMEM). The heap of
/// each PE is moved in place onto a memory file that the node's other PEs map, which is safe
/// only where no NIC has registered the heap's pages: `auto` shares when the libfabric
/// provider named by `SHMEM_OFI_PROVIDER` or `FI_PROVIDER` copies with the CPU (`tcp`,
/// `sockets`, `udp`, with `ofi_rxm` or `ofi_rxd`), or none is named and the process holds no
/// RDMA device open.
pub const NODE_HEAP: &str = "ONESIDED_NODE_HEAP";

/// The transports of [`Path::Auto`](crate::Path::Auto) exchanges: `auto`
/// (default: cached or calibrated), `calibrate`, one transport for every link, or
/// `same-node=T,other-node=T`, either followed by ranges of message sizes,
/// `; from BYTES: LINKS` ([`Links`](crate::Links)).
pub const TRANSPORT: &str = "ONESIDED_TRANSPORT";

/// The directory of the calibration cache ([`crate::links`]).
pub const CACHE_DIR: &str = "ONESIDED_CACHE_DIR";

/// Symmetric heap size of Open MPI's OSHMEM.
pub const OSHMEM_HEAP_SIZE: &str = "SHMEM_SYMMETRIC_HEAP_SIZE";

/// Symmetric heap size of Sandia OpenSHMEM.
pub const SOS_HEAP_SIZE: &str = "SHMEM_SYMMETRIC_SIZE";

/// The symmetric heap size under its older name (SGI's SHMEM), which both implementations
/// read when their own variable is unset.
pub const SMA_HEAP_SIZE: &str = "SMA_SYMMETRIC_SIZE";

/// Open MPI's one-sided component, which must be `ucx` for OSHMEM programs.
pub const OMPI_OSC: &str = "OMPI_MCA_osc";

/// Reads [`WAIT_TIMEOUT`].
pub(crate) fn wait_timeout() -> Result<Duration> {
    let Ok(value) = std::env::var(WAIT_TIMEOUT) else {
        return Ok(DEFAULT_WAIT_TIMEOUT);
    };
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| Error::Environment {
            variable: WAIT_TIMEOUT,
            value,
            problem: "expected a positive number of seconds, such as 60 or 0.5".to_string(),
        })
}

/// Reads [`DIRECT`].
pub(crate) fn direct() -> Result<bool> {
    match std::env::var(DIRECT).as_deref() {
        Err(_) | Ok("1") | Ok("on") | Ok("yes") | Ok("true") => Ok(true),
        Ok("0") | Ok("off") | Ok("no") | Ok("false") => Ok(false),
        Ok(other) => Err(Error::Environment {
            variable: DIRECT,
            value: other.to_string(),
            problem: "expected 1 (use the shared-memory mapping of same-node PEs) or 0 (always \
                      call the library)"
                .to_string(),
        }),
    }
}

/// What [`NODE_HEAP`] asks for, read by [`node_heap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeHeapSetting {
    /// Map where the transport is a software one (the libfabric provider copies with the CPU).
    Auto,
    /// Map whatever the transport says; a failure is an error.
    On,
    /// Never map.
    Off,
}

/// Reads [`NODE_HEAP`].
pub(crate) fn node_heap() -> Result<NodeHeapSetting> {
    match std::env::var(NODE_HEAP).as_deref() {
        Err(_) | Ok("auto") => Ok(NodeHeapSetting::Auto),
        Ok("1") | Ok("on") | Ok("yes") | Ok("true") => Ok(NodeHeapSetting::On),
        Ok("0") | Ok("off") | Ok("no") | Ok("false") => Ok(NodeHeapSetting::Off),
        Ok(other) => Err(Error::Environment {
            variable: NODE_HEAP,
            value: other.to_string(),
            problem: "expected auto (share the node's heaps where the transport allows it), 1 \
                      (share them, and fail if that fails) or 0 (never)"
                .to_string(),
        }),
    }
}

/// Reads [`OVERSUBSCRIBED`]: `None` when unset (the runtime decides).
pub(crate) fn oversubscribed() -> Result<Option<bool>> {
    match std::env::var(OVERSUBSCRIBED).as_deref() {
        Err(_) => Ok(None),
        Ok("1") | Ok("on") | Ok("yes") | Ok("true") => Ok(Some(true)),
        Ok("0") | Ok("off") | Ok("no") | Ok("false") => Ok(Some(false)),
        Ok(other) => Err(Error::Environment {
            variable: OVERSUBSCRIBED,
            value: other.to_string(),
            problem: "expected 1 (PEs share cores: waits sleep between polls) or 0 (each PE has \
                      a core: waits spin and yield), or leave it unset to decide from the node"
                .to_string(),
        }),
    }
}

/// The heap-size variable in effect for the implementation in use and its current value for
/// messages: the implementation's own, else the older [`SMA_HEAP_SIZE`] both still read, else
/// the implementation's own with its default.
pub(crate) fn heap_size_setting() -> (&'static str, String) {
    let variable = if cfg!(shmem_sos) { SOS_HEAP_SIZE } else { OSHMEM_HEAP_SIZE };
    let default = heap_size_default();
    match (std::env::var(variable), std::env::var(SMA_HEAP_SIZE)) {
        (Ok(v), _) => (variable, v),
        (Err(_), Ok(v)) => (SMA_HEAP_SIZE, v),
        _ => (variable, format!("unset, default {default}")),
    }
}

/// The symmetric heap's size when no variable sets it: Sandia OpenSHMEM's 512 MiB, Open
/// MPI's 256 MiB.
pub(crate) fn heap_size_default() -> &'static str {
    if cfg!(shmem_sos) { "512M" } else { "256M" }
}

/// Checks that Open MPI will not crash in `shmem_finalize`.
pub(crate) fn check_launch_environment() -> Result<()> {
    if cfg!(shmem_oshmem) {
        let value = std::env::var(OMPI_OSC).unwrap_or_default();
        if value != "ucx" {
            return Err(Error::Environment {
                variable: OMPI_OSC,
                value,
                problem: "Open MPI's OSHMEM crashes in shmem_finalize unless the one-sided \
                          component is ucx; launch with scripts/pe-run, or export \
                          OMPI_MCA_osc=ucx (oshrun --mca osc ucx)"
                    .to_string(),
            });
        }
    }
    Ok(())
}
