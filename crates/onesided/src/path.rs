//! The choices an engine makes of how its exchanges travel: one-sided, MPI, or what the links
//! measured fastest ([`Path`]), the same three names in every crate; and beneath them the
//! transport a link takes ([`Transport`]), which [`Links`](crate::Links) name per class of
//! link and per size, for benchmarks and for pinning a path by hand.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// How an exchange, an all-to-all, a halo exchange or a PME redistribution communicates:
/// chosen once, when it is built, and the same bits whichever it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Path {
    /// OpenSHMEM: each operation's one-sided protocol (the offset swap's puts for a
    /// send-receive, the ordered all-to-all's puts with signals, the halo's coordinates put
    /// and its forces pulled).
    #[default]
    OneSided,
    /// MPI two-sided, the reference.
    Mpi,
    /// Per partner, the transport its class of link was measured fastest on (this node or
    /// another), calibrated at the first `Auto` exchange of a job, cached, or named by
    /// [`env::TRANSPORT`](crate::env::TRANSPORT)
    /// ([`Runtime::collective_links`](crate::Runtime::collective_links)); for an all-to-all,
    /// the algorithm measured fastest for its group and block.
    Auto,
}

impl Path {
    /// Every path, in the order reports list them.
    pub const ALL: [Path; 3] = [Path::OneSided, Path::Mpi, Path::Auto];

    /// The name on command lines and in benchmark ids: `onesided`, `mpi`, `auto`.
    pub fn name(self) -> &'static str {
        match self {
            Path::OneSided => "onesided",
            Path::Mpi => "mpi",
            Path::Auto => "auto",
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Path {
    type Err = Error;

    fn from_str(s: &str) -> Result<Path> {
        Path::ALL.into_iter().find(|p| p.name() == s.trim()).ok_or_else(|| {
            Error::InvalidArgument(format!("unknown path {s:?}: expected onesided, mpi or auto"))
        })
    }
}

/// The transport one link takes: what a [`Path`] resolves to for each partner, and what
/// [`Links`](crate::Links) name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// One-sided offset swap: receivers announce where, senders put straight into place.
    Put,
    /// One-sided pull: senders publish in a symmetric staging buffer, receivers get.
    Get,
    /// MPI two-sided.
    Mpi,
    /// MPI-3 one-sided: the put path's offset swap over an MPI window on the symmetric heap
    /// (`MPI_Put` of the data and of the signal words, `MPI_Win_flush`, passive target), for
    /// networks where MPI's one-sided transport is faster than OpenSHMEM's. Where MPI cannot
    /// create the window (Open MPI without a one-sided component that reaches every PE),
    /// building an exchange on it fails on every PE, and a calibration leaves it out.
    MpiRma,
    /// One-sided through a symmetric scratch buffer with post/consumed flags (the 2013 SHMEM
    /// port's first attempt): a benchmark baseline, with the `baselines` feature.
    #[cfg(feature = "baselines")]
    Buffered,
}

impl Transport {
    /// The transports a link may take, in the order reports list them (and their codes
    /// number them).
    pub const LINKS: [Transport; 4] = [Transport::Put, Transport::Get, Transport::Mpi, Transport::MpiRma];

    /// The name on command lines, in [`env::TRANSPORT`](crate::env::TRANSPORT) and in
    /// benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Put => "onesided-put",
            Transport::Get => "onesided-get",
            Transport::Mpi => "mpi",
            Transport::MpiRma => "mpi-rma",
            #[cfg(feature = "baselines")]
            Transport::Buffered => "buffered",
        }
    }

    /// The transport of `path`'s fixed choice (`None` for [`Path::Auto`], which the links
    /// decide).
    pub fn of(path: Path) -> Option<Transport> {
        match path {
            Path::OneSided => Some(Transport::Put),
            Path::Mpi => Some(Transport::Mpi),
            Path::Auto => None,
        }
    }

    /// Whether it is one of OpenSHMEM's.
    pub fn is_one_sided(self) -> bool {
        !matches!(self, Transport::Mpi | Transport::MpiRma)
    }

    /// Whether receivers announce where their messages go before the senders send (the
    /// offset swap: the put transport and the MPI one-sided one): there a sender checks the
    /// room and learns of a message too large itself, writes nothing where it would not fit,
    /// and [`Exchange::post_receives`](crate::Exchange::post_receives) takes the announcement
    /// off the call.
    pub fn announces(self) -> bool {
        matches!(self, Transport::Put | Transport::MpiRma)
    }

    /// Whether it needs [`Exchange::collective_reserve`](crate::Exchange::collective_reserve)
    /// before messages that are not offered in place are sent (it stages them).
    pub fn needs_reserve(self) -> bool {
        match self {
            Transport::Get => true,
            #[cfg(feature = "baselines")]
            Transport::Buffered => true,
            _ => false,
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Transport {
    type Err = Error;

    fn from_str(s: &str) -> Result<Transport> {
        match s.trim() {
            "onesided-put" | "put" => Ok(Transport::Put),
            "onesided-get" | "get" => Ok(Transport::Get),
            "mpi" => Ok(Transport::Mpi),
            "mpi-rma" | "rma" => Ok(Transport::MpiRma),
            #[cfg(feature = "baselines")]
            "buffered" => Ok(Transport::Buffered),
            other => Err(Error::InvalidArgument(format!(
                "unknown transport {other:?}: expected onesided-put, onesided-get, mpi or mpi-rma"
            ))),
        }
    }
}
